package sge

import (
	"testing"

	"github.com/farm-hpc/farm/backend"
	"github.com/google/go-cmp/cmp"
)

// TestPENodes: a parallel environment's hosts, from $PE_HOSTFILE, the
// job's own first; a hostfile of one host, or one that does not read,
// leaves the allocation as it was.
func TestPENodes(t *testing.T) {
	base := backend.Alloc{CPUs: 12}
	file := "n2.example.org 4 all.q@n2 UNDEFINED\nn1.example.org 8 all.q@n1 UNDEFINED\n"
	got := withPENodes(base, file, "n1")
	want := backend.Alloc{CPUs: 8, Nodes: []backend.Node{{Name: "n1.example.org", CPUs: 8}, {Name: "n2.example.org", CPUs: 4}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("two hosts (-want +got):\n%s", diff)
	}
	for _, f := range []string{"n1 12 all.q@n1 UNDEFINED\n", "n1 x q\nn2 4 q\n", "n1\nn2\n", ""} {
		if got := withPENodes(base, f, "n1"); !cmp.Equal(got, base) {
			t.Errorf("hostfile %q: %+v, want %+v", f, got, base)
		}
	}
}
