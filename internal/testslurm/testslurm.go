// Package testslurm gates the tests that need the real Slurm of this
// machine (integration/slurm-up): they skip, with one loud line, when no
// Slurm answers, unless FARM_REQUIRE_SLURM=1, where they fail.
package testslurm

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Gate asks once, for all the tests of a test binary, whether Slurm is
// available. (It takes the question as a function: the slurm package's own
// tests use a Gate, and this package must not import slurm.)
type Gate struct {
	// Available says why Slurm is not available, "" if it is
	// (slurm.Available).
	Available func(context.Context) string

	once     sync.Once
	why      string
	skipOnce sync.Once
}

// Need skips t, or with FARM_REQUIRE_SLURM=1 fails it, when Slurm is not
// available. The first skip of the test binary also says so on stderr.
func (g *Gate) Need(t testing.TB) {
	t.Helper()
	g.once.Do(func() { g.why = g.Available(context.Background()) })
	why := g.why
	if why == "" {
		return
	}
	if os.Getenv("FARM_REQUIRE_SLURM") == "1" {
		t.Fatalf("FARM_REQUIRE_SLURM=1 but Slurm is not available: %s (start it with integration/slurm-up)", why)
	}
	g.skipOnce.Do(func() { fmt.Fprintf(os.Stderr, "SLURM TESTS SKIPPED: %s\n", why) })
	t.Skip("SLURM TESTS SKIPPED: " + why)
}
