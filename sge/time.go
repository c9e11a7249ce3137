package sge

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// ParseTime parses Grid Engine's time format (sge_types(5),
// time_specifier), as h_rt takes it: seconds ("3600"), or hours, minutes
// and seconds ("01:30:00", "48:00:00", "0:90:0"), each of any number of
// digits, one left out being 0 ("1::30"); "INFINITY" (any case) is 0, no
// limit. Grid Engine also reads a number that begins with 0 as octal or
// hexadecimal ("0600" is 384 seconds), fractions and a k/m multiplier:
// those are refused, as nobody means them for a run-time. A value too large
// for a Duration is the largest Duration, never one that wrapped around.
func ParseTime(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	if strings.EqualFold(s, "INFINITY") {
		return 0, nil
	}
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 1:
		if len(s) > 1 && s[0] == '0' {
			return 0, fmt.Errorf("%q begins with 0, which Grid Engine reads as octal or hexadecimal: write the seconds without it", s)
		}
		sec, err := geNumber(s)
		if err != nil {
			return 0, err
		}
		return geSeconds(0, 0, sec), nil
	case 3:
		var n [3]float64
		for i, p := range parts {
			if p == "" {
				continue // 1::30 is 1:0:30
			}
			v, err := geNumber(p)
			if err != nil {
				return 0, err
			}
			n[i] = v
		}
		return geSeconds(n[0], n[1], n[2]), nil
	}
	return 0, fmt.Errorf("%d fields; Grid Engine takes hours:minutes:seconds (three fields, 0:30:0 for 30 minutes) or seconds", len(parts))
}

// geNumber reads one field of a Grid Engine time: digits, any number of
// them, as a float64 (exact below 2^53, and never wrapping around).
func geNumber(s string) (float64, error) {
	v := 0.0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad number %q", s)
		}
		v = v*10 + float64(c-'0')
	}
	if s == "" {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return v, nil
}

// geSeconds is h hours, m minutes and s seconds; the largest Duration if
// that is beyond it.
func geSeconds(h, m, s float64) time.Duration {
	total := h*3600 + m*60 + s
	if total > float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(total) * time.Second
}
