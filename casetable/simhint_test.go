package casetable

import (
	"path/filepath"

	"github.com/farm-hpc/farm/vfs"
)

// The start hints in the simulator (scenario.hints): each meta-job of a run
// starts with one drawn from its process's randomness — the run's own (good,
// stale once another run started or farm add added a set), one naming an
// orphan set of the run (forged), one a byte of which changed, or none. An
// orphan set is what a run start that lost leaves if it dies before it
// removes its set: lanes of the run over its table, named by no record. A
// claim from it would hand the run's cases out twice; only the name that
// vouches for a hint (hintMark) keeps a store from it (the mutant
// hint-unverified trusts a hint as it is).

// hint is the start hint claimer c starts with ("": none).
func (c *simClaimer) hint(fsys vfs.FS) string {
	good := c.o.hints[c.run]
	switch fsys.Rand() % 4 {
	case 0:
		return good
	case 1:
		return c.forgedHint(fsys, good)
	case 2:
		if len(good) > 8 { // a byte of the record changed: another hash
			b := []byte(good)
			i := 2 + int(fsys.Rand()%uint64(len(b)-2))
			b[i] = "AQgw"[fsys.Rand()%4]
			return string(b)
		}
	}
	return ""
}

// forgedHint is good with its run's first set replaced by an orphan set of
// the run that c makes over the run's table, as a lost start would ("" if
// it cannot).
func (c *simClaimer) forgedHint(fsys vfs.FS, good string) string {
	st, _, err := parseHint(good)
	if err != nil {
		return ""
	}
	t := State{Table: st.Table}
	if t.TSize, t.TIno, t.TFP, err = tableIDOn(fsys, filepath.Join(simDir, st.Table)); err != nil {
		return ""
	}
	own := st.OwnSet()
	set, err := makeSet(fsys, simDir, simMisc, st.Run, t, own.Cases, own.Lanes, c.o.sc.jobs)
	if err != nil {
		return ""
	}
	set.Table = own.Table
	st.Sets = append([]Set{set}, st.Sets[1:]...)
	return reHint(st, nil)
}
