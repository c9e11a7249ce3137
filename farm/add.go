package farm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/tablefmt"
)

// AddOptions are farm add's.
type AddOptions struct {
	Name  string    // where the cases come from, for messages ("-" is stdin)
	Input io.Reader // the cases, one command per line
	First bool      // ahead of the run's unclaimed cases
	// Sweep, if set, is the parameter sweep Input's lines come from
	// ('farm add --sweep'): a line refused is named by its values.
	Sweep *tablefmt.Sweep
}

// addLock is the file that makes one 'farm add' at a time: its
// O_EXCL create is the lock, removed when done.
const addLock = "add.lock"

// Add adds the cases of opt.Input to the farm (issue 25): they get the
// next IDs and are appended to table.dat (written whole to a temporary
// file and renamed: never half-written), and, when the farm has a run, are
// queued to it, so that its meta-jobs claim them in this run: after its
// other cases, or before the unclaimed ones with First. A line is checked
// as every line that enters a farm is (tablefmt.NumberAdded); one refused
// is refused with its file and line, and nothing is added.
//
// The order makes a case claimed at most once a run: the new table.dat is
// written first, under a temporary name; then the cases are queued to the
// run that is current at that moment, by a compare-and-swap on the claim
// state; only then is table.dat replaced. A run started before the queueing
// read a table.dat without the cases (its table was read before its own
// commit, which came before ours), so queueing them to it never gives it a
// case twice; a run started after it is a newer run, whose queue is empty.
func (f *Farm) Add(ctx context.Context, opt AddOptions) error {
	if err := f.EnsureDirs(); err != nil {
		return f.writeErr(err)
	}
	unlock, err := f.lockFile(addLock, "another 'farm add' is adding cases to this farm")
	if err != nil {
		return err
	}
	defer unlock()
	tablePath := f.Path(layout.Table)
	before, err := os.Stat(tablePath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return tableErr(err)
	}
	state, err := f.readState(ctx)
	if err != nil {
		return err
	}
	// table.dat as submit reads it (META's rule, or TABLE_IDS=1), or as
	// numbered once the farm has run. A table of no case gets numbered
	// lines: added as given, "1 a" and "2 b" would read as IDs.
	info, err := tablefmt.ValidateAs(tablePath, f.tableNumbering(state.Run > 0))
	if errors.Is(err, tablefmt.ErrEmptyTable) || errors.Is(err, os.ErrNotExist) {
		info, err = tablefmt.Info{Numbered: true}, nil
	}
	if err != nil {
		return tableErr(err)
	}
	// After table.dat's last ID, and the state's: an add that queued its
	// cases and died before it rewrote table.dat used IDs up to that.
	added, err := tablefmt.NumberAdded(opt.Name, opt.Input, max(info.MaxID, state.MaxID)+1, info.Numbered)
	if errors.Is(err, tablefmt.ErrEmptyTable) {
		return Userf("%s has no case to add (one command per line; blank lines and lines starting with # are not cases)", filepath.Base(opt.Name))
	}
	if err != nil && opt.Sweep != nil {
		return sweepLineErr(opt.Sweep, err, "nothing was added")
	}
	if err != nil {
		return tableErr(err)
	}
	tmp, src, err := f.writeAddedTable(tablePath, before, added.Lines)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // gone once renamed
	own := state.Table
	keepSource := state.Run > 0 && f.sourceMatches(own)
	queued, err := f.queueAdded(ctx, state, added, opt.First)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(tablePath); !sameFile(before, fi, err) {
		return f.addChanged(queued)
	}
	if err := os.Rename(tmp, tablePath); err != nil {
		if queued.run > 0 {
			return Userf("replacing %s: %v: the cases were queued to run %d and will run, but %s does not list them; add their lines to it by hand (they are in %s) so that 'farm Status' and 'farm resubmit' know them",
				layout.Table, unwrapPath(err), queued.run, layout.Table, queued.table)
		}
		return f.writeErr(fmt.Errorf("replacing %s: %w", layout.Table, err))
	}
	if keepSource {
		f.addSource(own, src)
	}
	f.sayAdded(opt, added, queued)
	return nil
}

// lockFile takes the lock of one command at a time, the file name in
// MiscDir (O_EXCL), or says who holds it (busy says what holds it); the
// function returned gives it back.
func (f *Farm) lockFile(name, busy string) (func(), error) {
	path := f.Path(layout.MiscDir, name)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		b, _ := os.ReadFile(path)
		return nil, Userf("%s (%s: %s); if it is no longer running, remove that file and run this again",
			busy, filepath.Join(layout.MiscDir, name), strings.TrimSpace(string(b)))
	}
	if err != nil {
		return nil, f.writeErr(err)
	}
	host, _ := os.Hostname()
	fmt.Fprintf(fh, "host %s pid %d since %s\n", host, os.Getpid(), time.Now().Format(time.RFC3339))
	fh.Close()
	return func() { os.Remove(path) }, nil
}

// sameFile reports whether fi (with its stat error) is the file before
// was, unchanged in size, identity and modification time; a file that did
// not exist must still not.
func sameFile(before, fi os.FileInfo, err error) bool {
	if before == nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return err == nil && os.SameFile(before, fi) && fi.Size() == before.Size() && fi.ModTime().Equal(before.ModTime())
}

// writeAddedTable writes table.dat as it was (before; nil if it did not
// exist) with lines after it, to a temporary file beside it, and returns
// that file's path and the tablefmt.Source of what it holds (identity and
// times filled in once renamed).
func (f *Farm) writeAddedTable(tablePath string, before os.FileInfo, lines []byte) (string, tablefmt.Source, error) {
	perm := os.FileMode(0o644)
	var old *os.File
	if before != nil {
		perm = before.Mode().Perm()
		var err error
		if old, err = os.Open(tablePath); err != nil {
			return "", tablefmt.Source{}, tableErr(err)
		}
		defer old.Close()
	}
	tmp := fmt.Sprintf("%s.add.%d.%x", tablePath, os.Getpid(), rand.Uint32())
	h := sha256.New()
	var size int64
	err := atomicfile.Write(tmp, perm, func(w *bufio.Writer) error {
		out := io.MultiWriter(w, h)
		var last byte = '\n'
		if old != nil {
			n, err := io.Copy(&lastByte{w: out, last: &last}, old)
			size += n
			if err != nil {
				return err
			}
		}
		if last != '\n' { // a last line without its newline
			out.Write([]byte{'\n'})
			size++
		}
		n, err := out.Write(lines)
		size += int64(n)
		return err
	}, "")
	if err != nil {
		os.Remove(tmp)
		return "", tablefmt.Source{}, f.writeErr(err)
	}
	return tmp, tablefmt.Source{Size: size, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// lastByte is a writer that remembers the last byte written through it.
type lastByte struct {
	w    io.Writer
	last *byte
}

func (l *lastByte) Write(b []byte) (int, error) {
	if len(b) > 0 {
		*l.last = b[len(b)-1]
	}
	return l.w.Write(b)
}

// queuedTo is what queueAdded did: the run the cases were queued to (0:
// none) and why not, if not.
type queuedTo struct {
	run   int
	first bool
	table string // the run's table of the added cases
	why   string // why they were not queued, for the user
}

// queueAdded queues the added cases to the farm's current run, if it has
// one that claims: it writes them as a table of the run's own (an
// immutable file, as every run table) and enqueues it with a
// compare-and-swap on the claim state.
func (f *Farm) queueAdded(ctx context.Context, state casetable.State, added tablefmt.Added, first bool) (queuedTo, error) {
	switch {
	case state.Run == 0:
		return queuedTo{why: "the farm has not been submitted yet"}, nil
	case state.Simple:
		return queuedTo{why: fmt.Sprintf("run %d is in SIMPLE mode (one case per meta-job)", state.Run)}, nil
	}
	store := f.Store()
	store.Job = "farm-add"
	store.Log = f.Out
	defer store.Close()
	tag := fmt.Sprintf("%d.%x", os.Getpid(), rand.Uint32())
	q, err := store.Enqueue(ctx, state.Run, tag, added.Lines, added.Cases, added.Last, first)
	if err != nil {
		return queuedTo{}, f.writeErr(stateErr(err))
	}
	return queuedTo{first: first, table: q.Table, run: q.Run, why: q.Why}, nil
}

// addChanged is the error of an add whose table.dat changed while it ran
// (an editor, another command): nothing is written, but the cases may
// already be queued to the run.
func (f *Farm) addChanged(q queuedTo) error {
	if q.run > 0 {
		return Userf("%s changed while this command ran: it was not rewritten, but the cases were queued to run %d and will run; add their lines to %s by hand (they are in %s) so that 'farm Status' and 'farm resubmit' know them",
			layout.Table, q.run, layout.Table, q.table)
	}
	return Userf("%s changed while this command ran: nothing was added; run it again", layout.Table)
}

// sourceMatches reports whether the source record of the run table
// runTable says it was made from table.dat as it is now: then the added
// lines are the only change, and the record is moved on with them
// (addSource), so that farm Status does not warn of a changed table.dat.
func (f *Farm) sourceMatches(runTable string) bool {
	if runTable == "" {
		return false
	}
	old, err := tablefmt.ReadSource(f.Path(runTable))
	if err != nil {
		return false
	}
	changed, err := old.Changed(f.Path(layout.Table))
	return err == nil && !changed
}

// addSource records that the run table runTable was made from table.dat
// as it is now, which holds what src says.
func (f *Farm) addSource(runTable string, src tablefmt.Source) {
	fi, err := os.Stat(f.Path(layout.Table))
	if err != nil {
		return
	}
	src.SetStat(fi)
	tablefmt.WriteSource(f.Path(runTable), src)
}

// sayAdded tells the user what was added and when it runs, and logs it.
func (f *Farm) sayAdded(opt AddOptions, a tablefmt.Added, q queuedTo) {
	what := fmt.Sprintf("%d case(s)", a.Cases)
	if a.First > 0 {
		what = fmt.Sprintf("%d case(s), IDs %d-%d,", a.Cases, a.First, a.Last)
	}
	fmt.Fprintf(f.Out, "Added %s from %s to %s.\n", what, opt.Name, layout.Table)
	switch {
	case q.run == 0:
		fmt.Fprintf(f.Out, "They are not queued to a run (%s): 'farm submit N' or 'farm resubmit N' runs them.\n", q.why)
		f.Log("add: %s from %s, not queued (%s)", what, opt.Name, q.why)
		return
	case q.first:
		fmt.Fprintf(f.Out, "Run %d's meta-jobs claim them next, before its other unclaimed cases (within about 5 seconds).\n", q.run)
	default:
		fmt.Fprintf(f.Out, "Run %d's meta-jobs claim them after its other cases.\n", q.run)
	}
	fmt.Fprintf(f.Out, "A meta-job that has already exited does not come back: set WAIT_FOR_CASES in config to keep idle ones waiting, or run 'farm resubmit N' once the run is over.\n")
	f.Log("add: %s from %s, queued to run %d%s", what, opt.Name, q.run, map[bool]string{true: " first", false: ""}[q.first])
}
