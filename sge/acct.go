package sge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// record is one line of the accounting file (sge_accounting(5)): a job,
// or one task of an array, that ended.
type record struct {
	Num    string
	Task   int // 0 for a plain job
	Submit time.Time
	Start  time.Time
	End    time.Time
	Failed int // 0: no failure; 37: killed at a hard limit (h_rt)
	Exit   int
	Slots  int // the slots it was granted (1 outside a parallel environment)
}

// The accounting file's fields that farm reads (0-based; sge_accounting(5)).
const (
	fJobNumber  = 5
	fSubmission = 8
	fStart      = 9
	fEnd        = 10
	fFailed     = 11
	fExit       = 12
	fSlots      = 34
	fTask       = 35
	nFields     = 36
)

// failedLimit is the failed code of a job that Grid Engine killed at a
// hard limit: h_rt (also h_cpu and h_vmem, which it reports alike).
const failedLimit = 37

// state is the final state a record tells: COMPLETED for exit 0 with no
// failure, TIMEOUT when killed at h_rt, CANCELLED for one farm deleted
// (marked), FAILED otherwise.
func (r record) state(marked bool) backend.JobState {
	switch {
	case r.Failed == 0 && r.Exit == 0:
		return backend.Completed
	case r.Failed == failedLimit:
		return backend.Timeout
	case marked:
		return backend.Cancelled
	}
	return backend.Failed
}

// parseRecord reads one accounting line; ok is false for comments and
// lines it cannot read.
func parseRecord(line string) (record, bool) {
	if strings.HasPrefix(line, "#") {
		return record{}, false
	}
	f := strings.Split(line, ":")
	if len(f) < nFields || !jobIDRe.MatchString(f[fJobNumber]) {
		return record{}, false
	}
	r := record{Num: f[fJobNumber], Submit: epoch(f[fSubmission]), Start: epoch(f[fStart]), End: epoch(f[fEnd])}
	var err1, err2 error
	r.Failed, err1 = strconv.Atoi(f[fFailed])
	r.Exit, err2 = strconv.Atoi(f[fExit])
	r.Task, _ = strconv.Atoi(f[fTask])
	r.Slots, _ = strconv.Atoi(f[fSlots])
	return r, err1 == nil && err2 == nil
}

// epoch reads a time of the accounting file: Unix seconds (Son of Grid
// Engine), or milliseconds (later Grid Engines).
func epoch(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	if n > 1e11 {
		return time.UnixMilli(n)
	}
	return time.Unix(n, 0)
}

// accountingChunk is how much of the accounting file is read at a time,
// from its end.
const accountingChunk = 1 << 20

// orderSlack is how far out of end-time order records may be written.
const orderSlack = time.Hour

// readAccounting returns the records of the jobs numbered nums, read from
// the end of the accounting file at path, as qacct -j would give them (the
// latest record of a job or task that was run more than once).
//
// It reads backwards, and stops early: job numbers grow with submission
// time, and records are written as jobs end, so once it has read a record
// of a job numbered below every wanted one, submitted at S, any record
// that ended well before S (orderSlack) comes before every wanted job's.
// (Job numbers wrap at max_jobid; a farm that spans the wrap may see its
// older jobs GONE.) Cost: the records written since the wanted jobs were
// submitted, not the whole file.
func readAccounting(path string, nums map[string]bool) (map[string][]record, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	lowest := int64(-1)
	for n := range nums {
		v, _ := strconv.ParseInt(n, 10, 64)
		if lowest < 0 || v < lowest {
			lowest = v
		}
	}
	out := map[string][]record{}
	seen := map[string]bool{} // "num.task" already taken (the latest)
	var bound time.Time       // S: the latest submission of a job numbered below lowest
	var carry []byte
	for pos := st.Size(); pos > 0; {
		n := min(int64(accountingChunk), pos)
		pos -= n
		buf := make([]byte, n, n+int64(len(carry)))
		if _, err := fh.ReadAt(buf, pos); err != nil && err != io.EOF {
			return nil, err
		}
		buf = append(buf, carry...)
		lines := bytes.Split(buf, []byte{'\n'})
		carry = nil
		if pos > 0 {
			carry = lines[0] // may be a part of a line
			lines = lines[1:]
		}
		for i := len(lines) - 1; i >= 0; i-- {
			r, ok := parseRecord(string(lines[i]))
			if !ok {
				continue
			}
			if !bound.IsZero() && r.End.Before(bound.Add(-orderSlack)) {
				return out, nil
			}
			if v, _ := strconv.ParseInt(r.Num, 10, 64); v < lowest && r.Submit.After(bound) {
				bound = r.Submit
			}
			key := r.Num + "." + strconv.Itoa(r.Task)
			if nums[r.Num] && !seen[key] {
				seen[key] = true
				out[r.Num] = append(out[r.Num], r)
			}
		}
	}
	return out, nil
}

var _ backend.Accounting = (*Backend)(nil)

// Allocated implements backend.Accounting from the accounting file (one
// backward read, as Jobs reads it for ended jobs): each ended job's, or
// array task's, slots × its wall time (end - start) in its latest record,
// under its own ID ("123", "123.4"; an array's ID stands for its tasks).
// A job still queued or running has no record yet and is left out. No
// accounting file (Grid Engine's reporting_params accounting=false) is
// backend.ErrNoAccounting.
func (b *Backend) Allocated(_ context.Context, ids []string) (map[string]float64, error) {
	asked := map[string]bool{}
	nums := map[string]bool{}
	for _, id := range ids {
		if validID(id) {
			asked[id] = true
			num, _, _ := strings.Cut(id, ".")
			nums[num] = true
		}
	}
	out := map[string]float64{}
	if len(nums) == 0 {
		return out, nil
	}
	path := b.accountingPath()
	recs, err := readAccounting(path, nums)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("%w: no accounting file %s", backend.ErrNoAccounting, path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading Grid Engine's accounting file: %w", err)
	}
	for num, rs := range recs {
		for _, r := range rs {
			id := num
			if r.Task > 0 {
				id = num + "." + strconv.Itoa(r.Task)
			}
			if !asked[num] && !asked[id] {
				continue
			}
			secs := 0.0
			if !r.Start.IsZero() && r.End.After(r.Start) {
				secs = r.End.Sub(r.Start).Seconds()
			}
			out[id] = float64(max(r.Slots, 1)) * secs
		}
	}
	return out, nil
}
