package tablefmt

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
)

// Blocks is where a table's blocks of cases start: block k holds its cases
// k·Size to (k+1)·Size-1, counted from 0 (casetable's lanes claim by block).
type Blocks struct {
	Cases  int64   // the table's cases
	Size   int64   // cases per block
	Starts []int64 // per block, the byte offset of its first case
	Lines  []int64 // per block, the lines of the table before it
}

// IndexBlocks reads the first limit bytes of the table f, named name, twice:
// its cases counted, which size decides the blocks of, then each block's
// start recorded. A line longer than the buffer is a case by its start.
func IndexBlocks(f io.ReaderAt, name string, limit int64, size func(cases int64) int64) (Blocks, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, limit), BufSize(limit))
	var x Blocks
	cases, err := x.scan(br)
	if err != nil {
		return Blocks{}, err
	}
	x.Size, x.Cases = size(cases), cases
	br.Reset(io.NewSectionReader(f, 0, limit))
	if n, err := x.scan(br); err != nil || n != cases {
		return Blocks{}, cmp.Or(err, fmt.Errorf("%s changed while it was indexed", name))
	}
	return x, nil
}

// scan counts br's cases and, once x.Size is set, records where each block starts.
func (x *Blocks) scan(br *bufio.Reader) (int64, error) {
	var off, lines, cases int64
	for {
		line, err := br.ReadSlice('\n')
		n := int64(len(line))
		if n > 0 && IsCase(line) {
			if x.Size > 0 && cases%x.Size == 0 {
				x.Starts = append(x.Starts, off)
				x.Lines = append(x.Lines, lines)
			}
			cases++
		}
		for err == bufio.ErrBufferFull {
			var more []byte
			more, err = br.ReadSlice('\n')
			n += int64(len(more))
		}
		if n > 0 {
			lines++
		}
		off += n
		if err == io.EOF {
			return cases, nil
		}
		if err != nil {
			return cases, err
		}
	}
}
