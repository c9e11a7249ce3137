package metajob

import (
	"bytes"
	"context"
	"github.com/farm-hpc/farm/layout"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// asked is a request for loop s's next case, made in a goroutine of its
// own: its answer comes on the channel.
func asked(m *Metajob, s *loop) <-chan turn {
	ch := make(chan turn, 1)
	go func() { ch <- m.next(context.Background(), s) }()
	return ch
}

// answer is the answer on ch, within d; it fails the test if none came.
func answer(t *testing.T, ch <-chan turn, d time.Duration) turn {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(d):
		t.Fatalf("no answer within %s", d)
	}
	return turn{}
}

// unanswered fails the test if ch has an answer within d: the request
// waits, parked.
func unanswered(t *testing.T, ch <-chan turn, d time.Duration) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("answered %+v; want the request parked", a)
	case <-time.After(d):
	}
}

// tableDone makes m's job one whose table has no case left for it and
// that holds none, with retries pending.
func tableDone(m *Metajob, retries ...pendingRetry) {
	m.do(func(o *owner) {
		o.queue, o.tableDone, o.retries = nil, true, retries
	})
}

// TestOwnerWaitsForARetry: a request of a job with nothing left but a
// retry waits, parked, until the retry is due, and gets it then (the
// owner's timer, not a loop that sleeps and polls).
func TestOwnerWaitsForARetry(t *testing.T) {
	m, s, _ := lookFarm(t)
	due := time.Now().Add(300 * time.Millisecond)
	tableDone(m, pendingRetry{c: tablefmt.Case{ID: 50, Command: "echo 50"}, retry: 1, due: due})
	a := answer(t, asked(m, s), 5*time.Second)
	if a.why != going || a.err != nil || a.c.ID != 50 || s.retry != 1 {
		t.Fatalf("answer: case %d (retry %d), %q, %v; want case 50's retry 1", a.c.ID, s.retry, a.why, a.err)
	}
	if time.Now().Before(due) {
		t.Errorf("the retry was handed out before it was due")
	}
}

// TestOwnerEndsParkedRequests: requests waiting for a retry due in an
// hour get their loop's stop as soon as the job ends: another loop's
// error, or a stop signal.
func TestOwnerEndsParkedRequests(t *testing.T) {
	for _, end := range []string{"halted", "signal"} {
		t.Run(end, func(t *testing.T) {
			m, s, _ := lookFarm(t)
			tableDone(m, pendingRetry{c: tablefmt.Case{ID: 50}, retry: 1, due: time.Now().Add(time.Hour)})
			chs := []<-chan turn{asked(m, s), asked(m, &loop{k: 2, runner: nopRunner{}})}
			unanswered(t, chs[0], 200*time.Millisecond)
			want := stopHalted
			if end == "halted" {
				m.do(func(o *owner) { o.halted = true }) // as a loop that ended with an error
			} else {
				want = stopSignal
				m.stop.sig.Store(int32(syscall.SIGTERM))
				close(m.stop.ch)
			}
			for _, ch := range chs {
				if a := answer(t, ch, 5*time.Second); a.why != want || a.err != nil {
					t.Errorf("answer: %q, %v; want %q", a.why, a.err, want)
				}
			}
			if n := owned(m, func(o *owner) int { return len(o.retries) }); n != 1 {
				t.Errorf("%d retries pending, want the 1 left for the next run", n)
			}
		})
	}
}

// TestOwnerWaitsForAddedCases: a request whose claim found no case left
// waits (WAIT_FOR_CASES) and probes the run every LookEvery; once
// 'farm add' gave the run cases, it claims them.
func TestOwnerWaitsForAddedCases(t *testing.T) {
	m, ch, other := idleFarm(t)
	unanswered(t, ch, 400*time.Millisecond)
	if !strings.Contains(owned(m, func(*owner) string { return m.log.(*bytes.Buffer).String() }), "waiting up to 1m0s for cases 'farm add' adds to run 1") {
		t.Errorf("the job did not say it waits: %s", m.log)
	}
	if q, err := other.Enqueue(context.Background(), 1, "x", []byte("101 echo added 101\n"), 1, 101, false); err != nil || q.Run != 1 {
		t.Fatalf("enqueue: %+v, %v", q, err)
	}
	if a := answer(t, ch, 5*time.Second); a.why != going || a.err != nil || a.c.ID != 101 {
		t.Fatalf("answer: case %d, %q, %v; want the added case 101", a.c.ID, a.why, a.err)
	}
}

// TestOwnerWaitsForARescue: a request of a job that must stay for its
// own rescue waits, parked, and gets the rescued case as soon as the
// rescuer hands it over; once the job need no longer stay, a waiting
// request's loop ends at the watch's next look, no case left.
func TestOwnerWaitsForARescue(t *testing.T) {
	_, jobs := rescueFarm(t, 2, time.Minute, &stateBackend{})
	m := jobs[0]
	// Another job is the run's warden: this one stays for its own rescue.
	if err := os.WriteFile(filepath.Join(m.rescue.dir, layout.WardenMark(1, "")), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.rescue.mu.Lock()
	m.rescue.pending = []pendingRescue{{name: "status.2", at: time.Now(), state: "FAILED"}}
	m.rescue.mu.Unlock()
	tableDone(m)
	s := &loop{k: 1, runner: nopRunner{}}
	ch := asked(m, s)
	unanswered(t, ch, 300*time.Millisecond)
	rc := rescuedCase{c: tablefmt.Case{ID: 7, Command: "echo 7"}, retry: 1, why: status.WhyRescue, from: "status.2"}
	m.do(func(o *owner) { o.rescued = append(o.rescued, rc) }) // as collect hands it over
	if a := answer(t, ch, time.Second); a.why != going || a.c.ID != 7 || s.from != "status.2" || s.retry != 1 {
		t.Fatalf("answer: case %d from %q (retry %d), %q, %v; want the rescued case 7", a.c.ID, s.from, s.retry, a.why, a.err)
	}
	ch = asked(m, s)
	unanswered(t, ch, 300*time.Millisecond)
	m.rescue.mu.Lock()
	m.rescue.pending = nil // carried out, nothing found
	m.rescue.mu.Unlock()
	if a := answer(t, ch, 5*time.Second); a.why != stopNoCases || a.err != nil {
		t.Fatalf("answer: case %d, %q, %v; want %q", a.c.ID, a.why, a.err, stopNoCases)
	}
}

// TestOwnerWatchesAsTheWarden: the first job with nothing left becomes
// the run's warden: its first look at once (the other job runs), then a
// look every pollEvery at the job still running; once it has looked it
// says it stays, and once the other job has quit (its Q record, then its
// quit mark), its waiting request's loop ends, no case left.
func TestOwnerWatchesAsTheWarden(t *testing.T) {
	b := &stateBackend{}
	_, jobs := rescueFarm(t, 2, time.Minute, b)
	m := jobs[0]
	tableDone(m)
	ch := asked(m, &loop{k: 1, runner: nopRunner{}})
	unanswered(t, ch, 300*time.Millisecond)
	said := func() bool {
		return strings.Contains(owned(m, func(*owner) string { return m.log.(*bytes.Buffer).String() }), "this meta-job stays while others of run 1 run")
	}
	for end := time.Now().Add(5 * time.Second); !said(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the warden did not say it stays: %s", owned(m, func(*owner) string { return m.log.(*bytes.Buffer).String() }))
		}
	}
	unanswered(t, ch, 300*time.Millisecond)
	if !m.rescue.wardenNow() || b.queries.Load() != 1 {
		t.Fatalf("warden %v after %d queries; want the warden, its first look made", m.rescue.wardenNow(), b.queries.Load())
	}
	if err := jobs[1].quit(stopNoCases, nil); err != nil { // its Q record, then its quit mark
		t.Fatal(err)
	}
	if a := answer(t, ch, 5*time.Second); a.why != stopNoCases || a.err != nil {
		t.Fatalf("answer: %q, %v; want %q", a.why, a.err, stopNoCases)
	}
	if b.queries.Load() != 1 {
		t.Errorf("%d scheduler queries; want the first look's alone (then quit marks)", b.queries.Load())
	}
}
