package metajob

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
	"golang.org/x/sys/unix"
)

// runOne runs case c and records its start and end. It returns the case's
// exit code and duration, or why the loop ends (a stop signal came, the
// run superseded), or an error.
//
// A case with a time limit (limit > 0) that runs past it is ended by its
// timer (timelimit.go) and recorded timed out: code is then timedOutCode.
func (m *Metajob) runOne(ctx context.Context, s *loop, c tablefmt.Case, p status.Placement, set caseSetting, limit time.Duration) (code int, d time.Duration, why stop, err error) {
	start := time.Now()
	m.swMu.Lock()
	err = m.sw.StartAt(c.ID, start, p)
	m.swMu.Unlock()
	if err != nil {
		return 0, 0, going, err
	}
	why, err = m.startsAfterRecord(ctx)
	if why != going || err != nil {
		// Its cases were rescued while it was stopped, or its run was
		// superseded: this one too is left, and never runs here.
		m.swMu.Lock()
		m.sw.Interrupted(c.ID, 0, start, 0)
		m.swMu.Unlock()
		return 0, 0, why, err
	}
	var timer *caseTimer
	if limit > 0 {
		timer = m.startTimer(s.runner, c.ID, start, limit)
	}
	code, sig, err := m.runCase(s.runner, c, set, limit > 0)
	d = time.Since(start)
	u := s.runner.use()
	if timer != nil {
		if sent := timer.end(); sent != 0 && err == nil {
			return m.timedOut(c, int(sent), start, d, u)
		}
	}
	if err != nil {
		return 0, 0, going, fmt.Errorf("case %d: %w", c.ID, err)
	}
	stopped := m.stop.stopped()
	if !stopped && sig != 0 {
		// A stop signal sent to the whole job (Slurm's time limit,
		// scancel) kills the case and reaches us at the same time, but
		// Go hands it to us through a channel, which may come after the
		// case's exit status: give it a moment.
		select {
		case <-m.stop.ch:
			stopped = true
		case <-time.After(500 * time.Millisecond):
		}
	}
	if stopped && limit > 0 {
		m.killLeftAfterStop(s.runner) // its process group left the job's
	}
	if stopped && sig != 0 {
		// Killed by the job's stop signal: the case did not fail, it was
		// cut short.
		m.swMu.Lock()
		m.sw.InterruptedUse(c.ID, sig, start, d, u)
		m.swMu.Unlock()
		return 0, 0, stopSignal, nil
	}
	m.swMu.Lock()
	err = m.sw.EndUse(c.ID, code, start, d, u)
	m.swMu.Unlock()
	if err != nil {
		return 0, 0, going, err
	}
	if stopped { // the case ended by itself as the stop came
		return 0, 0, stopSignal, nil
	}
	return code, d, going, nil
}

// runPacked runs case c, which wants w, on what it was granted: bound to
// its CPUs and with its settings when it is managed.
func (m *Metajob) runPacked(ctx context.Context, s *loop, t turn, g grant) (int, time.Duration, stop, error) {
	c, w := t.c, t.w
	var cpus []int
	if w.managed {
		cpus = m.pool.bound(g)
	}
	s.runner.bind(cpus) // nil: the job's CPUs, as an unmanaged case has them
	p := status.Placement{CPUs: cpus}
	if w.managed && len(g.parts) > 0 {
		p.GPUs = g.parts[0].gpus
	}
	if t.several {
		p.Loop = s.k
	}
	if s.frames != nil {
		f := s.frames.begin(c.ID)
		p.Framed, p.Out, p.Err = f.Framed, f.Out, f.Err
	}
	p.Retry, p.Why, p.From = s.retry, s.why, s.from
	set := m.pool.setting(w, g, cpus, m.jobSetsOMP)
	names, per := m.pool.nodesOf(g)
	if len(m.pool.nodes) > 1 {
		p.Nodes = backend.CompressHosts(names)
	}
	hostfile, machinefile := s.hostfiles(names, per, m.log)
	set.nodes = nodeEnv(names, per, hostfile, machinefile)
	return m.runOne(ctx, s, c, p, set, t.limit)
}

// hostfiles returns the paths of loop s's hostfile and machine file for a
// case on nodes names with cpus each (pack.go's hostfiles), written in
// its runner's node-local directory when they change; "" if it has none
// or they cannot be written (said once on w).
func (s *loop) hostfiles(names []string, cpus []int, w io.Writer) (string, string) {
	dir := s.runner.scratch()
	if dir == "" || len(names) == 0 {
		return "", ""
	}
	key := fmt.Sprint(names, cpus)
	h, mf := filepath.Join(dir, "hostfile"), filepath.Join(dir, "machinefile")
	if key == s.hostsFor {
		return h, mf
	}
	hosts, machines := hostfiles(names, cpus)
	for _, f := range []struct{ path, text string }{{h, hosts}, {mf, machines}} {
		if err := atomicfile.WriteBytes(f.path, 0o644, []byte(f.text)); err != nil {
			if !s.hostsFailed {
				fmt.Fprintf(w, "farm: writing the hostfile of loop %d: %v; its cases get no FARM_HOSTFILE\n", s.k, err)
			}
			s.hostsFor, s.hostsFailed = "", true
			return "", ""
		}
	}
	s.hostsFor = key
	return h, mf
}

// runCase makes the case's directory and runs single_case.sh for c.
// With group, it runs in a process group of its own.
func (m *Metajob) runCase(r caseRunner, c tablefmt.Case, set caseSetting, group bool) (code, sig int, err error) {
	id := strconv.FormatInt(c.ID, 10)
	table := c.Table // the table its Line is in: the run's own, or one 'farm add' queued
	if table == "" {
		table = m.runTable()
	}
	if m.Farm.Config.RunDirs {
		// Made here, not in single_case.sh: a mkdir process per case would
		// cost more than the rest of the case's overhead together. No
		// inode left, a quota, an I/O error: retried, as a claim is.
		r := fsretry.Retrier{Log: m.log}
		if err := r.Do(context.Background(), func() error { return m.dir.mkdir("RUN" + id) }); err != nil {
			return 0, 0, err
		}
	}
	return r.run(caseRequest{ID: id, Comm: c.Command, Table: table, Line: c.Line, TableLines: m.linesOf(table), Set: set, Group: group})
}

// linesOf is the number of lines of table, for scripts written for META
// (N_cases): counted once per meta-job and table; 0 if it cannot be read.
// (The count is made by the loop, outside the owner, as it was outside
// the job's lock: two loops may count at once.)
func (m *Metajob) linesOf(table string) int64 {
	var n int64
	var ok bool
	m.do(func(o *owner) { n, ok = o.tableLines[table] })
	if ok || table == "" {
		return n
	}
	n, _ = tablefmt.CountLines(m.Farm.Path(table))
	m.do(func(o *owner) {
		if o.tableLines == nil {
			o.tableLines = map[string]int64{}
		}
		o.tableLines[table] = n
	})
	return n
}

// farmDir is the farm directory, open, for the loops' *at calls: RUN
// directories are made relative to it, one lookup at the server instead
// of one per component of the path.
type farmDir struct {
	path string
	mu   sync.Mutex // the loops share fd
	fd   *os.File
}

// openFarmDir opens the farm directory at path.
func openFarmDir(path string) (*farmDir, error) {
	fd, err := os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &farmDir{path: path, fd: fd}, nil
}

// mkdir makes directory name in the farm directory, once; one there
// already will do.
func (d *farmDir) mkdir(name string) error {
	d.mu.Lock()
	fd := d.fd
	d.mu.Unlock()
	err := unix.Mkdirat(int(fd.Fd()), name, 0o755)
	if err == unix.ESTALE {
		// The farm directory's handle went stale (an NFS failover): look
		// it up again. (The old one stays open: another loop may be
		// using it.)
		d.mu.Lock()
		if d.fd == fd {
			if fd, oerr := os.OpenFile(d.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); oerr == nil {
				d.fd = fd
			}
		}
		d.mu.Unlock()
	}
	if err != nil && err != unix.EEXIST {
		return &os.PathError{Op: "mkdir", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// close closes the farm directory's handle.
func (d *farmDir) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fd.Close()
}
