package casetable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// The edges of the claim core (issue 21): what a claim does when the
// filesystem fails it at chosen calls (see fault in chain.go), checked with
// claimer processes where processes matter.

// parseFaults reads a fault plan: "op@N=ERRNO" or "op@N-M=ERRNO", comma
// separated: the Nth (to Mth) call of op fails with ERRNO (EIO, ENOENT,
// ENOTCONN, ETIMEDOUT, ESTALE, EMLINK). A rule may be followed by
// ">op*K=ERRNO" parts: once the rule has failed a call, the next K calls
// of that op fail too.
func parseFaults(spec string) (func(string) error, error) {
	type then struct {
		op  string
		k   int
		err error
	}
	type rule struct {
		op       string
		from, to int
		err      error
		then     []then
	}
	errnos := map[string]error{"EIO": syscall.EIO, "ENOENT": syscall.ENOENT, "ENOTCONN": syscall.ENOTCONN,
		"ETIMEDOUT": syscall.ETIMEDOUT, "ESTALE": syscall.ESTALE, "EMLINK": syscall.EMLINK}
	var rules []rule
	for _, r := range strings.Split(spec, ",") {
		parts := strings.Split(r, ">")
		op, rest, ok1 := strings.Cut(parts[0], "@")
		span, name, ok2 := strings.Cut(rest, "=")
		from, to, ranged := strings.Cut(span, "-")
		if !ranged {
			to = from
		}
		a, err1 := strconv.Atoi(from)
		b, err2 := strconv.Atoi(to)
		e, ok3 := errnos[name]
		if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad fault %q", r)
		}
		ru := rule{op: op, from: a, to: b, err: e}
		for _, p := range parts[1:] {
			top, rest, ok1 := strings.Cut(p, "*")
			k, name, ok2 := strings.Cut(rest, "=")
			n, err := strconv.Atoi(k)
			e, ok3 := errnos[name]
			if !ok1 || !ok2 || !ok3 || err != nil {
				return nil, fmt.Errorf("bad fault %q", p)
			}
			ru.then = append(ru.then, then{top, n, e})
		}
		rules = append(rules, ru)
	}
	seen := map[string]int{}
	armed := map[string][]then{}
	return func(op string) error {
		if a := armed[op]; len(a) > 0 {
			a[0].k--
			if a[0].k <= 0 {
				armed[op] = a[1:]
			}
			return a[0].err
		}
		seen[op]++
		for _, r := range rules {
			if r.op == op && seen[op] >= r.from && seen[op] <= r.to {
				for _, t := range r.then {
					armed[t.op] = append(armed[t.op], t)
				}
				return r.err
			}
		}
		return nil
	}, nil
}

// claimWithFaults runs procs claimers over a farm of n cases, claimer i with
// the fault plan plans[i%len(plans)], and checks that every case was
// claimed exactly once and every claimer ended well.
func claimWithFaults(t *testing.T, n, procs int, plans ...string) (dir string) {
	t.Helper()
	dir = newFarm(t, n)
	var cmds []*exec.Cmd
	var outs []string
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		out := fmt.Sprintf("%s/out.%d", dir, i)
		cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "OUT="+out,
			"CASETABLE_FAULTS="+plans[i%len(plans)])
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	runAll(t, cmds) // fails the test if a claimer exits with an error
	checkClaimedOnce(t, n, outs)
	return dir
}

// TestCommitMadeButReplyLostAndUnreadable: a commit is made at the server
// but its reply is lost (EIO), and what would tell the outcome fails for a
// while too (lookups of the mark, reads of the generation; on 149e76d the
// read-back of the linked generation and, after this fix, the st_nlink of
// the private file). The claimer must find out that the generation is
// its own, not commit anew and take it for another's: on 149e76d the batch
// of that generation was claimed by nobody (a gap).
func TestCommitMadeButReplyLostAndUnreadable(t *testing.T) {
	claimWithFaults(t, 2000, 4,
		"mark.reply@3=EIO>read*2=EIO>lookup*2=EIO",
		"mark.reply@5=EIO>read*1=ESTALE>lookup*3=EIO",
		"mark.reply@2-3=EIO>read*2=EIO",
		"mark.reply@7=EIO>read*3=EIO>lookup*1=EIO")
}

// TestClaimedCountedOnceWhenCommitUndecided: the counter a claim adds to
// counts once, and every case is claimed once, whatever the outcome of a
// commit took to be known (on 149e76d, with the farm-wide counter of cases
// done that the claim state held then: 44 after 42 claims, 293 of 300
// cases claimed).
func TestClaimedCountedOnceWhenCommitUndecided(t *testing.T) {
	dir := newFarm(t, 300)
	f, err := parseFaults("mark.reply@2=EIO>read*2=EIO>lookup*2=EIO,mark.reply@9=EIO>read*1=EIO")
	if err != nil {
		t.Fatal(err)
	}
	fault = f
	defer func() { fault = nil }()
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	st.Log = new(bytes.Buffer)
	defer st.Close()
	ctx := context.Background()
	claims, ids := 0, map[int64]int{}
	for {
		cases, err := st.Claim(ctx, 1, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(cases) == 0 {
			break
		}
		claims++
		for _, c := range cases {
			ids[c.ID]++
		}
	}
	fault = nil
	s, err := NewStore(dir, filepath.Join(dir, "MISC")).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	twice := 0
	for _, n := range ids {
		if n > 1 {
			twice++
		}
	}
	if s.Claimed != 300 || len(ids) != 300 || twice > 0 {
		t.Errorf("Claimed = %d after %d claims; %d distinct cases claimed, %d twice; want 300, 300, 0 (a commit counted once)", s.Claimed, claims, len(ids), twice)
	}
}

// TestTransientErrorsOnTheClaimPath: an I/O error, a server out of reach
// (ENOTCONN, ETIMEDOUT) or a stale handle on the table's stat, the table's
// read or a generation's lookup is retried: the claimer goes on. On
// 149e76d an EIO on the table's stat ended the claimer ("stat
// .../table.dat: input/output error"), and ENOTCONN and ETIMEDOUT were
// not retried anywhere.
func TestTransientErrorsOnTheClaimPath(t *testing.T) {
	claimWithFaults(t, 2000, 4,
		"table.stat@2=EIO,table.stat@6-7=ENOTCONN,lookup@4=ETIMEDOUT",
		"table.read@2=ETIMEDOUT,table.read@5=ESTALE,lookup@9-10=ENOTCONN",
		"lookup@3=EIO,table.stat@3=ESTALE,read@4=ENOTCONN",
		"table.stat@2=EIO")
}

// TestSpuriousENOENTFromLink: a commit that fails with ENOENT while the
// chain directory is there (GlusterFS answers a link so while a replica is
// down) is not damage: the commit is tried again. On 149e76d it was
// reported as "the chain directory is gone ... run 'farm repair'".
func TestSpuriousENOENTFromLink(t *testing.T) {
	claimWithFaults(t, 1000, 3, "mark@2=ENOENT", "mark@4-5=ENOENT,write@6=ENOENT", "")
}

// TestGoneChainDirectoryIsStillDamage: an ENOENT that is true (the chain
// directory removed) is still reported as damage, for 'farm repair'.
func TestGoneChainDirectoryIsStillDamage(t *testing.T) {
	dir := newFarm(t, 10)
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	st.Retry = 1 // not retried for long, if it were taken for transient
	defer st.Close()
	ctx := context.Background()
	if _, err := st.Claim(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(st.laneStore().ch.dir)
	_, err := st.Claim(ctx, 1, 1)
	if de := new(DamageError); !errorsAs(err, &de) {
		t.Errorf("claim after the lane's chain directory was removed: %v, want a DamageError", err)
	}
}

// TestEmptyClaimsCommitNothing: 256 claimer processes end a run of 300
// cases, one case a claim: exactly one generation per case is committed,
// none for the 256 claims that find nothing left (on 149e76d each of them
// committed one, every meta-job winning a generation in turn to learn that
// nothing was left).
func TestEmptyClaimsCommitNothing(t *testing.T) {
	const n, procs = 300, 256
	dir := newFarm(t, n)
	ctx := context.Background()
	misc := filepath.Join(dir, "MISC")
	before := laneGen(t, dir, 0)
	var cmds []*exec.Cmd
	var outs []string
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		out := fmt.Sprintf("%s/out.%d", dir, i)
		cmd.Env = append(os.Environ(), "CASETABLE_TEST_ROLE=claimer", "FARM_DIR="+dir, "OUT="+out,
			"CLAIM_BATCH=1", "CLAIM_WORK=20ms")
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	runAll(t, cmds)
	checkClaimedOnce(t, n, outs)
	after := laneGen(t, dir, 0)
	// A claimer stalled past voidAfter (1 s in these tests: a loaded
	// machine) has its generation voided: a number, not a commit.
	voids := 0
	c := laneChain(t, dir, 0)
	for g := before + 1; g <= after; g++ {
		if m, err := c.marker(g); err != nil {
			t.Fatal(err)
		} else if m == voided {
			voids++
		}
	}
	if got := after - before - int64(voids); got != n {
		t.Errorf("%d generations committed (and %d voided) for %d cases claimed one at a time by %d claimers; want %d (none for an empty claim)", got, voids, n, procs, n)
	}
	// A claim on a run with nothing left, or of an old run, commits
	// nothing either.
	st := NewStore(dir, misc)
	defer st.Close()
	for _, run := range []int{1, 0, 7} {
		if cases, err := st.Claim(ctx, run, 5); err != nil || len(cases) != 0 {
			t.Fatalf("claim of run %d: %v %v", run, cases, err)
		}
	}
	if g := laneGen(t, dir, 0); g != after {
		t.Errorf("empty claims moved the lane from generation %d to %d", after, g)
	}
}

// TestBuryFailuresAreSaidAndEMLINKMovesToAnotherTomb: a generation that
// cannot be buried is said once in the log (and the count when the store
// closes); a tomb with as many links as the filesystem allows (EMLINK) is
// left for tomb.1. On 149e76d both were silent, and every later
// generation kept its inode.
func TestBuryFailuresAreSaidAndEMLINKMovesToAnotherTomb(t *testing.T) {
	for _, tc := range []struct {
		plan string
		said int // log lines
	}{
		{"bury@11=EMLINK", 0}, // bury 1 is two links: the tomb made between
		{"bury@10-12=EIO", 2},
	} {
		t.Run(tc.plan, func(t *testing.T) {
			dir := newFarm(t, 2*buryAfter)
			f, err := parseFaults(tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			fault = f
			defer func() { fault = nil }()
			var log bytes.Buffer
			st := NewStore(dir, filepath.Join(dir, "MISC"))
			st.Log = &log
			ctx := context.Background()
			for i := 0; i < buryAfter+40; i++ {
				if _, err := st.Claim(ctx, 1, 1); err != nil {
					t.Fatal(err)
				}
			}
			chdir := st.laneStore().ch.dir
			st.Close()
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			if log.Len() == 0 {
				lines = nil
			}
			if len(lines) != tc.said {
				t.Fatalf("log has %d lines, want %d:\n%s", len(lines), tc.said, log.String())
			}
			if tc.said > 0 && (!strings.Contains(lines[0], "could not bury generation") || !strings.Contains(lines[1], "3 generations of the claim state could not be buried")) {
				t.Errorf("log:\n%s", log.String())
			}
			seg := filepath.Join(chdir, segName(0))
			var tomb, tomb1 unix.Stat_t
			unix.Stat(filepath.Join(seg, "tomb"), &tomb)
			err1 := unix.Stat(filepath.Join(seg, "tomb.1"), &tomb1)
			if tc.said == 0 {
				// The first 9 went to tomb; then EMLINK moved the rest to tomb.1.
				if err1 != nil || tomb1.Nlink < 20 || tomb.Nlink != 10 {
					t.Errorf("tomb has %d links, tomb.1 %d (%v); want 10 and the rest", tomb.Nlink, tomb1.Nlink, err1)
				}
			} else if err1 == nil {
				t.Errorf("tomb.1 made without EMLINK")
			}
		})
	}
}

func errorsAs(err error, target **DamageError) bool {
	for err != nil {
		if d, ok := err.(*DamageError); ok {
			*target = d
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// TestFailedReadLeavesNoOldBase: a store whose reading of the newest
// generation failed (for longer than its retries) must not commit its next
// claim on the generation it knew before: that would claim again what
// others claimed since. (Found in review: the chain's newest mark was known,
// its content not, and the next commit went past the mark from the old
// base.)
func TestFailedReadLeavesNoOldBase(t *testing.T) {
	dir := newFarm(t, 20)
	misc := filepath.Join(dir, "MISC")
	ctx := context.Background()
	a, b := NewStore(dir, misc), NewStore(dir, misc)
	a.Log, b.Log = new(bytes.Buffer), new(bytes.Buffer)
	a.Retry = 300 * time.Millisecond
	defer a.Close()
	defer b.Close()
	if cs, err := a.Claim(ctx, 1, 1); err != nil || len(cs) != 1 || cs[0].ID != 1 {
		t.Fatalf("a's first claim: %v %v", cs, err)
	}
	for i := 0; i < 3; i++ {
		if _, err := b.Claim(ctx, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	f, err := parseFaults("read@1-100000=EIO")
	if err != nil {
		t.Fatal(err)
	}
	fault = f
	cs, err := a.Claim(ctx, 1, 1)
	fault = nil
	if err == nil {
		t.Fatalf("a claim whose every read failed worked: %v", cs)
	}
	cs, err = a.Claim(ctx, 1, 1)
	if err != nil || len(cs) != 1 || cs[0].ID != 5 {
		t.Errorf("a's claim after a failed reading: %v %v; want case 5 (cases 2-4 were b's)", cs, err)
	}
}

// failOnce is the system's filesystem, but the first open of a name
// ending in suffix answers err (a network filesystem's passing fault)
// without opening it.
type failOnce struct {
	vfs.OS
	suffix string
	err    unix.Errno
	hit    *int
}

func (f failOnce) Openat(d int, name string, flags int, mode uint32) (int, error) {
	if strings.HasSuffix(name, f.suffix) && flags&unix.O_CREAT == 0 && *f.hit == 0 {
		*f.hit++
		return -1, f.err
	}
	return f.OS.Openat(d, name, flags, mode)
}

// A run start whose first look at its table answers a passing error
// retries it, as every other step of the start does (the simulator's
// submits failed at their first call, seed 8371 on nfs).
func TestStartRunRetriesItsTable(t *testing.T) {
	dir := newFarm(t, 10)
	hit := 0
	s := NewStoreOn(failOnce{suffix: "table.dat", err: unix.ETIMEDOUT, hit: &hit}, dir, filepath.Join(dir, "MISC"))
	s.Log = io.Discard
	defer s.Close()
	cur, err := NewStore(dir, filepath.Join(dir, "MISC")).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	spec := RunSpec{Base: cur.Gen, Chain: cur.Chain, Run: cur.Run + 1, Table: "table.dat", Cases: 10, Jobs: 1}
	if err := s.StartRun(context.Background(), spec); err != nil {
		t.Fatalf("a run start after one ETIMEDOUT on its table: %v", err)
	}
	if hit != 1 {
		t.Fatalf("the table's open failed %d times; want once", hit)
	}
	if st, err := NewStore(dir, filepath.Join(dir, "MISC")).Read(context.Background()); err != nil || st.Run != cur.Run+1 {
		t.Fatalf("after the start: %+v %v; want run %d", st, err, cur.Run+1)
	}
}

// farm add's first look at the table it queued answering a passing ENOENT
// (a GlusterFS brick down) is retried: the table is not removed and the
// error then taken for good (the simulator's long run, seed 307690 on
// gluster-dht).
func TestEnqueueRetriesItsTable(t *testing.T) {
	ctx := context.Background()
	dir := newFarm(t, 10)
	misc := filepath.Join(dir, "MISC")
	cur, err := NewStore(dir, misc).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run := cur.Run + 1
	if err := NewStore(dir, misc).StartRun(ctx, RunSpec{Base: cur.Gen, Chain: cur.Chain, Run: run, Table: "table.dat", Cases: 10, Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	hit := 0
	s := NewStoreOn(failOnce{suffix: fmt.Sprintf("table.run%d.add.t", run), err: unix.ENOENT, hit: &hit}, dir, misc)
	s.Log = io.Discard
	defer s.Close()
	q, err := s.Enqueue(ctx, run, "t", []byte("11 echo case 11\n"), 1, 11, false)
	if err != nil || q.Why != "" {
		t.Fatalf("farm add after a passing ENOENT on its table: %+v %v", q, err)
	}
	if hit != 1 {
		t.Fatalf("the table's open failed %d times; want once", hit)
	}
	if _, err := os.Stat(filepath.Join(dir, q.Table)); err != nil {
		t.Fatalf("the queued table: %v", err)
	}
}

// TestChainDirRemovedIsDamageAtOnce: a lane's chain directory removed under
// claimers that hold it open (their lookups through the open directory
// all answer ENOENT: marks seen, then not seen) is damage, said as such
// and at once, not retried as a cache's inconsistency (on 709e888 the
// meta-jobs retried for 5 minutes, then failed without naming it).
func TestChainDirRemovedIsDamageAtOnce(t *testing.T) {
	dir := newFarm(t, 200)
	misc := filepath.Join(dir, "MISC")
	a, b := NewStore(dir, misc), NewStore(dir, misc)
	defer a.Close()
	defer b.Close()
	var log bytes.Buffer
	a.Log, b.Log = &log, &log
	for i := 0; i < 6; i++ {
		if _, err := []*Store{a, b}[i%2].Claim(context.Background(), 1, FirstBatch); err != nil {
			t.Fatal(err)
		}
	}
	chains, _ := filepath.Glob(filepath.Join(misc, "lanes.*", "0"))
	for _, c := range chains {
		os.RemoveAll(c)
	}
	_, err := a.Claim(context.Background(), 1, 3)
	var de *DamageError
	if !errorsAs(err, &de) || !strings.Contains(err.Error(), "the chain directory is gone") {
		t.Fatalf("a claim after the chain's directory was removed: %v; want a DamageError naming it", err)
	}
	if strings.Contains(log.String(), "retrying") {
		t.Errorf("the damage was retried first:\n%s", log.String())
	}
}

// laneStore is the store of the lane s claimed in last.
func (s *Store) laneStore() *chainStore { return s.last.stores[s.last.home] }

// laneGen is the newest generation of lane l of the current run's first
// set.
func laneGen(t testing.TB, dir string, l int) int64 {
	t.Helper()
	c := laneChain(t, dir, l)
	n, err := c.latestNear(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A claim cancelled while it waits for the mark of a slot another took says
// it was cancelled (the command reports an interruption), not what the
// wait's last look answered.
func TestClaimCancelledWhileWaitingSaysSo(t *testing.T) {
	dir := newFarm(t, 20)
	st := NewStore(dir, filepath.Join(dir, "MISC"))
	defer st.Close()
	if _, err := st.Claim(context.Background(), 1, 1); err != nil {
		t.Fatal(err)
	}
	ls := st.laneStore()
	next := ls.gen + 1 // taken by a claimer that stalls before its mark
	if err := unix.Mknod(ls.ch.segPath(next, slotName(next)), unix.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	// The look at the mark fails (EIO) as the claim is cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fault = func(op string) error {
		if op != "lookup" {
			return nil
		}
		cancel()
		return syscall.EIO
	}
	defer func() { fault = nil }()
	var log strings.Builder
	st.Log = &log
	if _, err := st.Claim(ctx, 1, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("a claim cancelled while it waited for another's mark: %v; want the cancellation", err)
	}
	if strings.Contains(log.String(), "retrying") {
		t.Errorf("a cancelled claim said it retries: %q", log.String())
	}
}
