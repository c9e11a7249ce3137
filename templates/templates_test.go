package templates

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestAll: the templates are the engine's job scripts and the shared
// files, in a fixed order; an engine without one of the scripts is an
// error; the shared scripts read in bash. (Each engine's job scripts are
// checked in cmd/farm, TestEngineTemplates, for every registered engine.)
func TestAll(t *testing.T) {
	scripts := fstest.MapFS{
		"job_script.sh":      {Data: []byte("#!/bin/bash\n# js\n")},
		"resubmit_script.sh": {Data: []byte("#!/bin/bash\n# rs\n")},
	}
	files, err := All(scripts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, " "); got != "job_script.sh single_case.sh resubmit_script.sh config table.dat" {
		t.Errorf("templates %s", got)
	}
	if string(files[0].Data) != "#!/bin/bash\n# js\n" || string(files[2].Data) != "#!/bin/bash\n# rs\n" || files[0].Mode != 0o755 || files[3].Mode != 0o644 {
		t.Errorf("job scripts not the engine's: %+v", files)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, files[1].Name)
	os.WriteFile(p, files[1].Data, files[1].Mode)
	if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
		t.Errorf("bash -n %s: %v\n%s", files[1].Name, err, out)
	}
	if _, err := All(fstest.MapFS{"job_script.sh": {Data: []byte("x")}}); err == nil || !strings.Contains(err.Error(), "resubmit_script.sh") {
		t.Errorf("All(no resubmit_script.sh) = %v", err)
	}
	if _, err := All(nil); err == nil {
		t.Error("All(nil) accepted")
	}
}
