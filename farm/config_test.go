package farm

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	for content, want := range map[string]Config{
		"":                                   defaultConfig(),
		"# only a comment\r\n\r\n":           defaultConfig(),
		"N_failed_max=3\r\nRUN_DIRS='0'\r\n": {NFailedMax: 3, DtFailed: 5 * time.Second, MaxCrashes: 5, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"\tNJOBS_MAX\t=\t1e3\t# tabs":        {NFailedMax: 5, DtFailed: 5 * time.Second, NJobsMax: 1000, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"dt_failed=0.25\nN_failed_max=-0":    {DtFailed: 250 * time.Millisecond, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"dt_failed=1000000000":               {NFailedMax: 5, DtFailed: 1e9 * time.Second, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"NJOBS_MAX=2.0\nN_failed_max=1e2":    {NFailedMax: 100, DtFailed: 5 * time.Second, NJobsMax: 2, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"dt_failed=0.001":                    {NFailedMax: 5, DtFailed: time.Millisecond, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"MAX_CRASHES=0":                      {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"MAX_CRASHES=2":                      {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 2, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"RETRIES=2\nRETRY_DELAY=0.5":         {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, Retries: 2, RetryDelay: 500 * time.Millisecond, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"RETRIES=100":                        {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, Retries: 100, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"RESCUE_CHECK=0":                     {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"RESCUE_CHECK=2.5":                   {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, RescueCheck: 2500 * time.Millisecond, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
		"CASE_TIME_LIMIT=2h\nCASE_KILL_GRACE=0.5\nRETRY_TIMEOUTS=1": {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseTimeLimit: 2 * time.Hour, CaseKillGrace: 500 * time.Millisecond, CaseTimeMin: time.Minute, RetryTimeouts: true},
		"CASE_TIME_LIMIT='5x'\nCASE_TIME_LIMIT_MIN=0.25":            {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseTimeFactor: 5, CaseKillGrace: 30 * time.Second, CaseTimeMin: 250 * time.Millisecond},
		"OUTPUT=job":         {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute, OutputJob: true},
		"OUTPUT='stream'":    defaultConfig(),
		"CASE_TIME_LIMIT=90": {NFailedMax: 5, DtFailed: 5 * time.Second, RunDirs: true, MaxCrashes: 5, RescueCheck: time.Minute, CaseTimeLimit: 90 * time.Second, CaseKillGrace: 30 * time.Second, CaseTimeMin: time.Minute},
	} {
		got, err := parseConfig("config", []byte(content))
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", content, got, err, want)
		}
	}
	for content, msg := range map[string]string{
		"N_failed_max=NaN\n":           `config:1: N_failed_max must be a number >= 0, got "NaN"`,
		"\n\nNJOBS_MAX=Inf\n":          `config:3: NJOBS_MAX must be at most 1000000000, got "Inf"`,
		"NJOBS_MAX=-Inf\n":             `config:1: NJOBS_MAX must be a number >= 0, got "-Inf"`,
		"dt_failed=1e400\n":            `config:1: dt_failed must be at most 1000000000, got "1e400"`,
		"dt_failed=1e10\n":             `config:1: dt_failed must be at most 1000000000, got "1e10"`,
		"RUN_DIRS=yes\n":               `config:1: RUN_DIRS must be a number >= 0, got "yes"`,
		"RETRIES=1.5\n":                `config:1: RETRIES must be a whole number, got "1.5": write 1 or 2`,
		"\nRETRIES=101\n":              `config:2: RETRIES must be at most 100, got 101`,
		"RETRY_DELAY=-1\n":             `config:1: RETRY_DELAY must be a number >= 0, got "-1"`,
		"RUN_DIRS=1\r2\n":              `config:1: RUN_DIRS must be a number >= 0, got "1\r2"`,
		"\xef\xbb\xbfN_failed_max=1\n": `config:1: unknown setting "\ufeffN_failed_max"`,
		"N_failed_max=1\n" + strings.Repeat("x", 1<<17) + "\n": `config:2: expected KEY=value, got "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"...`,
		"bad=\xff\n": `config:1: unknown setting "bad"`,
		"\xff\n":     `config:1: expected KEY=value, got "\xff"`,
		"0\r0=\n":    `config:1: unknown setting "0\r0"`,
		// Counts are whole numbers: NJOBS_MAX=1.9 was read as 1.
		"NJOBS_MAX=1.9\n":                  `config:1: NJOBS_MAX must be a whole number, got "1.9": write 1 or 2`,
		"N_failed_max=0.5\n":               `config:1: N_failed_max must be a whole number, got "0.5": write 0 or 1`,
		"MAX_CRASHES=-1\n":                 `config:1: MAX_CRASHES must be a number >= 0, got "-1"`,
		"MAX_CRASHES=2.5\n":                `config:1: MAX_CRASHES must be a whole number, got "2.5": write 2 or 3`,
		"RUN_DIRS=1e-3\n":                  `config:1: RUN_DIRS must be a whole number, got "1e-3": write 0 or 1`,
		"NJOBS_MAX=99999999999999999999\n": `config:1: NJOBS_MAX must be at most 1000000000, got "99999999999999999999"`,
		"N_failed_max=1e30\n":              `config:1: N_failed_max must be at most 1000000000, got "1e30"`,
		"dt_failed=Inf\n":                  `config:1: dt_failed must be at most 1000000000, got "Inf"`,
		"dt_failed=nan\n":                  `config:1: dt_failed must be a number >= 0, got "nan"`,
		"CASE_TIME_LIMIT=5y\n":             `config:1: CASE_TIME_LIMIT must be a time limit for every case, as 90s, 30m or 2h, or a multiple of the median duration of the cases that succeeded, as 5x; got "5y"`,
		"CASE_TIME_LIMIT=0\n":              `config:1: CASE_TIME_LIMIT must be a time limit`,
		"CASE_TIME_LIMIT=-2x\n":            `config:1: CASE_TIME_LIMIT must be a time limit`,
		"CASE_TIME_LIMIT=\n":               `config:1: CASE_TIME_LIMIT must be a time limit`,
		"RETRY_TIMEOUTS=2\n":               `config:1: RETRY_TIMEOUTS must be 0`,
		"CASE_KILL_GRACE=-1\n":             `config:1: CASE_KILL_GRACE must be a number >= 0, got "-1"`,
		"OUTPUT=file\n":                    `config:1: OUTPUT must be job (each case's output kept apart, for 'farm output ID') or stream (the cases write into their job's output file), got "file"`,
		"OUTPUT=\n":                        `config:1: OUTPUT must be job`,
		// A key set twice: the last one won.
		"NJOBS_MAX=2\n# c\nNJOBS_MAX=3\n": `config:3: NJOBS_MAX is set twice, on lines 1 and 3: keep one of them`,
		"dt_failed=1\ndt_failed = '1'\n":  `config:2: dt_failed is set twice, on lines 1 and 2: keep one of them`,
	} {
		_, err := parseConfig("config", []byte(content))
		if err == nil || !strings.HasPrefix(err.Error(), msg) || !IsUserError(err) {
			t.Errorf("%.40q: err %v, want %s", content, err, msg)
		}
	}
}

// FuzzConfig: parseConfig never panics; what it rejects gets a one-line
// error naming a line of the input that holds a setting; what it accepts
// is in range, and reads back the same once written out.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("N_failed_max=5\ndt_failed=5\nNJOBS_MAX=0\nRUN_DIRS=1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseConfig("config", data)
		if err != nil {
			msg := err.Error()
			if !IsUserError(err) || strings.ContainsAny(msg, "\n\r") || len(msg) > 300 {
				t.Fatalf("%q: error %q is not one short line, or not a UserError", data, msg)
			}
			var n int
			if _, serr := fmt.Sscanf(msg, "config:%d: ", &n); serr != nil {
				t.Fatalf("%q: error %q does not name a line", data, msg)
			}
			lines := bytes.Split(data, []byte("\n"))
			if n < 1 || n > len(lines) {
				t.Fatalf("%q: error %q names line %d of %d", data, msg, n, len(lines))
			}
			line, _, _ := bytes.Cut(lines[n-1], []byte("#"))
			if len(bytes.TrimSpace(line)) == 0 {
				t.Fatalf("%q: error %q names a blank line", data, msg)
			}
			return
		}
		if cfg.NFailedMax < 0 || cfg.NFailedMax > maxConfigValue || cfg.NJobsMax < 0 || cfg.NJobsMax > maxConfigValue || cfg.DtFailed < 0 || cfg.DtFailed > maxConfigValue*time.Second {
			t.Fatalf("%q: out of range: %+v", data, cfg)
		}
		runDirs := 0
		if cfg.RunDirs {
			runDirs = 1
		}
		out := fmt.Sprintf("N_failed_max=%d\ndt_failed=%s\nNJOBS_MAX=%d\nRUN_DIRS=%d\n", cfg.NFailedMax, strconv.FormatFloat(cfg.DtFailed.Seconds(), 'g', -1, 64), cfg.NJobsMax, runDirs)
		again, err := parseConfig("config", []byte(out))
		if d := again.DtFailed - cfg.DtFailed; err != nil || d < -1 || d > 1 {
			t.Fatalf("%q: %+v written as %q reads back as %+v, %v", data, cfg, out, again, err)
		}
		again.DtFailed = cfg.DtFailed
		if again != cfg {
			t.Fatalf("%q: %+v written as %q reads back as %+v", data, cfg, out, again)
		}
	})
}
