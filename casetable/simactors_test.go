package casetable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/farm-hpc/farm/sim"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
)

// simClaimer is a meta-job of a run: it claims batches until the run has
// none left, runs each (a sleep), and reports what it was handed.
type simClaimer struct {
	o        *simOracle
	run      int
	name     string
	finisher bool // starts after the faults, and must end the run
	inClaim  int  // during a claim: the most cases it can take
}

// startClaimer starts a meta-job of run (a finisher: once the faults are
// over, and never crashed).
func (o *simOracle) startClaimer(run int, name string, finisher bool) {
	c := &simClaimer{o: o, run: run, name: name, finisher: finisher}
	p := o.w.Go(name, c.main)
	o.claimers[p] = c
	if finisher {
		p.NoCrash()
	} else if o.sc.flaky && strings.HasSuffix(name, ".1") {
		p.Aim(20) // on a flaky node
	}
}

func (c *simClaimer) main(p *sim.Proc) {
	fsys, o := p.FS(), c.o
	ctx := context.Background()
	if c.finisher {
		// After the faults, and after every command that races the run
		// (a frozen one may resume after the faults).
		until := o.sc.faults.Until + time.Second
		fsys.Sleep(ctx, until-o.w.Now().Sub(sim.Epoch))
		for o.commandsRunning() {
			fsys.Sleep(ctx, time.Second)
		}
	}
	s := newSimStore(fsys, c.name, o.sc.retry)
	defer s.Close()
	if o.sc.hints {
		s.UseHint(c.hint(fsys)) // good, forged, corrupted or none (simhint_test.go)
	}
	s.Note = func(token string, ids []int64, lost bool) error { // as metajob's rescue has them recorded
		o.noted(c, token, ids, lost)
		return nil
	}
	most, reclaims := o.sc.most, o.sc.reclaims
	var looked time.Time // its last look at the run (a meta-job's, every LookEvery)
	for {
		if now := o.w.Now(); !looked.IsZero() && now.Sub(looked) >= LookEvery {
			looked = now
			if _, _, err := s.Look(ctx, false); err != nil {
				c.failed(err) // a meta-job ends on it, holding no case
				return
			}
		}
		c.inClaim = max(most, 16) // a first batch is at most a lane's first share
		if most >= 1 {
			c.inClaim = most
		}
		begun := o.w.Now()
		cases, err := s.Claim(ctx, c.run, most)
		if err != nil && transientOrGaveUp(err) && reclaims > 0 {
			// The same store claims again, after a while: what it
			// read before the failure must not be what it commits on.
			reclaims--
			o.runs[c.run].unseen += c.inClaim
			fsys.Sleep(ctx, 30*time.Second)
			continue
		}
		if err != nil {
			c.failed(err)
			return
		}
		c.inClaim = 0
		if len(cases) == 0 {
			if c.finisher {
				o.runs[c.run].ended = true
			}
			return
		}
		o.claimedBy(c.run, c.name, cases, begun)
		if n := o.lastNote(c.name); n != nil && n.state == noteOpen && slices.Equal(n.ids, caseIDs(cases)) {
			n.state = noteWon // handed its cases: its commit won
		}
		if looked.IsZero() {
			looked = o.w.Now()
		}
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(o.sc.workMax)))
		for _, cs := range cases {
			o.done[cs.ID] = true
		}
		most = max(o.sc.most, 1) * min(s.Ahead(), 4)
	}
}

// failed checks the error a claim ended with: a transient one given up on
// is a meta-job's exit (its claim may have committed: unseen), damage is
// one if it was done (a finisher must then say so).
func (c *simClaimer) failed(err error) {
	o := c.o
	r := o.runs[c.run]
	r.unseen += c.inClaim
	c.inClaim = 0
	switch {
	case isDamage(err) && o.damaged:
		if c.finisher {
			r.damaged = true
		}
		return
	case c.finisher && o.sc.repair:
		return // the repair's new chain, or its closing of the run's lanes
	case c.finisher:
		o.violate("%s, started after the faults ended, failed: %v", c.name, err)
	case transientOrGaveUp(err), isDamage(err) && o.sc.repair:
	default:
		// A meta-job gives up only on what does not pass: a passing
		// fault it takes for another would end it for nothing.
		o.violate("%s failed, on what is not a passing fault or damage done: %v", c.name, err)
	}
}

// resubmit is farm resubmit, racing the run's meta-jobs (a stalled one
// among them) and, with two, another resubmit: it reads the state, writes
// the next run's table of the cases not done, and starts the run if the
// state is still as it read it.
func (o *simOracle) resubmit(p *sim.Proc) {
	fsys := p.FS()
	ctx := o.ctx(p)
	if o.sc.together {
		fsys.Sleep(ctx, o.sc.startAfter/2)
	} else {
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(o.sc.startAfter)))
	}
	s := o.commandStore(p, p.Name())
	defer s.Close()
	cur, err := s.Read(ctx)
	if err != nil {
		o.commandFailed(p.Name(), err)
		return
	}
	var ids []int64
	for _, id := range o.master {
		if !o.done[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	spec := RunSpec{Base: cur.Gen, Chain: cur.Chain, Run: cur.Run + 1, Table: fmt.Sprintf("MISC/table.run%d.%s", cur.Run+1, p.Name()),
		Cases: int64(len(ids)), Jobs: o.sc.jobs}
	if err := vfs.WriteAtomic(fsys, simTablePath(spec.Table), 0o644, simTable(ids)); err != nil {
		return
	}
	// Its lanes are closed before the new run's commit, which may then
	// lose, fail or never come (a crash): its cases not done are the next
	// resubmit's. (Its own start may not be recorded yet: the command that
	// started it may be frozen after its commit.)
	o.closeRun(cur.Run)
	if o.sc.aimStart {
		p.Aim(0) // until its mark (aimAtStart)
		o.inStart[p] = true
	}
	o.starting++
	err = s.StartRun(ctx, spec)
	o.starting--
	delete(o.inStart, p)
	if err != nil {
		o.commandFailed(p.Name(), err)
		if transientOrGaveUp(err) && !strings.HasSuffix(p.Name(), "+") && fsys.Rand()%2 == 0 {
			// Its user runs it again (farm said it retried for how
			// long, or the user interrupted it): it finds the run
			// started or not, whatever the outcome it could not
			// tell, and its lanes as that outcome left them.
			o.command(p.Name()+"+", o.resubmit)
		}
		return
	}
	o.hints[spec.Run] = s.Hint()
	o.started(spec, ids, s.chainDir())
}

// hook is casetable's testHook in a schedule: it aims faults at the
// moments the scenario says (scenario.aimStart, aimLooks), half the time
// each.
func (o *simOracle) hook(stage, path string) {
	p := o.w.Current()
	if p == nil {
		return
	}
	switch {
	case stage == "mark" && o.sc.aimStart:
		o.aimAtStart(stage, path)
	case stage == "table" && o.sc.aimTable && o.isCommand(p) && p.FS().Rand()%2 == 0:
		o.w.BeginOutage()
	case stage == "gone" && o.sc.aimGone && p.FS().Rand()%2 == 0:
		p.AimNext(1000) // the look's first call fails, if the model fails calls
	case stage == "inspect" && o.sc.aimGone && p.FS().Rand()%2 == 0:
		o.w.BeginOutage() // the repair's reading of the chain, as a brick goes down
	}
}

// isCommand says whether p is one of the commands that race the
// meta-jobs (submit, add, resubmit, repair).
func (o *simOracle) isCommand(p *sim.Proc) bool {
	return slices.Contains(o.commands, p) || strings.HasPrefix(p.Name(), "submit")
}

// aimAtStart is the commits' testHook in a scenario that aims at a run
// start's mark (scenario.aimStart): a resubmit's calls fail as the
// scenario's aim says from its mark on the main chain, the rest of its
// start spared (its lanes' first generations, the old run's closings).
func (o *simOracle) aimAtStart(stage, chainDir string) {
	p := o.w.Current()
	if stage == "mark" && p != nil && o.inStart[p] && strings.HasPrefix(filepath.Base(chainDir), "claims.") {
		p.Aim(100, "mknodat").AimAfter(0) // its reply lost, an outage begun there
	}
}

// add is farm add: a few new cases, queued to the current run.
func (o *simOracle) add(p *sim.Proc) {
	fsys := p.FS()
	ctx := o.ctx(p)
	fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(o.sc.startAfter)))
	s := o.commandStore(p, "farm-add")
	defer s.Close()
	cur, err := s.Read(ctx)
	if err != nil {
		o.commandFailed(p.Name(), err)
		return
	}
	k := 1 + int(fsys.Rand()%5)
	ids := make([]int64, k)
	for i := range ids {
		ids[i] = o.nextID
		o.nextID++
	}
	for _, id := range ids {
		// Claimable from its commit on, which may come before Enqueue
		// returns (a freeze), or be made with the reply lost.
		o.maybe[id] = true
	}
	q, err := s.Enqueue(ctx, cur.Run, p.Name(), simTable(ids), int64(k), ids[k-1], o.sc.first)
	if err != nil {
		o.commandFailed(p.Name(), err)
		return
	}
	o.master = append(o.master, ids...)
	if r := o.runs[q.Run]; q.Run > 0 && r != nil {
		for _, id := range ids {
			r.ids[id] = true
		}
	}
}

// repair is farm repair (--force: the run's meta-jobs may be stalled, not
// gone): it reads the state and closes the run it finds, as farm repair
// rebuilds it from the records.
func (o *simOracle) repair(p *sim.Proc) {
	fsys := p.FS()
	ctx := o.ctx(p)
	if o.sc.chase {
		// Within moments of a resubmit's run start, or of its commit
		// (the oracle's count of them; a repair may not see a start
		// coming).
		byCommit, run := fsys.Rand()%2 == 0, o.lastRun
		for waited := time.Duration(0); waited < o.sc.startAfter+2*time.Second; waited += 5 * time.Millisecond {
			if byCommit && o.lastRun > run || !byCommit && o.starting > 0 {
				break
			}
			fsys.Sleep(ctx, 5*time.Millisecond)
		}
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(10*time.Millisecond)))
	} else {
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(o.sc.startAfter)))
	}
	s := o.commandStore(p, p.Name())
	defer s.Close()
	rd, err := s.Inspect(ctx)
	if err != nil {
		o.commandFailed(p.Name(), err)
		return
	}
	// farm repair reads the records and asks the batch system for the
	// farm's jobs (squeue, qstat) between its reading and its commit:
	// up to seconds, in which the state may move on.
	if !o.sc.chase && fsys.Rand()%2 == 0 {
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(3*time.Second)))
	}
	// The run to close: the state's, or the newest the records know
	// (farm repair's runToClose), which a damaged state does not say.
	run := max(rd.State.Run, o.lastRun, 1)
	st, err := vfs.Stat(fsys, simTablePath("table.dat"))
	if err != nil {
		return
	}
	total := int64(len(o.master))
	closed := State{Run: run, Table: "table.dat", Offset: st.Size, Lines: -1, Cases: total, MaxID: total, Total: total, Claimed: total}
	// From now on the lanes it closes may be closed, whatever becomes of
	// the repair (a crash leaves them so, for the next repair): those of
	// the run it read, and those before it; every run's, if the state
	// did not read (RepairFrom).
	upTo := rd.State.Run
	if rd.Err != nil {
		upTo = o.lastRun
	}
	for r := 1; r <= upTo; r++ {
		o.closeRun(r)
	}
	if rd.usable {
		if err := s.RepairFrom(ctx, rd, closed); err != nil {
			o.commandFailed(p.Name(), err)
		}
		return
	}
	// A new chain: it closes every chain, with the runs started on them
	// since the reading (by a command that held the chain since before
	// the damage), which its state must then close too. If it fails, or
	// dies, they may be closed all the same.
	o.replaces[p] = true
	err = s.RepairFrom(ctx, rd, closed)
	delete(o.replaces, p)
	if err != nil {
		o.closeRuns()
		o.commandFailed(p.Name(), err)
		return
	}
	for r := 1; r <= s.cur.Run; r++ {
		o.closeRun(r)
	}
}

// reader is farm wait: it reads the state now and then, with one Store,
// and checks that what it reads never goes back. (Two commands may read
// the newest generation and then an older one, where a cache hides a
// mark: a reading is as old as the caches, never older than the
// store's last.)
func (o *simOracle) reader(p *sim.Proc) {
	fsys := p.FS()
	ctx := o.ctx(p)
	var last State
	s := newSimStore(fsys, "reader", o.sc.retry)
	defer s.Close()
	for i := 0; i < 12; i++ {
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(o.sc.startAfter/4+time.Second)))
		st, err := s.Read(ctx)
		if err != nil {
			if isDamage(err) && !o.damaged && !o.sc.repair {
				o.violate("a reader found the claim state damaged, but nothing damaged it: %v", err)
			}
			continue
		}
		// (Its lanes' counters are read afresh each time: a cache may
		// show one lane's older generation, its count lower.)
		if !o.sc.repair && (st.Run < last.Run || st.Gen < last.Gen) {
			o.violate("a reader read run %d (generation %d) after run %d (generation %d) (no run record undone)",
				st.Run, st.Gen, last.Run, last.Gen)
		}
		last = st
	}
}

// query is farm query once everything has ended, with no faults: the
// claim state must read, damaged only if something damaged it (a commit
// given up undecided leaves what it made whole: its run's lanes, its
// queued table).
func (o *simOracle) query(p *sim.Proc) {
	s := newSimStore(p.FS(), "query", time.Minute)
	defer s.Close()
	_, err := s.Read(context.Background())
	if isDamage(err) && o.lastRun == 0 && strings.Contains(err.Error(), `MISC/chain is damaged (unreadable content "")`) {
		return // the first submit's lost create (commandFailed)
	}
	if isDamage(err) && !o.damaged && !o.sc.repair && !o.firstChainLost {
		o.violate("farm query, after everything ended, found the claim state damaged, but nothing damaged it: %v", err)
	}
}

// chainDir is the chain s last read or committed on ("" if none).
func (s *Store) chainDir() string {
	if s.ch == nil {
		return ""
	}
	return s.ch.dir
}

// simNote is a claim a claimer noted before its commit, and what became of it.
type simNote struct {
	run        int
	who, token string
	ids        []int64
	state      int // noteOpen, noteWon (its claim returned its cases), noteLost (noted lost)
}

const (
	noteOpen = iota
	noteWon
	noteLost
)

// noted is a claimer's Opts.Note.
func (o *simOracle) noted(c *simClaimer, token string, ids []int64, lost bool) {
	if !lost {
		o.notes = append(o.notes, &simNote{run: c.run, who: c.name, token: token, ids: slices.Clone(ids)})
		return
	}
	if n := o.lastNote(c.name); n != nil && n.token == token && n.state == noteOpen {
		n.state = noteLost
		return
	}
	o.violate("%s noted the claim %s lost, which is not its last claim noted and open", c.name, token)
}

// lastNote is the last claim who noted; nil if none.
func (o *simOracle) lastNote(who string) *simNote {
	for i := len(o.notes) - 1; i >= 0; i-- {
		if o.notes[i].who == who {
			return o.notes[i]
		}
	}
	return nil
}

// rescueNotes is metajob's rescue deciding the claims noted and never seen
// decided (a claimer that crashed, or gave up, in its commit) from the
// claim state, once everything has ended (Store.ClaimWon): one it finds won
// is handed to a rescuer, and must not have been claimed by another; and,
// as a check of ClaimWon, the first two noted won and lost must read so.
// What it cannot decide (a generation buried, its lanes gone) is left for
// the next run: it may hold cases never claimed (atEnd's unseen).
func (o *simOracle) rescueNotes(p *sim.Proc) {
	s := newSimStore(p.FS(), "rescue", time.Minute)
	defer s.Close()
	checked := map[int]int{}
	for _, n := range o.notes {
		if n.state != noteOpen && checked[n.state] >= 2 {
			continue
		}
		checked[n.state]++
		won, err := s.ClaimWon(context.Background(), n.token)
		switch {
		case err != nil && n.state == noteOpen:
			o.undecided += len(n.ids)
		case err != nil && !errors.Is(err, errBuried) && !isDamage(err) && !os.IsNotExist(err):
			o.violate("ClaimWon(%s), %s's claim noted %s, failed after everything ended: %v", n.token, n.who, noteStates[n.state], err)
		case err != nil:
		case n.state != noteOpen && won != (n.state == noteWon):
			o.violate("ClaimWon(%s) = %v, but %s's claim of %v was %s", n.token, won, n.who, n.ids, noteStates[n.state])
		case won && n.state == noteOpen:
			o.claimedBy(n.run, n.who+" (rescued)", idCases(n.ids), time.Time{})
		}
	}
}

var noteStates = []string{"open", "won", "lost"}

// idCases are cases of ids, for claimedBy.
func idCases(ids []int64) []tablefmt.Case {
	cs := make([]tablefmt.Case, len(ids))
	for i, id := range ids {
		cs[i].ID = id
	}
	return cs
}
