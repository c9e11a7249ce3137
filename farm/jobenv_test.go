package farm

import (
	"strings"
	"testing"
	"time"
)

func TestParseJobEnvRecheckAfter(t *testing.T) {
	e, err := ParseJobEnv([]string{"FARM_RUN=2", "FARM_RECHECK_AFTER=1500ms"})
	if err != nil || e.RecheckAfter != 1500*time.Millisecond {
		t.Errorf("FARM_RECHECK_AFTER=1500ms: %s, %v", e.RecheckAfter, err)
	}
	if e, err := ParseJobEnv([]string{"FARM_RUN=2"}); err != nil || e.RecheckAfter != 0 {
		t.Errorf("unset: %s, %v; want 0 (the meta-job's default)", e.RecheckAfter, err)
	}
	for _, v := range []string{"60", "-1s", "0s", "soon"} {
		if _, err := ParseJobEnv([]string{"FARM_RECHECK_AFTER=" + v}); err == nil || !strings.Contains(err.Error(), "FARM_RECHECK_AFTER") {
			t.Errorf("FARM_RECHECK_AFTER=%s: %v, want an error naming it", v, err)
		}
	}
}
