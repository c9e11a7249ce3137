package status

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCutoffRecord: the record reads as written, rewritten in place (one
// length: a shorter value leaves nothing of a longer one), and reads as
// none when it is missing, cut short or not a record.
func TestCutoffRecord(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cutoff")
	if c := ReadCutoff(p); c != (Cutoff{}) {
		t.Fatalf("no record read as %+v", c)
	}
	want := Cutoff{Seconds: 123.456789, Durations: 1 << 40, Run: 12, Claimed: 1 << 39}
	WriteCutoff(p, want)
	if c := ReadCutoff(p); c != want {
		t.Fatalf("read %+v, want %+v", c, want)
	}
	short := Cutoff{Seconds: 2, Durations: 8, Run: 1, Claimed: 9}
	WriteCutoff(p, short)
	if c := ReadCutoff(p); c != short {
		t.Fatalf("rewritten: read %+v, want %+v", c, short)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != cutoffRecord {
		t.Fatalf("the record is %v bytes (%v), want %d", fi.Size(), err, cutoffRecord)
	}
	for _, bad := range []string{"cutoff=2 durations=8", "cutoff=x durations=8\n", "cutoff=-1\n"} {
		os.WriteFile(p, []byte(bad), 0o644)
		if c := ReadCutoff(p); c != (Cutoff{}) {
			t.Errorf("%q read as %+v, want none", bad, c)
		}
	}
}
