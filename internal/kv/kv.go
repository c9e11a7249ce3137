// Package kv is the one codec of farm's one-line records of key=value
// fields separated by spaces (the claim state's generations, a lane
// index's header, a run table's source record, dt_cutoff's record): what
// writes them and what reads them, with one wording for a field that does
// not read. A value never holds a space or a newline; a field without '='
// is a word (a closing generation's "closed").
package kv

import (
	"fmt"
	"strconv"
	"strings"
)

// Append appends the field key=value to b, after a space unless b is empty
// or ends in one.
func Append(b []byte, key, value string) []byte {
	if len(b) > 0 && b[len(b)-1] != ' ' {
		b = append(b, ' ')
	}
	b = append(b, key...)
	b = append(b, '=')
	return append(b, value...)
}

// AppendInt appends the field key=v.
func AppendInt(b []byte, key string, v int64) []byte {
	return Append(b, key, strconv.FormatInt(v, 10))
}

// AppendUint appends the field key=v.
func AppendUint(b []byte, key string, v uint64) []byte {
	return Append(b, key, strconv.FormatUint(v, 10))
}

// AppendFloat appends the field key=v, in the shortest form that reads
// back as v.
func AppendFloat(b []byte, key string, v float64) []byte {
	return Append(b, key, strconv.FormatFloat(v, 'g', -1, 64))
}

// AppendBool appends the field key=true or key=false.
func AppendBool(b []byte, key string, v bool) []byte {
	return Append(b, key, strconv.FormatBool(v))
}

// Reader reads the fields of one record in order:
//
//	r := kv.NewReader(line)
//	for r.Next() {
//		switch r.Key() {
//		case "run":
//			st.Run = r.Int()
//		}
//	}
//	if err := r.Err(); err != nil { ... }
//
// A typed getter whose value does not read keeps the first such error,
// and Next is false after it.
type Reader struct {
	fields   []string
	i        int
	key, val string
	word     bool
	err      error
}

// NewReader returns a Reader of line's fields.
func NewReader(line string) *Reader { return &Reader{fields: strings.Fields(line), i: -1} }

// Next moves to the next field; false at the end, or after an error.
func (r *Reader) Next() bool {
	if r.err != nil {
		return false
	}
	r.i++
	if r.i >= len(r.fields) {
		return false
	}
	var ok bool
	r.key, r.val, ok = strings.Cut(r.fields[r.i], "=")
	r.word = !ok
	return true
}

// Key is the field's key (a word's whole text).
func (r *Reader) Key() string { return r.key }

// Word says whether the field is a word, with no '='.
func (r *Reader) Word() bool { return r.word }

// Value is the field's value, as written.
func (r *Reader) Value() string { return r.val }

// Fail makes err, about the current field, the Reader's error (the first
// one stays).
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("bad field %q: %v", r.fields[r.i], err)
	}
}

// Int is the value as an int64.
func (r *Reader) Int() int64 {
	v, err := strconv.ParseInt(r.val, 10, 64)
	if err != nil {
		r.Fail(err)
	}
	return v
}

// Atoi is the value as an int.
func (r *Reader) Atoi() int {
	v, err := strconv.Atoi(r.val)
	if err != nil {
		r.Fail(err)
	}
	return v
}

// Uint is the value as a uint64.
func (r *Reader) Uint() uint64 {
	v, err := strconv.ParseUint(r.val, 10, 64)
	if err != nil {
		r.Fail(err)
	}
	return v
}

// Float is the value as a float64.
func (r *Reader) Float() float64 {
	v, err := strconv.ParseFloat(r.val, 64)
	if err != nil {
		r.Fail(err)
	}
	return v
}

// Bool is the value as a bool.
func (r *Reader) Bool() bool {
	v, err := strconv.ParseBool(r.val)
	if err != nil {
		r.Fail(err)
	}
	return v
}

// Err is the first error of a field that did not read.
func (r *Reader) Err() error { return r.err }
