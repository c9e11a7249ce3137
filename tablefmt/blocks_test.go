package tablefmt

import (
	"fmt"
	"strings"
	"testing"
)

// TestIndexBlocks indexes a table with comments, blank lines and a line
// longer than the reader's buffer in blocks of 2 cases, whole and its
// first bytes only.
func TestIndexBlocks(t *testing.T) {
	long := "echo " + strings.Repeat("x", 9000)
	lines := []string{"# a comment", "echo 1", "", "echo 2", long, "# x", "echo 4", "echo 5"}
	table := strings.Join(lines, "\n") + "\n"
	off := func(i int) int64 { return int64(len(strings.Join(lines[:i], "\n")) + 1) }
	x, err := IndexBlocks(strings.NewReader(table), "t", int64(len(table)), func(cases int64) int64 {
		if cases != 5 {
			t.Errorf("block size asked for %d cases, want 5", cases)
		}
		return 2
	})
	want := fmt.Sprint(Blocks{Cases: 5, Size: 2, Starts: []int64{off(1), off(4), off(7)}, Lines: []int64{1, 4, 7}})
	if err != nil || fmt.Sprint(x) != want {
		t.Errorf("IndexBlocks = %v, %v; want %v", x, err, want)
	}
	x, err = IndexBlocks(strings.NewReader(table), "t", off(4), func(int64) int64 { return 2 })
	if want := fmt.Sprint(Blocks{Cases: 2, Size: 2, Starts: []int64{off(1)}, Lines: []int64{1}}); err != nil || fmt.Sprint(x) != want {
		t.Errorf("IndexBlocks of the first %d bytes = %v, %v; want %v", off(4), x, err, want)
	}
}
