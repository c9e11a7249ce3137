// Package templates holds the files that `farm init` writes into a new farm
// directory.
package templates

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// files holds the templates: in files/ those of the default engine
// (Slurm) and those every engine shares; in files/ENGINE/ the job scripts
// of another engine, which replace the default's.
//
//go:embed files
var files embed.FS

// Engines are the engines farm init writes job scripts for (farm init
// --engine), the default first: Slurm's #SBATCH lines, Grid Engine's #$
// lines. Their names are those of the engines (--backend).
var Engines = []string{"slurm", "sge"}

// File is one template and the mode it is written with.
type File struct {
	Name string
	Mode fs.FileMode
	Data []byte
}

// UnknownEngineError is All's error for an engine it has no templates for.
type UnknownEngineError struct{ Engine string }

func (e *UnknownEngineError) Error() string {
	return fmt.Sprintf("no templates for the engine %q: one of %s", e.Engine, strings.Join(Engines, ", "))
}

// All returns the templates for engine (one of Engines; "" is the default)
// in a fixed order.
func All(engine string) ([]File, error) {
	known := engine == ""
	for _, e := range Engines {
		known = known || e == engine
	}
	if !known {
		return nil, &UnknownEngineError{Engine: engine}
	}
	out := []File{}
	for _, n := range []struct {
		name string
		mode fs.FileMode
	}{
		{"job_script.sh", 0o755},
		{"single_case.sh", 0o755},
		{"resubmit_script.sh", 0o755},
		{"config", 0o644},
		{"table.dat", 0o644},
	} {
		b, err := files.ReadFile("files/" + engine + "/" + n.name)
		if engine == "" || errors.Is(err, fs.ErrNotExist) {
			b, err = files.ReadFile("files/" + n.name)
		}
		if err != nil {
			panic(err) // embedded at build time: cannot be missing
		}
		out = append(out, File{Name: n.name, Mode: n.mode, Data: b})
	}
	return out, nil
}
