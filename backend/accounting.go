package backend

import (
	"context"
	"errors"
)

// Accounting is an optional ability: an engine whose batch system keeps
// its own record of what each job was allocated (Slurm's accounting,
// sacct) gives farm's allocated core-hours from it (farm query, --json
// and report; issue 38) in place of what the meta-jobs' status records
// say. Cost: one call to the batch system per ~10,000 jobs, made only
// where the core-hours are shown, never in a refresh loop.
type Accounting interface {
	// Allocated returns the core-seconds the batch system allocated to
	// each job in ids that it has a record of: its CPUs × its wall time
	// (so far, while it runs; 0 while it is pending), summed over its
	// runs under the same ID (a requeued job's). An array's ID stands for
	// its tasks, each reported under the ID Self gives it ("ARRAY_TASK").
	// A job it has no record of (not yet, or no longer) is left out. It
	// returns an error wrapping ErrNoAccounting when the batch system
	// keeps no accounting.
	Allocated(ctx context.Context, ids []string) (map[string]float64, error)
}

// ErrNoAccounting is Accounting.Allocated's error when the batch system
// keeps no accounting: not a failure, the figures come from elsewhere.
var ErrNoAccounting = errors.New("the batch system keeps no accounting")
