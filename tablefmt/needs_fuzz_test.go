package tablefmt

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// FuzzParseNeeds: ParseNeeds never panics; the command it returns is a
// prefix of its input (the input itself when the line declares nothing or
// its #FARM part is refused); an error is one short line that says which
// part is wrong; and what it reads is in range and reads back the same
// once written out again after the command.
func FuzzParseNeeds(f *testing.F) {
	for _, s := range []string{
		"./run 1 #FARM cpus=4 gpus=1 mem=8G min_time=30m",
		"echo #FARM x #FARM cpus=2",
		"echo a#FARM cpus=2",
		"#FARM cpus=1",
		"echo a #FARM",
		"echo a #FARM cpu=2 cpus=2 cpus=3",
		"x #FARM mem=1024K min_time=1-02:03:04",
		"x #FARM min_time=1h30m mem=8gb gpus=0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cmd, n, err := ParseNeeds(in)
		if !strings.HasPrefix(in, cmd) {
			t.Fatalf("%q: command %q is not a prefix of the input", in, cmd)
		}
		if err != nil {
			msg := err.Error()
			if cmd != in || n != (Needs{GPUs: -1}) {
				t.Fatalf("%q: error %v, yet command %q, %+v", in, err, cmd, n)
			}
			if !strings.HasPrefix(msg, NeedsMark+": ") && msg != "a case needs a command before "+NeedsMark || strings.ContainsAny(msg, "\r\n") || len(msg) > 300 {
				t.Fatalf("%q: error %q is not one short line about the %s part", in, msg, NeedsMark)
			}
			return
		}
		if !n.Declared && n.Time == 0 {
			if cmd != in || n != (Needs{GPUs: -1}) {
				t.Fatalf("%q: nothing declared, yet command %q, %+v", in, cmd, n)
			}
			return
		}
		rest := strings.TrimLeftFunc(in[len(cmd):], unicode.IsSpace)
		if strings.TrimSpace(cmd) == "" || strings.TrimRightFunc(cmd, unicode.IsSpace) != cmd ||
			len(rest) == len(in[len(cmd):]) || !strings.HasPrefix(rest, NeedsMark) {
			t.Fatalf("%q: command %q, then %q", in, cmd, in[len(cmd):])
		}
		if n.CPUs < 0 || n.GPUs < -1 || n.MemMB < 0 || n.MinTime < 0 || n.MinTime > MaxMinTime || n.Time < 0 || n.Time > MaxMinTime ||
			n.CPUs == 0 && n.GPUs == -1 && n.MemMB == 0 && n.MinTime == 0 && n.Time == 0 {
			t.Fatalf("%q: %+v", in, n)
		}
		again := cmd + " " + formatNeeds(n)
		cmd2, n2, err := ParseNeeds(again)
		if err != nil || cmd2 != cmd || n2 != n {
			t.Fatalf("%q: %q, %+v written as %q reads back as %q, %+v, %v", in, cmd, n, again, cmd2, n2, err)
		}
	})
}

// formatNeeds writes n as a NeedsMark part.
func formatNeeds(n Needs) string {
	s := NeedsMark
	if n.CPUs > 0 {
		s += fmt.Sprintf(" cpus=%d", n.CPUs)
	}
	if n.GPUs >= 0 {
		s += fmt.Sprintf(" gpus=%d", n.GPUs)
	}
	if n.MemMB > 0 {
		s += fmt.Sprintf(" mem=%dM", n.MemMB)
	}
	if n.MinTime > 0 {
		s += " min_time=" + n.MinTime.String()
	}
	if n.Time > 0 {
		s += " time=" + n.Time.String()
	}
	return s
}
