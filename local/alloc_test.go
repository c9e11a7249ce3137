package local

import (
	"context"
	"strings"
	"testing"

	"github.com/farm-hpc/farm/backend"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestParseGPUs(t *testing.T) {
	for in, want := range map[string][]string{
		"": nil, "  ": nil, "0": {"0"}, "0,1": {"0", "1"}, " 3 , 1 ": {"3", "1"}, "007": {"7"}, "2147483647": {"2147483647"},
	} {
		if got, err := ParseGPUs(in); err != nil || !cmp.Equal(got, want) {
			t.Errorf("ParseGPUs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	const fix = "; set it to the indexes of the GPUs of this machine that the farm's jobs may use, comma-separated (e.g. FARM_GPUS=0,1), or unset it"
	for in, want := range map[string]string{
		"0,x":        `local backend: FARM_GPUS="0,x": "x" is not a GPU index (a whole number, 0 or more)` + fix,
		"-1":         `local backend: FARM_GPUS="-1": "-1" is not a GPU index (a whole number, 0 or more)` + fix,
		"+1":         `local backend: FARM_GPUS="+1": "+1" is not a GPU index (a whole number, 0 or more)` + fix,
		"GPU-abc":    `local backend: FARM_GPUS="GPU-abc": "GPU-abc" is not a GPU index (a whole number, 0 or more)` + fix,
		"0 1":        `local backend: FARM_GPUS="0 1": "0 1" is not a GPU index (a whole number, 0 or more)` + fix,
		"2147483648": `local backend: FARM_GPUS="2147483648": "2147483648" is not a GPU index (a whole number, 0 or more)` + fix,
		"0,,1":       `local backend: FARM_GPUS="0,,1": an empty item` + fix,
		"0,":         `local backend: FARM_GPUS="0,": an empty item` + fix,
		"1,01":       `local backend: FARM_GPUS="1,01": GPU 1 is listed twice` + fix,
		"0\n1":       `local backend: FARM_GPUS="0\n1": "0\n1" is not a GPU index (a whole number, 0 or more)` + fix,
	} {
		got, err := ParseGPUs(in)
		if err == nil || err.Error() != want || got != nil {
			t.Errorf("ParseGPUs(%q) = %q, %v;\nwant the error %s", in, got, err, want)
		}
	}
}

func TestMemTotal(t *testing.T) {
	for in, want := range map[string]int64{
		"MemTotal:       16318420 kB\nMemFree:         1234 kB\n": 15935,
		"MemFree: 1 kB\nMemTotal: 2048 kB\n":                      2,
		"MemTotal: 1023 kB\n":                                     0,
		"":                                                        0,
		"MemTotal: lots kB\n":                                     0,
		"MemTotal: -2048 kB\n":                                    0,
		"MemTotal: 2048 MB\n":                                     0,
		"MemTotal: 2048\n":                                        0,
		"MemTotal: 99999999999999999999 kB\n":                     0,
		"MemTotal: 9223372036854775807 kB\n":                      9223372036854775807 / 1024,
		"\x00\xff garbage":                                        0,
	} {
		if got := memTotalMB(strings.NewReader(in)); got != want {
			t.Errorf("memTotalMB(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestSelfAlloc: a local job is given this machine: the CPUs the process
// may run on, the GPUs FARM_GPUS lists, MemTotal; a bad FARM_GPUS is an
// error of Self and of Preflight, naming it.
func TestSelfAlloc(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FARM_JOB_ID": "3", "FARM_GPUS": "1,0"}
	b := New(t.TempDir(), Options{SlotDir: t.TempDir() + "/slots"})
	s, err := b.Self(context.Background(), backend.SelfRequest{Env: func(k string) string { return env[k] }})
	if err != nil || s.ID != "3" || s.Alloc.CPUs != set.Count() || !cmp.Equal(s.Alloc.GPUs, []string{"1", "0"}) || s.Alloc.MemMB < 1 {
		t.Errorf("Self = %+v, %v; want %d CPUs, GPUs 1 and 0, the machine's memory", s, err, set.Count())
	}
	delete(env, "FARM_GPUS")
	if s, err = b.Self(context.Background(), backend.SelfRequest{Env: func(k string) string { return env[k] }}); err != nil || s.Alloc.GPUs != nil || s.Alloc.CPUs < 1 {
		t.Errorf("Self without FARM_GPUS = %+v, %v; want no GPUs", s, err)
	}
	env["FARM_GPUS"] = "0,one"
	want := `local backend: FARM_GPUS="0,one": "one" is not a GPU index`
	if _, err := b.Self(context.Background(), backend.SelfRequest{Env: func(k string) string { return env[k] }}); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Self with a bad FARM_GPUS: %v; want %s...", err, want)
	}
	if err := b.Preflight(context.Background()); err != nil {
		t.Errorf("Preflight: %v", err)
	}
	b.GPUs = "0,one"
	if err := b.Preflight(context.Background()); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Preflight with a bad FARM_GPUS: %v; want %s...", err, want)
	}
}
