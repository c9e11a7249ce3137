// Package slurm is the Slurm backend of farm: sbatch, squeue, scancel.
package slurm

import (
	"context"
	"errors"

	"github.com/farm-hpc/farm/farm"
)

// Backend runs farm jobs on Slurm.
type Backend struct {
	Dir string
}

var _ farm.Backend = (*Backend)(nil)

// New returns the Slurm backend for the farm in dir.
func New(dir string) *Backend { return &Backend{Dir: dir} }

var errTODO = errors.New("the Slurm backend is not implemented yet")

// Available returns "" when Slurm can be used here, else why not.
func Available(ctx context.Context) string { return "no Slurm backend yet" }

// Name implements farm.Backend.
func (b *Backend) Name() string { return "slurm" }

// Submit implements farm.Backend.
func (b *Backend) Submit(ctx context.Context, req farm.SubmitRequest) ([]string, error) {
	return nil, errTODO
}

// Jobs implements farm.Backend.
func (b *Backend) Jobs(ctx context.Context, ids []string) (map[string]farm.JobInfo, error) {
	return nil, errTODO
}

// Cancel implements farm.Backend.
func (b *Backend) Cancel(ctx context.Context, ids []string, pendingOnly bool) ([]string, error) {
	return nil, errTODO
}

// Self implements farm.Backend.
func (b *Backend) Self(ctx context.Context) (farm.Self, error) { return farm.Self{}, errTODO }
