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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/tablefmt"
)

// METAQ (github.com/evanberkowitz/metaq) keeps a queue of task scripts in
// the folders priority/ and todo/ of a directory; each script says what it
// needs in "#METAQ FLAG VALUE" lines. 'farm import-metaq DIR' turns them
// into cases of the farm, through farm add.

// metaqImported is the file, in MiscDir, that lists the task scripts
// import-metaq has added (one absolute path a line), so that importing
// the same queue again adds only the tasks that are new.
const metaqImported = "metaq.imported"

// metaqLock makes one 'farm import-metaq' at a time (it reads the list of
// imported tasks, adds, and writes the list).
const metaqLock = "import-metaq.lock"

// MetaqFolders are the folders of a METAQ queue whose tasks are imported,
// in METAQ's order (its default METAQ_TASK_FOLDERS): priority first.
var MetaqFolders = []string{"priority", "todo"}

// MetaqTask is a METAQ task script, with what its #METAQ flags say.
type MetaqTask struct {
	Path  string        // the script, absolute
	Rel   string        // its path in the queue, for messages: "todo/a.sh"
	Nodes int           // NODES (0: not given, as METAQ counts it)
	GPUs  int           // GPUS: the task's total, over its nodes (0: not given)
	MinWC time.Duration // MIN_WC_TIME (0: not given)
	Log   string        // LOG (not kept: a case's output goes to its meta-job's)
	// Launch is the first line ("todo/a.sh:12") that starts work with srun,
	// mpirun, mpiexec or aprun without naming any FARM_ variable: the work
	// would not go to the nodes farm gives the case.
	Launch string
}

// Line is the task as a case: the script run as METAQ runs it (directly:
// it must be executable), with a #FARM part saying what its flags say.
// GPUs are per node in farm, so a task's GPUS is shared out over its
// nodes, rounded up (NODES 3 GPUS 2 is gpus=1 on each of 3 nodes): never
// fewer than it asked for. A task of NODES but no GPUS takes its nodes
// whole, their GPUs too (METAQ gave it the nodes' GPUs as well: it did not
// hide any); one of no NODES (0 nodes to METAQ) is a case of one CPU, and
// of its GPUS on that node.
func (t MetaqTask) Line() string {
	var parts []string
	switch {
	case t.Nodes > 0:
		parts = append(parts, "nodes="+strconv.Itoa(t.Nodes))
		if t.GPUs > 0 {
			parts = append(parts, "gpus="+strconv.Itoa((t.GPUs+t.Nodes-1)/t.Nodes))
		}
	case t.GPUs > 0:
		parts = append(parts, "gpus="+strconv.Itoa(t.GPUs))
	default:
		parts = append(parts, "cpus=1")
	}
	if t.MinWC > 0 {
		parts = append(parts, "min_time="+shortDuration(t.MinWC))
	}
	return shellQuote(t.Path) + " " + tablefmt.NeedsMark + " " + strings.Join(parts, " ")
}

// shortDuration writes d (whole seconds) as min_time takes it: 2h, 90m,
// 75s.
func shortDuration(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}

// metaqFlags are the flags METAQ reads; others it ignores, and so do we.
var metaqFlags = []string{"NODES", "GPUS", "MIN_WC_TIME", "LOG", "PROJECT", "MACHINE"}

// ParseMetaqTask reads the #METAQ flags of the task script at path (rel
// names it in errors) as METAQ's x/metaq_lib.sh does: a line whose first
// field is #METAQ, then the FLAG (capitals), then its VALUE, separated by
// any white space; the first line of a flag counts, wherever it is in the
// script. NODES and GPUS are whole numbers; MIN_WC_TIME is what METAQ's
// x/seconds reads: 2hr, 30min, 1d, SS, MM:SS, HH:MM:SS or D-HH:MM:SS (a
// fraction of a second rounded up). What METAQ would silently read as
// nothing (a lower-case flag, NODES=2, no value, 2.5 nodes, 2h) is an
// error naming the line.
func ParseMetaqTask(path, rel string) (MetaqTask, error) {
	t := MetaqTask{Path: path, Rel: rel}
	b, err := os.ReadFile(path)
	if err != nil {
		return t, Userf("%s: %v", rel, unwrapPath(err))
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if fields[0] != "#METAQ" {
			if t.Launch == "" && !strings.HasPrefix(fields[0], "#") && launchesWork(fields) {
				t.Launch = fmt.Sprintf("%s:%d", rel, n)
			}
			continue
		}
		if len(fields) < 2 {
			continue
		}
		flag := fields[1]
		where := fmt.Sprintf("%s:%d", rel, n)
		if name, val, ok := strings.Cut(flag, "="); ok && slices.Contains(metaqFlags, strings.ToUpper(name)) {
			return t, Userf("%s: %q: METAQ reads a flag and its value apart (it took this for no %s); write \"#METAQ %s %s\"", where, strings.Join(fields, " "), strings.ToUpper(name), strings.ToUpper(name), val)
		}
		if !slices.Contains(metaqFlags, flag) {
			if up := strings.ToUpper(flag); slices.Contains(metaqFlags, up) {
				return t, Userf("%s: #METAQ %s: METAQ reads only capitals (it ignored this line); write \"#METAQ %s\" if the task needs it", where, flag, up)
			}
			continue // METAQ ignores it too
		}
		if seen[flag] {
			continue // METAQ reads the first
		}
		seen[flag] = true
		if len(fields) < 3 {
			return t, Userf("%s: #METAQ %s has no value; give one (\"#METAQ %s %s\") or remove the line", where, flag, flag, map[string]string{"NODES": "2", "GPUS": "4", "MIN_WC_TIME": "30min", "LOG": "/path/to/log", "PROJECT": "name", "MACHINE": "name"}[flag])
		}
		val := fields[2]
		switch flag {
		case "NODES", "GPUS":
			v, err := strconv.ParseInt(val, 10, 32)
			if err != nil || v < 0 || !allDigits(val) {
				return t, Userf("%s: #METAQ %s %s: want a whole number, 0 or more", where, flag, val)
			}
			if flag == "NODES" {
				t.Nodes = int(v)
			} else {
				t.GPUs = int(v)
			}
		case "MIN_WC_TIME":
			d, ok := metaqSeconds(val)
			if !ok {
				return t, Userf("%s: #METAQ MIN_WC_TIME %s: want a time as METAQ reads it: 2hr, 30min, 1d, seconds (5400), MM:SS, HH:MM:SS or D-HH:MM:SS, at most 365 days", where, val)
			}
			t.MinWC = d
		case "LOG":
			t.Log = val
		}
	}
	if err := sc.Err(); err != nil {
		return t, Userf("%s: %v", rel, err)
	}
	return t, nil
}

// launchesWork reports whether a line of a task starts parallel work (srun,
// mpirun, mpiexec, aprun) without naming any FARM_ variable.
func launchesWork(fields []string) bool {
	launch := false
	for _, f := range fields {
		if strings.Contains(f, "FARM_") {
			return false
		}
		switch filepath.Base(f) {
		case "srun", "mpirun", "mpiexec", "aprun":
			launch = true
		}
	}
	return launch
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// metaqSeconds reads a MIN_WC_TIME as METAQ's x/seconds does: Nd, Nhr,
// Nmin, [[D-]HH:]MM:SS[.frac] or a number of seconds; a fraction of a
// second is rounded up. It must be at most tablefmt.MaxMinTime.
func metaqSeconds(v string) (time.Duration, bool) {
	num := func(s string) (int64, bool) {
		if !allDigits(s) || len(s) > 9 {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	var secs int64
	var ok bool
	switch {
	case strings.HasSuffix(v, "d"):
		secs, ok = num(strings.TrimSuffix(v, "d"))
		secs *= 86400
	case strings.HasSuffix(v, "hr"):
		secs, ok = num(strings.TrimSuffix(v, "hr"))
		secs *= 3600
	case strings.HasSuffix(v, "min"):
		secs, ok = num(strings.TrimSuffix(v, "min"))
		secs *= 60
	case strings.Contains(v, ":"):
		if whole, frac, has := strings.Cut(v, "."); has {
			if !allDigits(frac) {
				return 0, false
			}
			if strings.Trim(frac, "0") != "" {
				secs++
			}
			v = whole
		}
		var days int64
		if d, rest, has := strings.Cut(v, "-"); has {
			if days, ok = num(d); !ok || strings.Count(rest, ":") != 2 {
				return 0, false
			}
			v = rest
		}
		parts := strings.Split(v, ":")
		if len(parts) > 3 {
			return 0, false
		}
		var s int64
		for _, p := range parts {
			n, good := num(p)
			if !good {
				return 0, false
			}
			s = s*60 + n
		}
		secs, ok = secs+s+days*86400, true
	default:
		secs, ok = num(v)
	}
	d := time.Duration(secs) * time.Second
	return d, ok && d <= tablefmt.MaxMinTime
}

// ImportMetaqOptions are farm import-metaq's.
type ImportMetaqOptions struct {
	Dir  string    // the METAQ queue: the directory of priority/ and todo/
	Warn io.Writer // notes and warnings (stderr)
}

// ImportMetaq adds the tasks of the METAQ queue opt.Dir to the farm, with
// farm add: those of priority/ first (as farm add --first: ahead of the
// current run's unclaimed cases; on a farm not submitted yet, before the
// todo ones in table.dat), then those of todo/ (as farm add), each folder
// in the order METAQ takes them (their paths sorted; files and folders
// whose name starts with . are not tasks, as in METAQ). Each task becomes
// the line MetaqTask.Line gives. The task files are left where they are:
// METAQ moves a task to working/ and finished/, farm records its cases in
// STATUSES. Tasks imported before (listed in MISC/metaq.imported, by path)
// are not added again, so the queue may be imported again after new tasks
// were put in it. A task that does not read, or that is not executable, is
// refused with its file and line, and nothing is added.
func (f *Farm) ImportMetaq(ctx context.Context, opt ImportMetaqOptions) error {
	warn := opt.Warn
	if warn == nil {
		warn = io.Discard
	}
	dir, found, err := metaqQueue(opt.Dir)
	if err != nil {
		return err
	}
	if err := f.EnsureDirs(); err != nil {
		return f.writeErr(err)
	}
	unlock, err := f.lockFile(metaqLock, "another 'farm import-metaq' is importing into this farm")
	if err != nil {
		return err
	}
	defer unlock()
	done, err := f.readImported()
	if err != nil {
		return err
	}
	batches, before, err := metaqBatches(dir, found, done)
	if err != nil {
		return err
	}
	if n := countWorking(filepath.Join(dir, "working")); n > 0 {
		fmt.Fprintf(warn, "farm: note: %d task(s) in %s are not imported: METAQ jobs run them, or ran them when they died (METAQ's x/reset puts those back in priority/; then import again)\n", n, filepath.Join(dir, "working"))
	}
	total := len(batches["priority"]) + len(batches["todo"])
	if total == 0 {
		fmt.Fprintf(f.Out, "No task to import from %s: ", dir)
		if before > 0 {
			fmt.Fprintf(f.Out, "its %d task(s) in priority/ and todo/ were imported before (%s lists them).\n", before, filepath.Join(layout.MiscDir, metaqImported))
		} else {
			fmt.Fprintf(f.Out, "priority/ and todo/ hold no task script.\n")
		}
		return nil
	}
	// Every line is checked as farm add checks it before any is added:
	// a refusal adds nothing.
	lines := map[string][]byte{}
	for _, folder := range MetaqFolders {
		for _, t := range batches[folder] {
			lines[folder] = append(append(lines[folder], t.Line()...), '\n')
		}
		if len(lines[folder]) > 0 {
			if _, err := tablefmt.NumberAdded(folder, bytes.NewReader(lines[folder]), 1, true); err != nil {
				return tableErr(err)
			}
		}
	}
	if before > 0 {
		fmt.Fprintf(f.Out, "%d task(s) of %s were imported before: not added again.\n", before, dir)
	}
	fmt.Fprintf(f.Out, "Importing %d task(s) of the METAQ queue %s: %d from priority/, %d from todo/.\n", total, dir, len(batches["priority"]), len(batches["todo"]))
	if err := f.addMetaqBatches(ctx, dir, batches, lines, done); err != nil {
		return err
	}
	f.sayMetaqNotes(warn, append(batches["priority"], batches["todo"]...))
	return nil
}

// metaqQueue returns the METAQ queue dir, absolute with its links
// resolved, and the task folders (MetaqFolders) it has.
func metaqQueue(name string) (dir string, found []string, err error) {
	dir, err = filepath.Abs(name)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return "", nil, Userf("farm import-metaq: %v: give the directory of a METAQ queue (the one with todo/ and priority/)", unwrapPath(err))
	}
	for _, folder := range MetaqFolders {
		if fi, err := os.Stat(filepath.Join(dir, folder)); err == nil && fi.IsDir() {
			found = append(found, folder)
		}
	}
	if len(found) == 0 {
		return "", nil, Userf("%s is not a METAQ queue: it has no todo/ or priority/ folder; give the directory METAQ's job scripts set METAQ to", dir)
	}
	return dir, found, nil
}

// metaqBatches reads the tasks of the queue dir's folders found, by
// folder, leaving out those imported before (done), which it counts.
func metaqBatches(dir string, found []string, done map[string]bool) (batches map[string][]MetaqTask, before int, err error) {
	batches = map[string][]MetaqTask{}
	for _, folder := range found {
		tasks, err := metaqFolder(dir, folder)
		if err != nil {
			return nil, 0, err
		}
		for _, t := range tasks {
			if done[t.Path] {
				before++
				continue
			}
			batches[folder] = append(batches[folder], t)
		}
	}
	return batches, before, nil
}

// addMetaqBatches adds each folder's lines with farm add's machinery,
// priority/'s first (as --first), recording the tasks added in done and
// MISC/metaq.imported after each.
func (f *Farm) addMetaqBatches(ctx context.Context, dir string, batches map[string][]MetaqTask, lines map[string][]byte, done map[string]bool) error {
	for _, folder := range MetaqFolders {
		if len(batches[folder]) == 0 {
			continue
		}
		name := filepath.Join(dir, folder)
		err := f.Add(ctx, AddOptions{Name: name, Input: bytes.NewReader(lines[folder]), First: folder == "priority"})
		if err != nil {
			if folder == "todo" && len(batches["priority"]) > 0 {
				return Userf("the tasks of %s were added, those of %s were not: %v", filepath.Join(dir, "priority"), name, err)
			}
			return err
		}
		for _, t := range batches[folder] {
			done[t.Path] = true
		}
		if err := f.writeImported(done); err != nil {
			return Userf("the tasks of %s were added, but %s could not be written (%v): importing %s again would add them again", name, filepath.Join(layout.MiscDir, metaqImported), unwrapPath(err), dir)
		}
	}
	return nil
}

// sayMetaqNotes says what of the imported tasks farm does otherwise than
// METAQ.
func (f *Farm) sayMetaqNotes(w io.Writer, tasks []MetaqTask) {
	var launch, logs, noNodes []MetaqTask
	for _, t := range tasks {
		if t.Launch != "" {
			launch = append(launch, t)
		}
		if t.Log != "" {
			logs = append(logs, t)
		}
		if t.Nodes == 0 {
			noNodes = append(noNodes, t)
		}
	}
	if len(launch) > 0 {
		fmt.Fprintf(w, "farm: warning: %d task(s) start their work without a FARM_ variable (%s first): a case runs on its meta-job's first node, and must send its work to the nodes farm gave it: srun -N $FARM_NNODES --nodelist=$FARM_NODELIST …, mpirun --hostfile $FARM_HOSTFILE … (README: Coming from METAQ)\n", len(launch), launch[0].Launch)
	}
	if len(logs) > 0 {
		fmt.Fprintf(w, "farm: note: %d task(s) give #METAQ LOG (%s first): farm does not write it; a case's output goes to its meta-job's output\n", len(logs), logs[0].Rel)
	}
	if len(noNodes) > 0 {
		fmt.Fprintf(w, "farm: note: %d task(s) give no #METAQ NODES (%s first), which METAQ counts as 0 nodes: each runs as a case of one CPU (and its GPUS)\n", len(noNodes), noNodes[0].Rel)
	}
}

// metaqFolder reads the tasks of folder (priority, todo) of the METAQ queue
// dir, in the order METAQ takes them: every file under it, in the order
// of their paths (bytewise: METAQ's 'sort' in the C locale), leaving out
// those whose name, or a folder's on the way, starts with "." (METAQ
// leaves out paths with "/."). A symbolic link to a file is a task, run by
// its link's path (METAQ's README lets tasks be linked in).
func metaqFolder(dir, folder string) ([]MetaqTask, error) {
	var paths []string
	err := filepath.WalkDir(filepath.Join(dir, folder), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != filepath.Join(dir, folder) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			paths = append(paths, p)
		} else if d.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				paths = append(paths, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, Userf("reading %s: %v", filepath.Join(dir, folder), unwrapPath(err))
	}
	slices.Sort(paths)
	tasks := make([]MetaqTask, 0, len(paths))
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		if strings.ContainsAny(p, "\n\r") || strings.Contains(p, tablefmt.NeedsMark) {
			return nil, Userf("%s: a task whose path holds a line break or %s cannot be a line of table.dat; rename it", strconv.Quote(rel), tablefmt.NeedsMark)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, Userf("%s: %v", rel, unwrapPath(err))
		}
		if fi.Mode().Perm()&0o111 == 0 {
			return nil, Userf("%s is not executable: METAQ and farm run a task script itself (with its #! line); chmod +x it, or move it out of %s/", rel, folder)
		}
		t, err := ParseMetaqTask(p, rel)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// readImported reads MISC/metaq.imported: the tasks imported before.
func (f *Farm) readImported() (map[string]bool, error) {
	done := map[string]bool{}
	b, err := os.ReadFile(f.Path(layout.MiscDir, metaqImported))
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, Userf("%s: %v", filepath.Join(layout.MiscDir, metaqImported), unwrapPath(err))
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			done[l] = true
		}
	}
	return done, nil
}

// writeImported writes MISC/metaq.imported (temporary file and rename).
func (f *Farm) writeImported(done map[string]bool) error {
	paths := make([]string, 0, len(done))
	for p := range done {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return atomicfile.Write(f.Path(layout.MiscDir, metaqImported), 0o644, func(w *bufio.Writer) error {
		w.WriteString("# METAQ task scripts 'farm import-metaq' added to this farm; remove a line to import that task again\n")
		for _, p := range paths {
			w.WriteString(p + "\n")
		}
		return nil
	}, "")
}

// countWorking counts the tasks in METAQ's working/ folder
// (working/MACHINE/JOB/task): files whose path has no name starting with
// "."; 0 if there is none, or no such folder.
func countWorking(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case p != dir && strings.HasPrefix(d.Name(), ".") && d.IsDir():
			return filepath.SkipDir
		case !d.IsDir() && !strings.HasPrefix(d.Name(), "."):
			n++
		}
		return nil
	})
	return n
}
