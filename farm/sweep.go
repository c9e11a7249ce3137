package farm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/tablefmt"
)

// InitOptions are farm init's, beyond the directory and the job scripts.
type InitOptions struct {
	Backend string // written to config's BACKEND, if not ""
	// Sweep, if set, makes table.dat its cases (numbered from 1), in
	// place of the example; SweepArgs is the sweep as given, for the
	// comment that heads the table.
	Sweep     *tablefmt.Sweep
	SweepArgs string
}

// SweepName is what a sweep's cases are said to come from.
const SweepName = "the sweep"

// writeSweepTable writes the table.dat of a new farm (in dir, the
// temporary directory Init renames into place) with the cases of
// opt.Sweep, checked as 'farm add' checks the lines it adds, and numbered
// from 1 as 'farm add' numbers the cases of a farm with none.
func writeSweepTable(dir string, opt InitOptions) error {
	added, err := tablefmt.NumberAdded(SweepName, opt.Sweep.Reader(), 1, true)
	if err != nil {
		return sweepLineErr(opt.Sweep, err, "nothing was made")
	}
	head := fmt.Sprintf("# table.dat: one case per line, \"ID command\". Made by farm init --sweep %s:\n# %d cases, in the order of nested loops over the parameters as given, the last varying fastest.\n",
		opt.SweepArgs, added.Cases)
	path := filepath.Join(dir, layout.Table)
	fh, err := os.Create(path)
	if err == nil {
		_, err = fh.WriteString(head)
		if err == nil {
			_, err = fh.Write(added.Lines)
		}
		err = errors.Join(err, fh.Close())
	}
	if err != nil {
		return fmt.Errorf("%s: %w (nothing was made)", path, err)
	}
	return nil
}

// sweepLineErr is the error of a sweep's line that the check of every
// case line refused (err, a *tablefmt.LineError): it names the case by
// its values rather than by a line of a file, and ends with what became of
// the command (nothing was made, added). Another error is returned as it
// is.
func sweepLineErr(s *tablefmt.Sweep, err error, outcome string) error {
	var le *tablefmt.LineError
	if !errors.As(err, &le) {
		return err
	}
	msg := strings.TrimSuffix(le.Msg, "; fix the line")
	if msg != le.Msg {
		msg += "; fix the template or its values"
	}
	return Userf("--sweep: case %d of the sweep (%s): %s (%s)", le.Line, s.Describe(int64(le.Line-1)), msg, outcome)
}
