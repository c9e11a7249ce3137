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
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// Metajob runs the meta-job loop inside a job: claim the next cases, run
// single_case.sh on each, record its start and end, and repeat until no
// case is left, the job's time is nearly up, or a stop signal comes.
type Metajob struct {
	Farm    *farm.Farm
	Backend backend.Backend
	Env     farm.JobEnv // the job's environment (ParseJobEnv)
	Out     io.Writer   // the job's output (OUTPUT/slurm-$JOBID.out); must be an *os.File

	self  backend.Self
	log   io.Writer // Out, retrying transient errors (fsretry.Writer); safe for the loops
	bash  string
	dir   *farmDir // the farm directory, open, for the loops' *at calls
	sw    *status.Writer
	swMu  sync.Mutex // the loops share sw
	loops []*loop
	stop  stopWatch
	out   *os.File // the job's output file itself, for the runners of programs

	// What the job packs its cases into (pack.go).
	pool       *pool
	wholeNode  bool
	jobSetsOMP bool // the job's environment sets OMP_NUM_THREADS: cases keep it

	wg        sync.WaitGroup // the loops
	ends      []loopEnd      // how each loop ended (under mu)
	grown     bool           // the loops beyond the first were started (under mu)
	ff        fastFailure    // the job's, outside WHOLE_NODE mode (under mu)
	ffTripped bool

	// Claiming is shared by the loops: mu guards the claim store, the
	// cases claimed and not started yet, and the counters of the claims.
	mu     sync.Mutex
	store  *casetable.Store
	queue  []tablefmt.Case
	batch  int // claims made: a loop refreshes its copy of single_case.sh at each
	rt     *runtimeGuard
	bs     batchSizer
	halted bool // a loop ended with an error: the others take no more cases

	retries     []pendingRetry // failed cases to run again (retry.go)
	retriesLeft int            // retries taken and not started: left, failed, for the next run
	tableDone   bool           // a claim found no case left: only retries remain
	// idleSince is when a claim found no case left, for WAIT_FOR_CASES
	// (wait.go); zero after a claim that found some.
	idleSince time.Time

	table      string           // the run's table (one per meta-job), set at its first claim
	tableLines map[string]int64 // the lines of each table its cases came from

	// The look at the run (look.go), under mu.
	news       runNews          // the last news of the run
	looked     time.Time        // the last look; zero before the first news
	superseded string           // why the run is no longer the current one; "" while it is
	silent     time.Duration    // how long the meta-job had had no news of it then
	left       int              // the cases it then held, not started
	clock      func() time.Time // nil: time.Now

	// Rescue within the run (rescue.go): nil when off. rescued are the
	// cases handed to the job by its rescues, run before its next claim.
	rescue  *rescuer
	rescued []rescuedCase
	// wardenSaid: the job said it stays as the run's warden (rescue.go).
	wardenSaid bool
	rescuedBy  string // the meta-job that rescued this one's cases, once found
}

// loop is one of the loops of a meta-job: one in the usual mode, NWHOLE in
// WHOLE_NODE mode, each running one case at a time with its own case
// runner, all claiming through the meta-job's one claim store.
type loop struct {
	k      int // from 1
	runner caseRunner
	ff     fastFailure
	batch  int // the claim whose cases it takes now
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
		line = m.supersededLine()
	case why == stopFastFailure:
		err = ErrFastFailure
	}
	if line != "" {
		key := why.String()
		if err != nil {
			key = "failed" // the table changed
		}
		fmt.Fprintln(m.log, line)
		m.sw.Quit(key, line)
	}
	return err
}
