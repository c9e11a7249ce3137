package tablefmt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReaderCasesAtOffsets: a Reader hands out the case lines from any
// line start, a line longer than its window and a last line without a
// newline whole, comments and blank lines counted as lines; StartsLine
// tells a line's start from its middle, the table's end included.
func TestReaderCasesAtOffsets(t *testing.T) {
	long := strings.Repeat("x", Window+100)
	table := "# c\n1 echo a\n\n2 echo " + long + "\n3 echo c\n4 echo last"
	r := &Reader{}
	r.Reset(bytes.NewReader([]byte(table)), "t")
	var got []string
	var lines int64
	for off := int64(0); ; {
		if ok, err := r.StartsLine(off); !ok || err != nil {
			t.Fatalf("StartsLine(%d) = %v, %v; a case's end is a line's start", off, ok, err)
		}
		c, next, n, ok, err := r.Case(off, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		lines += n
		got = append(got, fmt.Sprintf("%d@%d:%.10s", c.ID, lines, c.Command))
		off = next
	}
	if want := "[1@2:echo a 2@4:echo xxxxx 3@5:echo c 4@6:echo last]"; fmt.Sprint(got) != want {
		t.Errorf("cases %v, want %s", got, want)
	}
	if ok, _ := r.StartsLine(5); ok {
		t.Errorf("byte 5, in the middle of a line, said to start one")
	}
	if ok, _ := r.StartsLine(int64(len(table)) + 5); ok {
		t.Errorf("a byte past the table said to start a line")
	}
	// Up to a size: the bytes appended after it are not read.
	r.Reset(bytes.NewReader([]byte("1 echo a\n2 echo b\n")), "t")
	if _, _, _, ok, _ := r.Case(9, 9); ok {
		t.Errorf("a case past the size was read")
	}
}

// TestFingerprintAndCountLines: the fingerprint tells files of one size
// apart and is the same for the same bytes; CountLines counts a last line
// without a newline.
func TestFingerprintAndCountLines(t *testing.T) {
	a, _ := Fingerprint(strings.NewReader("1 echo a\n"), 9)
	b, _ := Fingerprint(strings.NewReader("1 echo b\n"), 9)
	a2, _ := Fingerprint(strings.NewReader("1 echo a\n"), 9)
	if a == b || a != a2 {
		t.Errorf("fingerprints %s %s %s", a, b, a2)
	}
	p := filepath.Join(t.TempDir(), "t")
	for text, want := range map[string]int64{"": 0, "a\n": 1, "a\nb": 2, "a\n\n": 2} {
		os.WriteFile(p, []byte(text), 0o644)
		if n, err := CountLines(p); err != nil || n != want {
			t.Errorf("CountLines(%q) = %d, %v; want %d", text, n, err, want)
		}
	}
}
