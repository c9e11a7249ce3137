package farm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// OutputOptions say what farm output prints.
type OutputOptions struct {
	ID      int64 // the case (unless Failed)
	Attempt int   // which of its attempts, from 1 in the order they started; 0: its latest
	Tail    int   // its last Tail lines only; 0: all of it
	Stderr  bool  // its standard error, not its standard output
	// Failed: the last lines (Tail, 10 if 0) of the latest attempt of
	// every case that failed or timed out, its standard output then its
	// standard error (only that with Stderr).
	Failed bool
}

// Output prints what a case wrote, kept apart with OUTPUT=job in config
// (metajob/caseout.go): each attempt's bytes as it wrote them, from its
// loop's file, where its start record says.
func (f *Farm) Output(ctx context.Context, w io.Writer, opt OutputOptions) error {
	if opt.Failed {
		return f.outputFailed(ctx, w, opt)
	}
	frames, err := status.Frames(f.Path(layout.StatusDir), func(id int64) bool { return id == opt.ID })
	if err != nil {
		return err
	}
	if len(frames) == 0 {
		return f.noFrames(ctx, opt.ID)
	}
	fr := frames[len(frames)-1]
	if opt.Attempt > 0 {
		if opt.Attempt > len(frames) {
			return Userf("case %d has %d attempt(s) with output kept apart; --attempt must be from 1 to %d", opt.ID, len(frames), len(frames))
		}
		fr = frames[opt.Attempt-1]
	}
	return f.printFrame(w, fr, opt.Stderr, opt.Tail)
}

// noFrames is the error of farm output for a case with no output kept
// apart: why, and where its output went if it ran.
func (f *Farm) noFrames(ctx context.Context, id int64) error {
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	c := sum.Get(id)
	switch {
	case c.State == status.NeverRan:
		return Userf("case %d has not run (or is no case of this farm: 'farm Status' lists them): it has no output", id)
	case c.State == status.Unfit:
		return Userf("case %d was never started (%s): it has no output", id, c.Reason)
	case c.Job == "":
		return Userf("case %d has no output that farm kept apart", id)
	}
	if !f.Config.OutputJob {
		return Userf("case %d's output was not kept apart: %s has no OUTPUT=job, so it went into its job's output file in %s/ (job %s), with the other cases' of that job; add OUTPUT=job to %s for the next runs",
			id, layout.Config, layout.OutputDir, c.Job, layout.Config)
	}
	return Userf("case %d's output was not kept apart: it ran (in job %s) before OUTPUT=job was set in %s, so it went into its job's output file in %s/, with the other cases' of that job",
		id, c.Job, layout.Config, layout.OutputDir)
}

// outputFailed prints the last lines of every case that failed or timed
// out, under a header each.
func (f *Farm) outputFailed(ctx context.Context, w io.Writer, opt OutputOptions) error {
	sum, err := f.Summary(ctx)
	if err != nil {
		return err
	}
	failed := map[int64]status.Case{}
	sum.Each(func(c status.Case) error {
		if c.State == status.Failed || c.State == status.TimedOut {
			failed[c.ID] = c
		}
		return nil
	})
	if len(failed) == 0 {
		fmt.Fprintln(w, "No case failed or timed out.")
		return nil
	}
	frames, err := status.Frames(f.Path(layout.StatusDir), func(id int64) bool { _, ok := failed[id]; return ok })
	if err != nil {
		return err
	}
	latest := map[int64]status.Frame{}
	for _, fr := range frames {
		latest[fr.ID] = fr // in the order they started: the last is the latest
	}
	tail := opt.Tail
	if tail == 0 {
		tail = 10
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for _, id := range sortedIDs(failed) {
		c := failed[id]
		what := fmt.Sprintf("failed with status %d", c.Status)
		if c.State == status.TimedOut {
			what = "timed out"
		}
		fr, ok := latest[id]
		if !ok {
			fmt.Fprintf(bw, "==> case %d: %s; its output was not kept apart (OUTPUT=job) <==\n", id, what)
			continue
		}
		for _, stderr := range []bool{false, true} {
			if opt.Stderr && !stderr {
				continue
			}
			name := "stdout"
			if stderr {
				name = "stderr"
			}
			fmt.Fprintf(bw, "==> case %d: %s (job %s): %s <==\n", id, what, fr.Job, name)
			if err := f.printFrame(bw, fr, stderr, tail); err != nil {
				return err
			}
		}
	}
	return nil
}

// sortedIDs are the keys of m in ascending order.
func sortedIDs(m map[int64]status.Case) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// printFrame copies frame fr's bytes of standard output (standard error)
// to w, or their last tail lines (tail > 0).
func (f *Farm) printFrame(w io.Writer, fr status.Frame, stderr bool, tail int) error {
	span := fr.Out
	if stderr {
		span = fr.Err
	}
	name := filepath.Join(layout.OutputDir, layout.CaseOutput(fr.File, fr.Loop, stderr))
	fh, err := os.Open(f.Path(name))
	if os.IsNotExist(err) && span[1] <= span[0] && span[1] >= 0 {
		return nil // wrote nothing; its file is gone (farm clean)
	}
	if err != nil {
		return fmt.Errorf("reading case %d's output: %w", fr.ID, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	from, to := span[0], span[1]
	if to < 0 || to > fi.Size() {
		to = fi.Size()
	}
	if from >= to {
		return nil // it wrote nothing there
	}
	head := status.AppendCaseHeader(nil, fr.ID)
	got := make([]byte, len(head))
	if n, _ := fh.ReadAt(got, from); n < len(head) || !bytes.Equal(got, head) {
		return Userf("%s: byte %d does not start case %d's output, as its status record says it does: the file was changed or cut since", name, from, fr.ID)
	}
	from += int64(len(head))
	if tail > 0 {
		from = tailStart(fh, from, to, tail)
	}
	_, err = io.Copy(w, io.NewSectionReader(fh, from, to-from))
	return err
}

// tailStart is where the last n lines of the bytes of r from from to to
// start (a last line without its newline counts as one).
func tailStart(r io.ReaderAt, from, to int64, n int) int64 {
	buf := make([]byte, 64<<10)
	end := to
	lines := 0
	for end > from {
		start := max(from, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := r.ReadAt(b, start); err != nil && err != io.EOF {
			return from
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' || start+int64(i) == to-1 {
				continue
			}
			if lines++; lines == n {
				return start + int64(i) + 1
			}
		}
		end = start
	}
	return from
}
