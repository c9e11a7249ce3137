package farm

import (
	"math"
	"testing"

	"github.com/farm-hpc/farm/status"
)

// TestAllocationFromAccounting: a job the engine's accounting knows
// counts as it says, in place of its status records (but for a requeued
// job's earlier runs, which the accounting does not count, and where its
// records show more), also without a status file; every other job counts
// as its records say;
// allocated_from names the sources, by how many jobs each gave.
func TestAllocationFromAccounting(t *testing.T) {
	use := func(cpus int, begin, end float64) status.Usage {
		return status.Usage{CPUs: cpus, Begin: begin, End: end}
	}
	sum := &status.Summary{
		Jobs: []status.Job{{ID: "7"}, {ID: "8"}, {ID: "8", Restart: 1}, {ID: "9"}},
		Usage: []status.Usage{
			use(4, 100, 200),   // 400, accounted as 440
			use(2, 0, 50),      // 100, 8's first run: not in 8's accounting
			use(2, 60, 100.75), // 81.5, accounted as 80 (whole seconds): 81.5
			use(1, 10, 40),     // 30, unknown to the accounting
		},
	}
	const slurm = "slurm accounting"
	acct := accounted{
		secs: map[string]float64{"7": 440, "8": 80, "10": 0},
		from: map[string]string{"7": slurm, "8": slurm, "10": slurm},
	}
	for _, c := range []struct {
		name string
		acct accounted
		secs float64
		from string
	}{
		{"records only", accounted{}, 400 + 100 + 81.5 + 30, "status records"},
		{"mixed", acct, 440 + 100 + 81.5 + 30, "slurm accounting for 3 of 4 jobs, status records for 1"},
	} {
		secs, from := allocation(sum, c.acct)
		if math.Abs(secs-c.secs) > 1e-9 || from != c.from {
			t.Errorf("%s: allocation = %v, %q; want %v, %q", c.name, secs, from, c.secs, c.from)
		}
	}
	sum.Jobs, sum.Usage = sum.Jobs[:3], sum.Usage[:3]
	if _, from := allocation(sum, acct); from != slurm {
		t.Errorf("every job accounted: allocated_from %q, want %q", from, slurm)
	}
	c := coreHours(sum, acct, 2)
	if want := (440 + 100 + 81.5) / 3600.0; math.Abs(c.Allocated-want) > 1e-12 || math.Abs(c.PerSucceeded-want/2) > 1e-12 || c.AllocatedFrom != slurm {
		t.Errorf("coreHours: %+v, want %v allocated from %s", c, want, slurm)
	}
}

func TestAllocatedFromSays(t *testing.T) {
	for _, c := range []struct {
		jobs map[string]string
		want string
	}{
		{nil, "status records"},
		{map[string]string{"1": "status records"}, "status records"},
		{map[string]string{"1": "slurm accounting", "2": "slurm accounting"}, "slurm accounting"},
		{map[string]string{"1": "status records", "2": "slurm accounting", "3": "sge accounting"}, "sge accounting for 1 of 3 jobs, slurm accounting for 1, status records for 1"},
	} {
		if got := allocatedFrom(c.jobs); got != c.want {
			t.Errorf("allocatedFrom(%v) = %q, want %q", c.jobs, got, c.want)
		}
	}
}
