// Package fakepbs is a test engine: a PBS/Torque look-alike that runs its
// jobs as processes of the test itself, kept in memory. Nothing but tests
// uses it. It exists to prove that an engine is one package: it has its
// own job-script dialect (#PBS -l walltime=), array task IDs (123[4] of
// array 123[]), output file names (ID.OU) and farm init templates, and
// reaches farm only through the backend contract. Its test registers it
// (backend.NewRegistry) and runs the conformance suite against it; its
// addition touched no file outside this directory (see ARCHITECTURE.md,
// "Adding an engine").
package fakepbs

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// Name is the engine's name.
const Name = "fakepbs"

// Engine registers the engine; every Open shares one in-memory batch
// system.
func Engine() backend.Engine {
	sys := &system{jobs: map[string]*job{}, next: 100}
	return backend.Engine{Name: Name, Open: func(dir string) backend.Backend { return &Backend{sys: sys} },
		Script: Script{}, Templates: Templates(), Edit: "#PBS -l walltime, -A"}
}

// New returns a backend with a batch system of its own.
func New() *Backend { return Engine().Open("").(*Backend) }

//go:embed templates
var templateFiles embed.FS

// Templates are the engine's job scripts for farm init.
func Templates() fs.FS {
	sub, _ := fs.Sub(templateFiles, "templates")
	return sub
}

// Backend is the engine's backend.backend.
type Backend struct{ sys *system }

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.TaskIDs     = (*Backend)(nil)
	_ backend.OutputNamer = (*Backend)(nil)
)

type system struct {
	mu   sync.Mutex
	jobs map[string]*job // by job or task ID
	next int
}

type job struct {
	id       string
	tasks    []string // an array's tasks; nil for a job or a task
	state    backend.JobState
	start    time.Time
	end      time.Time
	limit    time.Duration
	cancel   chan struct{}
	canceled bool
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements backend.Backend.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Arrays: true, EnforcesTimeLimit: true, Scripts: []backend.Script{Script{}}}
}

// ArrayOf implements backend.TaskIDs: task 123[4] is of array 123[].
func (b *Backend) ArrayOf(id string) (string, bool) {
	array, task, ok := strings.Cut(id, "[")
	if !ok || task == "]" || array == "" {
		return "", false
	}
	return array + "[]", true
}

// OutputName implements backend.OutputNamer: PBS's ID.OU.
func (b *Backend) OutputName(id string) string { return id + ".OU" }

// Submit implements backend.Backend.
func (b *Backend) Submit(ctx context.Context, req backend.SubmitRequest) ([]string, error) {
	s := b.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	if req.Array {
		n := s.next
		s.next++
		array := &job{id: fmt.Sprintf("%d[]", n), state: backend.Pending}
		for i := 1; i <= req.Count; i++ {
			array.tasks = append(array.tasks, fmt.Sprintf("%d[%d]", n, i))
		}
		s.jobs[array.id] = array
		for _, t := range array.tasks {
			s.start(t, req)
		}
		return []string{array.id}, nil
	}
	for range req.Count {
		id := strconv.Itoa(s.next)
		s.next++
		s.start(id, req)
		ids = append(ids, id)
	}
	return ids, nil
}

// start makes job id pending and runs it once req.After ended. s.mu held.
func (s *system) start(id string, req backend.SubmitRequest) {
	j := &job{id: id, state: backend.Pending, limit: req.TimeLimit, cancel: make(chan struct{})}
	s.jobs[id] = j
	go func() {
		for !s.ended(req.After) {
			select {
			case <-j.cancel:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		s.run(j, req)
	}()
}

func (s *system) ended(ids []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if j := s.jobs[id]; j != nil && s.state(j).Active() {
			return false
		}
	}
	return true
}

// run runs the job script of job j to its end.
func (s *system) run(j *job, req backend.SubmitRequest) {
	s.mu.Lock()
	if j.canceled {
		s.mu.Unlock()
		return
	}
	j.state, j.start = backend.Running, time.Now()
	s.mu.Unlock()
	state := backend.Completed
	cmd := exec.Command("bash", req.Script)
	cmd.Dir = req.Dir
	cmd.Env = append(append(append([]string{}, req.Environ...), req.Env...), "PBS_JOBID="+j.id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	os.MkdirAll(filepath.Dir(req.Output(j.id)), 0o755)
	if out, err := os.Create(req.Output(j.id)); err == nil {
		cmd.Stdout, cmd.Stderr = out, out
		defer out.Close()
	}
	if err := cmd.Start(); err != nil {
		state = backend.Failed
	} else {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var limit <-chan time.Time
		if j.limit > 0 {
			limit = time.After(j.limit)
		}
		select {
		case err := <-done:
			if err != nil {
				state = backend.Failed
			}
		case <-limit:
			state = backend.Timeout
		case <-j.cancel:
			state = backend.Cancelled
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if state != backend.Completed && state != backend.Failed {
			<-done
		}
	}
	s.mu.Lock()
	j.state, j.end = state, time.Now()
	s.mu.Unlock()
}

// state is j's state; an array's is its tasks' (active if any is, else
// the worst end). s.mu held.
func (s *system) state(j *job) backend.JobState {
	if j.tasks == nil {
		return j.state
	}
	worst := backend.Completed
	for _, t := range j.tasks {
		st := s.jobs[t].state
		if st.Active() {
			return backend.Running
		}
		if backend.Severity(st) > backend.Severity(worst) {
			worst = st
		}
	}
	return worst
}

func (s *system) info(j *job) backend.JobInfo {
	in := backend.JobInfo{ID: j.id, State: s.state(j), Start: j.start, End: j.end}
	for _, t := range j.tasks {
		if s.jobs[t].state.Active() {
			in.Tasks++
		}
	}
	if in.State == backend.Running && j.end.IsZero() && j.limit > 0 {
		in.End = j.start.Add(j.limit)
	}
	return in
}

// Jobs implements backend.Backend: an array's ID stands for it and its
// tasks, each reported under its own ID too.
func (b *Backend) Jobs(ctx context.Context, ids []string) (map[string]backend.JobInfo, error) {
	s := b.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]backend.JobInfo{}
	for _, id := range ids {
		j := s.jobs[id]
		if j == nil {
			out[id] = backend.JobInfo{ID: id, State: backend.Gone}
			continue
		}
		out[id] = s.info(j)
		for _, t := range j.tasks {
			out[t] = s.info(s.jobs[t])
		}
	}
	return out, nil
}

// Cancel implements backend.Backend.
func (b *Backend) Cancel(ctx context.Context, ids []string, scope backend.CancelScope) ([]string, error) {
	s := b.sys
	s.mu.Lock()
	var cancelled, targets []string
	for _, id := range ids {
		j := s.jobs[id]
		if j == nil {
			continue
		}
		tasks := j.tasks
		if len(tasks) == 0 {
			tasks = []string{id}
		}
		hit := false
		for _, t := range tasks {
			tj := s.jobs[t]
			if tj.state.Active() && !tj.canceled && (scope == backend.AllActive || tj.state == backend.Pending) {
				tj.canceled = true
				if tj.state == backend.Pending {
					tj.state, tj.end = backend.Cancelled, time.Now()
				}
				close(tj.cancel)
				targets, hit = append(targets, t), true
			}
		}
		if hit {
			cancelled = append(cancelled, id)
		}
	}
	s.mu.Unlock()
	err := backend.Poll(ctx, 10*time.Second, 20*time.Millisecond, func() (bool, error) {
		return s.ended(targets), nil
	})
	return cancelled, err
}

// Self implements backend.Backend: PBS_JOBID.
func (b *Backend) Self(ctx context.Context, req backend.SelfRequest) (backend.Self, error) {
	id := req.Env("PBS_JOBID")
	if id == "" {
		return backend.Self{}, errors.New("PBS_JOBID is not set: not inside a job")
	}
	s := b.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	self := backend.Self{ID: id, Alloc: backend.Alloc{CPUs: runtime.NumCPU()}}
	if j := s.jobs[id]; j != nil && j.limit > 0 {
		self.End = j.start.Add(j.limit)
	}
	return self, nil
}
