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
		// A farm flag mistyped is refused, whatever the backend; an
		// option of sbatch or qsub near one is not (--mem is two letters
		// from --yes, -A one from -y).
		{[]string{"2", "--backnd", "local"}, farm.SubmitOptions{}, "unknown flag --backnd: did you mean --backend? (nothing was submitted)"},
		{[]string{"1", "--backend", "local", "--ye"}, farm.SubmitOptions{}, "unknown flag --ye: did you mean --yes?"},
		{[]string{"1", "-aut"}, farm.SubmitOptions{}, "unknown flag -aut: did you mean --auto?"},
		{[]string{"1", "--bakend=slurm"}, farm.SubmitOptions{}, "unknown flag --bakend: did you mean --backend?"},
		{[]string{"1", "--faild"}, farm.SubmitOptions{}, "unknown flag --faild: did you mean --failed?"},
		{[]string{"1", "--failed=1"}, farm.SubmitOptions{}, "--failed takes no value, got --failed=1"},
		{[]string{"1", "-backend=local"}, farm.SubmitOptions{}, "give --backend ENGINE or --backend=ENGINE, got -backend=local"},
		{[]string{"1", "--mem=8G", "-A", "x", "--gres=gpu:1", "-t", "10", "-pe", "smp", "4", "-e", "err", "--qos=x", "-s"}, farm.SubmitOptions{N: 1, Args: []string{"--mem=8G", "-A", "x", "--gres=gpu:1", "-t", "10", "-pe", "smp", "4", "-e", "err", "--qos=x", "-s"}}, ""},
		{[]string{"1", "--frobnicate", "-Z", "--"}, farm.SubmitOptions{N: 1, Args: []string{"--frobnicate", "-Z", "--"}}, ""},
	} {
		got, err := parseSubmitArgs("resubmit", tc.args)
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
	if code := Run([]string{"farm", "completion", "bash"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "complete -o default -o filenames -F _farm farm") || strings.Contains(out.String(), "generate-bash-completion") {
		t.Errorf("completion bash: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := Run([]string{"farm", "completion", "zsh"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "bashcompinit") {
		t.Errorf("completion zsh: exit %d", code)
	}
	if code := Run([]string{"farm", "completion", "fish"}, &out, &errb); code != exitUsage {
		t.Errorf("completion fish: exit %d, want %d", code, exitUsage)
	}
	// integration's TestCompletionCandidates and TestCompletionIsInert
	// run the script in bash and zsh.
}

// TestCompleteRunsNothing: 'farm __complete WORDS' prints candidates
// from the commands' definitions and runs no action, whatever the words:
// not init (which would make the directory), not submit.
func TestCompleteRunsNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{""}, "init\nsubmit\nresubmit\nadd\nimport-metaq\nwait\nStatus\nstatus\nlist\nquery\noutput\nreport\nclean\ncompletion\nversion\nkill\nprune\nrepair\nadopt\nrun-case\nhelp\n"},
		{[]string{"init", "newfarm", "--"}, "--engine\n--backend\n--sweep\n--help\n"},
		{[]string{"init", "--engine", ""}, "slurm\nsge\n"},
		{[]string{"submit", "1", "--backend", "local", "-"}, "--auto\n-auto\n--yes\n-y\n--backend\n--help\n"},
		{[]string{"resubmit", "-1", "--c"}, "--crashed\n--cases\n"},
		{[]string{"submit", "1", "--backend", ""}, "slurm\nsge\nlocal\nauto\n"},
		{[]string{"submit", "1", "--backend", "=", "l"}, "local\n"},
		{[]string{"submit", "1", "--backend=s"}, "--backend=slurm\n--backend=sge\n"},
		{[]string{"-C", ".", "wait", "--t"}, "--timeout\n"},
		{[]string{"metajob", ""}, ""},
		{[]string{"completion", "z"}, "zsh\n"},
	} {
		var out, errb bytes.Buffer
		code := Run(append([]string{"farm", "__complete"}, tc.words...), &out, &errb)
		if code != 0 || out.String() != tc.want || errb.Len() != 0 {
			t.Errorf("__complete %q: exit %d, %q, stderr %q; want %q", tc.words, code, out.String(), errb.String(), tc.want)
		}
	}
	os.WriteFile("cases.txt", nil, 0o644)
	os.Mkdir("cdir", 0o755)
	var out bytes.Buffer
	Run([]string{"farm", "__complete", "add", "c"}, &out, io.Discard)
	if out.String() != "cases.txt\ncdir\n" {
		t.Errorf("file names: %q", out.String())
	}
	if left, _ := os.ReadDir("."); len(left) != 2 {
		t.Errorf("completing left %d entries, want the 2 the test made", len(left))
	}
}

// TestVersion: farm --version, -v and farm version print "farm VERSION",
// the one built in by -X main.version, else "(devel)" here (no module
// version, and no VCS stamp in a test binary).
func TestVersion(t *testing.T) {
	for _, v := range []string{"", "v1.2.3-4-gabc"} {
		version = v
		want := "farm (devel)\n"
		if v != "" {
			want = "farm " + v + "\n"
		}
		for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
			var out, errb bytes.Buffer
			if code := Run(append([]string{"farm"}, args...), &out, &errb); code != 0 || out.String() != want {
				t.Errorf("farm %v: exit %d, %q, want %q", args, code, out.String(), want)
			}
		}
	}
	version = ""
}

// TestDurationFlags: a duration flag given no unit or no duration is a
// usage error that names the units, for every duration flag.
func TestDurationFlags(t *testing.T) {
	for _, args := range [][]string{{"wait", "--timeout", "5"}, {"wait", "--interval=10"}, {"query", "--interval", "abc"}, {"_localjob", "--kill-wait", "3"}} {
		var out, errb bytes.Buffer
		code := Run(append([]string{"farm", "-C", t.TempDir()}, args...), &out, &errb)
		val := args[len(args)-1]
		flag := args[1]
		if f, v, ok := strings.Cut(flag, "="); ok {
			flag, val = f, v
		}
		want := "farm: " + flag + " " + val + ": give a duration with a unit, such as 90s, 10m or 2h (see 'farm help')\n"
		if code != exitUsage || errb.String() != want {
			t.Errorf("farm %v: exit %d, stderr %q, want %q", args, code, errb.String(), want)
		}
	}
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
	for _, args := range [][]string{{"submit", "--help"}, {"submit", "-h"}, {"resubmit", "--help"}, {"submit", "2", "--backend", "local", "--help"}} {
		var out, errb bytes.Buffer
		code := Run(append([]string{"farm", "-C", t.TempDir()}, args...), &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "farm "+args[0]+" - ") || !strings.Contains(out.String(), "EXAMPLE") || !strings.Contains(out.String(), "--yes") || errb.Len() != 0 {
			t.Errorf("farm %v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
		// Its options are listed (parsed by hand, declared once), and no
		// COMMANDS section of the library's help command.
		_, opts, _ := strings.Cut(out.String(), "\nOPTIONS:\n")
		want := []string{"--auto", "--yes, -y", "--backend ENGINE", "--help, -h"}
		if args[0] == "resubmit" {
			want = append(want, "--failed", "--interrupted", "--never-run", "--unfit", "--crashed", "--cases IDS")
		}
		for _, w := range want {
			if !strings.Contains(opts, "   "+w+" ") {
				t.Errorf("farm %v: OPTIONS lack %s:\n%s", args, w, opts)
			}
		}
		if args[0] == "submit" && strings.Contains(opts, "--failed") {
			t.Errorf("farm submit's OPTIONS list resubmit's --failed:\n%s", opts)
		}
		if strings.Contains(out.String(), "COMMANDS:") {
			t.Errorf("farm %v shows a COMMANDS section:\n%s", args, out.String())
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
