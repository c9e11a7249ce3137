package casetable

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/farm-hpc/farm/tablefmt"
	"github.com/google/go-cmp/cmp"
)

const needsTable = "# a farm with needs\n" +
	"1 ./run a #FARM cpus=4 gpus=1 mem=8G min_time=30m\n" +
	"2 ./run b\n" +
	"3\t./run c # a comment #FARM mem=512 \r\n" +
	"4 echo '#FARM' #FARM gpus=0\n"

// TestClaimReadsNeeds: the claim gives a case's command without its
// #FARM part, and what it declares in Needs, as tablefmt.ReadCases does.
func TestClaimReadsNeeds(t *testing.T) {
	dir, st := startTableRun(t, needsTable)
	var needsCases []tablefmt.Case
	if err := tablefmt.ReadCases(filepath.Join(dir, "table.dat"), func(c tablefmt.Case) error { needsCases = append(needsCases, c); return nil }); err != nil || len(needsCases) != 4 {
		t.Fatalf("ReadCases: %d cases, %v", len(needsCases), err)
	}
	var got []tablefmt.Case
	for {
		cs, err := st.Claim(context.Background(), 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			break
		}
		got = append(got, cs...)
	}
	want := append([]tablefmt.Case(nil), needsCases...)
	for i := range want {
		want[i].Line, want[i].Table = int64(i+2), "table.dat"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
}

// TestClaimRunsABadNeedsLineAsWritten: the claim never fails on a #FARM
// part (a run started by a farm that did not read them may hold a bad
// one): the case comes with its command whole and nothing declared.
func TestClaimRunsABadNeedsLineAsWritten(t *testing.T) {
	_, st := startTableRun(t, "1 echo a #FARM cpu=2\n2 echo b #FARM cpus=2\n")
	cs, err := st.Claim(context.Background(), 1, 1)
	if err == nil {
		var more []tablefmt.Case
		more, err = st.Claim(context.Background(), 1, 1)
		cs = append(cs, more...)
	}
	want := []tablefmt.Case{
		{ID: 1, Command: "echo a #FARM cpu=2", Line: 1, Table: "table.dat", Needs: tablefmt.Needs{GPUs: -1}},
		{ID: 2, Command: "echo b", Line: 2, Table: "table.dat", Needs: tablefmt.Needs{Declared: true, CPUs: 2, GPUs: -1}},
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
}
