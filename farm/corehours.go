package farm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/status"
)

// CoreHours is what the farm cost, farm-wide over every run (issue 38):
// what its meta-jobs were allocated, the part of it their cases' attempts
// were busy, by how they ended, the rest idle, and the allocation per
// case that succeeded.
type CoreHours struct {
	// Allocated is each meta-job's CPUs × its wall time, summed
	// (allocation); AllocatedFrom says where the figures come from:
	// "slurm accounting", "status records", or "slurm accounting for 3
	// of 4 jobs, status records for 1".
	Allocated     float64 `json:"allocated"`
	AllocatedFrom string  `json:"allocated_from"`
	// Busy is each case attempt's wall time × the CPUs it was given,
	// summed; BusyBy splits it by the attempts' outcomes (busyOutcomes).
	Busy   float64            `json:"busy"`
	BusyBy map[string]float64 `json:"busy_by_outcome"`
	// Idle is Allocated - Busy: allocated and running no case.
	Idle float64 `json:"idle"`
	// PerSucceeded is Allocated / the cases that succeeded; -1 (null in
	// JSON) when none has.
	PerSucceeded float64 `json:"per_succeeded_case"`
}

// MarshalJSON is c's JSON object, with an unknown PerSucceeded as null.
func (c CoreHours) MarshalJSON() ([]byte, error) {
	type plain CoreHours
	var per *float64
	if c.PerSucceeded >= 0 {
		per = &c.PerSucceeded
	}
	return json.Marshal(struct {
		plain
		PerSucceeded *float64 `json:"per_succeeded_case"`
	}{plain(c), per})
}

// busyOutcomes are the outcomes the busy core-hours are split by, in the
// order farm query prints them: the states a case attempt is in once it
// ran (status.State). An outcome status adds is one line here.
var busyOutcomes = []status.State{
	status.Succeeded,
	status.Failed,
	status.Interrupted,
	status.TimedOut,
	status.Running,
}

// fromRecords is CoreHours.AllocatedFrom when every allocation is read
// from the meta-jobs' status records.
const fromRecords = "status records"

// coreHours sums the farm's core-hours from the status files' jobs and
// usages (sum), with what the engines' accounting says of the jobs
// (acct), and the farm's succeeded cases.
func coreHours(sum *status.Summary, acct accounted, succeeded int64) CoreHours {
	c := CoreHours{BusyBy: map[string]float64{}, PerSucceeded: -1}
	for _, o := range busyOutcomes {
		c.BusyBy[o.String()] = 0
	}
	for i := range sum.Usage {
		u := &sum.Usage[i]
		c.Busy += u.BusyTotal()
		for _, o := range busyOutcomes {
			c.BusyBy[o.String()] += u.Busy[o]
		}
	}
	c.Allocated, c.AllocatedFrom = allocation(sum, acct)
	const hour = 3600
	c.Allocated /= hour
	c.Busy /= hour
	for k := range c.BusyBy {
		c.BusyBy[k] /= hour
	}
	c.Idle = c.Allocated - c.Busy
	if succeeded > 0 {
		c.PerSucceeded = c.Allocated / float64(succeeded)
	}
	return c
}

// accounted is what the engines' accounting says of the farm's jobs
// (Farm.accounting): the core-seconds of each job it has a record of, by
// the job's ID as its status file names it, and which accounting said so
// ("slurm accounting").
type accounted struct {
	secs map[string]float64
	from map[string]string
}

// accounting asks each engine of the farm's jobs (recs) that keeps
// accounting (backend.Accounting) what it allocated them: one call per
// engine, made where the core-hours are shown (farm query, --json,
// report), never in --watch's refreshes. An engine that keeps none
// (backend.ErrNoAccounting) says nothing of its jobs; one whose
// accounting fails is warned of. Either way its jobs count as their
// status records say.
func (f *Farm) accounting(ctx context.Context, recs []JobRecord) accounted {
	a := accounted{secs: map[string]float64{}, from: map[string]string{}}
	byBackend := map[string][]string{}
	for _, r := range recs {
		byBackend[r.Backend] = append(byBackend[r.Backend], r.ID)
	}
	for name, ids := range byBackend {
		b, err := f.openBackend(ctx, name)
		acc, ok := b.(backend.Accounting)
		if err != nil || !ok {
			continue // jobInfos said what is wrong with the engine
		}
		secs, err := acc.Allocated(ctx, ids)
		if err != nil {
			if !errors.Is(err, backend.ErrNoAccounting) && ctx.Err() == nil {
				fmt.Fprintf(f.warnings(), "farm: warning: %v; the allocated core-hours of its jobs are from their status records\n", err)
			}
			continue
		}
		for id, s := range secs {
			a.secs[id], a.from[id] = s, b.Name()+" accounting"
		}
	}
	return a
}

// allocation is the farm's allocated core-seconds, and where they come
// from (CoreHours.AllocatedFrom): each job's as the engine's accounting
// says (acct), or as its status records say where that is more, every
// other meta-job's as its status records say (jobAllocation). Jobs are counted by ID: a job the accounting knows
// that never wrote a status file (still pending, or dead before its
// first record) counts too.
func allocation(sum *status.Summary, acct accounted) (float64, string) {
	latest := map[string]int{}
	for _, j := range sum.Jobs {
		latest[j.ID] = max(latest[j.ID], j.Restart)
	}
	total := 0.0
	jobs := map[string]string{} // job ID -> where its allocation comes from
	for id, secs := range acct.secs {
		total += secs
		jobs[id] = acct.from[id]
	}
	for i, j := range sum.Jobs {
		secs, from := jobAllocation(j, &sum.Usage[i], acct, latest[j.ID])
		total += secs
		if jobs[j.ID] == "" {
			jobs[j.ID] = from
		}
	}
	return total, allocatedFrom(jobs)
}

// jobAllocation is the core-seconds of meta-job j (one incarnation of a
// job ID) beyond what the engine's accounting (acct) counts of its ID,
// and where its figure comes from. A job the accounting does not know
// counts its CPUs × wall time as its status records say (status.Usage:
// the header's CPUs, the earliest and latest record). One it knows is
// counted there (acct's figure is its ID's; Slurm's is its last run), but
// for the part of its records the accounting falls short of: all of its
// earlier incarnations (a requeued job's runs before the last: restart
// below latest), and what its records show beyond the accounting's
// figure (Slurm counts whole seconds: a job of a few seconds may come
// out below the span of its cases), so that idle is never negative.
func jobAllocation(j status.Job, u *status.Usage, acct accounted, latest int) (float64, string) {
	secs, ok := acct.secs[j.ID]
	if !ok {
		return u.Allocated(), fromRecords
	}
	if j.Restart < latest {
		return u.Allocated(), acct.from[j.ID]
	}
	return max(0, u.Allocated()-secs), acct.from[j.ID]
}

// allocatedFrom says where the allocations of jobs (job ID -> source)
// come from: the one source, or each with its count, the most first:
// "slurm accounting for 3 of 4 jobs, status records for 1".
func allocatedFrom(jobs map[string]string) string {
	count := map[string]int{}
	for _, from := range jobs {
		count[from]++
	}
	if len(count) <= 1 {
		for from := range count {
			return from
		}
		return fromRecords
	}
	froms := make([]string, 0, len(count))
	for from := range count {
		froms = append(froms, from)
	}
	sort.Slice(froms, func(a, b int) bool {
		x, y := froms[a], froms[b]
		return count[x] > count[y] || (count[x] == count[y] && x < y)
	})
	parts := make([]string, len(froms))
	for i, from := range froms {
		parts[i] = fmt.Sprintf("%s for %d", from, count[from])
	}
	parts[0] += fmt.Sprintf(" of %d jobs", len(jobs))
	return strings.Join(parts, ", ")
}

// String is farm query's lines of the core-hours: "Core-hours: 2.41
// allocated = 2.10 busy in cases + 0.31 idle; 0.0121 per succeeded case",
// then the busy core-hours by outcome.
func (c CoreHours) String() string {
	per := "no case succeeded yet"
	if c.PerSucceeded >= 0 {
		per = fmtCoreHours(c.PerSucceeded) + " per succeeded case"
	}
	idle := ""
	if c.Allocated > 0 {
		idle = fmt.Sprintf(" (%.0f%%)", 100*c.Idle/c.Allocated)
	}
	var by []string
	for _, o := range busyOutcomes {
		by = append(by, fmtCoreHours(c.BusyBy[o.String()])+" "+o.String())
	}
	return fmt.Sprintf("Core-hours: %s allocated = %s busy in cases + %s idle%s; %s\n  busy in cases: %s (allocated: meta-jobs' CPUs × wall time, from %s)",
		fmtCoreHours(c.Allocated), fmtCoreHours(c.Busy), fmtCoreHours(c.Idle), idle, per, strings.Join(by, ", "), c.AllocatedFrom)
}

// fmtCoreHours is x core-hours for people: to three significant digits
// below 100 (0.00241, 2.41, 24.1), whole above.
func fmtCoreHours(x float64) string {
	if x == 0 || math.Abs(x) >= 100 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	decimals := min(max(2-int(math.Floor(math.Log10(math.Abs(x)))), 0), 6)
	return strconv.FormatFloat(x, 'f', decimals, 64)
}
