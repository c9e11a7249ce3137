package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/farm"
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
		if code != 0 || !strings.Contains(out.String(), "farm "+args[0]+" - ") || !strings.Contains(out.String(), "EXAMPLE") || errb.Len() != 0 {
			t.Errorf("farm %v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}
