package farm

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSlurmTimeNeverWraps(t *testing.T) {
	for _, s := range []string{"99999999999", "99999999999999999999", "9999999999999-00:00", "1-99999999999999999999:00", "153722867280912930"} {
		if d, err := ParseSlurmTime(s); err != nil || d != time.Duration(math.MaxInt64) {
			t.Errorf("ParseSlurmTime(%q) = %v, %v; want the largest duration", s, d, err)
		}
	}
	if d, err := ParseSlurmTime("35-00:00:00"); err != nil || d != MaxRunTime {
		t.Errorf("35 days: %v, %v", d, err)
	}
	for _, bad := range []string{"-99999999999999999999", "1--5", "1:-99999999999999999999"} {
		if _, err := ParseSlurmTime(bad); err == nil {
			t.Errorf("ParseSlurmTime(%q) accepted", bad)
		}
	}
}

// TestCheckRunTime: META's limits, 30 seconds to 35 days, with its
// message; the minimum only where the engine does not keep limits to the
// second itself.
func TestCheckRunTime(t *testing.T) {
	for _, tc := range []struct {
		value    string
		exact    bool
		accepted bool
	}{
		{"0:30", false, true},
		{"0:29", false, false},
		{"0:29", true, true},
		{"0:03", true, true},
		{"0", true, false}, // no limit
		{"UNLIMITED", false, false},
		{"35-00:00:00", false, true},
		{"35-00:00:01", true, false},
		{"99999999999", true, false},
	} {
		d, err := ParseSlurmTime(tc.value)
		if err != nil {
			t.Fatal(err)
		}
		err = checkRunTime(JobScript, RunTime{Limit: d, Line: 6, Value: tc.value}, tc.exact)
		want := "job_script.sh:6: Wrong job runtime in job_script.sh - " + tc.value + " . Exiting (the run-time must be from 30 seconds to 35 days, e.g. '#SBATCH -t 0-01:00')"
		if tc.accepted && err != nil || !tc.accepted && (err == nil || err.Error() != want || !IsUserError(err)) {
			t.Errorf("%s (exact %t): %v", tc.value, tc.exact, err)
		}
	}
	p := filepath.Join(t.TempDir(), "js")
	os.WriteFile(p, []byte("#!/bin/bash\n#SBATCH --mem=1G\n\n#SBATCH --time=\"2-0\" -A x\n"), 0o644)
	if rt, ok, err := ScriptRunTime(p); err != nil || !ok || rt != (RunTime{Limit: 48 * time.Hour, Line: 4, Value: `"2-0"`}) {
		t.Errorf("ScriptRunTime = %+v, %t, %v", rt, ok, err)
	}
}

func setRunTime(t *testing.T, f *Farm, value string) {
	t.Helper()
	b, _ := os.ReadFile(f.Path(JobScript))
	os.WriteFile(f.Path(JobScript), []byte(strings.Replace(string(b), "#SBATCH -t 0-00:10", "#SBATCH -t "+value, 1)), 0o755)
}
