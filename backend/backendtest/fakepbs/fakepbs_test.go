package fakepbs_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/backend/backendtest"
	"github.com/farm-hpc/farm/backend/backendtest/fakepbs"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/local"
)

// TestConformance: the test engine keeps the backend contract.
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, dir string) backend.Backend { return fakepbs.New() })
}

// TestRegistered: registered as cmd/farm/backends.go registers an engine
// (one line in the list before the local engine), the engine is opened by
// name, farm init writes its job scripts, farm reads their run-time in its
// dialect, and so does the local engine, which reads every registered
// engine's.
func TestRegistered(t *testing.T) {
	batch := []backend.Engine{fakepbs.Engine()}
	r := backend.NewRegistry(append(batch, local.Engine(local.Options{Scripts: backend.Scripts(batch)}))...)
	dir := filepath.Join(t.TempDir(), "farm")
	if err := farm.Init(dir, batch[0].Templates); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fakepbs.Name, local.Name} {
		b, err := r.Open(context.Background(), name, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, script := range []string{layout.JobScript, layout.ResubmitScript} {
			rt, ok, err := farm.ScriptRunTime(filepath.Join(dir, script), b.Capabilities().Scripts)
			if err != nil || !ok || rt.Limit != 10*time.Minute || rt.Value != "00:10:00" {
				t.Errorf("%s: %s: run-time %+v, %t, %v; want 10 minutes", name, script, rt, ok, err)
			}
		}
	}
	b, _ := r.Open(context.Background(), fakepbs.Name, dir)
	if got := backend.OutputName(b, "7[2]"); got != "7[2].OU" {
		t.Errorf("output name %q", got)
	}
	if array, ok := b.(backend.TaskIDs).ArrayOf("7[2]"); !ok || array != "7[]" {
		t.Errorf("ArrayOf(7[2]) = %q, %t", array, ok)
	}
}
