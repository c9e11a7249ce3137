package sim

import (
	"fmt"
	"math"
	"time"
)

// Faults are how often a run's faults happen. Each is a probability per
// chance: per scheduling point for what befalls a process, per call for
// what befalls a call. The model says which apply (Local: only Crash and
// Freeze) and what they answer.
type Faults struct {
	// Crash: at each scheduling point — a process's turn, and the moment
	// between a call's effect and its reply — the process dies there
	// (kill -9, a node's power cut): it unwinds without another effect
	// and World's OnCrash hook is called. Not for processes marked
	// NoCrash.
	Crash float64
	// Freeze: at each scheduling point — a process's turn, and the moment
	// between a call's effect and its reply — the process stalls there
	// (SIGSTOP, a frozen VM) for a virtual time drawn log-uniformly from
	// 1 ms to FreezeMax, while the others run.
	Freeze float64
	// FreezeMax is the longest freeze; 0: 5 minutes (longer than the
	// protocol's 20–30 s fences).
	FreezeMax time.Duration
	// LostReply: per call that changes something, its reply is lost after
	// it took effect (Model.LostReply says what it answers). Not for an
	// NFS client's writes, which it holds until a close or fsync.
	LostReply float64
	// Transient: per call, it fails without effect (Model.Transient).
	Transient float64
	// Outage: per step, an outage window (Model.Outage) begins, lasting
	// from 100 ms to OutageMax (log-uniform).
	Outage float64
	// OutageMax is the longest outage; 0: 10 s.
	OutageMax time.Duration
	// OutageAtFault: per lost reply or transient error outside an
	// outage, the probability that it is the first failure of an outage
	// window that begins there (a reply lost because the server or the
	// link went away, so that the calls that would look up the outcome
	// fail too: a soft mount's timeouts come in runs). Aims outages at the
	// moments after a call's effect, which per-step outages reach rarely.
	OutageAtFault float64
	// Until is the virtual time (since Epoch) after which no fault
	// happens, so that a test can check that everything ends; 0: faults go
	// on for ever. Freezes under way at Until end as drawn; outages,
	// link races and split-brains stop.
	Until time.Duration
}

// Options are a Run's faults and limits.
type Options struct {
	Faults Faults
	// MaxSteps is the most steps (a process's turn) the world may take in
	// all; 0: 10,000,000. Reaching it is an error (ErrLimit).
	MaxSteps int64
	// MaxTime is the latest virtual time (since Epoch) the world may reach;
	// 0: 30 days. Reaching it is an error (ErrLimit).
	MaxTime time.Duration
	// TraceLast, if above 0, keeps only about the last TraceLast events of
	// the trace (between TraceLast and twice that), to bound memory.
	TraceLast int
}

// Stats count what a world did.
type Stats struct {
	Steps   int64         // turns given to processes
	Calls   int64         // FS calls made (Sleep is not one)
	Elapsed time.Duration // virtual time since Epoch

	Crashes     int64 // processes crashed by Faults.Crash
	Freezes     int64 // freezes begun
	LostReplies int64 // calls whose reply was lost after their effect
	Transients  int64 // calls failed without effect by Faults.Transient
	Outages     int64 // outage windows begun
	OutageFails int64 // calls failed by an outage (brick down, disk full)
	LinkRaces   int64 // links onto an existing name that succeeded (GlusterDHT)
	SplitBrains int64 // names made split-brain (Model.SplitBrain)
	Stale       int64 // answers from a client's cache that the server no longer gives
	LostWrites  int64 // unflushed writes lost with their crashed process (NFS)
}

// String is s on one line.
func (s Stats) String() string {
	return fmt.Sprintf("steps=%d calls=%d elapsed=%s crashes=%d freezes=%d lost=%d transient=%d outages=%d outage-fails=%d link-races=%d split-brains=%d stale=%d lost-writes=%d",
		s.Steps, s.Calls, s.Elapsed, s.Crashes, s.Freezes, s.LostReplies, s.Transients,
		s.Outages, s.OutageFails, s.LinkRaces, s.SplitBrains, s.Stale, s.LostWrites)
}

// faulting says whether faults may happen now.
func (w *World) faulting() bool {
	return w.faults.Until == 0 || w.now < w.faults.Until
}

// roll is true with probability p.
func (w *World) roll(p float64) bool {
	return p > 0 && w.rng.Float64() < p
}

// logUniform draws a duration from lo to hi, log-uniformly: as likely
// between 1 and 10 ms as between 1 and 10 s.
func (w *World) logUniform(lo, hi time.Duration) time.Duration {
	if hi <= lo || lo <= 0 {
		return max(lo, hi)
	}
	r := math.Log(float64(hi) / float64(lo))
	return time.Duration(float64(lo) * math.Exp(w.rng.Float64()*r))
}

// upTo draws a duration from (0, d].
func (w *World) upTo(d time.Duration) time.Duration {
	return time.Duration(w.rng.Int64N(int64(d))) + 1
}
