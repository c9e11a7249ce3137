package farm

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config holds the knobs of the config file, with META's names.
type Config struct {
	NFailedMax int           // N_failed_max: fast-failure protection, cases
	DtFailed   time.Duration // dt_failed: a failure shorter than this is "very short"
	NJobsMax   int           // NJOBS_MAX: cap on the farm's queued+running jobs; 0 = none
	RunDirs    bool          // RUN_DIRS: make RUN$ID for every case before it runs
	WholeNode  bool          // WHOLE_NODE: each meta-job runs NWhole cases at once
	NWhole     int           // NWHOLE: cases a whole-node meta-job runs at once
	MaxCrashes int           // MAX_CRASHES: a case whose job died under it this often is crashed; 0 = no limit
	Retries    int           // RETRIES: a case that exits non-zero is run again up to this many times in its run
	RetryDelay time.Duration // RETRY_DELAY: how long after its failure a case is run again
	// RescueCheck is RESCUE_CHECK: how often the meta-jobs of a run ask
	// the batch system, once for all of them, which of them died holding
	// cases, and rescue those cases in the run; 0 = no rescue (the cases
	// wait for 'farm resubmit').
	RescueCheck time.Duration
	// WaitForCases is WAIT_FOR_CASES: how long a meta-job with nothing
	// left to claim waits for cases that 'farm add' queues to its run
	// before it exits; 0 = it exits at once.
	WaitForCases time.Duration
	// TableIDs is TABLE_IDS: table.dat's case lines start with their IDs,
	// whatever numbers they are (tablefmt.TableIDs); unset (0), META's
	// rule decides (tablefmt.METARule).
	TableIDs bool
	// Backend is BACKEND: the engine farm submit and farm resubmit use
	// when not given --backend; "" (or "auto") for the default. farm
	// adopt, submit and resubmit write it when given --backend
	// (Farm.recordBackend); BackendLine is its line, for messages.
	Backend     string
	BackendLine int
	// CaseTimeLimit is CASE_TIME_LIMIT as a duration: the time limit of
	// every case whose line gives no time= (0: none); CaseTimeFactor
	// is it as a multiple of the median duration of the cases that
	// succeeded so far in the farm (CASE_TIME_LIMIT=5x; 0: not so),
	// never below CaseTimeMin (CASE_TIME_LIMIT_MIN).
	CaseTimeLimit  time.Duration
	CaseTimeFactor float64
	CaseTimeMin    time.Duration
	// CaseKillGrace is CASE_KILL_GRACE: how long after the SIGTERM of a
	// case past its limit farm sends SIGKILL to what is left of it.
	CaseKillGrace time.Duration
	// RetryTimeouts is RETRY_TIMEOUTS: RETRIES runs again a case that
	// timed out too (unset: only one that failed).
	RetryTimeouts bool
	// OutputJob is OUTPUT=job: each loop of a meta-job keeps its cases'
	// standard output and error in files of its own (layout.CaseOutput),
	// each attempt's bytes together, where its start record says
	// (farm output reads them). Unset or OUTPUT=stream: the cases write
	// into their job's output file, as the job's own lines do.
	OutputJob bool
}

// The defaults of the time limits' settings: the grace between SIGTERM
// and SIGKILL, the floor of a limit that is a multiple of the median.
const (
	defaultCaseKillGrace = 30 * time.Second
	defaultCaseTimeMin   = 60 * time.Second
)

// defaultRescueCheck is RESCUE_CHECK when the config does not set it.
const defaultRescueCheck = time.Minute

// maxRetries bounds RETRIES: a case's attempts are counted up to 255.
const maxRetries = 100

// maxNWhole bounds NWHOLE: each loop of a meta-job keeps a bash process.
const maxNWhole = 4096

// casesAtOnce is how many cases a meta-job runs at once: NWHOLE in WHOLE_NODE
// mode, else 1.
func (c Config) casesAtOnce() int {
	if c.WholeNode {
		return c.NWhole
	}
	return 1
}

// defaultMaxCrashes is MAX_CRASHES when the config does not set it: as
// HyperQueue's crash limit.
const defaultMaxCrashes = 5

// defaultConfig is META's defaults, and farm's for what META does not have.
func defaultConfig() Config {
	return Config{NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: defaultMaxCrashes, RescueCheck: defaultRescueCheck,
		CaseKillGrace: defaultCaseKillGrace, CaseTimeMin: defaultCaseTimeMin}
}

// loadConfig reads a config file; a missing file gives the defaults.
func loadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return defaultConfig(), nil
	}
	if err != nil {
		return defaultConfig(), Userf("%s cannot be read (%v): make it a file of KEY=value lines, or remove it to use the defaults", filepath.Base(path), unwrapPath(err))
	}
	return parseConfig(filepath.Base(path), data)
}

// maxConfigValue is the largest value a setting takes: more jobs or cases
// than any farm has, dt_failed 31 years.
const maxConfigValue = 1e9

// parseConfig reads the content of a config file named name: KEY=value
// lines, '#' starting a comment, the value a number, possibly quoted. A
// line it rejects gets a UserError of one line, "NAME:LINE: what": an
// unknown key, a key set twice (naming both lines: the last one winning
// silently would hide an edit), a value that is not a number in range, or
// a fraction where a count is wanted.
func parseConfig(name string, data []byte) (Config, error) {
	cfg := defaultConfig()
	seen := map[string]int{} // key -> line
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		k, val, num, err := parseConfigLine(line)
		if err == nil && seen[k] > 0 {
			err = fmt.Errorf("%s is set twice, on lines %d and %d: keep one of them", k, seen[k], n)
		}
		if err != nil {
			return cfg, Userf("%s:%d: %v", name, n, err)
		}
		seen[k] = n
		switch k {
		case "N_failed_max":
			cfg.NFailedMax = int(num)
		case "dt_failed":
			cfg.DtFailed = time.Duration(num * float64(time.Second))
		case "NJOBS_MAX":
			cfg.NJobsMax = int(num)
		case "RUN_DIRS":
			cfg.RunDirs = num != 0
		case "WHOLE_NODE":
			cfg.WholeNode = num != 0
		case "NWHOLE":
			cfg.NWhole = int(num)
		case "MAX_CRASHES":
			cfg.MaxCrashes = int(num)
		case "RETRIES":
			cfg.Retries = int(num)
		case "RETRY_DELAY":
			cfg.RetryDelay = time.Duration(num * float64(time.Second))
		case "RESCUE_CHECK":
			cfg.RescueCheck = time.Duration(num * float64(time.Second))
		case "WAIT_FOR_CASES":
			cfg.WaitForCases = time.Duration(num * float64(time.Second))
		case "TABLE_IDS":
			if num > 1 {
				return cfg, Userf("%s:%d: TABLE_IDS must be 0 (META's rule: table.dat's lines carry IDs only if they start with 1, 2, 3, ...) or 1 (they start with their IDs, whatever numbers they are), got %v", name, n, num)
			}
			cfg.TableIDs = num == 1
		case "BACKEND":
			cfg.Backend, cfg.BackendLine = val, n
		case "OUTPUT":
			cfg.OutputJob = val == "job"
		case "CASE_TIME_LIMIT", "CASE_TIME_LIMIT_MIN", "CASE_KILL_GRACE", "RETRY_TIMEOUTS":
			if err := cfg.setTimeLimit(k, val, num); err != nil {
				return cfg, Userf("%s:%d: %v", name, n, err)
			}
		}
	}
	if cfg.WholeNode && cfg.NWhole < 1 {
		return cfg, Userf("%s:%d: WHOLE_NODE=1 needs NWHOLE, the cases each meta-job runs at once on its node (its cores, e.g. NWHOLE=192)", name, seen["WHOLE_NODE"])
	}
	if cfg.Retries > maxRetries {
		return cfg, Userf("%s:%d: RETRIES must be at most %d, got %d", name, seen["RETRIES"], maxRetries, cfg.Retries)
	}
	if cfg.NWhole > maxNWhole {
		return cfg, Userf("%s:%d: NWHOLE must be at most %d, got %d", name, seen["NWHOLE"], maxNWhole, cfg.NWhole)
	}
	return cfg, nil
}

// configKeys are the settings of the config file, in the order the
// messages list them.
var configKeys = []string{"N_failed_max", "dt_failed", "NJOBS_MAX", "RUN_DIRS", "WHOLE_NODE", "NWHOLE", "MAX_CRASHES", "RETRIES", "RETRY_DELAY", "RESCUE_CHECK", "WAIT_FOR_CASES", "TABLE_IDS", "BACKEND",
	"CASE_TIME_LIMIT", "CASE_TIME_LIMIT_MIN", "CASE_KILL_GRACE", "RETRY_TIMEOUTS", "OUTPUT"}

// secondsKeys are the settings in seconds, which take fractions.
var secondsKeys = []string{"dt_failed", "RETRY_DELAY", "RESCUE_CHECK", "WAIT_FOR_CASES", "CASE_TIME_LIMIT_MIN", "CASE_KILL_GRACE"}

// setTimeLimit sets k, one of the settings of the cases' time limits, to
// val (CASE_TIME_LIMIT) or num.
func (cfg *Config) setTimeLimit(k, val string, num float64) error {
	var err error
	switch k {
	case "CASE_TIME_LIMIT":
		cfg.CaseTimeLimit, cfg.CaseTimeFactor, err = parseCaseTimeLimit(val)
	case "CASE_TIME_LIMIT_MIN":
		cfg.CaseTimeMin = time.Duration(num * float64(time.Second))
	case "CASE_KILL_GRACE":
		cfg.CaseKillGrace = time.Duration(num * float64(time.Second))
	case "RETRY_TIMEOUTS":
		if num > 1 {
			return fmt.Errorf("RETRY_TIMEOUTS must be 0 (RETRIES runs again only the cases that failed) or 1 (and those that timed out), got %v", num)
		}
		cfg.RetryTimeouts = num == 1
	}
	return err
}

// maxCaseTimeLimit is the longest CASE_TIME_LIMIT, as a case's time=.
const maxCaseTimeLimit = 365 * 24 * time.Hour

// parseCaseTimeLimit reads CASE_TIME_LIMIT's value: a duration with a unit
// (90s, 30m, 2h, 1h30m) or a number of seconds, above 0 and at most 365
// days; or a multiple of the median duration of the succeeded cases, a
// number above 0 followed by x (5x, 2.5x).
func parseCaseTimeLimit(v string) (time.Duration, float64, error) {
	bad := fmt.Errorf("CASE_TIME_LIMIT must be a time limit for every case, as 90s, 30m or 2h, or a multiple of the median duration of the cases that succeeded, as 5x; got %s", quoteConfig([]byte(v)))
	if f, ok := strings.CutSuffix(v, "x"); ok {
		n, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(n) || n <= 0 || n > maxConfigValue {
			return 0, 0, bad
		}
		return 0, n, nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(n) || n <= 0 || n > maxCaseTimeLimit.Seconds() {
			return 0, 0, bad
		}
		return time.Duration(n * float64(time.Second)), 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > maxCaseTimeLimit {
		return 0, 0, bad
	}
	return d, 0, nil
}

// parseConfigLine reads one KEY=value line (trimmed, without its comment)
// and checks the value: BACKEND's a name and OUTPUT's job or stream
// (val), every other one a number (num) from 0 to maxConfigValue, and a
// whole one but for dt_failed, RETRY_DELAY, RESCUE_CHECK and
// WAIT_FOR_CASES, which are in seconds (NJOBS_MAX=1.9 is not read as 1).
func parseConfigLine(line []byte) (k, val string, num float64, err error) {
	k, v, ok := strings.Cut(string(line), "=")
	if !ok {
		return "", "", 0, fmt.Errorf("expected KEY=value, got %s", quoteConfig(line))
	}
	k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
	if !slices.Contains(configKeys, k) {
		if near := nearKey(k); near != "" {
			return k, "", 0, fmt.Errorf("unknown setting %s (did you mean %s?)", quoteConfig([]byte(k)), near)
		}
		return k, "", 0, fmt.Errorf("unknown setting %s (known: %s)", quoteConfig([]byte(k)), strings.Join(configKeys, ", "))
	}
	if k == "CASE_TIME_LIMIT" {
		return k, v, 0, nil // parseCaseTimeLimit
	}
	if k == "OUTPUT" {
		if v != "job" && v != "stream" {
			return k, "", 0, fmt.Errorf("OUTPUT must be job (each case's output kept apart, for 'farm output ID') or stream (the cases write into their job's output file), got %s", quoteConfig([]byte(v)))
		}
		return k, v, 0, nil
	}
	if k == "BACKEND" {
		if v == "" || strings.Trim(v, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
			return k, "", 0, fmt.Errorf("BACKEND must name a backend (BACKEND=local, for one), got %s", quoteConfig([]byte(v)))
		}
		return k, v, 0, nil
	}
	num, err = strconv.ParseFloat(v, 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(num) || num < 0 {
		return k, "", 0, fmt.Errorf("%s must be a number >= 0, got %s", k, quoteConfig([]byte(v)))
	}
	if num > maxConfigValue {
		return k, "", 0, fmt.Errorf("%s must be at most %d, got %s", k, int64(maxConfigValue), quoteConfig([]byte(v)))
	}
	if !slices.Contains(secondsKeys, k) && num != math.Trunc(num) {
		return k, "", 0, fmt.Errorf("%s must be a whole number, got %s: write %d or %d", k, quoteConfig([]byte(v)), int64(math.Floor(num)), int64(math.Ceil(num)))
	}
	return k, "", num, nil
}

// nearKey is the setting k is likely a misspelling of: the one equal to it
// but for case, or else the one at most two edits away (one edit for a
// key of four letters or fewer); "" if none, or if two are as near.
func nearKey(k string) string {
	for _, key := range configKeys {
		if strings.EqualFold(k, key) {
			return key
		}
	}
	best, bestD, tie := "", 3, false
	if len(k) <= 4 {
		bestD = 2
	}
	for _, key := range configKeys {
		switch d := EditDistance(strings.ToUpper(k), strings.ToUpper(key)); {
		case d < bestD:
			best, bestD, tie = key, d, false
		case d == bestD && best != "":
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b, in bytes: how
// far a typed name is from a known one, for the "did you mean" of config's
// settings and of the commands' flags.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// quoteConfig quotes b for an error message: at most 40 bytes, on one line.
func quoteConfig(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(string(b[:40])) + "..."
	}
	return strconv.Quote(string(b))
}

// unwrapPath is the reason of a *fs.PathError, without the path (which the
// message names already); other errors as they are.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
