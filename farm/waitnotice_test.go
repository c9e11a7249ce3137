package farm

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// waitingFarm is a farm whose run 2 has a warden (job 11), a meta-job
// silent for 41 minutes (12), one that wrote a record just now (13), one
// pending (14), and an -auto job (15).
func waitingFarm(t *testing.T, now time.Time) (*Farm, []JobRecord, map[string]backend.JobInfo) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Join(layout.MiscDir, layout.RescueDir(2)), layout.StatusDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, text string, mtime time.Time) {
		path := filepath.Join(dir, rel)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(layout.MiscDir, layout.RescueDir(2), layout.WardenMark(1, "")), "9\n", now)
	write(filepath.Join(layout.MiscDir, layout.RescueDir(2), layout.WardenMark(1, ".ended")), "", now)
	write(filepath.Join(layout.MiscDir, layout.RescueDir(2), layout.WardenMark(2, "")), "11\n", now)
	for id, age := range map[string]time.Duration{"11": 30 * time.Minute, "12": 41 * time.Minute, "13": 0} {
		write(filepath.Join(layout.StatusDir, layout.StatusFile(id, 0)), "S\n", now.Add(-age))
	}
	recs := []JobRecord{{2, "fake", kindMeta, "13"}, {2, "fake", kindMeta, "14"}, {2, "fake", kindMeta, "11"},
		{2, "fake", kindAuto, "15"}, {2, "fake", kindMeta, "12"}}
	end := time.Date(2026, 11, 30, 14, 5, 0, 0, time.UTC)
	infos := map[string]backend.JobInfo{
		"11": {ID: "11", State: backend.Running}, "12": {ID: "12", State: backend.Running, End: end},
		"13": {ID: "13", State: backend.Running}, "14": {ID: "14", State: backend.Pending},
		"15": {ID: "15", State: backend.Pending},
	}
	return &Farm{Dir: dir}, recs, infos
}

func TestWaitingForNamesWhatHoldsTheWait(t *testing.T) {
	now := time.Now()
	f, recs, infos := waitingFarm(t, now)
	line, _ := f.waitingFor(recs, infos, now)
	want := []string{
		"5 job(s): meta-job 12 of run 2 has written no record for 41m (a long case, or a frozen job: it is waited for until its time limit, 14:05 UTC; 'farm kill' ends it)",
		"; meta-job 11 stays as run 2's warden while its other meta-jobs run, to rescue their cases if they die",
		"; meta-job 13 of run 2 runs cases",
		"; meta-job 14 of run 2 is pending in the queue",
		"; the -auto job 15 (PENDING) of run 2, which resubmits once the run's meta-jobs end",
	}
	if got := strings.Join(want, ""); line != got {
		t.Errorf("waitingFor:\n got %q\nwant %q", line, got)
	}
}

func TestWaitNoticeCadence(t *testing.T) {
	t0 := time.Now()
	f, recs, infos := waitingFarm(t, t0)
	var out bytes.Buffer
	n := waitNotice{w: &out, start: t0}
	said := func(at time.Duration) bool {
		before := out.Len()
		n.say(f, nil, recs, infos, t0.Add(at))
		return out.Len() > before
	}
	if said(30 * time.Second) {
		t.Errorf("a notice after 30 s of waiting: %q; want the first after %s", out.String(), noticeAfter)
	}
	if !said(61 * time.Second) {
		t.Fatalf("no notice after 61 s of waiting")
	}
	if !strings.HasPrefix(out.String(), "farm wait: waiting 1m so far, for 5 job(s): ") {
		t.Errorf("notice %q: want it to start with how long farm wait has waited and the jobs", out.String())
	}
	if said(3 * time.Minute) {
		t.Errorf("a second notice with nothing changed after 2 minutes: %q", out.String())
	}
	infos["14"] = backend.JobInfo{ID: "14", State: backend.Running}
	if !said(3*time.Minute + time.Second) {
		t.Errorf("no notice when a job started")
	}
	if said(4*time.Minute + 30*time.Second) {
		t.Errorf("a notice with nothing changed: %q", out.String())
	}
	if !said(14 * time.Minute) {
		t.Errorf("no notice after %s with nothing changed", noticeEvery)
	}
	if n.say(f, nil, nil, infos, t0.Add(time.Hour)); strings.Count(out.String(), "\n") != 3 {
		t.Errorf("notices %q: want 3 (none with no job left)", out.String())
	}
}
