package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/backend"
)

// TestAllocatedIsOneSacctCall: Allocated asks sacct once for the jobs,
// whole jobs only (-X), and gives each its AllocCPUS × ElapsedRaw under
// its own ID: array tasks by task ID, a pending array's line and a het
// job's parts left out, a pending job 0, a job sacct does not list absent.
func TestAllocatedIsOneSacctCall(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	fakeBin(t, map[string]string{"sacct": `echo "$*" >> ` + calls + `
echo "7|4|100|COMPLETED"
echo "8|2|30|CANCELLED by 0"
echo "9_1|1|12|COMPLETED"
echo "9_2|1|13|TIMEOUT"
echo "9_[3-5]|0|0|PENDING"
echo "10|0|0|PENDING"
echo "11+0|2|5|COMPLETED"
echo "7|4|999|COMPLETED"`})
	got, err := New("").Allocated(context.Background(), []string{"7", "8", "9", "10", "11", "12", "7", "bogus;rm"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"7": 400, "8": 60, "9_1": 12, "9_2": 13, "10": 0}
	if len(got) != len(want) {
		t.Errorf("Allocated = %v, want %v", got, want)
	}
	for id, w := range want {
		if v, ok := got[id]; !ok || v != w {
			t.Errorf("job %s: %v core-seconds (listed: %v), want %v", id, v, ok, w)
		}
	}
	b, _ := os.ReadFile(calls)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1 || lines[0] != "-X -n -P -j 7,8,9,10,11,12 -o "+sacctFormat {
		t.Errorf("sacct called as %q", lines)
	}
}

// TestAllocatedWithoutAccounting: where Slurm keeps no accounting sacct
// says so, and Allocated's error is ErrNoAccounting; any other failure,
// or an answer it cannot read, is an error of its own.
func TestAllocatedWithoutAccounting(t *testing.T) {
	fakeBin(t, map[string]string{"sacct": `echo "Slurm accounting storage is disabled" >&2; exit 1`})
	if _, err := New("").Allocated(context.Background(), []string{"5"}); !errors.Is(err, backend.ErrNoAccounting) {
		t.Errorf("accounting disabled: %v, want ErrNoAccounting", err)
	}
	fakeBin(t, map[string]string{"sacct": `echo "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:127.0.0.1:6819: Connection refused
sacct: error: Sending PersistInit msg: Connection refused
sacct: error: Problem talking to the database: Connection refused" >&2; exit 1`})
	_, err := New("").Allocated(context.Background(), []string{"5"})
	if err == nil || errors.Is(err, backend.ErrNoAccounting) || !strings.HasSuffix(err.Error(), ": sacct: error: Problem talking to the database: Connection refused") || strings.Contains(err.Error(), "\n") {
		t.Errorf("slurmdbd down: %v, want an error of one line with sacct's last", err)
	}
	fakeBin(t, map[string]string{"sacct": `echo "5|4|1:00|COMPLETED"`})
	if _, err := New("").Allocated(context.Background(), []string{"5"}); err == nil {
		t.Error("an unreadable ElapsedRaw: no error")
	}
}
