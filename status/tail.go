package status

import (
	"bytes"
	"io"
	"os"
	"path/filepath"

	"github.com/farm-hpc/farm/layout"
)

// Tail follows the status files of a farm, reading only what was appended
// since the last Refresh, and keeps counts per run. farm query --watch uses
// it so that each refresh costs what the farm wrote meanwhile, not a reread
// of every record.
//
// Within one run every case is claimed once, so the run's counts are exact.
// Farm-wide, a case succeeds at most once (resubmits leave out succeeded
// cases), so the sum of successes over all runs is exact too.
type Tail struct {
	Dir   string
	files map[string]*tailFile
	// ends holds the end times of recent E and I records, for throughput.
	ends []float64
}

// tailFile is one file followed, with its counts.
type tailFile struct {
	follower
	job     string // as its name says
	restart int
	c       Counts // ended attempts: Succeeded, Failed, Interrupted; and Unfit
}

// newFile follows the file of job's incarnation restart.
func (t *Tail) newFile(job string, restart int) *tailFile {
	tf := &tailFile{job: job, restart: restart}
	tf.rp.fn = func(_ *File, a *Attempt) error {
		if a.Attempt > 1 && !a.Rescue {
			tf.c.retried(a.AfterTimeout) // a retry: its failed attempt before it, in this file, was counted (as in Load)
		}
		tf.c.Add(a.State)
		if a.Ended() {
			t.ends = append(t.ends, a.Start+a.Seconds)
		}
		return nil
	}
	return tf
}

// TailCounts are the counts Refresh returns.
type TailCounts struct {
	// Runs counts, per run, the attempts that ended, the cases running
	// (started in a live job and not ended), and those taken and not
	// started (unfit).
	Runs map[int]*Counts
	// Succeeded counts the farm's succeeded cases over all runs.
	Succeeded int64
	// Recent counts the cases that ended at or after the since of Refresh.
	Recent int64
	// First is the earliest end time seen (Unix seconds), 0 if none.
	First float64
}

// NewTail follows the status files in dir.
func NewTail(dir string) *Tail { return &Tail{Dir: dir, files: map[string]*tailFile{}} }

// Refresh reads what was appended to the status files and returns the
// counts. live tells which meta-jobs run now (as Options.Live); since starts the window of
// TailCounts.Recent (Unix seconds).
func (t *Tail) Refresh(live func(job string) bool, since float64) (TailCounts, error) {
	names, err := statusFiles(t.Dir)
	if err != nil {
		return TailCounts{}, err
	}
	for _, name := range names {
		job, restart, ok := layout.ParseStatusFile(filepath.Base(name))
		if !ok {
			continue
		}
		tf := t.files[name]
		if tf == nil {
			tf = t.newFile(job, restart)
			t.files[name] = tf
		}
		if err := tf.read(name); err != nil {
			return TailCounts{}, err
		}
	}
	latest := latestRestarts(names)
	out := TailCounts{Runs: map[int]*Counts{}}
	for _, tf := range t.files {
		run := tf.rp.file.Run
		c := out.Runs[run]
		if c == nil {
			c = &Counts{}
			out.Runs[run] = c
		}
		c.Succeeded += tf.c.Succeeded
		c.Failed += tf.c.Failed
		c.Interrupted += tf.c.Interrupted
		c.TimedOut += tf.c.TimedOut
		c.Unfit += tf.c.Unfit
		// The cases open so far: running or interrupted, as ReadFile
		// decides.
		opt := ReadOptions{Live: live, Superseded: tf.restart < latest[tf.job]}
		tf.rp.settle(opt, func(_ *File, a *Attempt) error {
			if a.Attempt > 1 && !a.Rescue {
				c.retried(a.AfterTimeout) // a retry still open: its failed attempt was counted
			}
			c.Add(a.State)
			return nil
		})
		out.Succeeded += tf.c.Succeeded
	}
	keep := t.ends[:0]
	for _, e := range t.ends {
		if e >= since {
			keep = append(keep, e)
		}
	}
	t.ends = keep
	out.Recent = int64(len(t.ends))
	for _, e := range t.ends {
		if out.First == 0 || e < out.First {
			out.First = e
		}
	}
	return out, nil
}

// Follower follows one status file as Tail follows a farm's: each Read
// replays only the complete lines appended since the last, with
// ReadFile's replay. The warden of a run's rescue watches the meta-jobs
// still running with it, for their Q record (metajob/rescue.go). It is
// not safe for concurrent use.
type Follower struct {
	name string
	fl   follower
}

// NewFollower follows the status file name, from its start.
func NewFollower(name string) *Follower {
	f := &Follower{name: name}
	f.fl.rp.fn = func(*File, *Attempt) error { return nil }
	f.fl.rp.file.Job, f.fl.rp.file.Restart, _ = layout.ParseStatusFile(filepath.Base(name))
	return f
}

// Read reads what was appended to the file since the last Read and
// returns the file as read so far (its header; Quitted once its meta-job
// wrote its Q record), which the next Read updates. A line being written
// is left for later, and damaged lines are skipped, as ReadFile does. An
// error opening or reading the file is returned, with what was read
// before; so is a directory in its place.
func (f *Follower) Read() (*File, error) {
	err := f.fl.read(f.name)
	return &f.fl.rp.file, err
}

// follower reads one status file as it grows: its records are replayed as
// ReadFile replays them, a complete line at a time as it is appended.
type follower struct {
	off int64 // where the next line starts
	rp  replay
}

// read consumes the complete lines appended to the file name.
func (fl *follower) read(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return dirError(name)
	}
	if st.Size() <= fl.off {
		return nil
	}
	chunk := make([]byte, min(st.Size()-fl.off, maxChunk))
	for fl.off < st.Size() {
		n, err := f.ReadAt(chunk, fl.off)
		if err != nil && err != io.EOF {
			return err
		}
		buf := chunk[:n]
		last := bytes.LastIndexByte(buf, '\n')
		if last < 0 {
			if n == maxChunk { // a line longer than a chunk can be: skip it
				fl.off += int64(n)
				continue
			}
			return nil // only a line being written
		}
		buf = buf[:last+1]
		fl.off += int64(len(buf))
		fl.lines(buf)
		if n == 0 {
			break
		}
	}
	return nil
}

// maxChunk is the most a follower reads at once.
const maxChunk = 4 << 20

// lines replays the complete lines in buf. Damaged lines are skipped
// (Load reports them).
func (fl *follower) lines(buf []byte) {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		fl.rp.line(buf[:i+1], 0, nil) // fn returns no error
		buf = buf[i+1:]
	}
}
