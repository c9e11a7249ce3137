package status

import (
	"os"
	"strings"

	"github.com/farm-hpc/farm/internal/kv"
	"github.com/farm-hpc/farm/vfs"
	"golang.org/x/sys/unix"
)

// Cutoff is dt_cutoff, the runtime-aware exit's threshold, as a meta-job
// last computed it from the status files (metajob): an advisory record,
// MISC/cutoff (layout.Cutoff), that the meta-jobs read before they claim
// and one of them rewrites now and then. It is not part of the claim state:
// dt_cutoff only decides when a meta-job stops taking cases, and a value
// stale by a recomputation costs a slightly early or late exit, never a
// case claimed twice or lost.
type Cutoff struct {
	Seconds   float64 // dt_cutoff; 0: not computed yet
	Durations int64   // the case durations it was computed from
	Run       int     // the run it was computed in
	Claimed   int64   // the cases claimed in that run then (an estimate)
	// Median is the median duration of the cases that succeeded, of
	// Succeeded of them, then (CASE_TIME_LIMIT=Nx); 0, 0 if not said
	// (a record of an older farm).
	Median    float64
	Succeeded int64
}

// cutoffRecord is the record's length, its newline included: longer than
// any (two floats of up to 24 characters, four counts of up to 19 digits
// and the keys take 165). (An older farm's record, of 128, reads the same.)
const cutoffRecord = 192

// ReadCutoff reads the record at path; false if there is none or it does
// not read (a passing error, one being written): the caller goes on with
// the reading it had.
func ReadCutoff(path string) (Cutoff, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Cutoff{}, false
	}
	line, _, whole := strings.Cut(string(b), "\n")
	if !whole {
		return Cutoff{}, false
	}
	return ParseCutoff(line)
}

// ParseCutoff reads a record's line (FormatCutoff's); false if it does not read.
func ParseCutoff(line string) (Cutoff, bool) {
	var c Cutoff
	r := kv.NewReader(line)
	for r.Next() {
		switch r.Key() {
		case "cutoff":
			c.Seconds = r.Float()
		case "durations":
			c.Durations = r.Int()
		case "run":
			c.Run = r.Atoi()
		case "claimed":
			c.Claimed = r.Int()
		case "median":
			c.Median = r.Float()
		case "succeeded":
			c.Succeeded = r.Int()
		}
	}
	if r.Err() != nil || c.Seconds < 0 || c.Durations < 0 || c.Claimed < 0 || c.Median < 0 || c.Succeeded < 0 {
		return Cutoff{}, false
	}
	return c, true
}

// FormatCutoff is c as a record's line, with no padding or newline.
func FormatCutoff(c Cutoff) string {
	b := kv.AppendFloat(nil, "cutoff", c.Seconds)
	b = kv.AppendInt(b, "durations", c.Durations)
	b = kv.AppendInt(b, "run", int64(c.Run))
	b = kv.AppendInt(b, "claimed", c.Claimed)
	b = kv.AppendFloat(b, "median", c.Median)
	return string(kv.AppendInt(b, "succeeded", c.Succeeded))
}

// WriteCutoff writes c as the record at path, in place (vfs.WriteInPlace:
// every meta-job of the farm may write it, at the same moment); best
// effort.
func WriteCutoff(path string, c Cutoff) {
	rec := FormatCutoff(c)
	if len(rec) >= cutoffRecord {
		return
	}
	vfs.WriteInPlace(vfs.OS{}, unix.AT_FDCWD, path, []byte(rec+strings.Repeat(" ", cutoffRecord-1-len(rec))+"\n"))
}
