package metajob

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
	"golang.org/x/sys/unix"
)

// The cases' output. With OUTPUT=stream (or no OUTPUT in config) a loop's
// cases write, stdout and stderr together, into the job's output file, as
// the meta-job's own lines do. With OUTPUT=job each loop keeps its cases'
// standard output and standard error in two files of its own in OUTPUT/
// (layout.CaseOutput), one attempt after the other: the loop runs one case
// at a time, so no other case's bytes come between. A case's start record
// says where its bytes start in each (status.Placement: out=N err=N); they
// run to where the loop's next start says, or to the file's end (farm
// output reads them, farm/output.go). Before the first byte a case writes
// to a file comes a line "==> case ID <==", for a reader of the file; a
// case that writes nothing to it costs nothing there. The meta-job copies
// every byte from a pipe of the loop's (bash's cases: forkRunner's; a
// program's: execRunner's, copyUntilHup), so it is the one writer of the
// files and knows where each case starts without asking the filesystem
// (its offset, an lseek); and a case that opens
// /dev/stdout afresh to write (echo >/dev/stderr, which truncates a file)
// opens the pipe, not the file. What a process a case left behind writes
// after the case ended goes with the case running then.

// caseFrames are one loop's two files of its cases' output (OUTPUT=job).
type caseFrames struct {
	out, err caseStream
}

// caseStream is one of them.
type caseStream struct {
	mu   sync.Mutex
	w    fsretry.Writer // its F: opened for appending
	head []byte         // the header of the case running, until its first byte
}

// openCaseFrames opens (appending, made if need be) the files of loop k
// of the meta-job whose status file is statusFile, in the farm directory
// dir's OUTPUT. An open that fails for a transient reason (an inode quota,
// a full disk) is retried, as the status file's is, and said on log, where
// the files' notes of an outage go too (fsretry.Writer's Notes): the
// files hold only what the cases wrote.
func openCaseFrames(dir, statusFile string, k int, log io.Writer) (*caseFrames, error) {
	cf := &caseFrames{}
	for i, s := range []*caseStream{&cf.out, &cf.err} {
		name := filepath.Join(layout.OutputDir, layout.CaseOutput(statusFile, k, i == 1))
		r := fsretry.Retrier{Log: log, What: name}
		err := r.Do(context.Background(), func() (err error) {
			s.w.F, err = os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_CLOEXEC, 0o644)
			return err
		})
		if err == nil {
			// Appending leaves the offset where it is until the
			// first write: begin reads it.
			_, err = s.w.F.Seek(0, io.SeekEnd)
		}
		if err != nil {
			cf.close()
			return nil, err
		}
		s.w.Notes, s.w.Name = log, name
	}
	return cf, nil
}

// begin says where case id's output starts in each file, and has its
// header written before its first byte; framed is false if a file's
// offset cannot be read (the case's output is then not kept apart).
func (cf *caseFrames) begin(id int64) (p status.Placement) {
	out, ok1 := cf.out.begin(id)
	err, ok2 := cf.err.begin(id)
	if ok1 && ok2 {
		p.Framed, p.Out, p.Err = true, out, err
	}
	return p
}

func (s *caseStream) begin(id int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head = status.AppendCaseHeader(s.head[:0], id)
	off, err := s.w.F.Seek(0, io.SeekCurrent) // where the last write ended: no call to the server
	return off, err == nil
}

// Write appends b, after the header of the case running if it is b's
// first byte.
//
// It never fails: a write that gave up is counted in the note fsretry
// writes to the job's output once the file works again; a case is not
// stopped for it. The
// header goes in one write with the first bytes, both or neither: it
// stays armed while nothing of it could be written, so that the bytes at
// the case's offset start with it once the file works again.
func (s *caseStream) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.head) == 0 || len(b) == 0 {
		s.w.Write(b)
		return len(b), nil
	}
	buf := append(s.head, b...)
	if n, _ := s.w.Write(buf); n > 0 {
		s.head = buf[:0]
	} else {
		s.head = buf[:len(s.head)]
	}
	return len(b), nil
}

func (cf *caseFrames) close() {
	if cf == nil {
		return
	}
	for _, s := range []*caseStream{&cf.out, &cf.err} {
		if s.w.F != nil {
			s.w.F.Close()
		}
	}
}

// outPipe is a pipe of the cases' output, its read end (non-blocking) and
// where its bytes go.
type outPipe struct {
	fd int
	w  io.Writer
}

// newOutPipes makes a pipe for each of ws, and returns the write ends,
// for the worker.
func newOutPipes(ws []io.Writer) ([]outPipe, []*os.File, error) {
	var pipes []outPipe
	var ends []*os.File
	for _, w := range ws {
		var p [2]int
		err := unix.Pipe2(p[:], unix.O_CLOEXEC)
		if err == nil {
			if err = unix.SetNonblock(p[0], true); err != nil {
				unix.Close(p[0])
				unix.Close(p[1])
			}
		}
		if err != nil {
			closeOutPipes(pipes)
			for _, f := range ends {
				f.Close()
			}
			return nil, nil, err
		}
		pipes = append(pipes, outPipe{fd: p[0], w: w})
		ends = append(ends, os.NewFile(uintptr(p[1]), "case output"))
	}
	return pipes, ends, nil
}

func closeOutPipes(pipes []outPipe) {
	for _, p := range pipes {
		if p.fd >= 0 {
			unix.Close(p.fd)
		}
	}
}

// wait copies the cases' output until the worker replies with a line (ok)
// or goes away. Everything the case wrote before it ended is in the pipes
// before the reply, and is copied before wait returns: the meta-job's own
// lines that follow come after it in the file, and the next case's
// output after it in a file of OUTPUT=job.
func (r *forkRunner) wait() (string, bool) {
	fds := make([]unix.PollFd, 0, 3)
	for _, p := range r.pipes {
		fds = append(fds, unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN})
	}
	fds = append(fds, unix.PollFd{Fd: int32(r.repR), Events: unix.POLLIN})
	rep := &fds[len(fds)-1]
	for {
		if i := bytes.IndexByte(r.reply, '\n'); i >= 0 {
			line := string(r.reply[:i])
			r.reply = append(r.reply[:0], r.reply[i+1:]...)
			r.drain()
			return line, true
		}
		if rep.Fd < 0 {
			r.drain()
			return "", false
		}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return "", false
		}
		for i, p := range r.pipes {
			// One read per wake-up, so that the reply is seen even
			// while a background process of the case writes without
			// end.
			if fds[i].Revents != 0 && !copyOnce(p, r.buf) {
				fds[i].Fd = -1 // every writer is gone
			}
		}
		if rep.Revents != 0 {
			n, err := unix.Read(r.repR, r.buf)
			if n > 0 {
				r.reply = append(r.reply, r.buf[:n]...)
			} else if err != unix.EAGAIN && err != unix.EINTR {
				rep.Fd = -1 // the worker is gone
			}
		}
	}
}

// copyOnce copies one read's worth of pipe p, through buf; false at the
// pipe's end.
func copyOnce(p outPipe, buf []byte) bool {
	for {
		n, err := unix.Read(p.fd, buf)
		if n > 0 {
			p.w.Write(buf[:n])
			return true
		}
		if err == unix.EINTR {
			continue
		}
		return err == unix.EAGAIN
	}
}

// drain copies what the output pipes hold now — no more: a background
// process the case left behind may go on writing, and the meta-job does not
// wait for it (what it writes later is copied while later cases run).
func (r *forkRunner) drain() { drainPipes(r.pipes, r.buf) }

// drainPipes copies what pipes hold now, through buf.
func drainPipes(pipes []outPipe, buf []byte) {
	for _, p := range pipes {
		if p.fd < 0 {
			continue
		}
		left, err := unix.IoctlGetInt(p.fd, unix.TIOCINQ) // FIONREAD
		if err != nil {
			continue
		}
		for left > 0 {
			n, err := unix.Read(p.fd, buf[:min(left, len(buf))])
			if n > 0 {
				p.w.Write(buf[:n])
				left -= n
				continue
			}
			if err != unix.EINTR {
				break
			}
		}
	}
}

// copyUntilHup copies pipes until fd hangs up (the case's process ended),
// one read a pipe a wake-up, then what they hold: everything the process
// wrote, and no more (what a process it left behind writes later is
// copied while later cases run, as forkRunner does).
func copyUntilHup(pipes []outPipe, fd int, buf []byte) {
	fds := make([]unix.PollFd, 0, len(pipes)+1)
	for _, p := range pipes {
		fds = append(fds, unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN})
	}
	fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			break
		}
		for i, p := range pipes {
			if fds[i].Revents != 0 && !copyOnce(p, buf) {
				fds[i].Fd = -1
			}
		}
		if fds[len(fds)-1].Revents != 0 {
			break
		}
	}
	drainPipes(pipes, buf)
}
