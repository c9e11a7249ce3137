package fakepbs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/farm-hpc/farm/backend"
)

// Script is the engine's job-script dialect: #PBS -l walltime=HH:MM:SS.
type Script struct{}

var _ backend.Script = Script{}

// System implements backend.Script.
func (Script) System() string { return "PBS" }

// RunTime implements backend.Script: the last walltime of the #PBS -l
// lines.
func (Script) RunTime(lines []string) (rt backend.RunTime, ok bool, err error) {
	for i, line := range lines {
		rest, found := strings.CutPrefix(line, "#PBS")
		if !found {
			continue
		}
		fields := strings.Fields(rest)
		for j := 0; j+1 < len(fields); j++ {
			if fields[j] != "-l" {
				continue
			}
			for _, req := range strings.Split(fields[j+1], ",") {
				if v, found := strings.CutPrefix(req, "walltime="); found {
					d, err := parseWalltime(v)
					if err != nil {
						return rt, false, &backend.ScriptError{Line: i + 1, Msg: fmt.Sprintf("bad run-time walltime=%s (%v); use HH:MM:SS", v, err)}
					}
					rt, ok = backend.RunTime{Limit: d, Line: i + 1, Value: v}, true
				}
			}
		}
	}
	return rt, ok, nil
}

// parseWalltime reads [[HH:]MM:]SS.
func parseWalltime(s string) (time.Duration, error) {
	var d time.Duration
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return 0, fmt.Errorf("%d fields", len(parts))
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || strings.TrimLeft(p, "0123456789") != "" {
			return 0, fmt.Errorf("bad number %q", p)
		}
		d = d*60 + time.Duration(n)*time.Second
	}
	return d, nil
}

// RunTimeLine implements backend.Script.
func (Script) RunTimeLine(d time.Duration) string {
	return fmt.Sprintf("#PBS -l walltime=%02d:%02d:00", int(d.Hours()), int(d.Minutes())%60)
}

// Missing implements backend.Script.
func (Script) Missing(name string) string {
	return fmt.Sprintf("Job run-time qsub argument (-l walltime) is missing in %s. Exiting", name)
}

// RunTimeArg implements backend.Script: -l LIST with walltime in LIST.
func (Script) RunTimeArg(args []string) (i int, given, use string) {
	for i, a := range args {
		if a == "-l" && i+1 < len(args) && strings.Contains(args[i+1], "walltime=") {
			return i, "-l " + args[i+1], "#PBS -l walltime="
		}
	}
	return -1, "", ""
}
