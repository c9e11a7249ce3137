package farm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/layout"
)

// The farm's backend is config's BACKEND: the engine farm submit and farm
// resubmit use when not given --backend. It lives in config rather than in
// MISC because the user sees and edits it there with the other settings,
// and 'farm clean --yes' keeps it, as it keeps config. farm adopt, submit
// and resubmit given --backend NAME write it (recordBackend), so that the
// next commands, and the -auto job, stay on NAME; --backend auto uses the
// default for one command and writes nothing. farm init writes it only
// when given --backend (InitBackend): its --engine alone picks the
// directives of the job scripts, which the local backend reads too, and
// pins no backend.

// backendChoice is where chooseBackend found the backend of a command.
type backendChoice struct {
	record string // the --backend given, to write to config's BACKEND once jobs are submitted
	line   int    // config's BACKEND line, if the backend is config's
}

// chooseBackend settles the backend of a submit or resubmit, in
// opt.Backend: the one given (--backend), else config's BACKEND, else,
// for a resubmit (stay), the backend of the farm's last job, else "" (the
// default). The name given is to be recorded when config does not say it
// already and the command is the user's (the -auto job, Self, passes the
// backend its run was on).
func (f *Farm) chooseBackend(opt *SubmitOptions, stay bool) backendChoice {
	var c backendChoice
	switch {
	case opt.Backend == "auto":
	case opt.Backend != "":
		if opt.Self == "" && opt.Backend != f.Config.Backend {
			c.record = opt.Backend
		}
	case f.Config.Backend != "" && f.Config.Backend != "auto":
		opt.Backend, c.line = f.Config.Backend, f.Config.BackendLine
	case stay:
		if recs, _ := f.Jobs(); len(recs) > 0 {
			opt.Backend = recs[len(recs)-1].Backend
		}
	}
	return c
}

// err is err, an error of setting up the command's launch, said of
// config's BACKEND when it names no backend.
func (c backendChoice) err(err error) error {
	var unknown *backend.UnknownError
	if c.line > 0 && errors.As(err, &unknown) {
		return Userf("%s:%d: BACKEND=%s: no backend farm knows by that name (known: %s): fix it in %s, or give --backend", layout.Config, c.line, unknown.Name, strings.Join(unknown.Known, ", "), layout.Config)
	}
	return err
}

// recordBackend writes BACKEND=name to config (not through a symbolic
// link out of the farm directory), in place of the line that
// sets it, else of the template's "#BACKEND=" line, else at the end, with
// a comment saying that how (the command line, "farm submit --backend
// local") wrote it. config is written whole through a temporary file (a
// symbolic link's target is written); what it said besides is kept.
func (f *Farm) recordBackend(name, how string) error {
	path, outside, err := f.linkedOutside(layout.Config)
	if err != nil {
		return err
	}
	if outside {
		// A config shared by several farms: writing it would pin them
		// all to this backend.
		return Userf("%s is a symbolic link to %s, outside the farm directory, which farm never writes", layout.Config, path)
	}
	mode := os.FileMode(0o644)
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	line := fmt.Sprintf("BACKEND=%s # written by '%s', %s", name, how, time.Now().Format("2006-01-02"))
	lines := strings.SplitAfter(string(data), "\n")
	done := false
	for i, l := range lines {
		code, _, _ := strings.Cut(l, "#")
		if k, _, ok := strings.Cut(code, "="); ok && strings.TrimSpace(k) == "BACKEND" {
			lines[i], done = line+"\n", true
		}
	}
	for i, l := range lines {
		// config's template has the line, commented out.
		if !done && strings.HasPrefix(strings.TrimSpace(l), "#BACKEND=") {
			lines[i], done = line+"\n", true
		}
	}
	out := []byte(strings.Join(lines, ""))
	if !done {
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		out = append(out, fmt.Sprintf("\n# The backend 'farm submit' and 'farm resubmit' use when not given --backend.\n%s\n", line)...)
	}
	if err := writeFile(path, out, mode); err != nil {
		return err
	}
	f.Config.Backend = name
	return nil
}

// sayRecordedBackend writes BACKEND=name to config for the command how,
// once its jobs were submitted, and says so; a failure to write is said,
// not returned: the jobs are submitted and recorded.
func (f *Farm) sayRecordedBackend(name, how string) {
	if err := f.recordBackend(name, how); err != nil {
		fmt.Fprintf(f.warnings(), "farm: warning: could not write BACKEND=%s to %s (%v): give --backend %s to the next commands too\n", name, layout.Config, unwrapPath(err), name)
		return
	}
	f.Log("%s: wrote BACKEND=%s to %s", how, name, layout.Config)
	fmt.Fprintf(f.Out, "Wrote BACKEND=%s to %s: 'farm submit' and 'farm resubmit' use the %s backend from now on, unless given --backend.\n", name, layout.Config, name)
}
