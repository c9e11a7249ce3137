package sge

import (
	"fmt"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// Directive is the prefix of the job-script lines that carry qsub's
// options.
const Directive = "#$"

// Script is Grid Engine's job-script dialect (backend.Script): the
// run-time is h_rt in the -l resource requests of the #$ lines (#$ -l
// h_rt=01:00:00, #$ -l h_vmem=2G,h_rt=3600), in Grid Engine's time format
// (ParseTime).
type Script struct{}

var _ backend.Script = Script{}

// System implements backend.Script.
func (Script) System() string { return "Grid Engine" }

// RunTime implements backend.Script. It reads h_rt, the hard run-time
// limit, from the -l resource requests of the #$ lines, as qsub reads
// them: a #$ line counts only from the line's first column; the words of
// each line are options (-l LIST, where LIST is name=value,...), -hard and
// -soft apply to the requests after them on the same line only, and the
// last h_rt requested is the one the job gets.
//
// s_rt is not read: it is a soft limit (the job is sent SIGUSR1 when it
// passes, and killed the queue's notify time later; sge_queue_conf(5)),
// not the run-time farm plans with. A -soft h_rt is a preference of the
// scheduler's, no limit at all: it is an error, rather than a run-time farm
// would plan with and Grid Engine not keep.
func (Script) RunTime(lines []string) (rt backend.RunTime, ok bool, err error) {
	for i, line := range lines {
		rest, isDirective := strings.CutPrefix(line, Directive)
		if !isDirective {
			continue
		}
		// qsub drops the double quotes of a directive's words.
		fields := strings.Fields(strings.ReplaceAll(rest, `"`, ""))
		soft := false
		for j := 0; j < len(fields); j++ {
			switch fields[j] {
			case "-hard":
				soft = false
			case "-soft":
				soft = true
			case "-l":
				if j+1 == len(fields) {
					continue // qsub's error to give
				}
				j++
				val, found := hrtRequest(fields[j])
				if !found {
					continue
				}
				if soft {
					return rt, false, &backend.ScriptError{Line: i + 1, Msg: fmt.Sprintf("h_rt=%s is requested after -soft, which does not limit the job's run-time; request it as a hard limit: '#$ -l h_rt=%s'", val, val)}
				}
				d, err := ParseTime(val)
				if err != nil {
					return rt, false, &backend.ScriptError{Line: i + 1, Msg: fmt.Sprintf("bad run-time h_rt=%s (%v); use a Grid Engine time such as h_rt=01:00:00 (hours:minutes:seconds) or h_rt=3600 (seconds)", val, err)}
				}
				rt, ok = backend.RunTime{Limit: d, Line: i + 1, Value: val}, true
			}
		}
	}
	return rt, ok, nil
}

// hrtRequest returns the value of h_rt in a -l resource list
// ("h_vmem=2G,h_rt=1:00:00"), the last one if it is given twice.
func hrtRequest(list string) (val string, found bool) {
	for _, req := range strings.Split(list, ",") {
		if name, v, _ := strings.Cut(req, "="); name == "h_rt" {
			val, found = v, true
		}
	}
	return val, found
}

// RunTimeLine implements backend.Script.
func (Script) RunTimeLine(d time.Duration) string {
	return fmt.Sprintf("#$ -l h_rt=%02d:%02d:00", int(d.Hours()), int(d.Minutes())%60)
}

// Missing implements backend.Script.
func (Script) Missing(name string) string {
	return fmt.Sprintf("Job run-time qsub argument (-l h_rt) is missing in %s. Exiting", name)
}

// RunTimeArg implements backend.Script: -l LIST with h_rt in LIST.
func (Script) RunTimeArg(args []string) (i int, given, use string) {
	for i, a := range args {
		if a == "-l" && i+1 < len(args) {
			if _, ok := hrtRequest(args[i+1]); ok {
				return i, "-l " + args[i+1], "#$ -l h_rt="
			}
		}
	}
	return -1, "", ""
}
