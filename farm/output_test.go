package farm

import (
	"bytes"
	"strings"
	"testing"
)

// TestTailStartAgreesWithSplitting: farm output --tail K (tailStart) against
// splitting the bytes into lines, at the 64 KiB boundaries of its reads.
func TestTailStartAgreesWithSplitting(t *testing.T) {
	naive := func(s string, n int) string {
		lines := strings.SplitAfter(s, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		return strings.Join(lines, "")
	}
	pre := "==> case 1 <==\n"
	for _, body := range []string{"", "\n", "a", "a\n", "a\nb", "a\nb\n", "\n\n\n",
		strings.Repeat("x", 65535) + "\n" + "y\n", strings.Repeat("x", 65536) + "\ny", "z\n" + strings.Repeat("x", 65535) + "\n",
		strings.Repeat("l\n", 70000)} {
		for _, n := range []int{1, 2, 3, 100000} {
			all := pre + body + "NEXT"
			from, to := int64(len(pre)), int64(len(pre)+len(body))
			got := all[tailStart(bytes.NewReader([]byte(all)), from, to, n):to]
			if want := naive(body, n); got != want {
				t.Errorf("%d lines of %.20q (len %d): %.20q (len %d), want len %d", n, body, len(body), got, len(got), len(want))
			}
		}
	}
}
