// Package farm implements the life of a farm: its directory, submitting and
// resubmitting meta-jobs through a backend (package backend), the job
// records, and the reports users read. The meta-job loop that runs inside
// the jobs is package metajob; the claims, package casetable; the status
// records, package status.
package farm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/backend"
	"github.com/farm-hpc/farm/casetable"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/proc"
	"github.com/farm-hpc/farm/templates"
)

// UserError is an error caused by the user's input or the farm's state; its
// message says what to do. The CLI prints it as one line.
type UserError struct{ Msg string }

func (e *UserError) Error() string { return e.Msg }

// Userf makes a UserError.
func Userf(format string, args ...any) error { return &UserError{Msg: fmt.Sprintf(format, args...)} }

// IsUserError reports whether err is (or wraps) a UserError.
func IsUserError(err error) bool {
	var u *UserError
	return errors.As(err, &u)
}

// Format is how a report is printed.
type Format int

// Report formats.
const (
	Text Format = iota // a table for people
	JSON               // JSON, for scripts
)

// Farm is an open farm directory.
type Farm struct {
	Dir    string
	Config Config
	Host   string
	Out    io.Writer // messages for the user

	backends backend.Opener
	// note is what the last load of the status records found to say of
	// table.dat (tableNote), until a reader says it, once.
	note string
}

// Options are what the command that opens a farm gives it.
type Options struct {
	Out io.Writer // messages for the user; none if nil
	// Backends opens the batch systems the farm's jobs run on, by name
	// (cmd/farm's registry). Commands that submit or ask about jobs need
	// it.
	Backends backend.Opener
	// Reading is set by the commands that only read the farm or cancel
	// its jobs (Status, query, list, wait, report, kill, prune, repair,
	// clean without --yes): a config that does not read, or a missing
	// job_script.sh or single_case.sh, does not stop them. They get the
	// default settings and one warning line on stderr; the commands that
	// start jobs or change what the farm runs refuse until it is fixed.
	Reading bool
	// InJob is set by the commands that run inside a job 'farm submit'
	// started (farm metajob, farm autojob): the templates are not looked
	// up here (the job script runs; the meta-job opens single_case.sh, and
	// says so if it is missing), which spares every meta-job of a farm
	// two lookups at its start.
	InJob bool
}

// farmMarks are the entries of a farm directory, any one of which makes
// it a farm (one whose scripts or config are damaged, maybe): a directory
// with none is no farm. table.dat is none of them: a directory of the
// user's with a table.dat (their home, say) is not a farm.
var farmMarks = []string{layout.JobScript, layout.SingleCase, layout.MiscDir, layout.StatusDir}

// Open opens the farm in dir, checking that it is one: a directory with
// job_script.sh, single_case.sh and a config that reads (or none). With
// opt.Reading, a farm missing either script, or whose config does not
// read, is opened all the same, with the default settings and a warning;
// a directory with none of farmMarks is never a farm.
func Open(dir string, opt Options) (*Farm, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var problems []string
	fix := "it is fixed"
	templates := []string{layout.JobScript, layout.SingleCase}
	if opt.InJob {
		templates = nil
	}
	for _, name := range templates {
		if _, err := os.Stat(filepath.Join(abs, name)); err != nil {
			if !isFarm(abs) {
				return nil, Userf("Non-farm directory %s (none of %s, %s, %s/ or %s/): cd into a farm directory, or make one with 'farm init DIR'",
					abs, farmMarks[0], farmMarks[1], farmMarks[2], farmMarks[3])
			}
			if !opt.Reading {
				return nil, Userf("%s is missing from the farm %s: restore it (the template is in any new farm: 'farm init DIR')", name, abs)
			}
			problems = append(problems, name+" is missing")
			fix = "it is restored (the template is in any new farm: 'farm init DIR')"
		}
	}
	cfg, err := loadConfig(filepath.Join(abs, layout.Config))
	if err != nil && !(opt.Reading && IsUserError(err)) {
		return nil, err
	}
	if err != nil {
		cfg = defaultConfig()
		problems = append(problems, err.Error())
	}
	if len(problems) > 1 {
		fix = "they are fixed"
	}
	if len(problems) > 0 {
		how := "reading the farm"
		if err != nil {
			how = "reading the farm with the default settings"
		}
		fmt.Fprintf(os.Stderr, "farm: warning: %s; %s: 'farm submit' and 'farm resubmit' refuse until %s\n", strings.Join(problems, "; "), how, fix)
	}
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	return &Farm{Dir: abs, Config: cfg, Host: hostName(), Out: out, backends: opt.Backends}, nil
}

// isFarm reports whether dir holds any of farmMarks.
// IsFarm reports whether dir is a farm directory (one of farmMarks is in it).
func IsFarm(dir string) bool { return isFarm(dir) }

func isFarm(dir string) bool {
	for _, name := range farmMarks {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// openBackend opens the backend called name ("" for the default) for the
// farm.
func (f *Farm) openBackend(ctx context.Context, name string) (backend.Backend, error) {
	if f.backends == nil {
		return nil, errors.New("farm opened without backends")
	}
	return f.backends.Open(ctx, name, f.Dir)
}

// hostName names this host in status records and farm.log, for people to
// read (one word: records are split on spaces). Nothing is decided by it:
// PIDs are judged by proc.HostID.
func hostName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	return strings.ReplaceAll(host, " ", "_")
}

// Path joins parts to the farm directory.
func (f *Farm) Path(parts ...string) string {
	return filepath.Join(append([]string{f.Dir}, parts...)...)
}

// EnsureDirs makes the farm's working directories.
func (f *Farm) EnsureDirs() error {
	for _, d := range []string{layout.StatusDir, layout.OutputDir, layout.MiscDir} {
		if err := os.MkdirAll(f.Path(d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Store returns the farm's claim store; Close it when done. It makes
// nothing: a command that writes the state makes MISC first (EnsureDirs),
// so that one refused, or one that only reads, leaves the farm as it was.
func (f *Farm) Store() *casetable.Store {
	return casetable.NewStore(f.Dir, f.Path(layout.MiscDir))
}

// Log appends a timestamped line to farm.log. Only commands run by the user
// and the auto-resubmit job write it, one at a time.
func (f *Farm) Log(format string, args ...any) {
	line := time.Now().Format("2006-01-02 15:04:05") + " " + fmt.Sprintf(format, args...) + "\n"
	fh, err := os.OpenFile(f.Path(layout.Log), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fh.WriteString(line)
	fh.Close()
}

// Init makes a new farm directory with the templates every engine shares
// and scripts, an engine's job scripts (backend.Engine.Templates), which
// carry its directives. It refuses an existing directory that is not empty, so
// nothing is overwritten. The templates are written into a temporary
// directory beside dir, which is renamed into place once complete: an
// interrupted init (a full disk) leaves no half-made farm, and the
// temporary directory is removed.
func Init(dir string, scripts fs.FS) error { return InitBackend(dir, scripts, "") }

// InitBackend is Init, and with a backend name also writes it to the new
// config's BACKEND ('farm init --backend NAME'), as farm submit --backend
// NAME would: the farm's backend from then on. The name is checked by the
// caller.
func InitBackend(dir string, scripts fs.FS, backendName string) error {
	return InitWith(dir, scripts, InitOptions{Backend: backendName})
}

// InitWith is Init with what opt adds: the backend (InitBackend), and a
// table.dat of a parameter sweep's cases ('farm init --sweep').
func InitWith(dir string, scripts fs.FS, opt InitOptions) error {
	backendName := opt.Backend
	files, err := templates.All(scripts)
	if err != nil {
		return Userf("%v (nothing was made)", err)
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return Userf("%s exists and is not a directory; give 'farm init' a new directory name (nothing was changed)", dir)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return Userf("%s exists and is not empty; give 'farm init' a new directory name (nothing was changed)", dir)
	} else if err != nil && !os.IsNotExist(err) {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(abs), proc.NewMode(0o777)); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".init-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	for _, t := range files {
		if err := os.WriteFile(filepath.Join(tmp, t.Name), t.Data, t.Mode); err != nil {
			return fmt.Errorf("%s: %w (nothing was made)", dir, err)
		}
	}
	if opt.Sweep != nil {
		if err := writeSweepTable(tmp, opt); err != nil {
			return err
		}
	}
	if backendName != "" {
		if err := (&Farm{Dir: tmp}).recordBackend(backendName, "farm init --backend "+backendName); err != nil {
			return fmt.Errorf("%s: %w (nothing was made)", dir, err)
		}
	}
	if err := os.Chmod(tmp, proc.NewMode(0o777)); err != nil {
		return err
	}
	// rename(2) replaces dir if it is an empty directory, and fails if it
	// has been filled meanwhile (os.Rename refuses any directory).
	if err := syscall.Rename(tmp, abs); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return Userf("%s exists and is not empty; give 'farm init' a new directory name (nothing was changed)", dir)
		}
		return err
	}
	return nil
}
