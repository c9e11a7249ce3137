package casetable

// The mutants that replace a whole step of the claim core (mutant.go).

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/farm-hpc/farm/fsretry"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

func init() {
	linkChain, linkCommit, carry = linkChainMutant, linkCommitMutant, carriedMutant
}

// linkChainMutant is createChain before 0b47c1e (the mutant chain-file-by-link):
// MISC/chain made by link(), which is not exclusive on GlusterFS.
func linkChainMutant(fsys vfs.FS, misc, name string) (*chain, error) {
	path := filepath.Join(misc, "chain")
	tmp := path + ".tmp." + newNonce(fsys)
	err := vfs.WriteAtomic(fsys, tmp, 0o644, []byte(chainMagic+name+"\n"))
	if err == nil {
		err = fsys.Linkat(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path)
		if err == unix.EEXIST {
			err = nil
		}
	}
	fsys.Unlinkat(unix.AT_FDCWD, tmp, 0)
	if err != nil {
		return nil, passing(fsys, misc, err)
	}
	c, _, _, err := openChain(fsys, misc)
	return c, err
}

// linkCommitMutant is commit before bef773f (the mutant link-commit): generation
// n made by link(), which is not exclusive on GlusterFS.
func linkCommitMutant(c *chain, d int, n int64, b []byte) (bool, error) {
	c.seq++
	x := fmt.Sprintf("x.%s.%d", c.self, c.seq)
	if err := vfs.WriteAtomic(c.fs, c.segPath(n, x), 0o644, b); err != nil {
		return false, c.checkGone(err)
	}
	err := c.fs.Linkat(d, x, d, genName(n))
	c.fs.Unlinkat(d, x, 0)
	if err == unix.EEXIST {
		return false, nil
	}
	if err != nil {
		return false, c.checkGone(err)
	}
	if err := c.fs.Mknodat(d, markName(n), unix.S_IFREG|0o644); err != nil && err != unix.EEXIST {
		return false, c.checkGone(err)
	}
	c.pending = n
	return c.decided(true), nil
}

// carriedMutant is what 'farm add' gave cur's run, made again into sets for
// spec's, as StartRun did before 74be6a6 (the mutant queue-carried-to-next-run).
func carriedMutant(s *Store, spec RunSpec, cur State) (sets []Set) {
	ctx := context.Background()
	for _, t := range cur.Sets {
		if t.Table == cur.Table {
			continue
		}
		r := fsretry.Retrier{Limit: s.Retry, Log: s.log(), Clock: s.fs}
		if id, err := s.tableID(ctx, &r, t.Table, false); err == nil {
			if t, err = makeSet(s.fs, s.Dir, s.misc, spec.Run, id, t.Cases, t.Lanes, 0); err == nil {
				sets = append(sets, t)
			}
		}
	}
	return sets
}
