package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// completeCmd is the hidden command the completion scripts call with the
// words typed so far: 'farm __complete WORD... CURRENT'. Run answers it
// before the library sees the arguments, so that no command's action can
// run, whatever the words are: completing never submits, creates or
// changes anything.
const completeCmd = "__complete"

// The completion script never runs the command line being completed: it
// gives the words to 'farm __complete', which prints the candidates that
// start with the word being completed, one a line (file names when nothing
// else fits). ${A[@]:i:n} counts from 0 in bash and in zsh's bashcompinit
// alike, and both split $(...) at IFS, a newline here.
const bashCompletion = `# bash completion for farm; load with: source <(farm completion bash)
_farm() {
  local IFS=$'\n'
  COMPREPLY=($("${COMP_WORDS[@]:0:1}" ` + completeCmd + ` "${COMP_WORDS[@]:1:$COMP_CWORD}" 2>/dev/null))
}
complete -o default -o filenames -F _farm farm
`

const zshCompletion = `# zsh completion for farm; load with: source <(farm completion zsh)
autoload -U +X bashcompinit && bashcompinit
` + bashCompletion

func completionCmd() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash or zsh)",
		ArgsUsage: "bash|zsh",
		Description: "The script completes commands, their flags, --backend's engines and file names. It\n" +
			"never runs the command line being completed: it asks 'farm " + completeCmd + "' for the\n" +
			"candidates, which only prints them.\n\nEXAMPLES:\n   source <(farm completion bash)     # in ~/.bashrc\n" +
			"   source <(farm completion zsh)      # in ~/.zshrc",
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			default:
				return usagef("completion takes one argument: bash or zsh")
			}
			return nil
		},
	}
}

// printCandidates prints, one a line, the completions of the last of
// words (the word being completed, maybe "") given the words before it
// (without the program's name): the candidates that start with it, else
// the file names that do.
// oldCompleteFlag is what the completion function of farm's earlier
// versions (urfave/cli's) put after the words typed so far; Run answers it
// as it answers completeCmd.
const oldCompleteFlag = "--generate-bash-completion"

func printCandidates(app *cli.App, words []string, w io.Writer) {
	for _, c := range completions(app, words) {
		fmt.Fprintln(w, c)
	}
}

// completions are printCandidates' lines.
func completions(app *cli.App, words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	switch {
	case cur == "=" && len(before) > 0: // bash splits --backend=VALUE at =
		cur, before = "", append(slices.Clone(before), "=")
	case strings.HasPrefix(cur, "-") && strings.Contains(cur, "="): // zsh does not
		flag, value, _ := strings.Cut(cur, "=")
		var out []string
		for _, c := range completions(app, append(append(slices.Clone(before), flag), value)) {
			out = append(out, flag+"="+c)
		}
		return out
	}
	cands, files := candidates(app, before, cur)
	var out []string
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			out = append(out, c)
		}
	}
	if len(out) == 0 && files {
		out = fileNames(cur)
	}
	return out
}

// candidates are the completions of cur given the words before it, read
// from app's command and flag definitions only (no action runs): after a
// flag that takes a value, its values when it has a known few (--backend's
// engines), else file names (files); for a word that starts with -, the
// flags of the command typed (or the global ones); before any command,
// the commands.
func candidates(app *cli.App, before []string, cur string) (cands []string, files bool) {
	var cmd *cli.Command
	help := false
	flags := app.Flags
	for i := 0; i < len(before); i++ {
		w := before[i]
		switch {
		case w == "=":
			continue
		case strings.HasPrefix(w, "-"):
			if f := findFlag(flags, w); f != nil && takesValue(f) && !strings.Contains(w, "=") {
				if i+1 < len(before) && before[i+1] == "=" {
					i++
				}
				i++ // its value
			}
		case cmd == nil && !help:
			if w == "help" || w == "h" {
				help = true
				continue
			}
			if cmd = findCommand(app, w); cmd == nil {
				return nil, true
			}
			flags = cmd.Flags
		}
	}
	if prev := lastFlag(before); prev != "" {
		if f := findFlag(flags, prev); f != nil && takesValue(f) {
			vals := flagValues(f)
			return vals, vals == nil
		}
	}
	switch {
	case help:
		return commandNames(app), true
	case strings.HasPrefix(cur, "-"):
		return flagNames(app, cmd), true
	case cmd == nil:
		return commandNames(app), true
	case cmd.Name == "completion":
		return []string{"bash", "zsh"}, false
	}
	return nil, true
}

// fileNames are the files and directories whose path starts with cur, as
// bash's compgen -f gives them: hidden ones only if cur's last part
// starts with a dot.
func fileNames(cur string) []string {
	dir, base := filepath.Split(cur)
	d := dir
	if d == "" {
		d = "."
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, base) && (strings.HasPrefix(base, ".") || !strings.HasPrefix(n, ".")) {
			out = append(out, dir+n)
		}
	}
	return out
}

// lastFlag is the word before the one being completed if it is a flag
// without its value ("--backend", or "--backend" "=" as bash splits it),
// else "".
func lastFlag(before []string) string {
	n := len(before)
	if n > 1 && before[n-1] == "=" {
		return before[n-2]
	}
	if n > 0 && strings.HasPrefix(before[n-1], "-") && !strings.Contains(before[n-1], "=") {
		return before[n-1]
	}
	return ""
}

// findCommand is app's command name (or alias), nil if none or hidden.
func findCommand(app *cli.App, name string) *cli.Command {
	for _, c := range app.Commands {
		if !c.Hidden && (c.Name == name || slices.Contains(c.Aliases, name)) {
			return c
		}
	}
	return nil
}

// findFlag is the flag of flags that word names (-C, --farm, --farm=X).
func findFlag(flags []cli.Flag, word string) cli.Flag {
	name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// takesValue reports whether flag f takes a value.
func takesValue(f cli.Flag) bool {
	v, ok := f.(cli.DocGenerationFlag)
	return ok && v.TakesValue()
}

// flagValues are the values of flag f that completion offers: engines for
// --backend and init's --engine; none (file names) for the others.
func flagValues(f cli.Flag) []string {
	switch f.Names()[0] {
	case "backend":
		return append(registry(noEnv, io.Discard).Names(), "auto")
	case "engine":
		var names []string
		for _, e := range initEngines() {
			names = append(names, e.Name)
		}
		return names
	}
	return nil
}

// commandNames are app's visible commands and aliases, and help.
func commandNames(app *cli.App) []string {
	var out []string
	for _, c := range app.Commands {
		if !c.Hidden {
			out = append(out, c.Name)
			out = append(out, c.Aliases...)
		}
	}
	return append(out, "help")
}

// flagNames are the flags of command cmd (the global ones if nil) as they
// are typed: --name, -x for one letter; submit's and resubmit's as
// parseSubmitArgs reads them (-auto too).
func flagNames(app *cli.App, cmd *cli.Command) []string {
	var out []string
	add := func(name string) {
		if len(name) == 1 {
			out = append(out, "-"+name)
		} else {
			out = append(out, "--"+name)
		}
	}
	switch {
	case cmd == nil:
		for _, f := range app.Flags {
			for _, n := range f.Names() {
				add(n)
			}
		}
		add("version")
	case cmd.Name == "submit" || cmd.Name == "resubmit":
		for _, f := range submitFlagsOf(cmd.Name) {
			add(f.name)
			out = append(out, f.aliases...)
		}
	default:
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				add(n)
			}
		}
	}
	add("help")
	return out
}
