package integration

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// How table.dat is numbered (META's rule), and the one check every line
// that enters a farm passes (issue 34).

// commOut makes the farm's single_case.sh write each case's $COMM to
// comm.out in its RUN directory instead of running it, then sleep for
// sleep seconds.
func commOut(t *testing.T, dir, sleep string) {
	t.Helper()
	p := filepath.Join(dir, "single_case.sh")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "\neval \"$COMM\"\n", "\nprintf '%s\\n' \"$COMM\" > comm.out; sleep "+sleep+"\n", 1)
	if s == string(b) {
		t.Fatal("single_case.sh has no line eval \"$COMM\"")
	}
	if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
}

// readComm returns what case id wrote to RUN<id>/comm.out ("" if none).
func readComm(dir, id string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "RUN"+id, "comm.out"))
	return string(b)
}

// statusIDs lists the case IDs farm Status --json knows, with their state.
func statusIDs(t *testing.T, dir string) map[int64]string {
	t.Helper()
	m := map[int64]string{}
	for id, r := range statusJSON(t, dir) {
		m[id] = r.State
	}
	return m
}

// TestMETAParameterTable: a META parameter table whose lines start with
// numbers that are not 1, 2, 3, ... ("101 0.5", "202 0.7") is numbered by
// farm as META's submit.run numbers it: case 1 runs with COMM "101 0.5",
// case 2 with "202 0.7" (the first parameter is kept), and farm submit
// says so in a note with how to take the numbers as IDs instead. That
// advice, followed while the jobs run, works: case 101 runs with COMM
// "0.5". A table numbered 1, 2, 3, ... keeps its IDs, with no note.
func TestMETAParameterTable(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"101 0.5", "202 0.7"}, "0-00:10")
	commOut(t, dir, "3")
	r := farmIn(t, dir, nil, "submit", "1", "--backend", "local")
	note := `farm: note: table.dat's lines start with numbers that are not 1, 2, 3, ... (line 1 starts with "101" where case 1 would have 1), so they are not case IDs (META's rule): farm numbered every line and kept those numbers as the cases' first parameter (case 1's COMM is its whole line). If they are your case IDs: 'farm kill', 'mv table.dat.orig table.dat', add the line TABLE_IDS=1 to config, 'farm clean --yes', then submit again.` + "\n"
	if r.Code != 0 || r.Err != note {
		t.Fatalf("submit: exit %d, stderr %q; want 0 and the note %q", r.Code, r.Err, note)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "table.dat")); string(b) != "1 101 0.5\n2 202 0.7\n" {
		t.Errorf("table.dat numbered as %q", b)
	}
	// The advice, while the run's meta-job still runs its cases.
	mustFarm(t, dir, "kill")
	if err := os.Rename(filepath.Join(dir, "table.dat.orig"), filepath.Join(dir, "table.dat")); err != nil {
		t.Fatal(err)
	}
	appendFile(t, dir, "config", "TABLE_IDS=1\n")
	mustFarm(t, dir, "clean", "--yes")
	r = farmIn(t, dir, nil, "submit", "1", "--backend", "local")
	if r.Code != 0 || r.Err != "" {
		t.Fatalf("submit with TABLE_IDS=1: exit %d, stderr %q", r.Code, r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	if got := statusIDs(t, dir); !slices.Equal(sortedIDs(got), []int64{101, 202}) || got[101] != "succeeded" {
		t.Errorf("after the advice, cases %v; want 101 and 202 succeeded", got)
	}
	if a, b := readComm(dir, "101"), readComm(dir, "202"); a != "0.5\n" || b != "0.7\n" {
		t.Errorf("after the advice, COMM %q and %q; want 0.5 and 0.7", a, b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "table.dat")); string(b) != "101 0.5\n202 0.7\n" {
		t.Errorf("table.dat with TABLE_IDS=1 is %q; want it as written", b)
	}

	// Without the advice: the cases run as META runs them.
	dir = newFarm(t, []string{"101 0.5", "202 0.7"}, "0-00:10")
	commOut(t, dir, "0")
	// By hand, before the submit, the cases are the ones submit will run.
	cmd := exec.Command("./single_case.sh", "table.dat", "2")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "Case 2 (line 2 of table.dat): 202 0.7\n") {
		t.Errorf("./single_case.sh table.dat 2: %v, said %q", err, out)
	}
	if r := farmIn(t, dir, nil, "run-case", "2"); r.Code != 0 || readComm(dir, "2") != "202 0.7\n" {
		t.Errorf("farm run-case 2: exit %d, %q; COMM %q", r.Code, r.Err, readComm(dir, "2"))
	}
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
	if got := statusIDs(t, dir); !slices.Equal(sortedIDs(got), []int64{1, 2}) || got[1] != "succeeded" || got[2] != "succeeded" {
		t.Errorf("cases %v; want 1 and 2 succeeded", got)
	}
	if a, b := readComm(dir, "1"), readComm(dir, "2"); a != "101 0.5\n" || b != "202 0.7\n" {
		t.Errorf("COMM %q and %q; want the whole lines", a, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "RUN101")); err == nil {
		t.Errorf("RUN101 exists: 101 was taken as an ID")
	}
	// farm add numbers what it adds: a number is the first parameter.
	f := filepath.Join(t.TempDir(), "more.txt")
	os.WriteFile(f, []byte("303 0.9\n"), 0o644)
	if out := mustFarm(t, dir, "add", f); !strings.Contains(out, "IDs 3-3") {
		t.Errorf("farm add said %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "table.dat")); string(b) != "1 101 0.5\n2 202 0.7\n3 303 0.9\n" {
		t.Errorf("table.dat after farm add is %q", b)
	}
	byHandKeepsFarmIDs(t, dir)

	// Numbered 1, 2, 3, ...: the IDs are kept, no note.
	dir = newFarm(t, []string{"1 0.5", "2 0.7", "3 0.9"}, "0-00:10")
	commOut(t, dir, "0")
	r = farmIn(t, dir, nil, "submit", "1", "--backend", "local")
	if r.Code != 0 || r.Err != "" {
		t.Fatalf("submit of a numbered table: exit %d, stderr %q", r.Code, r.Err)
	}
	mustFarm(t, dir, "wait", "--timeout", "1m")
	if a := readComm(dir, "3"); a != "0.9\n" {
		t.Errorf("case 3's COMM is %q; want 0.9", a)
	}
}

// byHandKeepsFarmIDs: farm's own tables keep their IDs by hand too:
// table.dat_ of a resubmit of case 2 of the farm dir starts with 2, and
// ./single_case.sh reads it so (not as case 1 of an unnumbered table).
func byHandKeepsFarmIDs(t *testing.T, dir string) {
	t.Helper()
	mustFarm(t, dir, "resubmit", "1", "--cases", "2", "--backend", "local")
	mustFarmCode(t, dir, exitNotAllOK, "wait", "--timeout", "1m") // case 3 never ran
	cmd := exec.Command("./single_case.sh", "table.dat_", "1")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "Case 2 (line 1 of table.dat_): 202 0.7\n") {
		t.Errorf("./single_case.sh table.dat_ 1: %v, said %q", err, out)
	}
}

func sortedIDs(m map[int64]string) []int64 {
	var ids []int64
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestOneLineCheck: a line with a NUL byte, another control character,
// binary junk or a bad #FARM part is refused by farm add with its file and
// line, and nothing is added (table.dat byte-identical, MISC as it was),
// before and after the farm ran; farm submit refuses the same line in
// table.dat with the same words, and farm resubmit refuses it when it
// was written into table.dat after a run.
func TestOneLineCheck(t *testing.T) {
	t.Parallel()
	junk := make([]byte, 400)
	rng := rand.New(rand.NewPCG(34, 34))
	for i := range junk {
		junk[i] = byte(rng.UintN(256))
	}
	for _, c := range []struct {
		name, input, want string // want: the message after "farm: FILE:"
	}{
		{"nul", "echo a\necho b\x00c\n", `2: a NUL byte at column 7: a case line must be text; remove it`},
		{"control", "echo a\necho b\x01c\n", `2: a control character (byte 0x01) at column 7: a case line must be text; remove it`},
		{"escape", "echo \x1b[31mred\n", `1: a control character (byte 0x1b) at column 6: a case line must be text; remove it`},
		{"farm-part", "echo a\necho b #FARM cpu=2\n", `2: #FARM: unknown key "cpu" (known: cpus, gpus, mem, min_time, nodes, time); fix the line`},
		{"junk", string(junk), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := regexp.QuoteMeta(c.want)
			if c.want == "" {
				want = `\d+: (a NUL byte|a control character \(byte 0x[0-9a-f]{2}\)) at column \d+: a case line must be text; remove it`
			}
			for _, submitted := range []bool{false, true} {
				dir := newFarm(t, repeat("true", 2), "0-00:10")
				if submitted {
					mustFarm(t, dir, "submit", "1", "--backend", "local")
					mustFarm(t, dir, "wait", "--timeout", "1m")
				}
				table, _ := os.ReadFile(filepath.Join(dir, "table.dat"))
				misc, _ := os.ReadDir(filepath.Join(dir, "MISC"))
				f := filepath.Join(t.TempDir(), "x")
				os.WriteFile(f, []byte(c.input), 0o644)
				r := farmIn(t, dir, nil, "add", f)
				if r.Code != 1 || !regexp.MustCompile(`^farm: x:`+want+`$`).MatchString(strings.TrimSuffix(r.Err, "\n")) {
					t.Errorf("farm add (submitted %v): exit %d, stderr %q; want 1 and x:%s", submitted, r.Code, r.Err, want)
				}
				if after, _ := os.ReadFile(filepath.Join(dir, "table.dat")); string(after) != string(table) {
					t.Errorf("farm add (submitted %v) changed table.dat: %q", submitted, after)
				}
				if after, _ := os.ReadDir(filepath.Join(dir, "MISC")); len(after) != len(misc) {
					t.Errorf("farm add (submitted %v): MISC has %d entries, had %d", submitted, len(after), len(misc))
				}
				if !submitted {
					continue
				}
				// The line written into table.dat after the run: resubmit
				// refuses it, naming table.dat's line.
				os.WriteFile(filepath.Join(dir, "table.dat"), append(table, numberLines(c.input, 3)...), 0o644)
				r = farmIn(t, dir, nil, "resubmit", "1", "--backend", "local")
				if r.Code != 1 || !regexp.MustCompile(`^farm: table\.dat:`).MatchString(r.Err) || !strings.Contains(r.Err, "a case line must be text") && c.name != "farm-part" {
					t.Errorf("resubmit of table.dat with the line: exit %d, stderr %q", r.Code, r.Err)
				}
			}
			// farm submit: the same words, for table.dat's line.
			dir := newFarm(t, nil, "0-00:10")
			os.WriteFile(filepath.Join(dir, "table.dat"), []byte(c.input), 0o644)
			r := farmIn(t, dir, nil, "submit", "1", "--backend", "local")
			if r.Code != 1 || !regexp.MustCompile(`^farm: table\.dat:`+want+`$`).MatchString(strings.TrimSuffix(r.Err, "\n")) {
				t.Errorf("submit: exit %d, stderr %q; want 1 and table.dat:%s", r.Code, r.Err, want)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "table.dat")); string(b) != c.input {
				t.Errorf("a refused submit changed table.dat")
			}
		})
	}
}

// numberLines numbers the non-blank lines of s from first on ("ID line"),
// as farm writes a numbered table.
func numberLines(s string, first int) []byte {
	var out []byte
	for _, l := range strings.SplitAfter(s, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, strconv.Itoa(first)+" "+strings.TrimSuffix(l, "\n")+"\n"...)
		first++
	}
	return out
}
