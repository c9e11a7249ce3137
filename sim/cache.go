package sim

import (
	"bytes"
	"time"

	"golang.org/x/sys/unix"
)

// What a client caches (Model.AttrCache, NegCache, DataCache) and holds
// unflushed (Model.CloseToOpen). Root caches nothing.

const halfSecond = 500 * time.Millisecond

// dirCache is what a client cached of one directory's names.
type dirCache struct {
	version uint64 // the directory's, when the client last reached the server about it
	ents    map[string]lookEntry
}

// lookEntry is a cached lookup: the inode (nil: ENOENT) and its
// attributes then.
type lookEntry struct {
	ino    *inode
	at     attrs
	until  time.Duration
	linked bool // made by this client's link that raced another (GlusterDHT): its opens find it too
}

// dataCopy is a client's copy of a file's content.
type dataCopy struct {
	b       []byte
	version uint64
	until   time.Duration
}

// dirtyFile is a client's writes to one file, not yet flushed.
type dirtyFile struct {
	ino    *inode
	writes []heldWrite
}

type heldWrite struct {
	off int64
	b   []byte
}

// lookup looks name up in dir: from the client's cache if it holds an
// entry young enough, else at the server (and caches what it learns).
func (c *client) lookup(dir *inode, name string) (*inode, attrs, unix.Errno) {
	if dc := c.look[dir]; dc != nil {
		if e, ok := dc.ents[name]; ok && c.w.now < e.until {
			cur, has := dir.ents[name]
			if e.ino == nil {
				if has {
					c.stale()
				}
				return nil, attrs{}, unix.ENOENT
			}
			if !has || cur.ino != e.ino || c.attrsOf(e.ino) != e.at {
				c.stale()
			}
			return e.ino, e.at, 0
		}
	}
	e, ok, err := c.find(dir, name)
	switch {
	case err != 0:
		return nil, attrs{}, err
	case !ok:
		c.learn(dir, name, nil)
		return nil, attrs{}, unix.ENOENT
	}
	c.learn(dir, name, e.ino)
	return e.ino, c.attrsOf(e.ino), 0
}

// linked is the inode a link of this client that raced another
// (linkOnto) left cached at name in dir, while the entry lives: FUSE
// instantiates the dentry of a link with the linked inode, and a path
// walk within the entry timeout, an open's too, goes by it
// (fuse_dentry_revalidate), so each racing client opens its own file (the
// rig's racing clients each read back their own, CLAIMS-APPENDIX.md).
func (c *client) linked(dir *inode, name string) *inode {
	if dc := c.look[dir]; dc != nil {
		if e, ok := dc.ents[name]; ok && e.linked && c.w.now < e.until {
			if cur, has := dir.ents[name]; !has || cur.ino != e.ino {
				c.stale()
			}
			return e.ino
		}
	}
	return nil
}

// stale counts an answer from the cache that the server would not give.
func (c *client) stale() {
	c.w.stats.Stale++
	c.mark = fCache
}

// learn records what the client learnt at the server of name in dir: i,
// or nil (ENOENT). Under CloseToOpen, a directory found changed first
// loses every entry cached of it.
func (c *client) learn(dir *inode, name string, i *inode) {
	if c.p == nil {
		return
	}
	m := &c.w.model
	ttl := m.AttrCache
	if i == nil {
		ttl = m.NegCache
	}
	dc := c.sync(dir)
	if ttl <= 0 {
		if dc != nil {
			delete(dc.ents, name)
		}
		return
	}
	if dc == nil {
		dc = &dirCache{version: dir.version, ents: map[string]lookEntry{}}
		c.look[dir] = dc
	}
	e := lookEntry{ino: i, until: c.w.now + c.w.upTo(ttl)}
	if i != nil {
		e.at = c.attrsOf(i)
	}
	dc.ents[name] = e
}

// sync is the client reaching the server about dir: under CloseToOpen, if
// dir changed since it last did, what it cached of dir's names goes.
func (c *client) sync(dir *inode) *dirCache {
	dc := c.look[dir]
	if dc != nil && c.w.model.CloseToOpen && dc.version != dir.version {
		clear(dc.ents)
		dc.version = dir.version
	}
	return dc
}

// revalidate is an open of the file i (not O_PATH): under CloseToOpen,
// a copy of its content older than the server's goes.
func (c *client) revalidate(i *inode) {
	if d, ok := c.data[i]; ok && c.w.model.CloseToOpen && d.version != i.version {
		delete(c.data, i)
	}
}

// content is i's content as the client reads it: its copy if it holds
// one young enough (DataCache) else the server's, under its own unflushed
// writes.
func (c *client) content(i *inode) []byte {
	b := i.data
	if c.p != nil && c.w.model.DataCache > 0 {
		if d, ok := c.data[i]; ok && c.w.now < d.until {
			if d.version != i.version {
				c.stale()
			}
			b = d.b
		} else {
			c.data[i] = dataCopy{b: i.data, version: i.version, until: c.w.now + c.w.upTo(c.w.model.DataCache)}
		}
	}
	if d := c.dirtyOf(i); d != nil {
		b = overlay(b, d.writes)
	}
	return b
}

// overlay is b under writes.
func overlay(b []byte, writes []heldWrite) []byte {
	n := int64(len(b))
	for _, wr := range writes {
		n = max(n, wr.off+int64(len(wr.b)))
	}
	out := make([]byte, n)
	copy(out, b)
	for _, wr := range writes {
		copy(out[wr.off:], wr.b)
	}
	return out
}

// attrsOf are i's attributes as the client sees them: the server's, with
// the size its own unflushed writes make.
func (c *client) attrsOf(i *inode) attrs {
	a := i.attrs()
	if i.isReg() {
		a.size = c.sizeOf(i)
	}
	return a
}

// sizeOf is i's size as the client sees it.
func (c *client) sizeOf(i *inode) int64 {
	n := int64(len(i.data))
	if d := c.dirtyOf(i); d != nil {
		for _, wr := range d.writes {
			n = max(n, wr.off+int64(len(wr.b)))
		}
	}
	return n
}

// dirtyOf is the client's unflushed writes to i, or nil.
func (c *client) dirtyOf(i *inode) *dirtyFile {
	for k := range c.dirty {
		if c.dirty[k].ino == i {
			return &c.dirty[k]
		}
	}
	return nil
}

// hold keeps a write of b at off to i, to be flushed later.
func (c *client) hold(i *inode, b []byte, off int64) {
	if len(b) == 0 {
		return
	}
	d := c.dirtyOf(i)
	if d == nil {
		c.dirty = append(c.dirty, dirtyFile{ino: i})
		d = &c.dirty[len(c.dirty)-1]
	}
	d.writes = append(d.writes, heldWrite{off: off, b: bytes.Clone(b)})
}

// flush writes the client's unflushed writes to i to the server.
func (c *client) flush(i *inode) {
	d := c.dirtyOf(i)
	if d == nil {
		return
	}
	for _, wr := range d.writes {
		c.w.writeAt(i, wr.b, wr.off)
	}
	c.drop(i)
	delete(c.data, i)
}

// drop forgets the client's unflushed writes to i.
func (c *client) drop(i *inode) {
	for k := range c.dirty {
		if c.dirty[k].ino == i {
			c.dirty = append(c.dirty[:k], c.dirty[k+1:]...)
			return
		}
	}
}

// exitWrites flushes the unflushed writes of a process that returned:
// its kernel closes its files.
func (c *client) exitWrites() {
	for len(c.dirty) > 0 {
		c.flush(c.dirty[0].ino)
	}
}

// crashWrites settles a crashed process's unflushed writes: its kernel
// flushes them (kill -9) or they are lost with its node, half and half.
func (c *client) crashWrites() {
	if len(c.dirty) == 0 {
		return
	}
	w, n := c.w, 0
	for _, d := range c.dirty {
		n += len(d.writes)
	}
	if w.rng.IntN(2) == 0 {
		c.exitWrites()
		w.record(event{proc: c.p.id, op: evFlush, a: int64(n)})
		return
	}
	c.dirty = nil
	w.stats.LostWrites += int64(n)
	w.record(event{proc: c.p.id, op: evLost, a: int64(n)})
}
