package farm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/slurm"
)

// TestCheckRunTime: META's limits, 30 seconds to 35 days, with its
// message, whatever the form of a run-time under 30 s and whatever the
// engine (issue 21: "0:0:1" passed on the local one); FARM_MIN_RUNTIME
// lowers the minimum (2nd column).
func TestCheckRunTime(t *testing.T) {
	for _, tc := range []struct {
		value    string
		min      time.Duration
		accepted bool
	}{
		{"0:30", shortestRunTime, true},
		{"0:29", shortestRunTime, false},
		{"0:0:1", shortestRunTime, false},
		{"0:0:29", shortestRunTime, false},
		{"00:00:05", shortestRunTime, false},
		{"0-0:0:1", shortestRunTime, false},
		{"0-0:0:30", shortestRunTime, true},
		{"0:29", time.Second, true},
		{"0:03", 3 * time.Second, true},
		{"0:02", 3 * time.Second, false},
		{"0", time.Second, false}, // no limit
		{"UNLIMITED", shortestRunTime, false},
		{"35-00:00:00", shortestRunTime, true},
		{"35-00:00:01", shortestRunTime, false},
		{"99999999999", time.Second, false},
	} {
		d, err := slurm.ParseDuration(tc.value)
		if err != nil {
			t.Fatal(err)
		}
		err = checkRunTime(layout.JobScript, RunTime{Limit: d, Line: 6, Value: tc.value, Script: scriptOf("#SBATCH")}, tc.min)
		least := "30 seconds"
		if tc.min != shortestRunTime {
			least = tc.min.String() + " (FARM_MIN_RUNTIME)"
		}
		want := "job_script.sh:6: Wrong job runtime in job_script.sh - " + tc.value + " . Exiting (the run-time must be from " + least + " to 35 days, e.g. '#SBATCH -t 0-01:00')"
		if tc.accepted && err != nil || !tc.accepted && (err == nil || err.Error() != want || !IsUserError(err)) {
			t.Errorf("%s (min %s): %v", tc.value, tc.min, err)
		}
	}
	p := filepath.Join(t.TempDir(), "js")
	os.WriteFile(p, []byte("#!/bin/bash\n#SBATCH --mem=1G\n\n#SBATCH --time=\"2-0\" -A x\n"), 0o644)
	if rt, ok, err := ScriptRunTime(p, scriptsOf("#SBATCH")); err != nil || !ok || rt != (RunTime{Limit: 48 * time.Hour, Line: 4, Value: `"2-0"`, Script: scriptOf("#SBATCH")}) {
		t.Errorf("ScriptRunTime = %+v, %t, %v", rt, ok, err)
	}
}

// TestMinRunTime: FARM_MIN_RUNTIME lowers the minimum only on an engine
// that keeps limits to the second; a bad value is refused with the fix.
func TestMinRunTime(t *testing.T) {
	exact, slurm := backend.Capabilities{EnforcesTimeLimit: true}, backend.Capabilities{}
	for _, tc := range []struct {
		env  []string
		caps backend.Capabilities
		want time.Duration
	}{
		{nil, exact, shortestRunTime},
		{[]string{"FARM_MIN_RUNTIME=2s"}, exact, 2 * time.Second},
		{[]string{"FARM_MIN_RUNTIME=2s"}, slurm, shortestRunTime},
		{[]string{"FARM_MIN_RUNTIME_X=2s"}, exact, shortestRunTime},
	} {
		if got, err := minRunTime(tc.env, tc.caps); err != nil || got != tc.want {
			t.Errorf("minRunTime(%q, %+v) = %v, %v; want %v", tc.env, tc.caps, got, err, tc.want)
		}
	}
	for _, v := range []string{"", "5", "-1s", "0s"} {
		_, err := minRunTime([]string{"FARM_MIN_RUNTIME=" + v}, exact)
		if want := `FARM_MIN_RUNTIME="` + v + `" is not a duration above 0 such as 5s: fix it, or unset it to keep the minimum run-time of 30 seconds`; err == nil || err.Error() != want {
			t.Errorf("FARM_MIN_RUNTIME=%q: %v", v, err)
		}
	}
}

func setRunTime(t *testing.T, f *Farm, value string) {
	t.Helper()
	b, _ := os.ReadFile(f.Path(layout.JobScript))
	os.WriteFile(f.Path(layout.JobScript), []byte(strings.Replace(string(b), "#SBATCH -t 0-00:10", "#SBATCH -t "+value, 1)), 0o755)
}

// TestScriptRunTimeByDirective: the run-time as the local engine reads it,
// in the dialects the registry gives it (scriptsOf("")): the #SBATCH one if
// there is one, else the #$ one. (Each dialect's own cases are in its
// package: slurm/script_test.go, sge/script_test.go.)
func TestScriptRunTimeByDirective(t *testing.T) {
	const (
		slurm = "#SBATCH"
		ge    = "#$"
	)
	for _, tc := range []struct {
		name, script, directive string
		want                    RunTime // zero: none
	}{
		{"local reads #SBATCH", "#SBATCH -t 0-01:00\n", "", RunTime{time.Hour, 1, "0-01:00", scriptOf(slurm)}},
		{"local reads #$", "#$ -l h_rt=2:00:00\n", "", RunTime{2 * time.Hour, 1, "2:00:00", scriptOf(ge)}},
		{"local prefers #SBATCH", "#$ -l h_rt=2:00:00\n#SBATCH -t 0-01:00\n", "", RunTime{time.Hour, 2, "0-01:00", scriptOf(slurm)}},
		{"local none", "#!/bin/bash\necho -l h_rt=1:00:00\n", "", RunTime{}},
	} {
		p := filepath.Join(t.TempDir(), "js")
		os.WriteFile(p, []byte(tc.script), 0o644)
		rt, ok, err := ScriptRunTime(p, scriptsOf(tc.directive))
		if err != nil || ok != (tc.want != RunTime{}) || rt != tc.want {
			t.Errorf("%s: ScriptRunTime = %+v, %t, %v; want %+v", tc.name, rt, ok, err, tc.want)
		}
		if limit, lok, lerr := scriptTimeLimit(p, scriptsOf(tc.directive)); limit != tc.want.Limit || lok != ok || lerr != nil {
			t.Errorf("%s: scriptTimeLimit = %v, %t, %v", tc.name, limit, lok, lerr)
		}
	}
}

// TestScriptRunTimeErrors: a run-time that does not read is one line
// naming the script's line, with an example of the engine's form; for
// the local engine, a bad #SBATCH one is an error even with a good #$ one.
func TestScriptRunTimeErrors(t *testing.T) {
	for _, tc := range []struct{ script, directive, err string }{
		{"#!/bin/bash\n#$ -l h_rt=1:00\n", "#$",
			"js:2: bad run-time h_rt=1:00 (2 fields; Grid Engine takes hours:minutes:seconds (three fields, 0:30:0 for 30 minutes) or seconds); use a Grid Engine time such as h_rt=01:00:00 (hours:minutes:seconds) or h_rt=3600 (seconds)"},
		{"#$ -l h_vmem=1G,h_rt=ten\n", "#$", `js:1: bad run-time h_rt=ten (bad number "ten"); use a Grid Engine time such as h_rt=01:00:00`},
		{"#$ -l h_rt=\n", "#$", "js:1: bad run-time h_rt= (empty); use a Grid Engine time"},
		{"#$ -l h_rt=1:00:00\n#$ -l h_rt=0600\n", "", `js:2: bad run-time h_rt=0600 ("0600" begins with 0, which Grid Engine reads as octal or hexadecimal: write the seconds without it)`},
		{"#$ -soft -l h_rt=1:00:00\n", "#$",
			"js:1: h_rt=1:00:00 is requested after -soft, which does not limit the job's run-time; request it as a hard limit: '#$ -l h_rt=1:00:00'"},
		{"#$ -l h_rt=1:00:00\n#SBATCH -t ten\n", "", `js:2: bad run-time "ten" (bad number "ten"); use a Slurm time such as 0-01:00 or 30`},
	} {
		p := filepath.Join(t.TempDir(), "js")
		os.WriteFile(p, []byte(tc.script), 0o644)
		_, _, err := ScriptRunTime(p, scriptsOf(tc.directive))
		if err == nil || !IsUserError(err) || !strings.HasPrefix(err.Error(), p[:len(p)-2]) || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q (directive %q): %v; want %q", tc.script, tc.directive, err, tc.err)
		}
	}
}

// TestCheckRunTimeExample: META's "Wrong job runtime" names an example in
// the form the run-time was read from.
func TestCheckRunTimeExample(t *testing.T) {
	err := checkRunTime(layout.ResubmitScript, RunTime{Limit: 0, Line: 3, Value: "INFINITY", Script: scriptOf("#$")}, shortestRunTime)
	want := "resubmit_script.sh:3: Wrong job runtime in resubmit_script.sh - INFINITY . Exiting (the run-time must be from 30 seconds to 35 days, e.g. '#$ -l h_rt=01:00:00')"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	err = checkRunTime(layout.JobScript, RunTime{Limit: 36 * 24 * time.Hour, Line: 6, Value: "36-0", Script: scriptOf("#SBATCH")}, shortestRunTime)
	if want := "(the run-time must be from 30 seconds to 35 days, e.g. '#SBATCH -t 0-01:00')"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("got %v, want it to end %q", err, want)
	}
}

func TestScriptRunTimeNoDialect(t *testing.T) {
	p := filepath.Join(t.TempDir(), "js")
	os.WriteFile(p, []byte("#PBS -l walltime=1:00:00\n"), 0o644)
	if _, _, err := ScriptRunTime(p, nil); err == nil || err.Error() != `the engine reads no run-time from a job script (its backend.Capabilities.Scripts is empty)` {
		t.Errorf("ScriptRunTime(no dialect) = %v", err)
	}
}
