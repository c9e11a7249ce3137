package farm

import "testing"

// MAXRSS is written in human units, powers of 1024.
func TestFmtKiB(t *testing.T) {
	for kib, want := range map[int64]string{
		1: "1K", 512: "512K", 1023: "1023K", 1024: "1.0M", 4096: "4.0M", 215040: "210M",
		1258291: "1.2G", 10 << 20: "10G", 3 << 30: "3.0T",
	} {
		if got := string(fmtKiB(nil, kib)); got != want {
			t.Errorf("fmtKiB(%d) = %q, want %q", kib, got, want)
		}
	}
}
