// Command farm runs job farms: many independent cases, one command line each,
// claimed one at a time by a few meta-jobs on Slurm or on this machine.
package main

import "os"

func main() {
	os.Exit(Run(os.Args, os.Stdout, os.Stderr))
}
