package farm

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
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
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return DefaultConfig(), nil
	}
	if err != nil {
		return DefaultConfig(), Userf("%s cannot be read (%v): make it a file of KEY=value lines, or remove it to use the defaults", filepath.Base(path), unwrapPath(err))
	}
	return ParseConfig(filepath.Base(path), data)
}

// maxConfigValue is the largest value a setting takes: more jobs or cases
// than any farm has, dt_failed 31 years.
const maxConfigValue = 1e9

// ParseConfig reads the content of a config file named name: KEY=value
// lines, '#' starting a comment, the value a number, possibly quoted. A
// line it rejects gets a UserError of one line, "NAME:LINE: what".
func ParseConfig(name string, data []byte) (Config, error) {
	cfg := DefaultConfig()
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
		bad := func(msg string, args ...any) error {
			return Userf("%s:%d: %s", name, n, fmt.Sprintf(msg, args...))
		}
		k, v, ok := strings.Cut(string(line), "=")
		if !ok {
			return cfg, bad("expected KEY=value, got %s", quoteConfig(line))
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		switch k {
		case "N_failed_max", "dt_failed", "NJOBS_MAX", "RUN_DIRS":
		default:
			return cfg, bad("unknown setting %s (known: N_failed_max, dt_failed, NJOBS_MAX, RUN_DIRS)", quoteConfig([]byte(k)))
		}
		num, err := strconv.ParseFloat(v, 64)
		if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(num) || num < 0 {
			return cfg, bad("%s must be a number >= 0, got %s", k, quoteConfig([]byte(v)))
		}
		if num > maxConfigValue {
			return cfg, bad("%s must be at most %d, got %s", k, int64(maxConfigValue), quoteConfig([]byte(v)))
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
		}
	}
	return cfg, nil
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
