// Package templates holds the files that `farm init` writes into a new farm
// directory.
package templates

import (
	"embed"
	"io/fs"
)

//go:embed files
var files embed.FS

// File is one template and the mode it is written with.
type File struct {
	Name string
	Mode fs.FileMode
	Data []byte
}

// All returns the templates in a fixed order.
func All() []File {
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
		b, err := files.ReadFile("files/" + n.name)
		if err != nil {
			panic(err) // embedded at build time: cannot be missing
		}
		out = append(out, File{Name: n.name, Mode: n.mode, Data: b})
	}
	return out
}
