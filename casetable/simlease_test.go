package casetable

// The meta-job's lease and the rescue's fence in the simulator (package
// lease; SIMULATION.md, "The lease and the fence"): in a fraction of the
// schedules, once the claim protocol's actors are done and checked, a
// world of its own on the same model runs victims — meta-jobs that claim
// cases and start each under the lease, as metajob does — and rescuers
// that, told by a batch system that a victim died (it may only be
// stalled), mark it, wait the fence and take the cases its status file
// says it claimed and never started. The check: no case a rescuer took as
// not started is run by its victim.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/lease"
	"github.com/farm-hpc/farm/sim"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// The lease world's directories: the meta-jobs' status files, the run's
// rescue marks.
const (
	leaseStatus = simDir + "/status"
	leaseMarks  = simMisc + "/rescue.1"
)

// leaseScenario is what a schedule's lease actors are, drawn from its
// seed (scenario.drawLease); on false: none.
type leaseScenario struct {
	on        bool
	victims   int           // meta-jobs of the run; the first is the one rescued
	cases     int           // the cases each claims, at most
	rescuers  int           // meta-jobs told that the first victim died (2: racing for its mark)
	inStall   bool          // told while the victim is stalled (else at a moment drawn)
	markAfter time.Duration // ... a moment drawn up to this
	stall     float64       // at each of a victim's moments, the chance that it stalls there
	stallMax  time.Duration // its stalls, log-uniform from 1 ms to this
	work      time.Duration // a case's run time, at most
	aimLook   bool          // an outage may begin at a victim's look once it is marked (a brick down: its lookup's spurious ENOENT)
}

// drawLease draws the lease actors, in one schedule in four: last of the
// scenario, so that the rest of every seed's scenario is as it was.
func (sc *scenario) drawLease(r *rand.Rand) {
	if r.IntN(4) != 0 {
		return
	}
	sc.lease = leaseScenario{
		on:        true,
		victims:   1 + r.IntN(2),
		cases:     2 + r.IntN(11),
		rescuers:  1 + r.IntN(2),
		inStall:   r.IntN(2) == 0,
		markAfter: time.Duration(1+r.IntN(40)) * time.Second,
		stall:     []float64{0.05, 0.2, 0.5}[r.IntN(3)],
		stallMax:  []time.Duration{20 * time.Second, 3 * time.Minute, 20 * time.Minute}[r.IntN(3)],
		work:      time.Duration(1+r.IntN(5000)) * time.Millisecond,
	}
	sc.lease.aimLook = r.IntN(2) == 0
}

func (ls leaseScenario) String() string {
	if !ls.on {
		return ""
	}
	return fmt.Sprintf(" lease={victims=%d cases=%d rescuers=%d in-stall=%v mark-after=%s stall=%g stall-max=%s work=%s aim-look=%v}",
		ls.victims, ls.cases, ls.rescuers, ls.inStall, ls.markAfter, ls.stall, ls.stallMax, ls.work, ls.aimLook)
}

// leaseOracle is what the lease actors of one schedule report to.
type leaseOracle struct {
	w          *sim.World
	ls         leaseScenario
	violation  string
	victims    []*leaseVictim
	taken      map[string]*leaseTake // what a rescuer took, by victim
	duplicates int                   // cases run by both, their start record seen (the documented rescue duplicate)
	marked     bool                  // a rescuer's mark was made (its create took effect)
}

// leaseVictim is a meta-job of the lease world.
type leaseVictim struct {
	o       *leaseOracle
	name    string
	p       *sim.Proc
	cases   []int64
	looked  time.Time               // its last look (zero: no news of the run yet)
	ran     map[int64]time.Duration // the cases it ran, and when
	stalled bool                    // in a stall now
}

// leaseTake is what a rescuer took of a victim's cases at its reading.
type leaseTake struct {
	by        string
	at        time.Duration  // its reading, since Epoch
	unstarted map[int64]bool // claimed, no start record: the rescuer runs them, the victim must not
	open      map[int64]bool // a start record and no end: run by both, if the victim was alive
}

// runLease runs seed's lease actors on the model m (an index in
// simModels), in a world of their own, with the scenario's faults for 10
// minutes. Its oracle has the first violation ("" if none) and the world.
func runLease(seed uint64, m int, sc scenario, last int) *leaseOracle {
	w := sim.New(seed^0x1ea5e, simModels[m].make())
	o := &leaseOracle{w: w, ls: sc.lease, taken: map[string]*leaseTake{}}
	root := w.Root()
	for _, d := range []string{simDir, simMisc, leaseStatus, leaseMarks} {
		if err := vfs.Mkdir(root, d, 0o755); err != nil {
			panic(err)
		}
	}
	next := int64(1)
	for i := range o.ls.victims {
		v := &leaseVictim{o: o, name: fmt.Sprintf("job%d", i+1), ran: map[int64]time.Duration{}}
		for range o.ls.cases {
			v.cases = append(v.cases, next)
			next++
		}
		v.p = w.Go(v.name, v.main)
		o.victims = append(o.victims, v)
	}
	for i := range o.ls.rescuers {
		w.Go(fmt.Sprintf("rescuer%d", i+1), o.rescuer)
	}
	faults := sc.faults
	faults.Until = 10 * time.Minute
	if err := w.Run(sim.Options{Faults: faults, MaxSteps: 2_000_000, MaxTime: 48 * time.Hour, TraceLast: last}); err != nil {
		o.violate("the lease's actors did not end: %v", err)
	}
	return o
}

// violate records the first violation.
func (o *leaseOracle) violate(format string, args ...any) {
	if o.violation == "" {
		o.violation = fmt.Sprintf("at %s: ", o.w.Now().Sub(sim.Epoch)) + fmt.Sprintf(format, args...)
	}
}

// main is a meta-job's life under its lease, as metajob's: it claims its
// cases (its C record; the claim's news starts the lease's cadence), and
// for each looks before the start (stillStarts), writes the start record,
// looks again (startsAfterRecord), and runs it. A look that finds its mark,
// or fails, ends it; so does a record it could not write. It may stall at
// every moment.
func (v *leaseVictim) main(p *sim.Proc) {
	fsys := p.FS()
	ids := make([]string, len(v.cases))
	for i, id := range v.cases {
		ids[i] = strconv.FormatInt(id, 10)
	}
	v.stall(fsys)
	asOf := fsys.Now()
	if !v.record(fsys, "C "+strings.Join(ids, " ")) {
		return
	}
	v.looked = asOf
	for _, id := range v.cases {
		v.stall(fsys)
		if !v.look(fsys, lease.Before) {
			return
		}
		v.stall(fsys)
		if !v.record(fsys, fmt.Sprintf("S %d", id)) {
			return
		}
		v.stall(fsys)
		if !v.look(fsys, lease.AfterRecord) {
			return // recorded interrupted, in metajob
		}
		v.o.ran(v, id)
		fsys.Sleep(context.Background(), time.Duration(fsys.Rand()%uint64(v.o.ls.work)))
		if !v.record(fsys, fmt.Sprintf("E %d", id)) {
			return
		}
	}
}

// stall is a victim stopped (SIGSTOP, a frozen VM, a node cut off from the
// batch system), at the scenario's chance: the others run meanwhile.
func (v *leaseVictim) stall(fsys vfs.FS) {
	ls := v.o.ls
	if float64(fsys.Rand()%1_000_000)/1e6 >= ls.stall {
		return
	}
	f := float64(fsys.Rand()%1_000_000) / 1e6
	d := time.Duration(float64(time.Millisecond) * math.Pow(float64(ls.stallMax/time.Millisecond), f))
	v.stalled = true
	fsys.Sleep(context.Background(), d)
	v.stalled = false
}

// look is the lease's look at moment at, if due (lease.Due): one lookup of
// the victim's rescue mark, retried on a passing fault as metajob's
// Retrier does (its time taken before). It reports whether the victim may
// go on.
func (v *leaseVictim) look(fsys vfs.FS, at lease.Moment) bool {
	now := fsys.Now()
	if lease.Due(now, v.looked, LookEvery, at) > 0 {
		return true
	}
	if v.o.ls.aimLook && v.o.marked && fsys.Rand()%2 == 0 {
		v.o.w.BeginOutage() // a brick down as it looks: a passing ENOENT must not hide its mark
	}
	marks := lease.Marks{FS: fsys, Dir: leaseMarks}
	for try := 0; ; try++ {
		_, marked, err := marks.MarkedBy(v.name)
		switch {
		case err == nil && marked:
			return false
		case err == nil:
			v.looked = now
			return true
		case !fsretry.IsTransient(err) || try >= 20:
			return false
		}
		fsys.Sleep(context.Background(), time.Second)
	}
}

// record appends line to the victim's status file, synced (as on a
// network filesystem); false if it could not.
func (v *leaseVictim) record(fsys vfs.FS, line string) bool {
	fd, err := fsys.Openat(unix.AT_FDCWD, filepath.Join(leaseStatus, v.name), unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return false
	}
	_, err = fsys.Write(fd, []byte(line+"\n"))
	if err == nil {
		err = fsys.Fsync(fd)
	}
	if cerr := fsys.Close(fd); err == nil {
		err = cerr
	}
	return err == nil
}

// ran is victim v running case id (its exec): not one a rescuer took as
// not started.
func (o *leaseOracle) ran(v *leaseVictim, id int64) {
	v.ran[id] = o.w.Now().Sub(sim.Epoch)
	t := o.taken[v.name]
	switch {
	case t == nil:
	case t.unstarted[id]:
		o.violate("%s ran case %d, which %s's reading of its status file at %s had taken as not started (a case a rescuer took is not run by its victim)",
			v.name, id, t.by, t.at)
	case t.open[id]:
		o.duplicates++ // the rescue duplicate of a job that was alive (rescue.go)
	}
}

// rescuer is a meta-job told that the first victim died: at a moment
// drawn, or while the victim is stalled, it reads its status file and, if
// it holds cases (metajob's consider: else it looks again at a later
// check), marks it (lease.Marks.Mark), waits the fence (lease.Fence),
// reads the file again and takes the cases it claimed and never started,
// and the one it started and never ended.
func (o *leaseOracle) rescuer(p *sim.Proc) {
	fsys := p.FS()
	ctx := context.Background()
	v := o.victims[0]
	if o.ls.inStall {
		for !v.stalled && !v.p.Done() {
			fsys.Sleep(ctx, 200*time.Millisecond)
		}
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(2*time.Second)))
	} else {
		fsys.Sleep(ctx, time.Duration(fsys.Rand()%uint64(o.ls.markAfter)))
	}
	for check := 0; !o.holds(fsys, v); check++ {
		if check == 20 || v.p.Done() {
			return
		}
		fsys.Sleep(ctx, time.Second+time.Duration(fsys.Rand()%uint64(14*time.Second))) // the next check
	}
	marks := lease.Marks{FS: fsys, Dir: leaseMarks}
	o.marked = true // from the create on: its reply may be lost
	if !marks.Mark(v.name, fmt.Sprintf("%s %016x ended %s 1\n", p.Name(), fsys.Rand(), fsys.Now().UTC().Format(time.RFC3339))) {
		return
	}
	at := fsys.Now()
	for !lease.Fenced(fsys.Now(), at, LookEvery) {
		fsys.Sleep(ctx, lease.Fence(LookEvery)-lease.Gap(fsys.Now(), at)+10*time.Millisecond)
	}
	b, err := vfs.ReadFile(fsys, filepath.Join(leaseStatus, v.name))
	if err != nil {
		return // metajob takes its mark back: the next check's rescuer reads again
	}
	o.took(p.Name(), v, b)
}

// holds reports whether v's status file, read now, holds cases to rescue
// (claimed and not ended): a rescuer marks only such a file.
func (o *leaseOracle) holds(fsys vfs.FS, v *leaseVictim) bool {
	b, err := vfs.ReadFile(fsys, filepath.Join(leaseStatus, v.name))
	if err != nil {
		return false
	}
	unstarted, open := leftovers(b)
	return len(unstarted)+len(open) > 0
}

// leftovers are the cases a status file b says were claimed and never
// started, and started and never ended.
func leftovers(b []byte) (unstarted, open map[int64]bool) {
	unstarted, open = map[int64]bool{}, map[int64]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for _, s := range f[min(len(f), 1):] {
			id, _ := strconv.ParseInt(s, 10, 64)
			switch f[0] {
			case "C":
				unstarted[id] = true
			case "S":
				delete(unstarted, id)
				open[id] = true
			case "E":
				delete(open, id)
			}
		}
	}
	return unstarted, open
}

// took is a rescuer's reading of victim v's status file b: it takes the
// cases claimed and not started, and the one started and not ended. None
// may have been run by the victim without its start record seen, nor been
// taken by another rescuer.
func (o *leaseOracle) took(by string, v *leaseVictim, b []byte) {
	t := &leaseTake{by: by, at: o.w.Now().Sub(sim.Epoch)}
	t.unstarted, t.open = leftovers(b)
	if prev := o.taken[v.name]; prev != nil {
		o.violate("%s and %s both took the cases of %s (one rescuer a mark)", prev.by, by, v.name)
	}
	o.taken[v.name] = t
	for id := range t.unstarted {
		if at, ok := v.ran[id]; ok {
			o.violate("%s took case %d of %s as not started, which it ran at %s: its start record unseen", by, id, v.name, at)
		}
	}
	for id := range t.open {
		if _, ok := v.ran[id]; ok {
			o.duplicates++
		}
	}
}
