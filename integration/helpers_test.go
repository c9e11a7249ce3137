// Package integration holds end-to-end tests of the built farm binary, on
// the local backend and against a real Slurm. The cluster rig's tests are in
// integration/rigtest; both drive the binary through integration/harness.
package integration

import "github.com/farm-hpc/farm/integration/harness"

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
