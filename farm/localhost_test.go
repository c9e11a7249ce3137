package farm

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/farm/proc"
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
	l := &Local{Dir: t.TempDir()}
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
		want      JobState
		otherHost string
	}{
		{"ours, dead", localState{State: Running, PID: dead, Host: proc.HostID()}, Failed, ""},
		{"ours, alive", localState{State: Running, PID: self, PIDStart: proc.StartTicks(self), Host: proc.HostID()}, Running, ""},
		{"ours, PID reused", localState{State: Running, PID: self, PIDStart: proc.StartTicks(self) + 1, Host: proc.HostID()}, Failed, ""},
		{"old record, dead", localState{State: Running, PID: dead}, Failed, ""},
		{"old record, alive", localState{State: Pending, PID: self}, Pending, ""},
		{"another host, running", localState{State: Running, PID: dead, Host: other}, Running, other},
		{"another host, pending", localState{State: Pending, PID: dead, Host: other}, Pending, other},
		{"another host, ended", localState{State: Completed, PID: dead, Host: other}, Completed, other},
		{"same name, another PID namespace", localState{State: Running, PID: dead,
			Host: strings.TrimSuffix(proc.HostID(), "]") + "9]"}, Running, strings.TrimSuffix(proc.HostID(), "]") + "9]"},
		// This host before a reboot: its jobs died with it.
		{"this host, earlier boot, running", localState{State: Running, PID: self, PIDStart: proc.StartTicks(self), Host: earlierBoot}, Failed, ""},
		{"this host, earlier boot, ended", localState{State: Completed, PID: dead, Host: earlierBoot}, Completed, earlierBoot},
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
	b, _ := json.Marshal(localState{State: Running})
	if bytes.Contains(b, []byte("Host")) {
		t.Errorf("empty Host written: %s", b)
	}
}

// TestListOtherHost: farm list says which jobs run elsewhere.
func TestListOtherHost(t *testing.T) {
	sum := sampleSummary(t)
	other := "nodeA/e02f4ba5-dd84-4a53-9aef-3189c6d5d41e/pid:[4026532461]"
	recs := []JobRecord{
		{Run: 1, Backend: "local", Kind: KindMeta, ID: "1"},
		{Run: 1, Backend: "local", Kind: KindMeta, ID: "2"},
		{Run: 1, Backend: "local", Kind: KindMeta, ID: "3"},
	}
	infos := map[string]JobInfo{
		"1": {ID: "1", State: Running, OtherHost: other},
		"2": {ID: "2", State: Completed, OtherHost: other},
		"3": {ID: "3", State: Running},
	}
	rows := listRows(recs, infos, sum)
	var b bytes.Buffer
	writeList(&b, rows, false)
	want := "Job 1 runs on nodeA (host identity " + other + "), not here: its state is the one it last recorded.\n"
	if !strings.HasSuffix(b.String(), "\n"+want) || strings.Count(b.String(), "runs on") != 1 {
		t.Errorf("list:\n%s\nwant it to end with %q", b.String(), want)
	}
	b.Reset()
	writeList(&b, rows, true)
	var back []map[string]any
	json.Unmarshal(b.Bytes(), &back)
	if back[0]["other_host"] != other || back[1]["other_host"] != other {
		t.Errorf("JSON: %s", b.String())
	}
	if _, ok := back[2]["other_host"]; ok {
		t.Errorf("JSON has other_host for a job of this host: %s", b.String())
	}
}
