package casetable

import "github.com/farm-hpc/farm/vfs"

// mutant names a past defect that the simulator's tests put back, to show that
// they catch it (SIMULATION.md, the catalogue): "" but in their runs, where it
// is set before any Store is made and reset after.
var mutant string

// mutated reports whether the past defect name is reintroduced.
func mutated(name string) bool { return mutant != "" && mutant == name }

// Mutants that replace a whole step: set by the simulator's tests (mutantsteps_test.go).
var (
	linkChain  func(fsys vfs.FS, misc, name string) (*chain, error)   // chain-file-by-link
	linkCommit func(c *chain, d int, n int64, b []byte) (bool, error) // link-commit
	carry      func(s *Store, spec RunSpec, cur State) []Set          // queue-carried-to-next-run
)
