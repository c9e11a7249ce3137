package status

// Used is what one case's decisive attempt (see Case) used, and the CPUs
// it was given, as its records say: what sizing a case's needs looks at
// (farm query's advice).
type Used struct {
	ID    int64
	State State
	// Seconds is its wall time; NoSeconds: not known (0).
	Seconds   float64
	NoSeconds bool
	// RSS is its peak resident memory in KiB (0: not said); CPU its CPU
	// time in seconds (HasCPU: said).
	RSS    int64
	CPU    float64
	HasCPU bool
	// CPUs is how many CPUs it was given: those its start record names
	// (cpus=), else its meta-job's whole (its header's cpus=, else 1), as
	// the core-hours count them (File.CPUsGiven).
	CPUs int
}

// EachUsed calls fn for every case whose decisive attempt's record says
// what it used (its peak memory, its CPU time or both), in no particular
// order. It reads only what Load kept: no status file again.
func (s *Summary) EachUsed(fn func(Used)) {
	for _, p := range s.cases.order {
		u := p.use
		if u == nil {
			continue
		}
		col := p.cols
		for i := range u.rss {
			if u.rss[i] == 0 && u.cpu[i] == 0 {
				continue
			}
			fn(s.used(p.n<<pageBits|int64(i), col.state[i], col.secs[i], col.job[i], u.rss[i], u.cpu[i]))
		}
	}
	for id, fu := range s.cases.farUse {
		fc := s.cases.far[id]
		fn(s.used(id, fc.state, fc.secs, fc.job, fu[0], fu[1]))
	}
}

// used is the Used of case id from what the summary keeps of it.
func (s *Summary) used(id int64, st State, secs float32, w uint32, rss, cpu uint32) Used {
	u := Used{ID: id, State: st, Seconds: seconds(secs), NoSeconds: isNaN(secs), CPUs: s.cpusGiven(w)}
	var c Case
	caseUse(&c, rss, cpu)
	u.RSS, u.CPU, u.HasCPU = c.RSS, c.CPU, c.HasCPU
	return u
}

// cpusGiven is how many CPUs the attempt of job bytes w (see Summary) was
// given: its placement's CPUs, else its job's whole, else 1.
func (s *Summary) cpusGiven(w uint32) int {
	if w == 0 {
		return 1
	}
	if n := uint32(len(s.jobRun)); w > n {
		if c := len(s.notes[s.wheres[w-n-1].note].place.CPUs); c > 0 {
			return c
		}
	}
	return max(s.Jobs[s.jobOf(w)].Capacity.CPUs, 1)
}

// CPUsGiven is how many CPUs attempt a of f was given: the CPUs its start
// record names (cpus=), else the whole meta-job's (its header's cpus=,
// else 1: a case that declares no needs, outside WHOLE_NODE mode, holds
// the whole job). It is what the core-hours count an attempt's CPUs by.
func (f *File) CPUsGiven(a *Attempt) int {
	whole := max(f.Capacity.CPUs, 1)
	if a.note == 0 {
		return whole
	}
	for int(a.note) > len(f.noteCPUs) {
		n := 0
		if nt := parseNote(f.notes[len(f.noteCPUs)]); nt.reason == "" {
			n = len(nt.place.CPUs)
		}
		f.noteCPUs = append(f.noteCPUs, n)
	}
	if n := f.noteCPUs[a.note-1]; n > 0 {
		return n
	}
	return whole
}
