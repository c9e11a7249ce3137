package status

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
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
	Seconds float64 // duration of the attempt (so far, while running)
	Job     string  // meta-job ID
	Host    string
	Run     int

	job int // index into Summary.Jobs while loading
}

// Job describes one status file.
type Job struct {
	ID   string
	Run  int
	Host string
	// Restart is the incarnation: 0, or N for the Nth restart of the job
	// under the same ID (Slurm's requeue after a node failure).
	Restart int
	Quit    string // the meta-job's own exit message, if it exited by itself
	Ended   int64  // cases it ended (E and I records)
	Open    int64  // cases it started and has not ended
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

	// Warnings name the status lines that could not be parsed and were
	// skipped ("FILE:LINE: why; line skipped").
	Warnings []string

	// RunCounts counts attempt outcomes per run (index: run number).
	RunCounts map[int]*Counts

	// Recent counts the cases that ended at or after Options.Since.
	Recent int64
	// First and Last are the earliest start and latest end recorded (Unix seconds).
	First, Last float64

	since  float64
	jobRun []int // run of each job, known before its file is fully read
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
	//
	// It must be true only for a job that runs now, not one that waits to
	// (re)start: a pending job runs no case. Of a job restarted under the
	// same ID, only the newest incarnation's file can hold running cases.
	Live func(jobID string) bool
	// LiveAsOf is when Live's answers were taken. A case started after it
	// counts as running whatever Live says of its job: the job may have
	// started since (a pending job runs no case, but one that starts
	// between the batch system's answer and the reading of its status file
	// does). Zero: no such rule.
	LiveAsOf time.Time
	// MaxID is the largest case ID expected (sizes the tables up front).
	MaxID int64
	// Since, if set, is the start of the window Summary.Recent counts.
	Since time.Time
	// Now is the time running cases are measured to; zero means the clock.
	Now time.Time
}

const denseLimit = 1 << 31

// Load reads every STATUSES/status.* file in dir. Files are parsed in
// parallel, one per CPU, and merged into the summary as they come.
func Load(dir string, opt Options) (*Summary, error) {
	s := &Summary{RunCounts: map[int]*Counts{}}
	if !opt.Since.IsZero() {
		s.since = float64(opt.Since.UnixMilli()) / 1e3
	}
	if opt.MaxID > 0 && opt.MaxID < denseLimit {
		s.grow(opt.MaxID)
	}
	all, err := filepath.Glob(filepath.Join(dir, "status.*"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range all {
		if _, _, ok := ParseFileName(filepath.Base(n)); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	latest := latestRestarts(names)
	s.Jobs = make([]Job, len(names))
	s.jobRun = make([]int, len(names))
	if len(names) == 0 {
		return s, nil
	}

	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	now := float64(opt.Now.UnixMilli()) / 1e3
	var liveAsOf float64
	if !opt.LiveAsOf.IsZero() {
		liveAsOf = float64(opt.LiveAsOf.UnixMilli()) / 1e3
	}
	workers := min(runtime.GOMAXPROCS(0), len(names))
	files := make(chan int, len(names))
	for i := range names {
		files <- i
	}
	close(files)
	batches := make(chan *batch, 2*workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range files {
				live := opt.Live
				if job, r, _ := ParseFileName(filepath.Base(names[i])); r < latest[job] {
					live = nil // a restarted job's earlier incarnation: dead
				}
				if !parseFile(names[i], i, s.since, now, liveAsOf, live, batches, stop) {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(batches) }()

	var firstErr error
	for b := range batches {
		if firstErr != nil {
			continue // drain
		}
		if b.err != nil {
			firstErr = b.err
			close(stop)
			continue
		}
		s.jobRun[b.ji] = b.run
		s.Warnings = append(s.Warnings, b.warnings...)
		for _, a := range b.attempts {
			s.merge(a, b.ji, b.run)
		}
		if b.first > 0 && (s.First == 0 || b.first < s.First) {
			s.First = b.first
		}
		s.Last = max(s.Last, b.last)
		s.Recent += b.recent
		if b.job != nil {
			s.Jobs[b.ji] = *b.job
		}
		b.attempts = b.attempts[:0]
		batchPool.Put(b)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return s, nil
}

// batch carries parsed attempts of one file from a parser to the merger.
type batch struct {
	ji       int
	run      int
	attempts []attempt
	first    float64
	last     float64
	recent   int64
	job      *Job // set on a file's last batch
	err      error
	warnings []string
}

// maxWarnings caps the damaged lines reported per batch.
const maxWarnings = 10

const batchSize = 16384

var batchPool = sync.Pool{New: func() any { return &batch{attempts: make([]attempt, 0, batchSize)} }}

func newBatch(ji, run int) *batch {
	b := batchPool.Get().(*batch)
	b.ji, b.run, b.first, b.last, b.recent, b.job, b.err = ji, run, 0, 0, 0, nil, nil
	b.warnings = b.warnings[:0]
	return b
}

// parseFile parses one status file into batches. It reports false if it
// was told to stop.
func parseFile(name string, ji int, since, now, liveAsOf float64, live func(string) bool, out chan<- *batch, stop <-chan struct{}) bool {
	send := func(b *batch) bool {
		select {
		case out <- b:
			return true
		case <-stop:
			return false
		}
	}
	fail := func(err error) bool {
		b := newBatch(ji, 0)
		b.err = err
		return send(b)
	}
	f, err := os.Open(name)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	id, restart, _ := ParseFileName(filepath.Base(name))
	p := fileParser{job: Job{ID: id, Restart: restart}, since: since}
	p.b = newBatch(ji, 0)
	r := bufio.NewReaderSize(f, 256<<10)
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull { // skip absurdly long lines
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		// A line without its newline is being written right now: skip it.
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if perr := p.parseLine(line); perr != nil {
				// One damaged line must not block the farm: say which,
				// and read on.
				if len(p.b.warnings) < maxWarnings {
					p.b.warnings = append(p.b.warnings, fmt.Sprintf("%s:%d: %v; line skipped", name, lineNo, perr))
				}
			}
			if len(p.b.attempts) == batchSize {
				if !send(p.b) {
					return false
				}
				p.b = newBatch(ji, p.job.Run)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
	}
	isLive := p.job.Quit == "" && live != nil && live(p.job.ID)
	for _, o := range p.open {
		a := attempt{id: o.id, state: Interrupted, start: o.start}
		if isLive || (p.job.Quit == "" && liveAsOf > 0 && o.start >= liveAsOf) {
			a.state = Running
			a.secs = max(0, now-o.start) // so far
			p.job.Open++
		} else {
			p.job.Ended++
		}
		p.b.attempts = append(p.b.attempts, a)
	}
	job := p.job
	p.b.job = &job
	return send(p.b)
}

// fileParser holds the state of parsing one status file.
type fileParser struct {
	job    Job
	since  float64
	b      *batch
	open   []openCase // started, not yet ended: one at a time, normally
	fields [8][]byte
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

// splitFields splits line at blanks (spaces, tabs, CR, LF) into out.
func splitFields(line []byte, out [][]byte) [][]byte {
	start := -1
	for i, c := range line {
		blank := c == ' ' || c == '\t' || c == '\r' || c == '\n'
		switch {
		case blank && start >= 0:
			out = append(out, line[start:i])
			start = -1
		case !blank && start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, line[start:])
	}
	return out
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

// atof parses the decimals farm writes ("1700000000.123", "0.517") without
// allocating, falling back to strconv for anything else.
func atof(b []byte) (float64, error) {
	var whole, frac, scale int64 = 0, 0, 1
	dot := false
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9' && !dot && i < 15:
			whole = whole*10 + int64(c-'0')
		case c >= '0' && c <= '9' && dot && scale < 1e9:
			frac = frac*10 + int64(c-'0')
			scale *= 10
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return strconv.ParseFloat(string(b), 64)
		}
	}
	if len(b) == 0 {
		return 0, fmt.Errorf("empty number")
	}
	return float64(whole) + float64(frac)/float64(scale), nil
}

// openCase is a case started and not yet ended in one status file.
type openCase struct {
	id    int64
	start float64
}

func (p *fileParser) parseLine(line []byte) error {
	job := &p.job
	if line[0] == '#' {
		for _, f := range splitFields(line[1:], p.fields[:0]) {
			k, v, _ := bytes.Cut(f, []byte("="))
			switch string(k) {
			case "run":
				n, _ := atoi(v)
				job.Run = int(n)
				p.b.run = job.Run
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
	// Only the fields needed are cut out: most lines are S and E records,
	// and this loop runs once per record.
	f := p.fields[:0]
	want := 5
	if line[0] == 'S' {
		want = 3
	}
	for i := 0; len(f) < want; {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\n' && line[j] != '\r' {
			j++
		}
		if j == i {
			break
		}
		f = append(f, line[i:j])
		i = j
	}
	if len(f) < 2 {
		return fmt.Errorf("short record")
	}
	id, err := atoi(f[1])
	if err != nil {
		return err
	}
	b := p.b
	switch f[0][0] {
	case 'S':
		if len(f) < 3 {
			return fmt.Errorf("short S record")
		}
		start, err := atof(f[2])
		if err != nil {
			return err
		}
		p.open = append(p.open, openCase{id, start})
		if b.first == 0 || start < b.first {
			b.first = start
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
		for i := len(p.open) - 1; i >= 0; i-- {
			if p.open[i].id == id {
				p.open = append(p.open[:i], p.open[i+1:]...)
				break
			}
		}
		job.Ended++
		if end := start + secs; end > b.last {
			b.last = end
		}
		if p.since > 0 && start+secs >= p.since {
			b.recent++
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
		b.attempts = append(b.attempts, a)
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

func (s *Summary) merge(a attempt, ji, run int) {
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
			s.far[a.id] = Case{ID: a.id, State: a.state, Status: a.status, Seconds: a.secs, Run: run, job: ji}
		}
		return
	}
	s.grow(a.id)
	i := a.id
	oldRun := 0
	if ji := s.job[i]; ji > 0 {
		oldRun = s.jobRun[ji-1]
	}
	if wins(a, run, s.state[i], oldRun) {
		s.state[i] = a.state
		s.status[i] = int32(a.status)
		s.secs[i] = float32(a.secs)
		s.job[i] = uint32(ji + 1)
	}
}

// Get returns the outcome of case id (State NeverRan if it has no record).
func (s *Summary) Get(id int64) Case {
	if id >= 0 && id < int64(len(s.state)) {
		return s.at(id)
	}
	if c, ok := s.far[id]; ok {
		return s.withJob(c)
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

// withJob fills in the job and host of a far case (its job is known only
// once every file is read).
func (s *Summary) withJob(c Case) Case {
	j := s.Jobs[c.job]
	c.Job, c.Host = j.ID, j.Host
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
		if err := fn(s.withJob(s.far[farIDs[k]])); err != nil {
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
		if err := fn(s.withJob(s.far[farIDs[k]])); err != nil {
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

// Widths returns the widest ID, STATUS and duration (as milliseconds) of the
// recorded cases, and the longest job and host names, for laying out a
// table without a pass over every case.
func (s *Summary) Widths() (maxID int64, minStatus, maxStatus int, maxMillis int64, job, host int) {
	for i := len(s.state) - 1; i >= 0; i-- {
		if s.state[i] != NeverRan {
			maxID = int64(i)
			break
		}
	}
	for i, st := range s.state {
		if st == NeverRan {
			continue
		}
		minStatus = min(minStatus, int(s.status[i]))
		maxStatus = max(maxStatus, int(s.status[i]))
		maxMillis = max(maxMillis, int64(s.secs[i]*1000+0.5))
	}
	for id, c := range s.far {
		maxID = max(maxID, id)
		minStatus, maxStatus = min(minStatus, c.Status), max(maxStatus, c.Status)
		maxMillis = max(maxMillis, int64(c.Seconds*1000+0.5))
	}
	for _, j := range s.Jobs {
		job, host = max(job, len(j.ID)), max(host, len(j.Host))
	}
	return
}
