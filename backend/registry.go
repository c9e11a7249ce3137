package backend

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
)

// Engine is how an engine is registered: its name, whether it can be used
// here, and how to open it for a farm.
type Engine struct {
	// Name is what --backend takes and what the farm's job records keep.
	Name string
	// Available returns "" when the engine can be used on this host, or a
	// short reason why not ("sbatch not found"). It is asked only to pick
	// the default engine. nil means always available.
	Available func(ctx context.Context) string
	// Open returns the engine's backend for the farm directory dir.
	Open func(dir string) Backend
	// Templates holds the engine's job scripts for farm init --engine
	// Name (templates.Scripts: job_script.sh, resubmit_script.sh), which
	// carry its directives, and Edit names those a user edits first
	// ("#SBATCH -t, -A"); nil for an engine farm init writes none for (the
	// local one, which runs every other engine's).
	Templates fs.FS
	Edit      string
	// Script is the engine's job-script dialect (its backends'
	// Capabilities.Scripts[0]); nil for an engine that has none of its
	// own (the local one, which reads every other engine's: Scripts).
	Script Script
	// Options are the options of the engine's submit command (sbatch's,
	// qsub's), as typed before a value: "--mem", "-A". farm submit passes
	// these to it even when they look like a mistyped flag of farm's own
	// ("--mem" is two letters from --yes); nil for an engine without one.
	Options []string
}

// Engines returns the registered engines, in order.
func (r *Registry) Engines() []Engine { return r.engines }

// Scripts returns the job-script dialects of engines, in order, leaving out
// those that have none.
func Scripts(engines []Engine) []Script {
	var out []Script
	for _, e := range engines {
		if e.Script != nil {
			out = append(out, e.Script)
		}
	}
	return out
}

// Opener finds a backend by name for a farm directory. The Registry is the
// one the farm command uses; tests may give their own.
type Opener interface {
	Open(ctx context.Context, name, dir string) (Backend, error)
}

// Registry is the list of engines, in order of preference for the default.
type Registry struct {
	engines []Engine
	// Notice, if set, is told when the default is not the first engine,
	// and why.
	Notice func(msg string)
}

// NewRegistry registers engines, most preferred first: name "" or "auto"
// picks the first that is Available.
func NewRegistry(engines ...Engine) *Registry {
	return &Registry{engines: engines}
}

// Names returns the registered engines' names, in order.
func (r *Registry) Names() []string {
	var names []string
	for _, e := range r.engines {
		names = append(names, e.Name)
	}
	return names
}

// UnknownError is the error for a name no engine has.
type UnknownError struct {
	Name  string
	Known []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown backend %q: use --backend %s", e.Name, strings.Join(e.Known, " or --backend "))
}

// Check returns an *UnknownError if name is neither an engine's name nor
// "" or "auto".
func (r *Registry) Check(name string) error {
	if name == "" || name == "auto" {
		return nil
	}
	for _, e := range r.engines {
		if e.Name == name {
			return nil
		}
	}
	return &UnknownError{Name: name, Known: r.Names()}
}

// Open implements Opener.
func (r *Registry) Open(ctx context.Context, name, dir string) (Backend, error) {
	if err := r.Check(name); err != nil {
		return nil, err
	}
	var skipped, why []string
	for _, e := range r.engines {
		if name != "" && name != "auto" {
			if e.Name == name {
				return e.Open(dir), nil
			}
			continue
		}
		if e.Available != nil {
			if reason := e.Available(ctx); reason != "" {
				skipped, why = append(skipped, e.Name), append(why, reason)
				continue
			}
		}
		if len(skipped) > 0 && r.Notice != nil {
			r.Notice(fmt.Sprintf("farm: %s; using the %s backend (--backend %s to insist)", strings.Join(why, ", "), e.Name, strings.Join(skipped, " or --backend ")))
		}
		return e.Open(dir), nil
	}
	if len(skipped) == 0 {
		return nil, fmt.Errorf("no backend is registered")
	}
	return nil, fmt.Errorf("no backend can be used here (%s: %s)", strings.Join(skipped, ", "), strings.Join(why, ", "))
}
