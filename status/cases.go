package status

import (
	"math"
	"sort"
)

// The outcomes of the cases are kept in pages of pageSize consecutive case
// IDs, 15 bytes a case, made as the cases of their range are first recorded
// and found by page number. A range that holds few recorded cases has no
// page: its cases are kept one by one in a map (sparse IDs). So memory grows
// with the number of cases recorded, not with the largest ID: a farm of
// cases 1..N costs 13 bytes a case, as one array would; a case whose ID is
// 2,000,000,000 costs one page (120 KiB) or a map entry; cases with IDs
// spread thinly over the int64s cost some 40 bytes each once loaded (a few
// times that while the map grows).
const (
	pageBits = 13
	pageSize = 1 << pageBits // IDs a page holds: 15 x 8 KiB, no size-class rounding
	pageMask = pageSize - 1
	// promoteAt is how many sparse cases a range must hold to get a page:
	// a page then costs at most 120 bytes a case, the order of what the map
	// costs.
	promoteAt = pageSize / 8
	// firstScan is how many sparse cases are kept before the first look for
	// ranges that deserve a page.
	firstScan = 4096
)

// pageCols are the outcomes of the cases of one page, by offset in the page.
type pageCols struct {
	state   [pageSize]State
	status  [pageSize]int32
	secs    [pageSize]float32
	job     [pageSize]uint32 // index into Summary.Jobs, +1 (0 = none)
	tries   [pageSize]uint8  // Case.Attempts, at most 255
	crashes [pageSize]uint8  // Case.Crashes, at most 255
}

// casePage is one page: the cases n*pageSize to n*pageSize+pageSize-1.
type casePage struct {
	n    int64
	cols *pageCols // allocated alone: 120 KiB, exactly 15 of the runtime's 8 KiB pages
	// use is what its cases used (their E records' rss= and cpu=), made
	// at the first case that says: a farm whose records say none costs
	// nothing more; one whose every case says costs 8 bytes a case more.
	use *pageUse
	// While loading: per run, one bit per case of the page started in that
	// run, to find the cases started twice in one run.
	started []runBits
}

// pageUse is what the cases of one page used, by offset in the page: 64
// KiB, exactly 8 of the runtime's 8 KiB pages.
type pageUse struct {
	rss [pageSize]uint32 // Case.RSS in KiB, at most 4 TiB (0: not known)
	cpu [pageSize]uint32 // Case.CPU in centiseconds, + 1 (0: not known)
}

// useOf encodes u as pageUse holds it.
func useOf(u Use) (rss, cpu uint32) {
	rss = uint32(min(max(u.RSS, 0), math.MaxUint32))
	if u.HasCPU {
		cpu = uint32(min(max(u.CPU.Milliseconds()/10, 0), math.MaxUint32-1)) + 1
	}
	return rss, cpu
}

// caseUse decodes what pageUse holds into c.
func caseUse(c *Case, rss, cpu uint32) {
	c.RSS = int64(rss)
	if cpu > 0 {
		c.CPU, c.HasCPU = float64(cpu-1)/100, true
	}
}

type runBits struct {
	run  int
	bits *[pageSize / 64]uint64
}

// start records a start of the case at offset i in run, and reports
// whether it had been started in that run before.
func (p *casePage) start(run, i int) bool {
	var bits *[pageSize / 64]uint64
	for _, rb := range p.started {
		if rb.run == run {
			bits = rb.bits
			break
		}
	}
	if bits == nil {
		bits = new([pageSize / 64]uint64)
		p.started = append(p.started, runBits{run, bits})
	}
	w, bit := i>>6, uint64(1)<<(i&63)
	had := bits[w]&bit != 0
	bits[w] |= bit
	return had
}

// setUse sets what the case at offset i used (as pageUse holds it),
// making the page's pageUse if need be.
func (p *casePage) setUse(i int, rss, cpu uint32) {
	if p.use == nil {
		if rss == 0 && cpu == 0 {
			return
		}
		p.use = new(pageUse)
	}
	p.use.rss[i], p.use.cpu[i] = rss, cpu
}

// setFarUse sets what far case id used (as pageUse holds it).
func (cs *caseStore) setFarUse(id int64, rss, cpu uint32) {
	if rss == 0 && cpu == 0 {
		delete(cs.farUse, id)
		return
	}
	if cs.farUse == nil {
		cs.farUse = map[int64][2]uint32{}
	}
	cs.farUse[id] = [2]uint32{rss, cpu}
}

// farCase is the outcome of a case of a range without a page.
type farCase struct {
	state State
	// startRun is, while loading, the run of the case's first start record,
	// +1 (0: none, or a run past 254); its starts in other runs are kept in
	// caseStore.farStarted. So a case started once costs no more.
	startRun uint8
	status   int32
	secs     float32
	job      uint32 // index into Summary.Jobs, +1
	tries    uint8  // Case.Attempts, at most 255
	crashes  uint8  // Case.Crashes, at most 255
}

// caseStore holds the outcome of every recorded case.
type caseStore struct {
	pages map[int64]*casePage
	last  *casePage // the page of the latest lookup, while loading
	// Pages from eagerLo to eagerHi are made at their first case, without
	// waiting for promoteAt: the table's IDs are known to be dense there.
	eager            bool
	eagerLo, eagerHi int64

	far        map[int64]farCase
	farUse     map[int64][2]uint32 // what far cases used, rss and cpu as pageUse's, of those that say
	farPeak    int                 // the most cases far held since it was last made anew
	farStarted map[runCase]bool    // starts of far cases but their first (farCase.startRun), while loading
	nextScan   int                 // len(far) at which to look for ranges to promote

	// Once loaded: the pages in order, a directory of them by page number
	// when they are dense enough for one (else pages serves), and the far
	// cases' IDs in order.
	order  []*casePage
	dir    []*casePage
	dirLo  int64
	farIDs []int64
}

// hint sets the range where pages are made at once, from a table of cases
// cases whose largest ID is maxID: the 2*cases IDs below maxID, where the
// IDs of a dense table lie (1..N, or any N IDs in a range of 2N). However
// the IDs lie, the pages made there cost at most 26 bytes a case of the
// table, plus two pages.
func (cs *caseStore) hint(maxID, cases int64) {
	if maxID <= 0 {
		return
	}
	lo := int64(0)
	if c := max(cases, 0); c < maxID/2 {
		lo = max(0, maxID-2*c-pageSize)
	}
	cs.eager, cs.eagerLo, cs.eagerHi = true, lo>>pageBits, maxID>>pageBits
}

// page returns the page that holds case id, made if its range is known to
// be dense; nil if the case is kept in far.
func (cs *caseStore) page(id int64) *casePage {
	n := id >> pageBits
	if p := cs.last; p != nil && p.n == n {
		return p
	}
	p := cs.pages[n]
	if p == nil {
		if !cs.eager || n < cs.eagerLo || n > cs.eagerHi {
			return nil
		}
		p = cs.newPage(n)
	}
	cs.last = p
	return p
}

func (cs *caseStore) newPage(n int64) *casePage {
	if cs.pages == nil {
		cs.pages = map[int64]*casePage{}
	}
	p := &casePage{n: n, cols: new(pageCols)}
	cs.pages[n] = p
	return p
}

// startedIn reports whether case id has a start recorded in run so far,
// changing nothing.
func (cs *caseStore) startedIn(id int64, run int) bool {
	if p := cs.page(id); p != nil {
		i := int(id & pageMask)
		for _, rb := range p.started {
			if rb.run == run {
				return rb.bits[i>>6]&(uint64(1)<<(i&63)) != 0
			}
		}
		return false
	}
	c, ok := cs.far[id]
	if !ok {
		return false
	}
	if run >= 0 && run < 255 && int(c.startRun) == run+1 {
		return true
	}
	return cs.farStarted[runCase{run, id}]
}

// farStart records a start in run of far case id, whose outcome is c, and
// reports whether it had been started in that run before.
func (cs *caseStore) farStart(c *farCase, id int64, run int) bool {
	if run >= 0 && run < 255 {
		switch int(c.startRun) {
		case 0:
			c.startRun = uint8(run + 1)
			return false
		case run + 1:
			return true
		}
	}
	k := runCase{run, id}
	if cs.farStarted == nil {
		cs.farStarted = map[runCase]bool{}
	}
	had := cs.farStarted[k]
	cs.farStarted[k] = true
	return had
}

// putFar sets far case id, and now and then moves the cases of ranges that
// have come to hold promoteAt of them to pages of their own.
func (cs *caseStore) putFar(id int64, c farCase) {
	if cs.far == nil {
		cs.far = map[int64]farCase{}
		cs.nextScan = firstScan
	}
	cs.far[id] = c
	if len(cs.far) > cs.farPeak {
		cs.farPeak = len(cs.far)
	}
	if len(cs.far) >= cs.nextScan {
		cs.promote()
	}
}

// promote gives a page to every range that holds promoteAt far cases and
// moves them there. It runs when far has doubled since the last time, so
// its cost per case is constant.
func (cs *caseStore) promote() {
	per := map[int64]int{}
	for id := range cs.far {
		per[id>>pageBits]++
	}
	moved := false
	for id, c := range cs.far {
		n := id >> pageBits
		if per[n] < promoteAt {
			continue
		}
		p := cs.pages[n]
		if p == nil {
			p = cs.newPage(n)
		}
		i := id & pageMask
		p.cols.state[i], p.cols.status[i], p.cols.secs[i], p.cols.job[i] = c.state, c.status, c.secs, c.job
		p.cols.tries[i], p.cols.crashes[i] = c.tries, c.crashes
		if u, ok := cs.farUse[id]; ok {
			p.setUse(int(i), u[0], u[1])
			delete(cs.farUse, id)
		}
		if c.startRun > 0 {
			p.start(int(c.startRun)-1, int(i))
		}
		delete(cs.far, id)
		moved = true
	}
	if moved {
		for k := range cs.farStarted {
			if p := cs.pages[k.id>>pageBits]; p != nil {
				p.start(k.run, int(k.id&pageMask))
				delete(cs.farStarted, k)
			}
		}
	}
	// Maps keep their size when emptied: make them anew once mostly empty.
	if len(cs.far) < cs.farPeak/4 {
		far := make(map[int64]farCase, len(cs.far))
		for id, c := range cs.far {
			far[id] = c
		}
		cs.far, cs.farPeak = far, len(far)
		started := make(map[runCase]bool, len(cs.farStarted))
		for k, v := range cs.farStarted {
			started[k] = v
		}
		cs.farStarted = started
	}
	cs.nextScan = max(firstScan, 2*len(cs.far))
}

// done ends the loading: it orders the pages and the far cases and drops
// what only loading needs.
func (cs *caseStore) done() {
	cs.last, cs.farStarted = nil, nil
	cs.order = make([]*casePage, 0, len(cs.pages))
	for _, p := range cs.pages {
		p.started = nil
		cs.order = append(cs.order, p)
	}
	sort.Slice(cs.order, func(i, j int) bool { return cs.order[i].n < cs.order[j].n })
	if k := len(cs.order); k > 0 {
		lo, hi := cs.order[0].n, cs.order[k-1].n
		if span := uint64(hi - lo); span < uint64(2*k+64) {
			cs.dirLo = lo
			cs.dir = make([]*casePage, span+1)
			for _, p := range cs.order {
				cs.dir[p.n-lo] = p
			}
		}
	}
	cs.farIDs = make([]int64, 0, len(cs.far))
	for id := range cs.far {
		cs.farIDs = append(cs.farIDs, id)
	}
	sort.Slice(cs.farIDs, func(i, j int) bool { return cs.farIDs[i] < cs.farIDs[j] })
}

// find returns the page of case id, or nil; for a loaded store.
func (cs *caseStore) find(id int64) *casePage {
	n := id >> pageBits
	if cs.dir != nil {
		if i := uint64(n - cs.dirLo); i < uint64(len(cs.dir)) {
			return cs.dir[i]
		}
		return nil
	}
	return cs.pages[n]
}

// inc8 is n+1, at most 255.
func inc8(n uint8) uint8 {
	if n < 255 {
		n++
	}
	return n
}

// seconds rounds a stored duration to the millisecond it was written with.
func seconds(s float32) float64 {
	if isNaN(s) {
		return 0 // not known: Case.NoSeconds
	}
	return math.Round(float64(s)*1000) / 1000
}

// isNaN reports whether s is a NaN: noSeconds, a duration not known.
func isNaN(s float32) bool { return s != s }
