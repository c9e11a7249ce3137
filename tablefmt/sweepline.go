package tablefmt

import (
	"fmt"
	"io"
	"strings"
)

// A sweep's template: the command with a {NAME} where each parameter's
// value goes. A { that follows a $ (${HOME}) or a backslash (\{x}: bash
// reads a literal {x}) starts no placeholder, nor does one whose braces
// hold anything but a name ({1..3}, awk's '{print $1}').

// parseTemplate splits template at its placeholders, each a parameter of
// names (name -> index in s.params); every parameter must be used.
func (s *Sweep) parseTemplate(template string, names map[string]int) error {
	t := strings.TrimSpace(template)
	switch {
	case t == "":
		return fmt.Errorf("--sweep: the template is empty: give the command with a {NAME} where each value goes, e.g. --sweep 'simulate --T {T}' T=0.5,1,2")
	case t[0] == '#':
		return fmt.Errorf("--sweep %q: the template is a comment, not a command; give the command a case runs", template)
	}
	for i, c := range []byte(t) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return fmt.Errorf("--sweep: the template holds a control character (byte 0x%02x at column %d); a case is one line of text", c, i+1)
		}
	}
	used := make([]bool, len(s.params))
	var quoted []bool // the placeholders' quoting, in order
	last := 0
	err := scanPlaceholders(t, func(at, end int, name string, inQuotes bool) error {
		k, ok := names[name]
		if !ok {
			return fmt.Errorf("--sweep: {%s} in the template has no parameter: give it values (%s=1,2,3 or %s=1..10), or write \\{%s} for a literal {%s}", name, name, name, name, name)
		}
		used[k] = true
		s.parts = append(s.parts, t[last:at])
		s.slots = append(s.slots, k)
		quoted = append(quoted, inQuotes)
		last = end
		return nil
	})
	if err != nil {
		return err
	}
	s.parts = append(s.parts, t[last:])
	s.quoted = quoted
	for k, u := range used {
		if !u {
			p := s.params[k]
			return fmt.Errorf("--sweep: parameter %s (%s) is not used in the template: put {%s} where its value goes, or leave it out", p.name, p.arg, p.name)
		}
	}
	return nil
}

// scanPlaceholders calls fn with each placeholder {NAME} of t: where it
// starts and ends, its name, and whether it is inside quotes (as bash
// reads t: '...', "...", a backslash outside single quotes escaping the
// next character).
func scanPlaceholders(t string, fn func(at, end int, name string, inQuotes bool) error) error {
	var q byte // the quote t is inside at i, if any
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '\\' && q != '\'':
			i++ // the next character is escaped
		case (c == '\'' || c == '"') && (q == 0 || q == c):
			q ^= c // in, or out
		case c == '$' && i+1 < len(t) && t[i+1] == '{':
			i++ // ${VAR}: bash's
		case c == '{':
			j := strings.IndexByte(t[i:], '}')
			if j < 0 || !isName(t[i+1:i+j]) {
				continue
			}
			if err := fn(i, i+j+1, t[i+1:i+j], q != 0); err != nil {
				return err
			}
			i += j
		}
	}
	return nil
}

// checkQuoted refuses a placeholder inside quotes of the template whose
// parameter has a value farm must quote: quoted twice, it would not reach
// the command as given.
func (s *Sweep) checkQuoted() error {
	for i, k := range s.slots {
		if !s.quoted[i] {
			continue
		}
		p := &s.params[k]
		for _, it := range p.items {
			if !it.rng && it.word != it.value {
				return fmt.Errorf("--sweep: {%s} is inside quotes in the template, and its value %q needs quoting: remove the quotes around {%s}, as farm puts each value that needs it in quotes", p.name, it.value, p.name)
			}
		}
	}
	return nil
}

// shellWord is v as one word of a bash command line: as it is if every
// byte of it is a letter, a digit or one of _ - . / : = + @ %, else in
// single quotes (a single quote inside it closes them, is escaped with a
// backslash, and opens them again).
func shellWord(v string) string {
	for _, c := range []byte(v) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-./:=+@%", c) >= 0) {
			return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
		}
	}
	return v
}

// values returns the index of each parameter's value in case i (from 0),
// the last parameter varying fastest, in idx (one per parameter).
func (s *Sweep) values(i int64, idx []int64) {
	for k := len(s.params) - 1; k >= 0; k-- {
		n := s.params[k].n
		idx[k] = i % n
		i /= n
	}
}

// AppendLine appends case i's command line (from 0), without its newline.
func (s *Sweep) AppendLine(b []byte, i int64) []byte {
	idx := make([]int64, len(s.params))
	s.values(i, idx)
	return s.appendLine(b, idx)
}

func (s *Sweep) appendLine(b []byte, idx []int64) []byte {
	for j, k := range s.slots {
		b = append(b, s.parts[j]...)
		b = append(b, s.params[k].word(idx[k])...)
	}
	return append(b, s.parts[len(s.parts)-1]...)
}

// word is the parameter's ith value as a shell word.
func (p *sweepParam) word(i int64) string {
	for k := range p.items {
		it := &p.items[k]
		if i < it.n {
			if it.rng {
				return it.valueAt(i)
			}
			return it.word
		}
		i -= it.n
	}
	return ""
}

// Describe names case i's values (from 0), for messages: "T=0.5 seed=7".
func (s *Sweep) Describe(i int64) string {
	idx := make([]int64, len(s.params))
	s.values(i, idx)
	var b []string
	for k, p := range s.params {
		b = append(b, p.name+"="+p.value(idx[k]))
	}
	return strings.Join(b, " ")
}

// Reader returns the sweep's lines, each ending with a newline, in order.
func (s *Sweep) Reader() io.Reader { return &sweepReader{s: s, idx: make([]int64, len(s.params))} }

type sweepReader struct {
	s    *Sweep
	next int64
	idx  []int64
	buf  []byte
}

func (r *sweepReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.next < r.s.cases {
		r.s.values(r.next, r.idx)
		r.buf = append(r.s.appendLine(r.buf, r.idx), '\n')
		r.next++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[:copy(r.buf, r.buf[n:])]
	return n, nil
}
