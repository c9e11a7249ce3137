package metajob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/farm"
	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// open gets what the loop needs: the job's identity, the claim store, the
// job's status file, the case runner and the farm directory's handle. What
// it opened is closed by close, even when it fails half-way.
func (m *Metajob) open(ctx context.Context) error {
	f := m.Farm
	out, ok := m.Out.(*os.File)
	if !ok {
		return errors.New("meta-job output must be a file")
	}
	// The output file may be on the farm's filesystem: a full disk must
	// not lose what the meta-job and its cases say meanwhile.
	m.log = &lockedWriter{w: &fsretry.Writer{F: out}} // the loops of WHOLE_NODE share it
	var err error
	if m.self, err = m.Backend.Self(ctx, backend.SelfRequest{Env: m.Env.Getenv, NoEnd: m.Env.Simple}); err != nil {
		return err
	}
	if m.Env.Run < 1 {
		return fmt.Errorf("%s is not set to a run number: a meta-job must be started by 'farm submit'", farm.EnvRun)
	}
	if m.bash, err = exec.LookPath("bash"); err != nil {
		return err
	}
	m.store = f.Store()
	m.store.Job, m.store.Log = m.self.ID, m.log
	m.store.UseHint(m.Env.ClaimHint) // its first claim skips the run record's reading if vouched for
	// A restarted job (same ID) writes a file of its own: its earlier
	// incarnation may still be running on a node the batch system lost.
	m.out = out
	m.pool = m.newPool()
	capacity := status.Capacity{CPUs: m.pool.cpus(), GPUs: len(m.pool.gpus) * len(m.pool.nodes)}
	if m.sw, err = m.createStatus(capacity); err != nil {
		return err
	}
	if err := m.openLoops(); err != nil {
		return err
	}
	// RUN directories are made relative to the open farm directory: one
	// lookup at the server instead of one per component of the path.
	if m.dir, err = openFarmDir(f.Dir); err != nil {
		return err
	}
	if m.rescue = newRescuer(m); m.rescue != nil {
		m.sw.SyncStarts = !localFilesystem(m.dir.fd)
		m.store.Note = m.noteClaim
	}
	return nil
}

// createStatus creates the job's status file. The farm's directories are
// made only if it is missing (STATUSES, OUTPUT or MISC removed since the
// submit): one call at the start of each meta-job, not four.
func (m *Metajob) createStatus(c status.Capacity) (*status.Writer, error) {
	f := m.Farm
	path := f.Path(layout.StatusDir, layout.StatusFile(m.self.ID, m.self.Restart))
	sw, err := status.CreateCap(path, m.self.ID, m.self.Restart, m.Env.Run, f.Host, c, m.log)
	if !errors.Is(err, fs.ErrNotExist) {
		return sw, err
	}
	if !farm.IsFarm(f.Dir) {
		return nil, fmt.Errorf("%s, where FARM_DIR says the farm is, is not a farm directory (%w): submit the farm's jobs with 'farm submit' from its directory, which sets FARM_DIR", f.Dir, err)
	}
	if err := f.EnsureDirs(); err != nil {
		return nil, err
	}
	return status.CreateCap(path, m.self.ID, m.self.Restart, m.Env.Run, f.Host, c, m.log)
}

// close closes what open opened.
func (m *Metajob) close() {
	if m.dir != nil {
		m.dir.close()
	}
	for _, s := range m.loops {
		s.runner.close()
		s.frames.close()
	}
	if m.sw != nil {
		m.sw.Close()
	}
	if m.store != nil {
		m.store.Close()
	}
}

// caseEnv is the cases' environment: the job's, less what is set per case,
// plus METAJOB_ID.
func caseEnv(environ []string, job string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if k != "ID" && k != "COMM" && k != "METAJOB_ID" && k != "N_cases" && k != "STATUS" && k != "FARM_LOOP" {
			env = append(env, kv)
		}
	}
	return append(env, "METAJOB_ID="+job)
}

// stopWatch catches the signals that stop a job: a stop signal (time
// limit, cancel) reaches the whole job, the running case included, and is
// remembered so that the case is recorded as interrupted.
type stopWatch struct {
	sig  atomic.Int32   // the first stop signal; 0 until one came
	ch   chan struct{}  // closed at the first stop signal
	sigs chan os.Signal // from signal.Notify
	done chan struct{}  // closed when the watching goroutine has ended
}

// watch starts watching.
func (w *stopWatch) watch() {
	w.ch, w.sigs, w.done = make(chan struct{}), make(chan os.Signal, 4), make(chan struct{})
	signal.Notify(w.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	go func() {
		defer close(w.done)
		for s := range w.sigs {
			// A signal sent to the whole job already reached the case;
			// one sent to us alone is passed on to our process group (the
			// case and its worker) the first time.
			if w.sig.Swap(int32(s.(syscall.Signal))) == 0 {
				close(w.ch)
				syscall.Kill(0, s.(syscall.Signal))
			}
		}
	}()
}

// end stops watching and waits for the watching goroutine to end.
func (w *stopWatch) end() {
	signal.Stop(w.sigs)
	close(w.sigs) // no signal is sent on it once Stop has returned
	<-w.done
}

// stopped reports whether a stop signal came.
func (w *stopWatch) stopped() bool { return w.sig.Load() != 0 }
