// Package atomicfile replaces a file whole: its new content is written to a
// temporary file beside it, which is then renamed over it, so that a reader
// sees the old file or the new one, never a half-written one, and two
// writers never share a temporary file.
//
// The temporary file's name is unique across hosts, not only across the
// processes of one: it is made by an exclusive create of a random name
// (os.CreateTemp), and Link's by a random name that link() refuses if it
// exists. A PID would not do: processes of two hosts (or containers)
// sharing a farm directory may have the same PID.
package atomicfile

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/farm-hpc/farm/proc"
)

// Write writes path through fill into a temporary file beside path and
// renames it over path. If backup is not "", the old file is first
// hard-linked (or, failing that, copied) to backup. The file gets mode
// perm, but never writable by the group or others (proc.Unshared): the
// umask does not apply (a new file's callers mask it: proc.NewMode).
func Write(path string, perm os.FileMode, fill func(*bufio.Writer) error, backup string) error {
	return write(path, perm, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := fill(w); err != nil {
			return err
		}
		return w.Flush()
	}, backup)
}

// WriteBytes is Write of the content b, keeping no backup.
func WriteBytes(path string, perm os.FileMode, b []byte) error {
	return write(path, perm, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}, "")
}

func write(path string, perm os.FileMode, fill func(*os.File) error, backup string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := fill(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(unshared(perm)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if backup != "" {
		os.Remove(backup)
		if err := os.Link(path, backup); err != nil {
			if err := copyFile(path, backup); err != nil {
				return fmt.Errorf("keeping a backup of %s: %w", filepath.Base(path), err)
			}
		} else if err := narrow(backup); err != nil {
			return fmt.Errorf("keeping a backup of %s: %w", filepath.Base(path), err)
		}
	}
	return os.Rename(tmp.Name(), path)
}

// Link makes path a hard link to target, replacing whatever path was: it
// links target to a temporary name beside path and renames that over path.
func Link(target, path string) error {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp"+hex.EncodeToString(b[:]))
	if err := os.Link(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// unshared is perm without the write bits farm never gives a file it makes
// (proc.Unshared): a copy of a table made 0666 under umask 000 is 0644, one
// kept 0600 stays 0600.
func unshared(perm os.FileMode) os.FileMode { return perm.Perm() &^ proc.Unshared }

// narrow takes from the regular file path the write bits of unshared, if
// it has them: a backup hard-linked to a table made 0666 is 0644 once it
// is farm's. A link is left alone (chmod would change its target).
func narrow(path string) error {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() == unshared(st.Mode()) {
		return err
	}
	return os.Chmod(path, unshared(st.Mode()))
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	// The copy is as private as the original, and writable by no one else.
	mode := unshared(st.Mode())
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if err := out.Chmod(mode); err != nil {
		out.Close()
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
