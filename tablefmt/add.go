package tablefmt

import (
	"io"
	"strconv"
)

// Added is what NumberAdded made of lines a user adds to a farm ('farm
// add', issue 25).
type Added struct {
	Lines []byte // the cases as table lines, "ID command\n" (IDs from first), or as given when not numbered
	Cases int64  // how many
	First int64  // the first ID given (0 when not numbered)
	Last  int64  // the last ID given
}

// NumberAdded reads the cases to add from r (named name in errors): one
// command per line, blank lines and #-comments left out, each checked as
// every line that enters a farm is (checkCase). With numbered, the cases
// get IDs from first on ("ID command"), and a number a line starts with is
// its first parameter, as in a table farm numbers; else they are kept as
// given, for a table not numbered yet (which has a case line that is not
// numbered 1, 2, 3, ... already, so that lines after it cannot make it
// look numbered: the first 'farm submit' numbers them all). A file of no
// case is ErrEmptyTable. Errors are *LineError, naming the line.
func NumberAdded(name string, r io.Reader, first int64, numbered bool) (Added, error) {
	a := Added{}
	if numbered {
		a.First = first
	}
	id := first
	err := eachLine(r, func(n int, line []byte) error {
		if !isCase(line) {
			return nil
		}
		_, c, err := checkCase(name, n, line, false)
		if err != nil {
			return err
		}
		cmd := []byte(c)
		if numbered {
			a.Lines = strconv.AppendInt(a.Lines, id, 10)
			a.Lines = append(a.Lines, ' ')
			a.Last = id
			id++
		}
		a.Lines = append(append(a.Lines, cmd...), '\n')
		a.Cases++
		return nil
	})
	if err != nil {
		return Added{}, err
	}
	if a.Cases == 0 {
		return Added{}, ErrEmptyTable
	}
	return a, nil
}
