package tablefmt

import (
	"strings"
	"testing"
	"time"
)

func TestParseNeeds(t *testing.T) {
	none := Needs{GPUs: -1}
	for _, tc := range []struct {
		in, cmd string
		want    Needs
	}{
		{"echo a", "echo a", none},
		{"", "", none},
		{"echo a#FARM cpus=2", "echo a#FARM cpus=2", none},     // not a field of its own
		{"echo a #FARMS cpus=2", "echo a #FARMS cpus=2", none}, // nor is #FARMS
		{"echo a ;#FARM cpus=2", "echo a ;#FARM cpus=2", none}, // bash's comment, but not blank-separated
		{"echo a #farm cpus=2", "echo a #farm cpus=2", none},   // the mark is upper case
		{"echo 'x#FARM' # c", "echo 'x#FARM' # c", none},       // no mark
		{"./run 1 #FARM cpus=4", "./run 1", Needs{Declared: true, CPUs: 4, GPUs: -1}},
		{"./run 1 \t #FARM\tcpus=4  gpus=1 ", "./run 1", Needs{Declared: true, CPUs: 4, GPUs: 1}},
		{"./run #FARM cpus=4 gpus=1 mem=8G min_time=30m", "./run", Needs{Declared: true, CPUs: 4, GPUs: 1, MemMB: 8192, MinTime: 30 * time.Minute}},
		{"srun ./mpi #FARM nodes=2 cpus=4", "srun ./mpi", Needs{Declared: true, CPUs: 4, GPUs: -1, Nodes: 2}},
		{"srun ./mpi #FARM nodes=16", "srun ./mpi", Needs{Declared: true, GPUs: -1, Nodes: 16}},
		{"./run #FARM min_time=1-02:03:04 mem=100", "./run", Needs{Declared: true, GPUs: -1, MemMB: 100, MinTime: 26*time.Hour + 3*time.Minute + 4*time.Second}},
		{"./run #FARM gpus=0", "./run", Needs{Declared: true, GPUs: 0}},
		// time= is a limit, no resource: the case stays unmanaged.
		{"sleep 1000 #FARM time=2s", "sleep 1000", Needs{GPUs: -1, Time: 2 * time.Second}},
		{"./run #FARM time=1:00:00 cpus=2", "./run", Needs{Declared: true, CPUs: 2, GPUs: -1, Time: time.Hour}},
		// Only the last mark counts: the one before is the command's.
		{"echo #FARM x #FARM cpus=2", "echo #FARM x", Needs{Declared: true, CPUs: 2, GPUs: -1}},
		{`echo "#FARM" #FARM cpus=2`, `echo "#FARM"`, Needs{Declared: true, CPUs: 2, GPUs: -1}},
	} {
		cmd, n, err := ParseNeeds(tc.in)
		if err != nil || cmd != tc.cmd || n != tc.want {
			t.Errorf("ParseNeeds(%q) = %q, %+v, %v; want %q, %+v", tc.in, cmd, n, err, tc.cmd, tc.want)
		}
	}
}

func TestParseNeedsSizes(t *testing.T) {
	for in, want := range map[string]int64{
		"1": 1, "512": 512, "512M": 512, "512m": 512, "512MB": 512, "512mb": 512, "512Mb": 512,
		"8G": 8192, "8g": 8192, "8GB": 8192, "1T": 1 << 20, "1tb": 1 << 20,
		"1024K": 1, "1025K": 2, "1K": 1, "100kb": 1, "0008G": 8192,
		"8589934591T": 8589934591 << 20, "9223372036854775807K": 1 << 53, // the largest in 64 bits of KiB
	} {
		_, n, err := ParseNeeds("x #FARM mem=" + in)
		if err != nil || n.MemMB != want {
			t.Errorf("mem=%s: %d MiB, %v; want %d", in, n.MemMB, err, want)
		}
	}
	for _, bad := range []string{"0", "0G", "-1", "+1", "1.5G", "8GiB", "512B", "B", "G", "GB", "8 G", "8X", "8GBB", "0x10", "8589934592T", "9223372036854775808K", "99999999999999999999"} {
		if _, n, err := ParseNeeds("x #FARM mem=" + bad); err == nil {
			t.Errorf("mem=%s accepted as %d MiB", bad, n.MemMB)
		}
	}
}

func TestParseNeedsTimes(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30": 30 * time.Minute, "30:15": 30*time.Minute + 15*time.Second, "2:00:00": 2 * time.Hour,
		"1-0": 24 * time.Hour, "1-02:03": 26*time.Hour + 3*time.Minute, "0-00:00:01": time.Second,
		"90s": 90 * time.Second, "30m": 30 * time.Minute, "2h": 2 * time.Hour, "1h30m": 90 * time.Minute,
		"365-00:00:00": MaxMinTime, "8760h": MaxMinTime, "525600": MaxMinTime,
	} {
		_, n, err := ParseNeeds("x #FARM min_time=" + in)
		if err != nil || n.MinTime != want {
			t.Errorf("min_time=%s: %v, %v; want %v", in, n.MinTime, err, want)
		}
	}
	for _, bad := range []string{"0", "0:00", "0s", "-5", "-1h", "+5", "UNLIMITED", "INFINITE", `"30"`, "'30'", "365-00:00:01", "8761h",
		"99999999999999999999", "1:2:3:4", "1-2:3:4:5", "1-", "x", "5d", "1 h"} {
		if _, n, err := ParseNeeds("x #FARM min_time=" + bad); err == nil {
			t.Errorf("min_time=%s accepted as %v", bad, n.MinTime)
		}
	}
}

// TestParseNeedsErrors: every error, word for word; the command comes back
// whole with nothing declared.
func TestParseNeedsErrors(t *testing.T) {
	keys := " (known: cpus, gpus, mem, min_time, nodes, time)"
	for in, want := range map[string]string{
		"#FARM cpus=2":                                    "a case needs a command before #FARM",
		" \t #FARM cpus=2":                                "a case needs a command before #FARM",
		"#FARM":                                           "a case needs a command before #FARM",
		"echo a #FARM":                                    "#FARM: no key=value after it" + keys,
		"echo a #FARM \t ":                                "#FARM: no key=value after it" + keys,
		"echo a #FARM cpu=2":                              `#FARM: unknown key "cpu"` + keys,
		"echo a #FARM CPUS=2":                             `#FARM: unknown key "CPUS"` + keys,
		"echo a #FARM =2":                                 `#FARM: unknown key ""` + keys,
		"echo a #FARM cpus=2 four":                        `#FARM: "four" is not key=value` + keys,
		"echo a #FARM is a comment":                       `#FARM: "is" is not key=value` + keys,
		"echo a #FARM cpus=2 cpus=4":                      "#FARM: cpus is given twice; give each key once" + keys,
		"echo a #FARM mem=1G gpus=1 mem=2":                "#FARM: mem is given twice; give each key once" + keys,
		"echo a #FARM cpus=":                              "#FARM: cpus= has no value" + keys,
		"echo a #FARM min_time= cpus=2":                   "#FARM: min_time= has no value" + keys,
		"echo a #FARM cpus=0":                             `#FARM: bad cpus="0": want a whole number of CPUs, 1 or more`,
		"echo a #FARM nodes=0":                            `#FARM: bad nodes="0": want a whole number of nodes, 1 or more`,
		"echo a #FARM nodes=2x":                           `#FARM: bad nodes="2x": want a whole number of nodes, 1 or more`,
		"echo a #FARM cpus=-1":                            `#FARM: bad cpus="-1": want a whole number of CPUs, 1 or more`,
		"echo a #FARM cpus=2.5":                           `#FARM: bad cpus="2.5": want a whole number of CPUs, 1 or more`,
		"echo a #FARM cpus=+2":                            `#FARM: bad cpus="+2": want a whole number of CPUs, 1 or more`,
		"echo a #FARM cpus=4294967296":                    `#FARM: bad cpus="4294967296": want a whole number of CPUs, 1 or more`,
		"echo a #FARM gpus=-1":                            `#FARM: bad gpus="-1": want a whole number of GPUs, 0 or more`,
		"echo a #FARM gpus=one":                           `#FARM: bad gpus="one": want a whole number of GPUs, 0 or more`,
		"echo a #FARM mem=8GiB":                           `#FARM: bad mem="8GiB": want a size above 0: a number of MiB, or with a unit K, M, G or T (of 1024), e.g. 512M or 8G`,
		"echo a #FARM min_time=1d":                        `#FARM: bad min_time="1d": want a time above 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or 90s, 30m, 2h`,
		"echo a #FARM time=abc":                           `#FARM: bad time="abc": want a time limit above 0 and at most 365 days: Slurm's MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or 90s, 30m, 2h`,
		"echo a #FARM cpus=2=3":                           `#FARM: bad cpus="2=3": want a whole number of CPUs, 1 or more`,
		"echo a #FARM cpus=\x01\r":                        `#FARM: bad cpus="\x01\r": want a whole number of CPUs, 1 or more`,
		"echo a #FARM " + strings.Repeat("k", 50) + "=1":  `#FARM: unknown key "` + strings.Repeat("k", 40) + `..."` + keys,
		"echo a #FARM cpus=" + strings.Repeat("\xe0", 20): `#FARM: bad cpus="` + strings.Repeat(`\xe0`, 10) + `...": want a whole number of CPUs, 1 or more`,
		"echo a #FARM cpus=" + strings.Repeat("é", 50):    `#FARM: bad cpus="` + strings.Repeat("é", 20) + `...": want a whole number of CPUs, 1 or more`,
	} {
		cmd, n, err := ParseNeeds(in)
		if err == nil || err.Error() != want || cmd != in || n != (Needs{GPUs: -1}) {
			t.Errorf("ParseNeeds(%q) = %q, %+v, %v;\nwant the error %q", in, cmd, n, err, want)
		}
	}
}
