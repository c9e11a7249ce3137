package metajob

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/internal/testreq"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// TestCaseFramesKeepEachCasesBytes (OUTPUT=job): each case's standard
// output and error are found whole at the offsets its start record would
// say, up to the next case's, with the header before them when it wrote
// something; a case that writes nothing leaves nothing; a case that opens
// /dev/stderr afresh (which would truncate a file) truncates nothing; the
// job's own output gets none of it.
func TestCaseFramesKeepEachCasesBytes(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		testreq.Skip(t, "FARM_REQUIRE_LINUX", "no /bin/bash")
	}
	cases := []frameCase{
		{`printf 'one\ntwo\n'; printf 'e1\n' >&2`, "one\ntwo\n", "e1\n"},
		{`:`, "", ""},
		{`printf 'no newline'; echo truncates? >/dev/stderr`, "no newline", "truncates?\n"},
		{`head -c 200000 /dev/zero | tr '\0' x; echo; echo big >&2`, strings.Repeat("x", 200000) + "\n", "big\n"},
		{`echo "==> case 3 <=="; exit 3`, "==> case 3 <==\n", ""},
	}
	for _, kind := range []string{"sourced", "executed"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("TMPDIR", t.TempDir())
			if err := os.Mkdir(filepath.Join(dir, layout.OutputDir), 0o755); err != nil {
				t.Fatal(err)
			}
			shebang := "#!/bin/bash"
			if kind == "executed" {
				shebang = "#!/bin/sh\n# not sourced" // run as a program
			}
			if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte(shebang+"\neval \"$COMM\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			var job bytes.Buffer
			jf, err := os.CreateTemp(t.TempDir(), "job")
			if err != nil {
				t.Fatal(err)
			}
			defer jf.Close()
			r, err := newCaseRunner(dir, "/bin/bash", "", os.Environ(), jf, &job)
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			cf, err := openCaseFrames(dir, layout.StatusFile("7", 0), 2)
			if err != nil {
				t.Fatal(err)
			}
			defer cf.close()
			switch r := r.(type) {
			case *forkRunner:
				r.frames = cf
			case *execRunner:
				r.frames = cf
			}
			var places []status.Placement
			for i, c := range cases {
				p := cf.begin(int64(i + 1))
				if !p.Framed {
					t.Fatalf("case %d: not framed", i+1)
				}
				places = append(places, p)
				if _, _, err := r.run(caseRequest{ID: strconv.Itoa(i + 1), Comm: c.comm}); err != nil {
					t.Fatal(err)
				}
			}
			checkFrames(t, dir, places, cases)
			fi, _ := jf.Stat()
			if job.Len() != 0 || fi.Size() != 0 {
				t.Errorf("the job's output got %d and %d bytes: %.80q", job.Len(), fi.Size(), job.String())
			}
		})
	}
}

type frameCase struct{ comm, out, err string }

// checkFrames checks that each case's bytes are found where places say,
// in loop 2's files of job 7, with their headers.
func checkFrames(t *testing.T, dir string, places []status.Placement, cases []frameCase) {
	t.Helper()
	for s, name := range []string{"out", "err"} {
		data, err := os.ReadFile(filepath.Join(dir, layout.OutputDir, layout.CaseOutput(layout.StatusFile("7", 0), 2, s == 1)))
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			from, to := places[i].Out, int64(len(data))
			want := c.out
			if s == 1 {
				from, want = places[i].Err, c.err
			}
			if i+1 < len(places) {
				to = places[i+1].Out
				if s == 1 {
					to = places[i+1].Err
				}
			}
			got := string(data[from:to])
			if want != "" {
				want = fmt.Sprintf("==> case %d <==\n", i+1) + want
			}
			if got != want {
				t.Errorf("case %d's std%s: %.60q, want %.60q", i+1, name, got, want)
			}
		}
	}
}
