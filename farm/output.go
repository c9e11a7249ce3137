package farm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
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
		return Userf("case %d has not started (or is no case of this farm: 'farm Status' lists them): it has no output", opt.ID)
	}
	n := len(frames)
	if opt.Attempt > n {
		return Userf("case %d started %d time(s); --attempt must be from 1 to %d", opt.ID, n, n)
	}
	if opt.Attempt > 0 {
		n = opt.Attempt
	}
	fr := frames[n-1]
	if !fr.Framed {
		return f.notFramed(fr, n, len(frames))
	}
	return f.printFrame(w, fr, opt.Stderr, opt.Tail)
}

// notFramed is the error of farm output for attempt n (of all) of a case
// whose output was not kept apart: where it went.
func (f *Farm) notFramed(fr status.Frame, n, all int) error {
	what := fmt.Sprintf("attempt %d of case %d (job %s)", n, fr.ID, fr.Job)
	if n == all {
		what = fmt.Sprintf("the latest attempt of case %d (job %s)", fr.ID, fr.Job)
	}
	why := "it ran before OUTPUT=job was set in " + layout.Config
	if !f.Config.OutputJob {
		why = layout.Config + " has no OUTPUT=job"
	}
	return Userf("%s was not kept apart (%s): its output went into its job's output file in %s/, with the other cases' of that job; add OUTPUT=job to %s for the next runs",
		what, why, layout.OutputDir, layout.Config)
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
	unread := 0
	for _, id := range slices.Sorted(maps.Keys(failed)) {
		c := failed[id]
		what := fmt.Sprintf("failed with status %d", c.Status)
		if c.State == status.TimedOut {
			what = "timed out"
		}
		fr, ok := latest[id]
		if !ok || !fr.Framed {
			fmt.Fprintf(bw, "==> case %d: %s; its latest attempt ran without OUTPUT=job: its output is in its job's output file in %s/ <==\n", id, what, layout.OutputDir)
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
				fmt.Fprintf(bw, "farm: %v\n", err) // and on with the next
				unread++
			}
		}
	}
	if unread > 0 {
		bw.Flush()
		return Userf("%d of the failed cases' outputs could not be printed: each is said under its case's header above", unread)
	}
	return nil
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
	var fi os.FileInfo
	if err == nil {
		defer fh.Close()
		fi, err = fh.Stat()
	}
	if err != nil {
		return Userf("reading case %d's output: %v: it was written to %s, from byte %d; if the file was moved or deleted (farm clean), it is gone", fr.ID, err, name, span[0])
	}
	from, to := span[0], span[1]
	if to < 0 || to > fi.Size() {
		to = fi.Size()
	}
	if from > fi.Size() {
		return Userf("%s holds %d bytes, and case %d's output starts at byte %d, as its status record says: the file was cut since", name, fi.Size(), fr.ID, from)
	}
	if from >= to {
		return nil // it wrote nothing there
	}
	head := status.AppendCaseHeader(nil, fr.ID)
	got := make([]byte, len(head))
	if n, _ := fh.ReadAt(got, from); n < len(head) || !bytes.Equal(got, head) {
		return Userf("%s: byte %d does not start case %d's output, as its status record says it does: the file was changed since; 'tail -c +%d %s' shows what is there", name, from, fr.ID, from+1, name)
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
