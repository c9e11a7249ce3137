package casetable

import (
	"fmt"
	"testing"
	"time"
)

// simMutant is a past defect of the claim core, reintroduced by the switch
// of its name (mutated) for the simulator to catch (make sim-mutants;
// SIMULATION.md's catalogue says more of each).
type simMutant struct {
	name  string
	fixed string // the commit that fixed it
	what  string
}

// simMutants is the catalogue.
var simMutants = []simMutant{}

func knownMutant(name string) bool {
	for _, m := range simMutants {
		if m.name == name {
			return true
		}
	}
	return false
}

// TestSimMutants runs the schedules of the make-test budget (or
// SIM_SCHEDULES) with each mutant in turn, until one catches it, and
// fails if any is not caught (make sim-mutants).
func TestSimMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("make sim-mutants")
	}
	set := readSimSettings(t)
	caught := 0
	for _, m := range simMutants {
		mutant = m.name
		start := time.Now()
		found := uint64(0)
		for i := 0; i < set.schedules && found == 0; i++ {
			seed := set.first + uint64(i)
			if r := runSchedule(seed, set.modelOf(seed), false); r.violation != "" {
				found = seed
				t.Logf("%s caught by seed %d (model %s, schedule %d, %s): %s", m.name, seed, simModels[set.modelOf(seed)].name, i+1,
					time.Since(start).Round(time.Millisecond), firstLine(r.violation))
			}
		}
		mutant = ""
		if found == 0 {
			t.Errorf("%s (%s) not caught in %d schedules: widen the models or the actors", m.name, m.what, set.schedules)
			continue
		}
		caught++
	}
	fmt.Printf("mutants: %d caught of %d\n", caught, len(simMutants))
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
