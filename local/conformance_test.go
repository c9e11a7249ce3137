package local_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/backend/backendtest"
	"github.com/farm-hpc/farm/local"
)

// TestConformanceLocal runs the backend conformance suite against the local
// backend, with the farm binary (its _localjob supervisor) built once.
func TestConformanceLocal(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "farm")
	build := exec.Command("go", "build", "-o", bin, "./cmd/farm")
	build.Dir = filepath.Dir(filepath.Dir(file))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/farm: %v\n%s", err, out)
	}
	backendtest.Run(t, func(t *testing.T, dir string) backend.Backend {
		// Parallel subtests hold several job slots at once.
		return local.New(dir, local.Options{Bin: bin, KillWait: 2 * time.Second, Slots: 8})
	})
}
