package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// TestScriptRunTime: the run-time as Slurm's dialect reads it from a
// job script's lines (farm's TestScriptRunTimeByDirective checks the
// order in which the local engine tries the dialects).
func TestScriptRunTime(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         backend.RunTime // zero: none
	}{
		{"slurm ignores #$", "#$ -l h_rt=1:00:00\n", backend.RunTime{}},
		{"slurm", "#$ -l h_rt=2:00:00\n#SBATCH -t 0-01:00\n", backend.RunTime{Limit: time.Hour, Line: 2, Value: "0-01:00"}},
	} {
		rt, ok, err := Script{}.RunTime(strings.Split(tc.script, "\n"))
		if err != nil || ok != (tc.want != backend.RunTime{}) || rt != tc.want {
			t.Errorf("%s: RunTime = %+v, %t, %v; want %+v", tc.name, rt, ok, err, tc.want)
		}
	}
}
