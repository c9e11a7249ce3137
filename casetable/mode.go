package casetable

import (
	"os"

	"github.com/farm-hpc/farm/proc"
)

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
