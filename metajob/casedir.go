package metajob

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farm-hpc/farm/proc"
	"github.com/nightlyone/lockfile"
)

// The node-local directories of the case runners (caserun.go): one per
// runner, locked while it lives, and those of dead runners removed.

// caseDirHost names this host identity in case directory names.
func caseDirHost() string {
	h := sha256.Sum256([]byte(proc.HostID()))
	return hex.EncodeToString(h[:6])
}

// lockCaseDir checks that the new directory tmp is private (a directory,
// ours, no access for others) and puts in it the lock that holds our PID.
func lockCaseDir(tmp string) error {
	fi, err := os.Lstat(tmp)
	if err != nil {
		return err
	}
	if !fi.IsDir() || !ownedByUs(fi) || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a private directory of ours (%s)", tmp, fi.Mode())
	}
	lock, err := lockfile.New(filepath.Join(tmp, caseDirLock))
	if err != nil {
		return err
	}
	if err := lock.TryLock(); err != nil {
		// TryLock needs link(), which some filesystems lack. Nobody else
		// uses this new private directory: write the same lock (our PID)
		// directly.
		return os.WriteFile(string(lock), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	}
	return nil
}

func ownedByUs(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// removeDeadCaseDirs removes the case directories in base named with
// prefix (this host identity's) whose meta-job is dead: its lock holds the
// PID of a process that is gone, or it has no valid lock and is older than
// caseDirGrace. It never follows a symbolic link and leaves alone anything
// that is not a directory of ours, a lock that is not a file of ours and a
// directory whose lock's PID lives. Errors are ignored: what is left is
// tried again by the next runner.
func removeDeadCaseDirs(base, prefix string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !e.IsDir() { // IsDir: the entry itself, not a link's target
			continue
		}
		p := filepath.Join(base, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || !ownedByUs(fi) {
			continue
		}
		if caseDirDead(p, fi) {
			os.RemoveAll(p)
		}
	}
}

// caseDirDead judges the case directory p (fi: its Lstat) of this host
// identity.
func caseDirDead(p string, fi os.FileInfo) bool {
	name := filepath.Join(p, caseDirLock)
	li, err := os.Lstat(name)
	if err == nil {
		if !li.Mode().IsRegular() || !ownedByUs(li) {
			return false
		}
		lock, err := lockfile.New(name)
		if err != nil {
			return false
		}
		switch _, err := lock.GetOwner(); err {
		case lockfile.ErrDeadOwner:
			return true
		case lockfile.ErrInvalidPid:
			// junk: judged by its age below
		default:
			return false // alive, or unreadable
		}
	} else if !os.IsNotExist(err) {
		return false
	}
	return time.Since(fi.ModTime()) > caseDirGrace
}
