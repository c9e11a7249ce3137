package testreq

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipFailsWhenRequired: Skip skips without the variable and fails
// with it (run in a child test binary, whose failure is the point).
func TestSkipFailsWhenRequired(t *testing.T) {
	if os.Getenv("TESTREQ_CHILD") == "1" {
		Skip(t, "FARM_REQUIRE_TESTREQ", "the thing is missing")
		return
	}
	run := func(env ...string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipFailsWhenRequired$", "-test.v")
		cmd.Env = append(os.Environ(), append([]string{"TESTREQ_CHILD=1"}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("FARM_REQUIRE_TESTREQ=")
	if err != nil || !strings.Contains(out, "--- SKIP") || !strings.Contains(out, "the thing is missing") {
		t.Errorf("not required: want a skip, got %v:\n%s", err, out)
	}
	out, err = run("FARM_REQUIRE_TESTREQ=1")
	if err == nil || !strings.Contains(out, "--- FAIL") || !strings.Contains(out, "FARM_REQUIRE_TESTREQ=1 but the thing is missing") {
		t.Errorf("required: want a failure, got %v:\n%s", err, out)
	}
}
