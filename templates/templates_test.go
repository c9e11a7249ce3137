package templates

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lastLine is the last line of a script that is not blank.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return lines[len(lines)-1]
}

// TestEngines: Slurm's templates are the default; Grid Engine's differ
// only in the job scripts, which carry #$ lines and no #SBATCH one, and
// end with the very lines that start farm, as Slurm's do; every script
// reads in bash.
func TestEngines(t *testing.T) {
	def, err := All("")
	if err != nil {
		t.Fatal(err)
	}
	slurm, err := All("slurm")
	if err != nil {
		t.Fatal(err)
	}
	sge, err := All("sge")
	if err != nil {
		t.Fatal(err)
	}
	if len(def) != 5 || len(slurm) != 5 || len(sge) != 5 {
		t.Fatalf("%d, %d and %d templates, want 5", len(def), len(slurm), len(sge))
	}
	for i := range def {
		d, sl, ge := def[i], slurm[i], sge[i]
		if d.Name != sl.Name || d.Name != ge.Name || d.Mode != sl.Mode || d.Mode != ge.Mode || !bytes.Equal(d.Data, sl.Data) {
			t.Errorf("%s: the default and Slurm's templates differ", d.Name)
		}
		script := d.Name == "job_script.sh" || d.Name == "resubmit_script.sh"
		if script == bytes.Equal(d.Data, ge.Data) {
			t.Errorf("%s: Grid Engine's is the same as Slurm's: %t, want %t", d.Name, !script, script)
		}
		if !script {
			continue
		}
		if lastLine(ge.Data) != lastLine(d.Data) || !strings.HasPrefix(lastLine(d.Data), `exec "${FARM_BIN:-farm}" `) {
			t.Errorf("%s: Grid Engine's ends with %q, Slurm's with %q", d.Name, lastLine(ge.Data), lastLine(d.Data))
		}
		for _, l := range strings.Split(string(ge.Data), "\n") {
			if strings.HasPrefix(l, "#SBATCH") {
				t.Errorf("%s: Grid Engine's has %q", d.Name, l)
			}
		}
		for _, l := range strings.Split(string(d.Data), "\n") {
			if strings.HasPrefix(l, "#$") {
				t.Errorf("%s: Slurm's has %q", d.Name, l)
			}
		}
		for _, want := range []string{"\n#$ -l h_rt=00:10:00\n", "\n##$ -P project\n", "\n#$ -S /bin/bash\n", "99", "100", "Eqw"} {
			if !bytes.Contains(ge.Data, []byte(want)) {
				t.Errorf("%s: Grid Engine's lacks %q", d.Name, want)
			}
		}
	}
	for _, want := range []string{"\n##$ -l h_vmem=4G\n", "#$ -pe smp NWHOLE\n", "qconf -spl", "site-specific"} {
		if !bytes.Contains(sge[0].Data, []byte(want)) {
			t.Errorf("Grid Engine's job_script.sh lacks %q", want)
		}
	}

	dir := t.TempDir()
	for _, set := range [][]File{slurm, sge} {
		for _, f := range set {
			if !strings.HasSuffix(f.Name, ".sh") {
				continue
			}
			p := filepath.Join(dir, f.Name)
			os.WriteFile(p, f.Data, f.Mode)
			if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
				t.Errorf("bash -n %s: %v\n%s", f.Name, err, out)
			}
		}
	}
}

func TestUnknownEngine(t *testing.T) {
	_, err := All("pbs")
	var ue *UnknownEngineError
	if !errors.As(err, &ue) || err.Error() != `no templates for the engine "pbs": one of slurm, sge` {
		t.Errorf("All(pbs): %v", err)
	}
	if _, err := All("../files"); err == nil {
		t.Error("All(../files) accepted")
	}
}
