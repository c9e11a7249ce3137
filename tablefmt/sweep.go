package tablefmt

import (
	"fmt"
	"strconv"
	"strings"
)

// A parameter sweep (issue 38): one command template and its parameters,
// whose product is the cases, as META users make table.dat with nested
// shell loops. 'farm add --sweep' and 'farm init --sweep' hand its lines
// to NumberAdded, which checks each as any line that enters a farm.
//
//	simulate --T {T} --seed {seed}   T=0.5,1,2 seed=1..100
//
// makes 300 cases, in the order of nested loops over the parameters as
// given, the last innermost (varying fastest): T=0.5 seed=1, T=0.5
// seed=2, ..., T=0.5 seed=100, T=1 seed=1, ...
//
// Values: a comma-separated list whose items are values as written or
// integer ranges FROM..TO (both included; descending when FROM > TO),
// FROM..TO..STEP (STEP above 0), zero-padded to the wider bound when a
// bound is written with a leading zero (001..100: 001, 002, ..., 100), as
// bash's {001..100}. A value is put in the line as one shell word: as
// written if it is made of letters, digits and _ - . / : = + @ % only,
// else in single quotes (a single quote inside escaped), so that bash hands the
// command exactly that value, whatever it holds (spaces, $, ;, *, quotes).

// MaxSweep is the most cases one sweep may make.
const MaxSweep = 10_000_000

// Sweep is a parsed parameter sweep.
type Sweep struct {
	parts  []string // the template's text between placeholders: len(slots)+1
	slots  []int    // the parameter of each placeholder, by index in params
	quoted []bool   // whether each placeholder is inside quotes of the template
	params []sweepParam
	cases  int64
}

// sweepParam is one parameter: its name, as given, and its values.
type sweepParam struct {
	name, arg string
	items     []sweepItem
	n         int64 // its number of values
}

// sweepItem is one item of a parameter's list: a value (n == 1, range
// false) or an integer range.
type sweepItem struct {
	value, word       string // the value, and as a shell word (shellWord)
	rng               bool
	from, step, width int64 // step negative for a descending range
	n                 int64
}

// Cases is how many cases the sweep makes.
func (s *Sweep) Cases() int64 { return s.cases }

// ParseSweep parses a sweep: its command template and its parameters,
// NAME=VALUES each. Its errors are one line each, saying what is wrong
// and what to do.
func ParseSweep(template string, args []string) (*Sweep, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("--sweep %q has no parameter: give one or more NAME=VALUES after it, e.g. T=0.5,1,2 seed=1..100", template)
	}
	s := &Sweep{}
	names := map[string]int{}
	for _, a := range args {
		p, err := parseParam(a)
		if err != nil {
			return nil, err
		}
		if _, dup := names[p.name]; dup {
			return nil, fmt.Errorf("--sweep: parameter %s is given twice; give all its values once (%s=A,B,C)", p.name, p.name)
		}
		names[p.name] = len(s.params)
		s.params = append(s.params, p)
	}
	if err := s.parseTemplate(template, names); err != nil {
		return nil, err
	}
	if err := s.countCases(); err != nil {
		return nil, err
	}
	for _, p := range s.params {
		if err := p.unique(); err != nil {
			return nil, err
		}
	}
	return s, s.checkQuoted()
}

// countCases counts the cases, and refuses more than MaxSweep.
func (s *Sweep) countCases() error {
	s.cases = 1
	total := 1.0 // for the message: it may overflow an int64
	over := false
	for _, p := range s.params {
		total *= float64(p.n)
		if over = over || p.n > MaxSweep/s.cases; !over {
			s.cases *= p.n
		}
	}
	if over {
		return fmt.Errorf("--sweep: %s make %.0f cases, more than the %d one sweep may add: split it (e.g. one 'farm add --sweep' per value of %s), or write the lines with a program and 'farm add FILE'",
			s.product(), total, MaxSweep, s.params[0].name)
	}
	return nil
}

// product names the sweep's parameters with their counts: "T (3 values)
// × seed (100 values)".
func (s *Sweep) product() string {
	var b []string
	for _, p := range s.params {
		b = append(b, fmt.Sprintf("%s (%d values)", p.name, p.n))
	}
	return strings.Join(b, " × ")
}

// parseParam parses one NAME=VALUES argument.
func parseParam(arg string) (sweepParam, error) {
	name, list, ok := strings.Cut(arg, "=")
	if !ok {
		return sweepParam{}, fmt.Errorf("--sweep: %q is not a parameter: give NAME=VALUES, e.g. T=0.5,1,2 or seed=1..100 (the template is one argument: quote it)", arg)
	}
	if !isName(name) {
		return sweepParam{}, fmt.Errorf("--sweep: %q: a parameter's name is letters, digits and _, not starting with a digit (T, seed, n_iter)", name)
	}
	p := sweepParam{name: name, arg: arg}
	if strings.ContainsFunc(arg, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		p.arg = strconv.Quote(arg) // messages stay one line
	}
	if list == "" {
		return p, fmt.Errorf("--sweep: %s= gives no value: give a list (%s=0.5,1,2) or a range (%s=1..100)", name, name, name)
	}
	for i, v := range strings.Split(list, ",") {
		it, err := parseItem(name, p.arg, v, i+1)
		if err != nil {
			return p, err
		}
		p.items = append(p.items, it)
		p.n += it.n
		if p.n > MaxSweep {
			return p, fmt.Errorf("--sweep: %s has more than %d values, the most one sweep may add: split it into several 'farm add --sweep'", name, MaxSweep)
		}
	}
	return p, nil
}

// parseItem parses the kth item v of parameter name's list (arg).
func parseItem(name, arg, v string, k int) (sweepItem, error) {
	if v == "" {
		return sweepItem{}, fmt.Errorf("--sweep: %s: value %d is empty; remove the extra comma (a value cannot hold a comma: put such values in a file for 'farm add FILE')", arg, k)
	}
	for i, c := range []byte(v) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return sweepItem{}, fmt.Errorf("--sweep: %s: value %d holds a control character (byte 0x%02x at column %d); a value must be text on one line", arg, k, c, i+1)
		}
	}
	if looksLikeRange(v) {
		return parseRange(name, v)
	}
	return sweepItem{value: v, word: shellWord(v), n: 1}, nil
}

// looksLikeRange reports whether v is meant as an integer range: it holds
// ".." and starts with a digit, or a sign and a digit ("../data" is a
// value).
func looksLikeRange(v string) bool {
	t := strings.TrimLeft(v, "+-")
	return strings.Contains(v, "..") && t != "" && t[0] >= '0' && t[0] <= '9' && len(v)-len(t) <= 1
}

// rangeBound is the largest bound of a range: its count and values stay
// far from overflowing.
const rangeBound = 1e15

// parseRange parses FROM..TO or FROM..TO..STEP.
func parseRange(name, v string) (sweepItem, error) {
	bad := func(why string) error {
		return fmt.Errorf("--sweep: %s=%s: %s; a range is FROM..TO or FROM..TO..STEP of whole numbers (1..100, 001..100, 0..100..5); list other values: %s=0.1,0.2,0.5", name, v, why, name)
	}
	f := strings.Split(v, "..")
	if len(f) != 2 && len(f) != 3 {
		return sweepItem{}, bad("not a range")
	}
	var n [3]int64
	for i, s := range f {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil || x > rangeBound || x < -rangeBound {
			return sweepItem{}, bad(fmt.Sprintf("%q is not a whole number of at most 15 digits", s))
		}
		n[i] = x
	}
	it := sweepItem{rng: true, from: n[0], step: 1}
	if len(f) == 3 {
		if n[2] <= 0 {
			return sweepItem{}, bad("the step must be a whole number above 0")
		}
		it.step = n[2]
	}
	span := n[1] - n[0]
	if span < 0 {
		span, it.step = -span, -it.step
	}
	it.n = span/abs(it.step) + 1
	if padded(f[0]) || padded(f[1]) {
		it.width = int64(max(len(f[0]), len(f[1])))
	}
	return it, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// padded reports whether a bound is written with a leading zero: 001, -01.
func padded(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return len(s) > 1 && s[0] == '0'
}

// isName reports whether s is a parameter's name.
func isName(s string) bool {
	for i, c := range []byte(s) {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// valueAt is item it's ith value.
func (it *sweepItem) valueAt(i int64) string {
	if !it.rng {
		return it.value
	}
	x := it.from + i*it.step
	if it.width > 0 {
		return fmt.Sprintf("%0*d", it.width, x)
	}
	return strconv.FormatInt(x, 10)
}

// value is the parameter's ith value (0-based).
func (p *sweepParam) value(i int64) string {
	for k := range p.items {
		it := &p.items[k]
		if i < it.n {
			return it.valueAt(i)
		}
		i -= it.n
	}
	return ""
}

// unique refuses a parameter that gives a value twice: it would make the
// same cases twice.
func (p *sweepParam) unique() error {
	if len(p.items) < 2 {
		return nil // a single range never repeats a value
	}
	seen := make(map[string]struct{}, p.n)
	for i := int64(0); i < p.n; i++ {
		v := p.value(i)
		if _, dup := seen[v]; dup {
			return fmt.Errorf("--sweep: %s gives the value %q twice, which would make the same cases twice; give each value once", p.arg, v)
		}
		seen[v] = struct{}{}
	}
	return nil
}
