package status

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Leftovers is what one status file says its meta-job held and did not
// finish: read by the meta-job that rescues the cases of a dead one
// (metajob/rescue.go).
type Leftovers struct {
	Job     string // the header's job ID
	Run     int    // the header's run
	Restart int    // the header's incarnation
	// Open are the cases it started and did not end (no E or I record):
	// the cases it was running when it died.
	Open []OpenCase
	// Unstarted are the cases it claimed (C records) and never started
	// nor set aside as unfit (no S or U record after the claim), in the
	// order claimed.
	Unstarted []int64
	// Next is, for an unstarted case handed to it by a rescue after an
	// earlier attempt (a C record's next=), the attempt it is to be.
	Next map[int64]int
	// Quitted: it exited by itself (a Q record).
	Quitted bool
}

// OpenCase is a case started and not ended.
type OpenCase struct {
	ID      int64
	Start   float64
	Attempt int // which attempt in the run its start was: 1 for the first
}

// ReadLeftovers reads the status file at path for its Leftovers. Damaged
// lines are skipped; a line being written (no newline yet) is left out.
func ReadLeftovers(path string) (Leftovers, error) {
	var l Leftovers
	f, err := os.Open(path)
	if err != nil {
		return l, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return l, fmt.Errorf("%s is a directory, not a status file: move it out of %s", path, filepath.Dir(path))
	}
	held := map[int64]bool{} // claimed and not started
	var order []int64
	var open []OpenCase
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if rec, perr := ParseRecord(line); perr == nil {
				open, order = l.replay(&rec, held, open, order)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return l, err
		}
	}
	l.Open = open
	for _, id := range order {
		if held[id] {
			l.Unstarted = append(l.Unstarted, id)
			held[id] = false // once, if claimed twice
		}
	}
	return l, nil
}

// replay applies one record to what the file's meta-job held.
func (l *Leftovers) replay(r *Record, held map[int64]bool, open []OpenCase, order []int64) ([]OpenCase, []int64) {
	switch r.Kind {
	case KindHeader:
		l.Job, l.Run, l.Restart = string(r.Job), r.Run, r.Restart
	case KindClaimed:
		ids, _ := ParseIDs(r.IDs)
		if len(r.Next) > 0 {
			next, _ := ParseNext(r.Next)
			for id, n := range next {
				if l.Next == nil {
					l.Next = map[int64]int{}
				}
				l.Next[id] = n
			}
		}
		for _, id := range ids {
			if !held[id] {
				held[id] = true
				order = append(order, id)
			}
		}
	case KindStart:
		held[r.ID] = false
		open = append(open, OpenCase{ID: r.ID, Start: r.Start, Attempt: max(r.Attempt, 1)})
	case KindUnfit:
		held[r.ID] = false
	case KindEnd, KindInterrupted:
		for i := len(open) - 1; i >= 0; i-- {
			if open[i].ID == r.ID {
				open = append(open[:i], open[i+1:]...)
				break
			}
		}
	case KindQuit:
		l.Quitted = true
	}
	return open, order
}
