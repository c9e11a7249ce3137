package status

import (
	"slices"
	"strconv"
	"time"
)

// Placement is where a case ran inside its meta-job: its loop and
// the CPUs and GPUs it was given (none when not managed).
type Placement struct {
	Loop int      // 1..; 0: not said
	CPUs []int    // CPU numbers it was bound to
	GPUs []string // devices it was given (CUDA_VISIBLE_DEVICES)
	// Retry is, for a start that retries the case after it failed in
	// the same run (RETRIES), which retry it is: 1 for its second attempt
	// in the run, written "attempt=2 why=retry"; 0 for its first attempt.
	Retry int
	// Why is why a start with Retry > 0 was made, written why=WHY:
	// "retry" if empty (RETRIES), "rescue" for the case a dead meta-job
	// was running, run again by the one that rescued its cases, "timeout"
	// for a case that ran past its time limit (RETRY_TIMEOUTS).
	Why string
	// From is, for a case rescued from a dead meta-job, that job's status
	// file's name ("status.JOBID"), written from=NAME.
	From string
	// Nodes is, in a job of several nodes, the nodes the case was given,
	// in Slurm's compressed form ("node[1-2]"), written nodes=LIST.
	Nodes string
	// Framed says the case's output is kept apart (OUTPUT=job): Out and
	// Err are where its bytes start in its loop's files of standard
	// output and error (layout.CaseOutput), written out=N err=N; they
	// run to where the next start of the loop's says, or to the file's
	// end. Each starts with a line "==> case ID <==" if the case wrote
	// to it.
	Framed   bool
	Out, Err int64
}

// WhyRescue is the why= of a start that runs again the case a dead
// meta-job was running when it died.
const WhyRescue = "rescue"

// WhyTimeout is the why= of a start that runs again, in the same run, a
// case that ran past its time limit (RETRY_TIMEOUTS).
const WhyTimeout = "timeout"

// Capacity is what a meta-job packs its cases into, said in its status
// file's header (cpus=N gpus=N): farm query shows how busy it is.
type Capacity struct {
	CPUs, GPUs int
}

// MaxCPU is the largest CPU number a status record holds: a cpus= list
// with a larger one is damage (it would expand to that many numbers).
// StartAt leaves out CPU numbers below 0 or above it.
const MaxCPU = 1<<16 - 1

// StartAt records that case id started at t, placed at p.
func (w *Writer) StartAt(id int64, t time.Time, p Placement) error {
	w.buf = appendStartAt(w.buf, id, t, w.host, p)
	return w.flushSync()
}

// Unfit records that the meta-job took case id at t and did not start it,
// and why (it needs more than the job has, or more time than it has
// left): the case is left for the next run.
func (w *Writer) Unfit(id int64, t time.Time, reason string) error {
	w.buf = appendUnfit(w.buf, id, t, reason)
	return w.Flush()
}

// appendStartAt appends an S record with the fields of p that are not
// zero or empty: "S ID START HOST loop=N cpus=LIST gpus=LIST attempt=N
// why=WHY from=NAME nodes=LIST out=N err=N". HOST is
// written "-" if it is empty and fields follow it (an empty HOST would
// make the first of them read as HOST).
func appendStartAt(b []byte, id int64, t time.Time, host string, p Placement) []byte {
	b = appendStart(b, id, t, host)
	b = b[:len(b)-1] // the '\n'
	n := len(b)
	if p.Loop > 0 {
		b = append(b, " loop="...)
		b = strconv.AppendInt(b, int64(p.Loop), 10)
	}
	if m := len(b); len(p.CPUs) > 0 {
		b = appendCPUs(append(b, " cpus="...), p.CPUs)
		if len(b) == m+len(" cpus=") {
			b = b[:m] // no CPU in range
		}
	}
	if m := len(b); len(p.GPUs) > 0 {
		b = appendGPUs(append(b, " gpus="...), p.GPUs)
		if len(b) == m+len(" gpus=") {
			b = b[:m] // no GPU with a name
		}
	}
	if p.Retry > 0 {
		b = append(b, " attempt="...)
		b = strconv.AppendInt(b, int64(p.Retry)+1, 10)
		why := p.Why
		if why == "" {
			why = "retry"
		}
		b = append(b, " why="...)
		b = appendLine(b, oneField(why))
	}
	if p.From != "" {
		b = append(b, " from="...)
		b = append(b, oneField(p.From)...)
	}
	if p.Nodes != "" {
		b = append(b, " nodes="...)
		b = append(b, oneField(p.Nodes)...)
	}
	if p.Framed && p.Out >= 0 && p.Err >= 0 {
		b = strconv.AppendInt(append(b, " out="...), p.Out, 10)
		b = strconv.AppendInt(append(b, " err="...), p.Err, 10)
	}
	if len(b) > n && host == "" {
		b = slices.Insert(b, n, '-')
	}
	return append(b, '\n')
}

// appendCPUs appends cpus as a compact list ("0-3,8"), in ascending order,
// each once; numbers below 0 or above MaxCPU are left out.
func appendCPUs(b []byte, cpus []int) []byte {
	if !slices.IsSorted(cpus) {
		cpus = slices.Sorted(slices.Values(cpus))
	}
	first := true
	for i := 0; i < len(cpus); {
		lo := cpus[i]
		j := i + 1
		if lo < 0 || lo > MaxCPU {
			i = j
			continue
		}
		hi := lo
		for j < len(cpus) && (cpus[j] == hi || cpus[j] == hi+1) && cpus[j] <= MaxCPU {
			hi = cpus[j]
			j++
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendInt(b, int64(lo), 10)
		if hi > lo {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(hi), 10)
		}
		i = j
	}
	return b
}

// appendGPUs appends gpus separated by commas, each as one field of a
// list: its blanks, line breaks and commas written '_'. Empty names are
// left out.
func appendGPUs(b []byte, gpus []string) []byte {
	first := true
	for _, g := range gpus {
		if g == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		for i := 0; i < len(g); i++ {
			c := g[i]
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',' {
				c = '_'
			}
			b = append(b, c)
		}
	}
	return b
}

// appendUnfit appends a U record; reason's line breaks are written as
// blanks.
func appendUnfit(b []byte, id int64, t time.Time, reason string) []byte {
	b = append(b, 'U', ' ')
	b = strconv.AppendInt(b, id, 10)
	b = append(b, ' ')
	b = appendTime(b, t)
	b = append(b, ' ')
	b = appendLine(b, reason)
	return append(b, '\n')
}

// checkCPUs reports whether v is a list of CPUs as appendCPUs writes it:
// "N" and "N-M" items (decimal digits, N <= M <= MaxCPU) separated by
// commas, each above the one before. An empty v is no CPU.
func checkCPUs(v []byte) bool {
	prev := -1
	for i := 0; i < len(v); {
		lo, j, ok := cpuAt(v, i)
		if !ok || lo <= prev {
			return false
		}
		hi := lo
		if j < len(v) && v[j] == '-' {
			if hi, j, ok = cpuAt(v, j+1); !ok || hi < lo {
				return false
			}
		}
		prev = hi
		if j < len(v) {
			if v[j] != ',' || j == len(v)-1 {
				return false
			}
			j++
		}
		i = j
	}
	return true
}

// cpuAt reads the CPU number at v[i:]: decimal digits, at most MaxCPU.
func cpuAt(v []byte, i int) (n, end int, ok bool) {
	from := i
	for ; i < len(v) && v[i]-'0' <= 9; i++ {
		n = n*10 + int(v[i]-'0')
		if n > MaxCPU {
			return 0, i, false
		}
	}
	return n, i, i > from
}

// checkGPUs reports whether v is a list of GPUs as appendGPUs writes it:
// non-empty names separated by commas. An empty v is no GPU.
func checkGPUs(v []byte) bool {
	if len(v) == 0 {
		return true
	}
	if v[0] == ',' || v[len(v)-1] == ',' {
		return false
	}
	for i := 1; i < len(v); i++ {
		if v[i] == ',' && v[i-1] == ',' {
			return false
		}
	}
	return true
}

// ParseCPUs expands a cpus= list ("0-3,8") into CPU numbers, in ascending
// order; it reports false for a list that ParseRecord would refuse.
func ParseCPUs(v []byte) ([]int, bool) {
	if !checkCPUs(v) {
		return nil, false
	}
	var out []int
	for i := 0; i < len(v); {
		lo, j, _ := cpuAt(v, i)
		hi := lo
		if j < len(v) && v[j] == '-' {
			hi, j, _ = cpuAt(v, j+1)
		}
		for c := lo; c <= hi; c++ {
			out = append(out, c)
		}
		i = j + 1
	}
	return out, true
}

// ParseGPUs splits a gpus= list ("0,1") into device names; it reports
// false for a list that ParseRecord would refuse.
func ParseGPUs(v []byte) ([]string, bool) {
	if !checkGPUs(v) {
		return nil, false
	}
	var out []string
	for i := 0; i < len(v); {
		j := i
		for j < len(v) && v[j] != ',' {
			j++
		}
		out = append(out, string(v[i:j]))
		i = j + 1
	}
	return out, true
}

// Placement returns where an S record says its case ran (its loop=,
// cpus=, gpus= and nodes= fields; zero if it has none). It allocates the
// lists.
func (r *Record) Placement() Placement {
	p := Placement{Loop: r.Loop}
	p.CPUs, _ = ParseCPUs(r.CPUs)
	p.GPUs, _ = ParseGPUs(r.GPUs)
	p.Nodes = string(r.Nodes)
	p.Framed, p.Out, p.Err = r.Framed, r.Out, r.Err
	return p
}

// AppendCaseHeader appends the line that comes before case id's first
// byte in a file of OUTPUT=job (Placement's Framed): "==> case ID <==".
func AppendCaseHeader(b []byte, id int64) []byte {
	b = strconv.AppendInt(append(b, "==> case "...), id, 10)
	return append(b, " <==\n"...)
}
