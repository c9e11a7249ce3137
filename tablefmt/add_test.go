package tablefmt

import (
	"strings"
	"testing"
)

func TestNumberAdded(t *testing.T) {
	a, err := NumberAdded("more", strings.NewReader("echo a\n\n# note\n  echo b #FARM cpus=2\r\n"), 8, true)
	if err != nil || string(a.Lines) != "8 echo a\n9 echo b #FARM cpus=2\n" || a.Cases != 2 || a.First != 8 || a.Last != 9 {
		t.Errorf("numbered: %+v %q, %v", a, a.Lines, err)
	}
	a, err = NumberAdded("more", strings.NewReader("echo a\n"), 1, false)
	if err != nil || string(a.Lines) != "echo a\n" || a.First != 0 {
		t.Errorf("not numbered: %+v %q, %v", a, a.Lines, err)
	}
	// A line that starts with a number is a case whose first parameter
	// it is, as in a table farm numbers.
	a, err = NumberAdded("more", strings.NewReader("101 0.5\n202 0.7\n"), 3, true)
	if err != nil || string(a.Lines) != "3 101 0.5\n4 202 0.7\n" {
		t.Errorf("numbers: %q, %v", a.Lines, err)
	}
	for in, want := range map[string]string{
		"echo a\necho b\x00c\n":                  `more:2: a NUL byte at column 7: a case line must be text; remove it`,
		"echo a\necho \x1b[31mred\n":             `more:2: a control character (byte 0x1b) at column 6: a case line must be text; remove it`,
		"echo a\tb\necho \x7f\n":                 `more:2: a control character (byte 0x7f)`,
		"echo a\rb\n":                            `more:1: a control character (byte 0x0d) at column 7`,
		"echo a #FARM gpu=1\n":                   `more:1: #FARM: unknown key "gpu"`,
		"\n# only a comment\n":                   "table has no cases",
		strings.Repeat("x", MaxCommand+1) + "\n": "more:1: the command is",
	} {
		_, err := NumberAdded("more", strings.NewReader(in), 1, true)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NumberAdded(%.20q): %v; want %q", in, err, want)
		}
	}
}
