package tablefmt

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const needsTable = "# a farm with needs\n" +
	"1 ./run a #FARM cpus=4 gpus=1 mem=8G min_time=30m\n" +
	"2 ./run b\n" +
	"3\t./run c # a comment #FARM mem=512 \r\n" +
	"4 echo '#FARM' #FARM gpus=0\n"

var needsCases = []Case{
	{ID: 1, Command: "./run a", Needs: Needs{Declared: true, CPUs: 4, GPUs: 1, MemMB: 8192, MinTime: 30 * time.Minute}},
	{ID: 2, Command: "./run b", Needs: Needs{GPUs: -1}},
	{ID: 3, Command: "./run c # a comment", Needs: Needs{Declared: true, GPUs: -1, MemMB: 512}},
	{ID: 4, Command: "echo '#FARM'", Needs: Needs{Declared: true, GPUs: 0}},
}

// TestNeedsReadEverywhere: ReadCases and FindCase give a case's
// command without its #FARM part, and what it declares in Needs.
func TestNeedsReadEverywhere(t *testing.T) {
	p := writeTable(t, needsTable)
	if info, err := Validate(p); err != nil || info.Cases != 4 || !info.Numbered {
		t.Fatalf("Validate = %+v, %v", info, err)
	}
	if diff := cmp.Diff(needsCases, readAll(t, p)); diff != "" {
		t.Errorf("ReadCases (-want +got):\n%s", diff)
	}
	for i, want := range needsCases {
		want.Line = int64(i + 2)
		if c, err := FindCase(p, want.ID, METARule); err != nil || c != want {
			t.Errorf("FindCase(%d) = %+v, %v; want %+v", want.ID, c, err, want)
		}
	}
	// An unnumbered table: FindCase gives the case farm submit would number.
	p = writeTable(t, "./run a #FARM cpus=2\n./run b\n")
	if c, err := FindCase(p, 1, METARule); err != nil || c != (Case{ID: 1, Command: "./run a", Line: 1, Needs: Needs{Declared: true, CPUs: 2, GPUs: -1}}) {
		t.Errorf("FindCase in an unnumbered table = %+v, %v", c, err)
	}
}

// TestBadNeedsRefused: a #FARM part that does not read is an error naming
// the table and the line, in Validate (numbered table or not), ReadCases,
// FindCase (of that case only), Rebuild and CountKept; none changes the
// table or writes the new one.
func TestBadNeedsRefused(t *testing.T) {
	const msg = `table.dat:3: #FARM: unknown key "cpu" (known: cpus, gpus, mem, min_time, nodes, time); fix the line`
	numbered := "1 ./run a #FARM cpus=2\n# c\n2 ./run b #FARM cpu=2\n3 ./run c\n"
	unnumbered := "./run a #FARM cpus=2\n# c\n./run b #FARM cpu=2\n./run c\n"
	for _, table := range []string{numbered, unnumbered} {
		p := writeTable(t, table)
		if _, err := Prepare(p); err == nil || err.Error() != msg {
			t.Errorf("Prepare(%q) = %v; want %s", table, err, msg)
		}
		if b, _ := os.ReadFile(p); string(b) != table {
			t.Errorf("a refused table was changed: %q", b)
		}
		var le *LineError
		if _, err := FindCase(p, 2, METARule); !errors.As(err, &le) || err.Error() != msg {
			t.Errorf("FindCase(2) of %q = %v; want %s", table, err, msg)
		}
		if c, err := FindCase(p, 3, METARule); err != nil || c.Command != "./run c" {
			t.Errorf("FindCase(3) of %q = %+v, %v", table, c, err)
		}
	}
	p := writeTable(t, numbered)
	if err := ReadCases(p, func(Case) error { return nil }); err == nil || err.Error() != msg {
		t.Errorf("ReadCases = %v; want %s", err, msg)
	}
	all := func(int64) bool { return true }
	if _, err := CountKept(p, all); err == nil || err.Error() != msg {
		t.Errorf("CountKept = %v; want %s", err, msg)
	}
	if _, err := Rebuild(p, p+"_", all); err == nil || err.Error() != msg {
		t.Errorf("Rebuild = %v; want %s", err, msg)
	}
	if _, err := os.Stat(p + "_"); !os.IsNotExist(err) {
		t.Errorf("a refused Rebuild wrote %s_: %v", p, err)
	}
	// Each error Validate gives.
	for line, msg := range map[string]string{
		"1 #FARM cpus=2":            "a case needs a command before #FARM; fix the line",
		"1 ./a #FARM":               "#FARM: no key=value after it (known: cpus, gpus, mem, min_time, nodes, time); fix the line",
		"1 ./a #FARM cpus=2 cpus=3": "#FARM: cpus is given twice; give each key once (known: cpus, gpus, mem, min_time, nodes, time); fix the line",
		"1 ./a #FARM mem=":          "#FARM: mem= has no value (known: cpus, gpus, mem, min_time, nodes, time); fix the line",
		"1 ./a #FARM mem=1.5G":      `#FARM: bad mem="1.5G": want a size above 0: a number of MiB, or with a unit K, M, G or T (of 1024), e.g. 512M or 8G; fix the line`,
		"./a #FARM min_time=0":      `#FARM: bad min_time="0": want a time above 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or 90s, 30m, 2h; fix the line`,
	} {
		p := writeTable(t, "# c\n"+line+"\n")
		if _, err := Validate(p); err == nil || err.Error() != "table.dat:2: "+msg {
			t.Errorf("Validate(%q) = %v; want table.dat:2: %s", line, err, msg)
		}
	}
	// A line that is a comment is not a case, whatever follows its #.
	p = writeTable(t, "#FARM cpu=2\n  #FARM\n./a\n")
	if info, err := Validate(p); err != nil || info.Cases != 1 {
		t.Errorf("Validate of comment lines = %+v, %v", info, err)
	}
}

// TestRebuildKeepsNeeds: the resubmit table (Rebuild) carries each line's
// #FARM part as written, so the resubmitted cases declare what they did.
func TestRebuildKeepsNeeds(t *testing.T) {
	p := writeTable(t, needsTable)
	odd := func(id int64) bool { return id%2 == 1 }
	if n, err := Rebuild(p, p+"_", odd); err != nil || n != 2 {
		t.Fatalf("Rebuild = %d, %v", n, err)
	}
	b, err := os.ReadFile(p + "_")
	if err != nil {
		t.Fatal(err)
	}
	want := "1 ./run a #FARM cpus=4 gpus=1 mem=8G min_time=30m\n3 ./run c # a comment #FARM mem=512\n"
	if string(b) != want {
		t.Errorf("table.dat_ reads %q, want %q", b, want)
	}
	var got []Case
	if err := ReadCases(p+"_", func(c Case) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Case{needsCases[0], needsCases[2]}, got); diff != "" {
		t.Errorf("the resubmit table's cases (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(b), "#FARM mem=512") {
		t.Errorf("lost a #FARM part: %q", b)
	}
}

// TestEachNeeds: EachNeeds gives the ID and needs of each line with a
// #FARM part, as ReadCases does, equal parts and all; a line without
// one, or whose part or ID does not read, is left out.
func TestEachNeeds(t *testing.T) {
	p := writeTable(t, needsTable+
		"5 ./run d #FARM mem=8G\n"+
		"6 ./run e #FARM mem=8G\n"+
		"7 ./run f #FARM mem=0\n"+ // refused by submit: skipped
		"8 #FARM mem=8G\n"+ // no command (the part was read before)
		"  #FARM mem=8G\n"+
		"x ./run g #FARM mem=1G\n"+
		"#FARM mem=1G\n")
	type got struct {
		ID    int64
		Needs Needs
	}
	var all []got
	if err := EachNeeds(p, func(id int64, n Needs) error {
		all = append(all, got{id, n})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mem8 := Needs{Declared: true, GPUs: -1, MemMB: 8192}
	want := []got{{1, needsCases[0].Needs}, {3, needsCases[2].Needs}, {4, needsCases[3].Needs}, {5, mem8}, {6, mem8}}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("EachNeeds (-want +got):\n%s", diff)
	}
	stop := errors.New("stop")
	if err := EachNeeds(p, func(int64, Needs) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
}
