package backend

import (
	"context"
	"errors"
	"testing"
)

// engine is a registered engine whose backend is nil: the registry's
// choices are what is tested.
func engine(name, why string) Engine {
	return Engine{Name: name, Available: func(context.Context) string { return why }, Open: func(string) Backend { return nil }}
}

func TestRegistryPicksTheFirstAvailableAndSaysWhy(t *testing.T) {
	ctx := context.Background()
	var opened []string
	track := func(e Engine) Engine {
		e.Open = func(dir string) Backend { opened = append(opened, e.Name+":"+dir); return nil }
		return e
	}
	r := NewRegistry(track(engine("slurm", "sbatch not found")), track(Engine{Name: "local"}))
	var notices []string
	r.Notice = func(m string) { notices = append(notices, m) }
	for _, name := range []string{"", "auto"} {
		if _, err := r.Open(ctx, name, "/f"); err != nil {
			t.Fatal(err)
		}
	}
	if len(opened) != 2 || opened[0] != "local:/f" || opened[1] != "local:/f" {
		t.Errorf("opened %v, want local twice", opened)
	}
	want := "farm: sbatch not found; using the local backend (--backend slurm to insist)"
	if len(notices) != 2 || notices[0] != want {
		t.Errorf("notices %q, want %q", notices, want)
	}
	// Asked by name, an engine is opened whether or not it is available.
	opened, notices = nil, nil
	if _, err := r.Open(ctx, "slurm", "/g"); err != nil || len(opened) != 1 || opened[0] != "slurm:/g" || len(notices) != 0 {
		t.Errorf("Open(slurm) opened %v, notices %v, err %v", opened, notices, err)
	}
}

func TestRegistryUnknownName(t *testing.T) {
	r := NewRegistry(engine("slurm", ""), engine("local", ""))
	if got := r.Names(); len(got) != 2 || got[0] != "slurm" || got[1] != "local" {
		t.Errorf("Names() = %v", got)
	}
	_, err := r.Open(context.Background(), "pbs", "/f")
	var ue *UnknownError
	if !errors.As(err, &ue) || err.Error() != `unknown backend "pbs": use --backend slurm or --backend local` {
		t.Errorf("Open(pbs) = %v", err)
	}
	if r.Check("") != nil || r.Check("auto") != nil || r.Check("local") != nil || r.Check("pbs") == nil {
		t.Error("Check accepts or refuses the wrong names")
	}
	none := NewRegistry(engine("slurm", "no controller"))
	if _, err := none.Open(context.Background(), "", "/f"); err == nil {
		t.Error("Open with no engine available: no error")
	}
}

// With Slurm, Grid Engine and local registered in that order, the default
// is the first that answers, and the notice gives every reason why the
// ones before it were passed over.
func TestRegistryThreeEngines(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		slurm, sge string // why not available
		want, note string
	}{
		{"", "", "slurm", ""},
		{"", "qsub not found", "slurm", ""},
		{"no Slurm controller answers", "", "sge", "farm: no Slurm controller answers; using the sge backend (--backend slurm to insist)"},
		{"sbatch not found", "qsub not found", "local", "farm: sbatch not found, qsub not found; using the local backend (--backend slurm or --backend sge to insist)"},
	} {
		var opened string
		track := func(e Engine) Engine {
			e.Open = func(dir string) Backend { opened = e.Name; return nil }
			return e
		}
		r := NewRegistry(track(engine("slurm", tc.slurm)), track(engine("sge", tc.sge)), track(Engine{Name: "local"}))
		var notes []string
		r.Notice = func(m string) { notes = append(notes, m) }
		if _, err := r.Open(ctx, "", "/f"); err != nil {
			t.Fatal(err)
		}
		if opened != tc.want || (tc.note == "" && len(notes) != 0) || (tc.note != "" && (len(notes) != 1 || notes[0] != tc.note)) {
			t.Errorf("slurm %q, sge %q: opened %s with notices %q; want %s with %q", tc.slurm, tc.sge, opened, notes, tc.want, tc.note)
		}
	}
}
