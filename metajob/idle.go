package metajob

import (
	"context"
	mrand "math/rand/v2"
	"time"

	"github.com/farm-hpc/farm/lease"
)

// What an idle meta-job costs the filesystem (issue 39). A job that holds
// no case — it waits for the cases 'farm add' adds (WAIT_FOR_CASES), or
// stays as the run's warden — looks at nothing it need not, and the run's
// idle jobs together put a bounded load on the metadata server whatever
// their number:
//
//   - The probe (probe): a job waiting for added cases looks for news of
//     its run with one lookup of the main chain's next mark
//     (casetable.Store.Look), every LookEvery — or, in a run of many jobs,
//     as rarely as keeps the run's probes under lease.IdleBudget
//     operations a second in all (lease.IdleEvery: 25 s on average at
//     1,000 jobs, with jitter; the first of them to see added cases sees
//     them within 25 ms on average). The probe is not the lease's look: it
//     does not look for the job's rescue mark, and renews nothing, so the
//     job's next claim is preceded by a full look (look.go) and the
//     rescue's fence is as it was. (Nor could a rescue meet an idle job: a
//     job is idle only after a full look, before the claim that found no
//     case, and it holds nothing a rescuer would mark — no case claimed
//     and not started, none started and not ended.)
//   - The rescue check's election (rescue.go): each period, each job tries
//     for the check with the chance electors/N, not always.
//   - The warden's watch (warden.go): a listing of the quit marks, not a
//     reading of every running job's status file.
//
// N, the run's meta-jobs, is what the job's submission said, or the job
// records when a check last read them (runSize).

// electors is how many of a run's meta-jobs try, on average, for each
// period's rescue check (rescuer.elected). No job tries in a period with a
// chance of about e^-8 (0.03%): the check then waits a period more.
const electors = 8

// runSize is the number of the run's meta-jobs, as the farm's job records
// said when the rescue's check last read them; before that as the job's
// submission said (FARM_RUN_JOBS); else as the records say, read here
// once. At least 1.
func (m *Metajob) runSize() int {
	if n := m.jobsInRun.Load(); n > 0 {
		return int(n)
	}
	if n := m.Env.RunJobs; n > 0 {
		return n
	}
	n := max(m.Farm.MetaJobsOf(m.Env.Run), 1)
	m.jobsInRun.Store(int64(n))
	return n
}

// probe is the idle job's look for news of its run, if due (see above): it
// reports whether the main chain moved on — cases may have been added, or
// the run superseded: the caller claims again, after the full look — or
// the lookup failed (the claim's look then tries and says why). The first
// call only sets the cadence: the claim that found no case has just read
// the run.
func (o *owner) probe(ctx context.Context) bool {
	m := o.m
	now := m.now()
	due := !o.probeAt.IsZero() && !now.Before(o.probeAt)
	if !o.probeAt.IsZero() && !due {
		return false
	}
	o.probeAt = now.Add(lease.IdleEvery(m.lookEvery(), m.runSize(), 1, mrand.Uint64()))
	if !due {
		return false
	}
	_, moved, err := m.store.Look(ctx, false) // o.looked is not renewed
	return moved || err != nil
}

// probeDue is how long until the next probe, once the first has set it.
func (o *owner) probeDue() time.Duration { return o.probeAt.Sub(o.m.now()) }

// elected reports whether this job tries for this period's rescue check:
// always in a run of up to electors jobs, else with the chance electors/N.
func (r *rescuer) elected() bool {
	n := r.m.runSize()
	return n <= electors || mrand.IntN(n) < electors
}
