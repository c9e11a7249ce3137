package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/farm-hpc/farm/backend"
)

var _ backend.Accounting = (*Backend)(nil)

// sacctFormat is the one sacct format farm reads: the job's ID as Self
// gives it ("123", or "123_4" for an array task), the CPUs it was
// allocated, its wall time in seconds (so far, while it runs) and its
// state.
const sacctFormat = "JobID,AllocCPUS,ElapsedRaw,State"

// noAccounting is what sacct says (exit 1) where slurmctld keeps no
// accounting (AccountingStorageType=accounting_storage/none).
const noAccounting = "accounting storage is disabled"

// Allocated implements backend.Accounting with one `sacct -X -n -P -j IDS`
// call (one per ~10,000 jobs): each job's AllocCPUS × ElapsedRaw, the
// allocation of the job as a whole (-X: not its steps), on every node.
// sacct without --duplicates gives a job's latest run: a job Slurm
// requeued counts its last run only. An array task comes under its own
// ID ("123_4"); a pending array's tasks, which sacct lists as one line
// ("123_[5-9]"), and heterogeneous jobs' components are left out. Where
// slurmctld keeps no accounting, the error wraps backend.ErrNoAccounting.
func (b *Backend) Allocated(ctx context.Context, ids []string) (map[string]float64, error) {
	var valid []string
	seen := map[string]bool{}
	for _, id := range ids {
		if validID(id) && !seen[id] {
			valid = append(valid, id)
			seen[id] = true
		}
	}
	out := map[string]float64{}
	for _, list := range chunks(valid, maxJobList) {
		text, err := b.run(ctx, queryEnv(), "sacct", "-X", "-n", "-P", "-j", list, "-o", sacctFormat)
		if err != nil {
			var ce *CommandError
			if errors.As(err, &ce) && ce.Timeout == 0 && strings.Contains(ce.Stderr, noAccounting) {
				return nil, fmt.Errorf("%w: %s", backend.ErrNoAccounting, ce.Stderr)
			}
			if ce != nil {
				// sacct says why last, after lines of how it tried:
				// "Problem talking to the database: Connection refused".
				short := *ce
				short.Stderr = lastLine(ce.Stderr)
				err = &short
			}
			return nil, fmt.Errorf("asking Slurm's accounting for %d job(s): %w", len(valid), err)
		}
		if err := parseSacct(text, out); err != nil {
			return nil, fmt.Errorf("reading sacct's answer: %w", err)
		}
	}
	return out, nil
}

// parseSacct adds the core-seconds of each job of sacct's answer (in
// sacctFormat) to out; a job listed twice counts once, its first line.
func parseSacct(text string, out map[string]float64) error {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 4 {
			return fmt.Errorf("unexpected sacct line %q (want %s)", line, sacctFormat)
		}
		if !validID(f[0]) {
			continue // a pending array's tasks ("123_[5-9]"), a het job's part ("123+0")
		}
		cpus, err1 := strconv.ParseInt(f[1], 10, 64)
		secs, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || cpus < 0 || secs < 0 {
			return fmt.Errorf("unexpected sacct line %q: AllocCPUS and ElapsedRaw are not counts", line)
		}
		if _, dup := out[f[0]]; !dup {
			out[f[0]] = float64(cpus * secs)
		}
	}
	return nil
}

// lastLine is the last line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
