package farm

import (
	"github.com/farm-hpc/farm/slurm"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestScriptTimeLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		script string
		want   time.Duration
		ok     bool
	}{
		{"#!/bin/bash\n#SBATCH -t 0-00:10\n", 10 * time.Minute, true},
		{"#SBATCH --mem=4G --time=1:00:00\n", time.Hour, true},
		{"#SBATCH --time 5\n", 5 * time.Minute, true},
		{"#SBATCH -t5\n", 5 * time.Minute, true},
		{"# SBATCH -t 5\n#SBATCH --mem=1G\necho -t 5\n", 0, false},
	} {
		p := filepath.Join(dir, "js")
		os.WriteFile(p, []byte(tc.script), 0o644)
		got, ok, err := scriptTimeLimit(p, scriptsOf("#SBATCH"))
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("%q: %v %v %v; want %v %v", tc.script, got, ok, err, tc.want, tc.ok)
		}
	}
	p := filepath.Join(dir, "js")
	os.WriteFile(p, []byte("\n#SBATCH -t ten\n"), 0o644)
	if _, _, err := scriptTimeLimit(p, scriptsOf("#SBATCH")); err == nil || !strings.Contains(err.Error(), "js:2: bad run-time") {
		t.Errorf("bad time: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config")
	os.WriteFile(p, []byte("# c\nN_failed_max = 3 # inline\ndt_failed=0.5\nNJOBS_MAX=\"10\"\nRUN_DIRS=0\n"), 0o644)
	got, err := loadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{NFailedMax: 3, DtFailed: 500 * time.Millisecond, NJobsMax: 10, RunDirs: false, MaxCrashes: defaultMaxCrashes, RescueCheck: defaultRescueCheck,
		CaseKillGrace: defaultCaseKillGrace, CaseTimeMin: defaultCaseTimeMin}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if got, err := loadConfig(filepath.Join(dir, "missing")); err != nil || got != defaultConfig() {
		t.Errorf("missing config: %+v %v", got, err)
	}
	for content, msg := range map[string]string{
		"N_failed_max=5\nbogus\n": `config:2: expected KEY=value, got "bogus"`,
		"dt_failed=-1\n":          `config:1: dt_failed must be a number >= 0`,
		"WHOLE=1\n":               `config:1: unknown setting "WHOLE"`,
	} {
		os.WriteFile(p, []byte(content), 0o644)
		if _, err := loadConfig(p); err == nil || !strings.Contains(err.Error(), msg) || !IsUserError(err) {
			t.Errorf("%q: err %v, want %q", content, err, msg)
		}
	}
}

func TestOpenRefusesNonFarm(t *testing.T) {
	_, err := Open(t.TempDir(), Options{})
	if err == nil || !IsUserError(err) || !strings.Contains(err.Error(), "Non-farm directory") {
		t.Errorf("Open(empty dir) = %v", err)
	}
}

func TestInitRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644)
	if err := Init(dir, slurm.Templates()); err == nil || !IsUserError(err) {
		t.Fatalf("Init(non-empty) = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("Init wrote into a non-empty dir: %v", entries)
	}
	fresh := filepath.Join(dir, "new")
	if err := Init(fresh, slurm.Templates()); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(fresh, Options{}); err != nil {
		t.Errorf("a new farm does not open: %v", err)
	}
}
