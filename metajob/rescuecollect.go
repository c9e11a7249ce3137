package metajob

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/lease"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// The handover (rescue.go): once its fence has passed, a rescuer reads the
// dead job's status file and hands its cases to its meta-job's owner.

// nextDue is how long until the first pending rescue's fence has passed
// (a little more); an hour if none is pending. The tick is made then, so
// that a rescue is carried out when its wait ends, not at the next look.
func (r *rescuer) nextDue() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := time.Hour
	for _, p := range r.pending {
		d = min(d, r.wait()-lease.Gap(time.Now(), p.at)+10*time.Millisecond)
	}
	return max(d, 0)
}

// collectDue carries out the rescues whose fence has passed.
func (r *rescuer) collectDue(ctx context.Context, now time.Time) {
	r.mu.Lock()
	var due []pendingRescue
	keep := r.pending[:0]
	for _, p := range r.pending {
		if lease.Fenced(now, p.at, r.fence) {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	r.pending = keep
	r.handing += len(due)
	r.mu.Unlock()
	for _, p := range due {
		if err := r.collect(ctx, p); err != nil {
			fmt.Fprintf(r.m.log, "farm: rescue of the cases of %s: %v; they are left for 'farm resubmit'\n", p.name, err)
		}
		r.mu.Lock()
		r.handing--
		r.mu.Unlock()
	}
}

// collect reads the dead job's status file and hands its cases to the
// meta-job: the open case (if under the crash limit) as its next attempt,
// the unstarted ones as their first.
func (r *rescuer) collect(ctx context.Context, p pendingRescue) error {
	m := r.m
	// A rescuer whose own cases were rescued meanwhile takes nothing
	// more: no one would rescue what it took. Its mark stays: another
	// takes the rescue over (takeOver), as from a rescuer that died.
	if by, marked, err := r.markedBy(r.self); err != nil || marked {
		if err != nil {
			r.unmark(cmp.Or(p.mark, p.name))
			return err
		}
		return fmt.Errorf("this meta-job's own cases were rescued by meta-job %s", by)
	}
	lo, err := status.ReadLeftovers(filepath.Join(r.statusDir, p.name))
	if err != nil {
		r.unmark(cmp.Or(p.mark, p.name))
		return err
	}
	ids, attempt := r.toRescue(ctx, lo)
	if len(ids) == 0 {
		return nil
	}
	table, err := r.table(ctx)
	if err != nil {
		return err
	}
	cases, err := findCases(table, m.Farm.Path(layout.MiscDir), ids)
	if err != nil {
		return err
	}
	m.swMu.Lock()
	err = m.sw.Claimed(ids, time.Now(), p.name, attempt)
	m.swMu.Unlock()
	if err != nil {
		return err
	}
	var got []rescuedCase
	var lost []int64
	for _, id := range ids {
		c, ok := cases[id]
		if !ok {
			lost = append(lost, id)
			continue
		}
		rc := rescuedCase{c: c, why: status.WhyRescue, from: p.name}
		if a := attempt[id]; a > 1 {
			rc.retry = a - 1
		}
		got = append(got, rc)
	}
	fmt.Fprintf(m.log, "farm: rescued from %s (%s): %s\n%s", p.name, p.state, describeRescue(got), notFound(lost))
	m.do(func(o *owner) { o.rescued = append(o.rescued, got...) }) // nothing if the job has ended: its C record has them
	return nil
}

// toRescue is what the rescue of a dead job's leftovers lo takes: the case
// it was running (if under the crash limit: said if not) as its next
// attempt, the cases it claimed and never started, and those of its claims
// with no outcome recorded that committed; and the attempt each is to be,
// past its first.
func (r *rescuer) toRescue(ctx context.Context, lo status.Leftovers) ([]int64, map[int64]int) {
	attempt := map[int64]int{}
	var ids []int64
	var crashed []string
	for _, o := range lo.Open {
		n, err := r.crashes(o.ID)
		if limit := r.m.Farm.Config.MaxCrashes; err != nil || limit > 0 && n >= limit {
			why := fmt.Sprintf("its meta-job died under it %d times, MAX_CRASHES=%d", n, limit)
			if err != nil {
				why = fmt.Sprintf("its crashes could not be counted: %v; left for 'farm resubmit'", err)
			}
			crashed = append(crashed, fmt.Sprintf("%d (%s)", o.ID, why))
			continue
		}
		attempt[o.ID] = o.Attempt + 1
		ids = append(ids, o.ID)
	}
	for _, id := range lo.Unstarted {
		if n := lo.Next[id]; n > 1 {
			attempt[id] = n // handed to the dead job by a rescue, never started
		}
		ids = append(ids, id)
	}
	ids = append(ids, r.decideClaims(ctx, lo.Undecided)...)
	if len(crashed) > 0 {
		fmt.Fprintf(r.m.log, "farm: rescue: not run again: case %s\n", strings.Join(crashed, ", case "))
	}
	return ids, attempt
}

// decideClaims decides, from the claim state, the claims the dead job
// recorded before their commits with no record of their outcome (it died
// in or just after the commit): the cases of those committed, to rescue.
// One it cannot decide is left for 'farm resubmit', which runs it: it was
// never started.
func (r *rescuer) decideClaims(ctx context.Context, claims []status.NotedClaim) []int64 {
	if len(claims) == 0 {
		return nil
	}
	store := r.m.Farm.Store()
	defer store.Close()
	store.Job, store.Log = r.m.self.ID, r.m.log
	var ids []int64
	for _, c := range claims {
		won, err := store.ClaimWon(ctx, c.Token)
		switch {
		case err != nil:
			fmt.Fprintf(r.m.log, "farm: rescue: cannot tell whether the claim of case(s) %s committed (%v); left for 'farm resubmit'\n", status.AppendIDs(nil, c.IDs), err)
		case won:
			ids = append(ids, c.IDs...)
		}
	}
	return ids
}

// notFound is the job's line about rescued cases its tables do not have
// ("" if none).
func notFound(lost []int64) string {
	if len(lost) == 0 {
		return ""
	}
	return fmt.Sprintf("farm: rescue: case %s not found in the run's tables: left for 'farm resubmit'\n", status.AppendIDs(nil, lost))
}

// describeRescue says what a rescue took, for the job's output.
func describeRescue(got []rescuedCase) string {
	var open []string
	var ids []int64
	for _, rc := range got {
		if rc.retry > 0 {
			open = append(open, fmt.Sprintf("case %d (attempt %d)", rc.c.ID, rc.retry+1))
		} else {
			ids = append(ids, rc.c.ID)
		}
	}
	if len(ids) > 0 {
		open = append(open, fmt.Sprintf("%d case(s) never started: %s", len(ids), status.AppendIDs(nil, ids)))
	}
	return strings.Join(open, "; ")
}

// crashes is how many times case id's meta-job died under it, in every
// run, as the status files tell (the dead job's attempt included).
func (r *rescuer) crashes(id int64) (int, error) {
	if r.m.Farm.Config.MaxCrashes <= 0 {
		return 0, nil // no limit: not counted
	}
	sum, err := status.Load(r.statusDir, status.Options{})
	if err != nil {
		return 0, err
	}
	return sum.Get(id).Crashes, nil
}

// findCases reads cases ids from the run's own table, and those it has
// not from the farm's other run tables (misc/table.run*: those 'farm add'
// queued, and earlier runs' — a case's line is the same in every table
// that has it), each with the table it was found in (relative to the
// farm, as a claim gives it), for $1 and $2.
func findCases(table, misc string, ids []int64) (map[int64]tablefmt.Case, error) {
	cases, err := tablefmt.FindCases(table, ids)
	if err != nil {
		return cases, err
	}
	rel := func(path string) string {
		if r, err := filepath.Rel(filepath.Dir(misc), path); err == nil {
			return r
		}
		return path
	}
	for id, c := range cases {
		c.Table = rel(table)
		cases[id] = c
	}
	// Added tables first (small, and the likeliest), then earlier runs'.
	added, _ := filepath.Glob(filepath.Join(misc, "table.run*.add.*"))
	others, _ := filepath.Glob(filepath.Join(misc, "table.run*"))
	others = append(added, others...)
	for _, t := range others {
		var left []int64
		for _, id := range ids {
			if _, ok := cases[id]; !ok {
				left = append(left, id)
			}
		}
		if len(left) == 0 {
			break
		}
		if t == table || strings.HasSuffix(t, ".src") {
			continue
		}
		more, err := tablefmt.FindCases(t, left)
		if err != nil {
			continue // not one (a temporary file of one being written)
		}
		for id, c := range more {
			c.Table = rel(t)
			cases[id] = c
		}
	}
	return cases, nil
}

// table is the run's table.
func (r *rescuer) table(ctx context.Context) (string, error) {
	m := r.m
	t := m.runTable()
	if t == "" {
		store := m.Farm.Store()
		defer store.Close()
		st, err := store.Read(ctx)
		if err != nil {
			return "", err
		}
		t = st.Table
	}
	return m.Farm.Path(t), nil
}
