package sge

import (
	"bytes"
	"io/fs"
	"testing"
)

// TestTemplates: Grid Engine's job scripts carry what a Grid Engine user
// edits (farm init --engine sge). That they end with farm's lines and read
// in bash is checked for every engine in cmd/farm (TestEngineTemplates).
func TestTemplates(t *testing.T) {
	for _, name := range []string{"job_script.sh", "resubmit_script.sh"} {
		b, err := fs.ReadFile(Templates(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\n#$ -l h_rt=00:10:00\n", "\n##$ -P project\n", "\n#$ -S /bin/bash\n", "99", "100", "Eqw"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
	b, _ := fs.ReadFile(Templates(), "job_script.sh")
	for _, want := range []string{"\n##$ -l h_vmem=4G\n", "#$ -pe smp NWHOLE\n", "qconf -spl", "site-specific"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("job_script.sh lacks %q", want)
		}
	}
}
