package tablefmt

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// FuzzTableLine: reading table.dat line by line (eachLine, isCase,
// splitID, as Validate, ReadCases and the claim loop do) never panics;
// every line is seen once, with its number and without its line ending; a
// case line that does not read as "ID command" gets an error of one line,
// which Validate and ReadCases report as "table.dat:LINE: ..."; a line
// that reads gives a positive ID and a command that reads back the same
// once written out; and an unnumbered case line, as Number numbers it,
// reads back as its number and the line.
func FuzzTableLine(f *testing.F) {
	f.Add([]byte("# comment\n17 ./code 1.0\r\n\n./code 2.0; echo done"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			want++
		}
		seen := 0
		err := eachLine(bytes.NewReader(data), func(n int, line []byte) error {
			seen++
			if n != seen || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("%q: line %d given as line %d: %q", data, seen, n, line)
			}
			checkTableLine(t, n, line)
			return nil
		})
		if err != nil || seen != want {
			t.Fatalf("%q: %d lines read, want %d (%v)", data, seen, want, err)
		}
	})
}

func checkTableLine(t *testing.T, n int, line []byte) {
	if !isCase(line) {
		return
	}
	id, cmd, digits, err := splitID(line)
	if err != nil {
		msg := (&LineError{File: "/farm/table.dat", Line: n, Msg: err.Error()}).Error()
		if !strings.HasPrefix(msg, "table.dat:"+strconv.Itoa(n)+": ") || strings.ContainsAny(msg, "\r\n") || len(msg) > 300 {
			t.Fatalf("line %d %q: error %q is not one short line naming the line", n, line, msg)
		}
	} else {
		if !digits || id < 1 || cmd == "" || strings.TrimSpace(cmd) != cmd {
			t.Fatalf("line %d %q: ID %d, command %q, digits %t", n, line, id, cmd, digits)
		}
		again := strconv.FormatInt(id, 10) + " " + cmd
		if id2, cmd2, _, err := splitID([]byte(again)); err != nil || id2 != id || cmd2 != cmd {
			t.Fatalf("line %d %q: %d %q written as %q reads back as %d %q, %v", n, line, id, cmd, again, id2, cmd2, err)
		}
	}
	// Number writes "N " and the trimmed line.
	num := strconv.Itoa(n) + " " + string(bytes.TrimSpace(line))
	if !isCase([]byte(num)) {
		t.Fatalf("line %d %q: numbered as %q, not a case", n, line, num)
	}
	if id2, cmd2, _, err := splitID([]byte(num)); err != nil || id2 != int64(n) || cmd2 != string(bytes.TrimSpace(line)) {
		t.Fatalf("line %d %q: numbered as %q, reads back as %d %q, %v", n, line, num, id2, cmd2, err)
	}
}
