package casetable

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A start hint (issue 39, CLAIMS.md "Start hints") is the run record a run's
// start committed, with its chain and generation, which farm submit hands to
// the run's meta-jobs (FARM_CLAIM_HINT): a store given one makes its first
// claim of that run from it, with no reading of MISC/chain nor of the main
// chain. It is vouched for, not trusted: once its commit is won, StartRun
// makes the name hintMark in the run's own set's directory, from a hash of
// the hint; a store claims from a hint only once it found that name, else it
// reads the record as without one. The name is a hard link to the set's
// index: the lookup that vouches for the hint reads the index too.

const hintVersion = "2." // "1.": its name an empty file (before the link)

// hinted is a start hint a store was given, not yet used.
type hinted struct {
	st   State  // the run record it holds, Gen and Chain set
	mark string // the name that vouches for it, relative to MISC
}

// Hint is the start hint of the run the store's last StartRun started, for
// its meta-jobs; "" if it started none or could not vouch for it.
func (s *Store) Hint() string { return s.hintMade }

// UseHint gives the store a start hint (Hint) for its first claim; one that
// does not parse is ignored, one not vouched for costs a lookup.
func (s *Store) UseHint(h string) {
	s.hint = nil
	if st, mark, err := parseHint(h); err == nil {
		s.hint = &hinted{st: st, mark: mark}
	}
}

// makeHint is the hint of rec, generation gen of the chain in MISC named chain.
func makeHint(chain string, gen int64, rec []byte) string {
	b := append([]byte(chain+" "+strconv.FormatInt(gen, 10)+"\n"), rec...)
	return hintVersion + base64.RawURLEncoding.EncodeToString(b)
}

// parseHint reads a hint: its record, and the name that vouches for it (hintMark).
func parseHint(h string) (State, string, error) {
	bad := errors.New("not a start hint")
	enc, ok := strings.CutPrefix(h, hintVersion)
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil {
		return State{}, "", bad
	}
	head, rec, _ := strings.Cut(string(b), "\n")
	chain, gen, _ := strings.Cut(head, " ")
	var st State
	n, err := strconv.ParseInt(gen, 10, 64)
	if err != nil || n < 0 || !localName(chain, "claims.") || st.unmarshal([]byte(rec)) != nil ||
		st.InLane || st.Run < 1 || len(st.Sets) == 0 {
		return State{}, "", bad
	}
	for _, t := range st.Sets {
		if !localName(t.Dir, "lanes.") || t.Lanes < 1 {
			return State{}, "", bad
		}
	}
	st.Gen, st.Chain = n, chain
	return st, hintMark(h, st), nil
}

// localName reports whether name is one name in MISC that starts with prefix.
func localName(name, prefix string) bool {
	return strings.HasPrefix(name, prefix) && !strings.ContainsAny(name, "/ \n") && filepath.IsLocal(name)
}

// hintMark is the name, relative to MISC, that vouches for the hint h of the
// record st: in its first set's directory, from h's hash (any other hint, a
// byte changed, names another).
func hintMark(h string, st State) string {
	sum := sha256.Sum256([]byte(h))
	return filepath.Join(st.Sets[0].Dir, "started."+hex.EncodeToString(sum[:8]))
}

// vouch makes the name that vouches for the hint of the record the store just
// committed, a hard link to its set's index, and returns the hint; "" if it
// could not be made (no harm: the meta-jobs read the record). Only this
// process knows the name: EEXIST is its own request, retried.
func (s *Store) vouch() string {
	if s.ch == nil || len(s.cur.Sets) == 0 {
		return ""
	}
	h := makeHint(filepath.Base(s.ch.dir), s.gen, s.wbuf)
	index := filepath.Join(s.misc, s.cur.Sets[0].Dir, "index")
	err := s.fs.Linkat(unix.AT_FDCWD, index, unix.AT_FDCWD, filepath.Join(s.misc, hintMark(h, s.cur)))
	if err != nil && err != unix.EEXIST {
		return ""
	}
	return h
}

// vouched reads the hint's name, its set's index (one lookup): nil if it
// is not there (or does not read: then the record is read too).
func (s *Store) vouched(h *hinted) []byte {
	name := h.mark
	if mutated("hint-unverified") {
		name = filepath.Join(h.st.Sets[0].Dir, "index") // trusted as it is
	}
	b, err := readIndex(s.fs, filepath.Join(s.misc, name))
	if err != nil {
		return nil
	}
	return b
}

// openHinted opens, for a first claim in run, the sets of the store's hint if
// it is of run and vouched for: whether it did (else the record is read).
func (s *Store) openHinted(run int) bool {
	h := s.hint
	s.hint = nil
	if h == nil || h.st.Run != run || s.opened.Run != 0 {
		return false
	}
	b := s.vouched(h)
	if b == nil {
		return false
	}
	old := s.cur
	s.cur = h.st // Last's until the first look reads the record (the main chain stays unread)
	s.given = givenIndex{dir: h.st.Sets[0].Dir, b: b}
	err := s.openSets(run)
	s.given = givenIndex{}
	if err != nil || s.opened.Run != run {
		s.cur = old
		return false
	}
	return true
}

// givenIndex is a set's index read already (by openHinted), for openSet.
type givenIndex struct {
	dir string // the set's, relative to MISC
	b   []byte
}
