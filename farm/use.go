package farm

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/farm-hpc/farm/report"
	"github.com/farm-hpc/farm/status"
	"github.com/farm-hpc/farm/tablefmt"
)

// What farm query makes of what the cases used (issue 38): how much of
// the CPUs they were given the succeeded cases keep busy, how their peak
// memory compares with the mem= they declare, and, when far below, what
// to declare instead. From the summary of farm query's one reading of the
// status files (status.Summary.EachUsed) and, for mem=, table.dat's #FARM
// parts (memTable).

// minAdviceCases is how many cases farm query's advice rests on, at least.
const minAdviceCases = 20

// CPUUse is how much of the CPUs they were given the cases that succeeded
// used: those given the most common number of CPUs (Given; the largest of
// equally common ones), Cases of them with their CPU time known, the
// median of their CPU time ÷ wall time (MedianUsed: the CPUs they kept
// busy, to the thousandth), and what farm query suggests (null: nothing).
type CPUUse struct {
	Given      int     `json:"given"`
	Cases      int64   `json:"cases"`
	MedianUsed float64 `json:"median_used"`
	Suggest    *string `json:"suggest"`
}

// MemUse is how the peak memory of the cases compares with the mem= they
// declare in table.dat: those that declare the most common mem=
// (DeclaredMiB), Cases of them with their peak known (any outcome), its
// median (to the MiB) and the largest (and its case), and what farm query
// suggests (null: nothing).
type MemUse struct {
	DeclaredMiB     int64   `json:"declared_mib"`
	Cases           int64   `json:"cases"`
	MedianPeakBytes int64   `json:"median_peak_bytes"`
	MaxPeakBytes    int64   `json:"max_peak_bytes"`
	MaxPeakCase     int64   `json:"max_peak_case"`
	Suggest         *string `json:"suggest"`
}

// useMode is how a farm gives its cases CPUs, which decides what to
// change to give them fewer: SIMPLE mode's jobs hold one case each (ask
// the batch system for fewer), WHOLE_NODE mode shares a node's CPUs out
// between NWHOLE loops (more loops), else the #FARM part's cpus=.
type useMode struct {
	simple, wholeNode bool
	nwhole            int
}

// counts counts values (quantized) for an exact median.
type counts map[int64]int64

// median is the lower median of the values counted, n of them.
func (c counts) median(n int64) int64 {
	keys := make([]int64, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	seen := int64(0)
	for _, k := range keys {
		if seen += c[k]; 2*seen >= n {
			return k
		}
	}
	return 0
}

type cpuGroup struct {
	n    int64
	used counts // CPU time ÷ wall time, in thousandths
}

type memGroup struct {
	n            int64
	peaks        counts // MiB
	max, maxCase int64  // the largest peak (KiB), and its case
}

// useAdvice is farm query's CPUUse and MemUse of the cases of sum, mem=
// as mem says (nil: none declared), and its advice, a line each.
func useAdvice(sum *status.Summary, mem *memTable, mode useMode) (*CPUUse, *MemUse, []string) {
	cpus := map[int]*cpuGroup{}
	mems := map[int64]*memGroup{}
	sum.EachUsed(func(u status.Used) {
		if u.State == status.Succeeded && u.HasCPU && !u.NoSeconds && u.Seconds > 0 {
			g := cpus[u.CPUs]
			if g == nil {
				g = &cpuGroup{used: counts{}}
				cpus[u.CPUs] = g
			}
			g.n++
			g.used[int64(math.Round(u.CPU/u.Seconds*1000))]++
		}
		if mib := mem.lookup(u.ID); mib > 0 && u.RSS > 0 {
			g := mems[mib]
			if g == nil {
				g = &memGroup{peaks: counts{}}
				mems[mib] = g
			}
			g.n++
			g.peaks[u.RSS>>10]++
			if u.RSS > g.max || u.RSS == g.max && u.ID < g.maxCase {
				g.max, g.maxCase = u.RSS, u.ID
			}
		}
	})
	var advice []string
	c := cpuUse(cpus)
	if line := c.advise(mode); line != "" {
		advice = append(advice, line)
	}
	m := memUse(mems)
	if line := m.advise(); line != "" {
		advice = append(advice, line)
	}
	return c, m, advice
}

// cpuUse is the CPUUse of the most common group; nil if none.
func cpuUse(groups map[int]*cpuGroup) *CPUUse {
	given := modal(groups, func(g *cpuGroup) int64 { return g.n })
	g := groups[given]
	if g == nil {
		return nil
	}
	return &CPUUse{Given: given, Cases: g.n, MedianUsed: float64(g.used.median(g.n)) / 1000}
}

// memUse is the MemUse of the most common group; nil if none.
func memUse(groups map[int64]*memGroup) *MemUse {
	mib := modal(groups, func(g *memGroup) int64 { return g.n })
	g := groups[mib]
	if g == nil {
		return nil
	}
	return &MemUse{DeclaredMiB: mib, Cases: g.n, MedianPeakBytes: g.peaks.median(g.n) << 20, MaxPeakBytes: g.max << 10, MaxPeakCase: g.maxCase}
}

// modal is the key of the group with the most cases (n), the largest key
// among equally many; the zero key if there is none.
func modal[K int | int64, G any](groups map[K]G, n func(G) int64) K {
	var best K
	bestN := int64(0)
	for k, g := range groups {
		if c := n(g); c > bestN || c == bestN && k > best {
			best, bestN = k, c
		}
	}
	return best
}

// advise sets c's suggestion and returns farm query's line of it, when
// enough cases (minAdviceCases) given more than one CPU keep busy less
// than half of them: enough CPUs for their median use, rounded up (the
// cpus= of their #FARM part; in SIMPLE mode, the CPUs each job asks for;
// in WHOLE_NODE mode, the NWHOLE that gives each loop about as many).
// "" when there is nothing to advise.
func (c *CPUUse) advise(mode useMode) string {
	if c == nil || c.Cases < minAdviceCases || c.Given <= 1 || 2*c.MedianUsed >= float64(c.Given) {
		return ""
	}
	need := max(int(math.Ceil(c.MedianUsed-1e-9)), 1)
	var s, how string
	switch {
	case mode.simple:
		s = fmt.Sprintf("%d CPUs a job", need)
		how = fmt.Sprintf("ask the batch system for %d CPUs a job in job_script.sh (SIMPLE mode: each job runs one case)", need)
	case mode.wholeNode:
		nwhole := min(mode.nwhole*c.Given/need, maxNWhole)
		if nwhole <= mode.nwhole {
			return ""
		}
		s = fmt.Sprintf("NWHOLE=%d", nwhole)
		how = fmt.Sprintf("consider NWHOLE=%d in config (now %d: more loops, about %d CPUs each)", nwhole, mode.nwhole, need)
	default:
		s = fmt.Sprintf("cpus=%d", need)
		how = fmt.Sprintf("consider #FARM cpus=%d on their lines (a meta-job then runs more of them at once)", need)
	}
	c.Suggest = &s
	return fmt.Sprintf("Advice: cases use %s of the %d CPUs each is given (the median of %d succeeded cases' CPU time ÷ wall time): %s",
		strconv.FormatFloat(c.MedianUsed, 'g', 2, 64), c.Given, c.Cases, how)
}

// advise sets m's suggestion and returns farm query's line of it, when
// enough cases (minAdviceCases) that declare the same mem= all peak below
// half of it: the largest peak × 1.5, rounded up to a tidy size (tidyMiB),
// a mem= that holds every peak seen. "" when there is nothing to advise.
func (m *MemUse) advise() string {
	if m == nil || m.Cases < minAdviceCases || 2*m.MaxPeakBytes >= m.DeclaredMiB<<20 {
		return ""
	}
	want := tidyMiB((m.MaxPeakBytes*3/2 + 1<<20 - 1) >> 20)
	if want >= m.DeclaredMiB {
		return ""
	}
	s := "mem=" + report.MemText(want)
	m.Suggest = &s
	return fmt.Sprintf("Advice: cases peak at %s at most (case %d; median %s) of the mem=%s each declares (%d cases): consider %s (the largest peak × 1.5, rounded up)",
		fmtKiB(nil, m.MaxPeakBytes>>10), m.MaxPeakCase, fmtKiB(nil, m.MedianPeakBytes>>10), report.MemText(m.DeclaredMiB), m.Cases, s)
}

// tidyMiB is the least tidy size of at least mib MiB (at least 1): a
// power of 2, or 3 times one (1, 2, 3, 4, 6, 8, 12, ..., 384, 512, 768,
// 1024, 1536, ...), as mem= says it ("768M", "1536M", "2G").
func tidyMiB(mib int64) int64 {
	for p := int64(1); ; p *= 2 {
		if p >= mib {
			return p
		}
		if 3*p/2 >= mib && p >= 2 {
			return 3 * p / 2
		}
	}
}

// memTable is the mem= table.dat's cases declare, in MiB: runs of
// consecutive IDs that declare the same, 16 bytes a run (one for a table
// whose cases all declare the same, in order; one a case at worst).
type memTable struct {
	runs []memRun
}

type memRun struct {
	from int64
	n    uint32
	mib  uint32
}

// readMemTable reads the mem= of the cases of the numbered table at path;
// nil if none declares one.
func readMemTable(path string) (*memTable, error) {
	t := &memTable{}
	err := tablefmt.EachNeeds(path, func(id int64, n tablefmt.Needs) error {
		if n.MemMB <= 0 {
			return nil
		}
		mib := uint32(min(n.MemMB, math.MaxUint32))
		if k := len(t.runs) - 1; k >= 0 && t.runs[k].mib == mib && t.runs[k].n < math.MaxUint32 {
			switch r := &t.runs[k]; id {
			case r.from + int64(r.n):
				r.n++
				return nil
			case r.from - 1: // a table in descending order
				r.from--
				r.n++
				return nil
			}
		}
		t.runs = append(t.runs, memRun{from: id, n: 1, mib: mib})
		return nil
	})
	if err != nil || len(t.runs) == 0 {
		return nil, err
	}
	sort.Slice(t.runs, func(i, j int) bool { return t.runs[i].from < t.runs[j].from })
	return t, nil
}

// lookup is the mem= case id declares, in MiB; 0 if none (or t is nil).
func (t *memTable) lookup(id int64) int64 {
	if t == nil {
		return 0
	}
	i := sort.Search(len(t.runs), func(i int) bool { return t.runs[i].from > id }) - 1
	if i < 0 || id-t.runs[i].from >= int64(t.runs[i].n) {
		return 0
	}
	return int64(t.runs[i].mib)
}

// memOf is lookup as report.Input takes it: nil when t is.
func (t *memTable) memOf() func(int64) int64 {
	if t == nil {
		return nil
	}
	return t.lookup
}
