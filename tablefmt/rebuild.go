package tablefmt

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/farm-hpc/farm/atomicfile"
)

// Rebuild writes to dst the cases of the numbered table src for which keep
// returns true, as "ID command" lines with their original IDs (the command
// as written, its NeedsMark part included), and returns how many it
// wrote. dst is written to a temporary file and renamed, so it is
// never seen half-written; it gets src's mode (a table kept private stays
// private). A line checkCase refuses (a line edited since the table was
// validated) is refused with its line, as is one that repeats an ID: the
// new run would start that case twice.
func Rebuild(src, dst string, keep func(id int64) bool) (int, error) {
	n, _, err := RebuildSource(src, dst, keep)
	return n, err
}

// RebuildSource is Rebuild that also returns the Source of what it read
// (a run records it: farm then tells when table.dat has changed since).
func RebuildSource(src, dst string, keep func(id int64) bool) (int, Source, error) {
	in, hr, s, err := openSource(src)
	if err != nil {
		return 0, Source{}, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return 0, Source{}, err
	}
	n := 0
	err = atomicfile.Write(dst, st.Mode().Perm(), func(w *bufio.Writer) error {
		var num []byte
		var err error
		n, err = scanKept(hr, src, keep, func(id int64, cmd string) {
			num = strconv.AppendInt(num[:0], id, 10)
			w.Write(num)
			w.WriteByte(' ')
			w.WriteString(cmd)
			w.WriteByte('\n') // an error sticks: atomicfile.Write's Flush reports it
		})
		return err
	}, "")
	if err != nil {
		return n, Source{}, err
	}
	return n, hr.source(s), nil
}

// CountKept is Rebuild that writes nothing: it checks src as Rebuild does
// and returns how many cases Rebuild would write. A command that may still
// be refused counts the cases first, and writes once it will go on.
func CountKept(src string, keep func(id int64) bool) (int, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	return scanKept(in, src, keep, nil)
}

// scanKept reads the numbered table src from in, checks every case line,
// and calls emit (if not nil) for each case keep keeps; it returns how many
// it kept.
func scanKept(in io.Reader, src string, keep func(id int64) bool, emit func(id int64, cmd string)) (int, error) {
	n := 0
	var ids idSet
	err := eachLine(in, func(line int, b []byte) error {
		if !isCase(b) {
			return nil
		}
		id, cmd, err := checkCase(src, line, b, true)
		if err != nil {
			return err
		}
		if ids.add(id) {
			return &LineError{File: src, Line: line, Msg: fmt.Sprintf("duplicate case ID %d (first used on line %d); every case needs its own ID", id, firstLineOf(src, id))}
		}
		if !keep(id) {
			return nil
		}
		n++
		if emit != nil {
			emit(id, cmd)
		}
		return nil
	})
	return n, err
}
