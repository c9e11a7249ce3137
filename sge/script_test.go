package sge

import (
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// TestScriptRunTime: the run-time as Grid Engine's dialect reads it from a
// job script's lines (farm's TestScriptRunTimeByDirective checks the
// order in which the local engine tries the dialects).
func TestScriptRunTime(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         backend.RunTime // zero: none
	}{
		{"ge", "#!/bin/bash\n#$ -l h_rt=01:00:00\n", backend.RunTime{Limit: time.Hour, Line: 2, Value: "01:00:00"}},
		{"ge seconds", "#$ -l h_rt=3600\n", backend.RunTime{Limit: time.Hour, Line: 1, Value: "3600"}},
		{"ge list", "#$ -cwd\n#$ -l h_vmem=2G,h_rt=1:30:00\n", backend.RunTime{Limit: 90 * time.Minute, Line: 2, Value: "1:30:00"}},
		{"ge list last", "#$ -l h_rt=1:30:00,h_vmem=2G\n", backend.RunTime{Limit: 90 * time.Minute, Line: 1, Value: "1:30:00"}},
		{"ge two -l", "#$ -l h_rt=01:00:00 -l h_vmem=2G\n", backend.RunTime{Limit: time.Hour, Line: 1, Value: "01:00:00"}},
		{"ge second -l", "#$ -l h_vmem=2G -l h_rt=2:00:00\n", backend.RunTime{Limit: 2 * time.Hour, Line: 1, Value: "2:00:00"}},
		{"ge -hard", "#$ -hard -l h_rt=0:10:0\n", backend.RunTime{Limit: 10 * time.Minute, Line: 1, Value: "0:10:0"}},
		{"ge soft then hard", "#$ -soft -l arch=lx-amd64 -hard -l h_rt=0:10:0\n", backend.RunTime{Limit: 10 * time.Minute, Line: 1, Value: "0:10:0"}},
		{"ge -soft ends with the line", "#$ -soft -l arch=lx-amd64\n#$ -l h_rt=0:10:0\n", backend.RunTime{Limit: 10 * time.Minute, Line: 2, Value: "0:10:0"}},
		{"ge quoted", "#$ -l \"h_rt=0:10:0\"\n", backend.RunTime{Limit: 10 * time.Minute, Line: 1, Value: "0:10:0"}},
		{"ge no space", "#$-l h_rt=600\n", backend.RunTime{Limit: 10 * time.Minute, Line: 1, Value: "600"}},
		{"ge last wins", "#$ -l h_rt=1:00:00\n#$ -l h_rt=2:00:00\n", backend.RunTime{Limit: 2 * time.Hour, Line: 2, Value: "2:00:00"}},
		{"ge CRLF", "#$ -l h_rt=0:10:0\r\n", backend.RunTime{Limit: 10 * time.Minute, Line: 1, Value: "0:10:0"}},
		{"ge INFINITY", "#$ -l h_rt=INFINITY\n", backend.RunTime{Limit: 0, Line: 1, Value: "INFINITY"}},
		{"ge s_rt is not the run-time", "#$ -l s_rt=1:00:00\n", backend.RunTime{}},
		{"ge other resources", "#$ -l h_vmem=4G\n#$ -pe smp 4\n", backend.RunTime{}},
		{"ge indented", " #$ -l h_rt=1:00:00\n", backend.RunTime{}},
		{"ge commented", "##$ -l h_rt=1:00:00\n# $ -l h_rt=1:00:00\n", backend.RunTime{}},
		{"ge joined -l", "#$ -lh_rt=1:00:00\n", backend.RunTime{}},
		{"ge ignores #SBATCH", "#SBATCH -t 0-01:00\n", backend.RunTime{}},
	} {
		rt, ok, err := Script{}.RunTime(strings.Split(tc.script, "\n"))
		if err != nil || ok != (tc.want != backend.RunTime{}) || rt != tc.want {
			t.Errorf("%s: RunTime = %+v, %t, %v; want %+v", tc.name, rt, ok, err, tc.want)
		}
	}
}
