package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// metaqQueue copies the METAQ queue METAQ's x/demo.sh makes (vendored in
// farm/testdata/metaq-demo) to a temporary directory, with the tasks
// named in priority moved to its priority/ folder, and returns it.
func metaqQueue(t *testing.T, priority ...string) string {
	t.Helper()
	q := filepath.Join(t.TempDir(), "METAQ")
	if out, err := exec.Command("cp", "-a", "../../farm/testdata/metaq-demo", q).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	os.Mkdir(filepath.Join(q, "priority"), 0o755)
	for _, p := range priority {
		if err := os.Rename(filepath.Join(q, "todo", p), filepath.Join(q, "priority", p)); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// emptyFarm makes a farm whose table.dat holds no case.
func emptyFarm(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "farm")
	if code := Run([]string{"farm", "init", dir}, new(bytes.Buffer), new(bytes.Buffer)); code != 0 {
		t.Fatalf("init: exit %d", code)
	}
	os.WriteFile(filepath.Join(dir, "table.dat"), nil, 0o644)
	return dir
}

func runIn(dir string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(append([]string{"farm", "-C", dir}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestImportMetaqDemo: the queue METAQ's demo makes, with two tasks moved
// to priority/, becomes one line a task in table.dat, the priority ones
// first, each running the script with its NODES as nodes= and its GPUS
// shared out per node, rounded up (NODES 3 GPUS 4 is gpus=2 per node;
// NODES 4 GPUS 2 is gpus=1, not 0), MIN_WC_TIME as min_time; the task
// files stay where they were. Importing again adds nothing; a task put in
// todo/ since is the only one added next time.
func TestImportMetaqDemo(t *testing.T) {
	q := metaqQueue(t, "metaq.example.task.3.sh", "metaq.example.task.6.sh")
	dir := emptyFarm(t)
	code, out, errs := runIn(dir, "import-metaq", q)
	if code != 0 {
		t.Fatalf("import-metaq: exit %d: %s%s", code, out, errs)
	}
	for _, want := range []string{"Importing 8 task(s) of the METAQ queue " + q + ": 2 from priority/, 6 from todo/.",
		"Added 2 case(s), IDs 1-2, from " + q + "/priority to table.dat.", "Added 6 case(s), IDs 3-8, from " + q + "/todo to table.dat."} {
		if !strings.Contains(out, want) {
			t.Errorf("import-metaq said %q; want %q", out, want)
		}
	}
	want := strings.Join([]string{
		"1 " + q + "/priority/metaq.example.task.3.sh #FARM nodes=3 gpus=2 min_time=124s", // NODES 3 GPUS 4
		"2 " + q + "/priority/metaq.example.task.6.sh #FARM nodes=1 gpus=3 min_time=71s",  // NODES 1 GPUS 3
		"3 " + q + "/todo/metaq.example.task.0.sh #FARM nodes=2 gpus=2 min_time=98s",      // NODES 2 GPUS 4
		"4 " + q + "/todo/metaq.example.task.1.sh #FARM nodes=2 gpus=3 min_time=10s",      // NODES 2 GPUS 5
		"5 " + q + "/todo/metaq.example.task.2.sh #FARM nodes=2 gpus=4 min_time=126s",     // NODES 2 GPUS 8
		"6 " + q + "/todo/metaq.example.task.4.sh #FARM nodes=4 gpus=2 min_time=148s",     // NODES 4 GPUS 8
		"7 " + q + "/todo/metaq.example.task.5.sh #FARM nodes=4 gpus=2 min_time=66s",      // NODES 4 GPUS 8
		"8 " + q + "/todo/metaq.example.task.7.sh #FARM nodes=4 gpus=1 min_time=13s",      // NODES 4 GPUS 2
	}, "\n") + "\n"
	table := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "table.dat"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := table(); got != want {
		t.Fatalf("table.dat:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(q, "todo", "metaq.example.task.0.sh")); err != nil {
		t.Errorf("the task file moved: %v", err)
	}

	os.MkdirAll(filepath.Join(q, "working", "machine", "job.1"), 0o755)
	os.WriteFile(filepath.Join(q, "working", "machine", "job.1", "stale.sh"), []byte("#!/bin/bash\n#METAQ NODES 1\n"), 0o755)
	code, out, errs = runIn(dir, "import-metaq", q)
	if code != 0 || !strings.Contains(out, "its 8 task(s) in priority/ and todo/ were imported before") || table() != want {
		t.Errorf("second import: exit %d, %q; table.dat changed: %v", code, out, table() != want)
	}
	if !strings.Contains(errs, "farm: note: 1 task(s) in "+q+"/working are not imported") || !strings.Contains(errs, "x/reset") {
		t.Errorf("no note of the task in working/: %q", errs)
	}

	os.WriteFile(filepath.Join(q, "todo", "new.sh"), []byte("#!/bin/bash\n#METAQ NODES 3\n#METAQ GPUS 2\nsrun -N 3 ./lqcd\n"), 0o755)
	code, out, errs = runIn(dir, "import-metaq", q)
	if code != 0 || !strings.Contains(out, "8 task(s) of "+q+" were imported before: not added again.") || !strings.Contains(out, "Added 1 case(s)") {
		t.Errorf("third import: exit %d, %q %q", code, out, errs)
	}
	if got, w := table(), want+"9 "+q+"/todo/new.sh #FARM nodes=3 gpus=1\n"; got != w {
		t.Errorf("table.dat:\n%s\nwant:\n%s", got, w)
	}
	if !strings.Contains(errs, "farm: warning: 1 task(s) start their work without a FARM_ variable (todo/new.sh:4 first)") || !strings.Contains(errs, "--nodelist=$FARM_NODELIST") {
		t.Errorf("no warning of the srun line: %q", errs)
	}
}

// A task that does not read, or cannot run, is refused with its file and
// line, and nothing is added, not even the tasks before it.
func TestImportMetaqRefuses(t *testing.T) {
	q := metaqQueue(t, "metaq.example.task.6.sh")
	dir := emptyFarm(t)
	bad := filepath.Join(q, "todo", "metaq.example.task.5.sh")
	b, _ := os.ReadFile(bad)
	os.WriteFile(bad, bytes.Replace(b, []byte("MIN_WC_TIME 66"), []byte("MIN_WC_TIME 2hrs"), 1), 0o755)
	code, out, errs := runIn(dir, "import-metaq", q)
	if code != 1 || !strings.Contains(errs, "todo/metaq.example.task.5.sh:4: #METAQ MIN_WC_TIME 2hrs: want a time as METAQ reads it: 2hr, 30min") {
		t.Errorf("exit %d: %q %q", code, out, errs)
	}
	os.WriteFile(bad, b, 0o755)
	os.Chmod(bad, 0o644)
	code, _, errs = runIn(dir, "import-metaq", q)
	if code != 1 || !strings.Contains(errs, "todo/metaq.example.task.5.sh is not executable") || !strings.Contains(errs, "chmod +x") {
		t.Errorf("not executable: exit %d: %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "table.dat")); len(b) != 0 {
		t.Errorf("table.dat: %q; want nothing added", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "MISC", "metaq.imported")); err == nil {
		t.Errorf("MISC/metaq.imported written")
	}
	code, _, errs = runIn(dir, "import-metaq", t.TempDir())
	if code != 1 || !strings.Contains(errs, "is not a METAQ queue: it has no todo/ or priority/ folder") {
		t.Errorf("no queue: exit %d: %q", code, errs)
	}
	if code, _, errs = runIn(dir, "import-metaq"); code != exitUsage {
		t.Errorf("no argument: exit %d: %q", code, errs)
	}
}
