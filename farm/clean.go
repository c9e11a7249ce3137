package farm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/farm-hpc/farm/layout"
)

// keptFiles lists the files farm clean keeps: the user's scripts, config and table.
var keptFiles = []string{layout.JobScript, layout.SingleCase, layout.ResubmitScript, layout.FinalScript, layout.Config, layout.Table}

// CleanMode says whether Clean deletes, or only lists what it would.
type CleanMode int

// Clean modes.
const (
	CleanList   CleanMode = iota // list what would be deleted (farm clean)
	CleanDelete                  // delete it (farm clean --yes)
)

// Clean deletes everything in the farm directory but the keptFiles files —
// results, status files, outputs, internal state — after listing it; without
// CleanDelete it only lists. It refuses while jobs of the farm are pending or
// running.
func (f *Farm) Clean(ctx context.Context, mode CleanMode) error {
	yes := mode == CleanDelete
	active, _, err := f.activeJobs(ctx)
	if err != nil {
		return err
	}
	if len(active) > 0 {
		return Userf("%d job(s) of the farm are pending or running: 'farm kill' or 'farm wait' before 'farm clean'", len(active))
	}
	entries, err := os.ReadDir(f.Dir)
	if err != nil {
		return err
	}
	var doomed []string
	for _, e := range entries {
		if !slices.Contains(keptFiles, e.Name()) {
			doomed = append(doomed, e.Name())
		}
	}
	sort.Strings(doomed)
	if len(doomed) == 0 {
		fmt.Fprintln(f.Out, "Nothing to delete: the farm holds only", fmt.Sprint(keptFiles))
		return nil
	}
	verb := "Would delete"
	if yes {
		verb = "Deleting"
	}
	fmt.Fprintf(f.Out, "%s %d entries of %s (keeping %s, %s, %s, %s, %s, %s):\n", verb, len(doomed), f.Dir,
		keptFiles[0], keptFiles[1], keptFiles[2], keptFiles[3], keptFiles[4], keptFiles[5])
	runDirs, runFiles := 0, 0
	for _, name := range doomed {
		fi, err := os.Lstat(f.Path(name))
		switch {
		case err == nil && fi.IsDir() && isRunDir(name):
			// A million case directories make one line, not a million.
			runDirs++
			runFiles += countFiles(f.Path(name))
		case err == nil && fi.IsDir():
			fmt.Fprintf(f.Out, "  %s/ (%d files)\n", name, countFiles(f.Path(name)))
		default:
			fmt.Fprintf(f.Out, "  %s\n", name)
		}
	}
	if runDirs > 0 {
		fmt.Fprintf(f.Out, "  RUN*/ (%d case directories, %d files)\n", runDirs, runFiles)
	}
	if !yes {
		fmt.Fprintln(f.Out, "Nothing was deleted: run 'farm clean --yes' to delete these.")
		return nil
	}
	for _, name := range doomed {
		if err := os.RemoveAll(f.Path(name)); err != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
	}
	f.Log("clean: deleted %d entries", len(doomed))
	fmt.Fprintf(f.Out, "Deleted %d entries.\n", len(doomed))
	return nil
}

func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// isRunDir reports whether name is a case directory RUN<ID>.
func isRunDir(name string) bool {
	if len(name) <= 3 || name[:3] != "RUN" {
		return false
	}
	for _, c := range name[3:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
