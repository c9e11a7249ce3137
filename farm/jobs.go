package farm

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/proc"
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
	kindMeta   = "meta"
	kindSimple = "simple"
	kindAuto   = "auto"
	kindFinal  = "final"
)

// Job records live in MISC/jobs/, one file per submission (written whole to
// a temporary name and renamed), so that submissions from several hosts
// never rewrite one file.
func (f *Farm) jobsPath() string { return f.Path(layout.MiscDir, layout.JobRecords) }

// Jobs returns every job ever submitted for the farm, oldest first.
func (f *Farm) Jobs() ([]JobRecord, error) {
	var out []JobRecord
	var files []string
	names, err := os.ReadDir(f.jobsPath())
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, Userf("%s is a file, not the directory of the farm's job records: move it out of %s", f.jobsPath(), f.Path(layout.MiscDir))
	}
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, n := range names { // sorted: names start with the time
		if strings.HasPrefix(n.Name(), ".") {
			continue
		}
		if n.IsDir() {
			return nil, Userf("%s is a directory, not a job record: move it out of %s", filepath.Join(f.jobsPath(), n.Name()), f.jobsPath())
		}
		files = append(files, filepath.Join(f.jobsPath(), n.Name()))
	}
	for _, p := range files {
		recs, err := readJobRecords(p)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Run < out[j].Run })
	return out, nil
}

func readJobRecords(path string) ([]JobRecord, error) {
	fh, err := os.Open(path)
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
		run, err := 0, error(nil)
		if len(fl) == 4 {
			run, err = strconv.Atoi(fl[0])
		}
		if len(fl) != 4 || err != nil || run < 1 {
			return nil, Userf("%s:%d: damaged job record %.60q: restore the line as 'RUN BACKEND KIND JOBID' (e.g. '1 local meta 7'), or remove it if that job has ended", path, n, sc.Text())
		}
		out = append(out, JobRecord{Run: run, Backend: fl[1], Kind: fl[2], ID: fl[3]})
	}
	return out, sc.Err()
}

// recordJobs adds a file of records to MISC/jobs/. No lock: the file's name
// is unique (the time and a random part), and it appears whole.
func (f *Farm) recordJobs(ctx context.Context, recs []JobRecord) error {
	if len(recs) == 0 {
		return nil
	}
	dir := f.jobsPath()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	name := fmt.Sprintf("%020d.%x", time.Now().UnixNano(), rnd)
	return atomicfile.Write(filepath.Join(dir, name), proc.NewMode(0o666), func(w *bufio.Writer) error {
		for _, r := range recs {
			fmt.Fprintf(w, "%d %s %s %s\n", r.Run, r.Backend, r.Kind, r.ID)
		}
		return nil
	}, "")
}
