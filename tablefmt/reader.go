package tablefmt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// Reader reads the case lines of a table at byte offsets, through a window
// of it: a batch of short cases comes in one read (one request to a file
// server). A table never changes once a run uses it (resubmit writes a new
// one), so the window never goes stale while R is the same file.
type Reader struct {
	R    io.ReaderAt // the table; Reset when it is another file
	Name string      // its name, for errors

	buf    []byte
	lbuf   []byte // a line longer than the window
	win    []byte // a window of the table, from byte winOff
	winOff int64
}

// Window is how much of the table one read brings in.
const Window = 64 << 10

// Reset makes r read r, named name, from nothing read.
func (r *Reader) Reset(ra io.ReaderAt, name string) {
	r.R, r.Name, r.win = ra, name, r.win[:0]
}

// Case reads the first case line at or after byte off, returning it, the
// offset just past it and the number of lines read (those that are not
// cases and the case's); false at the end of the table, or at byte size
// (the size the table had when the run started; 0: none).
func (r *Reader) Case(off, size int64) (Case, int64, int64, bool, error) {
	var lines int64
	for {
		if size > 0 && off >= size {
			return Case{}, off, lines, false, nil
		}
		line, next, err := r.line(off)
		if err == io.EOF {
			return Case{}, off, lines, false, nil
		}
		if err != nil {
			return Case{}, off, lines, false, err
		}
		off = next
		lines++
		// A needs part that does not read was refused by submit and
		// resubmit (Validate, Rebuild); a claim never fails on one,
		// which would stop the run at that line.
		c, ok, perr := ParseCase(line)
		if perr != nil {
			return Case{}, off, lines, false, fmt.Errorf("%s at byte %d: %v", r.Name, next, perr)
		}
		if ok {
			return c, off, lines, true, nil
		}
	}
}

// StartsLine reports whether byte off starts a line: off is 0 or follows
// a newline. It reads the window from off-1 when the window does not hold
// that byte, so that the lines from off come with the same read.
func (r *Reader) StartsLine(off int64) (bool, error) {
	if off == 0 {
		return true, nil
	}
	if !(off-1 >= r.winOff && off-1 < r.winOff+int64(len(r.win))) {
		n, err := r.fill(off - 1)
		if n == 0 {
			if err == nil || err == io.EOF {
				return false, nil // the table is shorter than off
			}
			return false, err
		}
	}
	if r.win[off-1-r.winOff] == '\n' {
		return true, nil
	}
	// The end of a table whose last line has no newline is no line's
	// middle: nothing follows.
	if off-r.winOff < int64(len(r.win)) {
		return false, nil
	}
	var b [1]byte
	n, err := r.R.ReadAt(b[:], off)
	if n == 0 && err == io.EOF {
		return true, nil
	}
	return false, err
}

// fill reads the window from off.
func (r *Reader) fill(off int64) (int, error) {
	if len(r.buf) != Window {
		r.buf = make([]byte, Window)
	}
	r.win = r.win[:0]
	n, err := r.R.ReadAt(r.buf, off)
	if n > 0 {
		r.win, r.winOff = r.buf[:n], off
	}
	return n, err
}

// line returns the line starting at off, from the window if it holds the
// whole line.
func (r *Reader) line(off int64) ([]byte, int64, error) {
	if off >= r.winOff && off < r.winOff+int64(len(r.win)) {
		b := r.win[off-r.winOff:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return b[:i+1], off + int64(i+1), nil
		}
	}
	n, err := r.fill(off)
	if i := bytes.IndexByte(r.win, '\n'); n > 0 && i >= 0 {
		return r.win[:i+1], off + int64(i+1), nil
	}
	switch {
	case err == io.EOF && n == 0:
		return nil, off, io.EOF
	case err == io.EOF:
		return r.win, off + int64(n), nil // the last line, without a newline
	case err != nil:
		return nil, off, err
	}
	// A line longer than the window.
	r.win = r.win[:0]
	if cap(r.lbuf) == 0 {
		r.lbuf = make([]byte, 2*Window)
	}
	return readLineAt(r.R, off, &r.lbuf)
}

// readLineAt reads the line starting at off. The returned slice aliases *buf.
func readLineAt(f io.ReaderAt, off int64, buf *[]byte) (line []byte, next int64, err error) {
	b := (*buf)[:cap(*buf)]
	n := 0
	for {
		m, rerr := f.ReadAt(b[n:], off+int64(n))
		if i := bytes.IndexByte(b[n:n+m], '\n'); i >= 0 {
			end := n + i + 1
			*buf = b
			return b[:end], off + int64(end), nil
		}
		n += m
		if rerr == io.EOF {
			*buf = b
			if n == 0 {
				return nil, off, io.EOF
			}
			return b[:n], off + int64(n), nil // last line without newline
		}
		if rerr != nil {
			return nil, off, rerr
		}
		if n == len(b) {
			nb := make([]byte, 2*len(b))
			copy(nb, b)
			b = nb
		}
	}
}

// fingerprintSpan is how much of each end of a table its fingerprint reads.
const fingerprintSpan = 4096

// Fingerprint is a short hash of the first and last 4 KiB of the first
// size bytes of f, and of size: what tells a run's table from another file
// of its size where inode numbers differ between hosts.
func Fingerprint(f io.ReaderAt, size int64) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", size)
	buf := make([]byte, min(size, fingerprintSpan))
	for _, off := range []int64{0, max(0, size-fingerprintSpan)} {
		if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
			return "", err
		}
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// CountLines counts the lines of the file at path, the last one also
// when it has no newline (as sed and awk do, not wc -l).
func CountLines(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, BufSize(fi.Size()))
	var n int64
	last := byte('\n')
	for pos := int64(0); pos < fi.Size(); {
		m, err := f.ReadAt(buf, pos)
		n += int64(bytes.Count(buf[:m], []byte{'\n'}))
		if m > 0 {
			last = buf[m-1]
		}
		pos += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

// BufSize is the buffer to read n bytes with: n, from 4 KiB up to 1 MiB (a
// small table needs no megabyte zeroed).
func BufSize(n int64) int { return int(min(max(n, 4<<10), 1<<20)) }
