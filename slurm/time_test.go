package slurm

import (
	"math"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30":         30 * time.Minute,
		"30:15":      30*time.Minute + 15*time.Second,
		"0:03":       3 * time.Second,
		"2:00:00":    2 * time.Hour,
		"1-0":        24 * time.Hour,
		"0-00:10":    10 * time.Minute,
		"1-02:03:04": 26*time.Hour + 3*time.Minute + 4*time.Second,
		"UNLIMITED":  0,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "1:2:3:4", "-5", "1-2:3:4:5", "1h"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

func TestParseDurationNeverWraps(t *testing.T) {
	for _, s := range []string{"99999999999", "99999999999999999999", "9999999999999-00:00", "1-99999999999999999999:00", "153722867280912930"} {
		if d, err := ParseDuration(s); err != nil || d != time.Duration(math.MaxInt64) {
			t.Errorf("ParseDuration(%q) = %v, %v; want the largest duration", s, d, err)
		}
	}
	if d, err := ParseDuration("35-00:00:00"); err != nil || d != 35*24*time.Hour {
		t.Errorf("35 days: %v, %v", d, err)
	}
	for _, bad := range []string{"-99999999999999999999", "1--5", "1:-99999999999999999999"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}
