package sge

import (
	"context"
	"fmt"
	"strings"

	"github.com/farm-hpc/farm/backend"
)

// maxCancelArgs is the most job IDs given to one qdel or qhold call.
const maxCancelArgs = 2000

// Cancel implements backend.Backend. It asks qstat once which of ids are
// active, marks them in the farm directory (so that a job deleted while
// pending, which leaves no accounting record, is reported CANCELLED), and
// deletes them with qdel. It then polls qstat, for up to CancelWait, until
// they have left it.
//
// With PendingOnly, qdel (which has no state filter) must not kill a job
// that started since qstat was asked: the pending jobs are first held
// (qhold, which a running job ignores), qstat is asked again, and only
// what is still pending is deleted — whole jobs, or an array's pending
// tasks ("JOB.3-7:1") when some of its tasks run. The holds of jobs that
// started meanwhile are released.
func (b *Backend) Cancel(ctx context.Context, ids []string, scope backend.CancelScope) ([]string, error) {
	pendingOnly := scope == backend.PendingOnly
	before, err := b.query(ctx, ids, false)
	if err != nil {
		return nil, fmt.Errorf("cancelling jobs: %w", err)
	}
	targets := before.Pick(ids, func(a *backend.Rollup) bool { return a.Pending || (!pendingOnly && a.Running) })
	if len(targets) == 0 {
		return nil, nil
	}
	var args []string
	if pendingOnly {
		if err := b.batch(ctx, "qhold", targets); err != nil {
			return nil, fmt.Errorf("holding the pending jobs before deleting them: %w", err)
		}
		held, err := b.query(ctx, targets, false)
		if err != nil {
			return nil, fmt.Errorf("cancelling jobs: %w", err)
		}
		var started []string
		targets, started, args = pendingArgs(targets, held)
		if len(started) > 0 {
			// After the deletion: an array's held pending tasks must
			// not be released before they are deleted.
			defer b.batch(context.WithoutCancel(ctx), "qrls", started)
		}
		if len(targets) == 0 {
			return nil, nil
		}
	} else {
		args = targets
	}
	for _, id := range targets {
		b.mark(id)
	}
	delErr := b.batch(ctx, "qdel", args)
	wait := b.CancelWait
	if wait <= 0 {
		wait = DefaultCancelWait
	}
	return backend.SettleCancel(ctx, wait, targets, delErr,
		func() (*queue, error) { return b.query(ctx, targets, false) },
		func(q *queue, id string) bool { return q.Jobs[id].Settled(pendingOnly) }, nil)
}

// pendingArgs sorts the held targets into those still pending (and the
// qdel arguments that delete only their pending part) and those that
// started before the hold took (to be released).
func pendingArgs(targets []string, held *queue) (pending, started, args []string) {
	for _, id := range targets {
		a := held.Jobs[id]
		if a.Running {
			started = append(started, id)
		}
		if !a.Pending {
			continue
		}
		pending = append(pending, id)
		if !a.Running || strings.Contains(id, ".") {
			args = append(args, id)
			continue
		}
		// An array with running tasks: its pending tasks only.
		for _, expr := range a.PendExprs {
			for _, part := range strings.Split(strings.Trim(expr, "[]"), ",") {
				args = append(args, id+"."+part)
			}
		}
	}
	return pending, started, args
}

// batch runs cmd on ids, at most maxCancelArgs at a time; it returns the
// first error.
func (b *Backend) batch(ctx context.Context, cmd string, ids []string) error {
	return backend.Batches(ids, maxCancelArgs, func(batch []string) error {
		_, err := b.run(ctx, nil, false, cmd, batch...)
		return err
	})
}
