package farm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/sge"
)

// directiveBackend is a fakeBackend whose engine reads the run-time from
// the job-script lines of directive (the dialect scriptsOf gives), and which
// keeps the requests it was given. It only decides which messages are
// said and which run-time is read: nothing runs.
type directiveBackend struct {
	fakeBackend
	directive string
	reqs      []backend.SubmitRequest
}

func (b *directiveBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Scripts: scriptsOf(b.directive)}
}

func (b *directiveBackend) Submit(ctx context.Context, req backend.SubmitRequest) ([]string, error) {
	b.reqs = append(b.reqs, req)
	return b.fakeBackend.Submit(ctx, req)
}

const (
	geJobScript  = "#!/bin/bash\n#$ -cwd\n#$ -l h_rt=01:00:00\n#$ -l h_vmem=1G\nexec \"${FARM_BIN:-farm}\" metajob\n"
	geAutoScript = "#!/bin/bash\n#$ -l h_rt=00:10:00\nexec \"${FARM_BIN:-farm}\" autojob\n"
)

// TestRunTimeMessagesNameTheEnginesDirective: the refusals about the
// run-time of job_script.sh and resubmit_script.sh, and of one given on
// the command line, name the directive of the engine submitted to — Grid
// Engine's #$ -l h_rt=, Slurm's #SBATCH -t, both for the local engine —
// and write nothing.
//
// Over 80 lines: a table of cases (engine, scripts, command line, the
// message wanted) and the one loop that runs them; the length is the
// table's.
func TestRunTimeMessagesNameTheEnginesDirective(t *testing.T) {
	ctx := context.Background()
	const (
		slurm = "#SBATCH"
		ge    = "#$"
	)
	noTime := "#!/bin/bash\n#$ -l h_vmem=1G\n#SBATCH --mem=1G\nexec \"${FARM_BIN:-farm}\" metajob\n"
	for _, tc := range []struct {
		name, directive string
		job, auto       string // job_script.sh, resubmit_script.sh ("": the template)
		opt             SubmitOptions
		msg             string // "": accepted
	}{
		{"ge missing", ge, noTime, "", SubmitOptions{N: 1},
			"Job run-time qsub argument (-l h_rt) is missing in job_script.sh. Exiting (add a line like '#$ -l h_rt=01:00:00')"},
		{"ge reads no #SBATCH", ge, "", "", SubmitOptions{N: 1},
			"Job run-time qsub argument (-l h_rt) is missing in job_script.sh. Exiting (add a line like '#$ -l h_rt=01:00:00')"},
		{"slurm missing", slurm, noTime, "", SubmitOptions{N: 1},
			"Job runtime sbatch argument (-t or --time) is missing in job_script.sh. Exiting (add a line like '#SBATCH -t 0-01:00')"},
		{"slurm reads no #$", slurm, geJobScript, "", SubmitOptions{N: 1},
			"Job runtime sbatch argument (-t or --time) is missing in job_script.sh. Exiting (add a line like '#SBATCH -t 0-01:00')"},
		{"local missing", "", noTime, "", SubmitOptions{N: 1},
			"Job runtime sbatch argument (-t or --time) is missing in job_script.sh. Exiting (add a line like '#SBATCH -t 0-01:00', or '#$ -l h_rt=01:00:00' for Grid Engine)"},
		{"ge wrong", ge, strings.Replace(geJobScript, "h_rt=01:00:00", "h_rt=INFINITY", 1), "", SubmitOptions{N: 1},
			"job_script.sh:3: Wrong job runtime in job_script.sh - INFINITY . Exiting (the run-time must be from 30 seconds to 35 days, e.g. '#$ -l h_rt=01:00:00')"},
		{"ge short", ge, strings.Replace(geJobScript, "h_rt=01:00:00", "h_rt=29", 1), "", SubmitOptions{N: 1},
			"job_script.sh:3: Wrong job runtime in job_script.sh - 29 . Exiting (the run-time must be from 30 seconds to 35 days, e.g. '#$ -l h_rt=01:00:00')"},
		{"local wrong #$", "", strings.Replace(geJobScript, "h_rt=01:00:00", "h_rt=840:00:01", 1), "", SubmitOptions{N: 1},
			"job_script.sh:3: Wrong job runtime in job_script.sh - 840:00:01 . Exiting (the run-time must be from 30 seconds to 35 days, e.g. '#$ -l h_rt=01:00:00')"},
		{"ge bad", ge, strings.Replace(geJobScript, "h_rt=01:00:00", "h_rt=1h", 1), "", SubmitOptions{N: 1},
			"/job_script.sh:3: bad run-time h_rt=1h (bad number \"1h\"); use a Grid Engine time such as h_rt=01:00:00 (hours:minutes:seconds) or h_rt=3600 (seconds)"},
		{"ge command line", ge, geJobScript, "", SubmitOptions{N: 1, Args: []string{"-l", "h_rt=2:00:00"}},
			"the run-time (-l h_rt=2:00:00) cannot be given on the command line: set it with '#$ -l h_rt=' in job_script.sh"},
		{"ge command line list", ge, geJobScript, "", SubmitOptions{N: 1, Args: []string{"-hard", "-l", "h_vmem=2G,h_rt=7200"}},
			"the run-time (-l h_vmem=2G,h_rt=7200) cannot be given on the command line: set it with '#$ -l h_rt=' in job_script.sh"},
		{"ge other resources", ge, geJobScript, "", SubmitOptions{N: 1, Args: []string{"-l", "h_vmem=2G,s_rt=7200", "-t", "1-2"}}, ""},
		{"slurm command line", slurm, "", "", SubmitOptions{N: 1, Args: []string{"--time=10"}},
			"the run-time (--time=10) cannot be given on the command line: set it with '#SBATCH -t' in job_script.sh"},
		{"local command line -t", "", geJobScript, "", SubmitOptions{N: 1, Args: []string{"-t", "10"}},
			"the run-time (-t) cannot be given on the command line: set it with '#SBATCH -t' in job_script.sh"},
		{"local command line h_rt", "", "", "", SubmitOptions{N: 1, Args: []string{"-l", "h_rt=10"}},
			"the run-time (-l h_rt=10) cannot be given on the command line: set it with '#$ -l h_rt=' in job_script.sh"},
		{"ge auto missing", ge, geJobScript, "#!/bin/bash\nexec \"${FARM_BIN:-farm}\" autojob\n", SubmitOptions{N: 1, Auto: true},
			"Job run-time qsub argument (-l h_rt) is missing in resubmit_script.sh. Exiting (add a line like '#$ -l h_rt=00:10:00')"},
		{"ge auto template", ge, geJobScript, "", SubmitOptions{N: 1, Auto: true},
			"Job run-time qsub argument (-l h_rt) is missing in resubmit_script.sh. Exiting (add a line like '#$ -l h_rt=00:10:00')"},
		{"ge auto wrong", ge, geJobScript, strings.Replace(geAutoScript, "00:10:00", "0:0:10", 1), SubmitOptions{N: 1, Auto: true},
			"resubmit_script.sh:2: Wrong job runtime in resubmit_script.sh - 0:0:10 . Exiting (the run-time must be from 30 seconds to 35 days, e.g. '#$ -l h_rt=01:00:00')"},
		{"local auto missing", "", geJobScript, "#!/bin/bash\nexec \"${FARM_BIN:-farm}\" autojob\n", SubmitOptions{N: 1, Auto: true},
			"Job runtime sbatch argument (-t or --time) is missing in resubmit_script.sh. Exiting (add a line like '#SBATCH -t 0-00:10', or '#$ -l h_rt=00:10:00' for Grid Engine)"},
		{"ge auto", ge, geJobScript, geAutoScript, SubmitOptions{N: 1, Auto: true}, ""},
		{"local #$ auto", "", geJobScript, geAutoScript, SubmitOptions{N: 1, Auto: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &directiveBackend{directive: tc.directive}
			f, _ := newTestFarm(t, "true\ntrue\n", b)
			if tc.job != "" {
				os.WriteFile(f.Path(layout.JobScript), []byte(tc.job), 0o755)
			}
			if tc.auto != "" {
				os.WriteFile(f.Path(layout.ResubmitScript), []byte(tc.auto), 0o755)
			}
			before := files(t, f.Dir)
			err := f.Submit(ctx, tc.opt)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if b.reqs[0].TimeLimit != time.Hour || tc.opt.Auto && b.reqs[1].TimeLimit != 10*time.Minute {
					t.Errorf("time limits %v", b.reqs)
				}
				return
			}
			if err == nil || !IsUserError(err) || !strings.HasSuffix(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err %v\nwant %q", err, tc.msg)
			}
			if after := files(t, f.Dir); strings.Join(after, "\n") != strings.Join(before, "\n") || len(b.reqs) > 0 {
				t.Errorf("a refused submit wrote or submitted something")
			}
		})
	}
}

// TestFinalScriptRunTimeByDirective: final.sh's run-time is read as the
// engine reads it, and a bad one is refused with its line.
func TestFinalScriptRunTimeByDirective(t *testing.T) {
	ctx := context.Background()
	b := &directiveBackend{directive: "#$"}
	f, _ := newTestFarm(t, "true\n", b)
	os.WriteFile(f.Path(layout.FinalScript), []byte("#!/bin/bash\n#SBATCH -t 5\n#$ -l h_rt=0:20:0\necho done\n"), 0o755)
	if _, err := f.submitFinal(ctx, SubmitOptions{}, 1); err != nil || len(b.reqs) != 1 || b.reqs[0].TimeLimit != 20*time.Minute {
		t.Fatalf("submitFinal: %v; requests %+v", err, b.reqs)
	}
	b = &directiveBackend{directive: "#$"}
	f, _ = newTestFarm(t, "true\n", b)
	os.WriteFile(f.Path(layout.FinalScript), []byte("#!/bin/bash\n#$ -l h_rt=20:00\necho done\n"), 0o755)
	if _, err := f.submitFinal(ctx, SubmitOptions{}, 1); err == nil || !strings.Contains(err.Error(), "final.sh:2: bad run-time h_rt=20:00 (2 fields;") || len(b.reqs) != 0 {
		t.Errorf("submitFinal: %v; requests %+v", err, b.reqs)
	}
}

// TestInitForGridEngine: a farm made for Grid Engine submits on an engine
// that reads #$ lines, and on the local engine (directive ""), with the
// templates' run-times; on one that reads #SBATCH lines it is refused,
// naming them. An engine without job scripts makes nothing.
func TestInitForGridEngine(t *testing.T) {
	ctx := context.Background()
	for _, directive := range []string{"#$", "", "#SBATCH"} {
		dir := filepath.Join(t.TempDir(), "farm")
		if err := Init(dir, sge.Templates()); err != nil {
			t.Fatal(err)
		}
		if rt, ok, err := ScriptRunTime(filepath.Join(dir, layout.JobScript), scriptsOf(directive)); err != nil || ok != (directive != "#SBATCH") ||
			ok && rt != (RunTime{Limit: 10 * time.Minute, Line: 9, Value: "00:10:00", Script: scriptOf("#$")}) {
			t.Errorf("directive %q: ScriptRunTime = %+v, %t, %v", directive, rt, ok, err)
		}
		b := &directiveBackend{directive: directive}
		f, err := Open(dir, Options{Backends: fixed{b}})
		if err != nil {
			t.Fatal(err)
		}
		err = f.Submit(ctx, SubmitOptions{N: 1, Auto: true})
		if directive == "#SBATCH" {
			if err == nil || !strings.HasPrefix(err.Error(), "Job runtime sbatch argument (-t or --time) is missing in job_script.sh") {
				t.Errorf("#SBATCH engine: %v", err)
			}
			continue
		}
		if err != nil || len(b.reqs) != 2 || b.reqs[0].TimeLimit != 10*time.Minute || b.reqs[1].TimeLimit != 10*time.Minute {
			t.Errorf("directive %q: %v; requests %+v", directive, err, b.reqs)
		}
	}
	dir := filepath.Join(t.TempDir(), "farm")
	if err := Init(dir, fstest.MapFS{}); err == nil || !IsUserError(err) || !strings.Contains(err.Error(), "job_script.sh") || !strings.HasSuffix(err.Error(), "(nothing was made)") {
		t.Errorf("Init(no job scripts) = %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Init(no job scripts) made %s", dir)
	}
}
