package sim

import (
	"time"

	"golang.org/x/sys/unix"
)

// Model is how a simulated filesystem behaves: how long its calls take,
// how its clients (one per process) cache, and which faults it can give.
// Local, NFS, GlusterReplica, GlusterDHT and Full make the models; change
// a copy's fields to vary one (a swarm of models). How often a fault
// happens is not the model's but the run's: Faults.
type Model struct {
	// Name names the model in errors.
	Name string
	// MinLatency and MaxLatency bound a call's virtual duration, drawn
	// log-uniformly between them.
	MinLatency, MaxLatency time.Duration
	// LinkMax is the most names one inode may have: a Linkat past it
	// answers EMLINK (ext4: 65,000). Make it small to reach it in a test.
	LinkMax int

	// AttrCache is the longest a client may answer a lookup (Fstatat, or
	// an O_PATH open) from a positive result it cached: old attributes, or
	// a name since removed or replaced. Each entry's lifetime is drawn
	// from (0, AttrCache]. 0: no cache.
	AttrCache time.Duration
	// NegCache is the same for a negative result: ENOENT for a name made
	// since. 0: no negative cache.
	NegCache time.Duration
	// DataCache is the longest a client may read an old copy of a file's
	// content after it read the file (each copy's lifetime drawn from
	// (0, DataCache]). 0: reads always see the server's content.
	DataCache time.Duration
	// CloseToOpen is NFS's coherence: an open (not O_PATH) looks the name
	// up at the server and drops the client's copy of a file's content
	// that changed; the client holds what it writes until it closes or
	// fsyncs the file; and a client that reaches the server about a
	// directory (a lookup it had not cached, a create, an open of the
	// directory) and finds it changed drops what it cached of its names.
	CloseToOpen bool

	// LostReply is what a call answers whose reply was lost after it took
	// effect (one is drawn); nil: replies are never lost.
	LostReply []unix.Errno
	// Transient is what a call answers that failed without effect; nil:
	// calls never fail so.
	Transient []unix.Errno
	// LostCreateEEXIST: a lost reply of an exclusive create that took
	// effect (O_EXCL open, mknod, mkdir, link) may answer EEXIST instead,
	// as a retried request would.
	LostCreateEEXIST bool
	// LostRemoveENOENT: a lost reply of an unlink or rename that took
	// effect may answer ENOENT instead, as a retried request would.
	LostRemoveENOENT bool
	// Outage is what a window of Faults.Outage does.
	Outage Outage
	// LinkRace is the probability that a Linkat onto a name made less
	// than 5 ms before succeeds all the same (see GlusterDHT).
	LinkRace float64
	// TypeRace is the probability that a mkdir onto a name that is a file
	// made less than 5 ms before, or a create (mknod, O_EXCL) onto a
	// directory made so, succeeds all the same (see GlusterDHT).
	TypeRace float64
	// SplitBrain is the probability that a name made in the half second
	// after a BrickDown window ends answers EIO to every later lookup of
	// it by any process (see GlusterReplica).
	SplitBrain float64
	// SplitBrainNames, if set, is a pattern (path.Match) of the names
	// that may be made split-brain: others never are.
	SplitBrainNames string
	// Sets is a distributed volume's number of replica sets (0 or 1:
	// one). A BrickDown window is then one set's: a call on a name that
	// DHT hashes to another set (a hash of its last component: a file is
	// on its hashed set, and a directory's lookup is answered there
	// first) is spared; calls on an open descriptor are not told apart.
	Sets int
}

// Outage is what happens while a filesystem's outage window lasts (its
// start and length drawn by Faults.Outage and Faults.OutageMax).
type Outage uint8

const (
	// NoOutage: the model has no outages.
	NoOutage Outage = iota
	// Hang: the server is unreachable; on a hard mount every call waits
	// until it is back, then goes on (nfs(5), "hard").
	Hang
	// BrickDown: a brick of a replica set is down. Each call fails, without
	// effect, with probability 1/2: lookups, opens, creates and links with
	// ENOENT (a "spurious" ENOENT), the others with ENOTCONN. Or, in half
	// the windows, the client is cut off from every brick (its node's
	// network down): every call fails with ENOTCONN ("Transport endpoint
	// is not connected"), and one that changes something may have reached
	// the bricks all the same (half of them: a lost reply).
	BrickDown
	// SoftTimeout: the server is unreachable and the mount is soft
	// (nfs(5), "soft"): every call fails with ETIMEDOUT once its retries
	// are spent; one that changes something may have reached the server
	// all the same (half of them: a lost reply).
	SoftTimeout
	// DiskFull: the filesystem is full (its space or its quota): every call
	// that would allocate — a create (an O_CREAT open that makes the name,
	// mknod, mkdir, link) or a write that extends a file — fails with
	// ENOSPC or EDQUOT (one of them per window), without effect.
	DiskFull
)

// linkRaceWindow is how recent a name must be for GlusterDHT's LinkRace:
// two links race only while the first is in flight (about a call's
// latency on the rig, CLAIMS-APPENDIX.md).
const linkRaceWindow = 5 * time.Millisecond

// Local is a local POSIX filesystem (ext4, tmpfs) under one kernel. Rules:
//
//   - Every process sees every change at once: no client cache (one page
//     cache and one dentry cache for all).
//   - O_EXCL create, mknod, mkdir, link and rename are atomic and exclusive
//     (POSIX; CLAIMS-APPENDIX.md, "Primitives, per filesystem", local ext4).
//   - No fault comes from the filesystem: every call answers what it did.
//     Processes still crash and freeze (Faults.Crash, Faults.Freeze).
//   - EMLINK past 65,000 names for one inode (ext4's EXT4_LINK_MAX).
//   - Calls take 10–200 µs.
func Local() Model {
	return Model{Name: "local", MinLatency: 10 * time.Microsecond, MaxLatency: 200 * time.Microsecond, LinkMax: 65000}
}

// Full is Local that fills up: during an outage window (Faults.Outage) it
// is out of space or over quota, and creates and extending writes fail
// with ENOSPC or EDQUOT without effect (DiskFull). Observed: farm's
// integration/faults_test.go fills a tmpfs for 3 s, its space then its
// inodes, while meta-jobs run (CLAIMS-APPENDIX.md, "How it is tested");
// CLAIMS.md, "Transient errors", lists ENOSPC and EDQUOT as retried.
func Full() Model {
	m := Local()
	m.Name, m.Outage = "full", DiskFull
	return m
}

// NFS is an NFS mount (hard, default options), one client per process.
// Rules, and where they come from:
//
//   - Close-to-open (nfs(5), "Data and metadata coherence", "Close-to-open
//     cache consistency"): opening a file (not O_PATH) looks its name up at
//     the server and drops the client's copy of its content if the file
//     changed; a client keeps its writes until it closes or fsyncs the
//     file, so another client's open sees the content as of the last close
//     or fsync by anyone. A client's own reads and Fstat see its writes.
//   - O_APPEND across clients is not atomic (open(2), O_APPEND: "NFS does
//     not support appending to a file, so the client kernel has to simulate
//     it, which can't be done without a race condition"): an append goes at the end of the file as the
//     client sees it when it writes, and lands there when it is flushed,
//     over whatever another client appended meanwhile.
//   - Lookup cache (nfs(5), "lookupcache": positive and negative entries are
//     trusted until their parent directory's cached attributes expire;
//     acregmin 3 s, acdirmin 30 s): Fstatat and O_PATH opens may answer
//     from an entry up to 3 s old (positive: old attributes, or a name
//     since removed) or 30 s old (negative: ENOENT for a name made since).
//     A client that reaches the server about a directory and finds it
//     changed drops its entries there (fs/nfs/dir.c judges cached dentries
//     by the parent's change attribute): its own creates and removals, a
//     lookup it had not cached, an open of the directory for reading
//     (which revalidates it, as CLAIMS-APPENDIX.md's rescue fence relies on).
//   - A file held open reads its cached content for up to 3 s after
//     another client changed it (the attribute cache); an open revalidates.
//   - Lost replies: a soft mount's call times out (ETIMEDOUT) or fails
//     (EIO) after the server acted on it; a retransmitted non-idempotent
//     request the server's duplicate request cache no longer holds answers
//     EEXIST for a create and ENOENT for a removal or rename it made
//     (Juszczak, "Improving the performance and correctness of an NFS
//     server", USENIX 1989; CLAIMS.md, "Outcomes decided from the
//     filesystem").
//   - Transient errors: EIO, ETIMEDOUT, ESTALE (CLAIMS.md, "Transient
//     errors"). A failed fsync or close loses the unflushed writes: a
//     retry succeeds with nothing to write (Linux's writeback errors,
//     LWN 752063, "PostgreSQL's fsync() surprise", 2018).
//   - A crashed process's unflushed writes reach the server (kill -9: the
//     kernel closes its files) or are lost (its node died), half and half;
//     a process that returns has its files closed, its writes flushed.
//   - Outage: the server is unreachable and calls hang until it is back
//     (a hard mount).
//   - Calls take 100 µs – 2 ms.
func NFS() Model {
	return Model{
		Name: "nfs", MinLatency: 100 * time.Microsecond, MaxLatency: 2 * time.Millisecond, LinkMax: 65000,
		AttrCache: 3 * time.Second, NegCache: 30 * time.Second, DataCache: 3 * time.Second, CloseToOpen: true,
		LostReply: []unix.Errno{unix.EIO, unix.ETIMEDOUT}, Transient: []unix.Errno{unix.EIO, unix.ETIMEDOUT, unix.ESTALE},
		LostCreateEEXIST: true, LostRemoveENOENT: true, Outage: Hang,
	}
}

// NFSSoft is NFS on a soft mount (nfs(5): "soft", the failure mode some
// clusters choose so that a dead server does not hang every node): NFS's
// rules, but an outage fails calls with ETIMEDOUT instead of holding them
// (SoftTimeout), the ETIMEDOUT of CLAIMS.md's transient errors ("a soft
// NFS mount").
func NFSSoft() Model {
	m := NFS()
	m.Name, m.Outage = "nfs-soft", SoftTimeout
	return m
}

// GlusterReplica is a GlusterFS replica volume (one replica set, client
// quorum on, default client options: the rig's "default" profile), one
// FUSE client per process. Rules, and where they come from:
//
//   - O_EXCL create, mknod, mkdir, link and rename are exclusive
//     (CLAIMS-APPENDIX.md, "GlusterFS 10.3, replica 2").
//   - Client caches with the default options (mount.glusterfs(8):
//     attribute-timeout and entry-timeout 1 s, negative-timeout 0;
//     performance.md-cache-timeout 1 s): Fstatat and O_PATH opens may
//     answer from a positive entry up to 1 s old; no negative entries.
//   - A file's content may be read old for up to 1 s after the client read
//     it, after another client rewrote it, open or no open
//     (performance.cache-refresh-timeout 1 s; CLAIMS.md, "What it relies
//     on": "GlusterFS's default options do, for about a second").
//   - Writes go to the bricks when made.
//   - Lost replies: ETIMEDOUT or ENOTCONN after the op took effect
//     (CLAIMS.md, "Transient errors": ENOTCONN from a client whose bricks
//     are gone); a create that took effect may answer EEXIST (CLAIMS-APPENDIX.md,
//     "Sets of 3 bricks" and the replica-2 races: names made while every
//     racing call answered EEXIST).
//   - Transient errors: EIO, ENOTCONN, ESTALE (CLAIMS-APPENDIX.md: the mixed races
//     answered EIO and ESTALE thousands of times).
//   - Outage: a brick is down (BrickDown): spurious ENOENT for lookups,
//     links and creates, ENOTCONN for the rest (CLAIMS.md, "Transient
//     errors": "GlusterFS answers a link or a create so while a replica is
//     down").
//   - SplitBrain (0 here: set it to try): a name made in the half second
//     after the brick came back answers EIO to every lookup for good
//     (CLAIMS-APPENDIX.md, "Client quorum keeps a name from two winners, not from a
//     GFID split-brain").
//   - Calls take 200 µs – 3 ms (about 1 ms on the rig, CLAIMS-APPENDIX.md, "Claims
//     at scale").
func GlusterReplica() Model {
	return Model{
		Name: "gluster-replica", MinLatency: 200 * time.Microsecond, MaxLatency: 3 * time.Millisecond, LinkMax: 65000,
		AttrCache: time.Second, DataCache: time.Second,
		LostReply: []unix.Errno{unix.ETIMEDOUT, unix.ENOTCONN}, Transient: []unix.Errno{unix.EIO, unix.ENOTCONN, unix.ESTALE},
		LostCreateEEXIST: true, Outage: BrickDown,
	}
}

// GlusterDHT is a distribute-replicate GlusterFS volume (2 × 2, client
// quorum on: the rig's "dht" profile): GlusterReplica, but link() is not
// exclusive. A Linkat onto a name made less than 5 ms before (a racing
// link in flight) succeeds with probability LinkRace (1/2), and the name
// then holds either file (CLAIMS-APPENDIX.md, "GlusterFS 10.3, distribute-replicate
// 2 × 2": both clients' link() won 14 of 2,000 and 20 of 3,000 rounds; a
// link-based claim core claimed 59 cases twice; DHT's "linkto" files on
// the name's hashed set), and each client that linked opens its own file
// there for as long as it caches the name (FUSE instantiates a link's
// dentry with the linked inode, and path walks go by it until the entry
// times out; the rig's racing clients each read back their own). O_EXCL create, mknod, mkdir and rename stay
// exclusive, as there — but a mkdir and a create of one name, racing,
// may both succeed, with probability TypeRace (1/2), the name then holding
// either (CLAIMS.md: "a mkdir and a create of one name both succeeded in 1
// of 4,000 races, issue 21": a directory is made on every subvolume, a
// file on its hashed one). A LinkRace and a TypeRace of 1/2 are far above
// the rig's rates (well under 1% of rounds), so that whatever relies on
// link() being exclusive, or on a mkdir excluding a create, fails fast.
// A brick down is one replica set's (Sets: 2): the calls on names hashed
// to the other set go on as usual, so a name may answer a spurious ENOENT
// while its directory answers every lookup.
func GlusterDHT() Model {
	m := GlusterReplica()
	m.Name, m.LinkRace, m.TypeRace, m.Sets = "gluster-dht", 0.5, 0.5, 2
	return m
}
