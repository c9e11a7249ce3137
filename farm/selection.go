package farm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/status"
)

// Selection is what 'farm resubmit' runs again: its options --failed,
// --interrupted, --timed-out, --never-run, --unfit, --crashed and --cases. The zero
// Selection is every case that did not succeed and is not crashed, as
// META's resubmit (and -auto's) but for the crash limit.
//
// A case is crashed when its meta-job died while it ran (status.Case's
// Crashes) at least MaxCrashes times (MAX_CRASHES) and it has not
// succeeded since: only --crashed, or its ID given with --cases alone,
// runs it again. With state options only, a case is chosen when its
// farm-wide state is one of them (crashed counting as a state of its own).
// With --cases only, the cases with those IDs are chosen whatever their
// state, succeeded and crashed ones too (to run a case again whose output
// was lost, say). With both, a case must be in one of the states and among
// the IDs.
type Selection struct {
	States  []status.State // farm-wide states chosen; none: any (with Cases) or all but succeeded
	Crashed bool           // --crashed: the crashed cases are chosen
	Cases   []IDRange      // IDs chosen; none: any
	Given   []string       // the options as given, for messages
	// MaxCrashes is the farm's MAX_CRASHES (0: no case is ever crashed),
	// set by the command from the config.
	MaxCrashes int
}

// IDRange is the case IDs From to To, both included.
type IDRange struct{ From, To int64 }

// SelectionFlag is one of resubmit's options that choose cases: Name
// without dashes, Value the value it takes ("" for a switch), State the
// state it chooses if ByState (not --crashed and --cases).
type SelectionFlag struct {
	Name, Value, Usage string
	State              status.State
	ByState            bool
}

// SelectionFlags are resubmit's options that choose cases, the one list
// Parse reads them by and farm resubmit's help and completion show.
var SelectionFlags = []SelectionFlag{
	{Name: "failed", State: status.Failed, ByState: true, Usage: "run the failed cases"},
	{Name: "interrupted", State: status.Interrupted, ByState: true, Usage: "run the interrupted cases"},
	{Name: "timed-out", State: status.TimedOut, ByState: true, Usage: "run the cases that timed out (ran past their time limit)"},
	{Name: "never-run", State: status.NeverRan, ByState: true, Usage: "run the cases that never ran"},
	{Name: "unfit", State: status.Unfit, ByState: true, Usage: "run the unfit cases"},
	{Name: "crashed", Usage: "run the crashed cases (MAX_CRASHES, config), left out otherwise"},
	{Name: "cases", Value: "IDS", Usage: "run the cases with these `IDS`, whatever their state: e.g. 3,17-20"},
}

// Parse reads a resubmit option at args[i] into sel (as --name or -name,
// and --cases=IDS): it returns how many arguments it took (0: not a
// selection option) or an error for a selection option given wrong.
func (sel *Selection) Parse(args []string, i int) (int, error) {
	a := args[i]
	for _, o := range SelectionFlags {
		name := "--" + o.Name
		if o.Value == "" && (a == name || a == name[1:]) {
			switch {
			case o.ByState:
				if !slices.Contains(sel.States, o.State) {
					sel.States = append(sel.States, o.State)
				}
				sel.Given = append(sel.Given, name)
			case !sel.Crashed: // --crashed
				sel.Crashed = true
				sel.Given = append(sel.Given, name)
			}
			return 1, nil
		}
	}
	var spec string
	took := 1
	switch {
	case a == "--cases" || a == "-cases":
		if i+1 >= len(args) {
			return 0, Userf("--cases needs the IDs of the cases: e.g. --cases 3,17-20")
		}
		spec, took = args[i+1], 2
	case strings.HasPrefix(a, "--cases="):
		spec = strings.TrimPrefix(a, "--cases=")
	default:
		return 0, nil
	}
	rs, err := parseIDRanges(spec)
	if err != nil {
		return 0, err
	}
	sel.Cases = append(sel.Cases, rs...)
	sel.Given = append(sel.Given, "--cases "+spec)
	return took, nil
}

// parseIDRanges reads case IDs as "3,17-20": IDs and ranges, separated by
// commas.
func parseIDRanges(spec string) ([]IDRange, error) {
	var rs []IDRange
	bad := func(part, why string) error {
		return Userf("--cases %s: %q %s; give case IDs (positive numbers) and ranges, separated by commas: e.g. --cases 3,17-20", spec, part, why)
	}
	for _, part := range strings.Split(spec, ",") {
		p := strings.TrimSpace(part)
		if p == "" {
			return nil, bad(part, "is empty")
		}
		lo, hi, isRange := strings.Cut(p, "-")
		from, err := strconv.ParseInt(lo, 10, 64)
		if err != nil || from < 1 {
			return nil, bad(p, "is not a case ID")
		}
		to := from
		if isRange {
			if to, err = strconv.ParseInt(hi, 10, 64); err != nil || to < 1 {
				return nil, bad(p, "is not a range of case IDs")
			}
			if to < from {
				return nil, bad(p, "ends before it starts")
			}
		}
		rs = append(rs, IDRange{from, to})
	}
	return rs, nil
}

// IsZero reports whether no selection option was given.
func (sel Selection) IsZero() bool {
	return len(sel.States) == 0 && len(sel.Cases) == 0 && !sel.Crashed
}

// String is the options as given ("--failed --cases 3,17-20").
func (sel Selection) String() string { return strings.Join(sel.Given, " ") }

// keeps reports whether the selection chooses case c.
func (sel Selection) keeps(c status.Case) bool {
	crashed := sel.isCrashed(c)
	switch {
	case sel.IsZero():
		return c.State != status.Succeeded && !crashed
	case !sel.hasID(c.ID):
		return false
	case len(sel.States) == 0 && !sel.Crashed:
		return true // --cases alone: whatever the state
	case crashed:
		return sel.Crashed
	}
	return slices.Contains(sel.States, c.State)
}

// isCrashed reports whether case c is crashed: its meta-job died while it
// ran at least MaxCrashes times, and it neither succeeded since nor runs.
func (sel Selection) isCrashed(c status.Case) bool {
	return sel.MaxCrashes > 0 && c.Crashes >= sel.MaxCrashes && c.State != status.Succeeded && c.State != status.Running
}

// label is what chose calls case c: "crashed", or its state.
func (sel Selection) label(c status.Case) string {
	if sel.isCrashed(c) {
		return "crashed"
	}
	return c.State.String()
}

// hasID reports whether id is among the IDs chosen (any, if none were).
func (sel Selection) hasID(id int64) bool {
	if len(sel.Cases) == 0 {
		return true
	}
	for _, r := range sel.Cases {
		if r.From <= id && id <= r.To {
			return true
		}
	}
	return false
}

// mark records in hit (one per range of Cases) the ranges that hold id.
func (sel Selection) mark(id int64, hit []bool) {
	for i, r := range sel.Cases {
		if r.From <= id && id <= r.To {
			hit[i] = true
		}
	}
}

// missing returns an error naming the first ID or range chosen by --cases
// in which table has no case (hit, from mark), or nil.
func (sel Selection) missing(hit []bool, table string) error {
	for i, r := range sel.Cases {
		if hit[i] {
			continue
		}
		if r.From == r.To {
			return Userf("--cases: %s has no case %d; nothing was submitted ('farm Status' lists the cases)", table, r.From)
		}
		return Userf("--cases: %s has no case from %d to %d; nothing was submitted ('farm Status' lists the cases)", table, r.From, r.To)
	}
	return nil
}

// chose says what a resubmit chose, by Label: "the 3 case(s) chosen by
// --failed --cases 1-9 (2 failed, 1 interrupted)". crashedOut is how many
// crashed cases it left out.
func (sel Selection) chose(n int, by map[string]int, crashedOut int) string {
	out := ""
	if crashedOut > 0 {
		out = fmt.Sprintf("; %d crashed case(s) left out (their meta-job died under them MAX_CRASHES=%d times): 'farm resubmit --crashed' runs them", crashedOut, sel.MaxCrashes)
	}
	if sel.IsZero() {
		if by["timed out"] > 0 {
			return fmt.Sprintf("the %d case(s) that failed, were interrupted, timed out, were unfit or never ran%s", n, out)
		}
		return fmt.Sprintf("the %d case(s) that failed, were interrupted, were unfit or never ran%s", n, out)
	}
	var parts []string
	for _, s := range []string{"failed", "interrupted", "timed out", "crashed", "unfit", "never ran", "succeeded", "running"} {
		if by[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[s], s))
		}
	}
	return fmt.Sprintf("the %d case(s) chosen by %s (%s)%s", n, sel, strings.Join(parts, ", "), out)
}
