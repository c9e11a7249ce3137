package status

// Leftovers is what one status file says its meta-job held and did not
// finish: read by the meta-job that rescues the cases of a dead one
// (metajob/rescue.go).
type Leftovers struct {
	Job     string // the header's job ID
	Run     int    // the header's run
	Restart int    // the header's incarnation
	// Open are the cases it started and did not end (no E or I record):
	// the cases it was running when it died.
	Open []OpenCase
	// Unstarted are the cases it claimed (C records) and never started
	// nor set aside as unfit (no S or U record after the claim), in the
	// order claimed.
	Unstarted []int64
	// Next is, for an unstarted case handed to it by a rescue after an
	// earlier attempt (a C record's next=), the attempt it is to be.
	Next map[int64]int
	// RescuedFrom are the status files (their names) whose cases it took
	// in a rescue: its C records' from=.
	RescuedFrom map[string]bool
	// Quitted: it exited by itself (a Q record), for QuitWhy (its why=).
	Quitted bool
	QuitWhy string
	// Undecided are its claims recorded before their commit (claim=) with
	// no record of their outcome: neither lost (lost=) nor shown won by a
	// start of one of their cases. The claim state decides them
	// (casetable.Store.ClaimWon); their cases are not in Unstarted.
	Undecided []NotedClaim
}

// NotedClaim is a claim recorded before its commit: its token and the
// cases it held and had not started.
type NotedClaim struct {
	Token string
	IDs   []int64
}

// OpenCase is a case started and not ended.
type OpenCase struct {
	ID      int64
	Start   float64
	Attempt int // which attempt in the run its start was: 1 for the first
}

// ReadLeftovers reads the status file at path for its Leftovers, with
// ReadFile's replay. Damaged lines are skipped; a line being written (no
// newline yet) is left out. An error opening or reading the file is
// returned; so is a directory in its place.
func ReadLeftovers(path string) (Leftovers, error) {
	f, err := openFile(path)
	if err != nil {
		return Leftovers{}, err
	}
	defer f.Close()
	rp := replay{fn: func(*File, *Attempt) error { return nil }, claims: &claims{}}
	if err := rp.read(f, nil); err != nil {
		return Leftovers{}, err
	}
	c := rp.claims
	l := Leftovers{Job: c.job, Run: c.run, Restart: c.restart, Next: c.next, Quitted: rp.file.Quitted, QuitWhy: rp.file.QuitWhy, RescuedFrom: c.from}
	for _, o := range rp.open { // unsettled: in the order started
		l.Open = append(l.Open, OpenCase{ID: o.id, Start: o.start, Attempt: max(o.attempt, 1)})
	}
	for _, tok := range c.tokens {
		var ids []int64
		for _, id := range c.noted[tok] {
			if c.held[id] && c.tokenOf[id] == tok {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			l.Undecided = append(l.Undecided, NotedClaim{Token: tok, IDs: ids})
		}
	}
	for _, id := range c.order {
		if _, undecided := c.tokenOf[id]; c.held[id] && !undecided {
			l.Unstarted = append(l.Unstarted, id)
			c.held[id] = false // once, if claimed twice
		}
	}
	return l, nil
}

// claims is what a replay keeps for Leftovers: the last header's job,
// run and incarnation, as written, and the cases claimed (C records) and
// not started nor unfit since.
type claims struct {
	job          string
	run, restart int
	held         map[int64]bool  // claimed and not started
	order        []int64         // as claimed; again if claimed again after its start
	next         map[int64]int   // the C records' next=, the last for an ID
	from         map[string]bool // the C records' from=
	// The claims recorded before their commit (claim=) whose outcome is not
	// known: their cases by token, in order; each case's token while so.
	noted   map[string][]int64
	tokens  []string
	tokenOf map[int64]string
}

// header replays a header record.
func (c *claims) header(r *Record) { c.job, c.run, c.restart = string(r.Job), r.Run, r.Restart }

// claimed replays a C record.
func (c *claims) claimed(r *Record) {
	ids, _ := ParseIDs(r.IDs)
	if len(r.From) > 0 {
		if c.from == nil {
			c.from = map[string]bool{}
		}
		c.from[string(r.From)] = true
	}
	if len(r.Lost) > 0 { // a claim= whose commit was lost: its cases are not held
		c.decided(string(r.Lost), false)
		return
	}
	if len(r.Claim) > 0 {
		tok := string(r.Claim)
		if c.noted == nil {
			c.noted, c.tokenOf = map[string][]int64{}, map[int64]string{}
		}
		c.noted[tok] = ids
		c.tokens = append(c.tokens, tok)
		for _, id := range ids {
			c.tokenOf[id] = tok
		}
	}
	if len(r.Next) > 0 {
		next, _ := ParseNext(r.Next)
		for id, n := range next {
			if c.next == nil {
				c.next = map[int64]int{}
			}
			c.next[id] = n
		}
	}
	if c.held == nil {
		c.held = map[int64]bool{}
	}
	for _, id := range ids {
		if !c.held[id] {
			c.held[id] = true
			c.order = append(c.order, id)
		}
	}
}

// started replays an S or U record of case id: it no longer holds it, and
// the claim it was noted in (claim=) committed.
func (c *claims) started(id int64) {
	delete(c.held, id)
	if tok, ok := c.tokenOf[id]; ok {
		c.decided(tok, true)
	}
}

// decided settles the noted claim tok: won, its cases stay held (those not
// started); lost, they are not.
func (c *claims) decided(tok string, won bool) {
	for _, id := range c.noted[tok] {
		if c.tokenOf[id] == tok {
			delete(c.tokenOf, id)
			if !won {
				delete(c.held, id)
			}
		}
	}
	delete(c.noted, tok)
}
