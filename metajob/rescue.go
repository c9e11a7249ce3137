package metajob

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/lease"
	"golang.org/x/sys/unix"
)

// Rescue within the run (RESCUE_CHECK in the config). A meta-job that dies
// — its node lost, killed out of memory, cancelled — leaves the case it was
// running and the cases it had claimed and not started. Without rescue they
// wait for 'farm resubmit'. With it, the live meta-jobs of the same run
// take them over, within minutes, without a server:
//
//   - Who looks. Time is cut into periods of RESCUE_CHECK. In each, a
//     meta-job tries once to create MISC/rescue.RUN/check.K (K the
//     period's number) with O_EXCL — every job in a run of up to 8, else
//     each with the chance 8/N (idle.go: some 8 tries a period, whatever
//     N); the one that makes it asks the batch system, in one query for
//     all the run's meta-jobs (Backend.Jobs), which have ended, and lists
//     the status files once. So the farm makes one scheduler query a
//     period, however many meta-jobs it has: O(1) per period, 60 an hour
//     by default.
//   - What is rescued. For each meta-job of the run that has ended, its
//     status file (the newest incarnation's) tells what it held: the case it
//     started and never ended (it died under it), and the cases it claimed (C
//     records) and never started. A file with neither is marked as looked at.
//   - One rescuer. The checker takes a dead job's cases by creating its
//     mark, MISC/rescue.RUN/NAME (NAME its status file's name), with
//     O_EXCL, holding its own nonce: one meta-job wins, and it decides that
//     it won from the mark's content, not from the reply (which may be lost
//     after the create succeeded).
//   - The fence. A job the batch system says ended may still run: frozen, or
//     on a node cut off from the batch system. Every meta-job, before each
//     claim and after writing a case's start record and before running it,
//     holds the lease on its run (look.go): when its last look is more than
//     LookEvery old it looks at its run and for its own mark (one lookup
//     each in LookEvery; a lookup's ENOENT is believed only if the rescue
//     directory's listing agrees, as a GlusterFS brick down answers it for
//     a name that is there: lease.Marks); if its cases were rescued, it
//     runs none of them and exits. The rescuer waits LookEvery +
//     lease.Margin after making the mark (lease.Fence), then reads the dead
//     job's status file. So every case the old
//     job starts after the mark has its start record written before the
//     rescuer reads the file (it looked less than LookEvery before, and saw
//     no mark), and the rescuer reruns it as the dead job's open case; no
//     case it has not started is run by both. What remains is
//     the case the old job was running when it froze (or started in the
//     instant between its look and the exec): it may run twice. That is
//     recorded (two attempts in the run, the second why=rescue, the first
//     with an end record), and farm Status warns of it.
//   - The rescue. The rescuer records the cases in its status file (a C
//     record from=NAME, written at once) and runs them before its next
//     claim: the open case, if the crash limit allows (MAX_CRASHES counts its
//     death), as its next attempt (attempt=N why=rescue from=NAME); the
//     others as their first (from=NAME). If the rescuer dies in turn, they
//     are rescued from its file.
//   - The end of the run. The first meta-job to find no case left becomes
//     the run's warden (MISC/rescue.RUN/warden.K, O_EXCL; warden.go): instead of
//     exiting, it checks every period until no other meta-job of the run is
//     running and no rescue is pending, running what it rescues; or until
//     its own time is short. The others exit as before.
//   - A restarted job. A job the batch system restarted after its node
//     failed (Slurm's requeue: a new incarnation under the same ID) rescues
//     its earlier incarnation's cases itself, at its start.
//
// Rescue is off in SIMPLE mode (one case a job) and with RESCUE_CHECK=0.

// rescueDir is the directory of run's rescue marks, in MISC.
func rescueDir(run int) string { return layout.RescueDir(run) }

// rescuer is a meta-job's part in rescue: its checks, its rescues waiting
// for the fence, its warden role.
type rescuer struct {
	m         *Metajob
	dir       string // MISC/rescue.RUN
	statusDir string
	self      string // the meta-job's status file's name
	run       int
	period    time.Duration
	fence     time.Duration // the lease's LookEvery: the longest a job goes between its look for its mark and a start
	nonce     string

	// The run's meta-jobs (their IDs) and their states: the job records
	// and the engine, replaceable by tests.
	runJobs func() ([]string, error)

	checkMu sync.Mutex // one check at a time (the tick's, the warden's first)
	quit    chan struct{}
	wg      sync.WaitGroup // the tick goroutine
	made    atomic.Int64   // marks made, for each mark's own content

	mu       sync.Mutex // the fields below
	lastK    int64      // the last period whose check this job tried
	pending  []pendingRescue
	handing  int // rescues whose fence has passed, being read and handed to the job (collectDue)
	isWarden bool
	wardenK  int      // the warden mark's K, while it is the warden (warden.go)
	over     bool     // the warden's last look found no other job running and no rescue pending
	watch    []string // the status files of the others the last check found running, less those quit since (quitPoll)
	watchGen int      // checks that set watch
	calls    atomic.Int64
}

// pendingRescue is a dead job's status file whose mark this job made at
// at: it reads the file once the fence has passed.
type pendingRescue struct {
	name  string // the status file's name
	mark  string // the mark's name, if not name: a rescue taken over (takeOver)
	at    time.Time
	state string // the engine's word, for the log
}

// rescuedCase is a case handed to the meta-job by a rescue.
type rescuedCase = pendingRetry

// newRescuer returns m's rescuer, or nil when rescue is off.
func newRescuer(m *Metajob) *rescuer {
	if m.Env.Simple || m.Farm.Config.RescueCheck <= 0 {
		return nil
	}
	var b [8]byte
	rand.Read(b[:])
	r := &rescuer{m: m, dir: m.Farm.Path(layout.MiscDir, rescueDir(m.Env.Run)), statusDir: m.Farm.Path(layout.StatusDir),
		self: layout.StatusFile(m.self.ID, m.self.Restart), run: m.Env.Run, period: m.Farm.Config.RescueCheck, fence: m.lookEvery(),
		nonce: hex.EncodeToString(b[:])}
	r.runJobs = r.recordedJobs
	return r
}

// start runs the rescuer until halt: a look every quarter period or so,
// at most 15 s apart (with jitter, so that the meta-jobs do not all come
// at once), and, for a restarted job, the rescue of its earlier
// incarnation. Its directory is made (or found) before its first look:
// not a call on the way to the job's first case, nor in the start's herd.
func (r *rescuer) start(ctx context.Context) {
	r.quit = make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for first := true; ; first = false {
			step := r.period / 4
			step += time.Duration(mrand.Int64N(int64(step)/2 + 1))
			t := time.NewTimer(min(step, time.Second*15, r.nextDue()))
			select {
			case <-r.quit:
				t.Stop()
				return
			case <-t.C:
			}
			if first && !r.begin() {
				return
			}
			r.tick(ctx, time.Now())
		}
	}()
}

// begin makes the run's rescue directory if it is not there, and marks the
// job's earlier incarnation, if any, for rescue; false: rescue is off.
func (r *rescuer) begin() bool {
	if err := os.Mkdir(r.dir, 0o755); err != nil && !os.IsExist(err) {
		fmt.Fprintf(r.m.log, "farm: rescue is off for this meta-job: %v\n", err)
		return false
	}
	if rs := r.m.self.Restart; rs > 0 {
		prev := layout.StatusFile(r.m.self.ID, rs-1)
		if r.mark(prev, "restarted") {
			fmt.Fprintf(r.m.log, "farm: this job was restarted by the batch system; the cases its incarnation %d held are rescued here after %s\n", rs-1, r.wait())
		}
	}
	return true
}

// halt stops the rescuer before the meta-job's last records: it waits for
// its goroutine, takes back the marks of rescues it has not carried out
// (another meta-job's check then takes them), and gives up the warden's
// role.
func (r *rescuer) halt() {
	if r.quit != nil {
		close(r.quit)
		r.wg.Wait()
		r.quit = nil
	}
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	warden := r.isWarden
	r.isWarden = false // a second halt must not remove a new warden's mark
	r.mu.Unlock()
	for _, p := range pending {
		r.unmark(cmp.Or(p.mark, p.name))
	}
	if warden {
		r.wardenLeaves()
	}
}

// wait is how long a rescuer waits between its mark and its reading of the
// dead job's file (lease.Fence).
func (r *rescuer) wait() time.Duration { return lease.Fence(r.fence) }

// tick is one look: the period's check if this job is elected and the
// first to try it (or the warden), then the rescues whose fence has
// passed.
func (r *rescuer) tick(ctx context.Context, now time.Time) {
	k := now.UnixNano() / int64(r.period)
	r.mu.Lock()
	tried := k <= r.lastK
	r.lastK = max(r.lastK, k)
	warden := r.isWarden
	r.mu.Unlock()
	if warden {
		r.renewWarden()
	}
	if !tried && r.elected() && r.checkFile(k) || warden {
		r.check(ctx, now)
	}
	r.collectDue(ctx, now)
}

// localFilesystem reports whether the open directory d is on a filesystem
// of this host alone (ext2/3/4, XFS, Btrfs, tmpfs, ZFS, F2FS), where another
// process sees an append at once; on any other (NFS, Lustre, GPFS, a FUSE
// client such as GlusterFS's or CephFS's) the S and C records are synced,
// for the rescue's fence. It asks the kernel (d's mount in /proc, no call to
// a file server), else fstatfs (a call); false if neither answers.
func localFilesystem(d *os.File) bool {
	if typ, ok := mountType(d); ok {
		switch typ {
		case "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs":
			return true
		}
		return false
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(d.Fd()), &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case 0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x2FC12FC1, 0xF2F52010:
		return true
	}
	return false
}

// mountType is the filesystem type of the mount d is on, from
// /proc/self/fdinfo (its mnt_id) and /proc/self/mountinfo.
func mountType(d *os.File) (string, bool) {
	info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(d.Fd())))
	if err != nil {
		return "", false
	}
	var id string
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			id = strings.TrimSpace(v)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if id == "" || err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == id {
			if i := slices.Index(f, "-"); i > 0 && i+1 < len(f) {
				return f[i+1], true
			}
		}
	}
	return "", false
}
