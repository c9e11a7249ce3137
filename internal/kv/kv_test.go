package kv

import (
	"errors"
	"math"
	"testing"
)

// TestRoundTrip: what Append writes, Reader reads back, typed; a word is
// told from a field; the first value that does not read is the error,
// naming the field, and ends the reading.
func TestRoundTrip(t *testing.T) {
	var b []byte
	b = Append(b, "table", "MISC/table.run1")
	b = AppendInt(b, "gen", -7)
	b = AppendUint(b, "tino", math.MaxUint64)
	b = AppendFloat(b, "cutoff", 12.345678901234567)
	b = AppendBool(b, "simple", true)
	b = append(b, " closed"...)
	if want := "table=MISC/table.run1 gen=-7 tino=18446744073709551615 cutoff=12.345678901234567 simple=true closed"; string(b) != want {
		t.Fatalf("wrote %q, want %q", b, want)
	}
	r := NewReader(string(b) + "\n")
	var got struct {
		table  string
		gen    int64
		tino   uint64
		cutoff float64
		simple bool
		closed bool
	}
	for r.Next() {
		switch r.Key() {
		case "table":
			got.table = r.Value()
		case "gen":
			got.gen = r.Int()
		case "tino":
			got.tino = r.Uint()
		case "cutoff":
			got.cutoff = r.Float()
		case "simple":
			got.simple = r.Bool()
		case "closed":
			got.closed = r.Word()
		}
	}
	if r.Err() != nil || got.table != "MISC/table.run1" || got.gen != -7 || got.tino != math.MaxUint64 || got.cutoff != 12.345678901234567 || !got.simple || !got.closed {
		t.Fatalf("read %+v, %v", got, r.Err())
	}
	r = NewReader("run=1 offset=zz lines=x next=3")
	seen := 0
	for r.Next() {
		seen++
		if r.Key() != "run" {
			r.Int()
		}
	}
	if r.Err() == nil || r.Err().Error() != `bad field "offset=zz": strconv.ParseInt: parsing "zz": invalid syntax` || seen != 2 {
		t.Errorf("a bad value: %v after %d fields; want the first, offset=zz, and no field read after it", r.Err(), seen)
	}
	r = NewReader("a=1")
	r.Next()
	r.Fail(errors.New("out of range"))
	if r.Next() || r.Err().Error() != `bad field "a=1": out of range` {
		t.Errorf("Fail: %v", r.Err())
	}
}
