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
	if c, ok := ReadCutoff(p); ok {
		t.Fatalf("no record read as %+v", c)
	}
	want := Cutoff{Seconds: 123.456789, Durations: 1 << 40, Run: 12, Claimed: 1 << 39, Median: 1.0 / 3, Succeeded: 1<<63 - 1}
	WriteCutoff(p, want)
	if c, ok := ReadCutoff(p); !ok || c != want {
		t.Fatalf("read %+v %v, want %+v", c, ok, want)
	}
	short := Cutoff{Seconds: 2, Durations: 8, Run: 1, Claimed: 9}
	WriteCutoff(p, short)
	if c, ok := ReadCutoff(p); !ok || c != short {
		t.Fatalf("rewritten: read %+v %v, want %+v", c, ok, short)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != cutoffRecord {
		t.Fatalf("the record is %v bytes (%v), want %d", fi.Size(), err, cutoffRecord)
	}
	for _, bad := range []string{"cutoff=2 durations=8", "cutoff=x durations=8\n", "cutoff=-1\n"} {
		os.WriteFile(p, []byte(bad), 0o644)
		if c, ok := ReadCutoff(p); ok {
			t.Errorf("%q read as %+v, want none", bad, c)
		}
	}
}
