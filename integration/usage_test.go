package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The cases of TestLocalCaseUse: one that holds 200 MiB (written, so
// resident), one that keeps a CPU busy for 1.5 s of CPU time in a child
// process, one for 1 s in the case's own shell, and one too short for its
// peak to be asked.
var useCases = []string{
	`python3 -c 'import time; b = b"x" * (200 << 20); time.sleep(0.3)'`,
	`python3 -c 'import time; exec("while time.process_time() < 1.5: pass")'`,
	`while :; do for i in {1..2000}; do :; done; read -ra f < /proc/$BASHPID/stat; [ $((f[13] + f[14])) -ge 100 ] && break; done`,
	`true`,
}

// Issue 38: each case's end record says what it used, from the rusage of
// its reaped processes; farm Status shows it (MAXRSS, CPU) and --json
// gives it (max_rss_bytes, cpu_seconds). With and without a time limit
// (the worker's two ways of running a case).
func TestLocalCaseUse(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"", "\nCASE_TIME_LIMIT=1h\n"} {
		dir := newFarm(t, useCases, "0-00:10")
		f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(config)
		f.Close()
		mustFarm(t, dir, "submit", "1", "--backend", "local")
		mustFarm(t, dir, "wait", "--timeout", "1m")
		checkCaseUse(t, dir, config)
	}
}

func checkCaseUse(t *testing.T, dir, config string) {
	t.Helper()
	rows := statusJSON(t, dir)
	for id, r := range rows {
		if r.State != "succeeded" || r.CPU == nil {
			t.Fatalf("%q: case %d: %+v", config, id, r)
		}
	}
	if m := rows[1].MaxRSS; m == nil || *m < 200<<20 {
		t.Errorf("%q: the 200 MiB case's peak: %v", config, show(m))
	} else {
		t.Logf("%q: the 200 MiB case's peak: %d bytes (%.1f MiB)", config, *m, float64(*m)/(1<<20))
	}
	// Cases 2 and 3 burn a CPU time of their own measure (1.5 s by
	// Python's process_time, 100 ticks of its shell's utime+stime: 1 s),
	// not a wall time: on a loaded machine a CPU-bound case gets less CPU
	// than its wall time, and farm must say what it got.
	for id, burnt := range map[int64]float64{2: 1.5, 3: 1} {
		r := rows[id]
		if cpu := *r.CPU; cpu < burnt-0.02 || cpu > r.Seconds+0.05 {
			t.Errorf("%q: CPU-bound case %d: CPU %.3f s, wall %.3f s", config, id, cpu, r.Seconds)
		} else {
			t.Logf("%q: CPU-bound case %d: CPU %.3f s, wall %.3f s", config, id, cpu, r.Seconds)
		}
	}
	if r := rows[4]; r.MaxRSS != nil || *r.CPU > 0.1 {
		t.Errorf("%q: the short case: peak %v, CPU %v", config, show(r.MaxRSS), *r.CPU)
	}
	out := mustFarm(t, dir, "Status")
	lines := strings.Split(out, "\n")
	if h := strings.Fields(lines[0]); len(h) < 2 || h[len(h)-2] != "MAXRSS" || h[len(h)-1] != "CPU" {
		t.Errorf("%q: Status's header %q", config, lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) < 2 || !strings.HasSuffix(f[len(f)-2], "M") {
		t.Errorf("%q: Status's row of case 1: %q", config, lines[1])
	}
	if f := strings.Fields(lines[4]); len(f) < 2 || f[len(f)-2] != "-" {
		t.Errorf("%q: Status's row of case 4: %q", config, lines[4])
	}
	t.Logf("%q:\n%s", config, out)
	if q := mustFarm(t, dir, "query"); !strings.Contains(q, "Use: 4 case(s) say their CPU time, ") || !strings.Contains(q, "M (case 1) ('farm Status'") {
		t.Errorf("%q: farm query said\n%s", config, q)
	} else {
		t.Logf("%q: farm query:\n%s", config, q)
	}
}

func show(p *int64) any {
	if p == nil {
		return "null"
	}
	return *p
}
