package status

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// State is what is known of one case, farm-wide.
type State uint8

// The states of a case, from least to most final.
const (
	NeverRan    State = iota // no record at all
	Running                  // started in a meta-job that still runs
	Interrupted              // started, but its meta-job died or was stopped before it ended
	Failed                   // ended with a non-zero STATUS
	Succeeded                // ended with STATUS 0 (in any run)
)

var stateNames = [...]string{"never ran", "running", "interrupted", "failed", "succeeded"}

func (s State) String() string { return stateNames[s] }

// Case is the farm-wide outcome of one case: its decisive attempt. A success
// in any run wins; then a running attempt; then the failure or interruption
// of the latest run.
type Case struct {
	ID      int64
	State   State
	Status  int     // STATUS for failed/succeeded; the signal for interrupted
	Seconds float64 // duration of the attempt (0 while running)
	Job     string  // meta-job ID
	Host    string
	Run     int
}

// Job describes one status file.
type Job struct {
	ID    string
	Run   int
	Host  string
	Quit  string // the meta-job's own exit message, if it exited by itself
	Ended int64  // cases it ended (E and I records)
	Open  int64  // cases it started and has not ended
}

// Summary holds every case's outcome, compactly: parallel slices indexed by
// case ID (which are dense in practice), with a map for outliers. At 13 bytes
// a case, ten million cases take some 130 MB.
type Summary struct {
	Jobs []Job

	state  []State
	status []int32
	secs   []float32
	job    []uint32 // index into Jobs, +1 (0 = none)
	far    map[int64]Case

	// RunCounts counts attempt outcomes per run (index: run number).
	RunCounts map[int]*Counts

	// Recent counts the cases that ended at or after Options.Since.
	Recent int64
	// First and Last are the earliest start and latest end recorded (Unix seconds).
	First, Last float64

	since float64
}

// Counts tallies cases by state.
type Counts struct {
	Running, Interrupted, Failed, Succeeded int64
}

// Add counts one case in state s.
func (c *Counts) Add(s State) {
	switch s {
	case Running:
		c.Running++
	case Interrupted:
		c.Interrupted++
	case Failed:
		c.Failed++
	case Succeeded:
		c.Succeeded++
	}
}

// Options tune Load.
type Options struct {
	// Live reports whether a meta-job may still be running; its open case is
	// then "running" rather than "interrupted". Nil means none is live.
	Live func(jobID string) bool
	// MaxID is the largest case ID expected (sizes the tables up front).
	MaxID int64
	// Since, if set, is the start of the window Summary.Recent counts.
	Since time.Time
}

const denseLimit = 1 << 31

// Load reads every STATUSES/status.* file in dir.
func Load(dir string, opt Options) (*Summary, error) {
	s := &Summary{RunCounts: map[int]*Counts{}}
	if !opt.Since.IsZero() {
		s.since = float64(opt.Since.UnixMilli()) / 1e3
	}
	if opt.MaxID > 0 && opt.MaxID < denseLimit {
		s.grow(opt.MaxID)
	}
	names, err := filepath.Glob(filepath.Join(dir, "status.*"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.Contains(filepath.Base(name), ".tmp") {
			continue
		}
		if err := s.loadFile(name, opt.Live); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Summary) grow(id int64) {
	n := int(id) + 1
	if n <= len(s.state) {
		return
	}
	if c := 2 * len(s.state); c > n && id >= int64(len(s.state)) && len(s.state) > 0 {
		n = c
	}
	s.state = append(s.state, make([]State, n-len(s.state))...)
	s.status = append(s.status, make([]int32, n-len(s.status))...)
	s.secs = append(s.secs, make([]float32, n-len(s.secs))...)
	s.job = append(s.job, make([]uint32, n-len(s.job))...)
}

type attempt struct {
	id     int64
	state  State
	status int
	start  float64
	secs   float64
}

func (s *Summary) loadFile(name string, live func(string) bool) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	job := Job{ID: strings.TrimPrefix(filepath.Base(name), "status.")}
	s.Jobs = append(s.Jobs, job)
	ji := len(s.Jobs) - 1
	open := map[int64]float64{} // started, not yet ended
	r := bufio.NewReaderSize(f, 256<<10)
	var fields [8][]byte
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull { // skip absurdly long lines
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if perr := s.parseLine(line, fields[:0], &s.Jobs[ji], ji, open); perr != nil {
				return fmt.Errorf("%s:%d: %v", name, lineNo, perr)
			}
		}
		// A line without its newline is being written right now: skip it.
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	j := &s.Jobs[ji]
	isLive := j.Quit == "" && live != nil && live(j.ID)
	for id, start := range open {
		a := attempt{id: id, state: Interrupted, start: start}
		if isLive {
			a.state = Running
			j.Open++
		} else {
			j.Ended++
		}
		s.merge(a, ji)
	}
	return nil
}

func splitFields(line []byte, out [][]byte) [][]byte {
	for {
		line = bytes.TrimLeft(line, " \t\r\n")
		if len(line) == 0 {
			return out
		}
		i := bytes.IndexAny(line, " \t\r\n")
		if i < 0 {
			return append(out, line)
		}
		out = append(out, line[:i])
		line = line[i:]
	}
}

func atoi(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("empty number")
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' || n > math.MaxInt64/10 {
			return 0, fmt.Errorf("bad number %q", b)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

func atof(b []byte) (float64, error) { return strconv.ParseFloat(string(b), 64) }

func (s *Summary) parseLine(line []byte, fields [][]byte, job *Job, ji int, open map[int64]float64) error {
	if line[0] == '#' {
		for _, f := range splitFields(line[1:], fields) {
			k, v, _ := bytes.Cut(f, []byte("="))
			switch string(k) {
			case "run":
				n, _ := atoi(v)
				job.Run = int(n)
			case "host":
				job.Host = string(v)
			case "job":
				job.ID = string(v)
			}
		}
		return nil
	}
	if line[0] == 'Q' {
		_, msg, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(" "))
		_, msg, _ = bytes.Cut(msg, []byte(" ")) // drop the time
		job.Quit = string(msg)
		if job.Quit == "" {
			job.Quit = "exited"
		}
		return nil
	}
	f := splitFields(line, fields)
	if len(f) < 2 {
		return fmt.Errorf("short record")
	}
	id, err := atoi(f[1])
	if err != nil {
		return err
	}
	switch f[0][0] {
	case 'S':
		if len(f) < 3 {
			return fmt.Errorf("short S record")
		}
		start, err := atof(f[2])
		if err != nil {
			return err
		}
		open[id] = start
		if s.First == 0 || start < s.First {
			s.First = start
		}
	case 'E', 'I':
		if len(f) < 5 {
			return fmt.Errorf("short %c record", f[0][0])
		}
		st, err1 := atoi(f[2])
		start, err2 := atof(f[3])
		secs, err3 := atof(f[4])
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("bad %c record", f[0][0])
		}
		delete(open, id)
		job.Ended++
		if end := start + secs; end > s.Last {
			s.Last = end
		}
		if s.since > 0 && start+secs >= s.since {
			s.Recent++
		}
		a := attempt{id: id, status: int(st), start: start, secs: secs}
		switch {
		case f[0][0] == 'I':
			a.state = Interrupted
		case st == 0:
			a.state = Succeeded
		default:
			a.state = Failed
		}
		s.merge(a, ji)
	default:
		return fmt.Errorf("unknown record %q", f[0])
	}
	return nil
}

// wins reports whether attempt a, of run run, replaces the recorded outcome
// (state old, from run oldRun). Runs are ordered in time, and a case is
// claimed at most once per run.
func wins(a attempt, run int, old State, oldRun int) bool {
	switch {
	case old == NeverRan:
		return true
	case a.state == Succeeded:
		return old != Succeeded || run >= oldRun
	case old == Succeeded:
		return false
	case a.state == Running:
		return true
	case old == Running:
		return false
	default:
		return run >= oldRun
	}
}

func (s *Summary) merge(a attempt, ji int) {
	run := s.Jobs[ji].Run
	c := s.RunCounts[run]
	if c == nil {
		c = &Counts{}
		s.RunCounts[run] = c
	}
	c.Add(a.state)
	if a.id < 0 || a.id >= denseLimit {
		if s.far == nil {
			s.far = map[int64]Case{}
		}
		old := s.far[a.id]
		if wins(a, run, old.State, old.Run) {
			s.far[a.id] = s.caseOf(a, ji)
		}
		return
	}
	s.grow(a.id)
	i := a.id
	oldRun := 0
	if ji := s.job[i]; ji > 0 {
		oldRun = s.Jobs[ji-1].Run
	}
	if wins(a, run, s.state[i], oldRun) {
		s.state[i] = a.state
		s.status[i] = int32(a.status)
		s.secs[i] = float32(a.secs)
		s.job[i] = uint32(ji + 1)
	}
}

func (s *Summary) caseOf(a attempt, ji int) Case {
	j := s.Jobs[ji]
	return Case{ID: a.id, State: a.state, Status: a.status, Seconds: a.secs, Job: j.ID, Host: j.Host, Run: j.Run}
}

// Get returns the outcome of case id (State NeverRan if it has no record).
func (s *Summary) Get(id int64) Case {
	if id >= 0 && id < int64(len(s.state)) {
		return s.at(id)
	}
	if c, ok := s.far[id]; ok {
		return c
	}
	return Case{ID: id}
}

func (s *Summary) at(i int64) Case {
	c := Case{ID: i, State: s.state[i], Status: int(s.status[i]), Seconds: math.Round(float64(s.secs[i])*1000) / 1000}
	if ji := s.job[i]; ji > 0 {
		j := s.Jobs[ji-1]
		c.Job, c.Host, c.Run = j.ID, j.Host, j.Run
	}
	return c
}

// Each calls fn for every case that has a record, in ID order.
func (s *Summary) Each(fn func(Case) error) error {
	var farIDs []int64
	for id := range s.far {
		farIDs = append(farIDs, id)
	}
	sort.Slice(farIDs, func(i, j int) bool { return farIDs[i] < farIDs[j] })
	k := 0
	for ; k < len(farIDs) && farIDs[k] < 0; k++ {
		if err := fn(s.far[farIDs[k]]); err != nil {
			return err
		}
	}
	for i := range s.state {
		if s.state[i] == NeverRan {
			continue
		}
		if err := fn(s.at(int64(i))); err != nil {
			return err
		}
	}
	for ; k < len(farIDs); k++ {
		if err := fn(s.far[farIDs[k]]); err != nil {
			return err
		}
	}
	return nil
}

// Totals counts the recorded cases by state.
func (s *Summary) Totals() Counts {
	var c Counts
	for _, st := range s.state {
		c.Add(st)
	}
	for _, v := range s.far {
		c.Add(v.State)
	}
	return c
}
