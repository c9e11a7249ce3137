package metajob

import (
	"fmt"
	"time"

	"github.com/farm-hpc/farm/tablefmt"
)

// Retries (RETRIES, RETRY_DELAY in the config). A case that exits non-zero
// is run again by the meta-job that ran it, up to RETRIES more times in the
// same run, RETRY_DELAY after it failed; meanwhile the meta-job runs its
// other cases. A retry is not a claim: the case was claimed once in the run
// (casetable/CLAIMS.md), by this meta-job, which alone runs its attempts,
// one after the other. Each start says which attempt it is (status:
// attempt=N why=retry). Fast-failure protection judges the node by first
// attempts only (Metajob.ended): a broken node fails the next cases too and
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
func (m *Metajob) failed(c tablefmt.Case, retry, code int) {
	cfg := m.Farm.Config
	if retry >= cfg.Retries {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retries = append(m.retries, pendingRetry{c: c, retry: retry + 1, due: time.Now().Add(cfg.RetryDelay)})
	fmt.Fprintf(m.log, "farm: case %d exited with status %d (attempt %d in this run); it runs again in %s (retry %d of %d)\n",
		c.ID, code, retry+1, cfg.RetryDelay.Round(time.Millisecond), retry+1, cfg.Retries)
}

// simpleRetries reports, in SIMPLE mode (one case a job), whether the
// job's case is to run again: it then claims nothing more, and runs only
// its retries.
func (m *Metajob) simpleRetries() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tableDone = true
	return len(m.retries) > 0
}

// retryNotStarted is told that loop s did not start its case after all (a
// stop, the run-time, the run superseded): if the case was a retry, it is
// counted among those left for the next run.
func (m *Metajob) retryNotStarted(s *loop) {
	if s.retry == 0 || s.from != "" {
		return // a rescued case not started is in this job's C record: rescued again if it dies
	}
	m.mu.Lock()
	m.retriesLeft++
	m.mu.Unlock()
}

// dueRetry takes the retry that is due first, if one is due now. m.mu is
// held. (Retries are queued in the order they fall due: one delay for all.)
func (m *Metajob) dueRetry() (pendingRetry, bool) {
	if len(m.retries) == 0 || time.Now().Before(m.retries[0].due) {
		return pendingRetry{}, false
	}
	r := m.retries[0]
	m.retries = m.retries[1:]
	return r, true
}

// awaitRetry is called when the table has no case left for the meta-job
// and it holds none: it waits, with m.mu released, until the first pending
// retry is due, a stop signal comes, or another loop ends the job (an
// error, fast-failure protection, the run superseded: next sees it). It
// reports false, at once, when no retry is pending, or when the first
// would fall due too late to run: after the job's end less dt_cutoff (the
// retries are then left for the next run: runLoops says so).
func (m *Metajob) awaitRetry() bool {
	if len(m.retries) == 0 {
		return false
	}
	due := m.retries[0].due
	if end := m.rt.end.at(); !end.IsZero() && due.After(end.Add(-time.Duration(m.rt.cutoff*float64(time.Second)))) {
		return false // said when the job ends
	}
	for {
		wait := min(time.Until(due), awaitLook)
		m.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-m.stop.ch:
		}
		t.Stop()
		m.mu.Lock()
		if !time.Now().Before(due) || m.ending() != going {
			return true
		}
	}
}

// awaitLook is how often a loop waiting for a retry looks whether another
// loop ended the job.
const awaitLook = time.Second
