package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// completionShells are the shells the completion tests run: bash always,
// zsh (through its bashcompinit) where it is installed.
func completionShells(t *testing.T) []string {
	shells := []string{"bash"}
	if _, err := exec.LookPath("zsh"); err == nil {
		shells = append(shells, "zsh")
	} else {
		t.Log("zsh is not installed: farm completion zsh is not tried")
	}
	return shells
}

// complete runs farm's generated completion function, in one real shell,
// on each line of words typed so far (the last one being completed, maybe
// ""), in dir, and returns COMPREPLY for each. The farm on PATH is the
// binary under test.
func complete(t *testing.T, shell, dir string, lines ...[]string) [][]string {
	t.Helper()
	const sep = "--end of COMPREPLY--"
	var script strings.Builder
	if shell == "zsh" {
		script.WriteString("autoload -U compinit && compinit -u\n")
	}
	fmt.Fprintf(&script, "source <(farm completion %s) || exit 9\n", shell)
	for _, words := range lines {
		var arr []string
		for _, w := range words {
			arr = append(arr, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		fmt.Fprintf(&script, "COMP_WORDS=(farm %s)\nCOMP_CWORD=%d\nCOMPREPLY=()\n_farm\nprintf '%%s\\n' \"${COMPREPLY[@]}\" %q\n", strings.Join(arr, " "), len(words), sep)
	}
	var cmd *exec.Cmd
	if shell == "zsh" {
		cmd = exec.Command("zsh", "-f", "-c", script.String())
	} else {
		cmd = exec.Command("bash", "--norc", "--noprofile", "-c", script.String())
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin(t))+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		// The farm's state is still checked by the caller.
		t.Errorf("%s: completing: %v\n%s", shell, err, out)
		return make([][]string, len(lines))
	}
	var got [][]string
	var cur []string
	for _, l := range strings.Split(string(out), "\n") {
		switch l {
		case "":
		case sep:
			got, cur = append(got, cur), nil
		default:
			cur = append(cur, l)
		}
	}
	if len(got) != len(lines) {
		t.Errorf("%s: %d lines completed, %d answers:\n%s", shell, len(lines), len(got), out)
		return make([][]string, len(lines))
	}
	return got
}

// wordLines are the lines of words TestCompletionIsInert completes for the
// commands cmds: every command with the words that would run it; the
// commands that parse their own arguments, start jobs or make a directory
// with every line of words (each completion starts a farm process: the
// machine is shared with the other tests).
func wordLines(cmds []string) [][]string {
	acting := []string{"submit", "resubmit", "init", "add", "adopt", "import-metaq", "kill", "clean"}
	var lines [][]string
	for _, c := range cmds {
		tails := [][]string{{"--"}, {"1", "--backend", "local", "--cases", "1", "-auto", "--"}, {"new", "--"}}
		if slices.Contains(acting, c) {
			tails = [][]string{
				{""}, {"--"}, {"--help"}, {"--version"}, {"1", "--"}, {"-1", "-"},
				{"1", "--backend", "local", "--"}, {"1", "--backend", "local", "--yes"},
				{"1", "--backend", "local", "--cases", "1", "-auto", "--"},
				{"new", "--"}, {"--engine", "sge", "new", "-"}, {"more.txt", "--"},
				{"1", "--generate-bash-completion"},
			}
		}
		for _, tail := range tails {
			lines = append(lines, append([]string{c}, tail...))
		}
	}
	return lines
}

// TestCompletionIsInert: pressing TAB after any words, for every command,
// changes nothing — no job, no run, no file, no directory — in a farm
// never submitted (where 'farm submit 1 --backend local --<TAB>' used to
// submit it) and in one that ran (where 'farm resubmit ... --<TAB>' used
// to start a run), and in bash and zsh alike.
func TestCompletionIsInert(t *testing.T) {
	t.Parallel()
	fresh := newFarm(t, repeat("true", 3), "0-00:10")
	ran := newFarm(t, []string{"true", "false"}, "0-00:10")
	mustFarm(t, ran, "submit", "1", "--backend", "local")
	mustFarmCode(t, ran, exitNotAllOK, "wait", "--timeout", "1m")
	os.WriteFile(filepath.Join(fresh, "more.txt"), []byte("true\n"), 0o644)
	os.WriteFile(filepath.Join(ran, "more.txt"), []byte("true\n"), 0o644)

	// Every command farm's help lists, the hidden ones and some that are
	// none.
	_, list, _ := strings.Cut(mustFarm(t, fresh, "--help"), "\nCOMMANDS:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	var cmds []string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(strings.ReplaceAll(l, ",", " ")); len(f) > 0 {
			cmds = append(cmds, f[0])
			if len(f) > 1 && (f[1] == "status" || f[1] == "h") {
				cmds = append(cmds, f[1])
			}
		}
	}
	if !slices.Contains(cmds, "submit") || !slices.Contains(cmds, "init") || !slices.Contains(cmds, "adopt") {
		t.Fatalf("farm --help lists the commands %q", cmds)
	}
	cmds = append(cmds, "metajob", "autojob", "_localjob", "__complete", "nosuch")
	lines := wordLines(cmds)
	lines = append(lines, []string{"-C", ran, "submit", "1", "--backend", "local", "--"}, []string{"--farm", ".", "resubmit", "1", "--"})

	for _, shell := range completionShells(t) {
		if shell != "bash" {
			// The same script: the commands that parse their own
			// arguments, or make a directory, suffice (the machine is
			// shared).
			var some [][]string
			for _, l := range lines {
				if slices.Contains([]string{"submit", "resubmit", "init"}, l[0]) {
					some = append(some, l)
				}
			}
			lines = some
		}
		for _, dir := range []string{fresh, ran} {
			before := snapshot(t, dir)
			beforeParent := snapshot(t, filepath.Dir(dir))
			complete(t, shell, dir, lines...)
			if diff := cmp.Diff(before, snapshot(t, dir), cmp.AllowUnexported(fileState{})); diff != "" {
				t.Errorf("%s: completing changed the farm %s (-before +after):\n%s", shell, dir, diff)
			}
			if diff := cmp.Diff(beforeParent, snapshot(t, filepath.Dir(dir)), cmp.AllowUnexported(fileState{})); diff != "" {
				t.Errorf("%s: completing changed the directory around the farm (-before +after):\n%s", shell, diff)
			}
		}
	}
	if jobs := listJSON(t, fresh); len(jobs) != 0 {
		t.Errorf("completing submitted the fresh farm: %v", jobs)
	}
	if jobs := listJSON(t, ran); len(jobs) != 1 {
		t.Errorf("the farm that ran has %d jobs after completing, want its 1", len(jobs))
	}
}

// TestCompletionCandidates: the candidates the completion function gives:
// the commands (not the hidden ones), each command's flags (submit's and
// resubmit's too), the engines after --backend, the shells after
// completion, and file names where nothing else fits.
func TestCompletionCandidates(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 2), "0-00:10")
	has := func(got []string, want ...string) bool {
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}
	for _, shell := range completionShells(t) {
		for _, tc := range []struct {
			words []string
			want  []string // all of these
			not   []string // none of these
			exact bool     // exactly want
		}{
			{words: []string{""}, want: []string{"init", "submit", "resubmit", "add", "wait", "Status", "query", "list", "kill", "prune", "clean", "completion", "version", "help"},
				not: []string{"metajob", "autojob", "_localjob", "__complete", "h"}},
			{words: []string{"su"}, want: []string{"submit"}, exact: true},
			{words: []string{"submit", "1", "-"}, want: []string{"--backend", "--yes", "-y", "-auto", "--auto", "--help"}, not: []string{"--failed", "--cases"}},
			{words: []string{"submit", "1", "--backend", "local", "--"}, want: []string{"--backend", "--yes", "--auto", "--help"}, not: []string{"-auto", "-y"}},
			{words: []string{"submit", "1", "--y"}, want: []string{"--yes"}, exact: true},
			{words: []string{"resubmit", "1", "--cases", "1", "--"}, want: []string{"--failed", "--interrupted", "--never-run", "--unfit", "--crashed", "--cases", "--backend", "--yes"}},
			{words: []string{"submit", "1", "--backend", ""}, want: []string{"slurm", "sge", "local", "auto"}, exact: true},
			{words: []string{"resubmit", "2", "--backend", "l"}, want: []string{"local"}, exact: true},
			{words: []string{"submit", "1", "--backend", "=", ""}, want: []string{"slurm", "sge", "local", "auto"}, exact: true},
			{words: []string{"submit", "1", "--backend", "=", "s"}, want: []string{"slurm", "sge"}, exact: true},
			{words: []string{"init", "--"}, want: []string{"--engine", "--backend", "--sweep", "--help"}, exact: true},
			{words: []string{"init", "--engine", ""}, want: []string{"slurm", "sge"}, exact: true},
			{words: []string{"init", "--backend", ""}, want: []string{"slurm", "sge", "local", "auto"}, exact: true},
			{words: []string{"add", "--"}, want: []string{"--first", "--sweep", "--help"}, exact: true},
			{words: []string{"adopt", "--"}, want: []string{"--backend", "--help"}, exact: true},
			{words: []string{"adopt", "--backend", ""}, want: []string{"slurm", "sge", "local", "auto"}, exact: true},
			{words: []string{"wait", "--"}, want: []string{"--timeout", "--progress", "--interval", "--help"}, exact: true},
			{words: []string{"Status", "-"}, want: []string{"-f", "--failed", "--json", "--meta"}},
			{words: []string{"status", "--j"}, want: []string{"--json"}, exact: true},
			{words: []string{"-"}, want: []string{"--farm", "-C", "--version", "--help"}},
			{words: []string{"-C", ".", "sub"}, want: []string{"submit"}, exact: true},
			{words: []string{"help", ""}, want: []string{"submit", "init"}},
			{words: []string{"completion", ""}, want: []string{"bash", "zsh"}, exact: true},
			// File names where nothing else fits.
			{words: []string{"add", "job_"}, want: []string{"job_script.sh"}, exact: true},
			{words: []string{"submit", "1", "tab"}, want: []string{"table.dat"}, exact: true},
			{words: []string{"-C", "sing"}, want: []string{"single_case.sh"}, exact: true},
			{words: []string{"report", "--png", "con"}, want: []string{"config"}, exact: true},
		} {
			got := complete(t, shell, dir, tc.words)[0]
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			switch {
			case tc.exact && !slices.Equal(got, want):
				t.Errorf("%s: farm %s<TAB>: %q, want %q", shell, strings.Join(tc.words, " "), got, want)
			case !has(got, tc.want...):
				t.Errorf("%s: farm %s<TAB>: %q, want all of %q", shell, strings.Join(tc.words, " "), got, tc.want)
			}
			for _, n := range tc.not {
				if slices.Contains(got, n) {
					t.Errorf("%s: farm %s<TAB>: %q offers %q", shell, strings.Join(tc.words, " "), got, n)
				}
			}
		}
	}
}

// oldBashCompletion is the completion function of farm's earlier versions,
// which ran the words typed so far with --generate-bash-completion: a
// shell opened before an upgrade still has it loaded.
const oldBashCompletion = `_farm() {
  local cur words
  cur="${COMP_WORDS[COMP_CWORD]}"
  words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  if [[ "$cur" == -* ]]; then
    words+=("$cur")
  fi
  COMPREPLY=($(compgen -W "$("${words[@]}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
  if [ ${#COMPREPLY[@]} -eq 0 ]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
`

// TestOldCompletionFunctionIsInert: the earlier versions' completion
// function, which submitted a farm on 'farm submit 1 --backend local
// --<TAB>', gets candidates from today's farm and runs nothing.
func TestOldCompletionFunctionIsInert(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, repeat("true", 3), "0-00:10")
	before := snapshot(t, dir)
	beforeParent := snapshot(t, filepath.Dir(dir))
	script := oldBashCompletion
	for _, w := range []string{"submit 1 --backend local --", "resubmit 1 --backend local --cases 1 --", "init --", "init new", "add x --"} {
		script += fmt.Sprintf("COMP_WORDS=(farm %s)\nCOMP_CWORD=%d\n_farm\necho \"${COMPREPLY[*]}\"\n", w, len(strings.Fields(w)))
	}
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin(t))+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "--auto --yes --backend --help\n") {
		t.Errorf("the old completion function: %v, completed %q", err, out)
	}
	if diff := cmp.Diff(before, snapshot(t, dir), cmp.AllowUnexported(fileState{})); diff != "" {
		t.Errorf("the old completion function changed the farm (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeParent, snapshot(t, filepath.Dir(dir)), cmp.AllowUnexported(fileState{})); diff != "" {
		t.Errorf("the old completion function changed the directory around the farm (-before +after):\n%s", diff)
	}
	if jobs := listJSON(t, dir); len(jobs) != 0 {
		t.Errorf("the old completion function submitted the farm: %v", jobs)
	}
}
