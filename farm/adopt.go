package farm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
	"github.com/farm-hpc/farm/templates"
)

// adoptedMark starts a config written by farm adopt (from config.h, or
// noMETAConfig without one).
const (
	adoptedMark  = "# farm adopt: from META's config.h"
	noMETAConfig = "# farm adopt: META's config.h was not there: farm's defaults"
	adoptedBy    = "# farm adopt:"
)

// The lines that farm adopt puts in place of META's last lines.
const (
	farmMetajobLine = `exec "${FARM_BIN:-farm}" metajob`
	farmAutojobLine = `exec "${FARM_BIN:-farm}" autojob`
)

// metaStatusPrefix names META's status files once adopted:
// STATUSES/status.meta-JOBID, out of the way of farm's own.
const metaStatusPrefix = "status.meta-"

// adoption is what Adopt will do, decided before anything is written.
type adoption struct {
	config     []byte
	scripts    []scriptEdit
	moves      [][2]string // status files: from, to (both absolute)
	retryTable bool        // META's table.dat_, kept as table.dat_.meta
	numbered   bool        // table.dat carries IDs: a run of META is recorded
	settings   []string    // what config got, for the summary
	noConfigH  bool        // the farm has no config.h: config has farm's defaults
	backend    string      // BACKEND written to config (--backend), if any
}

// scriptEdit replaces one script, keeping the original as NAME.meta (or
// writes a script that was not there, with keep false).
type scriptEdit struct {
	name string
	old  []byte
	new  []byte
	mode os.FileMode
	keep bool
}

// Adopt turns the META farm in f.Dir into a farm, in place: config.h's
// knobs (NJOBS_MAX, N_failed_max, dt_failed, WHOLE_NODE, NWHOLE) become
// config, the last line of job_script.sh (task.run) and of
// resubmit_script.sh (autojob.run) are replaced by farm's (the originals
// kept as *.meta), META's status files ("ID STATUS" lines, in STATUSES/ or
// in the farm directory) become STATUSES/status.meta-JOBID, which farm
// reads as the records of the runs before it, and the claim state starts
// with run 1 closed, so that 'farm resubmit' runs what did not succeed.
// single_case.sh and table.dat are left as they are. It refuses, changing
// nothing, when the directory is not a META farm, when it is one farm
// cannot run, and when jobs of it are still queued or running (asked of
// the backend named, or of the default one). scripts are the job-script
// templates of META's batch system (Slurm's, backend.Engine.Templates):
// a META farm without resubmit_script.sh gets that one. An older META
// farm without config.h gets farm's defaults. record, if not "", is the
// backend the user named (--backend): config gets BACKEND=record, which
// farm submit and farm resubmit use from then on.
func (f *Farm) Adopt(ctx context.Context, backendName, record string, scripts fs.FS) error {
	a, err := f.planAdoption(ctx, backendName, record, scripts)
	if err != nil {
		return err
	}
	if err := f.EnsureDirs(); err != nil {
		return err
	}
	if err := f.adopt(ctx, a); err != nil {
		return fmt.Errorf("%w (farm adopt stopped half-way: run it again to finish)", err)
	}
	return f.sayAdopted(ctx, a)
}

// planAdoption checks everything Adopt needs and decides what it will
// write; it writes nothing.
func (f *Farm) planAdoption(ctx context.Context, backendName, record string, scripts fs.FS) (*adoption, error) {
	if err := f.checkNoFarmRun(ctx); err != nil {
		return nil, err
	}
	a := &adoption{backend: record}
	if record == "auto" {
		a.backend = ""
	}
	// The job script first: a farm of farm's own (farm init, or adopted
	// before) is said to be one, before any advice about its config.
	js, err := f.scriptEdit(layout.JobScript, "task.run", farmMetajobLine, true, nil)
	if err != nil {
		return nil, err
	}
	a.scripts = append(a.scripts, js)
	if a.config, a.settings, a.noConfigH, err = f.adoptedConfig(a.backend); err != nil {
		return nil, err
	}
	rs, err := f.scriptEdit(layout.ResubmitScript, ".run", farmAutojobLine, false, scripts)
	if err != nil {
		return nil, err
	}
	if rs.new != nil {
		a.scripts = append(a.scripts, rs)
	}
	info, err := tablefmt.Validate(f.Path(layout.Table))
	if err != nil {
		return nil, tableErr(err)
	}
	a.numbered = info.Numbered
	if a.moves, err = f.metaStatusFiles(); err != nil {
		return nil, err
	}
	if len(a.moves) > 0 && !a.numbered {
		return nil, Userf("%s is not numbered, but the farm has META status files: number it as META did (\"ID command\" on every line) before farm adopt; nothing was changed", layout.Table)
	}
	if _, err := os.Lstat(f.Path(layout.RetryTable)); err == nil {
		a.retryTable = true
		if _, err := os.Lstat(f.Path(layout.RetryTable + ".meta")); err == nil {
			return nil, Userf("both %s and %s.meta exist: move one away, then run farm adopt again; nothing was changed", layout.RetryTable, layout.RetryTable)
		}
	}
	if err := f.checkNoMETAJobs(ctx, backendName); err != nil {
		return nil, err
	}
	return a, nil
}

// checkNoFarmRun refuses a directory whose claim state farm has run from:
// the only state it may find is the one an adopt that stopped half-way
// made (run 1, closed), which a new adopt makes again.
func (f *Farm) checkNoFarmRun(ctx context.Context) error {
	store := f.Store()
	defer store.Close()
	st, err := store.Read(ctx)
	if errors.Is(err, casetable.ErrNoState) {
		return nil
	}
	if err != nil || st.Run != 1 || st.Claimed < st.Cases {
		return Userf("%s is already a farm (it has a claim state, MISC/chain, of run %d): nothing to adopt", f.Dir, st.Run)
	}
	return nil
}

// adoptedConfig reads config.h (bash assignments KEY=VALUE) and makes the
// config file from its knobs; without config.h (an older META farm), from
// farm's defaults (noConfigH). backendName, if not "", is written as
// BACKEND.
func (f *Farm) adoptedConfig(backendName string) (config []byte, settings []string, noConfigH bool, err error) {
	data, err := os.ReadFile(f.Path(layout.METAConfig))
	noConfigH = os.IsNotExist(err)
	if err != nil && !noConfigH {
		return nil, nil, false, Userf("%s cannot be read (%v): make it readable, or move it away to adopt the farm with farm's defaults; nothing was changed", layout.METAConfig, unwrapPath(err))
	}
	if b, err := os.ReadFile(f.Path(layout.Config)); err == nil && !bytes.HasPrefix(b, []byte(adoptedBy)) {
		if noConfigH {
			return nil, nil, false, Userf("%s has farm's %s already, and no META %s: move %s away (farm adopt writes it), then run farm adopt again; nothing was changed", f.Dir, layout.Config, layout.METAConfig, layout.Config)
		}
		return nil, nil, false, Userf("%s has both META's %s and farm's %s: remove %s (farm adopt writes it from %s), then run farm adopt again; nothing was changed", f.Dir, layout.METAConfig, layout.Config, layout.Config, layout.METAConfig)
	}
	vals := map[string]string{}
	lines := map[string]int{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue // export lists, blank lines, anything else bash runs
		}
		vals[k], lines[k] = strings.Trim(strings.TrimSpace(v), `"'`), n+1
	}
	num := func(k string) (string, error) {
		v, ok := vals[k]
		if !ok {
			return "", nil
		}
		if n, err := strconv.ParseUint(v, 10, 31); err != nil || strconv.FormatUint(n, 10) != v {
			return "", Userf("%s:%d: %s=%s is not a whole number farm can read: write the number itself, then run farm adopt again; nothing was changed", layout.METAConfig, lines[k], k, v)
		}
		return v, nil
	}
	if v, err := num("NWHOLE"); err != nil {
		return nil, nil, false, err
	} else if n, _ := strconv.Atoi(v); n > maxNWhole {
		return nil, nil, false, Userf("%s:%d: NWHOLE=%s: farm runs at most %d cases at once in a meta-job; lower it, then run farm adopt again; nothing was changed", layout.METAConfig, lines["NWHOLE"], v, maxNWhole)
	}
	if w, _ := num("WHOLE_NODE"); w != "" && w != "0" && vals["NWHOLE"] == "" {
		return nil, nil, false, Userf("%s:%d: WHOLE_NODE=%s needs NWHOLE, the cases each meta-job runs at once on its node: add NWHOLE=N (its cores), then run farm adopt again; nothing was changed", layout.METAConfig, lines["WHOLE_NODE"], w)
	}
	var b bytes.Buffer
	if noConfigH {
		fmt.Fprintf(&b, "%s; see 'farm help'.\n", noMETAConfig)
	} else {
		fmt.Fprintf(&b, "%s (kept as it was); see 'farm help'.\n", adoptedMark)
	}
	for _, k := range []string{"N_failed_max", "dt_failed", "NJOBS_MAX", "WHOLE_NODE", "NWHOLE"} {
		v, err := num(k)
		if err != nil {
			return nil, nil, false, err
		}
		if v != "" {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
			settings = append(settings, k+"="+v)
		}
	}
	// META's single_case.sh makes the case's directory itself, if any.
	b.WriteString("# META's single_case.sh makes a case's directory itself, if it wants one.\nRUN_DIRS=0\n")
	for _, k := range []string{"RUNTIME_MIN", "RUNTIME_MAX"} {
		if v, ok := vals[k]; ok {
			fmt.Fprintf(&b, "# config.h's %s=%s has no farm setting.\n", k, v)
		}
	}
	if backendName != "" {
		fmt.Fprintf(&b, "# The backend 'farm submit' and 'farm resubmit' use when not given --backend.\nBACKEND=%s # written by 'farm adopt --backend %s'\n", backendName, backendName)
	}
	if _, err := parseConfig(layout.Config, b.Bytes()); err != nil {
		return nil, nil, false, Userf("%s: %v (in the config made from it); fix %s, then run farm adopt again; nothing was changed", layout.METAConfig, err, layout.METAConfig)
	}
	return b.Bytes(), settings, noConfigH, nil
}

// scriptEdit plans the replacement of the last command line of script
// name, which must hold want (META's), by line. A script already ending
// with line needs nothing; a missing one is an error if required, else it
// gets farm's template, from scripts (META's batch system's).
func (f *Farm) scriptEdit(name, want, line string, required bool, scripts fs.FS) (scriptEdit, error) {
	e := scriptEdit{name: name}
	fi, err := os.Stat(f.Path(name))
	if os.IsNotExist(err) && !required {
		files, err := templates.All(scripts)
		if err != nil {
			return e, err
		}
		for _, t := range files {
			if t.Name == name {
				e.new, e.mode = t.Data, t.Mode
			}
		}
		return e, nil
	}
	if err != nil {
		return e, err
	}
	if e.old, err = os.ReadFile(f.Path(name)); err != nil {
		return e, err
	}
	e.mode, e.keep = fi.Mode().Perm(), true
	lines := strings.Split(strings.TrimRight(string(e.old), "\n"), "\n")
	last := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(lines[i]); t != "" && !strings.HasPrefix(t, "#") {
			last = i
			break
		}
	}
	switch {
	case last >= 0 && strings.TrimSpace(lines[last]) == line:
		if required {
			return e, Userf("%s already ends with farm's line (%s): this is a farm of farm's already (adopted before, or made by farm init), with nothing to adopt; use farm's commands in it as they are (nothing was changed)", name, line)
		}
		return scriptEdit{}, nil // already farm's
	case last < 0 || !strings.Contains(lines[last], want):
		got := ""
		if last >= 0 {
			got = strings.TrimSpace(lines[last])
		}
		return e, Userf("%s:%d: META's %s ends with a line that runs %s, this one with %q: change that line to %s and run farm adopt again; nothing was changed", name, last+1, name, want, got, line)
	}
	if kept, err := os.ReadFile(f.Path(name + ".meta")); err == nil && !bytes.Equal(kept, e.old) {
		return e, Userf("%s.meta exists (farm adopt keeps META's %s there): move it away, then run farm adopt again; nothing was changed", name, name)
	} else if err != nil && !os.IsNotExist(err) {
		return e, Userf("%s.meta cannot be read (%v): move it away, then run farm adopt again; nothing was changed", name, unwrapPath(err))
	}
	lines[last] = fmt.Sprintf("# farm adopt: META's line was %q (%s.meta is the original).\n%s", strings.TrimSpace(lines[last]), name, line)
	e.new = []byte(strings.Join(lines, "\n") + "\n")
	return e, nil
}

// metaStatusFiles finds META's status files ("ID STATUS" lines: no farm
// header), in STATUSES/ and, as older META wrote them, in the farm
// directory, and plans their moves to STATUSES/status.meta-JOBID.
func (f *Farm) metaStatusFiles() ([][2]string, error) {
	var moves [][2]string
	targets := map[string]bool{}
	for _, dir := range []string{f.Path(layout.StatusDir), f.Dir} {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for _, e := range entries {
			job, ok := metaStatusJob(e.Name())
			if !ok || !e.Type().IsRegular() {
				continue
			}
			from := filepath.Join(dir, e.Name())
			if isMETA, err := hasMETALines(from); err != nil || !isMETA {
				if err != nil {
					return nil, err
				}
				continue // farm's own, or not a status file
			}
			to := f.Path(layout.StatusDir, metaStatusPrefix+job)
			if _, err := os.Lstat(to); err == nil || targets[to] {
				return nil, Userf("%s would be moved to %s, which exists: move one of them away, then run farm adopt again; nothing was changed", from, to)
			}
			targets[to] = true
			moves = append(moves, [2]string{from, to})
		}
	}
	sort.Slice(moves, func(i, j int) bool { return moves[i][0] < moves[j][0] })
	return moves, nil
}

// metaStatusJob reads the name of a status file of META's: status.JOBID,
// JOBID a Slurm job ID (digits, or digits_digits for an array task).
func metaStatusJob(name string) (string, bool) {
	job, ok := strings.CutPrefix(name, "status.")
	if !ok {
		return "", false
	}
	a, b, arr := strings.Cut(job, "_")
	digits := func(s string) bool {
		return s != "" && strings.Trim(s, "0123456789") == ""
	}
	return job, digits(a) && (!arr || digits(b))
}

// hasMETALines reports whether the file at path is empty or starts with a
// line of META's, "ID STATUS" (it reads at most 64 bytes of it: a damaged
// file may have no line end).
func hasMETALines(path string) (bool, error) {
	fh, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer fh.Close()
	b := make([]byte, 64)
	n, err := io.ReadFull(fh, b)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return false, err
	}
	if n == 0 {
		return true, nil
	}
	line, _, found := bytes.Cut(b[:n], []byte("\n"))
	if !found && n == len(b) {
		return false, nil
	}
	r, err := status.ParseRecord(line)
	return err == nil && r.Kind == status.KindMETA, nil
}

// checkNoMETAJobs refuses while jobs of the batch system run, or wait to
// run, in the farm directory: META's meta-jobs or its -auto job.
func (f *Farm) checkNoMETAJobs(ctx context.Context, name string) error {
	be, err := f.openBackend(ctx, name)
	if err != nil {
		return err
	}
	dj, ok := be.(backend.DirJobs)
	if !ok {
		fmt.Fprintf(f.Out, "farm: the %s backend cannot list jobs by directory: make sure no META job of this farm is still queued or running.\n", be.Name())
		return nil
	}
	ids, err := dj.ActiveIn(ctx, f.Dir)
	if err != nil {
		return fmt.Errorf("%w: cannot tell whether META jobs of this farm are still queued or running; nothing was changed", err)
	}
	if len(ids) > 0 {
		return Userf("%d job(s) of this farm are still queued or running (%s job(s) %s): let them end, or cancel them, then run farm adopt again; nothing was changed", len(ids), be.Name(), strings.Join(ids, " "))
	}
	return nil
}

// adopt writes what a planned.
func (f *Farm) adopt(ctx context.Context, a *adoption) error {
	if err := writeFile(f.Path(layout.Config), a.config, 0o644); err != nil {
		return err
	}
	for _, m := range a.moves {
		if err := os.Rename(m[0], m[1]); err != nil {
			return err
		}
	}
	if a.retryTable {
		if err := os.Rename(f.Path(layout.RetryTable), f.Path(layout.RetryTable+".meta")); err != nil {
			return err
		}
	}
	// job_script.sh (a.scripts[0]) last, after the claim state: as long
	// as it is META's, farm adopt can be run again to finish.
	for _, e := range a.scripts[1:] {
		if err := f.writeScript(e); err != nil {
			return err
		}
	}
	if a.numbered {
		if err := f.startAdoptedState(ctx); err != nil {
			return err
		}
	}
	if err := f.writeScript(a.scripts[0]); err != nil {
		return err
	}
	from := fmt.Sprintf("from %s (%s)", layout.METAConfig, strings.Join(a.settings, " "))
	if a.noConfigH {
		from = fmt.Sprintf("farm's defaults (no %s)", layout.METAConfig)
	}
	if a.backend != "" {
		from += ", BACKEND=" + a.backend
	}
	f.Log("adopt: META farm adopted: config %s, %d META status file(s) moved to %s/%s*, scripts' last lines replaced (originals: *.meta)", from, len(a.moves), layout.StatusDir, metaStatusPrefix)
	return nil
}

// writeScript writes e, keeping the original as NAME.meta first.
func (f *Farm) writeScript(e scriptEdit) error {
	if e.keep {
		if err := writeFile(f.Path(e.name+".meta"), e.old, e.mode); err != nil {
			return err
		}
	}
	return writeFile(f.Path(e.name), e.new, e.mode)
}

// startAdoptedState makes the claim state of an adopted farm: run 1, over
// table.dat, closed (META ran it), so that 'farm resubmit' runs every case
// that did not succeed, by the records.
func (f *Farm) startAdoptedState(ctx context.Context) error {
	st, err := f.closedRun(1)
	if err != nil {
		return err
	}
	store := f.Store()
	defer store.Close()
	store.Job = "adopt"
	return store.Repair(ctx, st)
}

// sayAdopted tells the user what Adopt did and what comes next.
func (f *Farm) sayAdopted(ctx context.Context, a *adoption) error {
	fmt.Fprintf(f.Out, "Adopted the META farm in %s:\n", f.Dir)
	if a.noConfigH {
		fmt.Fprintf(f.Out, "  no %s (an older META farm): %s has farm's defaults (RUN_DIRS=0)\n", layout.METAConfig, layout.Config)
	} else {
		fmt.Fprintf(f.Out, "  %s -> %s (%s; RUN_DIRS=0)\n", layout.METAConfig, layout.Config, strings.Join(a.settings, ", "))
	}
	if a.backend != "" {
		fmt.Fprintf(f.Out, "  BACKEND=%s in %s: 'farm submit' and 'farm resubmit' use the %s backend unless given --backend\n", a.backend, layout.Config, a.backend)
	}
	for _, e := range a.scripts {
		if e.keep {
			fmt.Fprintf(f.Out, "  %s: its last line now runs farm (the original is %s.meta)\n", e.name, e.name)
		} else {
			fmt.Fprintf(f.Out, "  %s: written (farm's, for -auto)\n", e.name)
		}
	}
	if a.retryTable {
		fmt.Fprintf(f.Out, "  %s -> %s.meta\n", layout.RetryTable, layout.RetryTable)
	}
	fmt.Fprintf(f.Out, "  %d META status file(s) -> %s/%s* (read as the records of META's runs)\n", len(a.moves), layout.StatusDir, metaStatusPrefix)
	if !a.numbered {
		fmt.Fprintf(f.Out, "%s is not numbered yet (META never submitted it): 'farm submit N' starts it.\n", layout.Table)
		return nil
	}
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	var total, done int64
	err = tablefmt.ReadCases(f.Path(layout.Table), func(c tablefmt.Case) error {
		total++
		if sum.Get(c.ID).State == status.Succeeded {
			done++
		}
		return nil
	})
	if err != nil {
		return tableErr(err)
	}
	fmt.Fprintf(f.Out, "%d of the %d cases of %s succeeded; 'farm resubmit N' runs the other %d on N meta-jobs.\n", done, total, layout.Table, total-done)
	return nil
}

// writeFile writes data to path through a temporary file and a rename.
func writeFile(path string, data []byte, mode os.FileMode) error {
	return atomicfile.Write(path, mode, func(w *bufio.Writer) error {
		_, err := w.Write(data)
		return err
	}, "")
}
