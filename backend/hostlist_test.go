package backend

import (
	"slices"
	"testing"
)

func TestExpandHosts(t *testing.T) {
	cases := map[string][]string{
		"node1":                    {"node1"},
		"node[1-3,7]":              {"node1", "node2", "node3", "node7"},
		"gpu[08-10],login":         {"gpu08", "gpu09", "gpu10", "login"},
		"r[1-2]n[1-2]":             {"r1n1", "r1n2", "r2n1", "r2n2"},
		"a,node[1-2],b":            {"a", "node1", "node2", "b"},
		"node[1-2]-ib":             {"node1-ib", "node2-ib"},
		"":                         nil,
		"cn[0001-0002,0010]":       {"cn0001", "cn0002", "cn0010"},
		"node[1-2],node[5-6]-mgmt": {"node1", "node2", "node5-mgmt", "node6-mgmt"},
	}
	for in, want := range cases {
		got, err := ExpandHosts(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ExpandHosts(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"node[1-", "node]", "node[a-b]", "node[3-1]", "node[1-99999999]", "node[-2]"} {
		if got, err := ExpandHosts(bad); err == nil {
			t.Errorf("ExpandHosts(%q) = %q, nil; want an error", bad, got)
		}
	}
}

func TestCompressHosts(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"node1"}, "node1"},
		{[]string{"node1", "node2", "node3", "node7"}, "node[1-3,7]"},
		{[]string{"node3", "node1", "node2"}, "node[1-3]"},
		{[]string{"node9", "node10"}, "node[9-10]"},
		{[]string{"gpu08", "gpu09", "login", "node2"}, "gpu[08-09],login,node2"},
		{[]string{"a", "b"}, "a,b"},
		{nil, ""},
	}
	for _, c := range cases {
		if got := CompressHosts(c.in); got != c.want {
			t.Errorf("CompressHosts(%q) = %q; want %q", c.in, got, c.want)
		}
		back, err := ExpandHosts(CompressHosts(c.in))
		sorted := slices.Clone(c.in)
		slices.Sort(sorted)
		slices.Sort(back)
		if err != nil || !slices.Equal(back, sorted) {
			t.Errorf("ExpandHosts(CompressHosts(%q)) = %q, %v: not the same names", c.in, back, err)
		}
	}
}
