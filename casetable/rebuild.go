package casetable

import (
	"bufio"
	"os"
	"strconv"
)

// Rebuild writes to dst the cases of the numbered table src for which keep
// returns true, as "ID command" lines with their original IDs, and returns
// how many it wrote. dst is written to a temporary file and renamed, so it is
// never seen half-written; it gets src's mode (a table kept private stays
// private).
func Rebuild(src, dst string, keep func(id int64) bool) (int, error) {
	st, err := os.Stat(src)
	if err != nil {
		return 0, err
	}
	n := 0
	err = WriteAtomic(dst, st.Mode().Perm(), func(w *bufio.Writer) error {
		var num []byte
		return ReadCases(src, func(c Case) error {
			if !keep(c.ID) {
				return nil
			}
			n++
			num = strconv.AppendInt(num[:0], c.ID, 10)
			w.Write(num)
			w.WriteByte(' ')
			w.WriteString(c.Command)
			return w.WriteByte('\n')
		})
	}, "")
	return n, err
}
