package metajob

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// BatchSeconds is about how much work a meta-job claims in one commit once
// it knows how long its cases take, while claims are cheap: short cases are
// claimed many at a time, so that the shared filesystem sees about one
// commit a second per meta-job, however short they are. When claims get
// expensive — others commit between two of its claims, or win the
// generation it wanted — the store asks for more at a time
// (casetable.Store.Ahead, when on), so that the farm's commits per second fall as its
// meta-jobs multiply.
const BatchSeconds = 1.0

// MaxBatch caps the cases claimed in one commit.
const MaxBatch = 8192

// batchSizer picks how many cases the next claim takes: what the store
// picks at first (casetable.FirstBatch: one case, up to 16 in a run with
// lanes; one when the job has a maximum, as in SIMPLE mode), one while no
// case has ended, then
// about ahead × BatchSeconds of the job's work by the pace at which its
// cases have ended so far — the time since the first started, less the
// time the job spent claiming, over the cases ended: what a case costs the
// job (its run, the records, the loops that run cases at once), and not
// what its claims cost, so that batches do not shrink as claims get slower
// — (at most doubling from one claim, or the first share, to the next),
// never more than fit in the job's remaining time.
type batchSizer struct {
	max      int // 0: MaxBatch
	k        int
	n        int              // cases observed
	first    time.Time        // when the first case observed started
	claiming time.Duration    // time spent in claims since then
	now      func() time.Time // the clock; time.Now if nil
}

func (b *batchSizer) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

func (b *batchSizer) observe(d time.Duration) {
	if b.n == 0 {
		b.first = b.clock().Add(-d)
	}
	b.n++
}

// claimed counts a claim that took d and handed out n cases: the next
// claim doubles from n at most.
func (b *batchSizer) claimed(d time.Duration, n int) {
	if b.n > 0 {
		b.claiming += d
	}
	b.k = max(b.k, n)
}

// next is the size of the next claim, for a job whose store asks for
// ahead batches' worth at a time.
func (b *batchSizer) next(rt *runtimeGuard, ahead int) int {
	lim := b.max
	if lim == 0 {
		lim = MaxBatch
	}
	if b.k == 0 && b.max == 0 {
		// The first claim: the store sizes it (casetable.FirstBatch: one
		// case, or in a run with lanes a fair first share of the lane).
		b.k = 1
		return casetable.FirstBatch
	}
	if b.k == 0 || b.n == 0 {
		// No case has ended yet (it is running, or none fitted): one at
		// a time; the doubling goes on from the first share, if larger.
		b.k = max(b.k, 1)
		return 1
	}
	mean := (b.clock().Sub(b.first) - b.claiming).Seconds() / float64(b.n)
	want := lim
	if mean > 0 {
		want = int(BatchSeconds * float64(max(ahead, 1)) / mean)
	}
	if end := rt.end.at(); !end.IsZero() && mean > 0 {
		// What fits before the end, less the cutoff margin.
		fit := int((time.Until(end).Seconds() - rt.cutoff) / mean)
		want = min(want, fit)
	}
	b.k = max(1, min(want, 2*b.k, lim))
	return b.k
}

// judge counts loop s's case, ended with code after d: the job's pace,
// its longest case (the runtime-aware exit), and fast-failure protection
// (first attempts only) — per loop in WHOLE_NODE mode (as META's loops
// each have theirs), else for the whole job, however many loops run its
// cases. It reports whether the loop must stop.
func (o *owner) judge(s *loop, code int, d time.Duration) bool {
	o.bs.observe(d)
	o.m.rt.observe(d)
	if s.retry > 0 {
		// Fast-failure protection judges the node by first attempts:
		// the retries of one bad case must not make a healthy node
		// look broken (a broken node fails the next cases too).
		return !o.m.wholeNode && o.ffTripped
	}
	if o.m.wholeNode {
		return s.ff.add(code, d)
	}
	if o.ff.add(code, d) {
		o.ffTripped = true
	}
	return o.ffTripped
}

// fastFailure detects a meta-job whose first max cases all failed quickly:
// a sign of a broken node, not of broken cases. Successes never count.
type fastFailure struct {
	max   int
	short time.Duration
	seen  int
	fails int
}

// add records one case and reports whether the meta-job should stop.
func (f *fastFailure) add(code int, d time.Duration) bool {
	if f.max <= 0 || f.seen >= f.max {
		return false
	}
	f.seen++
	if code != 0 && d < f.short {
		f.fails++
	}
	return f.seen == f.max && f.fails == f.max
}

// runtimeGuard is the runtime-aware exit: every case's duration is in the
// farm-wide record (the status files); once FirstCutoffAt cases have ended,
// dt_cutoff is the upper 12.5% quantile of the durations. Before each
// claim, a meta-job whose remaining wall time is below dt_cutoff exits
// instead of starting a case it would likely not finish.
//
// dt_cutoff lives in an advisory record, MISC/cutoff (status.Cutoff), not
// in the claim state. It is recomputed at most once per doubling of the
// cases claimed farm-wide, and only when they are at least twice the
// durations it was computed from: by the meta-job that wins that
// doubling's election in the run (an O_EXCL create of MISC/cutoff.R.K, K
// the doubling's number), which reads the status files and rewrites the
// record. A meta-job reads the record when its reading is cutoffReread
// old, when the cases claimed pass a doubling (a new record may be out),
// and, once its end is near (its time left under twice dt_cutoff and its
// longest case), when its reading is nearReread old. A reading that fails
// keeps the last one. A stale reading costs a slightly early or late exit;
// an election whose winner dies, a recomputation until the next doubling.
//
// The owner (owner.go) alone uses a job's guard, but for its end sources,
// which it never changes, and cutoffSeen.
type runtimeGuard struct {
	end     endSources
	misc    string        // the farm's MISC: the record, the elections
	rec     status.Cutoff // the record, as read last
	readAt  time.Time     // when
	readK   int           // the doubling of the cases claimed then (cutoffDue)
	tried   int           // the last election this job took part in
	cutoff  float64       // dt_cutoff, as read or computed last
	seen    atomic.Uint64 // cutoff's bits, for the rescuer (cutoffSeen)
	longest float64       // the longest case this job ran, in seconds
}

// FirstCutoffAt is the number of case durations dt_cutoff is first
// computed from.
const FirstCutoffAt = 8

// cutoffReread is how long a reading of dt_cutoff's record serves, and
// nearReread how long once the job's end is near.
const (
	cutoffReread = 30 * time.Second
	nearReread   = 5 * time.Second
)

// read reads the record if the last reading is older than serves; a
// reading that fails keeps the last one.
func (g *runtimeGuard) read(now time.Time, serves time.Duration) {
	if g.misc == "" || now.Sub(g.readAt) < serves {
		return
	}
	g.readAt = now
	if c, ok := status.ReadCutoff(filepath.Join(g.misc, layout.Cutoff)); ok {
		g.rec = c
		g.setCutoff(c.Seconds)
	}
}

// given takes rec, the record as farm submit read it (FARM_CUTOFF: its
// line, or "none"), as the job's first reading, made at now: no reading of
// the record on the way to the first case. A job freshly started has its
// whole time ahead, so a record older by its wait in the queue can only
// let it start a case that the record read afresh would have kept it from
// if dt_cutoff exceeds its whole time limit. "" or a line that does not
// read: the first claim reads the record.
func (g *runtimeGuard) given(rec string, now time.Time) {
	if rec == "none" {
		g.readAt = now
	} else if c, ok := status.ParseCutoff(rec); ok {
		g.rec, g.readAt = c, now
		g.setCutoff(c.Seconds)
	}
}

// setCutoff sets dt_cutoff, for the owner and for the rescuer.
func (g *runtimeGuard) setCutoff(s float64) {
	g.cutoff = s
	g.seen.Store(math.Float64bits(s))
}

// cutoffSeen is dt_cutoff as read or computed last, for the rescuer's
// goroutine (the owner reads cutoff).
func (g *runtimeGuard) cutoffSeen() time.Duration {
	return time.Duration(math.Float64frombits(g.seen.Load()) * float64(time.Second))
}

// shortOfTime reports whether the job's remaining time is below dt_cutoff
// (or its end has passed): it then claims nothing more. A job whose end is
// not known never is.
func (g *runtimeGuard) shortOfTime(now time.Time) bool {
	end := g.end.at()
	if end.IsZero() {
		return false
	}
	left := end.Sub(now)
	serves := cutoffReread
	if left.Seconds() < 2*max(g.cutoff, g.longest) {
		serves = nearReread
	}
	g.read(now, serves)
	return left <= 0 || left.Seconds() < g.cutoff
}

// observe notes a case of d that the job ran.
func (g *runtimeGuard) observe(d time.Duration) { g.longest = max(g.longest, d.Seconds()) }

// due says whether dt_cutoff is due for a recomputation after a claim that
// left claimed cases of run claimed, and the number of the election that
// decides who recomputes: the cases finished before the run (the record's
// durations, less what its run had claimed if it is this run) and those
// claimed in it, against twice the durations the record was computed
// from. A job that has run no case yet leaves it to those that have (the
// status files may record no duration yet).
func (g *runtimeGuard) due(run int, claimed int64) (int, bool) {
	if g.longest == 0 {
		return 0, false
	}
	k, est := g.estimate(run, claimed)
	if k > g.readK {
		// A doubling passed since the last reading: another meta-job
		// may have rewritten the record.
		g.read(time.Now(), 0)
		g.readK = k
		k, est = g.estimate(run, claimed)
	}
	if est < max(FirstCutoffAt, 2*g.rec.Durations) {
		return 0, false
	}
	return k, k != g.tried
}

// estimate is about how many cases were claimed farm-wide, as the record
// and claimed (cases claimed in run) tell, and the doubling it is in.
func (g *runtimeGuard) estimate(run int, claimed int64) (int, int64) {
	r := g.rec
	before := r.Durations
	if r.Run == run {
		before = max(r.Durations-r.Claimed, 0)
	}
	est := before + claimed
	return bits.Len64(uint64(est)), est
}

// recompute takes part in election k of run: the meta-job that makes
// MISC/cutoff.R.K (O_EXCL) computes dt_cutoff from every recorded duration
// (and the median of the succeeded cases', for CASE_TIME_LIMIT=Nx) and
// rewrites the record; the others go on with the one they read. With
// fewer than FirstCutoffAt durations recorded yet it writes nothing and
// gives the election up, for a meta-job that finds more.
func (g *runtimeGuard) recompute(k, run int, claimed int64, statusDir string, out io.Writer) {
	g.tried = k
	election := filepath.Join(g.misc, fmt.Sprintf("%s.%d.%d", layout.Cutoff, run, k))
	f, err := os.OpenFile(election, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return // another meta-job's, or a filesystem that refuses: the record stays
	}
	f.Close()
	d, ok, err := status.EndedDurations(statusDir, true)
	if err != nil || len(d) < FirstCutoffAt {
		os.Remove(election)
		return
	}
	c := status.Cutoff{Seconds: status.UpperQuantile(d, 0.125), Durations: int64(len(d)), Run: run, Claimed: claimed,
		Median: status.Median(ok), Succeeded: int64(len(ok))}
	status.WriteCutoff(filepath.Join(g.misc, layout.Cutoff), c)
	g.rec, g.readAt = c, time.Now()
	g.setCutoff(c.Seconds)
	fmt.Fprintf(out, "farm: dt_cutoff = %.3fs (upper 12.5%% quantile of %d case durations)\n", c.Seconds, len(d))
}

// left is the job's time left; 0 if its end is not known (or passed).
func (g *runtimeGuard) left() time.Duration {
	end := g.end.at()
	if end.IsZero() {
		return 0
	}
	return max(time.Until(end), time.Nanosecond)
}

// tooLate reports whether the job's remaining time is below dt_cutoff, as
// last read: the next case would likely not finish.
func (g *runtimeGuard) tooLate() bool {
	end := g.end.at()
	if end.IsZero() {
		return false
	}
	left := time.Until(end)
	return left <= 0 || left.Seconds() < g.cutoff
}
