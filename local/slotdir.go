package local

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// EnvSlotDir names the variable that sets Options.SlotDir in the farm
// command.
const EnvSlotDir = "FARM_LOCAL_SLOT_DIR"

// DefaultSlotDir is where the user's job slots live on this host, given the
// temporary directory base ($TMPDIR or /tmp): base/farm-slots-UID, checked
// by CheckSlotDir. Not $XDG_RUNTIME_DIR, which is removed when the user's
// last session ends while the jobs run on; not the home directory, which a
// cluster shares between hosts whose slots are their own.
func DefaultSlotDir(base string) string {
	return filepath.Join(base, fmt.Sprintf("farm-slots-%d", os.Getuid()))
}

// CheckSlotDir makes dir (mode 0700) if it does not exist, and refuses it
// unless it is a directory — not a link — owned by this user and writable
// by no one else. Another user who made it first (in a shared /tmp) could
// otherwise hold the slots' locks, keeping the user's jobs pending for
// ever, or plant links through which the user's jobs would create files
// where that user chose.
func CheckSlotDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("local backend: cannot make the job-slot directory %s: %w (set %s to a directory of your own)", dir, err, EnvSlotDir)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("local backend: job-slot directory: %w", err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	why := ""
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		why = "is a symbolic link"
	case !fi.IsDir():
		why = "is not a directory"
	case st != nil && int(st.Uid) != os.Getuid():
		why = fmt.Sprintf("belongs to another user (uid %d)", st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		why = fmt.Sprintf("is writable by others (mode %04o)", fi.Mode().Perm())
	}
	if why != "" {
		return fmt.Errorf("local backend: the job-slot directory %s %s, so another user could block or misdirect your jobs: remove it if it is yours, or set %s to a directory of your own", dir, why, EnvSlotDir)
	}
	return nil
}
