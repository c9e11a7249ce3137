package slurm

import (
	"context"
	"fmt"

	"github.com/farm-hpc/farm/backend"
)

// maxCancelArgs is the most job IDs given to one scancel call.
const maxCancelArgs = 5000

// Cancel implements backend.Backend. It asks squeue once which of ids are
// active (pending, with PendingOnly), cancels those with one scancel call
// (one per 5,000 jobs; scancel --state=PENDING with PendingOnly, which also
// cancels only the pending tasks of an array) and returns them. It then
// polls squeue, for up to CancelWait, until they are no longer pending or
// running, so that squeue shows no job of the farm once `farm kill`
// returns; with Slurm's usual KillWait of 30 s a job that ignores SIGTERM
// may outlast that wait, and Cancel returns anyway: Slurm kills it. With
// PendingOnly, a job that started between the query and scancel was not
// cancelled and is left out.
func (b *Backend) Cancel(ctx context.Context, ids []string, scope backend.CancelScope) ([]string, error) {
	pendingOnly := scope == backend.PendingOnly
	before, err := b.query(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("cancelling jobs: %w", err)
	}
	targets := before.Pick(ids, func(a *backend.Rollup) bool { return (pendingOnly && a.Pending) || (!pendingOnly && a.Active()) })
	if len(targets) == 0 {
		return nil, nil
	}
	cancelErr := b.scancel(ctx, targets, pendingOnly)
	// scancel may fail for a job that ended meanwhile; what counts is that
	// none is left pending (or running).
	wait := b.CancelWait
	if wait <= 0 {
		wait = DefaultCancelWait
	}
	return backend.SettleCancel(ctx, wait, targets, cancelErr,
		func() (*queue, error) { return b.query(ctx, targets) },
		func(q *queue, id string) bool { return q.Jobs[id].Settled(pendingOnly) },
		func(q *queue, id string) bool {
			// It started before scancel came: not cancelled, it runs on.
			a := q.Jobs[id]
			return pendingOnly && a.N > 0 && !a.Pending && !a.Cancelled
		})
}

// scancel cancels targets (only their pending tasks with pendingOnly), in
// calls of at most maxCancelArgs jobs; it returns the first error.
func (b *Backend) scancel(ctx context.Context, targets []string, pendingOnly bool) error {
	args := []string{}
	if pendingOnly {
		args = append(args, "--state=PENDING")
	}
	return backend.Batches(targets, maxCancelArgs, func(batch []string) error {
		_, err := b.run(ctx, queryEnv(), "scancel", append(args, batch...)...)
		return err
	})
}
