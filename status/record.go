// Package status writes, reads and aggregates the per-meta-job status files
// STATUSES/status.$JOBID.
//
// Each meta-job appends only to its own file, so no two hosts ever append to
// one file. A file is a header line followed by one line per event:
//
//	# farm-status v1 job=JOBID run=RUN host=HOST [restart=N] [cpus=N] [gpus=N]
//	S ID START HOST [loop=N] [cpus=LIST] [gpus=LIST] [attempt=N why=WHY] [from=NAME] [nodes=LIST] [out=N err=N]
//	                                 case ID started at START (Unix seconds)
//	E ID STATUS START SECONDS HOST [rss=KIB] [cpu=SECONDS]
//	                                 case ID ended with STATUS after SECONDS
//	I ID SIGNAL START SECONDS HOST   case ID was interrupted (job killed or timed out)
//	T ID SIGNAL START SECONDS HOST   case ID ran past its time limit: farm ended it with SIGNAL
//	U ID TIME REASON                 case ID was taken at TIME and not started
//	Q TIME MESSAGE                   the meta-job exited by itself
//	C TIME IDS [from=NAME]           it claimed cases IDS ("3-17,20") at TIME
//
// A case with an S line and no E, I or T line in the same file was cut short
// when its meta-job died, unless that meta-job is still running it.
//
// A meta-job that packs several cases at once into what it was given
// (CreateCap, StartAt, Unfit) says in its header how many CPUs and GPUs it
// has (cpus=N gpus=N), and in each S record where the case runs: loop=N
// its loop, cpus=LIST the CPUs it is bound to, in ascending order
// with runs of consecutive numbers as ranges ("0-3,8"), gpus=LIST the
// devices it was given, names separated by commas ("0,1"). A field that
// would be empty or zero is left out; HOST is then "-" if it is empty.
// A start that runs a case again in the same run because it failed
// (RETRIES) says which attempt of the case in the run it is and why:
// attempt=N why=retry (N from 2; a start without it is the first).
// A meta-job that rescued the cases of a dead one (metajob/rescue.go) says
// so in a C record with from=NAME, NAME the dead job's status file
// ("status.JOBID"), and in the S record of each: from=NAME, and for the
// case that job was running when it died, attempt=N why=rescue.
// A C record says which cases a claim handed the meta-job (written at
// once): with its S and U records, what it held and had not started when
// it died. A C record of a rescue may say, with next=ID:N,..., the attempt
// each case past its first is to be.
// With OUTPUT=job, an S record says where the case's output starts in its
// loop's files of standard output and error (out=N err=N, byte offsets:
// Placement's Framed).
// An E, I or T record may say what the case used (Use), from the rusage
// of its reaped processes: rss=KIB, the peak resident memory of its
// largest process (KiB, as getrusage's ru_maxrss), and cpu=SECONDS, the
// CPU time (user + system) of it and every process it waited for; a field
// not known is left out.
// Readers ignore header keys and S fields they do not know (KEY=VALUE).
// A case that cannot fit the job — it needs more CPUs, GPUs or memory
// than the job has, or more time than it has left — is taken and not
// started: its U record says why (REASON, the rest of the line, as Q's
// MESSAGE), and it is left for the next run. These are optional parts of
// v1: a file without them reads as before.
//
// Writer writes these lines and ParseRecord reads them. One replay
// (ReadFile's) interprets them, for every reader: it replays a file's
// records into attempts and decides, once, what became of each (running,
// interrupted, ended with its STATUS). Load and farm report read status
// files through ReadFile; Tail and Follower replay what is appended;
// Durations and ReadLeftovers replay a file whole.
//
// A batch system may restart a job under the same ID after its node failed
// (Slurm's requeue). Each incarnation of a job writes a file of its own —
// status.$JOBID for the first, status.$JOBID.r$N for restart N, with
// restart=N in the header — so that an old incarnation still running on a
// node cut off from the batch system never appends to the file of the new
// one, and so that the open case of a dead incarnation is known to be
// interrupted even while the job itself runs again.
package status

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/layout"
)

// latestRestarts maps each job ID among the status file names to its newest
// incarnation: only that one can be running.
func latestRestarts(names []string) map[string]int {
	m := map[string]int{}
	for _, n := range names {
		j := n
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			j = n[i+1:]
		}
		if job, r, ok := layout.ParseStatusFile(j); ok && r >= m[job] {
			m[job] = r
		}
	}
	return m
}

// Writer appends records to one meta-job's status file.
//
// An end record is kept until the next record and written with it, in one
// append: a meta-job running short cases makes one write per case, not two.
// Flush writes it now. A write cut short by a full disk, a quota or an I/O
// error is retried from where it stopped, for up to Retry, so that a record
// is never left half-written by a brief outage.
type Writer struct {
	Retry time.Duration // fsretry.Default if 0
	Log   io.Writer     // where retries are reported; os.Stderr if nil

	// SyncStarts has every S and C record reach the file server (fsync)
	// before the write returns: what the rescue's fence relies on, on a
	// network filesystem, whose client may keep appends for a while
	// (metajob/rescue.go).
	SyncStarts bool

	f    *os.File
	path string
	host string
	buf  []byte // records not written yet
}

// CreateCap opens (appending) the status file at path for job jobID of run
// run, incarnation restart (0 for the first; see layout.StatusFile), and writes its
// header if the file is new, with the capacity c of a meta-job that packs
// cases (Capacity{}: none said). Opening the file (a job that starts on a
// filesystem out of inodes) and writing its header are retried like every
// write, and reported on log (os.Stderr if nil), the Writer's Log.
func CreateCap(path, jobID string, restart, run int, host string, c Capacity, log io.Writer) (*Writer, error) {
	jobID, host = oneField(jobID), oneField(host)
	w := &Writer{path: path, host: host, Log: log}
	err := w.retry(func() (err error) {
		w.f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		return err
	})
	if err != nil {
		return nil, err
	}
	st, err := w.f.Stat()
	if err == nil && st.Size() == 0 {
		w.buf = appendHeader(w.buf[:0], jobID, restart, run, host, c)
		if err := w.Flush(); err != nil {
			w.f.Close()
			return nil, err
		}
	}
	return w, nil
}

// oneField returns s as one field of a record, its blanks and line breaks
// made '_': a job ID or host name that held one would not read back.
func oneField(s string) string {
	if !strings.ContainsAny(s, " \t\r\n") {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			b[i] = '_'
		}
	}
	return string(b)
}

// Flush writes the records kept so far.
func (w *Writer) Flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// write appends b whole, retrying transient errors.
func (w *Writer) write(b []byte) error {
	return w.retry(func() error {
		n, err := w.f.Write(b)
		b = b[n:]
		return err
	})
}

// retry runs op until it works, fails for a reason other than a transient
// one, or has failed for Retry; it says so on Log.
func (w *Writer) retry(op func() error) error {
	r := fsretry.Retrier{Limit: w.Retry, Log: w.Log, What: w.path}
	return r.Do(context.Background(), op)
}

// The records as Writer writes them, each appended to b. ParseRecord reads
// them back.

// appendHeader appends a file's header; jobID and host must be one field
// each (see oneField). restart and the capacity's counts are written only
// if above 0.
func appendHeader(b []byte, jobID string, restart, run int, host string, c Capacity) []byte {
	b = fmt.Appendf(b, "# farm-status v1 job=%s run=%d host=%s", jobID, run, host)
	if restart > 0 {
		b = fmt.Appendf(b, " restart=%d", restart)
	}
	if c.CPUs > 0 {
		b = fmt.Appendf(b, " cpus=%d", c.CPUs)
	}
	if c.GPUs > 0 {
		b = fmt.Appendf(b, " gpus=%d", c.GPUs)
	}
	return append(b, '\n')
}

func appendTime(b []byte, t time.Time) []byte {
	return strconv.AppendFloat(b, float64(t.UnixMilli())/1e3, 'f', 3, 64)
}

// appendStart appends an S record.
func appendStart(b []byte, id int64, t time.Time, host string) []byte {
	b = append(b, 'S', ' ')
	b = strconv.AppendInt(b, id, 10)
	b = append(b, ' ')
	b = appendTime(b, t)
	b = append(b, ' ')
	b = append(b, host...)
	return append(b, '\n')
}

// Use is what a case used, from the rusage of its reaped processes: RSS,
// the peak resident memory of the largest (KiB; 0: not known), and CPU,
// the CPU time, user and system, of them all (HasCPU: it is known).
type Use struct {
	RSS    int64
	CPU    time.Duration
	HasCPU bool
}

// appendEnd appends an E, I or T record (kind), with what the case used
// (u's known fields: rss=KIB cpu=SECONDS; HOST is then "-" if empty).
func appendEnd(b []byte, kind byte, id int64, status int, start time.Time, d time.Duration, host string, u Use) []byte {
	b = append(b, kind, ' ')
	b = strconv.AppendInt(b, id, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = appendTime(b, start)
	b = append(b, ' ')
	b = strconv.AppendFloat(b, d.Seconds(), 'f', 3, 64)
	b = append(b, ' ')
	if host == "" && (u.RSS > 0 || u.HasCPU) {
		host = "-" // an empty HOST would make the field after it read as HOST
	}
	b = append(b, host...)
	if u.RSS > 0 {
		b = append(b, " rss="...)
		b = strconv.AppendInt(b, u.RSS, 10)
	}
	if u.HasCPU {
		b = append(b, " cpu="...)
		b = strconv.AppendFloat(b, max(u.CPU, 0).Seconds(), 'f', 3, 64)
	}
	return append(b, '\n')
}

// appendQuit appends a Q record, with why=key if key is set; msg's line
// breaks are written as blanks.
func appendQuit(b []byte, t time.Time, key, msg string) []byte {
	b = append(b, 'Q', ' ')
	b = appendTime(b, t)
	b = append(b, ' ')
	if key != "" {
		b = append(b, "why="...)
		b = append(b, key...)
		b = append(b, ' ')
	}
	b = appendLine(b, msg)
	return append(b, '\n')
}

// appendLine appends s with its line breaks made blanks.
func appendLine(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\n' || c == '\r' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// Claimed records that the meta-job claimed cases ids at t (from, if not
// empty: rescued them from the dead meta-job of that status file, next
// giving the attempt each is to be, when past its first), so that the
// cases it holds and has not started are known if it dies (rescue). It is
// written at once.
func (w *Writer) Claimed(ids []int64, t time.Time, from string, next map[int64]int) error {
	if len(ids) == 0 {
		return nil
	}
	w.buf = append(w.buf, 'C', ' ')
	w.buf = appendTime(w.buf, t)
	w.buf = AppendIDs(append(w.buf, ' '), ids)
	if from != "" {
		w.buf = append(append(w.buf, " from="...), oneField(from)...)
	}
	sep := " next="
	for _, id := range ids {
		if n := next[id]; n > 1 {
			w.buf = append(w.buf, sep...)
			w.buf = strconv.AppendInt(w.buf, id, 10)
			w.buf = append(w.buf, ':')
			w.buf = strconv.AppendInt(w.buf, int64(n), 10)
			sep = ","
		}
	}
	w.buf = append(w.buf, '\n')
	return w.flushSync()
}

// ClaimNoted records, at t, the claim of cases ids whose commit is about to
// be tried as token (casetable.Opts.Note), written at once so that a job
// killed after the commit leaves its record; or, lost, that the commit was
// decided lost (not synced: a rescuer decides a claim with no such record
// from the claim state).
func (w *Writer) ClaimNoted(ids []int64, t time.Time, token string, lost bool) error {
	if len(ids) == 0 {
		return nil
	}
	w.buf = append(w.buf, 'C', ' ')
	w.buf = appendTime(w.buf, t)
	w.buf = AppendIDs(append(w.buf, ' '), ids)
	key := " claim="
	if lost {
		key = " lost="
	}
	w.buf = append(append(append(w.buf, key...), oneField(token)...), '\n')
	if lost {
		return w.Flush()
	}
	return w.flushSync()
}

// flushSync writes the records kept so far and, with SyncStarts, has them
// reach the file server before it returns.
func (w *Writer) flushSync() error {
	if err := w.Flush(); err != nil || !w.SyncStarts {
		return err
	}
	return w.retry(w.f.Sync)
}

// Start records that case id started at t.
func (w *Writer) Start(id int64, t time.Time) error {
	w.buf = appendStart(w.buf, id, t, w.host)
	return w.flushSync()
}

// End records that case id, started at start, ended with status after d.
// The record is written with the next one (or by Flush or Close).
func (w *Writer) End(id int64, status int, start time.Time, d time.Duration) error {
	return w.EndUse(id, status, start, d, Use{})
}

// EndUse is End with what the case used.
func (w *Writer) EndUse(id int64, status int, start time.Time, d time.Duration, u Use) error {
	w.buf = appendEnd(w.buf, 'E', id, status, start, d, w.host, u)
	return nil
}

// Interrupted records that case id was cut short by signal sig.
func (w *Writer) Interrupted(id int64, sig int, start time.Time, d time.Duration) error {
	return w.InterruptedUse(id, sig, start, d, Use{})
}

// InterruptedUse is Interrupted with what the case used.
func (w *Writer) InterruptedUse(id int64, sig int, start time.Time, d time.Duration, u Use) error {
	w.buf = appendEnd(w.buf, 'I', id, sig, start, d, w.host, u)
	return w.Flush()
}

// TimedOut records that case id ran past its time limit and was ended by
// farm, sig the last signal farm sent its process group (SIGTERM, or
// SIGKILL once the grace had passed). Written at once, as Interrupted.
func (w *Writer) TimedOut(id int64, sig int, start time.Time, d time.Duration, u Use) error {
	w.buf = appendEnd(w.buf, 'T', id, sig, start, d, w.host, u)
	return w.Flush()
}

// Quit records that the meta-job exits by itself, for the reason named by
// key (a word without blanks, read back as Record.Why; "" for none), saying
// msg (its line breaks written as blanks; with no key, a msg that began
// "why=" would be read back as one: farm's never does).
func (w *Writer) Quit(key, msg string) error {
	w.buf = appendQuit(w.buf, time.Now(), key, msg)
	return w.Flush()
}

// Close writes what is kept and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}
