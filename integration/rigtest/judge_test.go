package rigtest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestJudgeCopies: how a mknod race's name is judged from the returns and
// the bricks' copies, on the rig's 2 x 2 layout (no rig needed). The CI
// run of 2026-11-30's name 56174 (a batch of regular files raced against
// FIFOs; client 2, which makes regular files, told it made it; brick 1 a
// regular file, brick 2 a FIFO) is a split-brain, the known limit of
// replica 2, not two winners; the same copies with a FIFO maker told it
// made it are.
func TestJudgeCopies(t *testing.T) {
	const name = 56174 // batch 56: regular files (clients 0, 2) against FIFOs (1, 3)
	reg, fifo := uint32(unix.S_IFREG), uint32(unix.S_IFIFO)
	twoTypes := []brickCopy{{1, reg, "e7d6"}, {2, fifo, "29ed"}}
	for _, c := range []struct {
		what   string
		by     []int
		copies []brickCopy
		// want: doubles, split, splitTypes, mismatch
		doubles, split, splitTypes, mismatch int
	}{
		{"type mismatch, the first brick the winner's", []int{2}, twoTypes, 0, 1, 1, 0},
		{"type mismatch, the first brick not the winner's", []int{1}, twoTypes, 1, 0, 0, 0},
		{"type mismatch, nobody told", nil, twoTypes, 0, 1, 1, 0},
		{"type mismatch, the winner's copy missing from the first brick", []int{2}, []brickCopy{{2, reg, "a"}, {4, fifo, "b"}}, 1, 0, 0, 0},
		{"two returns", []int{0, 2}, []brickCopy{{1, reg, "a"}, {2, reg, "a"}}, 1, 0, 0, 0},
		{"GFID split-brain", []int{0}, []brickCopy{{1, reg, "a"}, {2, reg, "b"}}, 0, 1, 0, 0},
		{"one file", []int{3}, []brickCopy{{1, fifo, "a"}, {2, fifo, "a"}}, 0, 0, 0, 0},
		{"one file, not the winner's type", []int{3}, []brickCopy{{1, reg, "a"}, {2, reg, "a"}}, 0, 0, 0, 1},
	} {
		res := raceResult{spec: raceSpec{op: "claimcore", batch: 1000}, setSize: 2, kinds: map[string]int{}}
		res.judgeCopies(name, c.by, false, false, c.copies)
		got := [4]int{res.doubles, res.split, res.splitTypes, res.mismatch}
		if want := [4]int{c.doubles, c.split, c.splitTypes, c.mismatch}; got != want {
			t.Errorf("%s: doubles, split, type mismatches, mismatches = %v, want %v (%v)", c.what, got, want, res.examples)
		}
	}
}
