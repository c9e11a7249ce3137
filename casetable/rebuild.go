package casetable

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
)

// Rebuild writes to dst the cases of the numbered table src for which keep
// returns true, as "ID command" lines with their original IDs, and returns
// how many it wrote. dst is written to a temporary file and renamed, so it is
// never seen half-written; it gets src's mode (a table kept private stays
// private). A line that does not read, or repeats an ID (a line added since
// the table was validated), is refused with its line: the new run would
// start that case twice.
func Rebuild(src, dst string, keep func(id int64) bool) (int, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return 0, err
	}
	n := 0
	err = WriteAtomic(dst, st.Mode().Perm(), func(w *bufio.Writer) error {
		var num []byte
		var ids idSet
		return eachLine(in, func(line int, b []byte) error {
			if !isCase(b) {
				return nil
			}
			id, cmd, _, err := splitID(b)
			if err != nil {
				return &LineError{File: src, Line: line, Msg: err.Error() + "; fix the line"}
			}
			if ids.add(id) {
				return &LineError{File: src, Line: line, Msg: fmt.Sprintf("duplicate case ID %d (first used on line %d); every case needs its own ID", id, firstLineOf(src, id))}
			}
			if !keep(id) {
				return nil
			}
			n++
			num = strconv.AppendInt(num[:0], id, 10)
			w.Write(num)
			w.WriteByte(' ')
			w.WriteString(cmd)
			return w.WriteByte('\n')
		})
	}, "")
	return n, err
}
