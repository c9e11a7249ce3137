package status

// What a farm cost, in core-hours (issue 38), as the status records say:
// each meta-job's allocation (its CPUs × its lifetime) and the part of it
// its cases' attempts were busy, by how they ended.

// Usage is what one meta-job (one status file) used.
type Usage struct {
	// Begin and End are its lifetime as its records say (Unix seconds):
	// its earliest record (a case's start, an unfit case, its exit; the
	// header has no time, and its claims come milliseconds before its
	// first start) and its latest, or the time of the reading (Options.Now)
	// while its job runs. 0 and 0 when it recorded nothing with a time.
	Begin, End float64
	// CPUs is what it was given: its header's cpus=, else 1 (a file of
	// a farm older than issue 13 says none: one case at a time).
	CPUs int
	// Busy is the core-seconds of its attempts, by the State they are in:
	// each attempt's seconds (its E or I record's; so far, while it runs)
	// × the CPUs it was given (its start record's cpus= list, else the
	// whole job's, as farm query's busy lines count them). An attempt
	// whose meta-job died under it (no end record) has no known duration
	// and counts nowhere; unfit ones did not run.
	Busy [len(stateNames)]float64
}

// Allocated is the meta-job's core-seconds: its CPUs × its lifetime.
func (u *Usage) Allocated() float64 { return float64(u.CPUs) * max(0, u.End-u.Begin) }

// BusyTotal is the core-seconds of all its attempts.
func (u *Usage) BusyTotal() float64 {
	t := 0.0
	for _, b := range u.Busy {
		t += b
	}
	return t
}

// usage adds attempt a of file f to p's Usage of the file.
func (p *fileParser) usage(f *File, a *Attempt) {
	u := &p.use
	if a.Start > 0 && (u.Begin == 0 || a.Start < u.Begin) {
		u.Begin = a.Start
	}
	if a.State == Unfit || a.Untimed || a.NoEnd {
		return
	}
	secs := max(a.Seconds, 0)
	u.End = max(u.End, a.Start+secs)
	u.Busy[a.State] += secs * float64(f.CPUsGiven(a))
}

// endUsage completes the Usage of file f once read: its CPUs, and its
// lifetime from its records (and up to now while its job may run).
func (p *fileParser) endUsage(f *File, live bool, now float64) Usage {
	u := p.use
	u.CPUs = max(f.Capacity.CPUs, 1)
	if f.Quitted && f.QuitAt > 0 && (u.Begin == 0 || f.QuitAt < u.Begin) {
		u.Begin = f.QuitAt
	}
	if f.First > 0 && (u.Begin == 0 || f.First < u.Begin) {
		u.Begin = f.First
	}
	u.End = max(u.End, f.Last)
	if live && u.Begin > 0 {
		u.End = max(u.End, now)
	}
	if f.META || u.Begin == 0 {
		return Usage{CPUs: u.CPUs} // no time known: META's "ID STATUS" lines
	}
	return u
}
