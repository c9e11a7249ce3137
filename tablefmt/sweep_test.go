package tablefmt

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// sweepLines parses a sweep and returns its lines as its Reader gives them.
func sweepLines(t *testing.T, template string, args ...string) []string {
	t.Helper()
	s, err := ParseSweep(template, args)
	if err != nil {
		t.Fatalf("ParseSweep(%q, %q): %v", template, args, err)
	}
	b, err := io.ReadAll(s.Reader())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if int64(len(lines)) != s.Cases() {
		t.Fatalf("%d lines, Cases() = %d", len(lines), s.Cases())
	}
	return lines
}

// The product, in the order of nested loops, the last parameter innermost.
func TestSweepProductInOrder(t *testing.T) {
	got := sweepLines(t, "simulate --T {T} --seed {seed}", "T=0.5,1,2", "seed=1..100")
	var want []string
	for _, T := range []string{"0.5", "1", "2"} {
		for seed := 1; seed <= 100; seed++ {
			want = append(want, fmt.Sprintf("simulate --T %s --seed %d", T, seed))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %d lines %q ... %q, want %d %q ... %q", len(got), got[0], got[len(got)-1], len(want), want[0], want[len(want)-1])
	}
	// A placeholder used twice, and the parameters' order is the loops'
	// whatever the template's.
	got = sweepLines(t, "run {b} {a} > out_{a}_{b}", "a=x,y", "b=1..2")
	want = []string{"run 1 x > out_x_1", "run 2 x > out_x_2", "run 1 y > out_y_1", "run 2 y > out_y_2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSweepRanges(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want string
	}{
		{"n=1..3", "1 2 3"},
		{"n=3..1", "3 2 1"},
		{"n=0..10..5", "0 5 10"},
		{"n=0..11..5", "0 5 10"},
		{"n=10..0..5", "10 5 0"},
		{"n=-2..1", "-2 -1 0 1"},
		{"n=08..11", "08 09 10 11"},
		{"n=001..3", "001 002 003"},
		{"n=1..2,7,a,10..11", "1 2 7 a 10 11"},
		{"n=../x,.5", "../x .5"},
		{"n=7", "7"},
	} {
		if got := strings.Join(sweepLines(t, "{n}", c.arg), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.arg, got, c.want)
		}
	}
}

// A value that is not a plain word reaches the command as exactly that
// value: bash, running the line, hands it on as one argument.
func TestSweepQuotesValues(t *testing.T) {
	vals := []string{"a b", "it's", `$HOME;*`, `"x"`, "#c", "~"}
	arg := "v=" + strings.Join(vals, ",")
	lines := sweepLines(t, "printf '%s|' {v} x{v}y", arg)
	for i, l := range lines {
		out, err := exec.Command("bash", "-c", l).Output()
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if want := vals[i] + "|x" + vals[i] + "y|"; string(out) != want {
			t.Errorf("%s printed %q, want %q", l, out, want)
		}
	}
	if got := sweepLines(t, "echo {v} ${HOME} \\{w} {1..2} '{print $1}'", "v=a"); got[0] != "echo a ${HOME} \\{w} {1..2} '{print $1}'" {
		t.Errorf("bash's braces changed: %q", got[0])
	}
	// Inside quotes, a value that needs none is fine.
	if got := sweepLines(t, `echo "T={T}"`, "T=1,2"); got[1] != `echo "T=2"` {
		t.Errorf("got %q", got)
	}
}

// Each refusal is one line that names what is wrong and what to do.
func TestSweepErrors(t *testing.T) {
	for _, c := range []struct {
		template string
		args     []string
		want     string
	}{
		{"sim {T}", nil, "has no parameter: give one or more NAME=VALUES"},
		{"sim {T} {seed}", []string{"T=1"}, "{seed} in the template has no parameter: give it values"},
		{"sim {T}", []string{"T=1", "seed=1..3"}, "parameter seed (seed=1..3) is not used in the template: put {seed}"},
		{"sim {T}", []string{"T="}, "T= gives no value: give a list"},
		{"sim {T}", []string{"T=1,,2"}, "value 2 is empty; remove the extra comma"},
		{"sim {T}", []string{"T=1..x"}, `"x" is not a whole number`},
		{"sim {T}", []string{"T=0.1..1"}, `"0.1" is not a whole number`},
		{"sim {T}", []string{"T=1..5..0"}, "the step must be a whole number above 0"},
		{"sim {T}", []string{"T=1..2..3..4"}, "not a range"},
		{"sim {T}", []string{"T"}, `"T" is not a parameter: give NAME=VALUES`},
		{"sim {T}", []string{"T=1", "T=2"}, "parameter T is given twice"},
		{"sim {1T}", []string{"1T=2"}, "a parameter's name is letters"},
		{"sim {T}", []string{"T=1,2,1"}, `gives the value "1" twice`},
		{"sim {T}", []string{"T=1..3,2"}, `gives the value "2" twice`},
		{"sim {T}", []string{"T=a\nb"}, "control character (byte 0x0a"},
		{"sim\n{T}", []string{"T=1"}, "template holds a control character"},
		{"  ", []string{"T=1"}, "the template is empty"},
		{"# {T}", []string{"T=1"}, "the template is a comment"},
		{"sim '{T}'", []string{"T=a b"}, "{T} is inside quotes in the template"},
		{"sim {a} {b}", []string{"a=1..10000", "b=1..10000"}, "make 100000000 cases, more than the 10000000"},
		{"sim {a}", []string{"a=1..100000000"}, "more than 10000000 values"},
	} {
		_, err := ParseSweep(c.template, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseSweep(%q, %q): %v, want one line with %q", c.template, c.args, err, c.want)
		}
	}
}

// The lines go through NumberAdded, the check of every line added.
func TestSweepLinesAreChecked(t *testing.T) {
	s, err := ParseSweep("sim {T} #FARM cpus={c}", []string{"T=1", "c=2,x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NumberAdded("--sweep", s.Reader(), 1, true)
	if err == nil || !strings.Contains(err.Error(), "--sweep:2: #FARM") {
		t.Fatalf("NumberAdded: %v", err)
	}
	if d := s.Describe(1); d != "T=1 c=x" {
		t.Errorf("Describe(1) = %q", d)
	}
	s, _ = ParseSweep("sim {T}", []string{"T=1..3"})
	a, err := NumberAdded("--sweep", s.Reader(), 5, true)
	if err != nil || string(a.Lines) != "5 sim 1\n6 sim 2\n7 sim 3\n" {
		t.Errorf("NumberAdded: %q, %v", a.Lines, err)
	}
}
