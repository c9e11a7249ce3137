package status

import (
	"errors"
	"io"
	"time"
)

// Placement is where a case ran inside its meta-job: its loop (slot) and
// the CPUs and GPUs it was given (none when not managed).
type Placement struct {
	Loop int      // 1..; 0: not said
	CPUs []int    // CPU numbers it was bound to
	GPUs []string // devices it was given (CUDA_VISIBLE_DEVICES)
}

// Capacity is what a meta-job packs its cases into, said in its status
// file's header (cpus=N gpus=N): farm query shows how busy it is.
type Capacity struct {
	CPUs, GPUs int
}

// CreateCap is CreateLog for a meta-job that packs cases into c.
func CreateCap(path, jobID string, restart, run int, host string, c Capacity, log io.Writer) (*Writer, error) {
	return nil, errors.New("not implemented yet")
}

// StartAt records that case id started at t, placed at p.
func (w *Writer) StartAt(id int64, t time.Time, p Placement) error {
	return errors.New("not implemented yet")
}

// Unfit records that the meta-job took case id at t and did not start it,
// and why (it needs more than the job has, or more time than it has
// left): the case is left for the next run.
func (w *Writer) Unfit(id int64, t time.Time, reason string) error {
	return errors.New("not implemented yet")
}
