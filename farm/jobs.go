package farm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/casetable"
)

// JobRecord is one submitted job of the farm, as kept in MISC/jobs.
type JobRecord struct {
	Run     int
	Backend string
	Kind    string // "meta", "simple", "auto" or "final"
	ID      string
}

// Job kinds.
const (
	KindMeta   = "meta"
	KindSimple = "simple"
	KindAuto   = "auto"
	KindFinal  = "final"
)

func (f *Farm) jobsPath() string { return f.Path(MiscDir, "jobs") }

// Jobs returns every job ever submitted for the farm, oldest first.
func (f *Farm) Jobs() ([]JobRecord, error) {
	fh, err := os.Open(f.jobsPath())
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []JobRecord
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		fl := strings.Fields(sc.Text())
		if len(fl) != 4 {
			return nil, fmt.Errorf("%s:%d: damaged job record %q", f.jobsPath(), n, sc.Text())
		}
		run, err := strconv.Atoi(fl[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: damaged job record %q", f.jobsPath(), n, sc.Text())
		}
		out = append(out, JobRecord{Run: run, Backend: fl[1], Kind: fl[2], ID: fl[3]})
	}
	return out, sc.Err()
}

// recordJobs adds jobs to MISC/jobs. The file is rewritten whole (temp file
// + rename) under the farm lock, never appended to from several hosts.
func (f *Farm) recordJobs(ctx context.Context, recs []JobRecord) error {
	if len(recs) == 0 {
		return nil
	}
	st, err := f.Store()
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Lock.Lock(ctx); err != nil {
		return err
	}
	defer st.Lock.Unlock()
	old, err := f.Jobs()
	if err != nil {
		return err
	}
	return casetable.WriteAtomic(f.jobsPath(), 0o644, func(w *bufio.Writer) error {
		for _, r := range append(old, recs...) {
			fmt.Fprintf(w, "%d %s %s %s\n", r.Run, r.Backend, r.Kind, r.ID)
		}
		return nil
	}, "")
}
