// Package testslurm gates the tests that need a real batch system of this
// machine: Slurm (integration/slurm-up) or Grid Engine (integration/sge-up).
// They skip, with one loud line, when it does not answer, unless it is
// required (FARM_REQUIRE_SLURM=1 / FARM_REQUIRE_SGE=1), where they fail.
package testslurm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farm-hpc/farm/internal/testreq"
)

// Gate asks once, for all the tests of a test binary, whether the batch
// system is available. (It takes the question as a function: the engine
// packages' own tests use a Gate, and this package must not import them.)
type Gate struct {
	// Available says why the batch system is not available, "" if it is
	// (slurm.Available, sge.Available).
	Available func(context.Context) string
	// System names it in messages ("Slurm" if empty); Require is the
	// variable that makes its absence a failure (FARM_REQUIRE_SLURM if
	// empty); Up is the script that starts it (integration/slurm-up if
	// empty).
	System, Require, Up string

	once     sync.Once
	why      string
	skipOnce sync.Once
}

// SGE is a Gate for Grid Engine, given its Available.
func SGE(available func(context.Context) string) *Gate {
	return &Gate{Available: available, System: "Grid Engine", Require: "FARM_REQUIRE_SGE", Up: "integration/sge-up"}
}

// Need skips t, or with the Require variable set to 1 fails it, when the
// batch system is not available. The first skip of the test binary also
// says so on stderr.
func (g *Gate) Need(t testing.TB) {
	t.Helper()
	g.once.Do(func() {
		// A loaded machine (make test runs packages 4 at a time) can keep
		// a live controller from answering within one probe's timeout:
		// three probes, 2 s apart, before it counts as not available.
		for try := 0; try < 3; try++ {
			g.why = g.Available(context.Background())
			if g.why == "" || !strings.Contains(g.why, "answer") {
				return // up, or not installed: no use asking again
			}
			time.Sleep(2 * time.Second)
		}
	})
	why := g.why
	if why == "" {
		return
	}
	system, require, up := g.System, g.Require, g.Up
	if system == "" {
		system, require, up = "Slurm", "FARM_REQUIRE_SLURM", "integration/slurm-up"
	}
	banner := strings.ToUpper(strings.ReplaceAll(system, " ", "")) + " TESTS SKIPPED: "
	if !testreq.Required(require) {
		g.skipOnce.Do(func() { fmt.Fprintf(os.Stderr, "%s%s\n", banner, why) })
	}
	testreq.Skip(t, require, fmt.Sprintf("%s%s is not available: %s (start it with %s)", banner, system, why, up))
}
