package farm

import (
	"strings"
	"testing"
	"time"
)

func TestParseJobEnvLookEvery(t *testing.T) {
	e, err := ParseJobEnv([]string{"FARM_RUN=2", "FARM_LOOK_EVERY=1500ms"})
	if err != nil || e.LookEvery != 1500*time.Millisecond {
		t.Errorf("FARM_LOOK_EVERY=1500ms: %s, %v", e.LookEvery, err)
	}
	if e, err := ParseJobEnv([]string{"FARM_RUN=2"}); err != nil || e.LookEvery != 0 {
		t.Errorf("unset: %s, %v; want 0 (the meta-job's default)", e.LookEvery, err)
	}
	for _, v := range []string{"60", "-1s", "0s", "soon"} {
		if _, err := ParseJobEnv([]string{"FARM_LOOK_EVERY=" + v}); err == nil || !strings.Contains(err.Error(), "FARM_LOOK_EVERY") {
			t.Errorf("FARM_LOOK_EVERY=%s: %v, want an error naming it", v, err)
		}
	}
}
