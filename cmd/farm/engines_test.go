package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/templates"
)

// lastLine is the last line of a script that is not blank.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return lines[len(lines)-1]
}

// TestEngineTemplates: every registered engine that farm init writes job
// scripts for gives both (templates.Scripts); each ends with the very line
// that starts farm, the same for every engine; each reads in bash; its
// run-time is read by its own dialect (backend.Engine.Script) and by no
// other engine's, so that the local engine, which tries them in order,
// reads it as the engine would.
func TestEngineTemplates(t *testing.T) {
	engines := registry(noEnv, io.Discard).Engines()
	last := map[string]string{}
	n := 0
	for _, e := range engines {
		if e.Templates == nil {
			continue
		}
		n++
		if e.Script == nil || e.Edit == "" {
			t.Errorf("%s: has templates but no Script or Edit", e.Name)
			continue
		}
		files, err := templates.All(e.Templates)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		dir := t.TempDir()
		for _, f := range files {
			if f.Name != templates.Scripts[0] && f.Name != templates.Scripts[1] {
				continue
			}
			p := filepath.Join(dir, f.Name)
			os.WriteFile(p, f.Data, f.Mode)
			if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
				t.Errorf("%s: bash -n %s: %v\n%s", e.Name, f.Name, err, out)
			}
			if l := lastLine(f.Data); !strings.HasPrefix(l, `exec "${FARM_BIN:-farm}" `) {
				t.Errorf("%s: %s ends with %q, not the line that starts farm", e.Name, f.Name, l)
			} else if want, ok := last[f.Name]; ok && l != want {
				t.Errorf("%s: %s ends with %q, another engine's with %q", e.Name, f.Name, l, want)
			} else {
				last[f.Name] = l
			}
			lines := strings.Split(string(f.Data), "\n")
			for _, o := range engines {
				if o.Script == nil {
					continue
				}
				_, ok, err := o.Script.RunTime(lines)
				if own := o.Name == e.Name; ok != own || err != nil {
					t.Errorf("%s: %s: %s's dialect reads a run-time: %t, %v; want %t", e.Name, f.Name, o.Name, ok, err, own)
				}
			}
		}
	}
	if n < 2 {
		t.Errorf("%d engines with templates; want Slurm's and Grid Engine's at least", n)
	}
}
