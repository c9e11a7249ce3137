// Command farm runs job farms: many independent cases, one command line each,
// claimed in batches by a few meta-jobs on a batch system (the engines
// registered in backends.go) or on this machine (the local engine).
package main

import "os"

func main() {
	os.Exit(Run(os.Args, os.Stdout, os.Stderr))
}
