package sim

import (
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// inode is a file, a directory or a FIFO on the server.
type inode struct {
	ino     uint64
	mode    uint32 // type and permission bits
	nlink   uint32
	data    []byte // a regular file's content; shared with clients' copies, so never changed in place below len
	ents    map[string]dirent
	parent  *inode // a directory's, for ".."
	mtime   time.Duration
	ctime   time.Duration
	version uint64 // counts changes: a file's content, a directory's names
	dead    bool   // a directory removed: nothing can be looked up or made in it
	split   bool   // split-brain: every lookup by a client answers EIO
}

// dirent is a name in a directory.
type dirent struct {
	ino  *inode
	made time.Duration // when the name was made (GlusterDHT's link race)
}

func (i *inode) isDir() bool  { return i.mode&unix.S_IFMT == unix.S_IFDIR }
func (i *inode) isReg() bool  { return i.mode&unix.S_IFMT == unix.S_IFREG }
func (i *inode) isFIFO() bool { return i.mode&unix.S_IFMT == unix.S_IFIFO }

// newInode makes an inode of mode, with no name yet (nlink 0; a
// directory 1, for its ".").
func (w *World) newInode(mode uint32) *inode {
	w.nextIno++
	i := &inode{ino: w.nextIno, mode: mode, mtime: w.now, ctime: w.now}
	if i.isDir() {
		i.ents = map[string]dirent{}
		i.nlink = 1
	}
	return i
}

// touch records a change of i now.
func (w *World) touch(i *inode) {
	i.mtime, i.ctime = w.now, w.now
	i.version++
}

// link names i name in dir.
func (w *World) link(dir *inode, name string, i *inode) {
	dir.ents[name] = dirent{ino: i, made: w.now}
	w.touch(dir)
	i.nlink++
	i.ctime = w.now
	if i.isDir() {
		i.parent = dir
		dir.nlink++
	}
}

// unlink removes name from dir; a directory removed is dead.
func (w *World) unlink(dir *inode, name string) {
	i := dir.ents[name].ino
	delete(dir.ents, name)
	w.touch(dir)
	i.ctime = w.now
	if i.isDir() {
		i.dead, i.nlink = true, 0
		dir.nlink--
		return
	}
	i.nlink--
}

// move renames odir's oname to ndir's nname (which is free).
func (w *World) move(odir *inode, oname string, ndir *inode, nname string) {
	e := odir.ents[oname]
	delete(odir.ents, oname)
	w.touch(odir)
	ndir.ents[nname] = dirent{ino: e.ino, made: w.now}
	w.touch(ndir)
	e.ino.ctime = w.now
	if e.ino.isDir() && odir != ndir {
		odir.nlink--
		ndir.nlink++
		e.ino.parent = ndir
	}
}

// writeAt writes b at off in i's content. Bytes below the content's end
// are never changed in place (clients' copies share them): an overwrite
// makes a new slice, an append grows the old one.
func (w *World) writeAt(i *inode, b []byte, off int64) {
	if len(b) == 0 {
		return
	}
	n, end := int64(len(i.data)), off+int64(len(b))
	if off < n {
		d := make([]byte, max(n, end))
		copy(d, i.data)
		copy(d[off:], b)
		i.data = d
	} else {
		if off > n {
			i.data = append(i.data, make([]byte, off-n)...)
		}
		i.data = append(i.data, b...)
	}
	w.touch(i)
}

// truncate empties i.
func (w *World) truncate(i *inode) {
	if len(i.data) > 0 {
		i.data = nil
		w.touch(i)
	}
}

// walk resolves name from the directory start (from the root if name is
// absolute) to the directory holding its last component and that
// component: "" when name ends at a directory itself ("/", ".", "..",
// "a/.."). slash says name ended with "/". A missing component is ENOENT,
// a file used as a directory ENOTDIR, a dead directory ENOENT.
func walk(root, start *inode, name string) (dir *inode, last string, slash bool, err unix.Errno) {
	if name == "" {
		return nil, "", false, unix.ENOENT
	}
	cur := start
	if name[0] == '/' {
		cur = root
	}
	for {
		name = strings.TrimLeft(name, "/")
		if name == "" {
			return cur, "", true, 0
		}
		comp, rest, _ := strings.Cut(name, "/")
		if !cur.isDir() {
			return nil, "", false, unix.ENOTDIR
		}
		if cur.dead {
			return nil, "", false, unix.ENOENT
		}
		if strings.Trim(rest, "/") == "" && comp != "." && comp != ".." {
			return cur, comp, len(name) > len(comp), 0
		}
		switch comp {
		case ".":
		case "..":
			cur = cur.parent
		default:
			e, ok := cur.ents[comp]
			if !ok {
				return nil, "", false, unix.ENOENT
			}
			cur = e.ino
		}
		name = rest
	}
}

// attrs are what a stat says of an inode (and what a client caches).
type attrs struct {
	ino          uint64
	mode         uint32
	nlink        uint32
	size         int64
	mtime, ctime time.Duration
}

// attrs are i's attributes at the server.
func (i *inode) attrs() attrs {
	a := attrs{ino: i.ino, mode: i.mode, nlink: i.nlink, size: int64(len(i.data)), mtime: i.mtime, ctime: i.ctime}
	if i.isDir() {
		a.size = 4096
	}
	return a
}

// simDev is the device number of every simulated file.
const simDev = 0x53494d

// fill writes a into st.
func (a attrs) fill(st *unix.Stat_t) {
	*st = unix.Stat_t{}
	setInt(&st.Dev, simDev)
	st.Ino = a.ino
	setInt(&st.Nlink, int64(a.nlink))
	st.Mode = a.mode
	st.Size = a.size
	setInt(&st.Blksize, 4096)
	st.Blocks = (a.size + 511) / 512
	st.Mtim = unix.NsecToTimespec(Epoch.UnixNano() + int64(a.mtime))
	st.Ctim = unix.NsecToTimespec(Epoch.UnixNano() + int64(a.ctime))
	st.Atim = st.Mtim
}

// setInt sets an integer field whose type differs between architectures.
func setInt[T ~int32 | ~int64 | ~uint32 | ~uint64](p *T, v int64) { *p = T(v) }
