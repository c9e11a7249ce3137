// Package templates holds the files that `farm init` writes into a new farm
// directory that every engine shares (single_case.sh, config, table.dat),
// and puts them together with an engine's job scripts, which its package
// holds (backend.Engine.Templates).
package templates

import (
	"embed"
	"fmt"
	"io/fs"

	"github.com/farm-hpc/farm/layout"
)

// files holds the templates every engine shares.
//
//go:embed files
var files embed.FS

// Scripts are the job scripts an engine gives (backend.Engine.Templates),
// with its directives: they end with the very lines that start farm.
var Scripts = []string{layout.JobScript, layout.ResubmitScript}

// File is one template and the mode it is written with.
type File struct {
	Name string
	Mode fs.FileMode
	Data []byte
}

// All returns the templates of a farm whose job scripts (Scripts) are
// those of scripts, an engine's (backend.Engine.Templates), in a fixed
// order; an error if scripts lacks one.
func All(scripts fs.FS) ([]File, error) {
	out := []File{}
	for _, n := range []struct {
		name string
		mode fs.FileMode
	}{
		{layout.JobScript, 0o755},
		{layout.SingleCase, 0o755},
		{layout.ResubmitScript, 0o755},
		{layout.Config, 0o644},
		{layout.Table, 0o644},
	} {
		var b []byte
		var err error
		if n.name == Scripts[0] || n.name == Scripts[1] {
			if scripts == nil {
				return nil, fmt.Errorf("the engine has no job-script templates")
			}
			if b, err = fs.ReadFile(scripts, n.name); err != nil {
				return nil, fmt.Errorf("the engine's templates: %w", err)
			}
		} else if b, err = files.ReadFile("files/" + n.name); err != nil {
			panic(err) // embedded at build time: cannot be missing
		}
		out = append(out, File{Name: n.name, Mode: n.mode, Data: b})
	}
	return out, nil
}
