package integration

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/integration/harness"
)

// TestUmaskNeverWidensModes (issue 21): under umask 000, farm init made the
// farm directory (and the parents it made) 0777, and MISC/jobs/* and
// report.html 0666, so that any local user could replace single_case.sh;
// copies of a table.dat made 0666 stayed 0666. Under umask 000 nothing
// farm makes — init, submit, the meta-job, resubmit, report, the local
// backend's state and slots — may be writable by the group or others
// (never wider than 0755/0644); under umask 077 nothing may be readable by
// them either: a narrower umask is honoured.
func TestUmaskNeverWidensModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		umask     string
		never     fs.FileMode // bits no path may have
		dir, file fs.FileMode // the farm directory's mode, and MISC/jobs/*'s
		table     fs.FileMode // table.dat as the user left it
	}{
		{"000", 0o022, 0o755, 0o644, 0o666},
		{"077", 0o077, 0o700, 0o600, 0o600},
	} {
		t.Run("umask-"+tc.umask, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			tmp := filepath.Join(root, "tmp")
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			farm := func(dir string, code int, args ...string) {
				t.Helper()
				cmd := exec.Command("sh", append([]string{"-c", `umask ` + tc.umask + ` && exec "$0" "$@"`, bin(t)}, args...)...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
				if r := harness.Exec(t, cmd, args); r.Code != code {
					t.Fatalf("umask %s: farm %s: exit %d, want %d\nstdout: %s\nstderr: %s", tc.umask, strings.Join(args, " "), r.Code, code, r.Out, r.Err)
				}
			}
			farm(root, 0, "init", "a/b/farm")
			dir := filepath.Join(root, "a", "b", "farm")
			table := filepath.Join(dir, "table.dat")
			if err := os.WriteFile(table, []byte("true\nfalse\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(table, tc.table)
			farm(dir, 0, "submit", "1", "--backend", "local")
			farm(dir, exitNotAllOK, "wait", "--timeout", "1m") // case 2 failed
			farm(dir, 0, "resubmit", "1", "--backend", "local")
			farm(dir, exitNotAllOK, "wait", "--timeout", "1m")
			farm(dir, 0, "report")
			n := 0
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || p == root || p == tmp {
					return err
				}
				fi, err := os.Lstat(p)
				if err != nil {
					return err
				}
				n++
				if fi.Mode().Perm()&tc.never != 0 {
					t.Errorf("umask %s: %s is %#o, which gives %#o", tc.umask, strings.TrimPrefix(p, root+"/"), fi.Mode().Perm(), fi.Mode().Perm()&tc.never)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// What must be there, with the modes a plain create under the
			// umask gives (0755/0644 under 000).
			jobs, _ := filepath.Glob(filepath.Join(dir, "MISC", "jobs", "*"))
			runs, _ := filepath.Glob(filepath.Join(dir, "MISC", "table.run*"))
			slots, _ := filepath.Glob(filepath.Join(tmp, "farm-slots-*"))
			// Runs 1 and 2, each its table and the record of its source.
			if len(jobs) != 2 || len(runs) != 4 || len(slots) != 1 || n < 40 {
				t.Fatalf("umask %s: %d paths, job records %q, run tables %q, slot dirs %q", tc.umask, n, jobs, runs, slots)
			}
			for p, want := range map[string]fs.FileMode{
				filepath.Join(root, "a"): tc.dir, dir: tc.dir, filepath.Join(dir, "single_case.sh"): tc.dir,
				jobs[0]: tc.file, runs[0]: tc.file, runs[1]: tc.file, runs[2]: tc.file, runs[3]: tc.file, table: tc.file, table + "_": tc.file, filepath.Join(dir, "report.html"): tc.file,
			} {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
					t.Errorf("umask %s: %s: %v, %v; want %#o", tc.umask, strings.TrimPrefix(p, root+"/"), fi.Mode(), err, want)
				}
			}
		})
	}
}
