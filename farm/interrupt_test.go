package farm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/slurm"
)

// newTestFarm makes a farm with table as table.dat and opens it on b.
func newTestFarm(t *testing.T, table string, b backend.Backend) (*Farm, *bytes.Buffer) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "farm")
	if err := Init(dir, slurm.Templates()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, layout.Table), []byte(table), 0o644)
	var out bytes.Buffer
	f, err := Open(dir, Options{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	f.backends = fixed{b}
	return f, &out
}

// interruptingBackend's Submit is interrupted (ctx cancelled) while its
// first job is in flight, which it then lets finish; or, with fail, whose
// call in flight times out.
type interruptingBackend struct {
	fakeBackend
	cancel context.CancelFunc
	fail   bool
}

func (b *interruptingBackend) Submit(ctx context.Context, req backend.SubmitRequest) ([]string, error) {
	b.cancel()
	time.Sleep(200 * time.Millisecond) // the call in flight goes on
	if b.fail {
		return nil, errors.New("Something wrong with sbatch farm submission: sbatch gave no answer within 30s; the job may or may not have been submitted")
	}
	return []string{"7001"}, ctx.Err()
}

// TestInterruptedSubmitRecordsTheJobInFlight: the job of the call in
// flight when Ctrl-C came is recorded, and the message says what was done.
func TestInterruptedSubmitRecordsTheJobInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := &interruptingBackend{cancel: cancel}
	f, out := newTestFarm(t, "true\ntrue\n", b)
	err := f.Submit(ctx, SubmitOptions{N: 3})
	var ie *InterruptedError
	if !errors.As(err, &ie) || err.Error() != "interrupted: 1 job(s) were submitted before it (see 'farm list')" {
		t.Errorf("err %v", err)
	}
	if recs, _ := f.Jobs(); len(recs) != 1 || recs[0].ID != "7001" {
		t.Errorf("records %+v, want job 7001", recs)
	}
	if !strings.Contains(out.String(), "Interrupted: letting the submission in flight end") {
		t.Errorf("said %q", out)
	}

	ctx, cancel = context.WithCancel(context.Background())
	f, _ = newTestFarm(t, "true\ntrue\n", &interruptingBackend{cancel: cancel, fail: true})
	err = f.Submit(ctx, SubmitOptions{N: 3})
	want := "interrupted: no job was recorded and run 1 was closed (a job submitted all the same finds no case to run): 'farm resubmit N' runs its cases; the submission in flight failed: Something wrong with sbatch farm submission: sbatch gave no answer within 30s"
	if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err %v\nwant %s", err, want)
	}
	if st, _ := f.readState(context.Background()); st.Run != 1 || st.Claimed != st.Cases {
		t.Errorf("state %+v, want run 1 closed", st)
	}
}
