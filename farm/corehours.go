package farm

import (
	"encoding/json"
	"fmt"
	"math"
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
	// (jobAllocation); AllocatedFrom says where the figures come from.
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
	status.Running,
}

// fromRecords is CoreHours.AllocatedFrom when every allocation is read
// from the meta-jobs' status records.
const fromRecords = "status records"

// coreHours sums the farm's core-hours from the status files' jobs and
// usages (sum), with what the engines said of the jobs (infos), and the
// farm's succeeded cases.
func coreHours(sum *status.Summary, infos map[string]backend.JobInfo, succeeded int64) CoreHours {
	c := CoreHours{AllocatedFrom: fromRecords, BusyBy: map[string]float64{}, PerSucceeded: -1}
	for _, o := range busyOutcomes {
		c.BusyBy[o.String()] = 0
	}
	for i := range sum.Usage {
		u := &sum.Usage[i]
		c.Allocated += jobAllocation(sum.Jobs[i], u, infos[sum.Jobs[i].ID])
		c.Busy += u.BusyTotal()
		for _, o := range busyOutcomes {
			c.BusyBy[o.String()] += u.Busy[o]
		}
	}
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

// jobAllocation is the core-seconds a meta-job was allocated: its CPUs ×
// its wall time, as its status records say (status.Usage: its header's
// CPUs, its earliest and latest record). This is the seam for the
// engine's own accounting (Slurm's sacct: AllocCPUS × Elapsed, Grid
// Engine's accounting file: slots × ru_wallclock), which knows the time
// before a meta-job's first record and after a killed one's last, and the
// CPUs of a job whose file does not say them: where an engine reports
// them in info, they will replace the records' (and AllocatedFrom will
// say so). No engine reports them yet.
func jobAllocation(_ status.Job, u *status.Usage, _ backend.JobInfo) float64 {
	return u.Allocated()
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
	return fmt.Sprintf("Core-hours: %s allocated = %s busy in cases + %s idle%s; %s\n  busy in cases: %s (allocated: meta-jobs' CPUs × wall time, from their %s)",
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
