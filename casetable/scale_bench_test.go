package casetable

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// The claim core at scale (issue 22): N claimers, each a goroutine with a
// Store of its own (as separate meta-jobs have), claim from one farm
// through the real Store.Claim, while every filesystem call of the claim
// path (sys.go) goes through a model of a network filesystem's metadata
// server: the call waits its turn at a FIFO server that serves `capacity`
// calls per second, then the round trip (`latency`), and only then is
// made on the local directory. Each claimer claims FARM_SCALE_BATCH cases,
// "works" FARM_SCALE_WORK (a sleep), and claims again. A claim is served
// from the claimer's queue of cases it holds, as a meta-job's are; when
// the queue is empty, the claimer commits a Store.Claim of
// FARM_SCALE_BATCH × Store.Ahead() cases (metajob's batch sizer asks for
// Ahead batches' worth). Claims and commits are counted apart.
//
//	go test -run '^$' -bench ClaimScale -benchtime 1x -timeout 60m ./casetable/   (make bench-scale)
//
// Settings (environment):
//
//	FARM_SCALE_LATENCY   round trip per call, a Go duration (1ms)
//	FARM_SCALE_CAPACITY  calls per second the server serves; 0: unbounded (20000)
//	FARM_SCALE_SECONDS   measured time per N, a Go duration or seconds (20s)
//	FARM_SCALE_N         claimer counts, comma-separated (1,8,64,256,1024)
//	FARM_SCALE_BATCH     cases a claimer works on per work period: a claim (16)
//	FARM_SCALE_AHEAD     0: every claim is a Store.Claim of FARM_SCALE_BATCH
//	                     cases; else (the default) as a meta-job claims: from
//	                     its queue of claimed cases, and when that is empty
//	                     by a Store.Claim of FARM_SCALE_BATCH × Store.Ahead()
//	                     (Ahead as in farm: on in lanes, on the main chain
//	                     only with FARM_CLAIM_AHEAD=1)
//	FARM_SCALE_WORK      sleep per claimed batch, a Go duration (1s)
//	FARM_SCALE_WORK_MAX  BenchmarkClaimScaleEnd: each case's sleep drawn evenly
//	                     from FARM_SCALE_WORK to this (cases of unequal length,
//	                     a work period each, not a batch's)
//	FARM_SCALE_LONGEST_FIRST  BenchmarkClaimScaleEnd, with FARM_SCALE_WORK_MAX:
//	                     a case's sleep by its line, FARM_SCALE_WORK_MAX on
//	                     the first down to FARM_SCALE_WORK on the last (as
//	                     the rig's tables: the longest cases first)
//	FARM_SCALE_WARMUP    time before the measurement starts (2 work periods, at least 2 s)
//	FARM_SCALE_CHAINS    an experiment: that many farms, claimer i claiming from
//	                     farm i mod FARM_SCALE_CHAINS, all through one server:
//	                     what claims spread over that many chains could give at
//	                     best (nothing crosses chains; BenchmarkClaimScale) (1)
//	FARM_SCALE_LANES     the lanes of a farm's run (lanes.go); 1: none, every
//	                     claim on the main chain (as before lanes); unset: as
//	                     farm gives them, LanesFor(the farm's claimers)
//	FARM_SCALE_VOID_AFTER  how long a slot waits for its mark (20s, farm's own default)
//	FARM_SCALE_LOOK      a claimer's look at its run (Store.Look), from its first
//	                     claim on, as a meta-job's (LookEvery, 5s); 0: none
//	FARM_SCALE_DIR       where the farms are made (/dev/shm if writable, else the test's temp dir)
//	FARM_SCALE_END_N     claimers of BenchmarkClaimScaleEnd (256)
//	FARM_SCALE_END_CASES cases of its run (2 batches a claimer)
//	FARM_CLAIM_TICKETS   0: the run's set has no start tickets (farm's own switch,
//	                     ticket.go); else a set made for N claimers has them
//	FARM_SCALE_HINT      0: the claimers start with no start hint (Store.UseHint); else
//	                     with the run's, as farm submit gives its meta-jobs
//	FARM_SCALE_SPREAD    claimers start at random moments over this (a work period);
//	                     0: all at once (a Go duration)
//
// Claimers start at random moments over the first work period. Calls are
// counted, and claims that end are counted, from the end of a warm-up (2
// work periods, at least 2 s) for FARM_SCALE_SECONDS; claims still going
// then are cancelled (a claim that won its commit returns its cases
// first), and every case handed out is checked to be handed out once.
//
// The waits are Go timers: an idle Go process wakes from them on whole
// milliseconds (the runtime's epoll timeout), a busy machine later still;
// what a call waited in all (queue, round trip and oversleep) is printed
// beside the model's figures.

// scaleConfig is the benchmarks' settings.
type scaleConfig struct {
	latency   time.Duration
	capacity  float64
	seconds   time.Duration
	ns        []int
	batch     int
	work      time.Duration
	workMax   time.Duration // BenchmarkClaimScaleEnd: work drawn from work to this, if longer
	longest   bool          // BenchmarkClaimScaleEnd: work by the case's line, workMax down to work
	total     int           // BenchmarkClaimScaleEnd: the table's cases
	voidAfter time.Duration
	dir       string
	endN      int
	endCases  int
	ahead     bool // claim batch × Store.Ahead() when the queue is empty, as a meta-job does
	warm      time.Duration
	chains    int           // independent farms the claimers are spread over (BenchmarkClaimScale)
	lanes     int           // lanes of a farm's run; 0: as farm gives them (LanesFor its claimers)
	look      time.Duration // a claimer's look at its run (Store.Look), as a meta-job's: every LookEvery
	hint      bool          // the claimers start with the run's start hint (FARM_SCALE_HINT)
	spread    time.Duration // the claimers start over this; -1: a work period (FARM_SCALE_SPREAD)
}

// lanesFor is the lanes of a farm that n claimers claim from.
func (c scaleConfig) lanesFor(n int) int {
	if c.lanes > 0 {
		return c.lanes
	}
	return LanesFor(n)
}

func scaleSettings(b *testing.B) scaleConfig {
	c := scaleConfig{
		latency:   time.Millisecond,
		capacity:  20000,
		seconds:   20 * time.Second,
		ns:        []int{1, 8, 64, 256, 1024},
		batch:     16,
		work:      time.Second,
		voidAfter: 20 * time.Second,
		endN:      256,
		chains:    1,
		look:      LookEvery,
		ahead:     os.Getenv("FARM_SCALE_AHEAD") != "0",
		hint:      os.Getenv("FARM_SCALE_HINT") != "0",
		spread:    -1,
		longest:   os.Getenv("FARM_SCALE_LONGEST_FIRST") == "1",
	}
	// Store.Ahead is off on the main chain by default in farm (on in
	// lanes): the benchmark measures farm's default, and Ahead on the main
	// chain too with FARM_CLAIM_AHEAD=1, as farm does; FARM_SCALE_AHEAD=0
	// turns it off everywhere (one commit per claim).
	aheadOn = aheadOn && c.ahead
	dur := func(name string, to *time.Duration) { envDuration(b, name, to) }
	num := func(name string, to *int) { envCount(b, name, to) }
	dur("FARM_SCALE_LATENCY", &c.latency)
	dur("FARM_SCALE_SECONDS", &c.seconds)
	dur("FARM_SCALE_WORK", &c.work)
	dur("FARM_SCALE_WORK_MAX", &c.workMax)
	dur("FARM_SCALE_WARMUP", &c.warm)
	dur("FARM_SCALE_VOID_AFTER", &c.voidAfter)
	dur("FARM_SCALE_LOOK", &c.look)
	dur("FARM_SCALE_SPREAD", &c.spread)
	num("FARM_SCALE_BATCH", &c.batch)
	num("FARM_SCALE_END_N", &c.endN)
	num("FARM_SCALE_CHAINS", &c.chains)
	num("FARM_SCALE_LANES", &c.lanes)
	num("FARM_SCALE_END_CASES", &c.endCases)
	if v := os.Getenv("FARM_SCALE_CAPACITY"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			b.Fatalf("FARM_SCALE_CAPACITY=%q: not a rate", v)
		}
		c.capacity = f
	}
	if v := os.Getenv("FARM_SCALE_N"); v != "" {
		c.ns = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("FARM_SCALE_N=%q: not a list of positive integers", v)
			}
			c.ns = append(c.ns, n)
		}
	}
	c.dir = os.Getenv("FARM_SCALE_DIR")
	if c.dir == "" {
		if d, err := os.MkdirTemp("/dev/shm", "farm-scale-"); err == nil {
			os.Remove(d)
			c.dir = "/dev/shm"
		} else {
			c.dir = b.TempDir()
		}
	}
	return c
}

// envDuration sets *to from the variable name, if set: a Go duration or
// seconds.
func envDuration(b *testing.B, name string, to *time.Duration) {
	v := os.Getenv(name)
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			b.Fatalf("%s=%q: not a duration", name, v)
		}
		d = time.Duration(s * float64(time.Second))
	}
	*to = d
}

// envCount sets *to from the variable name, if set: a positive integer.
func envCount(b *testing.B, name string, to *int) {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: not a positive integer", name, v)
		}
		*to = n
	}
}

func (c scaleConfig) String() string {
	capa := "unbounded"
	if c.capacity > 0 {
		capa = fmt.Sprintf("%.0f calls/s", c.capacity)
	}
	chains := ""
	if c.chains > 1 {
		chains = fmt.Sprintf(", claimers spread over %d farms (chains)", c.chains)
	}
	lanes := "lanes as farm gives them (none under 16 claimers, 2 to 95, then one per 32)"
	if c.lanes > 0 {
		lanes = fmt.Sprintf("%d lanes", c.lanes)
	}
	ahead := "one commit per claim (FARM_SCALE_AHEAD=0)"
	if c.ahead {
		ahead = fmt.Sprintf("claims served from a queue refilled by batch × Ahead, Ahead on the main chain %t (FARM_CLAIM_AHEAD), always in lanes", aheadOn)
	}
	spread := "over a work period"
	if c.spread >= 0 {
		spread = "over " + c.spread.String()
	}
	return fmt.Sprintf("latency %v a call, server capacity %s (FIFO), %d cases asked per claim, %v of work per batch, void after %v, %s, %s, farms in %s, GOMAXPROCS %d%s, start hints %t (FARM_SCALE_HINT), claimers started %s",
		c.latency, capa, c.batch, c.work, c.voidAfter, ahead, lanes, c.dir, runtime.GOMAXPROCS(0), chains, c.hint, spread)
}

// The kinds of call (countingFS), in the order they are printed when tied.
var scaleKinds = []string{"stat", "mknod", "mknod.fifo", "create", "open", "open.path", "read", "write", "close", "fstat", "unlink", "rename", "link", "mkdir", "fsync"}

var scaleKindIndex = func() map[string]int {
	m := map[string]int{}
	for i, k := range scaleKinds {
		m[k] = i
	}
	return m
}()

// exclusive kinds: their outcome (won, lost to an existing name) is counted.
func exclusiveKind(k string) bool { return k == "mknod" || k == "mknod.fifo" || k == "create" }

// callCounts are the calls counted in a window.
type callCounts struct {
	byKind    [16]atomic.Int64
	won, lost [16]atomic.Int64 // exclusive creates, by kind: made the name, found it made (EEXIST)
	otherErr  atomic.Int64     // exclusive creates that failed otherwise
	queued    atomic.Int64     // nanoseconds waited for the server, summed
	overshoot atomic.Int64     // nanoseconds slept past the model's time, summed
	waited    atomic.Int64     // nanoseconds from a call's start to its being made, summed
}

func (cc *callCounts) total() int64 {
	var n int64
	for i := range cc.byKind {
		n += cc.byKind[i].Load()
	}
	return n
}

// fsModel is the metadata server every call of the claim path goes
// through (countingFS).
type fsModel struct {
	latency time.Duration
	service time.Duration // 1/capacity; 0: unbounded

	mu   sync.Mutex
	free time.Time // when the server has served every call it was given

	from, to time.Time // calls made from to to are counted (set before the claimers start)
	cc       callCounts

	// trace: every call is recorded with its goroutine (BenchmarkClaimScaleEnd).
	trace  atomic.Bool
	tmu    sync.Mutex
	traced []tracedCall

	excl [16]func(error) // count an exclusive create's outcome, by kind
}

type tracedCall struct {
	g    uint64
	at   time.Time
	kind int
	wait time.Duration // its wait for the server
}

func newFSModel(c scaleConfig) *fsModel {
	m := &fsModel{latency: c.latency, free: time.Now()}
	if c.capacity > 0 {
		m.service = time.Duration(float64(time.Second) / c.capacity)
	}
	for k, kind := range scaleKinds {
		if !exclusiveKind(kind) {
			continue
		}
		m.excl[k] = func(err error) {
			switch {
			case err == nil:
				m.cc.won[k].Add(1)
			case errors.Is(err, unix.EEXIST):
				m.cc.lost[k].Add(1)
			default:
				m.cc.otherErr.Add(1)
			}
		}
	}
	return m
}

// call is countingFS.on: the call's turn at the server, then the round trip.
func (m *fsModel) call(kind string) func(error) {
	now := time.Now()
	start, end := now, now
	if m.service > 0 {
		m.mu.Lock()
		if m.free.After(start) {
			start = m.free
		}
		end = start.Add(m.service)
		m.free = end
		m.mu.Unlock()
	}
	due := end.Add(m.latency)
	k := scaleKindIndex[kind]
	counted := !now.Before(m.from) && now.Before(m.to)
	if counted {
		m.cc.byKind[k].Add(1)
		m.cc.queued.Add(int64(start.Sub(now)))
	}
	if m.trace.Load() {
		g := goid()
		m.tmu.Lock()
		m.traced = append(m.traced, tracedCall{g: g, at: now, kind: k, wait: start.Sub(now)})
		m.tmu.Unlock()
	}
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
	if !counted {
		return nil
	}
	m.cc.overshoot.Add(int64(time.Since(due)))
	m.cc.waited.Add(int64(time.Since(now)))
	return m.excl[k]
}

// goid is the calling goroutine's ID (from its stack's first line).
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return n
}

// scaleFarm makes a farm in a new directory under base, with run 1 started
// on a private copy of a table of n cases (as farm submit starts it:
// tableIDOn recorded, the cursor at 0). It returns the farm
// directory and a function that removes it.
func scaleFarm(b *testing.B, base string, n, lanes, jobs int) (string, func()) {
	b.Helper()
	dir, err := os.MkdirTemp(base, "farm-scale-")
	if err != nil {
		b.Fatal(err)
	}
	misc := filepath.Join(dir, "MISC")
	if err := os.Mkdir(misc, 0o755); err != nil {
		b.Fatal(err)
	}
	table := "MISC/table.run1.bench"
	fh, err := os.Create(filepath.Join(dir, table))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	var line []byte
	for i := 1; i <= n; i++ {
		line = strconv.AppendInt(line[:0], int64(i), 10)
		line = append(line, " true\n"...)
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fh.Close()
	size, ino, fp, err := tableIDOn(vfs.OS{}, filepath.Join(dir, table))
	if err != nil {
		b.Fatal(err)
	}
	set, err := makeSet(vfs.OS{}, dir, misc, 1, State{Table: table, TSize: size, TIno: ino, TFP: fp}, int64(n), lanes, jobs)
	if err != nil {
		b.Fatal(err)
	}
	st := NewStore(dir, misc)
	defer st.Close()
	if err := st.Update(context.Background(), func(s *State) error {
		s.startRun(RunSpec{Run: 1, Table: table, Cases: int64(n), MaxID: int64(n)}, []Set{set})
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	scaleHints.Store(dir, st.vouch()) // as StartRun does
	return dir, func() { os.RemoveAll(dir) }
}

// scaleHints holds each farm's start hint, by its directory (scaleFarm).
var scaleHints sync.Map

// useHint gives st the start hint of the farm dir, if the claimers start with one.
func (c scaleConfig) useHint(st *Store, dir string) {
	if h, ok := scaleHints.Load(dir); ok && c.hint {
		st.UseHint(h.(string))
	}
}

// startDelay is when a claimer starts: at a random moment over the spread.
func (c scaleConfig) startDelay(work time.Duration) time.Duration {
	if c.spread >= 0 {
		work = c.spread
	}
	if work <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(work)))
}

// checkFDs makes sure n claimers can have their descriptors open (a Store
// holds up to 4, and opens 2 more for a moment).
func checkFDs(b *testing.B, n int) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		b.Fatal(err)
	}
	need := uint64(6*n + 256)
	if rl.Cur >= need {
		return
	}
	if rl.Max >= need {
		rl.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err == nil {
			return
		}
	}
	b.Fatalf("%d claimers need about %d descriptors; RLIMIT_NOFILE is %d (hard %d)", n, need, rl.Cur, rl.Max)
}

// logLines is a Store's Log: it keeps the first lines said, and counts them.
type logLines struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.n++
		if len(l.first) < 5 {
			l.first = append(l.first, s)
		}
	}
	return len(p), nil
}

// claimRec is one claim, as its claimer saw it.
type claimRec struct {
	start, end time.Time
	cases      int
	commit     bool // served by a Store.Claim, not from the queue
}

// claimer is one claimer's record.
type claimerRec struct {
	g      uint64
	claims []claimRec
	ids    []int64
	err    error
	cut    time.Time // the start of the claim cancelled at the window's end, if any
	worked time.Time // the end of its last work period (BenchmarkClaimScaleEnd)
	began  time.Time // its start, and its first work period's (BenchmarkClaimScaleEnd)
	first  time.Time
	work   time.Duration // its work periods' sum
}

// workPeriod is a batch's work: c.work, or drawn from c.work to c.workMax.
func (c scaleConfig) workPeriod(id int64) time.Duration {
	if c.workMax > c.work && c.longest && c.total > 1 {
		return c.workMax - time.Duration(int64(c.workMax-c.work)*(id-1)/int64(c.total-1))
	}
	if c.workMax > c.work {
		return c.work + time.Duration(rand.Int64N(int64(c.workMax-c.work)))
	}
	return c.work
}

// refill is a claimer's commit when its queue is empty: a batch, or Ahead
// batches as a meta-job's batch sizer asks.
func (c scaleConfig) refill(ctx context.Context, st *Store) ([]tablefmt.Case, error) {
	k := c.batch
	if c.ahead {
		k *= st.Ahead()
	}
	return st.Claim(ctx, 1, k)
}

// collect waits for the claimers, stops the clock and the model, and
// fails on a claimer's error.
func collect(b *testing.B, wg *sync.WaitGroup, recs []*claimerRec, logs *logLines) {
	wg.Wait()
	b.StopTimer()
	defaultFS = faultFS{}
	for _, r := range recs {
		if r.err != nil {
			b.Fatal(r.err)
		}
	}
	if logs.n > 0 {
		b.Logf("the claimers said %d lines, the first: %q", logs.n, logs.first)
	}
}

// percentile returns the p quantile of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(p * float64(len(d)))
	return d[min(i, len(d)-1)]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

// checkExact fails b if a case ID was handed out twice, or if the IDs
// handed out are not 1..claimed, claimed being what the farm's state says
// was claimed.
func checkExact(b *testing.B, dir string, recs []*claimerRec) (total int64) {
	b.Helper()
	st, err := NewStore(dir, filepath.Join(dir, "MISC")).Read(context.Background())
	if err != nil {
		b.Fatalf("reading the final state: %v", err)
	}
	seen := make([]bool, st.Cases+1)
	dups, bad := 0, 0
	for _, r := range recs {
		for _, id := range r.ids {
			switch {
			case id < 1 || id > st.Cases:
				bad++
			case seen[id]:
				if dups++; dups <= 5 {
					b.Errorf("case %d handed out twice", id)
				}
			default:
				seen[id] = true
			}
			total++
		}
	}
	missing := 0
	for _, id := range claimedIDs(b, dir, st) {
		if !seen[id] {
			missing++
		}
	}
	if dups > 0 || bad > 0 || missing > 0 || total != st.Claimed {
		b.Fatalf("not exact: %d IDs handed out twice, %d out of range, %d of the %d claimed in the state never handed out, %d handed out", dups, bad, missing, st.Claimed, total)
	}
	return total
}

// claimedIDs is what the state st of a bench farm (case i on line i) says
// was claimed: the first Claimed cases of each lane's blocks.
func claimedIDs(b *testing.B, dir string, st State) []int64 {
	var ids []int64
	s := NewStore(dir, filepath.Join(dir, "MISC"))
	defer s.Close()
	L, err := s.openSet(st.Run, st.Sets[0], false)
	if err != nil {
		b.Fatal(err)
	}
	for l := 0; l < L.x.lanes; l++ {
		ls := newLaneStore(&Opts{Dir: dir}, vfs.OS{}, filepath.Join(dir, "MISC"), filepath.Join(L.dir, strconv.Itoa(l)))
		if err := ls.refresh(); err != nil {
			b.Fatal(err)
		}
		left := ls.cur.Claimed
		ls.close()
		if L.x.sweep(l) { // the tickets: those their owners claimed, and the void ones the sweep passed
			marks, err := L.listTickets(vfs.OS{})
			if err != nil {
				b.Fatal(err)
			}
			for j, dt := range marks {
				if kind, _ := kindOf(dt); kind == ticketClaimed || kind == ticketVoid && j < ls.cur.Lines {
					ids = append(ids, j+1)
				}
			}
			continue
		}
		first, step, limit := L.x.span(l)
		for blk := first; blk < limit && left > 0; blk += step {
			for id := blk*L.x.block + 1; id <= min((blk+1)*L.x.block, L.x.cases) && left > 0; id++ {
				ids = append(ids, id)
				left--
			}
		}
	}
	return ids
}

// topKinds says the kinds with the most calls, per claim.
func topKinds(cc *callCounts, per float64, most int) string {
	type kv struct {
		k string
		n int64
	}
	var kvs []kv
	for i, k := range scaleKinds {
		if n := cc.byKind[i].Load(); n > 0 {
			kvs = append(kvs, kv{k, n})
		}
	}
	sort.SliceStable(kvs, func(i, j int) bool { return kvs[i].n > kvs[j].n })
	var parts []string
	for i, e := range kvs {
		if i == most {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", e.k, float64(e.n)/per))
	}
	return strings.Join(parts, ", ")
}

var scaleHeader sync.Once

// BenchmarkClaimScale: N claimers over the modelled server, for each N of
// FARM_SCALE_N; one table row per N (on stdout) and the main figures as
// metrics. b.N is not used: each N is one measurement of FARM_SCALE_SECONDS.
func BenchmarkClaimScale(b *testing.B) {
	c := scaleSettings(b)
	old := voidAfter
	voidAfter = c.voidAfter
	defer func() { voidAfter = old }()
	warm := "2 work periods, at least 2 s"
	if c.warm > 0 {
		warm = c.warm.String()
	}
	fmt.Printf("\nBenchmarkClaimScale: %v; %v measured per N, after a warm-up (%s)\n", c, c.seconds, warm)
	for _, n := range c.ns {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) { claimScale(b, c, n) })
	}
}

func claimScale(b *testing.B, c scaleConfig, n int) {
	checkFDs(b, n)
	// Claimers start at random moments over one work period (meta-jobs
	// start when the scheduler starts them, not all at once); the window
	// opens once each has had time for a claim and a batch.
	work := max(c.work, time.Millisecond)
	warm := max(2*c.work, 2*time.Second)
	if c.warm > 0 {
		warm = c.warm
	}
	// Enough cases that nobody runs out: N claimers, each at most one
	// claim a work period (claims take time too), over the whole run.
	periods := int64((warm+c.seconds+2*work)/work) + 2
	cases := int64(n)*int64(c.batch)*periods*6/5 + 1000
	// FARM_SCALE_CHAINS farms, claimer i on farm i mod chains: what claims
	// spread over that many chains, sharing one server, could give.
	dirs := make([]string, c.chains)
	for l := range dirs {
		d, cleanup := scaleFarm(b, c.dir, int(cases)/c.chains+1000, c.lanesFor((n+c.chains-1)/c.chains), (n+c.chains-1)/c.chains)
		defer cleanup()
		dirs[l] = d
	}

	model := newFSModel(c)
	logs := &logLines{}
	recs := make([]*claimerRec, n)
	t0 := time.Now()
	winStart := t0.Add(warm)
	winEnd := winStart.Add(c.seconds)
	model.from, model.to = winStart, winEnd
	// Claims still going at the window's end are cancelled (they count
	// for nothing: only claims that end in the window are counted).
	ctx, cancel := context.WithDeadline(context.Background(), winEnd)
	defer cancel()
	defaultFS = countingFS{on: model.call}
	defer func() { defaultFS = faultFS{} }()
	// Every call is traced with its claimer until the window opens: the
	// herd's calls (each claimer's until its first claim ended).
	model.trace.Store(true)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range n {
		r := &claimerRec{}
		recs[i] = r
		delay := c.startDelay(work)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.g = goid()
			c.claimer(ctx, i, dirs[i%c.chains], r, logs, delay, winEnd, cases)
		}()
	}
	go func() { // the window opens: stop tracing
		time.Sleep(time.Until(winStart))
		model.trace.Store(false)
	}()
	collect(b, &wg, recs, logs)
	herd := herdFigures(model, recs, t0, c.capacity)
	for l, dir := range dirs {
		var on []*claimerRec
		for i := l; i < n; i += c.chains {
			on = append(on, recs[i])
		}
		checkExact(b, dir, on)
	}

	w := measureWindow(recs, winStart, winEnd)
	reportScale(b, c, n, &model.cc, w, herd)
}

// claimer is claimer i of a BenchmarkClaimScale run on the farm dir: it
// waits delay, then claims a batch (or Ahead batches, when its queue is
// empty) and works for a work period, until winEnd; r records its claims.
func (c scaleConfig) claimer(ctx context.Context, i int, dir string, r *claimerRec, logs *logLines, delay time.Duration, winEnd time.Time, cases int64) {
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	st.Job = "bench." + strconv.Itoa(i)
	st.Log = logs
	c.useHint(st, dir)
	defer st.Close()
	time.Sleep(delay)
	queued := 0          // cases claimed and not yet worked on
	var looked time.Time // its last look at the run, from its first claim
	for {
		t := time.Now()
		if !t.Before(winEnd) {
			return
		}
		if c.look > 0 && !looked.IsZero() && t.Sub(looked) >= c.look {
			looked = t
			if _, _, err := st.Look(ctx, false); err != nil && ctx.Err() == nil {
				r.err = err
				return
			}
		}
		commit := queued == 0
		if commit {
			got, err := c.refill(ctx, st)
			if err != nil && ctx.Err() != nil {
				r.cut = t // the window's end: a claim that won returns its cases first
				return
			}
			if err != nil {
				r.err = err
				return
			}
			if len(got) == 0 {
				r.err = fmt.Errorf("claimer %d found no case left: the table (%d cases) is too small", i, cases)
				return
			}
			for _, cs := range got {
				r.ids = append(r.ids, cs.ID)
			}
			queued = len(got)
			if looked.IsZero() {
				looked = t
			}
		}
		e := time.Now()
		take := min(queued, c.batch)
		queued -= take
		r.claims = append(r.claims, claimRec{start: t, end: e, cases: take, commit: commit})
		time.Sleep(min(c.work, time.Until(winEnd)))
	}
}

// scaleWindow is what the claimers of a BenchmarkClaimScale run did: the
// claims that ended in its window (the cases they handed out, those that
// committed), and the latencies, sorted: of those claims but each
// claimer's first (lat), of the commits among them (clat), of each
// claimer's first claim, in or out of the window (first), and how long
// the claims still going at the window's end had been going (cut).
type scaleWindow struct {
	lat, clat, first, cut []time.Duration
	claims, commits, got  int64
}

// measureWindow is the scaleWindow of recs between winStart and winEnd.
func measureWindow(recs []*claimerRec, winStart, winEnd time.Time) (w scaleWindow) {
	// Claims that ended in the window; the latencies without each
	// claimer's first claim (which opens the chain), given apart.
	for _, r := range recs {
		for j, cl := range r.claims {
			d := cl.end.Sub(cl.start)
			if j == 0 {
				w.first = append(w.first, d)
			}
			if cl.end.Before(winStart) || cl.end.After(winEnd) {
				continue
			}
			w.claims++
			w.got += int64(cl.cases)
			if j > 0 {
				w.lat = append(w.lat, d)
				if cl.commit {
					w.clat = append(w.clat, d)
				}
			}
			if cl.commit {
				w.commits++
			}
		}
	}
	slices.Sort(w.lat)
	slices.Sort(w.clat)
	slices.Sort(w.first)
	// Claims still going at the window's end: the latencies above are of
	// claims that ended, and say nothing of these.
	for _, r := range recs {
		if !r.cut.IsZero() {
			w.cut = append(w.cut, winEnd.Sub(r.cut))
		}
	}
	slices.Sort(w.cut)
	return w
}

// reportScale prints the line of the table of BenchmarkClaimScale for n
// claimers, and its details, from the calls counted (cc) and the window w,
// and reports its metrics.
func reportScale(b *testing.B, c scaleConfig, n int, cc *callCounts, w scaleWindow, herd string) {
	secs := c.seconds.Seconds()
	calls := cc.total()
	perClaim := float64(max(w.claims, 1))
	util := "-"
	if c.capacity > 0 {
		util = fmt.Sprintf("%.0f%%", 100*float64(calls)/secs/c.capacity)
	}
	var won, lost int64
	var exclBy []string
	for k, kind := range scaleKinds {
		if w, l := cc.won[k].Load(), cc.lost[k].Load(); w+l > 0 {
			won, lost = won+w, lost+l
			exclBy = append(exclBy, fmt.Sprintf("%s %.2f won, %.2f lost", kind, float64(w)/perClaim, float64(l)/perClaim))
		}
	}
	excl := won + lost + cc.otherErr.Load()
	scaleHeader.Do(func() {
		fmt.Printf("| N | claims/s (wanted N/work) | cases/s | calls/claim | top kinds per claim | exclusive creates/claim (lost) | claim p50 / p99 / max ms | still claiming at the end (oldest s) | first claim p50 / max ms (ended) | server busy | a call's wait, mean ms: all / queued / overslept |\n")
		fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|\n")
	})
	fmt.Printf("| %d | %.1f (%.1f) | %.0f | %.1f | %s | %.2f (%.2f) | %s / %s / %s | %d (%.1f) | %s / %s (%d) | %s | %s / %s / %s |\n",
		n, float64(w.claims)/secs, float64(n)/c.work.Seconds(), float64(w.got)/secs,
		float64(calls)/perClaim, topKinds(cc, perClaim, 5),
		float64(excl)/perClaim, float64(lost)/perClaim,
		ms(percentile(w.lat, 0.5)), ms(percentile(w.lat, 0.99)), ms(percentile(w.lat, 1)),
		len(w.cut), percentile(w.cut, 1).Seconds(),
		ms(percentile(w.first, 0.5)), ms(percentile(w.first, 1)), len(w.first),
		util, ms(time.Duration(cc.waited.Load()/max(calls, 1))), ms(time.Duration(cc.queued.Load()/max(calls, 1))),
		ms(time.Duration(cc.overshoot.Load()/max(calls, 1))))
	fmt.Printf("   N=%d: the herd: %s\n", n, herd)
	fmt.Printf("   N=%d: %d claims ended in the window, %d of them by a commit (%.1f commits/s; %.1f calls a commit; commit p50 / p99 %s / %s ms); calls per claim by kind: %s; exclusive creates per claim: %s\n",
		n, w.claims, w.commits, float64(w.commits)/secs, float64(calls)/float64(max(w.commits, 1)),
		ms(percentile(w.clat, 0.5)), ms(percentile(w.clat, 0.99)),
		topKinds(cc, perClaim, len(scaleKinds)), strings.Join(exclBy, "; "))
	if cc.otherErr.Load() > 0 {
		fmt.Printf("   (%d exclusive creates failed with another error than EEXIST)\n", cc.otherErr.Load())
	}
	b.ReportMetric(float64(w.claims)/secs, "claims/s")
	b.ReportMetric(float64(w.got)/secs, "cases/s")
	b.ReportMetric(float64(calls)/perClaim, "calls/claim")
	b.ReportMetric(float64(excl)/perClaim, "excl/claim")
	b.ReportMetric(float64(lost)/perClaim, "excl-lost/claim")
	b.ReportMetric(float64(percentile(w.lat, 0.5))/1e6, "p50-ms")
	b.ReportMetric(float64(percentile(w.lat, 0.99))/1e6, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkClaimScaleEnd: the end of a run. FARM_SCALE_END_N claimers
// claim a table of 2 batches each until a Claim hands them nothing
// (then they stop, as a meta-job does). It reports the time from the
// moment the last case was handed out (the return of the Claim that handed
// it) until every claimer's Claim had returned no case, and the calls each
// claimer made in that time. Its claimers size their claims as a meta-job
// does (endBatch): FARM_SCALE_BATCH × Ahead is only their most.
func BenchmarkClaimScaleEnd(b *testing.B) {
	c := scaleSettings(b)
	old := voidAfter
	voidAfter = c.voidAfter
	defer func() { voidAfter = old }()
	n := c.endN
	checkFDs(b, n)
	cases := n * c.batch * 2
	if c.endCases > 0 {
		cases = c.endCases
	}
	c.total = cases
	fmt.Printf("\nBenchmarkClaimScaleEnd: %v; %d claimers, %d cases\n", c, n, cases)
	dir, cleanup := scaleFarm(b, c.dir, cases, c.lanesFor(n), n)
	defer cleanup()

	model := newFSModel(c)
	model.to = time.Now().Add(24 * time.Hour)
	model.trace.Store(true)
	logs := &logLines{}
	recs := make([]*claimerRec, n)
	defaultFS = countingFS{on: model.call}
	defer func() { defaultFS = faultFS{} }()
	b.ResetTimer()
	t0 := time.Now()
	work := max(c.work, time.Millisecond)
	var wg sync.WaitGroup
	for i := range n {
		r := &claimerRec{}
		recs[i] = r
		delay := c.startDelay(work)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.endClaimer(i, dir, r, logs, delay)
		}()
	}
	collect(b, &wg, recs, logs)
	if total := checkExact(b, dir, recs); total != int64(cases) {
		b.Fatalf("%d cases handed out of %d", total, cases)
	}
	// The last case handed out, and each claimer's stop.
	last := lastHandedOut(recs)
	stopAt, stops, byG, claimsAfter := stopsAfter(recs, last)
	perClaimer, cc, excl := callsAfter(model.traced, byG, last, stopAt)
	var sum int
	for _, k := range perClaimer {
		sum += k
	}
	var totalClaims int
	for _, r := range recs {
		totalClaims += len(r.claims)
	}
	// The end of the last work period (the last case's end), and the
	// last claimer's stop after it.
	var lastWork, lastStop time.Time
	for i, r := range recs {
		lastWork, lastStop = later(lastWork, r.worked), later(lastStop, stopAt[i])
	}
	big := largestClaim(recs)
	fmt.Printf("the largest claim: %d cases, at %.2f s\n", big.cases, big.end.Sub(t0).Seconds())
	fmt.Println(endFigures(recs, t0, lastWork, lastStop, dir))
	fmt.Print(endTimeline(model.traced, recs, t0, lastStop))
	fmt.Printf("| N | cases | claims in all | last case handed out at | claims returning after it | claimers stopped after it, ms: p50 / max | every claimer stopped, after the last case's end | calls per claimer after it: mean / p50 / max | calls after it by kind, per claimer | exclusive creates after it |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d | %d | %d | %.2f s | %d | %s / %s | %s ms | %.1f / %d / %d | %s | %d |\n",
		n, cases, totalClaims, last.Sub(t0).Seconds(), claimsAfter,
		ms(percentile(stops, 0.5)), ms(percentile(stops, 1)), ms(max(lastStop.Sub(lastWork), 0)),
		float64(sum)/float64(n), perClaimer[n/2], perClaimer[n-1],
		topKinds(cc, float64(n), 6), excl)
	b.ReportMetric(float64(percentile(stops, 1))/1e6, "stop-max-ms")
	b.ReportMetric(float64(max(lastStop.Sub(lastWork), 0))/1e6, "gone-after-last-end-ms")
	b.ReportMetric(float64(sum)/float64(n), "calls/claimer-after")
	b.ReportMetric(0, "ns/op")
}

// endTimeline is the run's calls and hand-outs by 20 s: calls a second
// (the most frequent kinds), their mean wait for the server, the cases
// handed out, and the claimers in a claim at the window's end.
func endTimeline(traced []tracedCall, recs []*claimerRec, t0, end time.Time) string {
	const step = 20 * time.Second
	w := int(end.Sub(t0)/step) + 1
	calls := make([][16]int, w) // by kind, as callCounts
	wait := make([]time.Duration, w)
	cases := make([]int, w)
	for _, tc := range traced {
		if i := int(tc.at.Sub(t0) / step); i >= 0 && i < w {
			calls[i][tc.kind]++
			wait[i] += tc.wait
		}
	}
	for _, r := range recs {
		for _, cl := range r.claims {
			if i := int(cl.end.Sub(t0) / step); i >= 0 && i < w {
				cases[i] += cl.cases
			}
		}
	}
	var b strings.Builder
	b.WriteString("| from, s | calls/s | most: kind/s | mean wait for the server, ms | cases handed out | in a claim at its end |\n|---|---|---|---|---|---|\n")
	for i := range w {
		at := t0.Add(time.Duration(i+1) * step)
		inClaim := 0
		for _, r := range recs {
			for _, cl := range r.claims {
				if cl.start.Before(at) && cl.end.After(at) {
					inClaim++
				}
			}
		}
		n, top := 0, []string{}
		kinds := make([]int, len(scaleKinds))
		for k := range kinds {
			n += calls[i][k]
			kinds[k] = k
		}
		sort.Slice(kinds, func(a, c int) bool { return calls[i][kinds[a]] > calls[i][kinds[c]] })
		for _, k := range kinds[:3] {
			top = append(top, fmt.Sprintf("%s %.0f", scaleKinds[k], float64(calls[i][k])/step.Seconds()))
		}
		fmt.Fprintf(&b, "| %d | %.0f | %s | %.1f | %d | %d |\n", i*int(step.Seconds()), float64(n)/step.Seconds(),
			strings.Join(top, ", "), float64(wait[i])/float64(max(n, 1))/1e6, cases[i], inClaim)
	}
	return b.String()
}

// endClaimer is claimer i of a BenchmarkClaimScaleEnd run on the farm
// dir: it waits delay, then claims (when its queue is empty) and works for
// a work period a batch, until a Claim hands it nothing; r records its
// claims and its goroutine.
func (c scaleConfig) endClaimer(i int, dir string, r *claimerRec, logs *logLines, delay time.Duration) {
	r.g = goid()
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	st.Job = "bench." + strconv.Itoa(i)
	st.Log = logs
	c.useHint(st, dir)
	defer st.Close()
	time.Sleep(delay)
	r.began = time.Now()
	ctx := context.Background()
	queued := 0
	for {
		if queued == 0 {
			t := time.Now()
			got, err := st.Claim(ctx, 1, c.endBatch(st, r))
			e := time.Now()
			if err != nil {
				r.err = err
				return
			}
			r.claims = append(r.claims, claimRec{start: t, end: e, cases: len(got), commit: true})
			if len(got) == 0 {
				return
			}
			for _, cs := range got {
				r.ids = append(r.ids, cs.ID)
			}
			queued = len(got)
		}
		id := r.ids[len(r.ids)-queued]
		if c.workMax > c.work {
			queued-- // cases of unequal length: a work period each
		} else {
			queued -= min(queued, c.batch)
		}
		if r.first.IsZero() {
			r.first = time.Now()
		}
		w := c.workPeriod(id)
		time.Sleep(w)
		r.work += w
		r.worked = time.Now()
	}
}

// endBatch is the size of a BenchmarkClaimScaleEnd claimer's next claim,
// as metajob's batchSizer picks it: the store's (FirstBatch) first, one
// while no case has ended, then Ahead × a second of work (BatchSeconds)
// by the mean of its cases so far, doubling at most — never more than
// FARM_SCALE_BATCH × Ahead. (Cases of seconds are claimed one at a time,
// as a meta-job claims them.)
func (c scaleConfig) endBatch(st *Store, r *claimerRec) int {
	if len(r.claims) == 0 {
		return FirstBatch
	}
	if r.worked.IsZero() {
		return 1
	}
	ahead := 1
	if c.ahead {
		ahead = st.Ahead()
	}
	last := r.claims[len(r.claims)-1].cases
	mean := r.work.Seconds() / float64(len(r.ids))
	return max(1, min(int(float64(ahead)/mean), 2*last, c.batch*ahead))
}

// stopsAfter returns when each claimer of recs stopped (the end of its
// last claim), how long after last each did (sorted), the claimers by
// goroutine, and how many claims returned after last.
func stopsAfter(recs []*claimerRec, last time.Time) (stopAt []time.Time, stops []time.Duration, byG map[uint64]int, claimsAfter int) {
	byG = map[uint64]int{}
	stopAt = make([]time.Time, len(recs))
	for i, r := range recs {
		byG[r.g] = i
		stop := r.claims[len(r.claims)-1].end
		stopAt[i] = stop
		stops = append(stops, stop.Sub(last))
		for _, cl := range r.claims {
			if cl.end.After(last) {
				claimsAfter++
			}
		}
	}
	slices.Sort(stops)
	return stopAt, stops, byG, claimsAfter
}

// lastHandedOut is the end of the last claim of recs that handed out
// cases.
func lastHandedOut(recs []*claimerRec) (last time.Time) {
	for _, r := range recs {
		for _, cl := range r.claims {
			if cl.cases > 0 && cl.end.After(last) {
				last = cl.end
			}
		}
	}
	return last
}

// largestClaim is the claim of recs that handed out the most cases.
func largestClaim(recs []*claimerRec) (big claimRec) {
	for _, r := range recs {
		for _, cl := range r.claims {
			if cl.cases > big.cases {
				big = cl
			}
		}
	}
	return big
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// callsAfter counts the traced calls of each claimer (by goroutine, byG)
// from the last case handed out to its stop (not its Store's Close after
// it): per claimer (sorted), by kind, and the exclusive creates.
func callsAfter(traced []tracedCall, byG map[uint64]int, last time.Time, stopAt []time.Time) (perClaimer []int, cc *callCounts, excl int64) {
	perClaimer = make([]int, len(stopAt))
	var kinds [16]int64
	for _, tc := range traced {
		i, ok := byG[tc.g]
		if !ok || !tc.at.After(last) || tc.at.After(stopAt[i]) {
			continue
		}
		perClaimer[i]++
		kinds[tc.kind]++
		if exclusiveKind(scaleKinds[tc.kind]) {
			excl++
		}
	}
	slices.Sort(perClaimer)
	cc = &callCounts{}
	for i, k := range kinds {
		cc.byKind[i].Store(k)
	}
	return perClaimer, cc, excl
}

// herdFigures describes the claimers' first claims, from the calls traced
// before the window: the calls each made until its first claim ended (by
// kind, mean), and how busy the server was until the last of them ended.
func herdFigures(m *fsModel, recs []*claimerRec, t0 time.Time, capacity float64) string {
	m.tmu.Lock()
	defer m.tmu.Unlock()
	firstEnd := map[uint64]time.Time{}
	var last time.Time
	for _, r := range recs {
		if len(r.claims) > 0 {
			e := r.claims[0].end
			firstEnd[r.g] = e
			if e.After(last) {
				last = e
			}
		}
	}
	if len(firstEnd) == 0 {
		return "no claimer ended a first claim"
	}
	var per []int
	counts := map[uint64]int{}
	byKind := make([]int, len(scaleKinds))
	total := 0 // every call until the last first claim ended
	for _, tc := range m.traced {
		if tc.at.After(last) {
			continue
		}
		total++
		if e, ok := firstEnd[tc.g]; ok && !tc.at.After(e) {
			counts[tc.g]++
			byKind[tc.kind]++
		}
	}
	for g := range firstEnd {
		per = append(per, counts[g])
	}
	slices.Sort(per)
	sum := 0
	for _, v := range per {
		sum += v
	}
	nf := float64(len(per))
	var kinds []string
	for k, kind := range scaleKinds {
		if byKind[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %.1f", kind, float64(byKind[k])/nf))
		}
	}
	busy := "-"
	if span := last.Sub(t0).Seconds(); capacity > 0 && span > 0 {
		busy = fmt.Sprintf("%.0f%%", 100*float64(total)/span/capacity)
	}
	var lat []time.Duration // each first claim's, from its start
	for _, r := range recs {
		if len(r.claims) > 0 {
			lat = append(lat, r.claims[0].end.Sub(r.claims[0].start))
		}
	}
	slices.Sort(lat)
	cut := "" // calls are traced until the window opens
	if last.After(m.from) {
		n := 0
		for _, r := range recs {
			if len(r.claims) > 0 && r.claims[0].end.After(m.from) {
				n++
			}
		}
		cut = fmt.Sprintf(" (calls after the warm-up not traced: %d first claims ended past it; FARM_SCALE_WARMUP=30s counts them whole)", n)
	}
	return fmt.Sprintf("%d first claims ended %.1f s after the start, each p50 / p99 / max %s / %s / %s ms; calls each until its first claim ended%s: mean %.1f, p50 %d, max %d (%s); server busy until then %s (%d calls)",
		len(per), last.Sub(t0).Seconds(), ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), ms(percentile(lat, 1)),
		cut, float64(sum)/nf, per[len(per)/2], per[len(per)-1], strings.Join(kinds, ", "), busy, total)
}

// endFigures are a BenchmarkClaimScaleEnd run's efficiency (work ÷
// (claimers × the time to the last claimer's stop)), its claimers' start
// to first work period, and when each lane's x.ℓ mark and its set's end
// mark were made, from the last work period's end.
func endFigures(recs []*claimerRec, t0, lastWork, lastStop time.Time, dir string) string {
	var work time.Duration
	var firsts, works []time.Duration
	var firstClaims []int
	var lat, inClaims []time.Duration // each claim's time; each claimer's time in claims
	var longAt []string               // the claims over 5 s: which of the claimer's, when, s
	for _, r := range recs {
		var in time.Duration
		for k, cl := range r.claims {
			lat = append(lat, cl.end.Sub(cl.start))
			in += cl.end.Sub(cl.start)
			if d := cl.end.Sub(cl.start); d > 5*time.Second && len(longAt) < 8 {
				longAt = append(longAt, fmt.Sprintf("#%d at %.1f for %.1f", k+1, cl.start.Sub(t0).Seconds(), d.Seconds()))
			}
		}
		inClaims = append(inClaims, in)
		work += r.work
		works = append(works, r.work)
		if !r.first.IsZero() {
			firsts = append(firsts, r.first.Sub(r.began))
		}
		if len(r.claims) > 0 {
			firstClaims = append(firstClaims, r.claims[0].cases)
		}
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	sort.Slice(works, func(i, j int) bool { return works[i] < works[j] })
	sort.Ints(firstClaims)
	slices.Sort(lat)
	slices.Sort(inClaims)
	spread := fmt.Sprintf("; a claim, s: p50 %.2f p99 %.2f max %.2f; in claims a claimer, s: p50 %.1f max %.1f",
		percentile(lat, 0.5).Seconds(), percentile(lat, 0.99).Seconds(), percentile(lat, 1).Seconds(),
		percentile(inClaims, 0.5).Seconds(), percentile(inClaims, 1).Seconds())
	if len(longAt) > 0 {
		spread += " (claims over 5 s, the first few: " + strings.Join(longAt, ", ") + ")"
	}
	if len(works) > 0 && len(firstClaims) > 0 {
		// What decides the end: how evenly the work fell on the claimers,
		// and how much of it the first claims took.
		spread += fmt.Sprintf("; work a claimer, s: min %.0f p50 %.0f max %.0f; first claim, cases: p50 %d max %d",
			works[0].Seconds(), works[len(works)/2].Seconds(), works[len(works)-1].Seconds(),
			firstClaims[len(firstClaims)/2], firstClaims[len(firstClaims)-1])
	}
	eff := work.Seconds() / (float64(len(recs)) * lastStop.Sub(t0).Seconds())
	marks, _ := filepath.Glob(filepath.Join(dir, "MISC", "lanes.*", "[xe]*"))
	var at []string
	for _, m := range marks {
		if fi, err := os.Stat(m); err == nil {
			at = append(at, fmt.Sprintf("%s %+.1f", filepath.Base(m), fi.ModTime().Sub(lastWork).Seconds()))
		}
	}
	return fmt.Sprintf("efficiency %.3f (%.0f s of work, %d claimers, %.1f s); start to first work, s: p50 %.2f p99 %.2f max %.2f%s; marks, s from the last work's end: %s",
		eff, work.Seconds(), len(recs), lastStop.Sub(t0).Seconds(),
		percentile(firsts, 0.5).Seconds(), percentile(firsts, 0.99).Seconds(), percentile(firsts, 1).Seconds(), spread, strings.Join(at, ", "))
}
