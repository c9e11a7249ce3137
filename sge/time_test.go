package sge

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"01:00:00", time.Hour},
		{"1:30:00", 90 * time.Minute},
		{"48:00:00", 48 * time.Hour},
		{"0:90:0", 90 * time.Minute},
		{"0:0:45", 45 * time.Second},
		{"1::30", time.Hour + 30*time.Second},
		{"::30", 30 * time.Second},
		{"3600", time.Hour},
		{"30", 30 * time.Second},
		{"0", 0},
		{"INFINITY", 0},
		{"infinity", 0},
		{"99999999999999999999", time.Duration(math.MaxInt64)},
		{"99999999999999999999:00:00", time.Duration(math.MaxInt64)},
		{"840:00:00", 840 * time.Hour},
	} {
		if got, err := ParseTime(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, err string }{
		{"", "empty"},
		{"1h", `bad number "1h"`},
		{"1:00", "2 fields; Grid Engine takes hours:minutes:seconds (three fields, 0:30:0 for 30 minutes) or seconds"},
		{"1:0:0:0", "4 fields"},
		{"0600", `"0600" begins with 0, which Grid Engine reads as octal or hexadecimal: write the seconds without it`},
		{"0x10", "begins with 0"},
		{"1.5:00:00", `bad number "1.5"`},
		{"-5", `bad number "-5"`},
		{"+5", `bad number "+5"`},
		{"1k", `bad number "1k"`},
		{"UNLIMITED", `bad number "UNLIMITED"`},
		{"0-01:00", "2 fields"},
		{"0-01:00:00", `bad number "0-01"`},
	} {
		if _, err := ParseTime(tc.in); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseTime(%q) = %v; want an error %q", tc.in, err, tc.err)
		}
	}
}
