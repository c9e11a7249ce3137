package status

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDurations: the seconds of every E record of every status file,
// failed ones too, in the files' order: not I records, nor META's lines,
// nor damaged lines, nor a last line being written, nor a line too long.
// A directory in a file's place is read as an empty file.
func TestDurations(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"status.1": "# farm-status v1 job=1 run=1 host=n1\n" +
			"S 1 1700000000.000 n1\nE 1 0 1700000000.000 1.500 n1\n" +
			"S 2 1700000001.000 n1\nE 2 7 1700000001.000 2.250 n1\n" +
			"S 3 1700000002.000 n1\nI 3 15 1700000002.000 9.000 n1\n" +
			"E 4 0 1700000003.000 -1.000 n1\n" + // no start, negative: as written
			"E 5 x 1700000003.000 3.000 n1\n" +
			"E 6 0 1700000003.000 " + strings.Repeat("1", 300<<10) + " n1\n" +
			"U 7 1700000004.000 it needs 4 CPUs\nQ 1700000005.000 done\n" +
			"E 8 0 1700000005.000 4.000 n1\nE 9 0 1700000006.000 5.0",
		"status.2.r1": "3 0\n4 1\nE 10 1 1700000000.000 6.000 n2\n",
		"status.3":    "",
		"other":       "E 11 0 1700000000.000 7.000 n3\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "status.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := Durations(dir)
	if want := []float64{1.5, 2.25, -1, 4, 6}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Durations: %v, %v; want %v", got, err, want)
	}
	if got, err := Durations(filepath.Join(dir, "none")); err != nil || len(got) != 0 {
		t.Errorf("Durations of no directory: %v, %v", got, err)
	}
}
