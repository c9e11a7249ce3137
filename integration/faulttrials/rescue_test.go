package faulttrials

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
	"github.com/farm-hpc/farm/status"
)

// Rescue within the run (metajob/rescue.go) in the trials. The trials run
// with the farm's default config, RESCUE_CHECK=60 (rescue on) and the
// default lease (casetable.LookEvery: the rescuer waits 5 s + 5 s after
// its mark), unless a trial says why it turns rescue off. With rescue on, a
// meta-job the engine reports ended (killed, or its node down) has its
// cases taken over by a live meta-job of the same run: the case it was
// running as the next attempt (attempt=N why=rescue from=status.JOB), the
// cases it had claimed and not started as their first (from=status.JOB).
// What the trials then count, from the status records (rescueCount):
//
//   - rescued: cases of a dead meta-job that a rescue ran to success in
//     the same run;
//   - rescue duplicates: the documented one, a case started twice in one
//     run because its first meta-job died (or froze) under it and a rescue
//     ran it again as the next attempt, why=rescue from= that job's file.
//     Every other second start in a run is a real duplicate (dup-claims);
//   - left for the resubmit: cases a resubmit ran (a first start in run 2
//     or later), each with why the run before left it (leftWhy);
//   - death to rerun: for each start of a rescue, its start record's time
//     minus the moment the trial killed (or froze, or took down the node
//     of) the meta-job it was rescued from.

// deaths are the moments the trial killed (or froze, or took the node
// down of) meta-jobs, by job ID.
type deaths map[string]time.Time

// startRec is one S record, and what became of it in the same file.
type startRec struct {
	file, job string // the status file's name (status.JOB) and job
	run       int
	id        int64
	at        float64 // Unix seconds
	attempt   int     // 1 for a first attempt
	why, from string
	end       byte // 'E', 'I', or 0 if the file has no end of it
	ok        bool // an E record with status 0
	// withdrawn: an I record with signal 0, the lease's (metajob/runone.go):
	// its job found, once the start was recorded, its cases rescued or its
	// run superseded, and never ran it.
	withdrawn bool
}

// statusFile is what one status file says.
type statusFile struct {
	name, job string
	run       int
	starts    []*startRec
	claimed   map[int64]float64 // C records: case -> when (the last)
	quitWhy   string            // the Q record's why=, "" if none or no Q
	quit      bool
	quitAt    float64 // the Q record's time
}

// readStatusFiles reads every status file of the farm in dir, by name.
func readStatusFiles(t *testing.T, dir string) map[string]*statusFile {
	out := map[string]*statusFile{}
	files, _ := filepath.Glob(filepath.Join(dir, "STATUSES", "status.*"))
	for _, path := range files {
		name := filepath.Base(path)
		job, _, ok := layout.ParseStatusFile(name)
		if !ok {
			continue
		}
		sf := &statusFile{name: name, job: job, run: -1, claimed: map[int64]float64{}}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		open := map[int64]*startRec{}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			r, err := status.ParseRecord(sc.Bytes())
			if err != nil {
				continue
			}
			switch r.Kind {
			case status.KindHeader:
				sf.run = r.Run
			case status.KindStart:
				s := &startRec{file: name, job: job, run: sf.run, id: r.ID, at: r.Start, attempt: max(r.Attempt, 1), why: string(r.Why), from: string(r.From)}
				sf.starts = append(sf.starts, s)
				open[r.ID] = s
			case status.KindEnd, status.KindInterrupted:
				if s := open[r.ID]; s != nil {
					s.end, s.ok = byte(r.Kind), r.Kind == status.KindEnd && r.Status == 0
					s.withdrawn = r.Kind == status.KindInterrupted && r.Status == 0
					delete(open, r.ID)
				}
			case status.KindClaimed:
				if len(r.Lost) > 0 {
					break // a claim noted before its commit, which it lost: not the job's
				}
				ids, _ := status.ParseIDs(r.IDs)
				for _, id := range ids {
					sf.claimed[id] = r.Time
				}
			case status.KindQuit:
				sf.quit, sf.quitWhy, sf.quitAt = true, string(r.Why), r.Time
			}
		}
		fh.Close()
		out[name] = sf
	}
	return out
}

// rescueCount is what the rescues of a trial did, from its status
// records (see above).
type rescueCount struct {
	rescued    int // cases rescued and run to success within their run
	dups       int // documented rescue duplicates
	realDups   int // cases started twice in a run otherwise
	left       int // cases a resubmit ran
	leftWhy    map[string]int
	rerunAfter []float64 // seconds from a death to each rescued start
	// explained: per run, the cases whose several starts in it are
	// rescue duplicates.
	explained map[int]map[int64]bool
	// dropped: rescues a live meta-job announced (its mark) and did not
	// carry out, whose cases the run left to the resubmit.
	dropped int
	// late: rescued starts in a run after the next run began.
	late int
}

// countRescues counts the rescues of the farm in dir whose meta-jobs died
// (or froze) at the moments of dead, once every run has ended; a real
// duplicate, or a rescue a live meta-job announced and dropped, is an
// error of the test. With rescue off (rescue false) it counts the
// duplicates and the cases left for the resubmits, without their whys.
func countRescues(t *testing.T, dir string, dead deaths, rescue bool) rescueCount {
	rc := rescueCount{leftWhy: map[string]int{}, explained: map[int]map[int64]bool{}}
	files := readStatusFiles(t, dir)
	byRun, maxRun := startsByRun(files)
	sc := &rescueScan{t: t, dir: dir, files: files, began: runsBegan(files), dead: dead, rc: &rc}
	runs := make([]int, 0, len(byRun))
	for run := range byRun {
		runs = append(runs, run)
	}
	sort.Ints(runs)
	for _, run := range runs {
		for _, id := range caseIDs(byRun[run]) {
			sc.countCase(run, id, byRun[run][id])
		}
	}
	// The cases each resubmit ran, and why the run before left them.
	for run := 2; run <= maxRun; run++ {
		ids := caseIDs(byRun[run])
		rc.left += len(ids)
		if !rescue {
			continue
		}
		sc.countLeft(run, ids)
	}
	return rc
}

// rescueScan is countRescues at work: the farm in dir, its status files by
// name, when each of its runs began (runsBegan), the moments its meta-jobs
// died, and the count so far.
type rescueScan struct {
	t     *testing.T
	dir   string
	files map[string]*statusFile
	began map[int]float64
	dead  deaths
	rc    *rescueCount
}

// startsByRun returns the starts of files by run and case, and the highest
// run.
func startsByRun(files map[string]*statusFile) (map[int]map[int64][]*startRec, int) {
	byRun := map[int]map[int64][]*startRec{}
	maxRun := 0
	for _, sf := range files {
		maxRun = max(maxRun, sf.run)
		if byRun[sf.run] == nil {
			byRun[sf.run] = map[int64][]*startRec{}
		}
		for _, s := range sf.starts {
			if !s.withdrawn { // never ran: no start of the case's
				byRun[sf.run][s.id] = append(byRun[sf.run][s.id], s)
			}
		}
	}
	return byRun, maxRun
}

// runsBegan returns when each run of files began: its first record (S or
// C), in Unix seconds.
func runsBegan(files map[string]*statusFile) map[int]float64 {
	began := map[int]float64{}
	for _, sf := range files {
		first := 0.0
		for _, s := range sf.starts {
			if first == 0 || s.at < first {
				first = s.at
			}
		}
		for _, at := range sf.claimed {
			if first == 0 || at < first {
				first = at
			}
		}
		if b, ok := began[sf.run]; first > 0 && (!ok || first < b) {
			began[sf.run] = first
		}
	}
	return began
}

// caseIDs are the cases of starts (by case), in order.
func caseIDs(starts map[int64][]*startRec) []int64 {
	ids := make([]int64, 0, len(starts))
	for id := range starts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// jobOf is the job of the status file named file.
func (sc *rescueScan) jobOf(file string) string {
	if sf := sc.files[file]; sf != nil {
		return sf.job
	}
	j, _, _ := layout.ParseStatusFile(file)
	return j
}

// countCase counts the starts ss of case id in run (sorting them by
// attempt, then time): whether a rescue ran it to success there, and, if
// it started more than once, whether that is a rescue duplicate.
func (sc *rescueScan) countCase(run int, id int64, ss []*startRec) {
	sort.SliceStable(ss, func(i, j int) bool {
		return ss[i].attempt < ss[j].attempt || ss[i].attempt == ss[j].attempt && ss[i].at < ss[j].at
	})
	if sc.rescuedInRun(run, id, ss) {
		sc.rc.rescued++
	}
	if len(ss) < 2 {
		return
	}
	sc.countDuplicate(run, id, ss)
}

// rescuedInRun reports whether a rescue within run ran case id (its
// starts ss) to success. It counts the time from each death to the rescue
// of its case, and the rescues that started after the next run began (an
// error).
func (sc *rescueScan) rescuedInRun(run int, id int64, ss []*startRec) bool {
	rc, t := sc.rc, sc.t
	rescuedOK := false
	for _, s := range ss {
		if s.from == "" || sc.files[s.from] == nil || sc.files[s.from].run != run {
			continue
		}
		if next, ok := sc.began[run+1]; ok && s.at > next {
			// Run run was superseded: its cases are the next
			// run's to run.
			rc.late++
			t.Errorf("case %d: rescued in run %d by job %s (from=%s) at %.3f, after run %d began (%.3f)", id, run, s.job, s.from, s.at, run+1, next)
			continue
		}
		if d, ok := sc.dead[sc.jobOf(s.from)]; ok {
			rc.rerunAfter = append(rc.rerunAfter, s.at-float64(d.UnixMilli())/1e3)
		}
		rescuedOK = rescuedOK || s.ok
	}
	return rescuedOK
}

// countDuplicate counts case id's several starts ss in run: a documented
// rescue duplicate if each start after the first is the rescue of the one
// before (its next attempt, from its file, that job dead), else a real
// duplicate, an error.
func (sc *rescueScan) countDuplicate(run int, id int64, ss []*startRec) {
	rc, t, dead := sc.rc, sc.t, sc.dead
	ok := true
	for i := 1; i < len(ss); i++ {
		prev, s := ss[i-1], ss[i]
		_, prevDead := dead[prev.job]
		if !(s.why == "rescue" && s.from == prev.file && prevDead && s.attempt == prev.attempt+1) {
			ok = false
		}
	}
	var desc []string
	for _, s := range ss {
		d := ""
		if dt, dd := dead[s.job]; dd {
			d = fmt.Sprintf(", job died at %.3f", float64(dt.UnixMilli())/1e3)
		}
		desc = append(desc, fmt.Sprintf("job %s at %.3f attempt %d why=%q from=%q end=%q%s", s.job, s.at, s.attempt, s.why, s.from, s.end, d))
	}
	if ok {
		rc.dups++
		if rc.explained[run] == nil {
			rc.explained[run] = map[int64]bool{}
		}
		rc.explained[run][id] = true
		t.Logf("case %d: rescue duplicate in run %d (documented: its meta-job died under it): %s", id, run, strings.Join(desc, "; "))
	} else {
		rc.realDups++
		t.Errorf("case %d: started %d times in run %d, not as the rescue of a dead meta-job's case: %s", id, len(ss), run, strings.Join(desc, "; "))
	}
}

// countLeft counts why run-1 left the cases ids, which run ran, to run
// (leftWhy), and logs them by why; a rescue announced by a meta-job that
// was not killed and not carried out is an error.
func (sc *rescueScan) countLeft(run int, ids []int64) {
	rc, t := sc.rc, sc.t
	byWhy := map[string][]string{}
	for _, id := range ids {
		why, detail := leftWhy(sc.dir, sc.files, run-1, id, sc.dead, sc.began[run])
		rc.leftWhy[why]++
		byWhy[why] = append(byWhy[why], fmt.Sprintf("%d%s", id, detail))
		if why == "rescue-dropped" {
			rc.dropped++
			t.Errorf("case %d: its rescue was announced in run %d by a meta-job that was not killed, and not carried out: the case waited for run %d%s", id, run-1, run, detail)
		}
	}
	for _, why := range leftKinds {
		if len(byWhy[why]) > 0 {
			t.Logf("left by run %d for run %d, %s: %d case(s): %s", run-1, run, why, len(byWhy[why]), strings.Join(byWhy[why], ", "))
		}
	}
}

// leftWhy says why run left case id to the next run, which began at next
// (its first record, Unix seconds):
//
//   - "unclaimed": no status file of the run has it and no meta-job of it
//     found the table done before the next run began (every one was
//     killed first);
//   - "interrupted": the dead meta-job that held it recorded it
//     interrupted (it caught a signal: scancel, its time limit), which
//     rescue leaves to the resubmit by design;
//   - "unrecorded-claim": no status file has it, yet a meta-job of the
//     run found no case left before the next run began: it was claimed by
//     a meta-job killed between its claim's commit and its C record, which
//     rescue cannot see;
//   - "not-marked-warden-killed", "not-marked-all-killed", "not-marked":
//     a dead meta-job held it when the next run began (its C record, or
//     its S record, its end not recorded then) and no rescue mark was made for its
//     file before: the run's warden was among the killed; every meta-job
//     of the run was killed or had ended when it died; or neither (a live
//     job could have rescued it);
//   - "rescuer-killed": the mark was made by a meta-job killed in turn
//     before it carried the rescue out;
//   - "rescue-dropped": the mark was made by a meta-job that was not
//     killed, which did not carry it out;
//   - "marked-none": the mark says its file held nothing;
//   - "other": none of these (a case of a live job, say).
func leftWhy(dir string, files map[string]*statusFile, run int, id int64, dead deaths, next float64) (string, string) {
	var holder *statusFile
	var at float64
	recorded := false
	noCases := false
	var runJobs []*statusFile
	for _, sf := range files {
		if sf.run != run {
			continue
		}
		runJobs = append(runJobs, sf)
		if sf.quitWhy == "no-cases" && sf.quitAt < next {
			noCases = true
		}
		held, when := false, 0.0
		if c, ok := sf.claimed[id]; ok && c < next {
			recorded, held, when = true, true, c
		}
		for _, s := range sf.starts {
			if s.id == id && s.at < next {
				// The next run ran it: an end of it here was not
				// recorded yet (a job frozen after the case ended and
				// before its end record, written with the next record).
				recorded, held, when = true, true, s.at
			}
		}
		if _, d := dead[sf.job]; held && d && (holder == nil || when > at) {
			holder, at = sf, when
		}
	}
	if !recorded {
		if noCases {
			return "unrecorded-claim", ""
		}
		return "unclaimed", ""
	}
	if holder == nil {
		return "other", ""
	}
	if recordedInterrupted(holder, id) {
		return "interrupted", fmt.Sprintf(" (held by dead job %s, which recorded it interrupted)", holder.job)
	}
	rdir := filepath.Join(dir, "MISC", fmt.Sprintf("rescue.%d", run))
	b, err := os.ReadFile(filepath.Join(rdir, holder.name))
	f := strings.Fields(string(b))
	markedAt := time.Time{}
	if len(f) >= 4 {
		markedAt, _ = time.Parse(time.RFC3339, f[3])
	}
	if err != nil || !markedAt.IsZero() && float64(markedAt.Unix()) > next {
		late := ""
		if err == nil {
			late = fmt.Sprintf("; marked only after the next run began: %q", strings.TrimSpace(string(b)))
		}
		return notMarkedWhy(rdir, holder, runJobs, dead, late)
	}
	if len(f) >= 3 && f[2] == "none" {
		return "marked-none", fmt.Sprintf(" (held by dead job %s; mark %q)", holder.job, strings.TrimSpace(string(b)))
	}
	by := ""
	if len(f) > 0 {
		by = f[0]
	}
	if _, d := dead[by]; d {
		return "rescuer-killed", fmt.Sprintf(" (held by dead job %s; rescuer %s killed)", holder.job, by)
	}
	return "rescue-dropped", fmt.Sprintf(" (held by dead job %s; mark %q; rescuer's output:\n%s)", holder.job, strings.TrimSpace(string(b)), rescueLines(dir, by))
}

// recordedInterrupted reports whether sf's job recorded case id
// interrupted: it caught a signal (scancel, its time limit), which rescue
// leaves to the resubmit (README, Rescue: what rescue does not do).
func recordedInterrupted(sf *statusFile, id int64) bool {
	for _, st := range sf.starts {
		if st.id == id && st.end == byte(status.KindInterrupted) && !st.withdrawn {
			return true
		}
	}
	return false
}

// notMarkedWhy is leftWhy's answer for a case the dead job holder held
// when the next run began, with no rescue mark for its file made before
// (late says if one was made after): "not-marked-warden-killed" if the
// run's warden (in its rescue directory rdir) was among the killed,
// "not-marked-all-killed" if every job of the run (runJobs) was killed or
// had ended when the holder died, else "not-marked".
func notMarkedWhy(rdir string, holder *statusFile, runJobs []*statusFile, dead deaths, late string) (string, string) {
	warden := wardenIn(rdir)
	if _, d := dead[warden]; d {
		return "not-marked-warden-killed", fmt.Sprintf(" (held by dead job %s; warden %s killed%s)", holder.job, warden, late)
	}
	// Every job of the run was killed, or had ended, when the
	// holder died.
	all := true
	died := float64(dead[holder.job].UnixMilli()) / 1e3
	for _, sf := range runJobs {
		if _, d := dead[sf.job]; !d && !(sf.quit && sf.quitAt < died) {
			all = false
		}
	}
	if all {
		return "not-marked-all-killed", fmt.Sprintf(" (held by dead job %s%s)", holder.job, late)
	}
	return "not-marked", fmt.Sprintf(" (held by dead job %s; warden %q%s)", holder.job, warden, late)
}

// rescueLines are the lines of job's output about rescue and its end.
func rescueLines(dir, job string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "OUTPUT", "slurm-"+job+".out"))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "rescue") || strings.Contains(l, "warden") || strings.Contains(l, "exiting") || strings.Contains(l, "stays") {
			out = append(out, "    "+l)
		}
	}
	return strings.Join(out, "\n")
}

// rescuedFrom reports, per run, the cases a rescue started from each
// status file (from=): run -> file -> cases.
func rescuedFrom(files map[string]*statusFile) map[int]map[string]map[int64]bool {
	out := map[int]map[string]map[int64]bool{}
	for _, sf := range files {
		for _, s := range sf.starts {
			if s.from == "" {
				continue
			}
			if out[sf.run] == nil {
				out[sf.run] = map[string]map[int64]bool{}
			}
			if out[sf.run][s.from] == nil {
				out[sf.run][s.from] = map[int64]bool{}
			}
			out[sf.run][s.from][s.id] = true
		}
	}
	return out
}

// wardenOf is the job ID in the run's newest warden mark, "" if none.
func wardenOf(dir string, run int) string {
	return wardenIn(filepath.Join(dir, "MISC", layout.RescueDir(run)))
}

// wardenIn is the job ID in the newest warden mark of the rescue directory
// rdir (layout.Warden), "" if none.
func wardenIn(rdir string) string {
	ents, _ := os.ReadDir(rdir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	k, _ := layout.Warden(names)
	if k == 0 {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(rdir, layout.WardenMark(k, "")))
	return strings.TrimSpace(string(b))
}

// median and maximum of xs (0, 0 if empty).
func medianMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return m, s[len(s)-1]
}

// rescueFigure is the rescue part of a figure line.
func rescueFigure(rescue bool, c counts) string {
	if !rescue {
		return fmt.Sprintf("rescue=off cases=%d left-for-resubmit=%d runs-not-ended=%d", c.Cases, c.Left, c.NotEnded)
	}
	med, mx := medianMax(c.RerunAfter)
	var why []string
	for _, k := range leftKinds {
		why = append(why, fmt.Sprintf("left-%s=%d", k, c.LeftWhy[k]))
	}
	return fmt.Sprintf("rescue=on cases=%d rescued-in-run=%d left-for-resubmit=%d %s rescue-dups=%d rescues-dropped=%d rescues-after-next-run=%d runs-not-ended=%d death-to-rerun-median=%.1fs death-to-rerun-max=%.1fs reruns-timed=%d",
		c.Cases, c.Rescued, c.Left, strings.Join(why, " "), c.RescueDups, c.Dropped, c.LateRescues, c.NotEnded, med, mx, len(c.RerunAfter))
}

// leftKinds are leftWhy's answers, in the order of the figure lines.
var leftKinds = []string{"unclaimed", "interrupted", "unrecorded-claim", "not-marked-warden-killed", "not-marked-all-killed", "not-marked", "rescuer-killed", "rescue-dropped", "marked-none", "other"}
