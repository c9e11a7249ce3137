package status

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestFramesFollowTheStartRecords: each frame of a loop ends where the
// loop's next start record says its successor starts, in the order of the
// start records — also when two cases that wrote nothing start at the
// same offsets in the same millisecond —, the last runs to the file's end
// (-1), loops apart; an attempt that started without out= is there,
// unframed; cases not asked for are left out, and frames come in the order
// their cases started, across files.
func TestFramesFollowTheStartRecords(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"status.7": `# farm-status v1 job=7 run=1 host=n1
S 3 100.000 n1 out=0 err=0
E 3 0 100.000 0.001 n1
S 1 100.000 n1 out=0 err=0
E 1 0 100.000 0.001 n1
S 2 100.001 n1 loop=2 out=0 err=0
S 4 100.002 n1 out=0 err=5
E 4 2 100.002 1.000 n1
S 5 101.500 n1 out=40 err=5
E 2 0 100.001 3.000 n1
`,
		"status.8": `# farm-status v1 job=8 run=2 host=n2
S 4 200.000 n2
E 4 0 200.000 1.000 n2
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Frames(dir, func(id int64) bool { return id != 5 })
	if err != nil {
		t.Fatal(err)
	}
	f := func(id int64, job string, loop int, start float64, st State, status int, out, err [2]int64) Frame {
		return Frame{Framed: true, ID: id, File: "status." + job, Job: job, Loop: loop, Start: start, State: st, Status: status, Out: out, Err: err}
	}
	want := []Frame{
		f(3, "7", 1, 100, Succeeded, 0, [2]int64{0, 0}, [2]int64{0, 0}),
		f(1, "7", 1, 100, Succeeded, 0, [2]int64{0, 0}, [2]int64{0, 5}),
		f(2, "7", 2, 100.001, Succeeded, 0, [2]int64{0, -1}, [2]int64{0, -1}),
		f(4, "7", 1, 100.002, Failed, 2, [2]int64{0, 40}, [2]int64{5, 5}),
		{ID: 4, File: "status.8", Job: "8", Loop: 1, Start: 200, State: Succeeded, Out: [2]int64{0, -1}, Err: [2]int64{0, -1}},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Frame{})); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}
