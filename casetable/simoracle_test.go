package casetable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/sim"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// simOracle is what the simulated processes of one schedule report to,
// and what checks the invariants as they do. Only one process runs at a
// time (package sim), so it needs no lock.
type simOracle struct {
	w  *sim.World
	sc scenario

	violation string

	runs     map[int]*simRun
	lastRun  int
	master   []int64                    // table.dat: every case of the farm
	nextID   int64                      // the next ID farm add gives
	maybe    map[int64]bool             // IDs an add may have queued (its commit undecided)
	done     map[int64]bool             // cases run to their end (what a resubmit leaves out)
	starts   map[string]int             // runs started, by the chain and generation they were decided on
	overtook map[int]time.Time          // per run, when a later one's start was seen committed
	closed   map[int]bool               // runs whose lanes a command may have closed (closeRun)
	ctxs     map[string]context.Context // the commands' contexts, by process name (interruptible)
	onRetry  map[string]func()          // what a command's retries do, by process name (interruptible)
	retrying map[string]bool            // the commands that said they retry, and not yet that the filesystem works again
	inStart  map[*sim.Proc]bool         // the resubmits in their StartRun (aimAtStart)
	cancels  []context.CancelFunc       // those no interrupt cancels
	claimers map[*sim.Proc]*simClaimer
	replaces map[*sim.Proc]bool // the repairs replacing the chain (RepairFrom's new chain): each closes every chain it lists
	restarts int
	starting int  // run starts under way (a resubmit's StartRun)
	damaged  bool // a claim-state file was damaged from outside

	notes     []*simNote // the claims the claimers noted before their commits (Opts.Note)
	undecided int        // cases of noted claims ClaimWon could not decide (rescueNotes)
	rescued   bool       // rescueNotes ran: atEnd counts missing cases against undecided

	hints map[int]string // each run's start hint (Store.Hint), from the start that won

	firstChainLost bool        // MISC/chain stayed empty (see commandFailed)
	commands       []*sim.Proc // the commands that race the meta-jobs
}

// simRun is what the oracle knows of one run.
type simRun struct {
	n       int
	ids     map[int64]bool   // its cases: its table's, and what farm add queued to it
	claimed map[int64]string // who claimed each case in it
	unseen  int              // cases that claims cut short (a crash, an error) may have claimed unseen
	closed  bool             // a repair closed it
	ended   bool             // a claimer that started after the faults found nothing left
	damaged bool             // its finisher met the damage
}

func newSimOracle(w *sim.World, sc scenario) *simOracle {
	return &simOracle{w: w, sc: sc, runs: map[int]*simRun{}, maybe: map[int64]bool{},
		done: map[int64]bool{}, starts: map[string]int{}, claimers: map[*sim.Proc]*simClaimer{}, closed: map[int]bool{}, replaces: map[*sim.Proc]bool{}, overtook: map[int]time.Time{},
		restarts: sc.restarts, ctxs: map[string]context.Context{}, onRetry: map[string]func(){}, retrying: map[string]bool{}, inStart: map[*sim.Proc]bool{},
		hints: map[int]string{}}
}

// violate records the first violation; the world is not stopped (its
// processes end as they would), but nothing more is checked.
func (o *simOracle) violate(format string, args ...any) {
	if o.violation == "" {
		o.violation = fmt.Sprintf("at %s: ", o.w.Now().Sub(sim.Epoch)) + fmt.Sprintf(format, args...)
	}
}

// setUp makes the farm before the world runs: its directories, table.dat
// and run 1's table (as farm submit copies it into MISC).
func (o *simOracle) setUp() {
	root := o.w.Root()
	for _, d := range []string{simDir, simMisc} {
		if err := vfs.Mkdir(root, d, 0o755); err != nil {
			panic(err)
		}
	}
	for i := 1; i <= o.sc.cases; i++ {
		o.master = append(o.master, int64(i))
	}
	o.nextID = int64(o.sc.cases) + 1
	for _, name := range []string{"table.dat", "MISC/table.run1"} {
		if err := vfs.WriteAtomic(root, simTablePath(name), 0o644, simTable(o.master)); err != nil {
			panic(err)
		}
	}
}

// submit is farm submit: run 1, its meta-jobs, and the commands that race
// them.
func (o *simOracle) submit(p *sim.Proc) {
	s := o.commandStore(p, p.Name())
	defer s.Close()
	spec := RunSpec{Base: -1, Run: 1, Table: "MISC/table.run1", Cases: int64(len(o.master)), MaxID: int64(len(o.master)), Jobs: o.sc.jobs}
	err := s.StartRun(o.ctx(p), spec)
	if err != nil {
		o.commandFailed(p.Name(), err)
		if transientOrGaveUp(err) && !strings.HasSuffix(p.Name(), "+") {
			// Its user runs it again, a while later (farm said it
			// retried for how long, or the user interrupted it).
			name := p.Name() + "+"
			o.interruptible(name)
			o.sc.aimed(o.w.Go(name, func(p *sim.Proc) {
				p.FS().Sleep(context.Background(), time.Duration(p.FS().Rand()%uint64(time.Minute)))
				o.submit(p)
			}))
		}
		return
	}
	o.hints[spec.Run] = s.Hint()
	o.started(spec, o.master, s.chainDir())
	for i := range o.sc.adds {
		o.command("add"+strconv.Itoa(i+1), o.add)
	}
	for i := range o.sc.resubmits {
		o.command("resubmit"+strconv.Itoa(i+1), o.resubmit).Slow(o.sc.slow)
	}
	for i := range o.sc.repairs {
		o.command("repair"+strings.Repeat("'", i), o.repair)
	}
	if o.sc.damage {
		o.command("damage", o.damage).NoCrash()
	}
	o.w.Go("reader", o.reader).NoCrash()
}

// command starts a command that races the run's meta-jobs; the runs'
// finishers wait until every one has ended.
func (o *simOracle) command(name string, fn func(p *sim.Proc)) *sim.Proc {
	o.interruptible(name)
	p := o.sc.aimed(o.w.Go(name, fn))
	o.commands = append(o.commands, p)
	return p
}

// interruptible makes the context of the command name, and, in a scenario
// with interrupts, three times in four, a process that cancels it (a
// user's Ctrl-C): at a moment drawn from the seed, or, one time in two,
// once the command has said it retries.
func (o *simOracle) interruptible(name string) {
	ctx, cancel := context.WithCancel(context.Background())
	o.ctxs[name] = ctx
	if !o.sc.interrupts {
		o.cancels = append(o.cancels, cancel) // called at the end
		return
	}
	o.w.Go("^C "+name, func(p *sim.Proc) {
		fsys := p.FS()
		switch fsys.Rand() % 4 {
		case 0:
			o.cancels = append(o.cancels, cancel)
		case 1:
			fsys.Sleep(context.Background(), time.Duration(fsys.Rand()%uint64(o.sc.startAfter+30*time.Second)))
			cancel()
		default:
			// The command says it retries (commandStore); the user
			// sees the filesystem work again and, if the command
			// still says nothing more, gives up waiting a few
			// seconds later: maybe while it sleeps before its
			// next try.
			o.cancels = append(o.cancels, cancel) // if it never retries
			o.onRetry[name] = func() {
				o.w.Go("^C' "+name, func(p *sim.Proc) {
					fsys := p.FS()
					wait := max(o.w.OutageEnd().Sub(fsys.Now()), 0)
					fsys.Sleep(context.Background(), wait+time.Duration(fsys.Rand()%uint64(5*time.Second)))
					if o.retrying[name] {
						cancel()
					}
				}).NoCrash()
			}
		}
	}).NoCrash()
}

// commandStore is newSimStore for the command p, named job: the first
// message of its retries is what its user sees before a Ctrl-C
// (interruptible).
func (o *simOracle) commandStore(p *sim.Proc, job string) *Store {
	s := newSimStore(p.FS(), job, o.sc.retry)
	s.Log = retryNotice{o: o, name: p.Name()}
	return s
}

// retryNotice is the log of the command name: it notes whether the
// command says it retries, and calls o.onRetry[name] each time it starts
// to.
type retryNotice struct {
	o    *simOracle
	name string
}

func (n retryNotice) Write(b []byte) (int, error) {
	switch {
	case bytes.Contains(b, []byte("retrying")):
		n.o.retrying[n.name] = true
		if f := n.o.onRetry[n.name]; f != nil {
			f()
		}
	case bytes.Contains(b, []byte("works again")):
		n.o.retrying[n.name] = false
	}
	return len(b), nil
}

// ctx is the context of the process p: its command's, or none.
func (o *simOracle) ctx(p *sim.Proc) context.Context {
	if ctx := o.ctxs[p.Name()]; ctx != nil {
		return ctx
	}
	return context.Background()
}

// commandsRunning reports whether a command that races the meta-jobs has
// not ended yet (returned or crashed).
func (o *simOracle) commandsRunning() bool {
	for _, p := range o.commands {
		if !p.Done() {
			return true
		}
	}
	return false
}

// commandFailed checks the error a command (submit, resubmit, add,
// repair) ended with: a transient one it gave up on, or the damage done
// from outside, is what a user would be told; anything else is not.
func (o *simOracle) commandFailed(who string, err error) {
	switch {
	case transientOrGaveUp(err), errors.Is(err, ErrMoved):
		// A command that fails on a passing fault is run again by its
		// user (farm says it retried and for how long).
	case isDamage(err) && (o.damaged || o.sc.repair):
	case isDamage(err) && o.lastRun == 0 && strings.Contains(err.Error(), `MISC/chain is damaged (unreadable content "")`):
		// The first submit's O_EXCL create of MISC/chain answered
		// EEXIST, its reply lost: nobody writes it. Reported as damage,
		// which farm repair mends (SIMULATION.md, "What it found").
		o.firstChainLost = true
	case isDamage(err):
		o.violate("%s: the claim state reads as damaged, but nothing damaged it: %v", who, err)
	default:
		var rr *RepairRaceError
		if !errors.As(err, &rr) {
			o.violate("%s failed: %v", who, err)
		}
	}
}

// started records that spec's run started, over the cases ids, on the
// chain in chain (a repair starts another, whose generations count from 0
// again), and starts its meta-jobs: the scenario's claimers, and a
// finisher that starts once the faults are over and claims whatever is
// left.
func (o *simOracle) started(spec RunSpec, ids []int64, chain string) {
	if o.runs[spec.Run] != nil {
		o.violate("run %d started twice (one run at a time)", spec.Run)
		return
	}
	from := fmt.Sprintf("%s@%d", chain, spec.Base)
	if o.starts[from]++; spec.Base >= 0 && o.starts[from] > 1 {
		o.violate("two runs started from generation %d of %s (one run at a time)", spec.Base, chain)
		return
	}
	r := &simRun{n: spec.Run, ids: map[int64]bool{}, claimed: map[int64]string{}, closed: o.closed[spec.Run]}
	for _, id := range ids {
		r.ids[id] = true
	}
	o.runs[spec.Run] = r
	o.lastRun = max(o.lastRun, spec.Run)
	for n := 1; n < spec.Run; n++ {
		if _, ok := o.overtook[n]; !ok {
			o.overtook[n] = o.w.Now()
		}
	}
	for i := range o.sc.claimers {
		o.startClaimer(spec.Run, fmt.Sprintf("job%d.%d", spec.Run, i+1), false)
	}
	o.startClaimer(spec.Run, fmt.Sprintf("job%d.finisher", spec.Run), true)
}

// closeRun records that run's lanes may be closed from now on, by a
// command whose commit may not follow: the run is not held to end with
// every case claimed.
func (o *simOracle) closeRun(run int) {
	o.closed[run] = true
	if r := o.runs[run]; r != nil {
		r.closed = true
	}
}

// closeRuns records that every run started so far may be closed (closeRun).
func (o *simOracle) closeRuns() {
	for r := 1; r <= o.lastRun; r++ {
		o.closeRun(r)
	}
}

// crashed is the world's OnCrash: a claimer's claim under way may have
// committed unseen; the batch system may start it again.
func (o *simOracle) crashed(p *sim.Proc) {
	if o.replaces[p] {
		o.closeRuns() // the chains it closed before it died
	}
	c := o.claimers[p]
	if c == nil {
		return
	}
	o.runs[c.run].unseen += c.inClaim
	if o.restarts > 0 {
		o.restarts--
		o.startClaimer(c.run, c.name+"'", false)
	}
}

// claimedBy records the cases a claimer of run was handed by a claim begun
// at begun, and checks that each is one of the run's and was not handed out
// in it before, and that the claim did not begin after a later run started.
func (o *simOracle) claimedBy(run int, who string, cases []tablefmt.Case, begun time.Time) {
	if t, ok := o.overtook[run]; ok && begun.After(t) && len(cases) > 0 {
		o.violate("%s was handed %d cases of run %d by a claim begun after run %d started (one run at a time)", who, len(cases), run, run+1)
	}
	r := o.runs[run]
	for _, c := range cases {
		if !r.ids[c.ID] && !o.maybe[c.ID] {
			o.violate("%s was handed case %d in run %d, which is not one of the run's cases", who, c.ID, run)
		}
		if by, ok := r.claimed[c.ID]; ok {
			o.violate("case %d claimed twice in run %d: by %s and by %s (no case claimed twice in a run)", c.ID, run, by, who)
		}
		r.claimed[c.ID] = who
	}
}

// atEnd checks, once every process has ended, that the last run, if its
// finisher ran after the faults, had every case claimed but those that
// claims cut short by a crash or an error may have taken unseen. (A run
// that a later one replaced leaves its cases not done to that one's table:
// farm resubmit's, not the claim core's.)
func (o *simOracle) atEnd() {
	for n := o.lastRun; n == o.lastRun; n++ {
		r := o.runs[n]
		if r == nil || !r.ended || r.closed {
			continue
		}
		var missing []int64
		for id := range r.ids {
			if _, ok := r.claimed[id]; !ok {
				missing = append(missing, id)
			}
		}
		if len(missing) > r.unseen || o.rescued && len(missing) > o.undecided {
			slices.Sort(missing)
			if !o.rescued {
				o.violate("run %d ended with %d of its cases never claimed (%v), and claims cut short may have taken at most %d (every case claimed once a run)",
					n, len(missing), missing[:min(len(missing), 12)], r.unseen)
			} else {
				o.violate("run %d ended with %d of its cases never claimed (%v) once the claims noted were decided, and those undecided held %d (every claim noted before its commit)",
					n, len(missing), missing[:min(len(missing), 12)], o.undecided)
			}
			return
		}
	}
}

// damage damages the claim state from outside (a user's rm, a stray
// process): MISC/chain overwritten with what no farm wrote.
func (o *simOracle) damage(p *sim.Proc) {
	fsys := p.FS()
	fsys.Sleep(context.Background(), time.Duration(fsys.Rand()%uint64(o.sc.startAfter)))
	o.damaged = true // from the open's effect on, which may come before its reply
	fd, err := fsys.Openat(unix.AT_FDCWD, simMisc+"/chain", unix.O_WRONLY|unix.O_TRUNC, 0)
	if err != nil {
		return
	}
	fsys.Write(fd, []byte("not a chain\n"))
	fsys.Close(fd)
}
