// Package testreq is the one gate of the tests that need something this
// machine may lack (a batch system, the cluster rig, Chromium, root and
// namespaces, …): they skip where it is missing, unless a FARM_REQUIRE_*
// variable says it is required, where they fail. .ci/run sets every such
// variable, so that CI cannot go green by skipping them (README.md lists
// the variables, and the skips that stay skips).
//
// It imports nothing of farm's, so that every package's tests may use it.
package testreq

import (
	"os"
	"testing"
)

// Required reports whether the variable require (FARM_REQUIRE_…) is 1.
func Required(require string) bool { return os.Getenv(require) == "1" }

// Skip skips t because of why, or, when require is set to 1, fails it with
// why. It does not return.
func Skip(t testing.TB, require, why string) {
	t.Helper()
	if Required(require) {
		t.Fatalf("%s=1 but %s", require, why)
	}
	t.Skip(why)
}
