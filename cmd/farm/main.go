// Command farm runs job farms: many independent cases, one command line each,
// claimed in batches by a few meta-jobs on a batch system (the engines
// registered in backends.go) or on this machine (the local engine).
package main

import (
	"os"

	"github.com/farm-hpc/farm/metajob"
)

// caseEndCmd is the hidden command that ends a case's subshell in a
// meta-job's bash worker (metajob.CaseEnd).
const caseEndCmd = "__case-end"

func main() {
	if len(os.Args) > 1 && os.Args[1] == caseEndCmd {
		// The end of a case's subshell (metajob/caseuse.go), on every
		// case that ran long enough: before anything else.
		os.Exit(metajob.CaseEnd(os.Args[2:]))
	}
	os.Exit(Run(os.Args, os.Stdout, os.Stderr))
}
