package report

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files of the report's data")

// smallInput is the fixed farm of testdata/small: 4 meta-jobs on 3 hosts,
// 16 cases of 0.05 s to 200 s, two failures and one of exit 3, one case
// interrupted by SIGTERM, a meta-job that quit for lack of run-time, and a
// WHOLE_NODE job of 2 loops whose two open cases were cut off.
func smallInput() Input {
	at := func(s float64) time.Time { return time.UnixMilli(int64(s * 1e3)) }
	return Input{
		StatusDir: filepath.Join("testdata", "small", "STATUSES"),
		Now:       at(1700000300),
		Jobs: map[string]JobInfo{
			"101": {Start: at(1699999999), End: at(1700000110.5)},
			"102": {Start: at(1700000000.5), End: at(1700000120)},
			"103": {Start: at(1700000001), End: at(1700000060)},
			"104": {Start: at(1700000004), End: at(1700000218)},
		},
		Cutoff:     60,
		Summary:    []Stat{{"cases", "16"}},
		PerMinute:  0,
		ETASeconds: -1,
	}
}

// TestGoldenSmallFarm: the data behind every figure of the small farm —
// histogram bins, timeline rows and bars, per-minute counts, failures by
// host and status, the slowest cases — is what testdata/small.golden.json
// holds (go test -update rewrites it; read the diff before committing).
func TestGoldenSmallFarm(t *testing.T) {
	d, err := Build(smallInput())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "small.golden.json"), d)
}

// TestGoldenSmallFarmAggregated: the same farm drawn as an aggregate (as a
// farm of millions of cases is): 10 columns, rows of 2 lanes.
func TestGoldenSmallFarmAggregated(t *testing.T) {
	in := smallInput()
	in.MaxBars, in.MaxRows, in.Columns = 5, 3, 10
	d, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "small-aggregate.golden.json"), d.Timeline)
}

func golden(t *testing.T, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	var g, w any
	json.Unmarshal(got, &g)
	json.Unmarshal(want, &w)
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// TestTimedOutCases: a case that ran past its time limit (a T record) is
// its own series in the figures, by host and by the signal that ended it,
// and is kept out of the quantile of durations, as dt_cutoff keeps it.
func TestTimedOutCases(t *testing.T) {
	dir := t.TempDir()
	body := "# farm-status v1 job=7 run=1 host=n1\n" +
		"S 1 1700000000.000 n1\nE 1 0 1700000000.000 1.000 n1\n" +
		"S 2 1700000001.000 n1\nT 2 15 1700000001.000 60.000 n1\n"
	if err := os.WriteFile(filepath.Join(dir, "status.7"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Build(Input{StatusDir: dir, Now: time.Unix(1700000100, 0), ETASeconds: -1})
	if err != nil {
		t.Fatal(err)
	}
	if h := d.Histogram; sum(h.TimedOut) != 1 || sum(h.Succeeded) != 1 || h.Quantile != 1 {
		t.Errorf("histogram %+v: want 1 succeeded, 1 timed out, the quantile of the success alone", h)
	}
	if len(d.Hosts) != 1 || d.Hosts[0].TimedOut != 1 || d.Hosts[0].Ended != 2 {
		t.Errorf("hosts %+v", d.Hosts)
	}
	if len(d.Statuses) != 1 || d.Statuses[0].Kind != "timed out" || d.Statuses[0].Code != 15 {
		t.Errorf("statuses %+v", d.Statuses)
	}
	if len(d.Slowest) == 0 || d.Slowest[0].State != TimedOut {
		t.Errorf("slowest %+v", d.Slowest)
	}
	for _, c := range Figures(d) {
		if c.ID != "timeline" && c.ID != "statuses" && c.ID != "hosts" && c.ID != "histogram" {
			continue
		}
		found := false
		for _, e := range c.Shapes {
			if r, ok := e.(Rect); ok && r.Fill == colTimedOut {
				found = true
			}
		}
		if !found {
			t.Errorf("figure %s draws no timed-out case", c.ID)
		}
	}
}

func sum(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}
