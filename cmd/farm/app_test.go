package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/status"
	"github.com/google/go-cmp/cmp"
)

func TestParseSubmitArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want farm.SubmitOptions
		err  string
	}{
		{[]string{"4"}, farm.SubmitOptions{N: 4}, ""},
		{[]string{"-1", "--mem=8G", "-A", "def-me"}, farm.SubmitOptions{N: -1, Args: []string{"--mem=8G", "-A", "def-me"}}, ""},
		{[]string{"2", "-auto", "--backend", "local", "--qos=x"}, farm.SubmitOptions{N: 2, Auto: true, Backend: "local", Args: []string{"--qos=x"}}, ""},
		{[]string{"2", "--backend=slurm"}, farm.SubmitOptions{N: 2, Backend: "slurm"}, ""},
		// --yes is farm's, not sbatch's, wherever it is.
		{[]string{"2000", "--mem=1G", "--yes"}, farm.SubmitOptions{N: 2000, Yes: true, Args: []string{"--mem=1G"}}, ""},
		{[]string{"-1", "-y", "-auto"}, farm.SubmitOptions{N: -1, Yes: true, Auto: true}, ""},
		{[]string{"1500", "-yes"}, farm.SubmitOptions{N: 1500, Yes: true}, ""},
		// resubmit's choice of cases is farm's too, wherever it is.
		{[]string{"2", "--mem=1G", "--failed", "--cases", "3,5-7", "-unfit"}, farm.SubmitOptions{N: 2, Args: []string{"--mem=1G"},
			Select: farm.Selection{States: []status.State{status.Failed, status.Unfit}, Cases: []farm.IDRange{{From: 3, To: 3}, {From: 5, To: 7}}, Given: []string{"--failed", "--cases 3,5-7", "--unfit"}}}, ""},
		{[]string{"2", "--cases=4"}, farm.SubmitOptions{N: 2, Select: farm.Selection{Cases: []farm.IDRange{{From: 4, To: 4}}, Given: []string{"--cases 4"}}}, ""},
		{[]string{"2", "--cases", "4-x"}, farm.SubmitOptions{}, `"4-x" is not a range of case IDs`},
		{[]string{"0"}, farm.SubmitOptions{}, "Wrong first argument: 0 (should be a positive integer or -1) ; exiting"},
		{[]string{"-2"}, farm.SubmitOptions{}, "Wrong first argument: -2"},
		{[]string{"2", "--backend"}, farm.SubmitOptions{}, "--backend needs a value"},
		{nil, farm.SubmitOptions{}, "give the number of meta-jobs"},
	} {
		got, err := parseSubmitArgs(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tc.args, diff)
		}
	}
}

func TestRunExitCodesAndHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run([]string{"farm", "help"}, &out, &errb); code != 0 {
		t.Errorf("help exit %d", code)
	}
	for _, want := range []string{"EXIT CODES", "submit", "Status", "wait"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
	out.Reset()
	errb.Reset()
	if code := Run([]string{"farm", "nosuch"}, &out, &errb); code != exitUsage {
		t.Errorf("unknown command exit %d, want %d", code, exitUsage)
	}
	if got := strings.TrimSpace(errb.String()); got != `farm: unknown command "nosuch" (see 'farm help')` {
		t.Errorf("stderr %q", got)
	}
	errb.Reset()
	if code := Run([]string{"farm", "-C", t.TempDir(), "list"}, &out, &errb); code != exitFailed || !strings.Contains(errb.String(), "Non-farm directory") {
		t.Errorf("list outside a farm: exit %d, %q", code, errb.String())
	}
}

func TestCompletion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run([]string{"farm", "completion", "bash"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "complete -o default -F _farm farm") {
		t.Errorf("completion bash: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := Run([]string{"farm", "completion", "zsh"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "bashcompinit") {
		t.Errorf("completion zsh: exit %d", code)
	}
	if code := Run([]string{"farm", "completion", "fish"}, &out, &errb); code != exitUsage {
		t.Errorf("completion fish: exit %d, want %d", code, exitUsage)
	}
	// The candidates themselves depend on os.Args (urfave/cli reads it):
	// integration's TestCompletionCandidates checks them on the binary.
}

func TestHelpHasExamples(t *testing.T) {
	for _, cmd := range []string{"init", "submit", "resubmit", "wait", "Status", "query", "list", "kill", "prune", "repair", "clean", "completion"} {
		var out, errb bytes.Buffer
		if code := Run([]string{"farm", "help", cmd}, &out, &errb); code != 0 {
			t.Errorf("help %s: exit %d", cmd, code)
		}
		if !strings.Contains(out.String(), "EXAMPLE") {
			t.Errorf("help %s has no example:\n%s", cmd, out.String())
		}
	}
}

// TestSubmitHelp: submit and resubmit parse their own arguments (N may be
// -1), and still answer --help and -h with their help, exit 0.
func TestSubmitHelp(t *testing.T) {
	for _, args := range [][]string{{"submit", "--help"}, {"submit", "-h"}, {"resubmit", "--help"}} {
		var out, errb bytes.Buffer
		code := Run(append([]string{"farm", "-C", t.TempDir()}, args...), &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "farm "+args[0]+" - ") || !strings.Contains(out.String(), "EXAMPLE") || !strings.Contains(out.String(), "--yes") || errb.Len() != 0 {
			t.Errorf("farm %v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}

// TestConfirmer: above 1000 jobs, submit asks "Are you sure? (type yes)"
// on a terminal and goes on only on "yes"; without a terminal it refuses,
// saying to add --yes; Ctrl-C at the question refuses with exit 130.
func TestConfirmer(t *testing.T) {
	ctx := context.Background()
	err := confirmer(ctx, "submit", strings.NewReader("yes\n"), false, io.Discard)(1001)
	want := `1001 jobs to submit (more than 1000), and no terminal to ask "Are you sure?" on: add --yes to submit them; nothing was submitted`
	if err == nil || err.Error() != want || !farm.IsUserError(err) {
		t.Errorf("no terminal: %v, want %s", err, want)
	}
	for answer, want := range map[string]string{
		"yes\n":     "",
		" yes \r\n": "",
		"yes":       "", // then end of input
		"no\n":      `not confirmed (the answer was "no", not yes): nothing was submitted`,
		"y\n":       `not confirmed (the answer was "y", not yes)`,
		"":          `not confirmed (the answer was "", not yes)`, // Ctrl-D
	} {
		var out bytes.Buffer
		err := confirmer(ctx, "resubmit", strings.NewReader(answer), true, &out)(2500)
		if out.String() != "2500 jobs to resubmit (more than 1000). Are you sure? (type yes) " {
			t.Errorf("%q: asked %q", answer, out.String())
		}
		if (want == "" && err != nil) || (want != "" && (err == nil || !strings.HasPrefix(err.Error(), want))) {
			t.Errorf("answer %q: %v, want %q", answer, err, want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	r, w := io.Pipe()
	defer w.Close()
	time.AfterFunc(50*time.Millisecond, cancel)
	err = confirmer(cctx, "submit", r, true, io.Discard)(5000)
	if code, _ := classify(err); !errors.Is(err, context.Canceled) || code != exitInterrupted || err.Error() != "interrupted: nothing was submitted" {
		t.Errorf("Ctrl-C at the question: %v (exit %d)", err, code)
	}
	if isTTY(strings.NewReader("")) {
		t.Error("a strings.Reader taken for a terminal")
	}
	if null, err := os.Open(os.DevNull); err == nil {
		if isTTY(null) {
			t.Error("/dev/null (a character device) taken for a terminal")
		}
		null.Close()
	}
	if pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0); err == nil {
		if !isTTY(pty) {
			t.Error("a pseudo-terminal not taken for a terminal")
		}
		pty.Close()
	}
}

// TestInitEngine: farm init --engine sge writes Grid Engine's job scripts
// and says what to edit in them; the default is Slurm's; another engine
// is a usage error that names the choices.
func TestInitEngine(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		out, errs string
		line      string // a line job_script.sh must have
	}{
		{[]string{"init"}, 0, "job_script.sh (#SBATCH -t, -A) and single_case.sh", "", "#SBATCH -t 0-00:10"},
		{[]string{"init", "--engine", "slurm"}, 0, "job_script.sh (#SBATCH -t, -A) and single_case.sh", "", "#SBATCH -t 0-00:10"},
		{[]string{"init", "--engine", "sge"}, 0, "job_script.sh (#$ -l h_rt, -P) and single_case.sh", "", "#$ -l h_rt=00:10:00"},
		{[]string{"init", "--engine=sge"}, 0, "(#$ -l h_rt, -P)", "", "#$ -l h_rt=00:10:00"},
		{[]string{"init", "--engine", "pbs"}, exitUsage, "", `farm: unknown engine "pbs" for farm init --engine: slurm or sge`, ""},
		{[]string{"init", "--engine", ""}, exitUsage, "", `farm: unknown engine "" for farm init --engine: slurm or sge`, ""},
	} {
		dir := t.TempDir() + "/f"
		var out, errb bytes.Buffer
		code := Run(append(append([]string{"farm"}, tc.args...), dir), &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.HasPrefix(errb.String(), tc.errs) || (tc.errs == "") != (errb.Len() == 0) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out.String(), errb.String())
		}
		b, err := os.ReadFile(dir + "/job_script.sh")
		if tc.line == "" {
			if !os.IsNotExist(err) {
				t.Errorf("%v: a farm was made (%v)", tc.args, err)
			}
			continue
		}
		if !strings.Contains("\n"+string(b), "\n"+tc.line+"\n") {
			t.Errorf("%v: job_script.sh lacks %q:\n%s", tc.args, tc.line, b)
		}
	}
}
