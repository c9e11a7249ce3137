package farm_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/farm/backendtest"
)

// TestConformanceLocal runs the backend conformance suite against the local
// backend, with the farm binary (its _localjob supervisor) built once.
func TestConformanceLocal(t *testing.T) {
	// Parallel subtests hold several job slots at once.
	t.Setenv("FARM_LOCAL_SLOTS", "8")
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "farm")
	build := exec.Command("go", "build", "-o", bin, "./cmd/farm")
	build.Dir = filepath.Dir(filepath.Dir(file))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/farm: %v\n%s", err, out)
	}
	backendtest.Run(t, func(t *testing.T, dir string) farm.Backend {
		return &farm.Local{Dir: dir, Bin: bin, KillWait: 2 * time.Second}
	})
}
