package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/integration/harness"
)

// TestSweepMakesItsProduct: farm init DIR --sweep and farm add --sweep
// (issue 38) write exactly the product of the parameters as cases, in the
// order of nested loops (the last innermost), and each case runs with its
// values: a value with spaces and quotes reaches the command as one
// argument. A sweep refused changes nothing.
func TestSweepMakesItsProduct(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "farm")
	out := mustFarm(t, filepath.Dir(dir), "init", dir, "--sweep", `echo "T={T} seed={seed}" > out.txt`, "T=0.5,1,2", "seed=01..4")
	if !strings.Contains(out, "12 cases in table.dat (IDs 1-12)") {
		t.Errorf("init said %q", out)
	}
	harness.SetLimit(t, dir, "0-00:10")
	want := map[int]string{} // case ID -> what it writes
	var lines []string
	for _, T := range []string{"0.5", "1", "2"} {
		for seed := 1; seed <= 4; seed++ {
			id := len(lines) + 1
			lines = append(lines, fmt.Sprintf(`%d echo "T=%s seed=%02d" > out.txt`, id, T, seed))
			want[id] = fmt.Sprintf("T=%s seed=%02d", T, seed)
		}
	}
	vals := []string{"a b", "it's", "$HOME;*"}
	out = mustFarm(t, dir, "add", "--sweep", "printf '%s|' {v} > out.txt", "v="+strings.Join(vals, ","))
	if !strings.Contains(out, "Added 3 case(s), IDs 13-15, from the sweep") {
		t.Errorf("add said %q", out)
	}
	lines = append(lines, `13 printf '%s|' 'a b' > out.txt`, `14 printf '%s|' 'it'\''s' > out.txt`, `15 printf '%s|' '$HOME;*' > out.txt`)
	for i, v := range vals {
		want[13+i] = v + "|"
	}
	table := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "table.dat"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var cases []string
	for _, l := range strings.Split(strings.TrimSpace(table()), "\n") {
		if !strings.HasPrefix(l, "#") {
			cases = append(cases, l)
		}
	}
	if got := strings.Join(cases, "\n"); got != strings.Join(lines, "\n") {
		t.Fatalf("table.dat's cases:\n%s\nwant:\n%s", got, strings.Join(lines, "\n"))
	}
	checkSweepsRefused(t, dir, table)
	mustFarm(t, dir, "submit", "2", "--backend", "local")
	mustFarm(t, dir, "wait", "--timeout", "2m")
	for id, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("RUN%d", id), "out.txt"))
		if got := strings.TrimSuffix(string(b), "\n"); err != nil || got != w {
			t.Errorf("case %d wrote %q (%v), want %q", id, got, err, w)
		}
	}
}

// checkSweepsRefused: each bad sweep exits 64 with one line saying what
// is wrong, and table.dat stays as it was.
func checkSweepsRefused(t *testing.T, dir string, table func() string) {
	t.Helper()
	before := table()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim {T} {seed}", "T=1"}, "{seed} in the template has no parameter"},
		{[]string{"sim {T}", "T=1", "n=1..3"}, "parameter n (n=1..3) is not used"},
		{[]string{"sim {T}", "T="}, "T= gives no value"},
		{[]string{"sim {T}", "T=1..x"}, `"x" is not a whole number`},
		{[]string{"sim {a} {b}", "a=1..5000", "b=1..5000"}, "make 25000000 cases, more than the 10000000"},
		{[]string{"sim {T} #FARM cpus={T}", "T=1,0"}, "case 2 of the sweep (T=0): #FARM"},
	} {
		r := farmIn(t, dir, nil, append([]string{"add", "--sweep"}, c.args...)...)
		if r.Code == 0 || !strings.Contains(r.Err, c.want) || strings.Count(strings.TrimSpace(r.Err), "\n") > 0 {
			t.Errorf("farm add --sweep %q: exit %d, stderr %q; want one line with %q", c.args, r.Code, r.Err, c.want)
		}
	}
	if table() != before {
		t.Errorf("a refused sweep changed table.dat")
	}
}
