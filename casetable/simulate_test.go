package casetable

// The claim protocol in the simulator (package sim; SIMULATION.md): the
// real Store — claims with batches, lanes and the sizer, StartRun,
// Enqueue, Inspect and RepairFrom, Read — run by simulated processes over
// a simulated filesystem, one at a time, chosen by a seeded scheduler, on
// a virtual clock, with the faults the seed draws. Each schedule is one
// seed: its scenario (how many cases, claimers, lanes, which commands race
// them, which faults and how often: a swarm, each seed its own mix) and
// its every choice come from it, so a failing seed replays exactly:
//
//	make sim SIM_SEED=N [SIM_MODEL=nfs] [SIM_MUTANT=name]
//	go test -run '^TestSimulation$' ./casetable/ -args -sim.seed=N ...
//
// The invariants (CLAIMS.md's, as the simulator sees them) are checked as
// the processes act and at the end of each schedule (simOracle).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/lease"
	"github.com/farm-hpc/farm/sim"
	"github.com/farm-hpc/farm/vfs"
)

var (
	simSeed       = flag.Uint64("sim.seed", 0, "the simulator's first seed (0: SIM_SEED, else a fixed one)")
	simSchedules  = flag.Int("sim.schedules", 0, "schedules to run (0: SIM_SCHEDULES, else the make-test budget)")
	simModel      = flag.String("sim.model", "", "the filesystem model: local, nfs, nfs-soft, gluster, gluster-dht, full (\"\": SIM_MODEL, else all in turn)")
	simMutantFlag = flag.String("sim.mutant", "", "a past defect to reintroduce (\"\": SIM_MUTANT)")
	simVerbose    = flag.Bool("sim.v", false, "say every schedule's scenario and outcome")
)

// simModels are the filesystem models, by name.
var simModels = []struct {
	name string
	make func() sim.Model
}{
	{"local", sim.Local},
	{"nfs", sim.NFS},
	{"nfs-soft", sim.NFSSoft},
	{"gluster", slotSplitBrain(sim.GlusterReplica)},
	{"gluster-dht", slotSplitBrain(sim.GlusterDHT)},
	{"full", sim.Full},
}

// slotSplitBrain is model with split-brain slots: a slot (s.N) made in
// the half second after a brick came back answers EIO to every later
// lookup, half the time (a GFID split-brain, CLAIMS-APPENDIX.md). The protocol
// reads a slot only to take it, so it must go past one (c475768). A
// split-brain mark or content stops a chain until an administrator heals
// it, on a real volume as here: the simulator makes none.
func slotSplitBrain(model func() sim.Model) func() sim.Model {
	return func() sim.Model {
		m := model()
		m.SplitBrain, m.SplitBrainNames = 0.5, "s.*"
		return m
	}
}

// simBudget is how many schedules make test runs (TestSimulation).
const simBudget = 30000

// envOr returns the flag's value if set (not "" or "0"), else the
// environment variable's.
func envOr(flagVal, env string) string {
	if flagVal != "" && flagVal != "0" {
		return flagVal
	}
	return os.Getenv(env)
}

// simSettings are a run of schedules: seeds first, first+1, ...
type simSettings struct {
	first     uint64
	schedules int
	models    []int // indexes in simModels, taken in turn
	mutant    string
}

func readSimSettings(t testing.TB) simSettings {
	s := simSettings{first: 1, schedules: simBudget}
	if v := envOr(strconv.FormatUint(*simSeed, 10), "SIM_SEED"); v != "" && v != "0" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: not a number", v)
		}
		s.first, s.schedules = n, 1
	}
	if v := envOr(strconv.Itoa(*simSchedules), "SIM_SCHEDULES"); v != "" && v != "0" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SIM_SCHEDULES=%q: not a positive number", v)
		}
		s.schedules = n
	}
	name := envOr(*simModel, "SIM_MODEL")
	for i, m := range simModels {
		if name == "" || name == m.name {
			s.models = append(s.models, i)
		}
	}
	if len(s.models) == 0 {
		t.Fatalf("SIM_MODEL=%q: no such model (local, nfs, nfs-soft, gluster, gluster-dht, full)", name)
	}
	s.mutant = envOr(*simMutantFlag, "SIM_MUTANT")
	for _, name := range strings.Split(s.mutant, ",") {
		if s.mutant != "" && !knownMutant(name) {
			t.Fatalf("SIM_MUTANT=%q: no mutant %q (see simMutants in casetable/simmutants_test.go)", s.mutant, name)
		}
	}
	return s
}

// modelOf is the model seed runs on: the one given, or every model in
// turn (seed modulo their number).
func (s simSettings) modelOf(seed uint64) int { return s.models[seed%uint64(len(s.models))] }

// TestSimulation runs the schedules of readSimSettings (make test: 30,000
// seeds over the six models) and fails on the first violation, with
// the seed that replays it, the command that does and the trace.
func TestSimulation(t *testing.T) {
	set := readSimSettings(t)
	if strings.Contains(set.mutant, ",") {
		t.Fatalf("SIM_MUTANT=%q: one mutant at a time here (a list is for make sim-mutants)", set.mutant)
	}
	if set.mutant != "" {
		mutant = set.mutant
		defer func() { mutant = "" }()
	}
	start := time.Now()
	var steps, violations int64
	ran := 0
	for i := 0; i < set.schedules; i++ {
		ran++
		seed := set.first + uint64(i)
		r := runSchedule(seed, set.modelOf(seed), set.schedules == 1)
		steps += r.stats.Steps
		if *simVerbose {
			t.Logf("seed %d: %s; %s", seed, r.scenario, r.stats)
		}
		if r.violation != "" {
			violations++
			t.Errorf("%s", r.report(seed, set))
			break
		}
	}
	el := time.Since(start)
	fmt.Printf("sim: %d schedules, %d violations, %.0f schedules/s (%d steps, %s)\n",
		ran, violations, float64(ran)/el.Seconds(), steps, el.Round(time.Millisecond))
}

// report says what a schedule that found a violation found, and how to
// replay it.
func (r scheduleResult) report(seed uint64, set simSettings) string {
	model := simModels[set.modelOf(seed)].name
	mut := ""
	if set.mutant != "" {
		mut = " SIM_MUTANT=" + set.mutant
	}
	return fmt.Sprintf("seed %d, model %s: %s\n  scenario: %s\n  stats: %s\n  replay (with the whole trace): make sim SIM_SEED=%d SIM_MODEL=%s%s\n  the trace's last calls:\n%s",
		seed, model, r.violation, r.scenario, r.stats, seed, model, mut, r.trace)
}

// scheduleResult is what one schedule found.
type scheduleResult struct {
	scenario  string
	violation string // "" if none
	stats     sim.Stats
	trace     string
}

// simDir and simMisc are the farm's directories in the simulated world.
const (
	simDir  = "/farm"
	simMisc = "/farm/MISC"
)

// newSimStore is a Store of the simulated process p, named job, that
// retries transient errors for retry (farm's: 5 minutes; the scenarios'
// less, so that an outage makes processes give up, and a failed claim's
// store claim again).
func newSimStore(fsys vfs.FS, job string, retry time.Duration) *Store {
	s := NewStoreOn(fsys, simDir, simMisc)
	s.Job, s.Retry, s.Log = job, retry, io.Discard
	return s
}

// runSchedule runs seed's schedule on the model m (an index in simModels).
func runSchedule(seed uint64, m int, keepTrace bool) scheduleResult {
	sc := drawScenario(seed)
	if simModels[m].name == "nfs-soft" && sc.faults.Outage > 0 {
		// A soft mount's outages are what fail calls for longer than
		// a process retries (a commit given up undecided): more of them.
		sc.faults.Outage *= 5
	}
	defer func(old time.Duration) { voidAfter = old }(voidAfter)
	voidAfter = sc.voidAfter
	lease.Mutant = mutant // the lease's defects (package lease), for the lease's actors
	defer func() { lease.Mutant = "" }()
	w := sim.New(seed, simModels[m].make())
	o := newSimOracle(w, sc)
	o.setUp()
	w.OnCrash(o.crashed)
	defer func(h func(string, string)) { testHook = h }(testHook)
	testHook = o.hook
	o.interruptible("submit")
	sc.aimed(w.Go("submit", o.submit))
	if sc.submits > 1 {
		o.interruptible("submit2")
		sc.aimed(w.Go("submit2", o.submit)) // a user's second submit, or a double click
	}
	last := 200
	if keepTrace {
		last = 0 // the whole trace, for a replay
	}
	err := w.Run(sim.Options{Faults: sc.faults, MaxSteps: 2_000_000, MaxTime: 12 * time.Hour, TraceLast: last})
	for _, cancel := range o.cancels {
		cancel()
	}
	if err != nil && o.violation == "" {
		o.violate("the schedule did not end: %v", err)
	}
	if o.violation == "" {
		// The user looks at the farm once everything has ended (farm
		// query), the faults over.
		w.Go("query", o.query)
		if err := w.Run(sim.Options{MaxSteps: 2_000_000, MaxTime: 13 * time.Hour, TraceLast: last}); err != nil && o.violation == "" {
			o.violate("farm query did not end: %v", err)
		}
	}
	if o.violation == "" {
		o.atEnd()
	}
	if o.violation == "" {
		// A rescuer decides the claims noted and left undecided (after the
		// checks above: a mutant's violation is said as it was before).
		w.Go("rescue", o.rescueNotes)
		if err := w.Run(sim.Options{MaxSteps: 2_000_000, MaxTime: 14 * time.Hour, TraceLast: last}); err != nil && o.violation == "" {
			o.violate("the rescue of noted claims did not end: %v", err)
		}
		if o.rescued = true; o.violation == "" {
			o.atEnd()
		}
	}
	r := scheduleResult{scenario: sc.String(), violation: o.violation, stats: w.Stats()}
	if r.violation == "" && sc.lease.on {
		// The lease and the fence, in a world of their own: its trace is
		// the one said.
		lo := runLease(seed, m, sc, last)
		r.violation, w = lo.violation, lo.w
		r.stats = addSteps(r.stats, w.Stats())
	}
	if r.violation != "" || os.Getenv("DBG_TRACE") != "" {
		r.trace = traceOf(w, keepTrace)
	}
	return r
}

// traceOf is w's trace: its last calls, or all of them for a replay.
func traceOf(w *sim.World, keepTrace bool) string {
	var b strings.Builder
	n := 60
	if keepTrace {
		n = 0
	}
	w.WriteTrace(&b, n)
	return b.String()
}

// addSteps is s with the steps and calls of another world's t.
func addSteps(s, t sim.Stats) sim.Stats {
	s.Steps += t.Steps
	s.Calls += t.Calls
	return s
}

// scenario is what a seed's schedule is made of, drawn from the seed.
type scenario struct {
	cases      int           // run 1's cases
	submits    int           // farm submits racing to start run 1
	claimers   int           // meta-jobs of each run
	most       int           // their batch (FirstBatch: sized by the store)
	jobs       int           // what the runs are started for: lanes from 16 (LanesFor)
	adds       int           // farm adds racing run 1
	first      bool          // the adds are --first
	resubmits  int           // farm resubmits racing run 1's claimers (2: with each other too)
	repair     bool          // a farm repair racing the rest
	repairs    int           // ... how many (one after another, or at once)
	chase      bool          // ... each starting while a run start is under way
	together   bool          // the resubmits start at one moment
	slow       float64       // the resubmits' calls take this many times as long (sim.Proc.Slow; 0: 1)
	damage     bool          // a claim-state file removed from outside
	interrupts bool          // the commands may be interrupted (Ctrl-C) at any moment
	restarts   int           // how many crashed claimers the batch system starts again
	retry      time.Duration // how long the processes retry transient errors
	reclaims   int           // how many failed claims a meta-job tries again, with its store
	faults     sim.Faults
	workMax    time.Duration // a batch's run time, at most
	startAfter time.Duration // the racing commands start within this
	voidAfter  time.Duration // voidAfter for this schedule
	aim        float64       // the commands' calls fail this many times as often as the meta-jobs' (sim.Proc.Aim)
	focus      bool          // aim only at the commands' exclusive creates (the commits' slots and marks)
	aimStart   bool          // and a resubmit's only at its run start's mark (simOracle.aimAtStart)
	aimTable   bool          // an outage may begin at a command's first look at a table (simOracle.hook)
	aimGone    bool          // a look deciding whether a name is gone, or a repair's reading, may fail (simOracle.hook)
	spare      int           // ... past the first spare of them (sim.Proc.AimAfter)
	flaky      bool          // each run's first meta-job has its faults aimed at it
	lease      leaseScenario // the lease's actors, in a world of their own (simlease_test.go)
	hints      bool          // the meta-jobs start with start hints: good, forged, corrupted, none (simhint_test.go)
}

// aimed is p, a command's process, with the scenario's faults aimed at it.
func (sc scenario) aimed(p *sim.Proc) *sim.Proc {
	if sc.focus {
		return p.Aim(sc.aim, "mknodat").AimAfter(sc.spare)
	}
	return p.Aim(sc.aim)
}

func (sc scenario) String() string {
	return fmt.Sprintf("submits=%d cases=%d claimers=%d most=%d jobs=%d adds=%d first=%v resubmits=%d repairs=%d chase=%v together=%v slow=%g damage=%v interrupts=%v restarts=%d retry=%s reclaims=%d void-after=%s aim=%g focus=%v aim-start=%v aim-table=%v aim-gone=%v spare=%d flaky=%v faults={crash=%g freeze=%g lost=%g transient=%g outage=%g at-fault=%g until=%s}",
		sc.submits, sc.cases, sc.claimers, sc.most, sc.jobs, sc.adds, sc.first, sc.resubmits, sc.repairs, sc.chase, sc.together, sc.slow, sc.damage, sc.interrupts, sc.restarts, sc.retry, sc.reclaims, sc.voidAfter, sc.aim, sc.focus, sc.aimStart, sc.aimTable, sc.aimGone, sc.spare, sc.flaky,
		sc.faults.Crash, sc.faults.Freeze, sc.faults.LostReply, sc.faults.Transient, sc.faults.Outage, sc.faults.OutageAtFault, sc.faults.Until) + sc.lease.String() + fmt.Sprintf(" hints=%v", sc.hints)
}

// drawScenario draws seed's scenario: a swarm, each seed its own mix of
// actors and of fault rates (some none), as TigerBeetle's VOPR does.
func drawScenario(seed uint64) scenario {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(v ...float64) float64 { return v[r.IntN(len(v))] }
	sc := scenario{
		cases:      16 + r.IntN(60),
		submits:    1 + r.IntN(3)/2,
		claimers:   1 + r.IntN(5),
		most:       []int{FirstBatch, 1, 1, 2, 3, 5}[r.IntN(6)],
		jobs:       []int{1, 4, 32, 64, 128}[r.IntN(5)],
		adds:       []int{0, 0, 1, 2, 3}[r.IntN(5)],
		first:      r.IntN(2) == 0,
		resubmits:  []int{0, 0, 1, 2}[r.IntN(4)],
		repair:     r.IntN(5) == 0,
		damage:     r.IntN(25) == 0,
		interrupts: r.IntN(3) == 0,
		restarts:   r.IntN(3),
		retry:      []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}[r.IntN(3)],
		reclaims:   r.IntN(3),
		workMax:    time.Duration(1+r.IntN(3000)) * time.Millisecond,
		startAfter: time.Duration(1+r.IntN(20)) * time.Second,
	}
	sc.faults = sim.Faults{
		Crash:     pick(0, 0, 0.0005, 0.002),
		Freeze:    pick(0, 0, 0.001, 0.005),
		LostReply: pick(0, 0.002, 0.01, 0.05),
		Transient: pick(0, 0.002, 0.01),
		Outage:    pick(0, 0, 0.0005, 0.002),
		OutageMax: 20 * time.Second,
		Until:     time.Duration(1+r.IntN(10)) * time.Minute,
	}
	sc.faults.OutageAtFault = pick(0, 0, 0.2, 1)
	// How long a slot may stay unmarked before it is voided: farm's 20
	// s, or much less, so that a slot's owner merely slow between its
	// content and its mark races the void (the protocol's safety must
	// not hang on its timeouts).
	sc.voidAfter = []time.Duration{20 * time.Second, time.Second, 10 * time.Millisecond, 2 * time.Millisecond}[r.IntN(4)]
	// The commands (submit, add, resubmit, repair) make few calls
	// beside the meta-jobs' many: faults aimed at them reach their
	// rarer moments.
	sc.aim = pick(1, 1, 5, 20)
	// Some outages last minutes (a server rebooted), past every
	// process's retries.
	sc.faults.OutageMax = time.Duration(pick(20, 20, 180)) * time.Second
	if r.IntN(4) == 0 {
		sc.focusOnCommits(r)
	}
	// One meta-job a run on a flaky node: its calls fail 20 times as
	// often (its reading of the chain given up half done, say).
	sc.flaky = r.IntN(4) == 0
	// Most repairs focused: the repair's races are many and each is
	// narrow.
	if sc.repair && r.IntN(4) != 0 {
		sc.focusOnRepair(r)
	}
	if sc.repair {
		sc.repairs = max(sc.repairs, 1)
	}
	sc.aimLooks(r)
	sc.drawLease(r)
	sc.hints = r.IntN(2) == 0 // drawn last: the draws before are as they were
	return sc
}

// aimLooks aims faults at two rare moments (simOracle.hook), drawn last so
// that the rest of a seed's scenario stays as it was: a brick's outage
// beginning as a farm add (or a run start) first looks at the table it has
// just made, whose passing ENOENT must be retried, not taken for the
// table gone (add-removes-table-then-looks); and, in a schedule with a
// repair, a transient error in the look that decides whether a name that
// answered ENOENT is gone — a name a losing start removed under a repair's
// listing, say (gone-looked-twice) —, or an outage beginning as a repair
// reads the chain (inspect-trusts-no-generation).
func (sc *scenario) aimLooks(r *rand.Rand) {
	sc.aimTable = sc.adds > 0 && r.IntN(3) == 0
	sc.aimGone = sc.repair && r.IntN(2) == 0
}

// focusOnCommits makes sc a schedule focused on the commands' commits:
// their exclusive creates (a slot, a mark) lose their replies often, an
// outage begins there, and it may outlast the command's retries: a commit
// given up undecided, that may have been made.
func (sc *scenario) focusOnCommits(r *rand.Rand) {
	sc.focus, sc.aim, sc.retry = true, 20, 5*time.Second
	sc.faults.LostReply = max(sc.faults.LostReply, 0.01)
	sc.faults.OutageAtFault = max(sc.faults.OutageAtFault, 0.2)
	sc.faults.OutageMax = 3 * time.Minute
	// Past the first few: a run start makes its lanes' first
	// generations before its commit.
	sc.spare = r.IntN(12)
	if r.IntN(2) == 0 {
		// At a resubmit's commit on the main chain, past its
		// lanes' (simOracle.aimAtStart): an outage begins at its
		// mark's lost reply and ends within its retries; the
		// commit is settled after it, or its user gives up
		// (Ctrl-C) as the filesystem works again.
		sc.aimStart, sc.interrupts, sc.retry = true, true, 30*time.Second
		sc.faults.OutageMax = 20 * time.Second
		sc.faults.Transient = 0    // the mark's fault is a lost reply: made
		sc.jobs = max(sc.jobs, 32) // with lanes
	}
}

// focusOnRepair makes sc a schedule focused on the repair: it races a
// damage and the run starts it must close or carry (a resubmit holding the
// chain since before the damage, one that dies with its lanes half made),
// and runs with lanes, which it closes.
func (sc *scenario) focusOnRepair(r *rand.Rand) {
	pick := func(v ...float64) float64 { return v[r.IntN(len(v))] }
	sc.damage = sc.damage || r.IntN(2) == 0
	sc.resubmits = max(sc.resubmits, 1+r.IntN(2))
	sc.jobs = max(sc.jobs, 32)
	sc.repairs = 1 + r.IntN(3)
	// Within moments of a run start: it lists the lanes the start is
	// making, or removing if its commit lost; closes a lane whose
	// first generation is under way.
	sc.chase = r.IntN(2) == 0
	// The resubmits at once (two users, or a user and the -auto job):
	// both read one state, and one start loses.
	sc.together = r.IntN(2) == 0
	// On a loaded login node: a losing start removes its lanes while
	// a repair lists them.
	sc.slow = pick(0, 10, 50)
	// Its calls fail often: a look that fails between two that
	// succeed, a listing given up and tried again.
	sc.aim = max(sc.aim, pick(5, 20))
	sc.faults.Transient = max(sc.faults.Transient, 0.002)
}

// errText is err's text for a violation, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// isDamage reports whether err says the claim state is damaged.
func isDamage(err error) bool {
	var de *DamageError
	return errors.As(err, &de)
}

// transientOrGaveUp reports whether err is a transient error retried to
// its limit (or a context's end): a process that meets one exits, as a
// meta-job does, and the run is finished by others.
func transientOrGaveUp(err error) bool {
	return fsretry.IsTransient(err) || errors.Is(err, context.Canceled)
}

// simTable is the run table's text of cases ids, one line each ("ID
// command").
func simTable(ids []int64) []byte {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d echo case %d\n", id, id)
	}
	return []byte(b.String())
}

// simTablePath is the path of a farm-relative table name in the world.
func simTablePath(name string) string { return filepath.Join(simDir, name) }
