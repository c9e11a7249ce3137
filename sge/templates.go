package sge

import (
	"embed"
	"io/fs"
)

// templateFiles holds the engine's job scripts for farm init (templates.Scripts).
//
//go:embed templates
var templateFiles embed.FS

// Templates are the engine's job scripts for farm init --engine sge
// (backend.Engine.Templates).
func Templates() fs.FS {
	sub, err := fs.Sub(templateFiles, "templates")
	if err != nil {
		panic(err) // embedded at build time
	}
	return sub
}
