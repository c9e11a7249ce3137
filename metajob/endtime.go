package metajob

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// endSources are where a meta-job learns when it will be stopped.
type endSources struct {
	backend time.Time // the backend's word (Self.End); zero if unknown
	// The HEPiX job-features directories; "" if unset.
	jobFeatures, machineFeatures string
}

// at is when the running meta-job will be stopped, from the first source
// found: the backend (Slurm's end time, the local backend's limit), else the
// HEPiX job features $JOBFEATURES/jobstart_secs + wall_limit_secs. A HEPiX
// shutdown notice — $JOBFEATURES/shutdowntime_job or
// $MACHINEFEATURES/shutdowntime (a node drain) — always caps it. The zero
// time means no end is known. The files are read at each call: a shutdown
// notice may come at any time.
func (s endSources) at() time.Time {
	end := s.backend
	jf := s.jobFeatures
	if end.IsZero() && jf != "" {
		start, ok1 := readSecs(filepath.Join(jf, "jobstart_secs"))
		wall, ok2 := readSecs(filepath.Join(jf, "wall_limit_secs"))
		if ok1 && ok2 && wall > 0 {
			end = time.Unix(start+wall, 0)
		}
	}
	for _, cap := range []string{
		featurePath(jf, "shutdowntime_job"),
		featurePath(s.machineFeatures, "shutdowntime"),
	} {
		if cap == "" {
			continue
		}
		if t, ok := readSecs(cap); ok && t > 0 && (end.IsZero() || time.Unix(t, 0).Before(end)) {
			end = time.Unix(t, 0)
		}
	}
	return end
}

func featurePath(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// readSecs reads a HEPiX feature file: one integer.
func readSecs(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return 0, false
	}
	return int64(v), true
}
