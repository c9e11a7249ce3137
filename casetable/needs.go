package casetable

import (
	"errors"
	"time"
)

// NeedsMark starts what a case declares it needs, at the end of its table
// line: "COMMAND #FARM cpus=4 gpus=1 mem=8G min_time=30m". bash takes it
// for a comment, so a single_case.sh written for META that evals the line
// runs it as before; numbering leaves it where it is.
const NeedsMark = "#FARM"

// Needs is what a case declares it needs with NeedsMark. A field not
// declared has its zero value (GPUs: -1), and the meta-job applies its
// default (one CPU in WHOLE_NODE mode, else the whole job).
type Needs struct {
	Declared bool          // the line has a NeedsMark part
	CPUs     int           // cpus=N, N >= 1; 0: not declared
	GPUs     int           // gpus=N, N >= 0; -1: not declared
	MemMB    int64         // mem=SIZE (K, M, G, T; M if no unit), in MiB; 0: not declared
	MinTime  time.Duration // min_time=TIME (Slurm's formats, or 90s, 30m, 2h); 0: not declared
}

// ParseNeeds splits a case's command (the line without its ID) into the
// command to run and what it declares it needs: the last NeedsMark that
// starts a blank-separated field and the key=value fields after it. A
// command without one has Needs{GPUs: -1}. An unknown key or a bad value
// is an error of one line that says what is wrong and what is allowed.
func ParseNeeds(command string) (string, Needs, error) {
	return command, Needs{GPUs: -1}, errors.New("not implemented yet")
}
