package status

import (
	"cmp"
	"path/filepath"
	"slices"
)

// Frame is where one attempt of a case kept its output apart (OUTPUT=job,
// Placement's Framed): in the files of its loop (layout.CaseOutput of
// File and Loop), from Out[0] and Err[0], to Out[1] and Err[1], each -1
// for the file's end (the loop's last attempt, or one running).
type Frame struct {
	// Framed: the attempt's output was kept apart; an attempt that
	// started without (OUTPUT=stream) has a Frame too, without it.
	Framed bool
	ID     int64
	File   string // the status file's name ("status.JOBID"), without its directory
	Job    string
	Loop   int // from 1
	Start  float64
	State  State
	Status int
	// Attempt is its S record's attempt= (0: its first in the run).
	Attempt  int
	Out, Err [2]int64
	seq      uint32 // its start record's place in its file
}

// Frames reads every status file in dir (ReadFile's replay) and returns
// the frames of the attempts that started of the cases want chooses, in
// the order they started. A file that cannot be read is an error.
func Frames(dir string, want func(id int64) bool) ([]Frame, error) {
	names, err := statusFiles(dir)
	if err != nil {
		return nil, err
	}
	var frames []Frame
	for _, name := range names {
		var all []Frame // every frame of the file: its ends are the next starts
		base := filepath.Base(name)
		f, err := ReadFile(name, ReadOptions{}, func(f *File, a *Attempt) error {
			fr := Frame{Framed: a.Framed, ID: a.ID, File: base, Loop: max(a.Loop, 1), Start: a.Start, State: a.State, Status: a.Status,
				Attempt: a.Attempt, Out: [2]int64{a.Out, -1}, Err: [2]int64{a.Err, -1}, seq: a.seq}
			switch {
			case a.Framed:
				all = append(all, fr)
			case a.Started && want(a.ID):
				fr.Job = f.Job
				frames = append(frames, fr)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		// A loop runs one case at a time, and its frames follow each
		// other in its files as its start records do in the status file.
		slices.SortStableFunc(all, func(a, b Frame) int {
			return cmp.Or(cmp.Compare(a.Loop, b.Loop), cmp.Compare(a.seq, b.seq))
		})
		for i := range all {
			if i+1 < len(all) && all[i+1].Loop == all[i].Loop {
				all[i].Out[1], all[i].Err[1] = all[i+1].Out[0], all[i+1].Err[0]
			}
			if want(all[i].ID) {
				all[i].Job = f.Job
				frames = append(frames, all[i])
			}
		}
	}
	slices.SortStableFunc(frames, func(a, b Frame) int { return cmp.Compare(a.Start, b.Start) })
	return frames, nil
}
