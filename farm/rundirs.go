package farm

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/vfs"
)

// NewestStatusFile is the name of the status file, in statusDir, of job
// id's newest incarnation and when it was last written; "" and the zero
// time if it has none (it never started).
func NewestStatusFile(statusDir, id string) (string, time.Time) {
	name, last := "", time.Time{}
	for rs := 0; rs < 1000; rs++ {
		n := layout.StatusFile(id, rs)
		st, err := os.Lstat(filepath.Join(statusDir, n))
		if err != nil {
			break
		}
		name, last = n, st.ModTime()
	}
	return name, last
}

// NewestStatusFiles is, for each job with a status file among names (a
// listing of the status directory), the name of its newest incarnation's:
// what NewestStatusFile finds for each, from one listing rather than two
// lookups a job.
func NewestStatusFiles(names []string) map[string]string {
	newest, rs := map[string]string{}, map[string]int{}
	for _, n := range names {
		id, r, ok := layout.ParseStatusFile(n)
		if !ok {
			continue
		}
		if cur, seen := rs[id]; !seen || r > cur {
			newest[id], rs[id] = n, r
		}
	}
	return newest
}

// ReadWarden reads a run's warden (metajob's warden.go) from its rescue
// directory dir, whose names are names (nil: listed now): its mark's K (0:
// none), its job, and whether it is gone (left, or its job ended).
func ReadWarden(dir string, names []string) (k int, job string, gone bool, err error) {
	if names == nil {
		if names, err = vfs.ReadDirNames(vfs.OS{}, dir); err != nil {
			return 0, "", false, err
		}
	}
	k, gone = layout.Warden(names)
	if k > 0 {
		b, _ := os.ReadFile(filepath.Join(dir, layout.WardenMark(k, "")))
		job = strings.TrimSpace(string(b))
	}
	return k, job, gone, nil
}
