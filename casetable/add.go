package casetable

import (
	"bytes"
	"fmt"
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
// a table.dat line is (its #FARM part, its length). A line whose first
// field starts with a digit is refused: farm numbers what it adds, and a
// numbered line would get a second ID. With numbered, the cases get IDs
// from first on ("ID command"); else they are kept as given (a table not
// numbered yet: the first 'farm submit' numbers it). A file of no case is
// ErrEmptyTable. Errors are *LineError, naming the line.
func NumberAdded(name string, r io.Reader, first int64, numbered bool) (Added, error) {
	a := Added{}
	if numbered {
		a.First = first
	}
	id := first
	err := eachLine(r, func(n int, line []byte) error {
		line = trimEOL(line)
		if !isCase(line) {
			return nil
		}
		cmd := bytes.TrimLeft(line, " \t")
		if startsWithID(cmd) {
			return &LineError{File: name, Line: n, Msg: fmt.Sprintf("%s starts with a number, as a numbered table's ID: farm add numbers the cases itself; give each command alone (one that starts with a digit can be run as \"command %s\")", quote(string(firstField(cmd))), firstField(cmd))}
		}
		if len(cmd) > MaxCommand {
			return tooLong(name, n, len(cmd))
		}
		if err := checkNeeds(name, n, string(cmd)); err != nil {
			return err
		}
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
