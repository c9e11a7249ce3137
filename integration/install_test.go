package integration

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/internal/testreq"
)

// TestMakeInstall follows README's install step: make install with a PREFIX
// puts one static binary (no dynamic loader, no shared libraries: the one
// file to copy to a login node) in PREFIX/bin and its bash completion where
// bash-completion looks for it, and both work from there.
func TestMakeInstall(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"make", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testreq.Skip(t, "FARM_REQUIRE_LINUX", tool+" is not installed")
		}
	}
	tmp := t.TempDir()
	prefix := filepath.Join(tmp, "pfx")
	// BIN elsewhere than bin/farm: make test's own binary is left alone.
	cmd := exec.Command("make", "-s", "-C", "..", "install", "PREFIX="+prefix, "BIN="+filepath.Join(tmp, "built-farm"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	farmPath := filepath.Join(prefix, "bin", "farm")
	f, err := elf.Open(farmPath)
	if err != nil {
		t.Fatalf("make install left no ELF binary at %s: %v", farmPath, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s asks for a dynamic loader: not one file to copy to a login node", farmPath)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", farmPath, libs)
	}
	f.Close()
	out, err := exec.Command(farmPath, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "farm submit N") {
		t.Errorf("installed farm --help: %v\n%s", err, out)
	}
	// make sets the version from git: not the fallback of a bare go build.
	out, err = exec.Command(farmPath, "--version").CombinedOutput()
	if v := strings.TrimSpace(string(out)); err != nil || !strings.HasPrefix(v, "farm ") || strings.Contains(v, "(devel)") {
		t.Errorf("installed farm --version: %v, %q", err, v)
	}
	compPath := filepath.Join(prefix, "share", "bash-completion", "completions", "farm")
	installed, err := os.ReadFile(compPath)
	if err != nil {
		t.Fatalf("no bash completion installed: %v", err)
	}
	want, err := exec.Command(farmPath, "completion", "bash").Output()
	if err != nil || !bytes.Equal(installed, want) {
		t.Errorf("installed completion differs from 'farm completion bash' (%v)", err)
	}
	if _, err := os.Stat(compPath + ".tmp"); err == nil {
		t.Errorf("make install left %s.tmp behind", compPath)
	}
	// bash loads it and binds it to farm.
	out, err = exec.Command("bash", "-c", "source "+compPath+" && complete -p farm").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "farm") {
		t.Errorf("bash could not load the installed completion: %v\n%s", err, out)
	}
}
