package report

import (
	"cmp"
	"math"
	"slices"

	"github.com/farm-hpc/farm/status"
)

// What the cases used (issue 38), from the rss= and cpu= of the records
// of the attempts that ended: the distribution of their peak memory
// (against the mem= they declare, where they do) and of their CPU
// efficiency, and the cases furthest off. Build keeps nothing of it per
// attempt: each of its readers (one per CPU) counts into three histograms
// of logarithmic bins (sketch: at most 1,408 bins, 11 KiB each), with the
// values themselves while they are at most maxExact (32 KiB each), and
// keeps four lists of UseCount cases.

// UseCount is how many cases each list of the cases furthest off holds.
const UseCount = 5

// The kinds of a Dist: what its values are.
const (
	KindRatio      = "ratio"      // peak memory ÷ the mem= the case declares
	KindRSS        = "rss"        // peak memory, in bytes
	KindEfficiency = "efficiency" // CPU time ÷ (wall time × CPUs given)
)

// Use is what the attempts that ended used, as their records say.
// Attempts whose records say nothing of it (farms before issue 38) are
// left out.
type Use struct {
	// Memory is the distribution of their peak memory: as a share of the
	// mem= their case declares (KindRatio) when some case that says its
	// peak declares one, else in bytes (KindRSS).
	Memory Dist `json:"memory"`
	// Undeclared counts the attempts that say their peak and whose case
	// declares no mem=: not in a KindRatio Memory.
	Undeclared int64 `json:"undeclared"`
	// CPU is the distribution of their CPU efficiency: CPU time ÷ (wall
	// time × the CPUs they were given).
	CPU Dist `json:"cpu"`
	// The cases furthest off, UseCount each: Over, the highest peaks
	// above their mem= (as a share of it; the largest peaks, with a
	// KindRSS Memory); Under, the lowest below it (none with KindRSS);
	// LeastCPU, the lowest CPU efficiencies (the longest first among
	// equal ones).
	Over     []UseCase `json:"over"`
	Under    []UseCase `json:"under"`
	LeastCPU []UseCase `json:"least_cpu"`
}

// Dist is a distribution: Count values, Zero of them 0 (counted in the
// first bin), in bins between Edges (logarithmic), and its quantiles by
// nearest rank: exact for at most maxExact values; beyond, to within
// 1.1% (the middle of the bin of 32 to a doubling that holds the value),
// but for Min and Max, which are exact.
type Dist struct {
	Kind   string    `json:"kind"` // "" when no attempt says
	Count  int64     `json:"count"`
	Zero   int64     `json:"zero"`
	Edges  []float64 `json:"edges"`
	Counts []int64   `json:"counts"`
	Min    float64   `json:"min"`
	P10    float64   `json:"p10"`
	Median float64   `json:"median"`
	P90    float64   `json:"p90"`
	Max    float64   `json:"max"`
}

// UseCase is one attempt of a list of Use: what it used and was given,
// and Value, what it is listed by (its peak ÷ mem=, its peak in bytes, or
// its CPU efficiency).
type UseCase struct {
	Attempt
	RSS   int64   `json:"rss_bytes"` // 0: not said
	MemMB int64   `json:"mem_mib"`   // mem= its case declares; 0: none
	CPU   float64 `json:"cpu_seconds"`
	NoCPU bool    `json:"no_cpu,omitempty"` // its record says no CPU time
	CPUs  int     `json:"cpus"`
	Value float64 `json:"value"`
}

// perDoubling is how many bins a sketch has to a doubling.
const perDoubling = 32

// maxExact is how many values a sketch keeps, for exact quantiles.
const maxExact = 4096

// sketch counts positive values in logarithmic bins, perDoubling to a
// doubling from 2^lo to 2^hi (values beyond in the end bins), and 0 apart.
type sketch struct {
	lo, hi   int
	bins     []int64 // made at the first value
	exact    []float64
	inexact  bool // more than maxExact values: exact is nil
	zero     int64
	count    int64
	min, max float64
}

func newSketch(lo, hi int) sketch { return sketch{lo: lo, hi: hi, min: math.Inf(1)} }

// bin is the index of v's bin (v > 0).
func (s *sketch) bin(v float64) int {
	i := int(math.Floor(math.Log2(v)*perDoubling)) - s.lo*perDoubling
	return min(max(i, 0), (s.hi-s.lo)*perDoubling-1)
}

func (s *sketch) add(v float64) {
	if v < 0 || math.IsNaN(v) {
		return
	}
	s.count++
	s.min, s.max = min(s.min, v), max(s.max, v)
	s.keep(v)
	if v == 0 {
		s.zero++
		return
	}
	if s.bins == nil {
		s.bins = make([]int64, (s.hi-s.lo)*perDoubling)
	}
	s.bins[s.bin(v)]++
}

// keep keeps v while the sketch has at most maxExact values.
func (s *sketch) keep(v ...float64) {
	if s.inexact {
		return
	}
	if len(s.exact)+len(v) > maxExact {
		s.exact, s.inexact = nil, true
		return
	}
	s.exact = append(s.exact, v...)
}

func (s *sketch) merge(o *sketch) {
	if o.count == 0 {
		return
	}
	if o.inexact {
		s.exact, s.inexact = nil, true
	}
	s.keep(o.exact...)
	if s.bins == nil && o.bins != nil {
		s.bins = make([]int64, len(o.bins))
	}
	for i, n := range o.bins {
		s.bins[i] += n
	}
	s.zero += o.zero
	s.count += o.count
	s.min, s.max = min(s.min, o.min), max(s.max, o.max)
}

// edge is the lower edge of bin i (len(bins): the upper edge of the last).
func (s *sketch) edge(i int) float64 { return math.Exp2(float64(s.lo*perDoubling+i) / perDoubling) }

// quantile is the q quantile by nearest rank: 0 if it is a zero, else the
// geometric middle of its bin, within Min and Max.
// With the values kept, it is the value of that rank.
func (s *sketch) quantile(q float64) float64 {
	rank := max(int64(math.Ceil(q*float64(s.count)-1e-9)), 1)
	if !s.inexact {
		slices.Sort(s.exact)
		return s.exact[rank-1]
	}
	if rank <= s.zero {
		return 0
	}
	seen := s.zero
	for i, n := range s.bins {
		if seen += n; seen >= rank {
			return min(max(math.Sqrt(s.edge(i)*s.edge(i+1)), s.min), s.max)
		}
	}
	return s.max
}

// maxDistBins is how many bins a Dist is drawn in at most.
const maxDistBins = 40

// dist is s as a Dist of kind, its values multiplied by scale: bins of
// 1/32 of a doubling or as many times more (a power of 2) as keeps them to
// maxDistBins, over the bins that hold values; the zeros in the first.
func (s *sketch) dist(kind string, scale float64) Dist {
	d := Dist{Kind: kind, Count: s.count, Zero: s.zero, Edges: []float64{}, Counts: []int64{}}
	if s.count == 0 {
		d.Kind = ""
		return d
	}
	d.Min, d.P10, d.Median, d.P90, d.Max = scale*s.min, scale*s.quantile(0.1), scale*s.quantile(0.5), scale*s.quantile(0.9), scale*s.max
	i0, i1 := -1, -1
	for i, n := range s.bins {
		if n > 0 {
			i1 = i
			if i0 < 0 {
				i0 = i
			}
		}
	}
	if i0 < 0 { // zeros only: one bin, up to the smallest value drawn
		d.Edges, d.Counts = []float64{0, scale}, []int64{s.zero}
		return d
	}
	step := 1
	for (i1/step-i0/step+1) > maxDistBins && step < len(s.bins) {
		step *= 2
	}
	for b := i0 / step * step; b <= i1; b += step {
		var n int64
		for i := b; i < min(b+step, len(s.bins)); i++ {
			n += s.bins[i]
		}
		d.Edges = append(d.Edges, scale*s.edge(b))
		d.Counts = append(d.Counts, n)
	}
	d.Edges = append(d.Edges, scale*s.edge(i1/step*step+step))
	d.Counts[0] += s.zero
	return d
}

// useAcc is what one of Build's readers counts of what the attempts used.
type useAcc struct {
	rss, ratio, eff             sketch // KiB; peak ÷ mem=; CPU efficiency
	undeclared                  int64
	over, under, peaks, leastCP []UseCase
}

func newUseAcc() *useAcc {
	return &useAcc{rss: newSketch(0, 44), ratio: newSketch(-20, 10), eff: newSketch(-20, 10)}
}

// The orders of the lists: the highest share of mem= (or peak) first, the
// lowest share first, the lowest efficiency (then the longest) first;
// then by case ID and start.
var (
	higher = func(a, b UseCase) int { return cmp.Or(cmp.Compare(b.Value, a.Value), byID(a, b)) }
	lower  = func(a, b UseCase) int { return cmp.Or(cmp.Compare(a.Value, b.Value), byID(a, b)) }
	wasted = func(a, b UseCase) int {
		return cmp.Or(cmp.Compare(a.Value, b.Value), cmp.Compare(b.Seconds, a.Seconds), byID(a, b))
	}
)

func byID(a, b UseCase) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Start, b.Start)) }

// offerUse adds c to the list top in the order by, keeping UseCount.
func offerUse(top []UseCase, c UseCase, by func(a, b UseCase) int) []UseCase {
	if len(top) == UseCount && by(c, top[len(top)-1]) >= 0 {
		return top
	}
	i, _ := slices.BinarySearchFunc(top, c, by)
	top = slices.Insert(top, i, c)
	return top[:min(len(top), UseCount)]
}

// add counts what attempt a of file h (which ended, in state st) used,
// if its record says; mem is the mem= its case declares (MiB, 0: none).
func (u *useAcc) add(h *status.File, a *status.Attempt, st uint8, mem int64) {
	use := a.Use
	if use.RSS <= 0 && !use.HasCPU {
		return
	}
	c := UseCase{Attempt: Attempt{ID: a.ID, Seconds: round3(max(a.Seconds, 0)), State: states[st], Status: a.Status, Start: round3(a.Start), Job: h.Job},
		RSS: use.RSS << 10, MemMB: mem, CPU: use.CPU.Seconds(), NoCPU: !use.HasCPU, CPUs: h.CPUsGiven(a)}
	// The host (a copy of the record's) only for a case a list takes.
	offer := func(top []UseCase, c UseCase, by func(a, b UseCase) int) []UseCase {
		if len(top) == UseCount && by(c, top[len(top)-1]) >= 0 {
			return top
		}
		c.Host = h.Host
		if len(a.Host) > 0 {
			c.Host = string(a.Host)
		}
		return offerUse(top, c, by)
	}
	if use.RSS > 0 {
		u.rss.add(float64(use.RSS))
		c.Value = float64(c.RSS)
		u.peaks = offer(u.peaks, c, higher)
		if mem > 0 {
			c.Value = float64(use.RSS) / float64(mem<<10)
			u.ratio.add(c.Value)
			if c.Value > 1 {
				u.over = offer(u.over, c, higher)
			} else if c.Value < 1 {
				u.under = offer(u.under, c, lower)
			}
		} else {
			u.undeclared++
		}
	}
	if use.HasCPU && a.Seconds > 0 {
		c.Value = c.CPU / (a.Seconds * float64(c.CPUs))
		u.eff.add(c.Value)
		u.leastCP = offer(u.leastCP, c, wasted)
	}
}

// merge adds o to u.
func (u *useAcc) merge(o *useAcc) {
	u.rss.merge(&o.rss)
	u.ratio.merge(&o.ratio)
	u.eff.merge(&o.eff)
	u.undeclared += o.undeclared
	for _, l := range []struct {
		to   *[]UseCase
		from []UseCase
		by   func(a, b UseCase) int
	}{{&u.over, o.over, higher}, {&u.under, o.under, lower}, {&u.peaks, o.peaks, higher}, {&u.leastCP, o.leastCP, wasted}} {
		for _, c := range l.from {
			*l.to = offerUse(*l.to, c, l.by)
		}
	}
}

// result is the Use counted.
func (u *useAcc) result() Use {
	r := Use{CPU: u.eff.dist(KindEfficiency, 1), LeastCPU: nonNil(u.leastCP), Over: []UseCase{}, Under: []UseCase{}}
	if u.ratio.count > 0 {
		r.Memory, r.Undeclared = u.ratio.dist(KindRatio, 1), u.undeclared
		r.Over, r.Under = u.over, u.under
	} else {
		r.Memory = u.rss.dist(KindRSS, 1024)
		r.Over = nonNil(u.peaks)
	}
	return r
}

func nonNil(l []UseCase) []UseCase {
	if l == nil {
		return []UseCase{}
	}
	return l
}

// Any reports whether some attempt says what it used.
func (u Use) Any() bool { return u.Memory.Count > 0 || u.CPU.Count > 0 }
