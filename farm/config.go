package farm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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
}

// DefaultConfig is META's defaults.
func DefaultConfig() Config {
	return Config{NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true}
}

// LoadConfig reads a config file; a missing file gives the defaults.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	fh, err := os.Open(path)
	if os.IsNotExist(err) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		bad := func(msg string, args ...any) error {
			return Userf("%s:%d: %s", filepath.Base(path), n, fmt.Sprintf(msg, args...))
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return cfg, bad("expected KEY=value, got %q", line)
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		num, err := strconv.ParseFloat(v, 64)
		if err != nil || num < 0 {
			return cfg, bad("%s must be a number >= 0, got %q", k, v)
		}
		switch k {
		case "N_failed_max":
			cfg.NFailedMax = int(num)
		case "dt_failed":
			cfg.DtFailed = time.Duration(num * float64(time.Second))
		case "NJOBS_MAX":
			cfg.NJobsMax = int(num)
		case "RUN_DIRS":
			cfg.RunDirs = num != 0
		default:
			return cfg, bad("unknown setting %q (known: N_failed_max, dt_failed, NJOBS_MAX, RUN_DIRS)", k)
		}
	}
	return cfg, sc.Err()
}
