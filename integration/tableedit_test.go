package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 21, point 1: table.dat edited during run 1, keeping its size.
// Run 1 read table.dat itself, by byte offset, and noticed only a change
// of size, of inode, or of the first and last 4 KiB: after such an edit a
// claim could start mid-line, so that a case ID ran another line's
// command and cases were skipped. Now the run reads a private copy made at
// submit, and farm says once that table.dat changed.

const editCases = 2000

// editLine is line k of the table: case k records the line it comes from
// and the ID it ran as (they must be the same), then waits for the file
// gate, which the test makes once it has edited the table: the first
// cases hold the run until then. pad makes the line that many bytes
// longer (or shorter, negative).
func editLine(log, gate string, k, pad int) string {
	mark := "line"
	if pad != 0 {
		mark = "EDIT" // a case must never run an edited line
	}
	p := strings.Repeat("p", 4+pad)
	return fmt.Sprintf("%d echo %s%d:$ID >> %s; until [ -e %s ]; do sleep 0.02; done #%s", k, mark, k, log, gate, p)
}

// editTable is the table, with line k changed by pads[k] bytes.
func editTable(log, gate string, pads map[int]int) []byte {
	var b strings.Builder
	for k := 1; k <= editCases; k++ {
		b.WriteString(editLine(log, gate, k, pads[k]))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// runEditedTable runs editCases cases on 4 local meta-jobs, edits
// table.dat with edit once the first cases started (the new content keeps
// the size: line short is 2 bytes shorter, line long 2 longer), and
// checks that every case ran exactly once, as itself, that no meta-job
// stopped, and that farm said once that the table changed.
func runEditedTable(t *testing.T, short, long int, edit func(t *testing.T, path string, data []byte)) {
	dir := newFarm(t, []string{"true"}, "0-00:10")
	log, gate := filepath.Join(dir, "cases.log"), filepath.Join(dir, "gate")
	table := filepath.Join(dir, "table.dat")
	orig := editTable(log, gate, nil)
	if err := os.WriteFile(table, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	edited := editTable(log, gate, map[int]int{short: -2, long: 2})
	if len(edited) != len(orig) {
		t.Fatalf("the edit changes the size: %d, was %d", len(edited), len(orig))
	}
	mustFarm(t, dir, "submit", "4", "--backend", "local")
	waitFor(t, 30*time.Second, "2 cases to start", func() bool {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n") >= 2
	})
	edit(t, table, edited)
	q := farmIn(t, dir, nil, "query")
	going := "farm: note: table.dat changed since run 1 started; run 1 goes on with the table it started with; 'farm resubmit' will use table.dat as it is now\n"
	if q.Code != 0 || q.Err != going {
		t.Errorf("farm query during the run: exit %d, stderr %q; want the note, once", q.Code, q.Err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ran := strings.Replace(going, "goes on with", "ran", 1)
	w := farmIn(t, dir, nil, "wait", "--timeout", "2m")
	if w.Code != 0 || !strings.Contains(w.Out, fmt.Sprintf("%d cases: %d succeeded", editCases, editCases)) || w.Err != ran {
		t.Errorf("farm wait: exit %d\n%s%s; want every case succeeded and the note once", w.Code, w.Out, w.Err)
	}

	// What the cases did: each line k ran once, as case k.
	ranAs := map[int]int{}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	wrong := 0
	for sc.Scan() {
		line := sc.Text()
		k, id, ok := strings.Cut(strings.TrimPrefix(line, "line"), ":")
		kn, err1 := strconv.Atoi(k)
		idn, err2 := strconv.Atoi(id)
		if !ok || err1 != nil || err2 != nil || kn != idn || !strings.HasPrefix(line, "line") {
			if wrong++; wrong <= 5 {
				t.Errorf("a case ran another line's command (or an edited one): %q (line:ID)", line)
			}
			continue
		}
		ranAs[idn]++
	}
	for k := 1; k <= editCases; k++ {
		if ranAs[k] != 1 {
			t.Errorf("case %d ran %d times, want once", k, ranAs[k])
		}
	}
	rec := readRecords(t, dir)
	for k := int64(1); k <= editCases; k++ {
		if rec.Starts[k] != 1 || rec.EndStatus[k] != 0 {
			t.Fatalf("case %d: %d start records, status %d; want one, 0", k, rec.Starts[k], rec.EndStatus[k])
		}
	}
	out, _ := filepath.Glob(filepath.Join(dir, "OUTPUT", "*.out"))
	for _, o := range out {
		b, _ := os.ReadFile(o)
		if !strings.Contains(string(b), "No cases left; exiting.") || strings.Contains(string(b), "changed during run") || strings.Contains(string(b), "malformed") {
			t.Errorf("%s: the meta-job did not end as usual:\n%s", filepath.Base(o), b)
		}
	}
	// The next run uses table.dat as it is now: its edited lines' cases
	// succeeded (as the lines they were), so nothing is left.
	if r := farmIn(t, dir, nil, "resubmit", "1", "--backend", "local"); r.Code != 0 || !strings.Contains(r.Out, "nothing to resubmit") {
		t.Errorf("farm resubmit: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
}

// TestTableEditedInPlaceSameSize: during run 1 table.dat is rewritten in
// place (same inode, same size, as cat > or an editor that writes in
// place does): line 5 two bytes shorter, a line near the end two longer.
func TestTableEditedInPlaceSameSize(t *testing.T) {
	t.Parallel()
	runEditedTable(t, 5, editCases-100, func(t *testing.T, path string, data []byte) {
		before, _ := os.Stat(path)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		after, _ := os.Stat(path)
		if before.Sys().(*syscall.Stat_t).Ino != after.Sys().(*syscall.Stat_t).Ino || before.Size() != after.Size() {
			t.Fatalf("the edit was not in place and same-size")
		}
	})
}

// TestTableRenamedOverSameSize: during run 1 a same-size edit whose change
// lies in the middle (outside the first and last 4 KiB) is renamed over
// table.dat, as vim and sed -i do.
func TestTableRenamedOverSameSize(t *testing.T) {
	t.Parallel()
	runEditedTable(t, 600, 1700, func(t *testing.T, path string, data []byte) {
		orig, _ := os.ReadFile(path)
		if len(orig) != len(data) || string(orig[:4096]) != string(data[:4096]) || string(orig[len(orig)-4096:]) != string(data[len(data)-4096:]) {
			t.Fatalf("the edit touches the first or last 4 KiB, or changes the size")
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTableAppendedMidRunCountsWhatRan (issue 21, point 10): a line
// appended to table.dat during run 1, repeating an ID or without one,
// used to stop the meta-jobs and make farm wait count the repeated ID
// twice ("5 cases: 3 succeeded, 2 never ran" when two ran), or make farm
// wait and farm Status exit 1 with "table.dat:5: malformed case ID". Now
// the run goes on with its own table, and the summary counts table.dat's
// cases once each, with one warning naming the line.
func TestTableAppendedMidRunCountsWhatRan(t *testing.T) {
	t.Parallel()
	for name, line := range map[string]string{
		"duplicate":  `table\.dat:5: duplicate case ID 1 \(first used on line 1\)`,
		"unnumbered": `table\.dat:5: malformed case ID "echo": a numbered table needs "ID command" on every case line, with ID a positive integer`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := newFarm(t, []string{"true"}, "0-00:10")
			log, gate := filepath.Join(dir, "cases.log"), filepath.Join(dir, "gate")
			var table strings.Builder
			for k := 1; k <= 4; k++ {
				fmt.Fprintf(&table, "%d echo %d:$ID >> %s; until [ -e %s ]; do sleep 0.02; done\n", k, k, log, gate)
			}
			if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte(table.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			mustFarm(t, dir, "submit", "2", "--backend", "local")
			waitFor(t, 30*time.Second, "a case to start", func() bool {
				b, _ := os.ReadFile(log)
				return len(b) > 0
			})
			appended := "1 echo X\n"
			if name == "unnumbered" {
				appended = "echo X\n"
			}
			f, err := os.OpenFile(filepath.Join(dir, "table.dat"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(appended)
			f.Close()
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			w := farmIn(t, dir, nil, "wait", "--timeout", "1m")
			warn := regexp.MustCompile(`^farm: warning: ` + line + `.*: not counted; fix the line before 'farm resubmit', which refuses table\.dat until then \(table\.dat changed since run 1 started; run 1 ran the table it started with; 'farm resubmit' will use table\.dat as it is now\)\n$`)
			if w.Code != 0 || w.Out != "4 cases: 4 succeeded, 0 failed, 0 interrupted, 0 never ran, 0 unfit\n" || !warn.MatchString(w.Err) {
				t.Errorf("farm wait: exit %d\nstdout: %s\nstderr: %s", w.Code, w.Out, w.Err)
			}
			s := farmIn(t, dir, nil, "Status")
			if s.Code != 0 || strings.Count(s.Out, "succeeded") != 4 || !strings.HasPrefix(s.Err, "farm: note: table.dat changed since run 1 started") || strings.Count(s.Err, "\n") != 1 {
				t.Errorf("farm Status: exit %d\nstdout: %s\nstderr: %s", s.Code, s.Out, s.Err)
			}
			b, _ := os.ReadFile(log)
			if got := strings.Fields(string(b)); len(got) != 4 || strings.Contains(string(b), "X") {
				t.Errorf("the cases ran %q, want 1:1 to 4:4 once each", got)
			}
			for k := 1; k <= 4; k++ {
				if !strings.Contains(string(b), fmt.Sprintf("%d:%d\n", k, k)) {
					t.Errorf("case %d did not run as itself: %q", k, b)
				}
			}
		})
	}
}

// TestReportCommandsFromTheRunsTable: farm report's slowest cases show the
// command the run ran, from its own table, not table.dat as edited since.
func TestReportCommandsFromTheRunsTable(t *testing.T) {
	t.Parallel()
	dir := newFarm(t, []string{"1 sleep 0.2; echo ran-as-written", "2 true"}, "0-00:10")
	mustFarm(t, dir, "submit", "1", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "1m")
	if err := os.WriteFile(filepath.Join(dir, "table.dat"), []byte("1 echo edited-since\n2 true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustFarm(t, dir, "report", "-o", "r.html")
	b, err := os.ReadFile(filepath.Join(dir, "r.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "sleep 0.2; echo ran-as-written") || strings.Contains(string(b), "edited-since") {
		t.Errorf("the report does not show the command case 1 ran (or shows the edited one)")
	}
}
