package sim

import (
	"path"
	"slices"
	"strings"

	"github.com/farm-hpc/farm/vfs"

	"golang.org/x/sys/unix"
)

// The effects of the calls on the server and on the client's own state,
// as Linux gives them for what vfs.FS offers. Each answers a unix.Errno
// (0: success).

// file is the open file fd.
func (c *client) file(fd int) (*file, unix.Errno) {
	if fd < 0 || fd >= len(c.fds) || c.fds[fd] == nil {
		return nil, unix.EBADF
	}
	return c.fds[fd], 0
}

// alloc gives f the lowest free descriptor from 3.
func (c *client) alloc(f *file) int {
	for fd := 3; fd < len(c.fds); fd++ {
		if c.fds[fd] == nil {
			c.fds[fd] = f
			return fd
		}
	}
	c.fds = append(c.fds, f)
	return len(c.fds) - 1
}

// resolve walks name from the directory open as d; with AT_FDCWD, from
// the root (every process's working directory is "/": farm's code uses
// absolute paths there).
func (c *client) resolve(d int, name string) (*inode, string, bool, unix.Errno) {
	start := c.w.root
	if name != "" && name[0] != '/' && d != unix.AT_FDCWD {
		f, err := c.file(d)
		if err != 0 {
			return nil, "", false, err
		}
		start = f.ino
	}
	return walk(c.w.root, start, name)
}

// find is name in dir at the server; a split-brain name answers EIO to a
// process.
func (c *client) find(dir *inode, name string) (dirent, bool, unix.Errno) {
	e, ok := dir.ents[name]
	if ok && e.ino.split && c.p != nil {
		c.mark = fSplit
		return e, ok, unix.EIO
	}
	return e, ok, 0
}

// made notes that this call made i, named name: in the half second after a
// brick came back, it may be a split-brain (Model.SplitBrain).
func (c *client) made(i *inode, name string) {
	w := c.w
	if c.p == nil || w.model.SplitBrain <= 0 || w.model.Outage != BrickDown || w.stats.Outages == 0 || !w.faulting() {
		return
	}
	if ok, _ := path.Match(w.model.SplitBrainNames, name); w.model.SplitBrainNames != "" && !ok {
		return
	}
	if w.now >= w.outageUntil && w.now < w.outageUntil+halfSecond && w.roll(w.model.SplitBrain) {
		i.split = true
		c.mark = fSplit
		w.stats.SplitBrains++
	}
}

func (c *client) openat(d int, name string, flags int, mode uint32) (int, unix.Errno) {
	dir, last, slash, err := c.resolve(d, name)
	if err != 0 {
		return -1, err
	}
	path := flags&unix.O_PATH != 0
	var i *inode
	switch {
	case last == "":
		i = dir
		if !path && flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
			return -1, unix.EEXIST
		}
	case path:
		i, _, err = c.lookup(dir, last)
	default:
		i, err = c.openName(dir, last, slash, flags, mode)
	}
	if err != 0 {
		return -1, err
	}
	return c.openInode(i, flags, slash)
}

// openName is the inode an open (not O_PATH) of name in dir opens: looked
// up at the server, or made (O_CREAT).
func (c *client) openName(dir *inode, name string, slash bool, flags int, mode uint32) (*inode, unix.Errno) {
	if i := c.linked(dir, name); i != nil && flags&unix.O_CREAT == 0 {
		return i, 0
	}
	e, ok, err := c.find(dir, name)
	switch {
	case err != 0:
		return nil, err
	case ok && flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL:
		c.learn(dir, name, e.ino)
		return nil, unix.EEXIST
	case ok:
		c.learn(dir, name, e.ino)
		return e.ino, 0
	case flags&unix.O_CREAT == 0:
		c.learn(dir, name, nil)
		return nil, unix.ENOENT
	case slash:
		return nil, unix.EISDIR
	case c.noSpace != 0:
		return nil, c.noSpace
	}
	i := c.w.newInode(unix.S_IFREG | mode&0o7777)
	c.w.link(dir, name, i)
	c.learn(dir, name, i)
	c.made(i, name)
	return i, 0
}

// openInode opens i with flags: a descriptor, or why not.
func (c *client) openInode(i *inode, flags int, slash bool) (int, unix.Errno) {
	if (flags&unix.O_DIRECTORY != 0 || slash) && !i.isDir() {
		return -1, unix.ENOTDIR
	}
	if flags&unix.O_PATH != 0 {
		return c.alloc(&file{ino: i, flags: unix.O_PATH}), 0
	}
	acc := flags & unix.O_ACCMODE
	switch {
	case i.isDir() && (acc != unix.O_RDONLY || flags&unix.O_CREAT != 0):
		return -1, unix.EISDIR
	case i.isDir():
		c.sync(i) // an open of a directory revalidates it (NFS)
	case i.isFIFO():
		if err := c.openFIFO(flags); err != 0 {
			return -1, err
		}
	default:
		if flags&unix.O_TRUNC != 0 && acc != unix.O_RDONLY {
			c.flush(i)
			c.w.truncate(i)
		}
		c.revalidate(i)
	}
	return c.alloc(&file{ino: i, flags: flags}), 0
}

// openFIFO opens a FIFO as Linux does when nobody opens its other end (in
// the simulation, nobody ever does): O_RDWR and a non-blocking read open
// succeed, a non-blocking write open is ENXIO, and the others block for
// ever (a deadlock that Run reports).
func (c *client) openFIFO(flags int) unix.Errno {
	acc := flags & unix.O_ACCMODE
	switch {
	case acc == unix.O_RDWR, acc == unix.O_RDONLY && flags&unix.O_NONBLOCK != 0:
		return 0
	case flags&unix.O_NONBLOCK != 0, c.p == nil:
		return unix.ENXIO
	}
	c.w.record(event{proc: c.p.id, op: opFIFO})
	c.p.park(opFIFO, never)
	return 0
}

func (c *client) mknodat(d int, name string, mode uint32) unix.Errno {
	typ := mode & unix.S_IFMT
	switch typ {
	case 0:
		typ = unix.S_IFREG
	case unix.S_IFREG, unix.S_IFIFO:
	default:
		return unix.EPERM // a device, a directory, a socket: not for farm
	}
	return c.create(d, name, typ|mode&0o7777)
}

func (c *client) mkdirat(d int, name string, mode uint32) unix.Errno {
	return c.create(d, name, unix.S_IFDIR|mode&0o7777)
}

// create makes name, of mode, exclusively: mknod or mkdir.
func (c *client) create(d int, name string, mode uint32) unix.Errno {
	dir, last, slash, err := c.resolve(d, name)
	if err != 0 {
		return err
	}
	if last == "" {
		return unix.EEXIST
	}
	e, ok, err := c.find(dir, last)
	switch {
	case err != 0:
		return err
	case ok && c.typeRace(e, mode):
		// Both made: the name holds one or the other.
		if c.w.rng.IntN(2) == 0 {
			c.learn(dir, last, e.ino)
			return 0
		}
		c.w.unlink(dir, last)
	case ok:
		c.learn(dir, last, e.ino)
		return unix.EEXIST
	case slash && mode&unix.S_IFMT != unix.S_IFDIR:
		return unix.ENOENT
	case c.noSpace != 0:
		return c.noSpace
	}
	i := c.w.newInode(mode)
	c.w.link(dir, last, i)
	c.learn(dir, last, i)
	c.made(i, last)
	return 0
}

func (c *client) fstatat(d int, name string, st *unix.Stat_t, flags int) unix.Errno {
	if flags&^(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH|unix.AT_NO_AUTOMOUNT) != 0 {
		return unix.EINVAL
	}
	if name == "" && flags&unix.AT_EMPTY_PATH != 0 {
		return c.fstat(d, st)
	}
	dir, last, slash, err := c.resolve(d, name)
	if err != 0 {
		return err
	}
	if last == "" {
		c.attrsOf(dir).fill(st)
		return 0
	}
	_, a, err := c.lookup(dir, last)
	if err != 0 {
		return err
	}
	if slash && a.mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.ENOTDIR
	}
	a.fill(st)
	return 0
}

func (c *client) fstat(fd int, st *unix.Stat_t) unix.Errno {
	f, err := c.file(fd)
	if err != 0 {
		return err
	}
	c.attrsOf(f.ino).fill(st)
	return 0
}

func (c *client) unlinkat(d int, name string, flags int) unix.Errno {
	if flags&^unix.AT_REMOVEDIR != 0 {
		return unix.EINVAL
	}
	rmdir := flags&unix.AT_REMOVEDIR != 0
	dir, last, slash, err := c.resolve(d, name)
	switch {
	case err != 0:
		return err
	case last == "" && rmdir:
		return unix.EBUSY
	case last == "":
		return unix.EISDIR
	}
	e, ok, err := c.find(dir, last)
	switch {
	case err != 0:
		return err
	case !ok:
		c.learn(dir, last, nil)
		return unix.ENOENT
	case rmdir && !e.ino.isDir():
		return unix.ENOTDIR
	case rmdir && len(e.ino.ents) > 0:
		return unix.ENOTEMPTY
	case !rmdir && e.ino.isDir():
		return unix.EISDIR
	case slash && !e.ino.isDir():
		return unix.ENOTDIR
	}
	c.w.unlink(dir, last)
	c.learn(dir, last, nil)
	return 0
}

func (c *client) renameat(od int, oname string, nd int, nname string) unix.Errno {
	odir, olast, oslash, err := c.resolve(od, oname)
	if err != 0 {
		return err
	}
	ndir, nlast, nslash, err := c.resolve(nd, nname)
	if err != 0 {
		return err
	}
	if olast == "" || nlast == "" {
		return unix.EBUSY
	}
	src, ok, err := c.find(odir, olast)
	if err != 0 {
		return err
	}
	if !ok {
		c.learn(odir, olast, nil)
		return unix.ENOENT
	}
	dst, exists, err := c.find(ndir, nlast)
	if err != 0 {
		return err
	}
	if exists && dst.ino == src.ino {
		return 0 // the same file (or name): nothing to do
	}
	if err := renameCheck(src.ino, dst.ino, exists, ndir, oslash || nslash); err != 0 {
		return err
	}
	if exists {
		c.w.unlink(ndir, nlast)
	}
	c.w.move(odir, olast, ndir, nlast)
	c.learn(odir, olast, nil)
	c.learn(ndir, nlast, src.ino)
	return 0
}

// renameCheck says why src may not be renamed onto dst (if exists) in
// ndir.
func renameCheck(src, dst *inode, exists bool, ndir *inode, slash bool) unix.Errno {
	if !src.isDir() {
		switch {
		case slash:
			return unix.ENOTDIR
		case exists && dst.isDir():
			return unix.EISDIR
		}
		return 0
	}
	switch {
	case exists && !dst.isDir():
		return unix.ENOTDIR
	case exists && len(dst.ents) > 0:
		return unix.ENOTEMPTY
	}
	for d := ndir; ; d = d.parent {
		if d == src {
			return unix.EINVAL // into itself
		}
		if d.parent == d {
			return 0
		}
	}
}

func (c *client) linkat(od int, oname string, nd int, nname string) unix.Errno {
	odir, olast, oslash, err := c.resolve(od, oname)
	if err != 0 {
		return err
	}
	ndir, nlast, _, err := c.resolve(nd, nname)
	switch {
	case err != 0:
		return err
	case olast == "":
		return unix.EPERM
	case nlast == "":
		return unix.EEXIST
	}
	src, ok, err := c.find(odir, olast)
	switch {
	case err != 0:
		return err
	case !ok:
		c.learn(odir, olast, nil)
		return unix.ENOENT
	case src.ino.isDir():
		return unix.EPERM
	case oslash:
		return unix.ENOTDIR
	}
	dst, exists, err := c.find(ndir, nlast)
	switch {
	case err != 0:
		return err
	case exists:
		return c.linkOnto(src.ino, ndir, nlast, dst)
	case int(src.ino.nlink) >= c.w.model.LinkMax:
		return unix.EMLINK
	case c.noSpace != 0:
		return c.noSpace
	}
	c.w.link(ndir, nlast, src.ino)
	c.learnLinked(ndir, nlast, src.ino)
	return 0
}

// learnLinked is learn of a name this client linked to i: where links
// race (Model.LinkRace), it opens i there while it caches the name, even
// if a racing link replaced it at the server (linked).
func (c *client) learnLinked(dir *inode, name string, i *inode) {
	c.learn(dir, name, i)
	if c.w.model.LinkRace <= 0 {
		return
	}
	if dc := c.look[dir]; dc != nil {
		if e, ok := dc.ents[name]; ok {
			e.linked = true
			dc.ents[name] = e
		}
	}
}

// typeRace reports whether a create of mode (a mkdir, or a mknod) onto
// the existing name e, of the other kind (a file, or a directory), made
// less than linkRaceWindow ago, succeeds all the same: GlusterDHT's
// Model.TypeRace.
func (c *client) typeRace(e dirent, mode uint32) bool {
	w := c.w
	if c.p == nil || w.model.TypeRace <= 0 || e.ino.isDir() == (mode&unix.S_IFMT == unix.S_IFDIR) ||
		w.now-e.made > linkRaceWindow || !w.faulting() || !w.roll(w.model.TypeRace) {
		return false
	}
	w.stats.LinkRaces++
	c.mark = fLinkRace
	return true
}

// linkOnto is a link of i onto name in dir, which exists as dst: EEXIST,
// but for GlusterDHT's race (Model.LinkRace), where it succeeds, and the
// name then holds either file.
func (c *client) linkOnto(i, dir *inode, name string, dst dirent) unix.Errno {
	w := c.w
	if c.p == nil || dst.ino.isDir() || w.now-dst.made > linkRaceWindow || !w.faulting() || !w.roll(w.model.LinkRace) {
		c.learn(dir, name, dst.ino)
		return unix.EEXIST
	}
	w.stats.LinkRaces++
	c.mark = fLinkRace
	if dst.ino != i && w.rng.IntN(2) == 0 {
		w.unlink(dir, name)
		w.link(dir, name, i)
	}
	// The client that linked sees its own file there for as long as it
	// caches the name, whichever the servers kept, and opens it too (the
	// rig's racing clients each read back their own, CLAIMS-APPENDIX.md).
	c.learnLinked(dir, name, i)
	return 0
}

// readable is the file fd, if it may be read or written (write) as a
// file.
func (c *client) readable(fd int, write bool) (*file, unix.Errno) {
	f, err := c.file(fd)
	switch {
	case err != 0:
		return nil, err
	case f.flags&unix.O_PATH != 0:
		return nil, unix.EBADF
	case write && f.flags&unix.O_ACCMODE == unix.O_RDONLY, !write && f.flags&unix.O_ACCMODE == unix.O_WRONLY:
		return nil, unix.EBADF
	case f.ino.isDir():
		return nil, unix.EISDIR
	case f.ino.isFIFO():
		return nil, unix.EAGAIN // no other end, ever
	}
	return f, 0
}

func (c *client) read(fd int, b []byte, off int64, pos bool) (int, unix.Errno) {
	f, err := c.readable(fd, false)
	if err != 0 {
		return 0, err
	}
	if pos && off < 0 {
		return 0, unix.EINVAL
	}
	if !pos {
		off = f.off
	}
	content := c.content(f.ino)
	n := 0
	if off < int64(len(content)) {
		n = copy(b, content[off:])
	}
	if !pos {
		f.off += int64(n)
	}
	return n, 0
}

func (c *client) write(fd int, b []byte, off int64, pos bool) (int, unix.Errno) {
	f, err := c.readable(fd, true)
	if err != 0 {
		return 0, err
	}
	if pos && off < 0 {
		return 0, unix.EINVAL
	}
	size := c.sizeOf(f.ino)
	switch {
	case f.flags&unix.O_APPEND != 0: // pwrite too, as Linux does
		off = size
	case !pos:
		off = f.off
	}
	if c.noSpace != 0 && off+int64(len(b)) > size {
		return 0, c.noSpace
	}
	if c.p != nil && c.w.model.CloseToOpen {
		c.hold(f.ino, b, off)
	} else {
		c.w.writeAt(f.ino, b, off)
		delete(c.data, f.ino)
	}
	if !pos || f.flags&unix.O_APPEND != 0 {
		f.off = off + int64(len(b))
	}
	return len(b), 0
}

func (c *client) fsync(fd int) unix.Errno {
	f, err := c.file(fd)
	if err != 0 {
		return err
	}
	if f.flags&unix.O_PATH != 0 {
		return unix.EBADF
	}
	c.flush(f.ino)
	return 0
}

func (c *client) close(fd int) unix.Errno {
	f, err := c.file(fd)
	if err != 0 {
		return err
	}
	c.fds[fd] = nil
	if f.flags&unix.O_PATH == 0 {
		c.flush(f.ino)
	}
	return 0
}

// lose drops the unflushed writes to the file fd (a failed fsync or
// close).
func (c *client) lose(fd int) {
	if f, err := c.file(fd); err == 0 {
		c.drop(f.ino)
	}
}

func (c *client) getdents(fd int) ([]string, unix.Errno) {
	ents, err := c.getdentsTyped(fd)
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	return names, err
}

// getdentsTyped lists a directory with each name's type (d_type).
func (c *client) getdentsTyped(fd int) ([]vfs.Dirent, unix.Errno) {
	f, err := c.file(fd)
	switch {
	case err != 0:
		return nil, err
	case f.flags&unix.O_PATH != 0:
		return nil, unix.EBADF
	case !f.ino.isDir():
		return nil, unix.ENOTDIR
	}
	c.sync(f.ino)
	ents := make([]vfs.Dirent, 0, len(f.ino.ents))
	for name, e := range f.ino.ents {
		ents = append(ents, vfs.Dirent{Name: name, Type: uint8((e.ino.mode & unix.S_IFMT) >> 12)})
	}
	slices.SortFunc(ents, func(a, b vfs.Dirent) int { return strings.Compare(a.Name, b.Name) })
	return ents, 0
}
