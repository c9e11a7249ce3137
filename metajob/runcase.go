package metajob

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/tablefmt"
)

// RunCaseBy is METAJOB_ID for a case that 'farm run-case' runs.
const RunCaseBy = "run-case"

// RunCase runs case id of the farm's table.dat in the foreground, as a
// meta-job would run it (its RUN directory made if the config says so,
// single_case.sh sourced by the same bash worker, with ID, COMM,
// METAJOB_ID=run-case, N_cases, FARM_DIR, FARM_LOOP=1, and table.dat and
// its line as $1 and $2),
// its output going to out. Nothing is claimed and nothing is recorded: it
// is for trying a case by hand. It returns the case's STATUS, and the
// case found.
func RunCase(f *farm.Farm, id int64, out *os.File) (int, tablefmt.Case, error) {
	table := f.Path(layout.Table)
	c, err := tablefmt.FindCase(table, id, f.TableNumbering(context.Background()))
	if err != nil {
		return 0, c, err
	}
	lines, err := tablefmt.CountLines(table)
	if err != nil {
		return 0, c, err
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return 0, c, err
	}
	if f.Config.RunDirs {
		if err := os.Mkdir(f.Path("RUN"+strconv.FormatInt(c.ID, 10)), 0o755); err != nil && !os.IsExist(err) {
			return 0, c, err
		}
	}
	env := append(caseEnv(os.Environ(), RunCaseBy), "FARM_DIR="+f.Dir, "FARM_LOOP=1")
	r, err := newCaseRunner(f.Dir, bash, "", env, out, out)
	if err != nil {
		return 0, c, fmt.Errorf("%s: %w", layout.SingleCase, err)
	}
	defer r.close()
	code, _, err := r.run(caseRequest{ID: strconv.FormatInt(c.ID, 10), Comm: c.Command, Table: layout.Table, Line: c.Line, TableLines: lines})
	return code, c, err
}
