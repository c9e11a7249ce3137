package tablefmt

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/farm-hpc/farm/atomicfile"
	"github.com/farm-hpc/farm/internal/kv"
)

// Source is what a run's private table was made from: table.dat as farm
// read it when the run started (its size, the bytes read; its identity
// and times as fstat gave them then; the SHA-256 of the bytes read). It
// lets a reader tell, cheaply, whether table.dat changed since (Changed):
// the run itself never reads table.dat, only its private copy.
type Source struct {
	Size  int64
	Dev   uint64
	Ino   uint64
	Mtime int64 // ns, as the file's server gave them: compared, never to a clock
	Ctime int64
	Hash  string // hex SHA-256
}

const sourceMagic = "farm-table-source v1"

// SourcePath is the name of the record of the source of the run table
// table (a path): the table's name with ".src".
func SourcePath(table string) string { return table + ".src" }

// fromStat fills in s's identity and times from fi.
func (s *Source) fromStat(fi os.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Dev, s.Ino = uint64(st.Dev), st.Ino
		s.Mtime = st.Mtim.Sec*1e9 + st.Mtim.Nsec
		s.Ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
}

// SetStat fills in s's identity and times from fi, the file s describes.
func (s *Source) SetStat(fi os.FileInfo) { s.fromStat(fi) }

// sameStat reports whether fi is the file s was read from, unchanged as
// far as its size, identity and times tell.
func (s Source) sameStat(fi os.FileInfo) bool {
	var t Source
	t.fromStat(fi)
	return fi.Size() == s.Size && t.Dev == s.Dev && t.Ino == s.Ino && t.Mtime == s.Mtime && t.Ctime == s.Ctime
}

// String is the record's one line.
func (s Source) String() string {
	b := []byte(sourceMagic)
	b = kv.AppendInt(b, "size", s.Size)
	b = kv.AppendUint(b, "dev", s.Dev)
	b = kv.AppendUint(b, "ino", s.Ino)
	b = kv.AppendInt(b, "mtime", s.Mtime)
	b = kv.AppendInt(b, "ctime", s.Ctime)
	b = kv.Append(b, "sha256", s.Hash)
	return string(append(b, '\n'))
}

// WriteSource records s beside the run table table (SourcePath), written
// whole and renamed into place, with the table's mode (a private table's
// record stays as private).
func WriteSource(table string, s Source) error {
	fi, err := os.Stat(table)
	if err != nil {
		return err
	}
	return atomicfile.Write(SourcePath(table), fi.Mode().Perm(), func(w *bufio.Writer) error {
		_, err := w.WriteString(s.String())
		return err
	}, "")
}

// ReadSource reads the record of the source of the run table table;
// os.ErrNotExist if it has none (a closed run that reads no table).
func ReadSource(table string) (Source, error) {
	b, err := os.ReadFile(SourcePath(table))
	if err != nil {
		return Source{}, err
	}
	var s Source
	rest, ok := strings.CutPrefix(string(b), sourceMagic)
	if !ok || len(strings.Fields(rest)) != 6 {
		return s, fmt.Errorf("%s does not read as a table source record", SourcePath(table))
	}
	r := kv.NewReader(rest)
	for r.Next() {
		switch r.Key() {
		case "size":
			s.Size = r.Int()
		case "dev":
			s.Dev = r.Uint()
		case "ino":
			s.Ino = r.Uint()
		case "mtime":
			s.Mtime = r.Int()
		case "ctime":
			s.Ctime = r.Int()
		case "sha256":
			s.Hash = r.Value()
		default:
			r.Fail(errors.New("unknown field"))
		}
	}
	if err := r.Err(); err != nil {
		return Source{}, fmt.Errorf("%s does not read as a table source record (%v)", SourcePath(table), err)
	}
	return s, nil
}

// Changed reports whether the file at path is no longer the one s records
// (its content differs; a file gone is changed). It costs a stat when the
// file's size, identity and times are those recorded, and reads it whole
// (to hash it) only when its size is the same and its identity or a time
// is not: a touch, or a same-size rewrite.
func (s Source) Changed(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() != s.Size {
		return true, nil
	}
	if s.sameStat(fi) {
		return false, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	return hex.EncodeToString(h.Sum(nil)) != s.Hash, nil
}

// hashingReader reads from an open table, counting and hashing what it
// reads, for the Source of what was read.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

// openSource opens the table src for a reading that records its Source.
func openSource(src string) (*os.File, *hashingReader, Source, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, nil, Source{}, err
	}
	fi, err := in.Stat()
	if err != nil {
		in.Close()
		return nil, nil, Source{}, err
	}
	var s Source
	s.fromStat(fi)
	return in, &hashingReader{r: in, h: sha256.New()}, s, nil
}

func (h *hashingReader) source(s Source) Source {
	s.Size, s.Hash = h.n, hex.EncodeToString(h.h.Sum(nil))
	return s
}

// ErrNotNumbered is Snapshot's error for a table that is not numbered.
var ErrNotNumbered = errors.New("the table is not numbered")

// Snapshot copies the numbered table src to dst (a run's private table),
// written to a temporary file and renamed, with mode perm, and returns
// the Source it was read from. So that the copy is exactly a table
// validated, whatever happens to src meanwhile: if want is "", it
// validates what it copies as Validate does, in the same one reading,
// and returns its Info (a table that is not numbered is ErrNotNumbered);
// if not, what it copies must have the SHA-256 want, the hash of a table
// validated before (ValidateSource, NumberChecked), or it is ErrChanged,
// and Info is left zero. Refused, it leaves nothing at dst.
func Snapshot(src, dst string, perm os.FileMode, want string) (Info, Source, error) {
	in, hr, s, err := openSource(src)
	if err != nil {
		return Info{}, Source{}, err
	}
	defer in.Close()
	var info Info
	err = atomicfile.Write(dst, perm, func(w *bufio.Writer) error {
		if want != "" {
			if _, err := io.Copy(w, hr); err != nil {
				return err
			}
			if hr.source(s).Hash != want {
				return ErrChanged
			}
			return nil
		}
		var err error
		info, err = validate(src, io.TeeReader(hr, w), METARule)
		if err == nil && !info.Numbered {
			err = ErrNotNumbered
		}
		return err
	}, "")
	if err != nil {
		return Info{}, Source{}, err
	}
	return info, hr.source(s), nil
}

// firstField is the first blank-separated field of a line.
func firstField(line []byte) []byte {
	t := bytes.TrimLeft(line, " \t")
	if end := bytes.IndexAny(t, " \t"); end >= 0 {
		t = t[:end]
	}
	return t
}
