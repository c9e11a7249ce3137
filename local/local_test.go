package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/proc"
)

// deadPID returns the PID of a process that has ended and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestLocalJobLivenessByHost: a job's PIDs are judged only when the
// record is this host's (or does not say, as records written before host
// identities were kept); another host's job keeps its recorded state.
func TestLocalJobLivenessByHost(t *testing.T) {
	l := New(t.TempDir(), Options{})
	if err := os.MkdirAll(l.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	other := "nodeA/" + strings.Split(proc.HostID(), "/")[1] + "/pid:[1]"
	parts := strings.SplitN(proc.HostID(), "/", 3)
	earlierBoot := parts[0] + "/00000000-0000-0000-0000-000000000000/" + parts[2]
	dead, self := deadPID(t), os.Getpid()
	start := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name      string
		st        localState
		want      backend.JobState
		otherHost string
	}{
		{"ours, dead", localState{State: backend.Running, PID: dead, Host: proc.HostID()}, backend.Failed, ""},
		{"ours, alive", localState{State: backend.Running, PID: self, PIDStart: proc.StartTicks(self), Host: proc.HostID()}, backend.Running, ""},
		{"ours, PID reused", localState{State: backend.Running, PID: self, PIDStart: proc.StartTicks(self) + 1, Host: proc.HostID()}, backend.Failed, ""},
		{"old record, dead", localState{State: backend.Running, PID: dead}, backend.Failed, ""},
		{"old record, alive", localState{State: backend.Pending, PID: self}, backend.Pending, ""},
		{"another host, running", localState{State: backend.Running, PID: dead, Host: other}, backend.Running, other},
		{"another host, pending", localState{State: backend.Pending, PID: dead, Host: other}, backend.Pending, other},
		{"another host, ended", localState{State: backend.Completed, PID: dead, Host: other}, backend.Completed, other},
		{"same name, another PID namespace", localState{State: backend.Running, PID: dead,
			Host: strings.TrimSuffix(proc.HostID(), "]") + "9]"}, backend.Running, strings.TrimSuffix(proc.HostID(), "]") + "9]"},
		// This host before a reboot: its jobs died with it.
		{"this host, earlier boot, running", localState{State: backend.Running, PID: self, PIDStart: proc.StartTicks(self), Host: earlierBoot}, backend.Failed, ""},
		{"this host, earlier boot, ended", localState{State: backend.Completed, PID: dead, Host: earlierBoot}, backend.Completed, earlierBoot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, " ", "_")
			tc.st.Start = start
			if err := writeJSON(l.path(id, ".job"), localSpec{ID: id, Submitted: start}); err != nil {
				t.Fatal(err)
			}
			if err := writeJSON(l.path(id, ".state"), tc.st); err != nil {
				t.Fatal(err)
			}
			infos, _ := l.Jobs(context.Background(), []string{id})
			if in := infos[id]; in.State != tc.want || in.OtherHost != tc.otherHost {
				t.Errorf("state %s, other host %q; want %s, %q", in.State, in.OtherHost, tc.want, tc.otherHost)
			}
		})
	}
	// A record without Host reads as before (no "Host" key written).
	b, _ := json.Marshal(localState{State: backend.Running})
	if bytes.Contains(b, []byte("Host")) {
		t.Errorf("empty Host written: %s", b)
	}
}

// TestJobEnvironDropsTheSubmittingJobsOwn: a job submitted from inside a
// local job (the -auto job's resubmission) does not inherit that job's ID
// or end time.
func TestJobEnvironDropsTheSubmittingJobsOwn(t *testing.T) {
	got := jobEnviron([]string{"PATH=/bin", "FARM_JOB_ID=7", "FARM_END_TIME=1800000000", "FARM_RUN=2"})
	if strings.Join(got, " ") != "PATH=/bin FARM_RUN=2" {
		t.Errorf("jobEnviron = %q", got)
	}
}

// TestDamagedStateRecord: a job state record that does not read (it is
// only ever replaced whole, so it is not one being written) is an error
// of Jobs naming it and what to do, not a job shown PENDING and then
// FAILED; the other jobs are reported. Removed, as the error says, the job
// counts as failed.
func TestDamagedStateRecord(t *testing.T) {
	l := New(t.TempDir(), Options{})
	if err := os.MkdirAll(l.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	submitted := time.Now().Add(-2 * time.Minute)
	for _, id := range []string{"1", "2"} {
		if err := writeJSON(l.path(id, ".job"), localSpec{ID: id, Submitted: submitted}); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON(l.path("2", ".state"), localState{State: backend.Completed, Host: proc.HostID()})
	for content, why := range map[string]string{
		"garbage":                   `not a job state record: invalid character 'g' looking for beginning of value`,
		"":                          `not a job state record: unexpected end of JSON input`,
		`{"State":"RUNNING","PID":`: `not a job state record: unexpected end of JSON input`,
		`{"State":"BOGUS"}`:         `unknown state "BOGUS"`,
		`{}`:                        `unknown state ""`,
	} {
		os.WriteFile(l.path("1", ".state"), []byte(content), 0o644)
		infos, err := l.Jobs(context.Background(), []string{"1", "2"})
		want := l.path("1", ".state") + " is damaged (" + why + "): farm cannot tell whether local job 1 still runs; once no 'farm _localjob ... --id 1' process is left (ps -ef | grep _localjob), remove the file, and the job counts as failed (a minute after its submission)"
		var de *DamagedError
		if !errors.As(err, &de) || err.Error() != want {
			t.Errorf("%q: err %v\nwant %s", content, err, want)
		}
		if infos["2"].State != backend.Completed {
			t.Errorf("%q: the other job is %s", content, infos["2"].State)
		}
	}
	os.Remove(l.path("1", ".state"))
	infos, err := l.Jobs(context.Background(), []string{"1", "2"})
	if err != nil || infos["1"].State != backend.Failed {
		t.Errorf("state record removed: %v, %v; want FAILED", infos["1"].State, err)
	}
}

// TestCancelFileInPlace: a cancel overwrites the file Submit made in place,
// at its size (no block to add on a full disk), and the supervisor reads
// the mode back, from it and from a file an earlier farm wrote (the mode
// alone); without a file a cancel makes one as an earlier farm did.
func TestCancelFileInPlace(t *testing.T) {
	l := New(t.TempDir(), Options{})
	if err := os.MkdirAll(l.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &supervisor{l: l, id: "1"}
	if m := s.cancelMode(); m != "" {
		t.Errorf("no file: mode %q, want none", m)
	}
	if err := os.WriteFile(l.path("1", ".cancel"), []byte(cancelNone), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := s.cancelMode(); m != "" {
		t.Errorf("placeholder: mode %q, want none", m)
	}
	for _, mode := range []string{"pending", "all"} {
		if err := l.writeCancel("1", mode); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(l.path("1", ".cancel"))
		if len(b) != cancelSize || s.cancelMode() != mode {
			t.Errorf("after writeCancel(%s): %q (%d bytes), mode %q; want %d bytes, mode %s", mode, b, len(b), s.cancelMode(), cancelSize, mode)
		}
	}
	// A job submitted before the placeholders: its file made, mode alone.
	if err := l.writeCancel("2", "all"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(l.path("2", ".cancel")); string(b) != "all" {
		t.Errorf("new cancel file %q, want \"all\"", b)
	}
	for _, old := range []string{"all", "pending"} {
		if m := parseCancel([]byte(old)); m != old {
			t.Errorf("an earlier farm's %q reads %q", old, m)
		}
	}
}
