// Package metajob is the meta-job loop that runs inside each job of a farm:
// claim the next cases (casetable), run single_case.sh on each in a bash
// worker it keeps (caserun.go), record each case's start and end (status),
// until no case is left, the job's time is nearly up (the runtime-aware
// exit), its first cases all fail fast, or a stop signal comes.
package metajob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/status"
)

// Metajob runs the meta-job loop inside a job: claim the next cases, run
// single_case.sh on each, record its start and end, and repeat until no
// case is left, the job's time is nearly up, or a stop signal comes.
//
// What its loops share of the work — the cases claimed, the retries, the
// rescued cases, the waits, the lease on the run, the judges of the
// cases' ends — is its owner's (owner.go): one goroutine, which alone
// touches it. The fields below are set before the loops start, or are
// safe for them all (the status file under swMu, the log, the pool, the
// stop watch), or are the owner's to use while it runs (store, rt,
// loops).
type Metajob struct {
	Farm    *farm.Farm
	Backend backend.Backend
	Env     farm.JobEnv // the job's environment (ParseJobEnv)
	Out     io.Writer   // the job's output (OUTPUT/slurm-$JOBID.out); must be an *os.File
	// Bin is the farm executable, which ends each case of the bash worker
	// to say its peak memory (farm __case-end, caseuse.go); "": not known.
	Bin string

	self backend.Self
	log  io.Writer // Out, retrying transient errors (fsretry.Writer); safe for the loops
	bash string
	dir  *farmDir // the farm directory, open, for the loops' *at calls
	sw   *status.Writer
	swMu sync.Mutex // the loops, the owner and the rescuer share sw
	stop stopWatch
	out  *os.File // the job's output file itself, for the runners of programs

	// What the job packs its cases into (pack.go).
	pool       *pool
	wholeNode  bool
	jobSetsOMP bool // the job's environment sets OMP_NUM_THREADS: cases keep it

	loops []*loop                // opened by open; the owner starts them, and grows them (growLoops)
	wg    sync.WaitGroup         // the loops running
	own   *owner                 // the owner of the loops' work, from runLoops on
	store *casetable.Store       // the claim store: the owner's
	rt    *runtimeGuard          // the runtime-aware exit: the owner's (but its end, and cutoffSeen)
	table atomic.Pointer[string] // the run's table (one per meta-job), set by the owner at its first claim
	clock func() time.Time       // nil: time.Now

	// Rescue within the run (rescue.go): nil when off.
	rescue *rescuer
	// jobsInRun is the run's meta-jobs as the job records last said
	// (runSize, idle.go); 0: not read yet.
	jobsInRun atomic.Int64

	graces graces // the SIGKILLs due to timed-out cases (timelimit.go)
}

// runTable is the run's table, once the job claimed in it; "" before.
func (m *Metajob) runTable() string {
	if t := m.table.Load(); t != nil {
		return *t
	}
	return ""
}

// loop is one of the loops of a meta-job: one in the usual mode, NWHOLE in
// WHOLE_NODE mode, each running one case at a time with its own case
// runner, all claiming through the meta-job's one claim store.
type loop struct {
	k      int // from 1
	runner caseRunner
	frames *caseFrames // OUTPUT=job: the files of its cases' output (caseout.go); nil: none
	ff     fastFailure
	batch  int // the claim whose cases it takes now
	// copied: its runner's copy of single_case.sh was made since it took
	// a case (newLoop): its first batch does not look at the file again.
	copied bool
	retry  int // which retry its case is (0: its first attempt in the run)
	// why and from: its case is rescued from a dead job (rescue.go).
	why, from string
	// hostsFor is what its hostfiles hold now (loop.hostfiles).
	hostsFor    string
	hostsFailed bool
}

// Run runs the loop. It returns nil at a normal end.
func (m *Metajob) Run(ctx context.Context) error {
	// From the start: a stop signal must not kill the meta-job before it
	// has recorded anything.
	m.stop.watch()
	defer m.stop.end()
	defer m.close()
	if err := m.open(ctx); err != nil {
		return err
	}
	f, again := m.Farm, ""
	if m.self.Restart > 0 {
		again = fmt.Sprintf(", restarted by the batch system (restart %d)", m.self.Restart)
	}
	fmt.Fprintf(m.log, "farm: meta-job %s (run %d%s) on %s starting at %s\n", m.self.ID, m.Env.Run, again, f.Host, time.Now().Format(time.RFC3339))
	return m.runLoops(ctx)
}

// quit ends the meta-job, for why or with err: its last line goes to the
// job's output and its status file (a table changed says so; another error
// is Run's to say); it returns what Run returns.
func (m *Metajob) quit(why stop, err error) error {
	line := why.line()
	var changed *casetable.TableChangedError
	switch {
	case errors.As(err, &changed):
		line = "farm: " + changed.Error()
	case err != nil:
		line = ""
	case why == stopSuperseded:
		line = m.own.supersededLine() // the owner has ended
	case why == stopFastFailure:
		err = ErrFastFailure
	}
	if line != "" {
		key := why.String()
		if changed != nil {
			key = "failed"
		}
		fmt.Fprintln(m.log, line)
		if m.sw.Quit(key, line) == nil && m.rescue != nil {
			m.rescue.quitMark() // for the warden's watch (warden.go)
		}
	}
	return err
}
