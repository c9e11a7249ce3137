package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// run runs w with o and fails t on an error, with the trace's end.
func run(t *testing.T, w *World, o Options) {
	t.Helper()
	if err := w.Run(o); err != nil {
		var b strings.Builder
		w.WriteTrace(&b, 40)
		t.Fatalf("%v\n%s", err, b.String())
	}
}

// mustOK fails the process's test on an error (from the test's goroutine
// only after Run: processes record errors instead).
func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeFile makes name with content through fs (Root).
func writeFile(t *testing.T, fs vfs.FS, name, content string) {
	t.Helper()
	fd, err := fs.Openat(unix.AT_FDCWD, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
	mustOK(t, err)
	_, err = fs.Write(fd, []byte(content))
	mustOK(t, err)
	mustOK(t, fs.Close(fd))
}

// readFile is name's content through fs, or the error.
func readFile(fs vfs.FS, name string) (string, error) {
	fd, err := fs.Openat(unix.AT_FDCWD, name, unix.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer fs.Close(fd)
	var out []byte
	buf := make([]byte, 64)
	for {
		n, err := fs.Read(fd, buf)
		if err != nil {
			return "", err
		}
		if n == 0 {
			return string(out), nil
		}
		out = append(out, buf[:n]...)
	}
}

// busy is a process that makes files, writes, reads, renames and sleeps,
// ignoring errors: a workload for determinism.
func busy(p *Proc) {
	fs := p.FS()
	for k := range 30 {
		name := fmt.Sprintf("/d/%s.%d", p.Name(), k%5)
		fd, err := fs.Openat(unix.AT_FDCWD, name, unix.O_RDWR|unix.O_CREAT|unix.O_APPEND, 0o644)
		if err == nil {
			fs.Write(fd, []byte(p.Name()))
			fs.Pread(fd, make([]byte, 8), 0)
			fs.Fsync(fd)
			fs.Close(fd)
		}
		var st unix.Stat_t
		fs.Fstatat(unix.AT_FDCWD, "/d/shared", &st, unix.AT_SYMLINK_NOFOLLOW)
		fs.Mknodat(unix.AT_FDCWD, fmt.Sprintf("/d/m.%d", k), unix.S_IFREG|0o644)
		fs.Renameat(unix.AT_FDCWD, name, unix.AT_FDCWD, "/d/shared")
		fs.Sleep(context.Background(), time.Duration(fs.Rand()%uint64(time.Second)))
	}
}

// busyWorld runs 4 busy processes on NFS with every fault.
func busyWorld(t *testing.T, seed uint64) *World {
	w := New(seed, NFS())
	mustOK(t, w.Root().Mkdirat(unix.AT_FDCWD, "/d", 0o755))
	for k := range 4 {
		w.Go(fmt.Sprintf("p%d", k), busy)
	}
	w.OnCrash(func(p *Proc) { w.Go(p.Name()+"'", busy) })
	f := Faults{Crash: 0.002, Freeze: 0.01, FreezeMax: time.Minute, LostReply: 0.05, Transient: 0.05, Outage: 0.002}
	run(t, w, Options{Faults: f})
	return w
}

func TestSameSeedSameTrace(t *testing.T) {
	a, b, c := busyWorld(t, 7).Trace(), busyWorld(t, 7).Trace(), busyWorld(t, 8).Trace()
	if !slices.Equal(a, b) {
		for k := range min(len(a), len(b)) {
			if a[k] != b[k] {
				t.Fatalf("seed 7 twice: traces differ at line %d:\n%s\n%s", k, a[k], b[k])
			}
		}
		t.Fatalf("seed 7 twice: traces of %d and %d lines", len(a), len(b))
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 made the same trace")
	}
	if len(a) < 500 {
		t.Fatalf("a trace of %d lines: the workload did little", len(a))
	}
}

func TestSeedsInterleaveDifferently(t *testing.T) {
	orders := map[string]bool{}
	for seed := range uint64(10) {
		w := New(seed, Local())
		var order []string
		for k := range 3 {
			w.Go(fmt.Sprint(k), func(p *Proc) {
				var st unix.Stat_t
				for range 5 {
					p.FS().Fstatat(unix.AT_FDCWD, "/", &st, 0)
					order = append(order, p.Name())
				}
			})
		}
		run(t, w, Options{})
		orders[strings.Join(order, "")] = true
	}
	if len(orders) < 8 {
		t.Fatalf("10 seeds made %d interleavings: %v", len(orders), orders)
	}
}

// TestExclusiveCreateOneWinner: 4 processes create each of 50 names with
// O_EXCL, retrying errors until EEXIST or success: at most one of them is
// told it made a name, and the name then holds its nonce (or nothing, if
// its write failed); lost replies make names nobody was told of.
func TestExclusiveCreateOneWinner(t *testing.T) {
	for _, m := range []Model{Local(), NFS(), GlusterReplica(), GlusterDHT()} {
		t.Run(m.Name, func(t *testing.T) {
			w := New(3, m)
			const names = 50
			won := make([][]string, names)
			for k := range 4 {
				w.Go(fmt.Sprintf("c%d", k), func(p *Proc) {
					fs := p.FS()
					for n := range names {
						for {
							fd, err := fs.Openat(unix.AT_FDCWD, fmt.Sprintf("/x.%d", n), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
							if err == unix.EEXIST {
								break
							}
							if err == nil {
								won[n] = append(won[n], p.Name())
								fs.Write(fd, []byte(p.Name()))
								fs.Close(fd)
								break
							}
						}
					}
				})
			}
			run(t, w, Options{Faults: Faults{LostReply: 0.1, Transient: 0.1}})
			told := 0
			for n := range names {
				got, err := readFile(w.Root(), fmt.Sprintf("/x.%d", n))
				mustOK(t, err)
				switch {
				case len(won[n]) > 1:
					t.Errorf("name %d: %v were all told they made it", n, won[n])
				case len(won[n]) == 1 && got != won[n][0] && got != "":
					t.Errorf("name %d: %s was told it made it; it holds %q", n, won[n][0], got)
				case len(won[n]) == 0 && got != "":
					t.Errorf("name %d: nobody was told, it holds %q", n, got)
				}
				told += len(won[n])
			}
			s := w.Stats()
			t.Logf("%d of %d names told to their maker; %s", told, names, s)
			if m.LostReply != nil && (s.LostReplies == 0 || told == names) {
				t.Errorf("no reply lost, or none that mattered (%d of %d names told): %s", told, names, s)
			}
		})
	}
}

// TestCrashUnwindsWithoutEffect: a crashed process's deferred calls do
// nothing to the filesystem, its files stay, and OnCrash can restart it.
func TestCrashUnwindsWithoutEffect(t *testing.T) {
	inLoop := 0
	for seed := range uint64(20) {
		w := New(seed, Local())
		writeFile(t, w.Root(), "/f", "")
		var deferredReturned, looped bool
		var restarted *Proc
		p := w.Go("writer", func(p *Proc) {
			fs := p.FS()
			fd, err := fs.Openat(unix.AT_FDCWD, "/f", unix.O_WRONLY, 0)
			if err != nil {
				return
			}
			defer func() {
				fs.Unlinkat(unix.AT_FDCWD, "/f", 0)
				deferredReturned = true
			}()
			defer fs.Close(fd)
			looped = true
			for {
				fs.Write(fd, []byte("x"))
			}
		})
		w.OnCrash(func(q *Proc) {
			if q != p {
				t.Errorf("OnCrash(%s)", q.Name())
			}
			restarted = w.Go("restarted", func(p *Proc) {
				mustOK(t, p.FS().Mknodat(unix.AT_FDCWD, "/restarted", unix.S_IFREG|0o644))
			}).NoCrash()
		})
		run(t, w, Options{Faults: Faults{Crash: 0.05}})
		var st unix.Stat_t
		switch {
		case !p.Crashed() || restarted == nil || !restarted.Done() || restarted.Crashed():
			t.Fatalf("seed %d: crashed %v, restarted %v", seed, p.Crashed(), restarted)
		case deferredReturned:
			t.Fatalf("seed %d: a deferred FS call of the crashed process returned", seed)
		case w.Root().Fstatat(unix.AT_FDCWD, "/f", &st, 0) != nil:
			t.Fatalf("seed %d: /f is gone: the deferred unlink had an effect", seed)
		case w.Root().Fstatat(unix.AT_FDCWD, "/restarted", &st, 0) != nil:
			t.Fatalf("seed %d: the restarted process did not run", seed)
		}
		if looped {
			inLoop++
		}
	}
	if inLoop < 10 {
		t.Fatalf("only %d of 20 seeds crashed the process inside its loop", inLoop)
	}
}

// TestFreezeLetsOthersRun: while one process is frozen, the others run
// for the virtual time of its freeze.
func TestFreezeLetsOthersRun(t *testing.T) {
	w := New(5, Local())
	var times1, times2 []time.Duration
	done := false
	stat := func(p *Proc) {
		var st unix.Stat_t
		p.FS().Fstatat(unix.AT_FDCWD, "/", &st, 0)
	}
	w.Go("frozen", func(p *Proc) {
		for range 50 {
			stat(p)
			times1 = append(times1, p.FS().Now().Sub(Epoch))
		}
		done = true
	})
	w.Go("other", func(p *Proc) {
		for !done {
			stat(p)
			times2 = append(times2, p.FS().Now().Sub(Epoch))
			p.FS().Sleep(context.Background(), 100*time.Millisecond)
		}
	})
	run(t, w, Options{Faults: Faults{Freeze: 0.05}})
	var stalled time.Duration
	during := 0
	for k := 1; k < len(times1); k++ {
		from, to := times1[k-1], times1[k]
		if to-from < time.Second {
			continue
		}
		stalled += to - from
		for _, t := range times2 {
			if t > from && t < to {
				during++
			}
		}
	}
	if stalled < 5*time.Second || during < 20 {
		t.Fatalf("the frozen process stalled %s in all, with %d calls of the other meanwhile (%s)", stalled, during, w.Stats())
	}
}

// TestNFSNegativeCache: a client that looked a name up and found nothing
// keeps finding nothing after another made it, until its entry expires
// or it opens the directory (not O_PATH); Local never hides it.
func TestNFSNegativeCache(t *testing.T) {
	for _, m := range []Model{NFS(), Local()} {
		w := New(1, m)
		mustOK(t, w.Root().Mkdirat(unix.AT_FDCWD, "/d", 0o755))
		var got []string
		look := func(p *Proc, what string) {
			var st unix.Stat_t
			err := p.FS().Fstatat(unix.AT_FDCWD, "/d/x", &st, unix.AT_SYMLINK_NOFOLLOW)
			got = append(got, fmt.Sprintf("%s %s: %v", p.Name(), what, err))
		}
		sleep := func(p *Proc, d time.Duration) { p.FS().Sleep(context.Background(), d) }
		for _, name := range []string{"a", "b"} {
			w.Go(name, func(p *Proc) {
				fs := p.FS()
				look(p, "before")
				sleep(p, 50*time.Millisecond)
				look(p, "after")
				fd, err := fs.Openat(unix.AT_FDCWD, "/d", unix.O_PATH|unix.O_DIRECTORY, 0)
				mustOK(t, err)
				fs.Close(fd)
				look(p, "after O_PATH")
				if name == "a" {
					fd, err = fs.Openat(unix.AT_FDCWD, "/d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
					mustOK(t, err)
					fs.Close(fd)
					look(p, "after open")
				} else {
					sleep(p, 31*time.Second)
					look(p, "later")
				}
			})
		}
		w.Go("maker", func(p *Proc) {
			sleep(p, 10*time.Millisecond)
			mustOK(t, p.FS().Mknodat(unix.AT_FDCWD, "/d/x", unix.S_IFREG|0o644))
		})
		run(t, w, Options{})
		slices.Sort(got)
		want := []string{
			"a after O_PATH: no such file or directory", "a after open: <nil>", "a after: no such file or directory", "a before: no such file or directory",
			"b after O_PATH: no such file or directory", "b after: no such file or directory", "b before: no such file or directory", "b later: <nil>",
		}
		if m.NegCache == 0 {
			want = []string{
				"a after O_PATH: <nil>", "a after open: <nil>", "a after: <nil>", "a before: no such file or directory",
				"b after O_PATH: <nil>", "b after: <nil>", "b before: no such file or directory", "b later: <nil>",
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", m.Name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if m.NegCache > 0 && w.Stats().Stale != 4 {
			t.Errorf("%s: %d stale answers, want 4", m.Name, w.Stats().Stale)
		}
	}
}

// linkRace has 4 processes link files of their own to each of 100 names
// at the same moments: the names two were told they linked.
func linkRace(t *testing.T, m Model) int {
	w := New(11, m)
	const names = 100
	won := make([]int, names)
	for k := range 4 {
		w.Go(fmt.Sprint(k), func(p *Proc) {
			fs := p.FS()
			mine := "/p." + p.Name()
			mustOK(t, vfs.WriteNewAt(fs, unix.AT_FDCWD, mine, []byte(mine), 0o644))
			for n := range names {
				at := Epoch.Add(time.Duration(n+1) * 100 * time.Millisecond)
				fs.Sleep(context.Background(), at.Sub(fs.Now()))
				name := fmt.Sprintf("/n.%d", n)
				if fs.Linkat(unix.AT_FDCWD, mine, unix.AT_FDCWD, name) == nil {
					won[n]++
					// A winner reads its own file back, as on the rig.
					if b, err := vfs.ReadFile(fs, name); err != nil || string(b) != mine {
						t.Errorf("%s: %s linked %s and read back %q, %v", m.Name, mine, name, b, err)
					}
				}
			}
		})
	}
	run(t, w, Options{})
	doubles := 0
	for n := range names {
		if won[n] == 0 {
			t.Errorf("%s: nobody linked name %d", m.Name, n)
		}
		if won[n] > 1 {
			doubles++
		}
	}
	t.Logf("%s: %d of %d names linked by two or more; %s", m.Name, doubles, names, w.Stats())
	if int64(doubles) > w.Stats().LinkRaces {
		t.Errorf("%s: %d names won twice, %d link races", m.Name, doubles, w.Stats().LinkRaces)
	}
	return doubles
}

func TestGlusterDHTLinkNotExclusive(t *testing.T) {
	if n := linkRace(t, GlusterDHT()); n < 10 {
		t.Errorf("gluster-dht: %d names of 100 won twice, want many", n)
	}
	for _, m := range []Model{Local(), GlusterReplica(), NFS()} {
		if n := linkRace(t, m); n != 0 {
			t.Errorf("%s: %d names won twice", m.Name, n)
		}
	}
}

// TestFullENOSPC: creates and extending writes fail with ENOSPC or EDQUOT
// in the model's windows, without effect, and not after Faults.Until.
func TestFullENOSPC(t *testing.T) {
	w := New(2, Full())
	var full, fullLate, made, written int
	w.Go("maker", func(p *Proc) {
		fs := p.FS()
		fd, err := fs.Openat(unix.AT_FDCWD, "/log", unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND, 0o644)
		mustOK(t, err)
		for n := 0; fs.Now().Sub(Epoch) < 90*time.Second; n++ {
			name := fmt.Sprintf("/f.%d", n)
			err := fs.Mknodat(unix.AT_FDCWD, name, unix.S_IFREG|0o644)
			var st unix.Stat_t
			switch {
			case err == unix.ENOSPC || err == unix.EDQUOT:
				full++
				if fs.Now().Sub(Epoch) > 60*time.Second {
					fullLate++
				}
				if fs.Fstatat(unix.AT_FDCWD, name, &st, 0) != unix.ENOENT {
					t.Errorf("%s was made by a create that failed", name)
				}
			case err == nil:
				made++
			default:
				t.Errorf("mknod: %v", err)
			}
			if _, err := fs.Write(fd, []byte("x")); err == nil {
				written++
			}
			fs.Sleep(context.Background(), 10*time.Millisecond)
		}
	})
	run(t, w, Options{Faults: Faults{Outage: 0.005, OutageMax: 3 * time.Second, Until: 60 * time.Second}})
	var st unix.Stat_t
	mustOK(t, w.Root().Fstatat(unix.AT_FDCWD, "/log", &st, 0))
	t.Logf("%d creates failed for lack of space, %d made; %s", full, made, w.Stats())
	if full < 10 || fullLate > 0 || made < 1000 || st.Size != int64(written) {
		t.Fatalf("%d creates failed for lack of space (%d after the faults stopped), %d made; %d bytes written, the log has %d; %s",
			full, fullLate, made, written, st.Size, w.Stats())
	}
}

func TestSleepIsVirtual(t *testing.T) {
	w := New(1, NFS())
	var slept time.Duration
	w.Go("sleeper", func(p *Proc) {
		fs := p.FS()
		t0 := fs.Now()
		mustOK(t, fs.Sleep(context.Background(), time.Hour))
		slept = fs.Now().Sub(t0)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := fs.Sleep(ctx, time.Hour); err != context.Canceled {
			t.Errorf("Sleep with a cancelled context: %v", err)
		}
	})
	start := time.Now()
	run(t, w, Options{})
	if real := time.Since(start); slept != time.Hour || real > time.Second {
		t.Fatalf("slept %s virtual in %s real", slept, real)
	}
	if got := w.Now().Sub(Epoch); got != time.Hour {
		t.Fatalf("the world ends at %s", got)
	}
}

// TestSleepWokenByCancel: a process that cancels another's context while
// it sleeps wakes it then, as a timer's select does (vfs.OS.Sleep), with
// the context's error.
func TestSleepWokenByCancel(t *testing.T) {
	w := New(1, Local())
	ctx, cancel := context.WithCancel(context.Background())
	var woke time.Duration
	var err error
	w.Go("sleeper", func(p *Proc) {
		err = p.FS().Sleep(ctx, time.Hour)
		woke = p.w.now
	})
	w.Go("canceller", func(p *Proc) {
		p.FS().Sleep(context.Background(), time.Minute)
		cancel()
	})
	run(t, w, Options{})
	if err != context.Canceled || woke != time.Minute {
		t.Fatalf("the sleeper woke at %s with %v; want at 1m0s, context.Canceled", woke, err)
	}
}

// TestGlusterDHTOutageIsOneSet: on a distributed volume, a brick's outage
// fails calls on the names hashed to its replica set only.
func TestGlusterDHTOutageIsOneSet(t *testing.T) {
	w := New(3, GlusterDHT())
	for i := range 8 {
		if err := vfs.WriteAtomic(w.Root(), fmt.Sprintf("/n%d", i), 0o644, nil); err != nil {
			t.Fatal(err)
		}
	}
	failed := map[string]int{}
	w.Go("p", func(p *Proc) {
		fs := p.FS()
		w.beginOutage()
		w.outageCut, w.outageUntil = false, time.Hour
		var st unix.Stat_t
		for i := range 400 {
			name := fmt.Sprintf("/n%d", i%8)
			if fs.Fstatat(unix.AT_FDCWD, name, &st, 0) == unix.ENOENT {
				failed[name]++
			}
		}
	})
	run(t, w, Options{Faults: Faults{Until: time.Hour}})
	spared, hit := 0, 0
	for i := range 8 {
		switch n := failed[fmt.Sprintf("/n%d", i)]; {
		case n == 0:
			spared++
		case n > 10:
			hit++
		}
	}
	if spared == 0 || hit == 0 || spared+hit != 8 {
		t.Fatalf("spurious ENOENTs by name %v: want some names never (the other set's), the others about half the time", failed)
	}
}

// TestLimits: a run past its virtual time, or with every process blocked
// for ever, is an error naming the processes left, which are killed.
func TestLimits(t *testing.T) {
	w := New(1, Local())
	deferredRan := false
	p := w.Go("looper", func(p *Proc) {
		defer func() { deferredRan = true }()
		for {
			p.FS().Sleep(context.Background(), time.Second)
		}
	})
	err := w.Run(Options{MaxTime: time.Hour})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "looper (sleeping until") || !p.Done() || !deferredRan {
		t.Fatalf("Run: %v; done %v, unwound %v", err, p.Done(), deferredRan)
	}

	w = New(1, Local())
	mustOK(t, w.Root().Mknodat(unix.AT_FDCWD, "/fifo", unix.S_IFIFO|0o644))
	w.Go("reader", func(p *Proc) { p.FS().Openat(unix.AT_FDCWD, "/fifo", unix.O_RDONLY, 0) })
	err = w.Run(Options{})
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), "reader (blocked for ever opening a FIFO)") {
		t.Fatalf("Run: %v", err)
	}

	w = New(1, Local())
	w.Go("spinner", func(p *Proc) {
		for {
			p.FS().Fsync(0)
		}
	})
	if err := w.Run(Options{MaxSteps: 1000}); !errors.Is(err, ErrLimit) || w.Stats().Steps != 1000 {
		t.Fatalf("Run: %v after %d steps", err, w.Stats().Steps)
	}
}

func TestProcessPanicIsAnError(t *testing.T) {
	w := New(1, Local())
	w.Go("bad", func(p *Proc) { panic("oops") })
	w.Go("good", func(p *Proc) {
		for {
			p.FS().Sleep(context.Background(), time.Second)
		}
	})
	err := w.Run(Options{})
	if err == nil || !strings.Contains(err.Error(), "process bad panicked") || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("Run: %v", err)
	}
}

// TestHooksAndGo: OnStep runs at every step, and a process may start
// another.
func TestHooksAndGo(t *testing.T) {
	w := New(1, GlusterReplica())
	steps := 0
	w.OnStep(func() {
		steps++
		var st unix.Stat_t
		w.Root().Fstatat(unix.AT_FDCWD, "/", &st, 0)
	})
	var child *Proc
	w.Go("parent", func(p *Proc) {
		child = w.Go("child", func(p *Proc) {
			p.FS().Mkdirat(unix.AT_FDCWD, "/child", 0o755)
		})
	})
	run(t, w, Options{})
	var st unix.Stat_t
	if int64(steps) != w.Stats().Steps || !child.Done() || w.Root().Fstatat(unix.AT_FDCWD, "/child", &st, 0) != nil {
		t.Fatalf("%d OnStep calls, %s; child done: %v", steps, w.Stats(), child.Done())
	}
}

// TestNFSWritesHeldUntilClose: another client sees a file's writes once
// they are closed or fsynced, not before; an open file reads what it
// read (up to the attribute cache) and a new open revalidates.
func TestNFSWritesHeldUntilClose(t *testing.T) {
	w := New(1, NFS())
	writeFile(t, w.Root(), "/f", "old")
	var seen []string
	read := func(p *Proc, what string) {
		s, err := readFile(p.FS(), "/f")
		seen = append(seen, fmt.Sprintf("%s: %q %v", what, s, err))
	}
	step := func(p *Proc, n int) {
		p.FS().Sleep(context.Background(), time.Duration(n)*time.Second-p.FS().Now().Sub(Epoch))
	}
	w.Go("writer", func(p *Proc) {
		fs := p.FS()
		fd, err := fs.Openat(unix.AT_FDCWD, "/f", unix.O_WRONLY|unix.O_TRUNC, 0)
		mustOK(t, err)
		fs.Write(fd, []byte("new"))
		step(p, 2)
		fs.Fsync(fd)
		step(p, 4)
		fs.Pwrite(fd, []byte("NEW"), 0)
		fs.Close(fd)
	})
	w.Go("reader", func(p *Proc) {
		step(p, 1)
		read(p, "1s, written")
		step(p, 3)
		read(p, "3s, fsynced")
		step(p, 5)
		read(p, "5s, closed")
	})
	run(t, w, Options{})
	want := []string{`1s, written: "" <nil>`, `3s, fsynced: "new" <nil>`, `5s, closed: "NEW" <nil>`}
	if !slices.Equal(seen, want) {
		t.Fatalf("got %q, want %q", seen, want)
	}
}

// TestGlusterStaleRead: a file rewritten in place by another client may
// be read old for up to a second, open or no open.
func TestGlusterStaleRead(t *testing.T) {
	w := New(1, GlusterReplica())
	writeFile(t, w.Root(), "/head", "0001")
	var seen []string
	w.Go("reader", func(p *Proc) {
		for _, at := range []time.Duration{0, 100 * time.Millisecond, 1100 * time.Millisecond} {
			p.FS().Sleep(context.Background(), at-p.FS().Now().Sub(Epoch))
			s, _ := readFile(p.FS(), "/head")
			seen = append(seen, s)
		}
	})
	w.Go("writer", func(p *Proc) {
		fs := p.FS()
		fs.Sleep(context.Background(), 50*time.Millisecond)
		fd, err := fs.Openat(unix.AT_FDCWD, "/head", unix.O_WRONLY, 0)
		mustOK(t, err)
		fs.Pwrite(fd, []byte("0002"), 0)
		fs.Close(fd)
	})
	run(t, w, Options{})
	if want := []string{"0001", "0001", "0002"}; !slices.Equal(seen, want) || w.Stats().Stale == 0 {
		t.Fatalf("read %q, want %q; %s", seen, want, w.Stats())
	}
}

// TestLostReplyTookEffect: a lost reply's call did what it was asked.
func TestLostReplyTookEffect(t *testing.T) {
	for _, m := range []Model{NFS(), GlusterReplica()} {
		w := New(1, m)
		var errs []error
		w.Go("p", func(p *Proc) {
			fs := p.FS()
			errs = append(errs, fs.Mknodat(unix.AT_FDCWD, "/a", unix.S_IFREG|0o644))
			errs = append(errs, fs.Mkdirat(unix.AT_FDCWD, "/d", 0o755))
			errs = append(errs, fs.Renameat(unix.AT_FDCWD, "/a", unix.AT_FDCWD, "/d/b"))
		})
		run(t, w, Options{Faults: Faults{LostReply: 1}})
		var st unix.Stat_t
		for _, err := range errs {
			if err == nil {
				t.Errorf("%s: a call whose reply was lost succeeded", m.Name)
			}
		}
		if w.Root().Fstatat(unix.AT_FDCWD, "/d/b", &st, 0) != nil || w.Stats().LostReplies != 3 {
			t.Errorf("%s: %v; /d/b not made; %s", m.Name, errs, w.Stats())
		}
	}
}

// TestOutageAtFault: a lost reply begins an outage window there, so that
// the lookup of the call's outcome fails too.
func TestOutageAtFault(t *testing.T) {
	w := New(3, NFSSoft())
	var made, looked error
	w.Go("p", func(p *Proc) {
		fs := p.FS()
		made = fs.Mknodat(unix.AT_FDCWD, "/a", unix.S_IFREG|0o644)
		var st unix.Stat_t
		looked = fs.Fstatat(unix.AT_FDCWD, "/a", &st, 0)
	})
	run(t, w, Options{Faults: Faults{LostReply: 1, OutageAtFault: 1, OutageMax: time.Hour}})
	var st unix.Stat_t
	if made != unix.ETIMEDOUT && made != unix.EIO && made != unix.EEXIST || looked != unix.ETIMEDOUT ||
		w.Root().Fstatat(unix.AT_FDCWD, "/a", &st, 0) != nil || w.Stats().Outages != 1 {
		t.Fatalf("mknod answered %v, the lookup after it %v (want a lost reply, then ETIMEDOUT); %s", made, looked, w.Stats())
	}
}

// TestAim: a process's faults are aimed at the calls named, and the
// world's rates stay for the rest.
func TestAim(t *testing.T) {
	w := New(5, GlusterReplica())
	var mk, dir []error
	w.Go("p", func(p *Proc) {
		fs := p.FS()
		for n := range 50 {
			mk = append(mk, fs.Mknodat(unix.AT_FDCWD, fmt.Sprintf("/m.%d", n), unix.S_IFREG|0o644))
			dir = append(dir, fs.Mkdirat(unix.AT_FDCWD, fmt.Sprintf("/d.%d", n), 0o755))
		}
	}).Aim(20, "mknodat")
	run(t, w, Options{Faults: Faults{LostReply: 0.05}})
	dirLost := 0
	for n := range 50 {
		if mk[n] == nil {
			t.Fatalf("mknod %d succeeded: want its reply lost (aimed at a rate of 1)", n)
		}
		if dir[n] != nil {
			dirLost++
		}
	}
	if dirLost > 10 {
		t.Fatalf("%d of 50 mkdirs lost their replies: want about 5%% (not aimed)", dirLost)
	}
}

// TestAimNext: AimNext aims at the process's next call only.
func TestAimNext(t *testing.T) {
	w := New(5, GlusterReplica())
	var errs []error
	w.Go("p", func(p *Proc) {
		fs := p.FS()
		var st unix.Stat_t
		for n := range 40 {
			if n%10 == 0 {
				p.AimNext(1000)
			}
			errs = append(errs, fs.Fstatat(unix.AT_FDCWD, "/", &st, 0))
		}
	})
	run(t, w, Options{Faults: Faults{Transient: 0.001}})
	for n, err := range errs {
		if (n%10 == 0) != (err != nil) {
			t.Fatalf("lookup %d answered %v: want a transient error at lookups 0, 10, 20, 30 (aimed at), none else (%v)", n, err, errs)
		}
	}
}

// TestBeginOutage: an outage begun by a test fails the calls after it,
// and none begins while one is under way or once the faults are over.
func TestBeginOutage(t *testing.T) {
	w := New(3, NFSSoft())
	var began, again, later bool
	var looked error
	w.Go("p", func(p *Proc) {
		fs := p.FS()
		began = w.BeginOutage()
		again = w.BeginOutage()
		var st unix.Stat_t
		looked = fs.Fstatat(unix.AT_FDCWD, "/", &st, 0)
		fs.Sleep(context.Background(), 2*time.Hour)
		later = w.BeginOutage()
	})
	run(t, w, Options{Faults: Faults{OutageMax: time.Hour, Until: time.Hour}})
	if !began || again || later || looked != unix.ETIMEDOUT || w.Stats().Outages != 1 {
		t.Fatalf("began %v, again %v, after the faults %v, the lookup answered %v, %d outages: want true, false, false, ETIMEDOUT, 1",
			began, again, later, looked, w.Stats().Outages)
	}
}

// TestSlow: a slow process's calls are overtaken: of two making the same
// calls from the same moment, the one Slow(10) ends last, several times
// as late.
func TestSlow(t *testing.T) {
	w := New(7, Local())
	var end = map[string]time.Duration{}
	for _, name := range []string{"slow", "fast"} {
		p := w.Go(name, func(p *Proc) {
			fs := p.FS()
			var st unix.Stat_t
			for range 100 {
				fs.Fstatat(unix.AT_FDCWD, "/", &st, 0)
			}
			end[name] = p.w.now
		})
		if name == "slow" {
			p.Slow(10)
		}
	}
	run(t, w, Options{})
	if end["slow"] < 4*end["fast"] {
		t.Fatalf("the slow process ended at %s, the other at %s: want it several times as late", end["slow"], end["fast"])
	}
}

// TestGlusterClientCutOff: a GlusterFS outage is one brick down (about
// half the calls fail) or the client cut off from every brick (every call
// fails with ENOTCONN), one window in two.
func TestGlusterClientCutOff(t *testing.T) {
	cut, brick := 0, 0
	for seed := range uint64(20) {
		w := New(seed, GlusterReplica())
		failed := 0
		w.Go("p", func(p *Proc) {
			fs := p.FS()
			var st unix.Stat_t
			for range 40 {
				if err := fs.Fstatat(unix.AT_FDCWD, "/", &st, 0); err != nil {
					if err != unix.ENOTCONN && err != unix.ENOENT {
						t.Errorf("a lookup in an outage answered %v", err)
					}
					failed++
				}
			}
		})
		run(t, w, Options{Faults: Faults{Outage: 1, OutageMax: time.Hour}})
		switch {
		case failed == 40:
			cut++
		case failed > 5 && failed < 35:
			brick++
		default:
			t.Errorf("seed %d: %d of 40 lookups failed in an outage: want all (cut off) or about half (a brick down)", seed, failed)
		}
	}
	if cut == 0 || brick == 0 {
		t.Errorf("%d outages cut the client off, %d took a brick down: want both", cut, brick)
	}
}

// TestPOSIX checks the server's semantics through Root.
func TestPOSIX(t *testing.T) {
	w := New(1, Local())
	fs := w.Root()
	at := unix.AT_FDCWD
	var st unix.Stat_t
	is := func(what string, err, want error) {
		t.Helper()
		if err != want {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	is("mkdir", fs.Mkdirat(at, "/d", 0o755), nil)
	is("mkdir again", fs.Mkdirat(at, "/d/", 0o755), unix.EEXIST)
	is("mkdir in a missing dir", fs.Mkdirat(at, "/no/d", 0o755), unix.ENOENT)
	is("mknod", fs.Mknodat(at, "/d/f", unix.S_IFREG|0o600), nil)
	is("mknod fifo onto a file", fs.Mknodat(at, "/d/f", unix.S_IFIFO|0o600), unix.EEXIST)
	is("mknod onto a dir", fs.Mknodat(at, "/d", unix.S_IFREG|0o600), unix.EEXIST)
	is("mknod of a device", fs.Mknodat(at, "/d/c", unix.S_IFCHR|0o600), unix.EPERM)
	is("file as a dir", fs.Fstatat(at, "/d/f/x", &st, 0), unix.ENOTDIR)
	_, err := fs.Openat(at, "/d/f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	is("O_EXCL onto a file", err, unix.EEXIST)
	_, err = fs.Openat(at, "/d", unix.O_WRONLY, 0)
	is("a dir for writing", err, unix.EISDIR)
	_, err = fs.Openat(at, "/d/f", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	is("O_DIRECTORY of a file", err, unix.ENOTDIR)
	dfd, err := fs.Openat(at, "/d", unix.O_PATH|unix.O_DIRECTORY, 0)
	is("O_PATH", err, nil)
	if dfd != 3 {
		t.Errorf("first descriptor %d, want 3", dfd)
	}
	_, err = fs.Read(dfd, make([]byte, 1))
	is("read of O_PATH", err, unix.EBADF)
	_, err = fs.Getdents(dfd)
	is("getdents of O_PATH", err, unix.EBADF)
	is("fstat of O_PATH", fs.Fstat(dfd, &st), nil)
	is("fstatat relative", fs.Fstatat(dfd, "f", &st, unix.AT_SYMLINK_NOFOLLOW), nil)
	is("fstatat ..", fs.Fstatat(dfd, "../d/./f", &st, 0), nil)
	is("unlink a dir", fs.Unlinkat(at, "/d", 0), unix.EISDIR)
	is("rmdir non-empty", fs.Unlinkat(at, "/d", unix.AT_REMOVEDIR), unix.ENOTEMPTY)
	is("rmdir a file", fs.Unlinkat(dfd, "f", unix.AT_REMOVEDIR), unix.ENOTDIR)
	is("link a dir", fs.Linkat(at, "/d", at, "/e"), unix.EPERM)
	is("link", fs.Linkat(dfd, "f", at, "/g"), nil)
	is("link onto a name", fs.Linkat(dfd, "f", at, "/g"), unix.EEXIST)
	is("fstat nlink", fs.Fstatat(at, "/g", &st, 0), nil)
	if st.Nlink != 2 || st.Mode != unix.S_IFREG|0o600 {
		t.Errorf("nlink %d, mode %#o", st.Nlink, st.Mode)
	}
	is("rename onto a hard link of itself", fs.Renameat(at, "/g", dfd, "f"), nil)
	is("still two names", fs.Fstatat(at, "/g", &st, 0), nil)
	writeFile(t, fs, "/h", "hello")
	is("rename replaces", fs.Renameat(at, "/h", at, "/g"), nil)
	is("rename a file onto a dir", fs.Renameat(at, "/g", at, "/d"), unix.EISDIR)
	is("rename a dir into itself", fs.Renameat(at, "/d", dfd, "sub"), unix.EINVAL)
	got, err := readFile(fs, "/g")
	if got != "hello" || err != nil {
		t.Errorf("/g holds %q, %v", got, err)
	}
	names, err := fs.Getdents(must(fs.Openat(at, "/", unix.O_RDONLY|unix.O_DIRECTORY, 0)))
	if !slices.Equal(names, []string{"d", "g"}) || err != nil {
		t.Errorf("getdents: %q, %v", names, err)
	}
	is("unlink", fs.Unlinkat(dfd, "f", 0), nil)
	is("rmdir", fs.Unlinkat(at, "/d", unix.AT_REMOVEDIR), nil)
	is("lookup in a removed dir", fs.Fstatat(dfd, "x", &st, 0), unix.ENOENT)
	is("create in a removed dir", fs.Mknodat(dfd, "x", unix.S_IFREG|0o600), unix.ENOENT)
	is("close", fs.Close(dfd), nil)
	is("close again", fs.Close(dfd), unix.EBADF)
}

func must(fd int, err error) int {
	if err != nil {
		panic(err)
	}
	return fd
}

// TestPOSIXFiles: offsets, O_APPEND, O_TRUNC, pread and pwrite, EMLINK.
func TestPOSIXFiles(t *testing.T) {
	m := Local()
	m.LinkMax = 3
	w := New(1, m)
	fs := w.Root()
	at := unix.AT_FDCWD
	fd := must(fs.Openat(at, "/f", unix.O_RDWR|unix.O_CREAT, 0o644))
	fs.Write(fd, []byte("abcdef"))
	fs.Pwrite(fd, []byte("XY"), 1)
	fs.Pwrite(fd, []byte("Z"), 8)
	b := make([]byte, 16)
	n, _ := fs.Pread(fd, b, 0)
	if got := string(b[:n]); got != "aXYdef\x00\x00Z" {
		t.Errorf("content %q", got)
	}
	n, _ = fs.Read(fd, b) // the offset is 6, after the write
	if got := string(b[:n]); got != "\x00\x00Z" {
		t.Errorf("read from the offset: %q", got)
	}
	afd := must(fs.Openat(at, "/f", unix.O_WRONLY|unix.O_APPEND, 0))
	fs.Pwrite(afd, []byte("!"), 0) // appends, as Linux does
	tfd := must(fs.Openat(at, "/f", unix.O_WRONLY|unix.O_TRUNC, 0))
	fs.Write(tfd, []byte("new"))
	if got, _ := readFile(fs, "/f"); got != "new" {
		t.Errorf("after O_TRUNC: %q", got)
	}
	for k := 2; k <= 4; k++ {
		err := fs.Linkat(at, "/f", at, fmt.Sprintf("/f%d", k))
		if want := map[bool]error{true: nil, false: unix.EMLINK}[k <= 3]; err != want {
			t.Errorf("link %d: %v, want %v", k, err, want)
		}
	}
}

// BenchmarkStep is the cost of a step: a turn handed to a process, its
// FS call, and the turn handed back.
func BenchmarkStep(b *testing.B) {
	w := New(1, Local())
	per := b.N/4 + 1
	for k := range 4 {
		w.Go(fmt.Sprint(k), func(p *Proc) {
			var st unix.Stat_t
			for range per {
				p.FS().Fstatat(unix.AT_FDCWD, "/", &st, 0)
			}
		})
	}
	b.ResetTimer()
	if err := w.Run(Options{TraceLast: 1000}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(w.Stats().Steps), "ns/step")
}
