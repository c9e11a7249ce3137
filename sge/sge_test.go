package sge

import (
	"testing"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/backend/backendtest"
	"github.com/farm-hpc/farm/internal/testslurm"
)

// Tests against the real Grid Engine of this machine (integration/sge-up).
// They skip, with one loud line, when no qmaster answers — unless
// FARM_REQUIRE_SGE=1, where they fail.

var sgeGate = testslurm.SGE(Available)

func needSGE(t *testing.T) {
	t.Helper()
	sgeGate.Need(t)
}

func TestConformanceSGE(t *testing.T) {
	needSGE(t)
	backendtest.Run(t, func(t *testing.T, dir string) backend.Backend { return New(dir, Options{}) })
}
