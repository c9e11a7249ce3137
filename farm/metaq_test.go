package farm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/tablefmt"
)

// METAQ's flags, in the forms METAQ's x/metaq_lib.sh and x/seconds read,
// become the #FARM part of a line that casetable reads back to the same
// needs; what METAQ would read as nothing is refused with the line.
func TestParseMetaqTask(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		script string
		want   string // the #FARM part, or the error's text
		err    bool
	}{
		{"#METAQ NODES 3\n#METAQ GPUS 2\n", "nodes=3 gpus=1", false}, // per node, rounded up: never 0
		{"#METAQ NODES 5\n#METAQ GPUS 1\n", "nodes=5 gpus=1", false},
		{"#METAQ NODES 2\n#METAQ GPUS 8\n", "nodes=2 gpus=4", false},
		{"#METAQ NODES 2\n", "nodes=2", false},                // no GPUS: its nodes whole
		{"#METAQ NODES 2\n#METAQ GPUS 0\n", "nodes=2", false}, // as METAQ leaves them: visible
		{"#METAQ GPUS 2\n", "gpus=2", false},                  // no NODES: 0 nodes to METAQ
		{"#METAQ PROJECT x\n", "cpus=1", false},
		{"   #METAQ\tNODES   4  # four\n\t#METAQ GPUS\t4\n", "nodes=4 gpus=1", false},
		{"#METAQ NODES 1\n#METAQ NODES 7\n", "nodes=1", false}, // the first counts
		{"echo '#METAQ NODES 9'\n#METAQ NODES 1\n", "nodes=1", false},
		{"#!/bin/bash\n#METAQ NODES 1\n#METAQ MIN_WC_TIME 2hr\n", "nodes=1 min_time=2h", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 30min\n", "nodes=1 min_time=30m", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 1:30:00\n", "nodes=1 min_time=90m", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 90:00\n", "nodes=1 min_time=90m", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 5400\n", "nodes=1 min_time=90m", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 98\n", "nodes=1 min_time=98s", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 1d\n", "nodes=1 min_time=24h", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 1-00:30:00\n", "nodes=1 min_time=1470m", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 1:30.5\n", "nodes=1 min_time=91s", false},
		{"#METAQ NODES 1\n#METAQ MIN_WC_TIME 0\n", "nodes=1", false},
		{"#METAQ NODES 1\r\n#METAQ GPUS 2\r\n", "nodes=1 gpus=2", false},
		{"#METAQ NODES=2\n", `task.sh:1: "#METAQ NODES=2": METAQ reads a flag and its value apart`, true},
		{"#METAQ nodes 2\n", `task.sh:1: #METAQ nodes: METAQ reads only capitals`, true},
		{"#METAQ NODES 1\n#METAQ GPUS\n", `task.sh:2: #METAQ GPUS has no value`, true},
		{"#METAQ NODES 2.5\n", `task.sh:1: #METAQ NODES 2.5: want a whole number`, true},
		{"#METAQ NODES -1\n", `want a whole number`, true},
		{"#METAQ MIN_WC_TIME 2h\n", `task.sh:1: #METAQ MIN_WC_TIME 2h: want a time as METAQ reads it`, true},
		{"#METAQ MIN_WC_TIME 2hrs\n", `MIN_WC_TIME 2hrs: want a time`, true},
		{"#METAQ MIN_WC_TIME 1-30:00\n", `want a time`, true},
		{"#METAQ MIN_WC_TIME 400d\n", `at most 365 days`, true},
	} {
		p := filepath.Join(dir, "task.sh")
		if err := os.WriteFile(p, []byte(tc.script), 0o755); err != nil {
			t.Fatal(err)
		}
		task, err := ParseMetaqTask(p, "task.sh")
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: err %v; want %q", tc.script, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.script, err)
			continue
		}
		line := task.Line()
		if want := p + " #FARM " + tc.want; line != want {
			t.Errorf("%q: line %q; want %q", tc.script, line, want)
		}
		cmd, needs, err := tablefmt.ParseNeeds(line)
		if err != nil || cmd != p {
			t.Errorf("%q: casetable reads %q as %q, %v", tc.script, line, cmd, err)
		}
		if task.Nodes > 0 && task.GPUs > 0 && needs.GPUs*needs.Nodes < task.GPUs {
			t.Errorf("%q: %d GPUs on each of %d nodes: fewer than the task's %d", tc.script, needs.GPUs, needs.Nodes, task.GPUs)
		}
		if needs.MinTime != task.MinWC {
			t.Errorf("%q: min_time %v; the task's MIN_WC_TIME is %v", tc.script, needs.MinTime, task.MinWC)
		}
	}
}

// A path the shell would split is quoted; casetable reads the quoted path
// as the command.
func TestMetaqLineQuotes(t *testing.T) {
	task := MetaqTask{Path: "/q/todo/my task's.sh", Nodes: 1, MinWC: 75 * time.Second}
	if got, want := task.Line(), `'/q/todo/my task'\''s.sh' #FARM nodes=1 min_time=75s`; got != want {
		t.Errorf("line %q; want %q", got, want)
	}
}

// A task that starts its work with srun without the case's nodes is
// found, so that import-metaq can say so; one that uses them is not.
func TestMetaqLaunch(t *testing.T) {
	dir := t.TempDir()
	for script, want := range map[string]string{
		"#METAQ NODES 2\n# srun in a comment\nsrun -N 2 ./a\n":                 "task.sh:3",
		"#METAQ NODES 2\nsrun -N $FARM_NNODES --nodelist=$FARM_NODELIST ./a\n": "",
		"#METAQ NODES 2\nmpirun --hostfile $FARM_HOSTFILE ./a\n":               "",
		"#METAQ NODES 2\n/usr/bin/mpirun -np 4 ./a\n":                          "task.sh:2",
		"#METAQ NODES 2\necho sprun\n":                                         "",
	} {
		p := filepath.Join(dir, "task.sh")
		os.WriteFile(p, []byte(script), 0o755)
		task, err := ParseMetaqTask(p, "task.sh")
		if err != nil || task.Launch != want {
			t.Errorf("%q: launch %q, %v; want %q", script, task.Launch, err, want)
		}
	}
}
