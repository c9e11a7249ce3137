package metajob

import (
	"fmt"
	"time"

	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// Retries (RETRIES, RETRY_DELAY in the config). A case that exits non-zero
// is run again by the meta-job that ran it, up to RETRIES more times in the
// same run, RETRY_DELAY after it failed; meanwhile the meta-job runs its
// other cases. A retry is not a claim: the case was claimed once in the run
// (casetable/CLAIMS.md), by this meta-job, which alone runs its attempts,
// one after the other. Each start says which attempt it is (status:
// attempt=N why=retry). Fast-failure protection judges the node by first
// attempts only (owner.judge): a broken node fails the next cases too and
// stops the meta-job, while the retries of one bad case do not. A meta-job
// that stops leaves its pending retries, with the case's failure, to 'farm
// resubmit'; so are those that would come after the job's end less
// dt_cutoff, and those that no longer fit the time left.

// pendingRetry is a case that failed and is to run again.
type pendingRetry struct {
	c     tablefmt.Case
	retry int       // which retry: 1 for the case's second attempt in the run
	due   time.Time // not before
	// A rescued case (rescue.go): why is status.WhyRescue, from the
	// status file of the dead job it was rescued from.
	why, from string
}

// failed is told that case c, started as its retry-th retry (0: its first
// attempt), exited with code, not 0: it is queued to run again if RETRIES
// allows.
func (o *owner) failed(c tablefmt.Case, retry, code int) {
	cfg := o.m.Farm.Config
	if retry >= cfg.Retries {
		return
	}
	o.retries = append(o.retries, pendingRetry{c: c, retry: retry + 1, due: time.Now().Add(cfg.RetryDelay)})
	fmt.Fprintf(o.m.log, "farm: case %d exited with status %d (attempt %d in this run); it runs again in %s (retry %d of %d)\n",
		c.ID, code, retry+1, cfg.RetryDelay.Round(time.Millisecond), retry+1, cfg.Retries)
}

// timedOut is told that case c, started as its retry-th retry, timed
// out: it is queued to run again if RETRIES allows and RETRY_TIMEOUTS asks.
func (o *owner) timedOut(c tablefmt.Case, retry int) {
	cfg := o.m.Farm.Config
	if !cfg.RetryTimeouts || retry >= cfg.Retries {
		return
	}
	o.retries = append(o.retries, pendingRetry{c: c, retry: retry + 1, due: time.Now().Add(cfg.RetryDelay), why: status.WhyTimeout})
	fmt.Fprintf(o.m.log, "farm: case %d timed out (attempt %d in this run); it runs again in %s (retry %d of %d)\n",
		c.ID, retry+1, cfg.RetryDelay.Round(time.Millisecond), retry+1, cfg.Retries)
}

// simpleRetries reports, in SIMPLE mode (one case a job), whether the
// job's case is to run again: it then claims nothing more, and runs only
// its retries.
func (o *owner) simpleRetries() bool {
	o.tableDone = true
	return len(o.retries) > 0
}

// retryNotStarted is told that loop s did not start its case after all (a
// stop, the run-time, the run superseded): if the case was a retry, it is
// counted among those left for the next run.
func (o *owner) retryNotStarted(s *loop) {
	if s.retry == 0 || s.from != "" {
		return // a rescued case not started is in this job's C record: rescued again if it dies
	}
	o.retriesLeft++
}

// dueRetry takes the retry that is due first, if one is due now. (Retries
// are queued in the order they fall due: one delay for all.)
func (o *owner) dueRetry() (pendingRetry, bool) {
	if len(o.retries) == 0 || time.Now().Before(o.retries[0].due) {
		return pendingRetry{}, false
	}
	r := o.retries[0]
	o.retries = o.retries[1:]
	return r, true
}
