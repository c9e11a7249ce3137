package casetable

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// simMutant is a past defect of the claim core, reintroduced by the switch
// of its name (mutated) for the simulator to catch (make sim-mutants;
// SIMULATION.md's catalogue says more of each).
type simMutant struct {
	name  string
	fixed string // the commit that fixed it
	what  string
	// models are where the defect can show, if not on every model: a
	// link() that is not exclusive (gluster-dht), a commit given up
	// undecided (a call failing for longer than the retries, after its
	// effect: nfs-soft, and the GlusterFS client cut off from its
	// bricks). make sim-mutants runs the schedules on these.
	models []string
	// repair says that the defect is the repair's, or shows only where a
	// repair runs: make sim-mutants runs the schedules of its budget
	// among the seeds whose scenario has one.
	repair bool
}

// dhtOnly and undecidedModels are the models of simMutant.models.
var (
	dhtOnly         = []string{"gluster-dht"}
	undecidedModels = []string{"nfs-soft", "gluster", "gluster-dht"}
	lostWrites      = []string{"gluster", "gluster-dht"} // NFS holds a write until its close
	fullOnly        = []string{"full"}
	brickDown       = []string{"gluster", "gluster-dht"} // lookups answering a spurious ENOENT
)

// simMutants is the catalogue.
var simMutants = []simMutant{
	// Past defects, fixed in earlier waves (git log; the closing notes).
	{"queue-carried-to-next-run", "74be6a6", "a new run keeps what farm add gave the run before (its sets, made again): the added cases run twice in it", nil, false},
	{"repair-closes-new-run-lanes", "7da608f", "a repair closes every run's lanes, a run started after its reading too, and loses its commit: that run claims nothing", nil, true},
	{"add-removes-undecided-table", "4e01ca1", "farm add removes its queued table after a commit whose outcome is unknown: the run cannot read it", undecidedModels, false},
	{"failed-read-old-base", "4737c15", "a store whose reading failed commits on its old base past the newest mark: cases handed out again", nil, false},
	{"reply-decides", "530d548, bef773f", "a commit's outcome taken from the mark's reply: a mark made, its reply lost, orphans its batch", nil, false},
	{"undecided-recommitted", "530d548", "a commit whose outcome cannot be looked up is made anew, not settled: its batch is orphaned", nil, false},
	{"lanes-removed-after-undecided-start", "26f631f", "a run start removes its lanes after a commit whose outcome is unknown: the run names lanes that are gone", undecidedModels, false},
	{"enoent-is-damage", "530d548", "an ENOENT in the chain taken for damage, whether or not the chain's directory is gone", nil, false},
	{"lanes-own-table", "6962e38", "a set's lanes take the run's own table for the one farm add gave them (before the one claim path: a meta-job that opened the lanes after farm add --first took the added table for the lanes' own): they read another table than the run record names", nil, false},
	{"link-commit", "bef773f", "a generation committed by link() of a file of its own onto its name, not exclusive on distribute-replicate GlusterFS: two claimers win one generation", dhtOnly, false},
	{"void-as-directory", "7b63338", "a slot voided by mkdir of its mark's name, which a mark's create can race and both win on distribute-replicate GlusterFS", dhtOnly, false},
	{"chain-file-by-link", "0b47c1e", "MISC/chain made by link(), not exclusive on distribute-replicate GlusterFS: two chains, two run 1s", dhtOnly, false},
	// Defects the simulator found (issue 35), fixed with it.
	{"lane-gen0-eexist-fatal", "38fc9a8", "a new lane's slot 0 answering EEXIST (its own mknod, the reply lost) fails the run's start", nil, false},
	{"own-mkdir-eexist-fatal", "38fc9a8", "a mkdir of a new, nonce-named directory answering EEXIST (the reply lost) fails the command", nil, false},
	{"chain-close-removes-dir", "38fc9a8", "a close of MISC/chain that fails after its write removes the chain directory it names: damage", nil, false},
	{"no-state-ends-claims", "38fc9a8", "a passing ENOENT for MISC/chain makes a meta-job of a started run quit (not submitted yet)", nil, false},
	{"chain-write-lost-removes-chain", "4c033f3", "a write of MISC/chain whose reply was lost (made all the same) removes MISC/chain, which others already use: every command then says the farm was never submitted", lostWrites, false},
	{"table-enoent-ends-claims", "33b8558", "a passing ENOENT for the run's table or the farm directory makes a meta-job quit", nil, false},
	{"one-look-is-gone", "38fc9a8", "one lookup's ENOENT (a GlusterFS brick down) takes a chain or a lane for gone: damage, or a lane closed that is not", nil, false},
	{"gone-without-listing", "6163282", "a name looked up missing 8 times, its parent found each time, taken for gone without its parent's listing: one brick's outage in 256 reports a lane as damage", nil, false},
	{"gone-looked-twice", "6163282", "an ENOENT looked up twice, once to skip a name gone and once to mark it passing: the two looks disagree (a transient error in the first), and a repair fails on a lane removed meanwhile", nil, true},
	{"base-of-any-chain", "2aaa20e", "a run start decided on generation N of one chain commits on generation N of the chain a repair made since (its generations count from 0 again): the repair closed the lanes it had made, and the run claims nothing", nil, true},
	{"repair-forgets-closed-run", "37eb773", "a repair of a damaged MISC/chain closes a run that a resubmit holding the old chain started after its reading, and names the run before it in its new chain: that run's jobs claim nothing, and the next resubmit starts a run of the same number", nil, true},
	{"chain-made-once", "37bb84b", "two first submits on a full disk: one finds MISC/chain made by the other (EEXIST), which removes it unwritten (ENOSPC); the first then fails, not making it again", fullOnly, false},
	{"split-slot-tried-again", "8da4427", "a slot whose mknod and lookup answer EIO (a GlusterFS split-brain name) is tried again from fresh readings, never awaited: if its owner died before its mark, no claimer gets past it", lostWrites, false},
	{"inspect-trusts-no-generation", "7b8f004", "a repair's reading took a chain whose directory or first segment answered a passing ENOENT for one with no generation: the forced repair closed every lane, those of a run starting meanwhile too, then lost its commit — the new run's cases never claimed", lostWrites, true},
	{"add-removes-table-then-looks", "b6298cc", "farm add's first look at its queued table answers a passing ENOENT: not retried, the table removed, then the error looked up — gone, since it was just removed — and the add fails for good", nil, false},
	// Defects the rescue of noted claims (issue 37) must not have, put in
	// to show that the simulator's rescue reaches them.
	{"note-after-commit", "4b2f79e", "a claim noted after its commit, not before: a claimer that dies between the two leaves cases claimed that no record names, and no rescue finds them", nil, false},
	{"claim-won-by-mark", "4b2f79e", "ClaimWon takes a generation's mark for the noted claim's win, without its nonce: a claim that lost is rescued too, and its cases run twice", nil, false},
	// A defect the start hints (issue 39) must not have, put in to show
	// that the simulator's forged hints reach it.
	{"hint-unverified", "", "a first claim trusts its start hint as it is, not vouched for by the name its run's start made once its commit won: a hint naming an orphan set of the run (a start that lost, and died before removing it) hands the run's cases out twice", nil, false},
	// Defects the start tickets (issue 39) must not have, put in to show
	// that the simulator's claimers, starts and rescue reach them.
	{"ticket-void-as-claim", "", "a ticket's mark looked at takes a FIFO (a void) for a claim: an owner whose mark met a sweep's or a close's void claims the case the sweep hands out too", nil, false},
	{"ticket-eexist-won", "", "a ticket's mark answering EEXIST is taken for its own, without looking at it: an owner whose mark met a sweep's void claims the case the sweep hands out too", nil, false},
	{"close-leaves-tickets", "", "a run's start closes the last run's lanes but not its tickets: a meta-job of the last run that makes its first claim after the start claims a case the new run runs too", nil, false},
	// Defects the lease and the rescue's fence (package lease, issue 37)
	// must not have, put in to show that the simulator's lease actors
	// reach them.
	{"no-look-after-start-record", "", "the lease's look after a case's start record skipped: a job frozen between its last look and the record, rescued meanwhile, runs a case its rescuer took", nil, false},
	{"fence-without-wait", "", "the rescuer reads the dead job's status file right after its mark, not after the fence: a job that looked just before the mark starts cases the rescuer took", nil, false},
	// A defect the lease's actors found (issue 37), fixed with them.
	{"mark-lookup-trusts-enoent", "", "a job's look for its rescue mark takes a lookup's ENOENT for no mark: while a GlusterFS brick is down, a job whose cases were rescued starts them", brickDown, false},
	// A defect of the start tickets CI's simulator run found (issue 39), fixed with it.
	{"tickets-gone-fails-close", "f8d0455", "a close of start tickets whose directory a run start that lost removed after the close listed it fails on the first mark's ENOENT: the repair fails", nil, true},
}

func knownMutant(name string) bool {
	for _, m := range simMutants {
		if m.name == name {
			return true
		}
	}
	return false
}

// TestSimMutants runs the schedules of the make-test budget (or
// SIM_SCHEDULES) with each mutant in turn, until one catches it, and
// fails if any is not caught (make sim-mutants).
func TestSimMutants(t *testing.T) {
	if os.Getenv("SIM_MUTANTS") != "1" {
		t.Skip("make sim-mutants runs it (SIM_MUTANTS=1)")
	}
	set := readSimSettings(t)
	caught, tried := 0, 0
	for _, m := range simMutants {
		if set.mutant != "" && !slices.Contains(strings.Split(set.mutant, ","), m.name) {
			continue
		}
		tried++
		models := set.models
		if m.models != nil && len(set.models) == len(simModels) {
			models = nil
			for i, sm := range simModels {
				if slices.Contains(m.models, sm.name) {
					models = append(models, i)
				}
			}
		}
		on := simSettings{models: models}
		mutant = m.name
		start := time.Now()
		found := uint64(0)
		for i, seed := 0, set.first; i < set.schedules && found == 0; seed++ {
			if m.repair && !drawScenario(seed).repair {
				continue
			}
			i++
			if r := runSchedule(seed, on.modelOf(seed), false); r.violation != "" {
				found = seed
				t.Logf("%s caught by seed %d (model %s, schedule %d, %s): %s", m.name, seed, simModels[on.modelOf(seed)].name, i,
					time.Since(start).Round(time.Millisecond), firstLine(r.violation))
			}
		}
		mutant = ""
		if found == 0 {
			t.Errorf("%s (%s) not caught in %d schedules: widen the models or the actors", m.name, m.what, set.schedules)
			continue
		}
		caught++
	}
	fmt.Printf("mutants: %d caught of %d\n", caught, tried)
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// simRegressions are the seeds that caught each defect the simulator found
// (and a few past ones), as make sim-mutants last reported them: each
// must still violate with its defect put back, and pass without it. A
// change of the simulator or of its scenarios moves schedules: then make
// sim-mutants names the seeds that catch them now, to put here.
var simRegressions = []struct {
	mutant string
	seed   uint64
	model  string
}{
	{"queue-carried-to-next-run", 35, "full"},
	{"repair-closes-new-run-lanes", 630, "local"},
	{"add-removes-undecided-table", 17759, "gluster-dht"},
	{"failed-read-old-base", 2539, "nfs"},
	{"reply-decides", 25, "nfs"},
	{"undecided-recommitted", 44, "nfs-soft"},
	{"lanes-removed-after-undecided-start", 1155, "nfs-soft"},
	{"enoent-is-damage", 22, "gluster-dht"},
	{"lanes-own-table", 11, "full"},
	{"link-commit", 10, "gluster-dht"},
	{"void-as-directory", 1698, "gluster-dht"},
	{"chain-file-by-link", 721, "gluster-dht"},
	{"lane-gen0-eexist-fatal", 1, "nfs"},
	{"own-mkdir-eexist-fatal", 13, "nfs"},
	{"chain-close-removes-dir", 13, "nfs"},
	{"no-state-ends-claims", 105, "gluster"},
	{"chain-write-lost-removes-chain", 57885, "gluster-dht"},
	{"table-enoent-ends-claims", 34, "gluster-dht"},
	{"one-look-is-gone", 34, "gluster-dht"},
	{"gone-without-listing", 16, "gluster-dht"},
	{"gone-looked-twice", 31, "nfs"},
	{"base-of-any-chain", 5935, "nfs"},
	{"repair-forgets-closed-run", 71609, "full"},
	{"chain-made-once", 1286, "full"},
	{"split-slot-tried-again", 33, "gluster-dht"},
	{"inspect-trusts-no-generation", 194064, "gluster"},
	{"add-removes-table-then-looks", 20272, "gluster-dht"},
	{"note-after-commit", 69, "gluster"},
	{"claim-won-by-mark", 6, "local"},
	{"hint-unverified", 17, "full"},
	{"no-look-after-start-record", 21, "gluster"},
	{"fence-without-wait", 4, "gluster-dht"},
	{"ticket-void-as-claim", 6, "local"},
	{"ticket-eexist-won", 11, "full"},
	{"close-leaves-tickets", 156, "local"},
	{"mark-lookup-trusts-enoent", 1343, "gluster-dht"},
	{"tickets-gone-fails-close", 11387, "full"},
}

// TestSimRegressions replays the seeds of simRegressions, with and without
// their defects.
func TestSimRegressions(t *testing.T) {
	for _, r := range simRegressions {
		m := -1
		for i, sm := range simModels {
			if sm.name == r.model {
				m = i
			}
		}
		if m < 0 {
			t.Fatalf("%s: no model %q", r.mutant, r.model)
		}
		if got := runSchedule(r.seed, m, false); got.violation != "" {
			t.Errorf("seed %d on %s, without %s: %s", r.seed, r.model, r.mutant, got.violation)
		}
		mutant = r.mutant
		got := runSchedule(r.seed, m, false)
		mutant = ""
		if got.violation == "" {
			t.Errorf("seed %d on %s no longer catches %s: make sim-mutants names the seeds that do now", r.seed, r.model, r.mutant)
		}
	}
}
