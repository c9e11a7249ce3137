package status

import (
	"os"
	"path/filepath"

	"github.com/farm-hpc/farm/layout"
)

// Durations returns the duration in seconds of every ended case (E records,
// failed ones too; not I or T records) in every status file of dir, replayed as
// ReadFile replays them: the farm-wide record of case run times. Only an
// error opening a file is returned: an error reading one (a directory's in
// its place, too) ends it as its end does.
func Durations(dir string) ([]float64, error) {
	out, _, err := EndedDurations(dir, false)
	return out, err
}

// EndedDurations is Durations, and with succeeded, the durations of the
// cases that succeeded, apart (for CASE_TIME_LIMIT=Nx).
func EndedDurations(dir string, succeeded bool) (ended, ok []float64, err error) {
	names, err := statusFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []float64
	fn := func(_ *File, a *Attempt) error {
		if a.Ended() && (a.State == Succeeded || a.State == Failed) { // an E record
			out = append(out, a.Seconds)
			if succeeded && a.State == Succeeded {
				ok = append(ok, a.Seconds)
			}
		}
		return nil
	}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		rp := replay{fn: fn}
		rp.read(f, nil) // see above: a read error is the file's end
		f.Close()
	}
	return out, ok, nil
}

// Median returns the median of d (the lower of the two middle values of
// an even count), reordering d; 0 for an empty d.
func Median(d []float64) float64 {
	if len(d) == 0 {
		return 0
	}
	return nth(d, (len(d)-1)/2)
}

// UpperQuantile returns the value below which a fraction 1-upper of d lies
// (nearest rank): UpperQuantile(d, 0.125) is exceeded by at most 12.5% of d.
// It reorders d (it selects, in linear time, rather than sorts: ten million
// durations take some 0.1 s instead of 0.7). It returns 0 for an empty d.
func UpperQuantile(d []float64, upper float64) float64 {
	if len(d) == 0 {
		return 0
	}
	q := 1 - upper
	rank := int(q*float64(len(d))+0.999999999) - 1 // ceil(q*n) - 1
	rank = max(0, min(rank, len(d)-1))
	return nth(d, rank)
}

// nth reorders d and returns the value of rank k (0: the smallest), as
// sort.Float64s(d); d[k] would: a quickselect with the median of three as
// pivot and a three-way partition, so that many equal values (durations
// often are) cost no more than distinct ones.
func nth(d []float64, k int) float64 {
	lo, hi := 0, len(d)-1
	for lo < hi {
		a, b, c := d[lo], d[lo+(hi-lo)/2], d[hi]
		p := max(min(a, b), min(max(a, b), c))
		lt, i, gt := lo, lo, hi
		for i <= gt {
			switch {
			case d[i] < p:
				d[lt], d[i] = d[i], d[lt]
				lt++
				i++
			case d[i] > p:
				d[i], d[gt] = d[gt], d[i]
				gt--
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt - 1
		case k > gt:
			lo = gt + 1
		default:
			return p
		}
	}
	return d[k]
}

// Files returns the paths of the status files in dir (status.JOBID and
// status.JOBID.rN), sorted; none if dir does not exist.
func Files(dir string) ([]string, error) { return statusFiles(dir) }

// Superseded reports, for the status files names, which are an earlier
// incarnation of a job restarted under the same ID: they cannot be running.
func Superseded(names []string) func(name string) bool {
	latest := latestRestarts(names)
	return func(name string) bool {
		job, r, ok := layout.ParseStatusFile(filepath.Base(name))
		return ok && r < latest[job]
	}
}
