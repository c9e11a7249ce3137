// Package integration holds end-to-end tests of the built farm binary, on
// the local backend and against a real Slurm. The cluster rig's tests are in
// integration/rigtest; both drive the binary through integration/harness.
package integration

import (
	"strings"
	"testing"

	"github.com/farm-hpc/farm/integration/harness"
)

type (
	result    = harness.Result
	statusRow = harness.StatusRow
	records   = harness.Records
)

var (
	bin         = harness.Bin
	farmIn      = harness.Run
	mustFarm    = harness.Must
	newFarm     = harness.NewFarm
	setLimit    = harness.SetLimit
	repeat      = harness.Repeat
	statusJSON  = harness.StatusJSON
	readRecords = harness.ReadRecords
	waitFor     = harness.WaitFor
)

// exitNotAllOK is farm wait's exit code when some case did not succeed.
const exitNotAllOK = harness.ExitNotAllOK

// shortLimit lets a farm command submit with a run-time under META's 30
// seconds on the local backend, which keeps it to the second: for the
// tests of time limits, which would take minutes with 30 s ones.
const shortLimit = "FARM_MIN_RUNTIME=1s"

// mustFarmShort is mustFarm with shortLimit.
func mustFarmShort(t *testing.T, dir string, args ...string) string {
	t.Helper()
	r := farmIn(t, dir, []string{shortLimit}, args...)
	if r.Code != 0 {
		t.Fatalf("farm %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Out, r.Err)
	}
	return r.Out
}
