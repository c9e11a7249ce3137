package metajob

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/farm-hpc/farm/layout"
)

// A case of the bash worker too short for its peak memory to be asked
// has its CPU time known, and no peak.
func TestForkRunnerUseOfAShortCase(t *testing.T) {
	r := newUseRunner(t, "/nonexistent/farm")
	defer r.close()
	if code, _, err := r.run(caseRequest{ID: "1", Comm: "true"}); code != 0 || err != nil {
		t.Fatalf("case: %d, %v", code, err)
	}
	if u := r.use(); u.RSS != 0 || !u.HasCPU || u.CPU > 1e8 {
		t.Errorf("use %+v", u)
	}
}

// A case that ran long enough ends replaced by the end program, which says
// what it used on the worker's fd 4 and exits with the case's STATUS, also
// when the script exits itself; in a bash without EPOCHREALTIME too (bash
// 4: SECONDS).
func TestForkRunnerUseOfALongCase(t *testing.T) {
	end := filepath.Join(t.TempDir(), "end")
	if err := os.WriteFile(end, []byte("#!/bin/sh\n[ \"$1\" = __case-end ] || exit 99\necho \"u 4242 1500000\" >&4\nexit $2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"", "unset EPOCHREALTIME\n" + workerScript} {
		r := newUseRunner(t, end)
		r.script = script
		for _, tc := range []struct {
			comm string
			code int
		}{{"sleep 1.1", 0}, {"sleep 1.1; exit 7", 7}, {"sleep 1.1; STATUS=3", 3}} {
			code, _, err := r.run(caseRequest{ID: "1", Comm: tc.comm})
			if code != tc.code || err != nil {
				t.Errorf("%q: status %d, %v; want %d", tc.comm, code, err, tc.code)
			}
			if u := r.use(); u.RSS != 4242 || !u.HasCPU || u.CPU != 1500*time.Millisecond {
				t.Errorf("%q: use %+v", tc.comm, u)
			}
		}
		r.close()
	}
}

// A program run as single_case.sh has what it used from its rusage.
func TestExecRunnerUse(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("this test runs python3, which is not installed: apt-get install python3")
	}
	dir := t.TempDir()
	prog := "#!/usr/bin/env python3\nb = b'x' * (50 << 20)\n"
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := newCaseRunner(dir, "/bin/bash", "", os.Environ(), os.Stderr, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if code, _, err := r.run(caseRequest{ID: "1"}); code != 0 || err != nil {
		t.Fatalf("case: %d, %v", code, err)
	}
	if u := r.use(); u.RSS < 50<<10 || !u.HasCPU {
		t.Errorf("use %+v", u)
	}
}

func newUseRunner(tb testing.TB, endBin string) *forkRunner {
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, layout.SingleCase), []byte("#!/bin/bash\neval \"$COMM\"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		tb.Fatal("the case runner needs bash: ", err)
	}
	r, err := newForkRunner(dir, bash, os.Environ(), os.Stderr)
	if err != nil {
		tb.Fatal(err)
	}
	r.endBin = endBin
	return r
}

// BenchmarkForkRunnerCase is the bash worker's cost of a trivial case
// (true): "before" with the worker of before the cases' use was known
// (its script as it was), "now" with the EXIT trap, the reading of the
// time and the worker's /proc/PID/stat read.
func BenchmarkForkRunnerCase(b *testing.B) {
	for _, bc := range []struct{ name, script string }{{"before", workerScriptBefore}, {"now", ""}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newUseRunner(b, "/nonexistent/farm")
			defer r.close()
			r.script = bc.script
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if code, _, err := r.run(caseRequest{ID: "1", Comm: "true"}); code != 0 || err != nil {
					b.Fatalf("case: %d, %v", code, err)
				}
			}
		})
	}
}

// workerScriptBefore is workerScript as it was before the cases' use was
// known (deece4a), for BenchmarkForkRunnerCase.
const workerScriptBefore = `FARM_CASE_SCRIPT=$1; shift
if [ "${LC_ALL+set}" ]; then farm_lc_all=$LC_ALL; farm_lc_set=1; else farm_lc_set=; fi
LC_ALL=C
farm_case() { exec 3<&- 4>&-
  if [ "$farm_lc_set" ]; then LC_ALL=$farm_lc_all; else unset LC_ALL; fi
  if [ "$farm_omp" ]; then export OMP_NUM_THREADS=$farm_omp; fi
  case $farm_cuda in +*) export CUDA_VISIBLE_DEVICES="${farm_cuda#+}" ;; esac
  if [ "$farm_nn" ]; then export FARM_NNODES=$farm_nn FARM_NODELIST=$farm_nl FARM_CPUS_PER_NODE=$farm_cpn; fi
  if [ "$farm_hf" ]; then export FARM_HOSTFILE=$farm_hf FARM_MACHINEFILE=$farm_mf; fi
  unset farm_lc_all farm_lc_set farm_omp farm_cuda farm_nn farm_nl farm_cpn farm_hf farm_mf farm_pid farm_sig farm_st STATUS
  unset -f farm_case farm_fwd
  export ID COMM N_cases
  . "$FARM_CASE_SCRIPT" "$farm_table" "$farm_line"
  farm_rc=$?
  if [ "${STATUS+set}" ]; then
    case $STATUS in
    ''|*[!0-9]*) farm_rc=1 ;;
    *[1-9]*) farm_rc=255; [ ${#STATUS} -le 3 ] && [ $((10#$STATUS)) -le 255 ] && farm_rc=$((10#$STATUS)) ;;
    *) farm_rc=0 ;;
    esac
  fi
  exit $farm_rc
}
farm_fwd() {
  if [ -z "$farm_pid" ]; then farm_sig=$1; return; fi
  kill -s "$1" -- "-$farm_pid" 2>/dev/null; trap - "$1"; kill -s "$1" $$
}
while IFS= read -r -u 3 ID && IFS= read -r -u 3 COMM && IFS= read -r -u 3 farm_table &&
  IFS= read -r -u 3 farm_line && IFS= read -r -u 3 N_cases && IFS= read -r -u 3 farm_omp &&
  IFS= read -r -u 3 farm_cuda && IFS=$'\t' read -r -u 3 farm_nn farm_nl farm_cpn farm_hf farm_mf; do
  case $farm_cuda in g*) farm_cuda=${farm_cuda#g} ;; *)
    ( farm_case )
    echo "$?" >&4
    continue ;;
  esac
  farm_pid= farm_sig=
  trap 'farm_fwd TERM' TERM; trap 'farm_fwd INT' INT; trap 'farm_fwd HUP' HUP; trap 'farm_fwd USR1' USR1
  set -m; farm_case & farm_pid=$!; set +m
  if [ "$farm_sig" ]; then farm_fwd "$farm_sig"; fi
  echo "+$farm_pid" >&4
  wait "$farm_pid"; farm_st=$?
  trap - TERM INT HUP USR1
  echo "$farm_st" >&4
done`
