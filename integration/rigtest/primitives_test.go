package rigtest

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Races of the filesystem primitives a claim core may build on, between
// clients on different nodes of the rig, each through its own GlusterFS
// client. Each of 4 clients (one per node of partition rig) tries to take
// every name of a shared sequence; the names are batched into
// subdirectories, and the clients start each batch together (a barrier on
// this machine's own disk, which the nodes share, so that the clients race
// on the same names rather than one running ahead and winning everything
// uncontested). A client records which names it took by the call's return;
// since a reply can be lost (the call done at the server, its answer an
// error), what it took is also written where the name is — its nonce in
// the file, its own name in the directory — and the winners are decided
// from what the filesystem holds as well as from the returns. A name with
// two winners is a primitive that is not exclusive.
//
// The primitives:
//
//	create  O_CREAT|O_EXCL of the name; the winner writes its nonce into it
//	link    link() of a file of the client's own (created, nonce written)
//	        to the name, as casetable's commit does on 149e76d
//	rename  rename() of one shared source per name (made before the
//	        batch starts) to a name of the client's own
//	mkdir   mkdir() of the name; the winner makes a file named by it inside
//	mixed   clients 1 and 3 mkdir the name, 2 and 4 create it with O_EXCL:
//	        are the two mutually exclusive?
//	mknod   mknod() of the name as a regular file (S_IFREG), as the claim
//	        core makes a generation's slot s.N and its mark c.N
//	regfifo clients 1 and 3 mknod the name as a regular file (the owner's
//	        mark c.N), 2 and 4 as a FIFO (the void of c.N): exactly one
//	        may succeed, and the name's type must be the winner's on both
//	        replicas
//	fifo    mknod() of the name as a FIFO by all 4: waiters voiding one
//	        c.N together
//	claimcore mknod for two batches in three, regfifo for every third
//
// A mknod'd name holds nothing a client could write: its winners are
// decided from the returns, and from what the bricks hold: every replica's
// copy of the name (DHT's linkto pointers aside) must have the same type
// and the same GFID (Gluster's file identity, trusted.gfid on the brick);
// two GFIDs, or two types, are two files made under one name.

// raceSpec is one race.
type raceSpec struct {
	op        string // create, link, rename, mkdir, mixed, mknod, regfifo, claimcore, symlink
	names     int    // names in all
	batch     int    // names per subdirectory
	killBrick bool   // SIGKILL a brick of the volume midway, then start it again (on CephFS: the MDS, restarted twice)
	brick     int    // which (2 by default, the second of the first replica set; FARM_RIG_RACE_BRICK)
	profile   string // the volume ("ceph": the CephFS of integration/ceph-up)
}

// onCeph: the race is on the rig's CephFS (integration/ceph-up), not on a
// Gluster volume. There the clients mark every name they make with their
// own number in its permission bits, and look every name up after their
// call: whose it is, and its type, is read from the filesystem.
func (s raceSpec) onCeph() bool { return s.profile == "ceph" }

// raceResult is what a race came to.
type raceResult struct {
	spec        raceSpec
	elapsed     time.Duration // the race, from the first batch to the last
	verify      time.Duration // reading back what every name holds
	doubles     int           // names two or more clients took (by returns or by what the names hold)
	unclaimed   int           // names no client took and nothing holds
	lostReply   int           // names taken by a call whose reply was lost (no return said so)
	mismatch    int           // a name that holds another client's mark than the one whose call returned success
	undecided   int           // names a client gave up on (an error for 30 s: EIO for a name whose replicas disagree)
	splitGaveUp int           // of those, names in split-brain (split, below): the EIO is the split-brain's
	wins        [4]int        // names each client took by the call's return
	views       int           // CephFS: (client, name) pairs whose look-up after the call differs from the read-back (maker, type, inode)
	decidedByFS int           // CephFS: calls whose reply was an error, decided from the name's maker as read afterwards
	toldWrong   int           // CephFS: a call told EEXIST whose own client the name's permission bits name as its maker
	errs        map[string]int
	examples    []string
	killedAt    string // when the brick was killed and started again
	quorum      string // the volume's cluster.quorum-type
	layout      string // the volume's bricks, as gluster volume info says ("2 x (2 + 1) = 6")
	setSize     int    // bricks per replica set (the arbiter included)
	// mknod races: what the names are on the bricks
	kinds   map[string]int // names by type on the bricks (regular, fifo)
	oneCopy int            // names missing from a brick of their set (not healed yet)
	split   int            // names whose replicas hold two files (GFID split-brain or type mismatch: lookups answer EIO)
	// of those, names whose two files are of two types (a type mismatch)
	splitTypes int
}

func (r raceResult) String() string {
	s := fmt.Sprintf("%s on %s (%s bricks, quorum-type %s), %d names in batches of %d, 4 clients on 4 nodes", r.spec.op, r.spec.profile, r.layout, r.quorum, r.spec.names, r.spec.batch)
	if r.spec.onCeph() {
		s = fmt.Sprintf("%s on ceph (%s), %d names in batches of %d, 4 clients on 4 nodes", r.spec.op, r.layout, r.spec.names, r.spec.batch)
	}
	if r.spec.killBrick && r.spec.onCeph() {
		s += fmt.Sprintf(", the MDS restarted (%s)", r.killedAt)
	} else if r.spec.killBrick {
		s += fmt.Sprintf(", brick %d killed and restarted (%s)", r.spec.brick, r.killedAt)
	}
	s += fmt.Sprintf(": %d names with two or more winners, %d names nobody took, %d taken by a lost reply, %d holding another client's mark, %d a client gave up on; wins per client %v; %.1f s race, %.1f s read-back",
		r.doubles, r.unclaimed, r.lostReply, r.mismatch, r.undecided, r.wins, r.elapsed.Seconds(), r.verify.Seconds())
	if isMknod(r.spec.op) && r.spec.onCeph() {
		s += fmt.Sprintf("; on the CephFS: %v, %d looks by a client that disagree with the read-back, %d errors decided from the filesystem, %d EEXIST to the name's maker", r.kinds, r.views, r.decidedByFS, r.toldWrong)
	} else if isMknod(r.spec.op) {
		s += fmt.Sprintf("; on the bricks: %v, %d names missing from a brick of their set, %d in split-brain (two files; %d of them of two types)", r.kinds, r.oneCopy, r.split, r.splitTypes)
	}
	if len(r.errs) > 0 {
		var e []string
		for k, v := range r.errs {
			e = append(e, fmt.Sprintf("%s×%d", k, v))
		}
		sort.Strings(e)
		s += "; errors retried: " + strings.Join(e, " ")
	}
	return s
}

// TestDHTExclusiveMknod: the primitives of the claim core (casetable/
// chain.go) are exclusive on the distribute-replicate volume, with client
// quorum (cluster.quorum-type auto): 4 clients on 4 nodes race on the same
// names, mknod of a regular file by all 4 (a generation's slot s.N and its
// mark c.N) for two batches in three, and the mark against the void for
// every third (2 clients mknod S_IFREG, 2 mknod S_IFIFO), while brick 2
// (FARM_RIG_RACE_BRICK; on the rig's replica-2 layout the second half of
// the first replica set: with quorum auto, killing the first would make
// the set read-only) is killed with SIGKILL and started again. Every name
// has exactly one winner, by the returns and by the bricks (one type and
// one GFID on every brick of its set), and its type is the winner's.
//
// On replica 2 it can leave a split-brain: on 2026-11-25, in the second of
// two runs, one name made in the moment brick 2 returned (one client told
// it made it, the others EEXIST) was a regular file of one GFID on brick 1
// and of another on brick 2, which Gluster answers EIO for; in CI on
// 2026-11-30, one name of a batch of regular files raced against FIFOs was
// the winner's regular file on brick 1 and a FIFO on brick 2 (a type
// mismatch). Client quorum on replica 2 keeps a name from two winners, not
// from that (casetable/CLAIMS-APPENDIX.md): the set's first brick holds the
// winner's copy (its answer is the call's), and resolving from it keeps the
// one winner. There the test says it and passes; a split whose first brick
// holds another type than the winner's fails. On sets
// of 3 bricks (FARM_CLUSTER_DHT_LAYOUT=arbiter or replica3), where a
// quorum of 2 should prevent it, a split-brain fails the test; but there
// the mark against the void leaves the racing clients with a directory
// they get EIO for (integration/CLUSTER.md), and the test fails after
// 30 s per name of it.
//
// 10,000 names in make test (about 2-3 minutes here); FARM_RIG_RACE_NAMES
// for more (the 100,000, make race-dht: about 18 minutes here).
func TestDHTExclusiveMknod(t *testing.T) {
	r := needRig(t)
	names := 10000
	if v, err := strconv.Atoi(os.Getenv("FARM_RIG_RACE_NAMES")); err == nil && v > 0 {
		names = v
	}
	start := time.Now()
	res := r.race(t, raceSpec{op: "claimcore", names: names, batch: 1000, killBrick: true, profile: "dht"})
	if res.quorum != "auto" {
		t.Errorf("the dht volume's cluster.quorum-type is %q, want auto (cluster-up sets it)", res.quorum)
	}
	// On replica 2 a split-brain is the known limit below, and the
	// clients that looked its name up after it got EIO until they gave
	// up: those names are the split-brain's, said below, not a second
	// failure. Any other name given up on fails.
	undecided := res.undecided
	if res.setSize < 3 {
		undecided -= res.splitGaveUp
	}
	if res.doubles != 0 || res.mismatch != 0 || res.unclaimed != 0 || undecided != 0 {
		t.Errorf("mknod is not exclusive, or left a name its replicas disagree on: %s; e.g. %s", res, strings.Join(res.examples, "; "))
	}
	switch {
	case res.split != 0 && res.setSize >= 3:
		t.Errorf("split-brain on a volume whose replica sets have %d bricks (a quorum of 2 should prevent it): %d name(s); e.g. %s",
			res.setSize, res.split, strings.Join(res.examples, "; "))
	case res.split != 0:
		// A name made as the killed brick came back, one file on each
		// replica (of one type, or a regular file and a FIFO), one
		// client told it made it and the others EEXIST: not a second
		// winner, but a name GlusterFS answers EIO for until it is
		// healed (1 run in 4 here, 2026-11-25, quorum auto; 1 in 4
		// again on 2026-11-25 in CI, and a type mismatch in CI on
		// 2026-11-30, where the clients that looked the name up after
		// the race gave up on it after 30 s of EIO). Replica 2 cannot
		// prevent it; CLAIMS-APPENDIX.md says what it means for farm
		// and how to resolve it. Said, not failed: the race tests the
		// one winner the claim core relies on.
		t.Logf("split-brain (known limit of replica 2, see casetable/CLAIMS-APPENDIX.md): %d name(s), %d of them a type mismatch, %d given up on by a client (EIO); e.g. %s", res.split, res.splitTypes, res.splitGaveUp, strings.Join(res.examples, "; "))
	}
	if res.kinds["fifo"] == 0 || res.kinds["regular"] == 0 {
		t.Errorf("the race left %v: want both regular files and FIFOs", res.kinds)
	}
	report(t, "%s; %.0f s in all", res, time.Since(start).Seconds())
}

// TestDHTPrimitivesMeasure measures every primitive (raceSpec) on the
// distribute-replicate volume, with and without a brick killed midway, and
// reports the figures; it asserts only that the races ran. Long (several
// minutes): not in make test; FARM_RIG_PRIMITIVES=1 runs it,
// FARM_RIG_PRIMITIVES_NAMES sets the names per race (20,000), FARM_RIG_PRIMITIVES_OPS
// the primitives (create,link,rename,mkdir,mixed,mknod,fifo,regfifo,symlink),
// FARM_RIG_PRIMITIVES_PROFILE the volume (dht; ceph: the CephFS of
// integration/ceph-up, where "killed" is the MDS restarted twice).
//
//	FARM_RIG_PRIMITIVES=1 go test -count=1 -v -timeout 60m -run TestDHTPrimitivesMeasure ./integration/rigtest/
func TestDHTPrimitivesMeasure(t *testing.T) {
	if os.Getenv("FARM_RIG_PRIMITIVES") != "1" {
		t.Skip("a measurement: FARM_RIG_PRIMITIVES=1 runs it")
	}
	r := needRig(t)
	profile := cmp.Or(os.Getenv("FARM_RIG_PRIMITIVES_PROFILE"), "dht")
	if profile == "ceph" {
		needCeph(t)
	}
	names := 20000
	if v, err := strconv.Atoi(os.Getenv("FARM_RIG_PRIMITIVES_NAMES")); err == nil && v > 0 {
		names = v
	}
	ops := []string{"create", "link", "rename", "mkdir", "mixed", "mknod", "regfifo"}
	if v := os.Getenv("FARM_RIG_PRIMITIVES_OPS"); v != "" {
		ops = strings.Split(v, ",")
	}
	for _, op := range ops {
		for _, kill := range []bool{false, true} {
			name := op
			if kill {
				name += "/brick-killed"
			}
			t.Run(name, func(t *testing.T) {
				res := r.race(t, raceSpec{op: op, names: names, batch: 1000, killBrick: kill, profile: profile})
				report(t, "%s", res)
				for _, e := range res.examples {
					t.Log(e)
				}
			})
		}
	}
}

// race runs one race on the rig and reads back what the names hold.
func (r *rig) race(t *testing.T, spec raceSpec) raceResult {
	t.Helper()
	base := filepath.Join(r.mnt, spec.profile)
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("the rig has no %s volume: %v", spec.profile, err)
	}
	dir := filepath.Join(base, fmt.Sprintf("%s-%s-%06d", nameRe.ReplaceAllString(t.Name(), "_"), spec.op, rand.IntN(1e6)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	batches := (spec.names + spec.batch - 1) / spec.batch
	for b := 0; b < batches; b++ {
		if err := os.Mkdir(batchDir(dir, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The names stay: removing them through Gluster's clients takes about
	// as long as the race; cluster-down (ceph-down) deletes the volume's data.
	t.Cleanup(func() { t.Logf("the race's names are left in %s (cluster-down deletes them)", dir) })
	local := t.TempDir() // the barrier and the clients' records, on this machine's disk
	if spec.killBrick && spec.onCeph() {
		// An MDS left dead by a failed test would stop every later one.
		t.Cleanup(func() {
			if out, err := exec.Command(r.script, "start-mds").CombinedOutput(); err != nil && !strings.Contains(string(out), "already running") {
				t.Errorf("integration/cluster start-mds: %v\n%s", err, out)
			}
		})
	} else if spec.killBrick {
		// A brick left dead by a failed test would weaken every later one.
		t.Cleanup(func() { r.run(t, "start-bricks", spec.profile) })
	}

	const clients = 4
	cmds := make([]*exec.Cmd, clients)
	outs := make([]string, clients)
	for c := 0; c < clients; c++ {
		outs[c] = filepath.Join(local, fmt.Sprintf("client%d.out", c))
		cmd := exec.Command(r.script, "exec", strconv.Itoa(c+1), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RIGTEST_ROLE=racer",
			"RACE_DIR="+dir, "RACE_OP="+spec.op, "RACE_CLIENT="+strconv.Itoa(c), "RACE_CLIENTS="+strconv.Itoa(clients),
			"RACE_NAMES="+strconv.Itoa(spec.names), "RACE_BATCH="+strconv.Itoa(spec.batch),
			"RACE_SYNC="+local, "RACE_OUT="+outs[c], "RACE_MARK="+strconv.FormatBool(spec.onCeph()))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Stdout = &stderr
		cmds[c] = cmd
		t.Cleanup(func() {
			if cmd.Process != nil && cmd.ProcessState == nil {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			if t.Failed() && stderr.Len() > 0 {
				t.Logf("client %d said: %s", c, stderr.String())
			}
		})
	}
	start := time.Now()
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, clients)
	var wg sync.WaitGroup
	for c, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errc <- fmt.Errorf("client %d on node%d: %v", c, c+1, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	res := raceResult{spec: spec, errs: map[string]int{}, quorum: "?", layout: "?"}
	if spec.onCeph() {
		// One MDS decides every name: one copy, read through a client.
		res.layout, res.setSize, res.quorum = "CephFS, 1 MDS, ceph-fuse clients", 1, "-"
	} else {
		res.layout, res.setSize = volumeLayout(t, "farm-"+spec.profile)
		if out, err := exec.Command("gluster", "--mode=script", "volume", "get", "farm-"+spec.profile, "cluster.quorum-type").Output(); err == nil {
			if f := strings.Fields(string(out)); len(f) >= 2 {
				res.quorum = f[len(f)-2] // "cluster.quorum-type none (DEFAULT)" or "... auto"
				if !strings.HasPrefix(f[len(f)-1], "(") {
					res.quorum = f[len(f)-1]
				}
			}
		}
	}
	if spec.brick == 0 {
		spec.brick, res.spec.brick = 2, 2
		if v, err := strconv.Atoi(os.Getenv("FARM_RIG_RACE_BRICK")); err == nil && v > 0 {
			spec.brick, res.spec.brick = v, v
		}
	}
	if spec.killBrick {
		// The brick dies when 30% of the batches have begun, and returns at
		// 55% (at least 5 s later): the clients race on through both.
		waitBatch := func(frac float64) bool {
			for {
				select {
				case <-done:
					return false
				case <-time.After(50 * time.Millisecond):
				}
				if float64(barrierBatch(local, clients)) >= frac*float64(batches) {
					return true
				}
			}
		}
		if spec.onCeph() {
			res.killedAt = r.restartMDSTwice(t, start, waitBatch, func() int { return barrierBatch(local, clients) }, batches)
		} else if waitBatch(0.30) {
			killed := time.Since(start)
			r.run(t, "kill-brick", spec.profile, strconv.Itoa(spec.brick))
			b0 := barrierBatch(local, clients)
			time.Sleep(5 * time.Second)
			waitBatch(0.55)
			restarted := time.Since(start)
			r.run(t, "start-bricks", spec.profile)
			res.killedAt = fmt.Sprintf("killed at %.1f s, batch %d of %d; started again at %.1f s, batch %d",
				killed.Seconds(), b0, batches, restarted.Seconds(), barrierBatch(local, clients))
		} else {
			t.Errorf("the race ended before the brick was killed")
		}
	}
	select {
	case <-done:
	case <-time.After(60 * time.Minute):
		t.Fatalf("the race did not end in 60 minutes")
	}
	res.elapsed = time.Since(start)
	close(errc)
	for err := range errc {
		t.Fatalf("%v", err)
	}

	// What each client took by the call's return, and where a call's reply
	// was lost.
	won := make([][]int8, clients) // won[c][i]: 1 took, 2 ambiguous (an error, then the name existed), 3 gave up
	views := make([][]fsView, clients)
	for c := 0; c < clients; c++ {
		won[c] = make([]int8, spec.names)
		if spec.onCeph() {
			views[c] = make([]fsView, spec.names)
		}
		readRaceOut(t, outs[c], won[c], res.errs, views[c])
	}
	// What the names hold.
	vstart := time.Now()
	var holds [][]int
	var copies [][]brickCopy
	var onCeph []cephName
	switch {
	case isMknod(spec.op) && spec.onCeph():
		onCeph = readBackCeph(t, dir, spec, batches)
		copies = make([][]brickCopy, spec.names)
		for i, n := range onCeph {
			if n.ok {
				copies[i] = []brickCopy{{brick: 1, typ: n.typ, gfid: fmt.Sprintf("ino %d", n.ino)}}
			}
		}
		res.kinds = map[string]int{}
	case isMknod(spec.op):
		copies = r.readBackCopies(t, dir, spec, batches)
		res.kinds = map[string]int{}
	default:
		holds = r.readBack(t, dir, spec, batches)
	}
	res.verify = time.Since(vstart)
	for i := 0; i < spec.names; i++ {
		var by []int
		amb, gaveUp := false, false
		for c := 0; c < clients; c++ {
			switch won[c][i] {
			case 1:
				by = append(by, c)
				res.wins[c]++
			case 2:
				amb = true
			case 3:
				gaveUp = true
			}
		}
		if gaveUp {
			res.undecided++
		}
		if onCeph != nil {
			vs := make([]fsView, clients)
			replies := make([]int8, clients)
			for c := range vs {
				vs[c], replies[c] = views[c][i], won[c][i]
			}
			res.judgeCeph(i, replies, vs, onCeph[i])
		}
		if copies != nil {
			res.judgeCopies(i, by, amb, gaveUp, copies[i])
			continue
		}
		h := holds[i]
		example := func(what string) {
			if len(res.examples) < 10 {
				res.examples = append(res.examples, fmt.Sprintf("name %d: %s (won by the return: clients %v; holds %v)", i, what, by, h))
			}
		}
		switch {
		case len(by) > 1 || len(h) > 1:
			res.doubles++
			example("two or more winners")
		case len(by) == 1 && len(h) == 1 && h[0] != by[0]:
			res.mismatch++
			example("holds another client's mark than the winner's")
		case len(by) == 1 && len(h) == 0:
			res.mismatch++
			example("the winner's mark is missing")
		case len(by) == 0 && len(h) == 0 && !amb && !gaveUp:
			res.unclaimed++
			example("nobody took it")
		case len(by) == 0:
			res.lostReply++
		}
	}
	return res
}

// volumeLayout is a volume's bricks as 'gluster volume info' counts them
// ("2 x (2 + 1) = 6": 2 replica sets of 2 data bricks and an arbiter) and
// the bricks of one replica set.
func volumeLayout(t *testing.T, vol string) (string, int) {
	t.Helper()
	out, err := exec.Command("gluster", "--mode=script", "volume", "info", vol).Output()
	if err != nil {
		t.Fatalf("gluster volume info %s: %v", vol, err)
	}
	m := regexp.MustCompile(`(?m)^Number of Bricks: (.*)$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("gluster volume info %s says no number of bricks:\n%s", vol, out)
	}
	layout := strings.TrimSpace(m[1])
	// "N x K = T", "N x (D + A) = T", or "T" for a volume of one set.
	size := 0
	if _, set, ok := strings.Cut(layout, " x "); ok {
		set, _, _ = strings.Cut(set, " = ")
		for _, f := range strings.FieldsFunc(set, func(r rune) bool { return r < '0' || r > '9' }) {
			n, _ := strconv.Atoi(f)
			size += n
		}
	} else {
		size, _ = strconv.Atoi(layout)
	}
	if size < 1 {
		t.Fatalf("gluster volume info %s: cannot read a replica set's size from %q", vol, layout)
	}
	return layout, size
}

// judgeCopies decides name i of a mknod race from the clients that won it
// by the return (by) and from its copies on the bricks.
func (res *raceResult) judgeCopies(i int, by []int, amb, gaveUp bool, cs []brickCopy) {
	var distinct []brickCopy
	for _, c := range cs {
		seen := false
		for _, d := range distinct {
			seen = seen || (d.typ == c.typ && d.gfid == c.gfid)
		}
		if !seen {
			distinct = append(distinct, c)
		}
	}
	example := func(what string) {
		if len(res.examples) < 10 {
			res.examples = append(res.examples, fmt.Sprintf("name %d: %s (won by the return: clients %v; on the bricks %v)", i, what, by, cs))
		}
	}
	if len(cs) > 0 && len(cs) < res.setSize {
		res.oneCopy++
	}
	if len(distinct) == 1 {
		res.kinds[typeName(distinct[0].typ)]++
	}
	types := map[uint32]bool{}
	for _, d := range distinct {
		types[d.typ] = true
	}
	batch := i / res.spec.batch
	// The copy on the first brick of the name's replica set: with client
	// quorum auto on replica 2 its answer is the call's, so a client told
	// it made the name made that copy.
	first, onFirst := uint32(0), false
	for _, c := range cs {
		if (c.brick-1)%res.setSize == 0 {
			first, onFirst = c.typ, true
		}
	}
	switch {
	case len(by) > 1:
		res.doubles++
		example("two or more winners")
	case len(distinct) > 1 && len(by) == 1 && (!onFirst || first != mknodType(raceOp(res.spec.op, batch, by[0]))):
		res.doubles++
		example("two files, and the replica set's first brick does not hold the winner's")
	case len(distinct) > 1:
		// Two files under one name, of one type or of two: each replica
		// made the name for another client, at most one of them told it
		// made it, and the set's first brick holds that one's. Gluster
		// answers EIO to its lookups until the split-brain is resolved
		// (a type mismatch by hand, from the first brick:
		// CLAIMS-APPENDIX.md).
		res.split++
		if len(types) > 1 {
			res.splitTypes++
		}
		if gaveUp {
			res.splitGaveUp++
		}
		example("a split-brain")
	case len(by) == 1 && len(distinct) == 0:
		res.mismatch++
		example("the winner's name is missing")
	case len(by) == 1 && distinct[0].typ != mknodType(raceOp(res.spec.op, batch, by[0])):
		res.mismatch++
		example("the name is not of the winner's type")
	case len(by) == 0 && len(distinct) == 0 && !amb && !gaveUp:
		res.unclaimed++
		example("nobody took it")
	case len(by) == 0:
		res.lostReply++
	}
}

// cephName is a name of a race on CephFS as read back through the head's
// client after the race: its type, inode and maker (the permission bits'
// client number; -1 none).
type cephName struct {
	ok    bool
	typ   uint32
	ino   uint64
	maker int
}

// readBackCeph reads every name of a mknod race on CephFS through the
// head's own ceph-fuse client: one MDS holds every name, so one look-up
// each is what the filesystem holds.
func readBackCeph(t *testing.T, dir string, spec raceSpec, batches int) []cephName {
	t.Helper()
	names := make([]cephName, spec.names)
	for b := 0; b < batches; b++ {
		bd := batchDir(dir, b)
		ents, err := os.ReadDir(bd)
		if err != nil {
			t.Fatalf("reading back %s: %v", bd, err)
		}
		for _, ent := range ents {
			i, err := strconv.Atoi(ent.Name())
			if err != nil || i < 0 || i >= spec.names {
				continue
			}
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(bd, ent.Name()), &st); err != nil {
				t.Fatalf("reading back: %v", err)
			}
			maker := int(st.Mode & 0o7)
			if st.Mode&0o770 != 0o640 {
				maker = -1
			}
			names[i] = cephName{ok: true, typ: st.Mode & unix.S_IFMT, ino: st.Ino, maker: maker}
		}
	}
	return names
}

// judgeCeph checks name i of a race on CephFS against what the
// filesystem holds (n, read back through the head's client): every
// client's own look-up after its call saw the same file (maker, type,
// inode); a client told it made the name, or that decided so from the
// filesystem after an error, is its maker; and it counts the EEXIST
// replies to the name's own maker (a reply lost with nobody told: the
// claim core decides a mark from its type, not from EEXIST).
func (res *raceResult) judgeCeph(i int, replies []int8, views []fsView, n cephName) {
	example := func(what string) {
		if len(res.examples) < 10 {
			res.examples = append(res.examples, fmt.Sprintf("name %d: %s (replies %v, looks %+v, read back %+v)", i, what, replies, views, n))
		}
	}
	for c, v := range views {
		if v.decided != 0 {
			res.decidedByFS++
		}
		if !v.ok {
			continue
		}
		if !n.ok || v.maker != n.maker || v.typ != n.typ || v.ino != n.ino {
			res.views++
			example(fmt.Sprintf("client %d looked up another file than the one read back", c))
		}
		if (replies[c] == 1 || v.decided == 1) && n.ok && n.maker != c {
			res.mismatch++
			example(fmt.Sprintf("client %d made it by its reply or its decision, the filesystem says client %d", c, n.maker))
		}
		if replies[c] == 0 && n.ok && n.maker == c {
			res.toldWrong++
		}
	}
}

// isMknod: the race's names are made by mknod (they hold nothing).
func isMknod(op string) bool {
	return op == "mknod" || op == "fifo" || op == "regfifo" || op == "claimcore"
}

// raceOp is what client does to the names of batch b in a race of op.
func raceOp(op string, b, client int) string {
	switch op {
	case "mixed":
		if client%2 == 0 {
			return "mkdir"
		}
		return "create"
	case "mknod":
		return "reg"
	case "claimcore":
		if b%3 != 2 {
			return "reg"
		}
		fallthrough
	case "regfifo":
		if client%2 == 0 {
			return "reg"
		}
		return "fifo"
	}
	return op
}

// mknodType is the file type a mknod op makes.
func mknodType(op string) uint32 {
	if op == "fifo" {
		return unix.S_IFIFO
	}
	return unix.S_IFREG
}

func typeName(typ uint32) string {
	switch typ {
	case unix.S_IFREG:
		return "regular"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFDIR:
		return "directory"
	}
	return fmt.Sprintf("type%o", typ)
}

// brickCopy is one brick's copy of a name: its type and GFID.
type brickCopy struct {
	brick int
	typ   uint32
	gfid  string
}

func (c brickCopy) String() string {
	return fmt.Sprintf("brick %d: %s gfid %s", c.brick, typeName(c.typ), c.gfid)
}

// readBackCopies reads every brick's copy of every name of a mknod race
// (DHT's linkto pointers aside), in the bricks' own directories.
func (r *rig) readBackCopies(t *testing.T, dir string, spec raceSpec, batches int) [][]brickCopy {
	t.Helper()
	rel, err := filepath.Rel(filepath.Join(r.mnt, spec.profile), dir)
	if err != nil {
		t.Fatal(err)
	}
	var bricks []string
	for i := 1; ; i++ {
		b := filepath.Join(r.dir, "bricks", fmt.Sprintf("%s.%d", spec.profile, i))
		if _, err := os.Stat(b); err != nil {
			break
		}
		bricks = append(bricks, b)
	}
	if len(bricks) == 0 {
		t.Fatalf("no bricks of %s in %s/bricks", spec.profile, r.dir)
	}
	copies := make([][]brickCopy, spec.names)
	var mu sync.Mutex
	batchc := make(chan int)
	errc := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batchc {
				for bi, brick := range bricks {
					bd := filepath.Join(brick, rel, filepath.Base(batchDir(dir, b)))
					ents, err := os.ReadDir(bd)
					if err != nil {
						errc <- err
						return
					}
					for _, ent := range ents {
						i, err := strconv.Atoi(ent.Name())
						if err != nil || i < 0 || i >= spec.names {
							continue
						}
						p := filepath.Join(bd, ent.Name())
						var st unix.Stat_t
						if err := unix.Lstat(p, &st); err != nil {
							errc <- err
							return
						}
						typ := st.Mode & unix.S_IFMT
						if typ == unix.S_IFREG && st.Mode&unix.S_ISVTX != 0 && st.Size == 0 {
							continue // a linkto pointer
						}
						g := make([]byte, 16)
						gfid := "none"
						if n, err := unix.Lgetxattr(p, "trusted.gfid", g); err == nil {
							gfid = fmt.Sprintf("%x", g[:n])
						}
						mu.Lock()
						copies[i] = append(copies[i], brickCopy{brick: bi + 1, typ: typ, gfid: gfid})
						mu.Unlock()
					}
				}
			}
		}()
	}
	for b := 0; b < batches; b++ {
		select {
		case batchc <- b:
		case err := <-errc:
			close(batchc)
			wg.Wait()
			t.Fatalf("reading the bricks: %v", err)
		}
	}
	close(batchc)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("reading the bricks: %v", err)
	}
	return copies
}

func batchDir(dir string, b int) string { return filepath.Join(dir, fmt.Sprintf("b%04d", b)) }

// barrierBatch is the highest batch every client has reached.
func barrierBatch(local string, clients int) int {
	low := -1
	for c := 0; c < clients; c++ {
		b, _ := os.ReadFile(filepath.Join(local, fmt.Sprintf("at.%d", c)))
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0
		}
		if low < 0 || n < low {
			low = n
		}
	}
	return low
}

// fsView is what a client of a race on CephFS (RACE_MARK) read of a name
// after its call: "F i maker type inode", and for a call whose reply was an
// error, "D i mine" (decided from that).
type fsView struct {
	ok      bool
	maker   int // by the permission bits; -1 none
	typ     uint32
	ino     uint64
	decided int8 // 1 made by the client, 2 not, 0 not decided (the reply said)
}

// readRaceOut reads a client's record: "W i" (took name i), "A i" (an
// error, then the name existed: a reply that may have been lost), "E errno
// count" (errors retried), and into views (if not nil) its "F" and "D"
// records.
func readRaceOut(t *testing.T, path string, won []int8, errs map[string]int, views []fsView) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	end := false
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "W", "A", "X":
			i, err := strconv.Atoi(rest)
			if err != nil || i < 0 || i >= len(won) {
				t.Fatalf("%s: %q", path, sc.Text())
			}
			switch {
			case kind == "W":
				won[i] = 1
			case kind == "X":
				won[i] = 3
			case won[i] == 0:
				won[i] = 2
			}
		case "E":
			name, n, _ := strings.Cut(rest, " ")
			k, _ := strconv.Atoi(n)
			errs[name] += k
		case "F", "D":
			f := strings.Fields(rest)
			var v [4]uint64
			bad := len(f) != map[string]int{"F": 4, "D": 2}[kind]
			for k := 0; k < len(f) && !bad; k++ {
				n, err := strconv.ParseInt(f[k], 10, 64)
				bad = err != nil || (k == 0 && (n < 0 || int(n) >= len(won)))
				v[k] = uint64(n)
			}
			if bad {
				t.Fatalf("%s: %q", path, sc.Text())
			}
			if views == nil {
				continue
			}
			i := int(v[0])
			if kind == "F" {
				views[i].ok, views[i].maker, views[i].typ, views[i].ino = true, int(int64(v[1])), uint32(v[2]), v[3]
			} else {
				views[i].decided = 2 - int8(v[1])
			}
		case "END":
			end = true
		}
	}
	if !end {
		t.Fatalf("%s: the client's record has no END", path)
	}
}

// readBack reads what every name holds, in the bricks' own directories
// on this machine's disk: what the servers stored, every replica's copy
// (reading 100,000 names through a FUSE client takes minutes here). A mark
// on either replica counts; DHT's "linkto" files (mode ---------T, empty:
// where a name hashes to one replica set and its data lives on the other)
// are pointers, not marks. The clients whose marks a name holds, each once.
func (r *rig) readBack(t *testing.T, dir string, spec raceSpec, batches int) [][]int {
	t.Helper()
	rel, err := filepath.Rel(filepath.Join(r.mnt, spec.profile), dir)
	if err != nil {
		t.Fatal(err)
	}
	bricks, _ := filepath.Glob(filepath.Join(r.dir, "bricks", spec.profile+".*"))
	if spec.onCeph() {
		// One MDS holds every name: read through the head's client.
		bricks = []string{filepath.Join(r.mnt, spec.profile)}
	}
	if len(bricks) == 0 {
		t.Fatalf("no bricks of %s in %s/bricks", spec.profile, r.dir)
	}
	holds := make([][]int, spec.names)
	var mu sync.Mutex
	add := func(i, c int) {
		mu.Lock()
		defer mu.Unlock()
		if i < 0 || i >= spec.names {
			return
		}
		for _, k := range holds[i] {
			if k == c {
				return
			}
		}
		holds[i] = append(holds[i], c)
	}
	// linkto: p is DHT's pointer to where a name's data lives (mode
	// ---------T, empty), not the name's own file.
	linkto := func(p string) (bool, error) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return false, err
		}
		return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&unix.S_ISVTX != 0 && st.Size == 0, nil
	}
	// mark is the client whose nonce a regular file at p holds (-1: none,
	// or a linkto file).
	mark := func(p string) (int, error) {
		if l, err := linkto(p); l || err != nil {
			return -1, err
		}
		if spec.op == "symlink" {
			target, err := os.Readlink(p)
			return clientMark([]byte(target)), err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return -1, err
		}
		return clientMark(b), nil
	}
	batchc := make(chan int)
	errc := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batchc {
				for _, brick := range bricks {
					bd := filepath.Join(brick, rel, filepath.Base(batchDir(dir, b)))
					ents, err := os.ReadDir(bd)
					if err != nil {
						errc <- err
						return
					}
					for _, ent := range ents {
						nm := ent.Name()
						if f := strings.Split(nm, "."); spec.op == "rename" && len(f) == 3 && f[0] == "r" {
							i, _ := strconv.Atoi(f[1])
							c, _ := strconv.Atoi(f[2])
							if l, err := linkto(filepath.Join(bd, nm)); err != nil {
								errc <- err
								return
							} else if !l {
								add(i, c)
							}
							continue
						}
						i, err := strconv.Atoi(nm)
						if err != nil {
							continue
						}
						p := filepath.Join(bd, nm)
						if ent.IsDir() {
							sub, err := os.ReadDir(p)
							if err != nil {
								errc <- err
								return
							}
							for _, s := range sub {
								if c := clientMark([]byte(s.Name())); c >= 0 {
									if l, err := linkto(filepath.Join(p, s.Name())); err != nil {
										errc <- err
										return
									} else if !l {
										add(i, c)
									}
								}
							}
							continue
						}
						c, err := mark(p)
						if err != nil {
							errc <- err
							return
						}
						if c >= 0 {
							add(i, c)
						}
					}
				}
			}
		}()
	}
	for b := 0; b < batches; b++ {
		select {
		case batchc <- b:
		case err := <-errc:
			close(batchc)
			wg.Wait()
			t.Fatalf("reading the bricks: %v", err)
		}
	}
	close(batchc)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("reading the bricks: %v", err)
	}
	return holds
}

// clientMark is the client a mark names: "cK..." (a nonce, or a file name
// in a directory), or -1.
func clientMark(b []byte) int {
	if len(b) >= 2 && b[0] == 'c' && b[1] >= '0' && b[1] <= '9' {
		return int(b[1] - '0')
	}
	return -1
}

// raceEnv is a racer's or reader's settings.
type raceEnv struct {
	dir, op, sync, out       string
	client, clients, n, size int
	mark                     bool // RACE_MARK: the client's number in the permission bits of what it makes, and every name looked up after the call (CephFS)
}

func readRaceEnv() raceEnv {
	atoi := func(k string) int {
		v, err := strconv.Atoi(os.Getenv(k))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%q: %v\n", k, os.Getenv(k), err)
			os.Exit(2)
		}
		return v
	}
	return raceEnv{dir: os.Getenv("RACE_DIR"), op: os.Getenv("RACE_OP"), sync: os.Getenv("RACE_SYNC"), out: os.Getenv("RACE_OUT"),
		client: atoi("RACE_CLIENT"), clients: atoi("RACE_CLIENTS"), n: atoi("RACE_NAMES"), size: atoi("RACE_BATCH"),
		mark: os.Getenv("RACE_MARK") == "true"}
}

// nonceLen: every client's nonce has this length, so that two winners'
// writes at offset 0 leave one whole nonce, not a mix.
const nonceLen = 24

func nonceOf(client int) []byte {
	return fmt.Appendf(nil, "c%d-%020d\n", client, rand.Uint64()>>1)[:nonceLen]
}

// racer is a client of a race (RIGTEST_ROLE=racer), run on a node: it takes
// what it can of every name, batch by batch, and writes what it took to
// RACE_OUT. Errors other than the primitive's "taken" are retried for up
// to 30 s per name (a brick that died); after one, the outcome is decided
// from the filesystem where it can be (link: the file's own link count;
// rename: the client's own name), and otherwise recorded as ambiguous. A
// name that still fails after 30 s (Gluster answers EIO for a name whose
// replicas hold different files: a split-brain) is recorded as such ("X")
// and the client goes on with the next.
func racer() int {
	e := readRaceEnv()
	out, err := os.Create(e.out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := bufio.NewWriterSize(out, 1<<16)
	nonce := nonceOf(e.client)
	errs := map[string]int{}
	// perm is the permission bits of the names the client makes: with
	// RACE_MARK, 0640 plus its number, which names the maker of every name
	// (umask 0, so that none of it is masked).
	perm := uint32(0o644)
	if e.mark {
		unix.Umask(0)
		perm = 0o640 | uint32(e.client)
	}
	fail := func(format string, args ...any) int {
		w.Flush()
		fmt.Fprintf(os.Stderr, "client %d: "+format+"\n", append([]any{e.client}, args...)...)
		return 1
	}
	// retry runs f until it returns done, counting the errors it returns.
	retry := func(what string, f func() (bool, error)) error {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, err := f()
			if ok {
				return nil
			}
			errs[errName(err)]++
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: still failing after 30 s: %w", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// writeMark writes the nonce into the file at p (opened as fd, or -1).
	writeMark := func(p string, fd int) error {
		err := retry("writing "+p, func() (bool, error) {
			if fd < 0 {
				var err error
				if fd, err = unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0); err != nil {
					return false, err
				}
			}
			n, err := unix.Pwrite(fd, nonce, 0)
			if err == nil && n == len(nonce) {
				return true, nil
			}
			if err == nil {
				err = fmt.Errorf("short write")
			}
			unix.Close(fd)
			fd = -1
			return false, err
		})
		if fd >= 0 {
			if cerr := unix.Close(fd); cerr != nil {
				errs["close:"+errName(cerr)]++
			}
		}
		return err
	}
	batches := (e.n + e.size - 1) / e.size
	for b := 0; b < batches; b++ {
		dir := batchDir(e.dir, b)
		lo, hi := b*e.size, min(e.n, (b+1)*e.size)
		if e.op == "rename" {
			// Each client makes a quarter of the batch's shared sources.
			for i := lo + e.client; i < hi; i += e.clients {
				src := fmt.Sprintf("%s/s.%d", dir, i)
				amb := false
				if err := retry("making "+src, func() (bool, error) {
					fd, err := unix.Open(src, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
					if err == nil {
						unix.Close(fd)
						return true, nil
					}
					if err == unix.EEXIST && amb {
						return true, nil
					}
					amb = true
					return false, err
				}); err != nil {
					return fail("%v", err)
				}
			}
		}
		if err := barrier(e, b, batches); err != nil {
			return fail("%v", err)
		}
		for i := lo; i < hi; i++ {
			name := fmt.Sprintf("%s/%d", dir, i)
			op := raceOp(e.op, b, e.client)
			amb := false
			took := false
			var err error
			switch op {
			case "create":
				fd := -1
				err = retry("create "+name, func() (bool, error) {
					var err error
					fd, err = unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, perm)
					switch {
					case err == nil:
						took = true
						return true, nil
					case err == unix.EEXIST:
						return true, nil
					}
					amb = true
					return false, err
				})
				if err == nil && took {
					err = writeMark(name, fd)
				}
			case "reg", "fifo":
				mode := mknodType(op) | perm
				err = retry("mknod "+name, func() (bool, error) {
					err := unix.Mknod(name, mode, 0)
					switch {
					case err == nil:
						took = true
						return true, nil
					case err == unix.EEXIST:
						return true, nil
					}
					amb = true
					return false, err
				})
			case "mkdir":
				err = retry("mkdir "+name, func() (bool, error) {
					err := unix.Mkdir(name, 0o755)
					switch {
					case err == nil:
						took = true
						return true, nil
					case err == unix.EEXIST:
						return true, nil
					}
					amb = true
					return false, err
				})
				if err == nil && took {
					mark := fmt.Sprintf("%s/c%d", name, e.client)
					err = retry("marking "+mark, func() (bool, error) {
						fd, err := unix.Open(mark, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
						if err == nil {
							unix.Close(fd)
							return true, nil
						}
						return false, err
					})
				}
			case "link":
				priv := fmt.Sprintf("%s/p.%d.%d", dir, i, e.client)
				if err = retry("making "+priv, func() (bool, error) {
					fd, err := unix.Open(priv, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
					if err != nil {
						return false, err
					}
					return true, writeMark(priv, fd)
				}); err != nil {
					break
				}
				err = retry("link "+name, func() (bool, error) {
					err := unix.Link(priv, name)
					switch {
					case err == nil:
						took = true
						return true, nil
					case err == unix.EEXIST:
						if amb {
							// After an error: the link is ours if our
							// file has two names (procmail's test).
							var st unix.Stat_t
							if serr := unix.Stat(priv, &st); serr != nil {
								return false, serr
							}
							took = st.Nlink == 2
							amb = false
							errs["link-decided-by-nlink"]++
						}
						return true, nil
					}
					amb = true
					return false, err
				})
				if err == nil {
					err = retry("unlink "+priv, func() (bool, error) {
						err := unix.Unlink(priv)
						return err == nil || err == unix.ENOENT, err
					})
				}
			case "symlink":
				err = retry("symlink "+name, func() (bool, error) {
					err := unix.Symlink(string(nonce[:nonceLen-1]), name)
					switch {
					case err == nil:
						took = true
						return true, nil
					case err == unix.EEXIST:
						return true, nil
					}
					amb = true
					return false, err
				})
			case "rename":
				src := fmt.Sprintf("%s/s.%d", dir, i)
				dst := fmt.Sprintf("%s/r.%d.%d", dir, i, e.client)
				err = retry("rename "+src, func() (bool, error) {
					err := unix.Rename(src, dst)
					switch {
					case err == nil:
						took = true
						return true, nil
					case err == unix.ENOENT:
						if amb {
							// After an error: ours if our name exists.
							var st unix.Stat_t
							serr := unix.Stat(dst, &st)
							if serr != nil && serr != unix.ENOENT {
								return false, serr
							}
							took = serr == nil
							amb = false
							errs["rename-decided-by-name"]++
						}
						return true, nil
					}
					amb = true
					return false, err
				})
			default:
				return fail("no primitive %q", e.op)
			}
			if err != nil {
				fmt.Fprintf(w, "X %d\n", i)
				fmt.Fprintf(os.Stderr, "client %d: %v\n", e.client, err)
				if u := errors.Unwrap(err); u != nil {
					errs["gave-up:"+errName(u)]++
				}
				continue
			}
			if took {
				fmt.Fprintf(w, "W %d\n", i)
			} else if amb {
				fmt.Fprintf(w, "A %d\n", i)
			}
			if e.mark && e.op != "rename" {
				// What the filesystem says of the name, through this
				// client, after its call: its maker (permission bits),
				// type and inode. A call whose reply was an error is
				// decided from it, as the claim core decides a mark from
				// its type (CLAIMS.md, "Outcomes decided from the
				// filesystem"): "D i 1" made by this client, "D i 0" not.
				var st unix.Stat_t
				if err := retry("lstat "+name, func() (bool, error) {
					err := unix.Lstat(name, &st)
					return err == nil, err
				}); err != nil {
					return fail("%v", err)
				}
				maker := int(st.Mode & 0o7)
				if st.Mode&0o770 != 0o640 {
					maker = -1
				}
				fmt.Fprintf(w, "F %d %d %d %d\n", i, maker, st.Mode&unix.S_IFMT, st.Ino)
				if amb && !took {
					mine := 0
					if maker == e.client {
						mine = 1
					}
					fmt.Fprintf(w, "D %d %d\n", i, mine)
				}
			}
		}
	}
	for k, v := range errs {
		fmt.Fprintf(w, "E %s %d\n", k, v)
	}
	fmt.Fprintln(w, "END")
	if err := w.Flush(); err != nil {
		return fail("%v", err)
	}
	if err := out.Close(); err != nil {
		return fail("%v", err)
	}
	return 0
}

func errName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		return unix.ErrnoName(en)
	}
	return err.Error()
}

// barrier: the client has reached batch b; wait (10 minutes at most) until
// every client has. The barrier lives on this machine's own disk, which the
// rig's nodes share: it synchronises the test's clients, and the
// filesystem under test has no part in it.
func barrier(e raceEnv, b, batches int) error {
	at := filepath.Join(e.sync, fmt.Sprintf("at.%d", e.client))
	if err := os.WriteFile(at+".tmp", []byte(strconv.Itoa(b)), 0o644); err != nil {
		return err
	}
	if err := os.Rename(at+".tmp", at); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for c := 0; c < e.clients; c++ {
		for {
			v, _ := os.ReadFile(filepath.Join(e.sync, fmt.Sprintf("at.%d", c)))
			if n, err := strconv.Atoi(string(v)); err == nil && n >= b {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("client %d did not reach batch %d in 10 minutes", c, b)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	return nil
}
