package status

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/layout"
)

// State is what is known of one case, farm-wide.
type State uint8

// The states of a case, from least to most final.
const (
	NeverRan    State = iota // no record at all
	Unfit                    // taken by a meta-job and not started: it did not fit the job (a U record)
	Running                  // started in a meta-job that still runs
	Interrupted              // started, but its meta-job died or was stopped before it ended
	Failed                   // ended with a non-zero STATUS
	Succeeded                // ended with STATUS 0 (in any run)
	// TimedOut: it ran past its time limit and farm ended it (a T
	// record). Last so that the values above keep their numbers; it is
	// as final as Failed.
	TimedOut
)

var stateNames = [...]string{"never ran", "unfit", "running", "interrupted", "failed", "succeeded", "timed out"}

func (s State) String() string { return stateNames[s] }

// Case is the farm-wide outcome of one case: its decisive attempt. A success
// in any run wins; then a running attempt; then the failure or interruption
// of the latest run; then, for a case that no meta-job started, its latest
// unfit record (an unfit case never hides an attempt that started, of any
// run: a later run that runs the case replaces it, and an earlier failure
// stays what farm shows).
type Case struct {
	ID      int64
	State   State
	Status  int     // STATUS for failed/succeeded; the signal for interrupted and timed out
	Seconds float64 // duration of the attempt (so far, while running); 0 if NoSeconds
	// NoSeconds says its duration is not known: it did not run (unfit),
	// its meta-job died under it with no record of its end, or its record
	// is one of META's, which say no time.
	NoSeconds bool
	// RSS and CPU are what the attempt used, as its end record says:
	// the peak resident memory of its largest process in KiB (0: not
	// known) and its CPU time, user and system, in seconds, to the
	// hundredth (HasCPU: known).
	RSS    int64
	CPU    float64
	HasCPU bool
	Job    string // meta-job ID
	Host   string
	Run    int
	// Loop, CPUs and GPUs are where the attempt ran in its meta-job, when
	// its start record says (StartAt): its loop (0: not said), the CPUs it
	// was bound to, the GPUs it was given. The lists are shared by every
	// case placed alike: do not modify them.
	Loop int
	CPUs []int
	GPUs []string
	// Reason is why an unfit case was not started (its U record).
	Reason string
	// Starts is how many times the case was started in one run, when more
	// than once (in run StartsRun): farm claims a case once per run, so it
	// must never be; 0 otherwise.
	Starts    int
	StartsRun int
	// Attempts is how many times the case was started, in every run (its
	// start records; at most 255 are counted).
	Attempts int
	// Crashes is how many of its attempts were interrupted with no record
	// of their end: its meta-job died while it ran (killed, out of
	// memory, its node lost), or was requeued and restarted. An attempt
	// ended by a signal the meta-job caught (a time limit, scancel,
	// 'farm kill': an I record) is not a crash; nor is a case that
	// failed.
	Crashes int
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
	QuitWhy string // why, as its Q record names it (no-cases, no-runtime, ...), if said
	Ended   int64  // cases it ended (E and I records)
	Open    int64  // cases it started and has not ended
	Unfit   int64  // cases it took and did not start (U records)
	// Capacity is what the meta-job packs its cases into (its header's
	// cpus= and gpus=; zero if it does not say).
	Capacity Capacity
	// OpenCPUs and OpenGPUs are the CPUs and GPUs its running cases (Open)
	// were given, in ascending order, each once.
	OpenCPUs []int
	OpenGPUs []string
	// OpenWhole is how many of its running cases hold the whole job: their
	// start records say neither CPUs nor GPUs (a case that declares no
	// needs, outside WHOLE_NODE mode, is given all the job has).
	OpenWhole int64
}

// Summary holds every case's outcome, compactly: in pages of consecutive
// case IDs, 13 bytes a case, and in a map for IDs too sparse for pages
// (caseStore, cases.go). Ten million cases 1..N take some 130 MB; memory
// grows with the number of cases, not with the largest ID. While loading,
// a bit per case and run (for a case in the map: the run of its first
// start, and a set of its other starts) finds the cases started twice in
// one run.
//
// A case's 4 bytes of job say its placement and unfit reason too, at no
// cost per case: they hold 1 + the index of its job in Jobs, or, past
// len(Jobs), 1 + len(Jobs) + the index in wheres of a job and a note — a
// placement or reason, interned farm-wide — of which a farm has few.
type Summary struct {
	Jobs []Job
	// Usage is what each job of Jobs used (same index): its lifetime,
	// CPUs and cases' core-seconds, for the farm's core-hours.
	Usage []Usage

	cases caseStore

	// Warnings name the status lines that could not be parsed and were
	// skipped ("FILE:LINE: why; line skipped"), and the cases started more
	// than once in one run (see Duplicates).
	Warnings []string

	// Duplicates lists the cases started more than once in one run, by run
	// and case ID. The claim core hands each case out once per run, and a
	// job restarted by the batch system claims new cases (the case its dead
	// incarnation left open stays interrupted), so any second start record
	// of a case in one run, in whatever status files, is a fault.
	Duplicates []Duplicate
	dupOf      map[int64]int // case ID -> index in Duplicates of its most starts

	// RunCounts counts attempt outcomes per run (index: run number).
	RunCounts map[int]*Counts

	// Recent counts the cases that ended at or after Options.Since.
	Recent int64
	// First and Last are the earliest start and latest end recorded (Unix seconds).
	First, Last float64

	since  float64
	jobRun []int // run of each job, known before its file is fully read

	notes     []note            // placements and reasons, each once
	noteOf    map[string]uint32 // while loading: a note's key -> its index in notes
	wheres    []where           // the jobs with notes of the cases' job bytes
	fileNotes [][]uint32        // while loading, per job: its file's notes, by local number - 1, as job bytes

	// While loading: the starts counted more than once.
	dupStarts map[runCase]int
	// rescues are the attempts of rescued cases that reran a case in the
	// run its dead meta-job had started it in (why=rescue), merged after
	// every other attempt (mergeRescues).
	rescues    []rescueAttempt
	rescueDups map[runCase]bool // the duplicates that are rescues of a case that ran on
}

// Duplicate is a case started more than once in one run.
type Duplicate struct {
	ID     int64
	Run    int
	Starts int      // start records of the case in the run
	Files  []string // the status files holding them, as STATUSES/status.JOB
	// Rescued: one start is a rescue (why=rescue) of the case a meta-job
	// ran on after it was presumed dead (metajob/rescue.go): the one way a
	// case runs twice in a run.
	Rescued bool
}

type runCase struct {
	run int
	id  int64
}

// note is what an attempt's records say beyond its job: where it ran (its
// S record's placement), or why it was not started (its U record's reason).
type note struct {
	place  Placement
	reason string
}

// where is a job (its index in Summary.Jobs) and a note (its index in
// Summary.notes).
type where struct {
	ji, note uint32
}

// Counts tallies cases by state.
type Counts struct {
	Running, Interrupted, Failed, Succeeded, Unfit, TimedOut int64
}

// remove takes back one case counted in state s.
func (c *Counts) remove(s State) {
	switch s {
	case Unfit:
		c.Unfit = max(0, c.Unfit-1)
	case Running:
		c.Running = max(0, c.Running-1)
	case Interrupted:
		c.Interrupted = max(0, c.Interrupted-1)
	case Failed:
		c.Failed = max(0, c.Failed-1)
	case Succeeded:
		c.Succeeded = max(0, c.Succeeded-1)
	case TimedOut:
		c.TimedOut = max(0, c.TimedOut-1)
	}
}

// retried takes back the attempt before a retry: timed out if
// afterTimeout (why=timeout), else failed.
func (c *Counts) retried(afterTimeout bool) {
	if afterTimeout && c.TimedOut > 0 {
		c.TimedOut--
	} else if !afterTimeout && c.Failed > 0 {
		c.Failed--
	}
}

// Add counts one case in state s.
func (c *Counts) Add(s State) {
	switch s {
	case Unfit:
		c.Unfit++
	case Running:
		c.Running++
	case Interrupted:
		c.Interrupted++
	case Failed:
		c.Failed++
	case Succeeded:
		c.Succeeded++
	case TimedOut:
		c.TimedOut++
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
	// does). Zero: no such rule. Neither rule makes running a case of a
	// meta-job that exited by itself (a Q record) or of a superseded
	// incarnation: see ReadOptions, which decides for every reader.
	LiveAsOf time.Time
	// MaxID is the largest case ID of the farm's table, and Cases its
	// number of cases: when known, the pages for the IDs of a dense table
	// are made at once, rather than after a few cases of each.
	MaxID int64
	Cases int64
	// Since, if set, is the start of the window Summary.Recent counts.
	Since time.Time
	// Now is the time running cases are measured to; zero means the clock.
	Now time.Time
}

// Load reads every STATUSES/status.* file in dir. Files are parsed in
// parallel, one per CPU, and merged into the summary as they come.
func Load(dir string, opt Options) (*Summary, error) {
	s := &Summary{RunCounts: map[int]*Counts{}}
	if !opt.Since.IsZero() {
		s.since = float64(opt.Since.UnixMilli()) / 1e3
	}
	s.cases.hint(opt.MaxID, opt.Cases)
	names, err := statusFiles(dir)
	if err != nil {
		return nil, err
	}
	s.Jobs = make([]Job, len(names))
	s.Usage = make([]Usage, len(names))
	s.jobRun = make([]int, len(names))
	s.fileNotes = make([][]uint32, len(names))
	if len(names) == 0 {
		s.cases.done()
		return s, nil
	}
	stop := make(chan struct{})
	if err := s.mergeBatches(parseFiles(names, s.since, opt, stop), stop); err != nil {
		return nil, err
	}
	s.mergeRescues()
	s.cases.done()
	s.noteOf, s.fileNotes = nil, nil
	if len(s.dupStarts) > 0 {
		s.findDuplicates(dir, names)
	}
	return s, nil
}

// statusFiles lists the status files in dir, by name: the files status.*
// whose names layout.ParseStatusFile accepts.
// A directory that does not exist holds none; one that cannot be read is
// an error (filepath.Glob would say "none": every case would look as if
// it never ran, and resubmit would run again what succeeded).
func statusFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("%s is not a directory: it is where the status records go; move it away", dir)
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, _, ok := layout.ParseStatusFile(e.Name()); ok {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(names)
	return names, nil
}

// parseFiles parses the files names in parallel, one per CPU, and sends
// their batches on the channel it returns, which it closes once all are
// sent, or once the parsers have seen stop closed. The index of a file in
// names is its batches' ji. Since is Summary.since; of opt, parseFiles
// uses Live, LiveAsOf and Now.
func parseFiles(names []string, since float64, opt Options, stop <-chan struct{}) <-chan *batch {
	superseded := Superseded(names)
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	workers := min(runtime.GOMAXPROCS(0), len(names))
	files := make(chan int, len(names))
	for i := range names {
		files <- i
	}
	close(files)
	batches := make(chan *batch, 2*workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range files {
				ro := ReadOptions{Live: opt.Live, LiveAsOf: opt.LiveAsOf, Now: opt.Now, Superseded: superseded(names[i])}
				if !parseFile(names[i], i, since, ro, batches, stop) {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(batches) }()
	return batches
}

// mergeBatches merges the batches into s as they come, until the channel
// is closed. At a batch that carries an error, it closes stop, so that the
// parsers stop, and reads on without merging until the channel is closed:
// it returns the first error.
func (s *Summary) mergeBatches(batches <-chan *batch, stop chan<- struct{}) error {
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
		s.mergeBatch(b)
	}
	return firstErr
}

// mergeBatch merges the attempts and the tallies of one batch into s, and
// returns the batch to batchPool.
func (s *Summary) mergeBatch(b *batch) {
	s.jobRun[b.ji] = b.run
	s.Warnings = append(s.Warnings, b.warnings...)
	for _, key := range b.notes {
		s.fileNotes[b.ji] = append(s.fileNotes[b.ji], s.addNote(b.ji, key))
	}
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
		s.Usage[b.ji] = b.use
	}
	b.attempts = b.attempts[:0]
	batchPool.Put(b)
}

// addNote interns the note of key (see fileParser.intern) farm-wide, and
// returns the job bytes of an attempt of job ji with it.
func (s *Summary) addNote(ji int, key string) uint32 {
	n, ok := s.noteOf[key]
	if !ok {
		if s.noteOf == nil {
			s.noteOf = map[string]uint32{}
		}
		n = uint32(len(s.notes))
		s.notes = append(s.notes, parseNote(key))
		s.noteOf[key] = n
	}
	s.wheres = append(s.wheres, where{ji: uint32(ji), note: n})
	return uint32(len(s.jobRun) + len(s.wheres))
}

// parseNote reads a note's key: "S" LOOP " " CPUS " " GPUS (as written in
// an S record), or "U" REASON.
func parseNote(key string) note {
	if key[0] == 'U' {
		return note{reason: key[1:]}
	}
	loop, rest, _ := strings.Cut(key[1:], " ")
	cpus, gpus, _ := strings.Cut(rest, " ")
	var n note
	n.place.Loop, _ = strconv.Atoi(loop)
	n.place.CPUs, _ = ParseCPUs([]byte(cpus))
	n.place.GPUs, _ = ParseGPUs([]byte(gpus))
	return n
}

// jobOf returns the index in Jobs of the job of a case's job bytes w (> 0).
func (s *Summary) jobOf(w uint32) int {
	if n := uint32(len(s.jobRun)); w > n {
		return int(s.wheres[w-n-1].ji)
	}
	return int(w) - 1
}

// batch carries parsed attempts of one file from a parser to the merger.
type batch struct {
	ji       int
	run      int
	attempts []attempt
	notes    []string // the file's notes first seen in this batch, in order (their keys)
	first    float64
	last     float64
	recent   int64
	job      *Job  // set on a file's last batch
	use      Usage // set with job
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
	b.use = Usage{}
	b.warnings = b.warnings[:0]
	b.notes = b.notes[:0]
	return b
}

// errStopped ends a file's reading when parseFile was told to stop.
var errStopped = errors.New("stopped")

// parseFile parses one status file into batches (ReadFile settles its
// attempts). It reports false if it was told to stop.
func parseFile(name string, ji int, since float64, opt ReadOptions, out chan<- *batch, stop <-chan struct{}) bool {
	send := func(b *batch) bool {
		select {
		case out <- b:
			return true
		case <-stop:
			return false
		}
	}
	p := fileParser{since: since, b: newBatch(ji, 0)}
	opt.Warn = func(line int, err error) {
		// One damaged line must not block the farm: say which, and read on.
		if len(p.b.warnings) < maxWarnings {
			p.b.warnings = append(p.b.warnings, fmt.Sprintf("%s:%d: %v; line skipped", name, line, err))
		}
	}
	f, err := ReadFile(name, opt, func(f *File, a *Attempt) error {
		if len(p.b.attempts) == batchSize {
			if !send(p.b) {
				return errStopped
			}
			p.b = newBatch(ji, f.Run)
		}
		p.add(f, a)
		return nil
	})
	if err == errStopped {
		return false
	}
	if err != nil {
		b := newBatch(ji, 0)
		b.err = err
		return send(b)
	}
	p.b.first, p.b.run = f.First, f.Run
	p.addNotes(f)
	p.b.job = p.jobOf(f)
	live := !opt.Superseded && !f.Quitted && !f.META && opt.Live != nil && opt.Live(f.Job)
	p.b.use = p.endUsage(f, live, unixSeconds(opt.Now))
	return send(p.b)
}

// fileParser holds the state of parsing one status file into batches.
type fileParser struct {
	since float64
	b     *batch
	notes int // the file's notes handed on in batches so far
	// Ended, Open and Unfit of the job, and the CPUs and GPUs of its
	// running cases.
	ended, open, unfit int64
	whole              int64 // running cases placed on neither CPUs nor GPUs: the whole job
	cpus               []int
	gpus               []string
	// use is the file's Usage so far.
	use Usage
}

// add adds attempt a of file f to the batch, with the notes first seen in
// f since the batch before, and counts it.
func (p *fileParser) add(f *File, a *Attempt) {
	b := p.b
	b.run = f.Run
	p.addNotes(f)
	p.usage(f, a)
	switch {
	case a.State == Unfit:
		p.unfit++
	case a.State == Running:
		p.open++
		var place Placement
		if a.note > 0 {
			if n := parseNote(f.notes[a.note-1]); n.reason == "" {
				place = n.place
			}
		}
		p.cpus = append(p.cpus, place.CPUs...)
		p.gpus = append(p.gpus, place.GPUs...)
		if len(place.CPUs) == 0 && len(place.GPUs) == 0 {
			p.whole++
		}
	default:
		p.ended++
	}
	if a.Ended() {
		end := a.Start + a.Seconds
		if end > b.last {
			b.last = end
		}
		if p.since > 0 && end >= p.since {
			b.recent++
		}
	}
	// A start withdrawn (I ID 0: its meta-job found its lease lost once the
	// start was recorded, and never ran it) is no start of the case's.
	withdrawn := a.State == Interrupted && !a.NoEnd && a.Status == 0 && a.Seconds == 0
	b.attempts = append(b.attempts, attempt{id: a.ID, state: a.State, started: a.Started && !withdrawn, crashed: a.State == Interrupted && a.NoEnd,
		untimed: a.NoEnd || a.Untimed || a.State == Unfit,
		retry:   a.Attempt > 1 && !a.Rescue, rescue: a.Rescue, afterTimeout: a.AfterTimeout, n: int32(min(a.Attempt, maxAttempt)), note: a.note, status: a.Status, start: a.Start, secs: a.Seconds, use: a.Use})
}

// addNotes hands on, with the batch, the notes of f not handed on yet.
func (p *fileParser) addNotes(f *File) {
	for ; p.notes < len(f.notes); p.notes++ {
		p.b.notes = append(p.b.notes, f.notes[p.notes])
	}
}

// jobOf is the Job of file f, read whole.
func (p *fileParser) jobOf(f *File) *Job {
	job := &Job{ID: f.Job, Run: f.Run, Host: f.Host, Restart: f.Restart, Capacity: f.Capacity,
		Ended: p.ended, Open: p.open, Unfit: p.unfit, OpenWhole: p.whole}
	switch {
	case f.META:
		job.Quit = "META" // recorded by META, before farm: not a live job
	case f.Quitted:
		job.Quit, job.QuitWhy = cmp.Or(f.Quit, "exited"), f.QuitWhy
	}
	slices.Sort(p.cpus)
	job.OpenCPUs = slices.Compact(p.cpus)
	slices.Sort(p.gpus)
	job.OpenGPUs = slices.Compact(p.gpus)
	return job
}

type attempt struct {
	id      int64
	state   State
	started bool // the file holds the attempt's start record
	crashed bool // interrupted with no record of its end (Case.Crashes)
	untimed bool // its duration is not known (Case.NoSeconds)
	retry   bool // a retry (attempt= from 2): the attempt before it, in its run and file, failed
	rescue  bool // a rescue (why=rescue): the attempt before it, in its run, died with its meta-job
	again   bool // a rescue being merged (mergeRescues): not a second start of the case in its run
	// afterTimeout: a retry (why=timeout) whose attempt before it timed out
	afterTimeout bool
	n            int32  // its attempt= (0: not said)
	note         uint32 // its note in the file (File.notes), 0 if none
	status       int
	start        float64
	secs         float64
	use          Use
}

// noSeconds is what a case's secs hold when its duration is not known
// (Case.NoSeconds): a NaN, which no record holds (ParseRecord reads none).
var noSeconds = float32(math.NaN())

// seconds is what a case's secs hold for attempt a.
func (a attempt) seconds() float32 {
	if a.untimed {
		return noSeconds
	}
	return float32(a.secs)
}

// wins reports whether attempt a, of run run, replaces the recorded outcome
// (state old, from run oldRun). Runs are ordered in time, and a case is
// claimed at most once per run.
func wins(a attempt, run int, old State, oldRun int) bool {
	switch {
	case old == NeverRan:
		return true
	case a.state == Unfit:
		// Never started: it replaces nothing but an older unfit attempt.
		return old == Unfit && run >= oldRun
	case old == Unfit:
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
	if a.rescue && a.started {
		s.rescues = append(s.rescues, rescueAttempt{a, ji, run})
		return
	}
	c := s.RunCounts[run]
	if c == nil {
		c = &Counts{}
		s.RunCounts[run] = c
	}
	if a.retry {
		// The run's counts hold each case once: its failed (or timed
		// out) attempt before this one, in the same file, was merged
		// before it.
		c.retried(a.afterTimeout)
	}
	c.Add(a.state)
	w := uint32(ji + 1)
	if a.note > 0 {
		w = s.fileNotes[ji][a.note-1]
	}
	if p := s.cases.page(a.id); p != nil {
		i := int(a.id & pageMask)
		if a.started && p.start(run, i) && !a.retry && !a.again {
			s.startedAgain(a.id, run)
		}
		col := p.cols
		if a.started {
			col.tries[i] = inc8(col.tries[i])
		}
		if a.crashed {
			col.crashes[i] = inc8(col.crashes[i])
		}
		oldRun := 0
		if ow := col.job[i]; ow > 0 {
			oldRun = s.jobRun[s.jobOf(ow)]
		}
		if wins(a, run, col.state[i], oldRun) {
			col.state[i] = a.state
			col.status[i] = int32(a.status)
			col.secs[i] = a.seconds()
			col.job[i] = w
			rss, cpu := useOf(a.use)
			p.setUse(i, rss, cpu)
		}
		return
	}
	old := s.cases.far[a.id]
	fc := old
	if a.started && s.cases.farStart(&fc, a.id, run) && !a.retry && !a.again {
		s.startedAgain(a.id, run)
	}
	if a.started {
		fc.tries = inc8(fc.tries)
	}
	if a.crashed {
		fc.crashes = inc8(fc.crashes)
	}
	oldRun := 0
	if old.job > 0 {
		oldRun = s.jobRun[s.jobOf(old.job)]
	}
	if wins(a, run, old.state, oldRun) {
		fc.state, fc.status, fc.secs, fc.job = a.state, int32(a.status), a.seconds(), w
		rss, cpu := useOf(a.use)
		s.cases.setFarUse(a.id, rss, cpu)
	}
	if fc != old {
		s.cases.putFar(a.id, fc)
	}
}

// rescueAttempt is an attempt that reran, in run, a case a dead meta-job
// had started (why=rescue), in the file of job ji.
type rescueAttempt struct {
	a       attempt
	ji, run int
}

// mergeRescues merges the rescue attempts, once every other attempt is
// merged: the attempt of the dead meta-job, in another file, is then in.
// The run's counts hold each case once: that attempt's count is replaced
// by the rescue's. A rescue of a case whose attempt before it ended after
// all (its meta-job was only cut off, and ran it to its end) is a case
// that ran twice in the run: it is counted as started again (Duplicates).
func (s *Summary) mergeRescues() {
	// In the order they were made: a rescue of a rescue after it.
	sort.SliceStable(s.rescues, func(i, j int) bool {
		a, b := s.rescues[i].a, s.rescues[j].a
		return a.id < b.id || a.id == b.id && (a.n < b.n || a.n == b.n && a.start < b.start)
	})
	for _, r := range s.rescues {
		a := r.a
		a.rescue, a.again = false, true
		if s.cases.startedIn(a.id, r.run) {
			if st, run, ok := s.outcomeOf(a.id); ok && run == r.run {
				if c := s.RunCounts[run]; c != nil {
					c.remove(st)
				}
				if st != Interrupted {
					s.startedAgain(a.id, r.run)
					if s.rescueDups == nil {
						s.rescueDups = map[runCase]bool{}
					}
					s.rescueDups[runCase{r.run, a.id}] = true
				}
			}
		}
		s.merge(a, r.ji, r.run)
	}
	s.rescues = nil
}

// outcomeOf is the outcome recorded so far for case id, and the run of
// the attempt that decided it; ok false if none is.
func (s *Summary) outcomeOf(id int64) (State, int, bool) {
	st, w := NeverRan, uint32(0)
	if p := s.cases.page(id); p != nil {
		i := int(id & pageMask)
		st, w = p.cols.state[i], p.cols.job[i]
	} else if fc, ok := s.cases.far[id]; ok {
		st, w = fc.state, fc.job
	}
	if w == 0 {
		return NeverRan, 0, false
	}
	return st, s.jobRun[s.jobOf(w)], true
}

// startedAgain counts a start record of case id in run, which started it
// before: dupStarts[{run, id}] is the case's start records in the run.
func (s *Summary) startedAgain(id int64, run int) {
	k := runCase{run, id}
	if s.dupStarts == nil {
		s.dupStarts = map[runCase]int{}
	}
	if s.dupStarts[k] == 0 {
		// The first start was only noted as a start (a page's bit, or the
		// far case's startRun or farStarted): count it too.
		s.dupStarts[k] = 1
	}
	s.dupStarts[k]++
}

// maxDuplicateWarnings caps the warning lines about duplicate starts; the
// rest are counted in one line (Duplicates has them all).
const maxDuplicateWarnings = 20

// findDuplicates lists the cases started more than once in one run, with
// the files that hold their start records, and warns of them. The first
// pass noted only whether a case had started in a run (see startedAgain);
// this one reads again only the files of the runs concerned, which happens
// only when something went wrong.
func (s *Summary) findDuplicates(dir string, names []string) {
	runs := map[int]bool{}
	for k := range s.dupStarts {
		runs[k.run] = true
	}
	files := map[runCase][]string{}
	for i, name := range names {
		run := s.jobRun[i]
		if !runs[run] {
			continue
		}
		rel := filepath.Join(filepath.Base(dir), filepath.Base(name))
		// Each start record is the start of one attempt. A file gone
		// meanwhile is skipped.
		ReadFile(name, ReadOptions{}, func(_ *File, a *Attempt) error {
			if k := (runCase{run, a.ID}); a.Started && s.dupStarts[k] > 0 {
				if l := files[k]; len(l) == 0 || l[len(l)-1] != rel {
					files[k] = append(l, rel)
				}
			}
			return nil
		})
	}
	for k, n := range s.dupStarts {
		s.Duplicates = append(s.Duplicates, Duplicate{ID: k.id, Run: k.run, Starts: n, Files: files[k], Rescued: s.rescueDups[k]})
	}
	sort.Slice(s.Duplicates, func(i, j int) bool {
		a, b := s.Duplicates[i], s.Duplicates[j]
		return a.Run < b.Run || (a.Run == b.Run && a.ID < b.ID)
	})
	s.dupOf = map[int64]int{}
	for i, d := range s.Duplicates {
		if j, ok := s.dupOf[d.ID]; !ok || d.Starts >= s.Duplicates[j].Starts {
			s.dupOf[d.ID] = i
		}
		if i < maxDuplicateWarnings {
			s.Warnings = append(s.Warnings, d.Warning())
		}
	}
	if n := len(s.Duplicates) - maxDuplicateWarnings; n > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d more case(s) started more than once in one run: see \"starts\" in 'farm Status --json'; farm claims a case once per run; please report this", n))
	}
	s.dupStarts = nil
}

// Warning is the line farm prints about d.
func (d Duplicate) Warning() string {
	where := strings.Join(d.Files, ", ")
	if where == "" {
		where = "status files changed while they were read"
	}
	if d.Rescued {
		return fmt.Sprintf("case %d ran %d times in run %d (%s): its batch system reported its meta-job ended, and another rescued the case, while the first was only cut off or stopped and ran it on (README: Rescue)", d.ID, d.Starts, d.Run, where)
	}
	return fmt.Sprintf("case %d started %d times in run %d (%s): farm claims a case once per run; please report this", d.ID, d.Starts, d.Run, where)
}

// Get returns the outcome of case id (State NeverRan if it has no record).
func (s *Summary) Get(id int64) Case {
	if p := s.cases.find(id); p != nil {
		return s.at(p, int(id&pageMask))
	}
	if c, ok := s.cases.far[id]; ok {
		return s.farAt(id, c)
	}
	return Case{ID: id}
}

// at is the case at offset i of page p.
func (s *Summary) at(p *casePage, i int) Case {
	col := p.cols
	c := Case{ID: p.n<<pageBits | int64(i), State: col.state[i], Status: int(col.status[i]), Seconds: seconds(col.secs[i]),
		NoSeconds: isNaN(col.secs[i]), Attempts: int(col.tries[i]), Crashes: int(col.crashes[i])}
	if u := p.use; u != nil {
		caseUse(&c, u.rss[i], u.cpu[i])
	}
	s.withJob(&c, col.job[i])
	return c
}

// farAt is far case id.
func (s *Summary) farAt(id int64, fc farCase) Case {
	c := Case{ID: id, State: fc.state, Status: int(fc.status), Seconds: seconds(fc.secs), NoSeconds: isNaN(fc.secs),
		Attempts: int(fc.tries), Crashes: int(fc.crashes)}
	if u, ok := s.cases.farUse[id]; ok {
		caseUse(&c, u[0], u[1])
	}
	s.withJob(&c, fc.job)
	return c
}

// withJob fills in the job, host, run, placement or reason (from w, the
// case's job bytes: see Summary) and duplicate starts (if any) of c.
func (s *Summary) withJob(c *Case, w uint32) {
	if w > 0 {
		j := &s.Jobs[s.jobOf(w)]
		c.Job, c.Host, c.Run = j.ID, j.Host, j.Run
		if n := uint32(len(s.jobRun)); w > n {
			note := &s.notes[s.wheres[w-n-1].note]
			c.Loop, c.CPUs, c.GPUs, c.Reason = note.place.Loop, note.place.CPUs, note.place.GPUs, note.reason
		}
	}
	if s.dupOf != nil {
		if i, ok := s.dupOf[c.ID]; ok {
			c.Starts, c.StartsRun = s.Duplicates[i].Starts, s.Duplicates[i].Run
		}
	}
}

// Each calls fn for every case that has a record, in ID order.
func (s *Summary) Each(fn func(Case) error) error {
	far := s.cases.farIDs
	k := 0
	for _, p := range s.cases.order {
		// No far case is in the range of a page.
		for lo := p.n << pageBits; k < len(far) && far[k] < lo; k++ {
			if err := fn(s.farAt(far[k], s.cases.far[far[k]])); err != nil {
				return err
			}
		}
		col := p.cols
		for i := range col.state {
			if col.state[i] == NeverRan {
				continue
			}
			if err := fn(s.at(p, i)); err != nil {
				return err
			}
		}
	}
	for ; k < len(far); k++ {
		if err := fn(s.farAt(far[k], s.cases.far[far[k]])); err != nil {
			return err
		}
	}
	return nil
}

// Totals counts the recorded cases by state.
func (s *Summary) Totals() Counts {
	var c Counts
	for _, p := range s.cases.order {
		for _, st := range &p.cols.state {
			c.Add(st)
		}
	}
	for _, v := range s.cases.far {
		c.Add(v.state)
	}
	return c
}

// Crashed counts, by state, the cases that have at least limit crashes and
// neither succeeded since nor run: those a crash limit of limit keeps from
// running again (none if limit is 0).
func (s *Summary) Crashed(limit int) Counts {
	var n Counts
	if limit <= 0 {
		return n
	}
	count := func(st State, crashes uint8) {
		if int(crashes) >= limit && st != Succeeded && st != Running {
			n.Add(st)
		}
	}
	for _, p := range s.cases.order {
		col := p.cols
		for i := range col.crashes {
			if col.crashes[i] > 0 {
				count(col.state[i], col.crashes[i])
			}
		}
	}
	for _, c := range s.cases.far {
		count(c.state, c.crashes)
	}
	return n
}

// Restarted counts the cases started more than once, in any runs (by
// retries, resubmits or restarts).
func (s *Summary) Restarted() int64 {
	var n int64
	for _, p := range s.cases.order {
		for _, t := range p.cols.tries {
			if t > 1 {
				n++
			}
		}
	}
	for _, c := range s.cases.far {
		if c.tries > 1 {
			n++
		}
	}
	return n
}

// MostUse reports whether some case's record says what it used (any), and
// the most CPU seconds one used.
func (s *Summary) MostUse() (any bool, cpu float64) {
	var most uint32
	for _, p := range s.cases.order {
		if u := p.use; u != nil {
			any = true
			for _, c := range u.cpu {
				most = max(most, c)
			}
		}
	}
	for _, u := range s.cases.farUse {
		any = true
		most = max(most, u[1])
	}
	if most > 0 {
		cpu = float64(most-1) / 100
	}
	return any, cpu
}

// UseTotals is what the cases whose records say it used, together (farm
// query): Cases, how many say their CPU time, CPU their CPU seconds and
// Wall their seconds; MaxRSS the largest peak memory of a case (KiB, 0:
// none said) and MaxRSSCase that case.
type UseTotals struct {
	Cases      int64
	CPU, Wall  float64
	MaxRSS     int64
	MaxRSSCase int64
}

// Use totals what the cases used, as their decisive attempts' records say.
func (s *Summary) Use() UseTotals {
	var u UseTotals
	add := func(id int64, rss, cpu uint32, secs float32) {
		if int64(rss) > u.MaxRSS {
			u.MaxRSS, u.MaxRSSCase = int64(rss), id
		}
		if cpu > 0 && !isNaN(secs) {
			u.Cases++
			u.CPU += float64(cpu-1) / 100
			u.Wall += float64(secs)
		}
	}
	for _, p := range s.cases.order {
		if p.use != nil {
			for i := range p.use.cpu {
				add(p.n<<pageBits|int64(i), p.use.rss[i], p.use.cpu[i], p.cols.secs[i])
			}
		}
	}
	for id, fu := range s.cases.farUse {
		add(id, fu[0], fu[1], s.cases.far[id].secs)
	}
	return u
}

// MostAttempts is the most attempts, and the most crashes, of any case.
func (s *Summary) MostAttempts() (attempts, crashes int) {
	for _, p := range s.cases.order {
		col := p.cols
		for i := range col.tries {
			attempts, crashes = max(attempts, int(col.tries[i])), max(crashes, int(col.crashes[i]))
		}
	}
	for _, c := range s.cases.far {
		attempts, crashes = max(attempts, int(c.tries)), max(crashes, int(c.crashes))
	}
	return
}

// Widths returns the widest ID, STATUS and duration (as milliseconds) of the
// recorded cases, and the longest job and host names, for laying out a
// table without a pass over every case.
func (s *Summary) Widths() (maxID int64, minStatus, maxStatus int, maxMillis int64, job, host int) {
	for _, p := range s.cases.order {
		col := p.cols
		for i, st := range &col.state {
			if st == NeverRan {
				continue
			}
			maxID = max(maxID, p.n<<pageBits|int64(i))
			minStatus = min(minStatus, int(col.status[i]))
			maxStatus = max(maxStatus, int(col.status[i]))
			if s := col.secs[i]; !isNaN(s) {
				maxMillis = max(maxMillis, int64(s*1000+0.5))
			}
		}
	}
	for id, c := range s.cases.far {
		maxID = max(maxID, id)
		minStatus, maxStatus = min(minStatus, int(c.status)), max(maxStatus, int(c.status))
		if !isNaN(c.secs) {
			maxMillis = max(maxMillis, int64(c.secs*1000+0.5))
		}
	}
	for _, j := range s.Jobs {
		job, host = max(job, len(j.ID)), max(host, len(j.Host))
	}
	return
}
