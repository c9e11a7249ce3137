package backend

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Node is one node of a job that holds several.
type Node struct {
	Name string // as the batch system names it (srun --nodelist, a hostfile)
	CPUs int    // the job's CPUs on it
}

// maxHosts bounds what ExpandHosts makes of one expression: a range
// "n[1-999999999]" in a damaged variable must not take the memory.
const maxHosts = 1 << 20

// ExpandHosts expands a host list in Slurm's compressed form
// ("node[1-3,7],gpu[08-10],login1"; several bracket groups in one name,
// "r[1-2]n[1-2]", give every combination) into its names, in order.
// Zero-padded ranges keep their width ("[08-10]": 08, 09, 10).
func ExpandHosts(list string) ([]string, error) {
	var out []string
	for _, part := range splitTop(list) {
		if part == "" {
			continue
		}
		names, err := expandName(part)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", list, err)
		}
		out = append(out, names...)
		if len(out) > maxHosts {
			return nil, fmt.Errorf("host list %q: more than %d hosts", list, maxHosts)
		}
	}
	return out, nil
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandName expands one name with bracket groups.
func expandName(name string) ([]string, error) {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		if strings.ContainsAny(name, "]") {
			return nil, fmt.Errorf("%q: a ']' without its '['", name)
		}
		return []string{name}, nil
	}
	end := strings.IndexByte(name[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: a '[' without its ']'", name)
	}
	end += open
	prefix, group, rest := name[:open], name[open+1:end], name[end+1:]
	tails, err := expandName(rest)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(group, ",") {
		loS, hiS, isRange := strings.Cut(r, "-")
		if !isRange {
			hiS = loS
		}
		lo, err1 := strconv.Atoi(loS)
		hi, err2 := strconv.Atoi(hiS)
		if err1 != nil || err2 != nil || lo < 0 || hi < lo || !allDigitsNonEmpty(loS) || !allDigitsNonEmpty(hiS) {
			return nil, fmt.Errorf("%q: %q is not a number or a range of numbers", name, r)
		}
		if hi-lo >= maxHosts {
			return nil, fmt.Errorf("%q: more than %d hosts", name, maxHosts)
		}
		for n := lo; n <= hi; n++ {
			num := fmt.Sprintf("%0*d", len(loS), n)
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
			if len(out) > maxHosts {
				return nil, fmt.Errorf("%q: more than %d hosts", name, maxHosts)
			}
		}
	}
	return out, nil
}

func allDigitsNonEmpty(s string) bool { return s != "" && digits(s) }

// CompressHosts writes names in Slurm's compressed form: names that differ
// only in a trailing number of one width are written as one range group
// ("node1,node2,node3,node7" is "node[1-3,7]"), in the order their prefixes
// first appear, numbers ascending. ExpandHosts reads it back (as the
// same set of names).
func CompressHosts(names []string) string {
	type group struct {
		prefix string
		width  int
		nums   []int
	}
	var groups []*group
	var parts []string // "" marks a group's place
	var order []*group
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		if i == len(n) {
			parts, order = append(parts, n), append(order, nil)
			continue
		}
		// A number with a leading zero keeps its width; others have
		// none (node9 and node10 are one group).
		prefix, width := n[:i], 0
		if n[i] == '0' && len(n)-i > 1 {
			width = len(n) - i
		}
		num, err := strconv.Atoi(n[i:])
		if err != nil {
			parts, order = append(parts, n), append(order, nil)
			continue
		}
		var g *group
		for _, h := range groups {
			if h.prefix == prefix && h.width == width {
				g = h
			}
		}
		if g == nil {
			g = &group{prefix: prefix, width: width}
			groups = append(groups, g)
			parts, order = append(parts, ""), append(order, g)
		}
		if !slices.Contains(g.nums, num) {
			g.nums = append(g.nums, num)
		}
	}
	for k, g := range order {
		if g == nil {
			continue
		}
		slices.Sort(g.nums)
		if len(g.nums) == 1 {
			parts[k] = fmt.Sprintf("%s%0*d", g.prefix, g.width, g.nums[0])
			continue
		}
		var rs []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1] == g.nums[j]+1 {
				j++
			}
			r := fmt.Sprintf("%0*d", g.width, g.nums[i])
			if j > i {
				r += fmt.Sprintf("-%0*d", g.width, g.nums[j])
			}
			rs = append(rs, r)
			i = j + 1
		}
		parts[k] = g.prefix + "[" + strings.Join(rs, ",") + "]"
	}
	return strings.Join(parts, ",")
}
