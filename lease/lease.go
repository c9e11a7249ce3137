// Package lease is a meta-job's lease on its run and the rescue's fence
// (metajob/look.go says why, metajob/rescue.go how a rescue goes): when a
// look is due, the rescue marks (made, looked up, taken back) and how long
// a rescuer waits after its mark before it reads what the dead job
// started. It is over a vfs.FS, so that the simulator (casetable's
// simlease_test.go) runs the code that metajob runs.
package lease

import "time"

// Margin is added to the lease's cadence in the rescuer's wait, for the
// time between a look and the start record's write.
const Margin = 5 * time.Second

// Mutant names a past or possible defect of the lease that the
// simulator's tests reintroduce (SIMULATION.md, the catalogue): "" in
// every run but theirs.
var Mutant string

// mutated reports whether the defect name is reintroduced.
func mutated(name string) bool { return Mutant != "" && Mutant == name }

// Gap is how long it has been, at now, since t: the longer of the wall
// clock's and the monotonic clock's measures. A frozen VM, or a suspended
// host, pauses the monotonic clock (restic's lock refresh measures by the
// wall clock for this reason); a wall clock set back must not hide a
// SIGSTOP that the monotonic clock saw.
func Gap(now, t time.Time) time.Duration {
	return max(now.Sub(t), now.Round(0).Sub(t.Round(0)))
}

// Moment is where a meta-job looks under its lease.
type Moment int

const (
	// Before a claim, before a case starts, while the job waits.
	Before Moment = iota
	// AfterRecord: once a case's start record is written, before it runs,
	// so that a job frozen between its last look and the record does not
	// run a case a rescuer took (it records it interrupted).
	AfterRecord
)

// Due is how long until the look at moment at is due, at now, for a job
// that looks every every and last looked at looked (zero: it has had no
// news of its run yet, and its first claim reads it); 0 or less: now.
func Due(now, looked time.Time, every time.Duration, at Moment) time.Duration {
	if looked.IsZero() {
		return every
	}
	if at == AfterRecord && mutated("no-look-after-start-record") {
		return every // only the look before the start counts
	}
	return every - Gap(now, looked)
}

// Fence is how long a rescuer waits between its mark and its reading of
// the dead job's file, when jobs look every every: longer than any job
// goes between a look that saw no mark and a start record it writes
// before it runs the case.
func Fence(every time.Duration) time.Duration {
	if mutated("fence-without-wait") {
		return 0 // the rescuer reads right after its mark
	}
	return every + Margin
}

// Fenced reports whether, at now, the fence of a mark made at marked has
// passed.
func Fenced(now, marked time.Time, every time.Duration) bool {
	return Gap(now, marked) > Fence(every)
}

// IdleBudget is the metadata operations a second that a run's idle
// meta-jobs' probes cost in all, whatever their number.
const IdleBudget = 20

// IdleEvery is how long an idle meta-job of a run of jobs meta-jobs waits
// between its probes, each costing calls operations: every, or longer
// when the run's jobs would otherwise probe more than IdleBudget
// operations a second in all — then from half to one and a half times
// that, by draw (a random number: jitter, so that jobs that went idle
// together do not probe together).
func IdleEvery(every time.Duration, jobs, calls int, draw uint64) time.Duration {
	spread := time.Duration(jobs*calls) * time.Second / IdleBudget
	if spread <= every {
		return every
	}
	return spread/2 + time.Duration(draw%uint64(spread))
}
