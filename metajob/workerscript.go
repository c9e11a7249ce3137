package metajob

// workerScript is a bash loop that runs each case in a forked subshell that
// sources single_case.sh. Forking a running bash costs about a third of
// starting a new one (no exec, no dynamic linking), which is most of the
// per-case overhead of trivial cases. Requests come on fd 3 as eight lines
// (ID, COMM, table, line number, the table's lines, OMP_NUM_THREADS,
// CUDA_VISIBLE_DEVICES, and the case's nodes: FARM_NNODES, FARM_NODELIST,
// FARM_CPUS_PER_NODE, FARM_HOSTFILE and FARM_MACHINEFILE separated by
// tabs, or an empty line; the CUDA line starts with g for a case with a
// time limit); the subshell's exit status goes back on fd 4.
//
// A case with a time limit runs in a process group of its own, so that
// farm can end it whole, with what it started in the background
// (caseTimer): job control is on (set -m) for its fork alone, which makes
// the subshell a group leader, and off while the worker waits (no job
// notices, and a case stopped by SIGSTOP is waited for, as a case without
// a limit is). Its process group goes on fd 4 first ("+PGID"). Until it
// ends, the worker passes the stop signals it gets (SIGTERM, SIGINT,
// SIGHUP, SIGUSR1: a job's time limit or cancel that reach the job's
// process group, which the case left) on to the case's group, then dies
// of the signal, as it would without a trap. $1 is the node-local copy of single_case.sh to
// source; the table and the line number are its $1 and $2, as META calls
// it. The requests are read in the C locale: in a UTF-8 one, bash's read
// takes an incomplete multibyte sequence at a line's end and the newline
// after it for one character, and the worker would wait for ever for a
// line already sent. Each case gets the user's locale back.
//
// The case's STATUS is the script's exit status when it exits; when it
// ends without exit, as META's single_case.sh does (it sets STATUS and
// writes "ID STATUS" itself), it is $STATUS if the script set it, else the
// status of its last command. A STATUS that is not a number counts as 1,
// one over 255 as 255: never as a success.
//
// What the case used (caseuse.go): $2 is the farm executable ("" for
// none) and $3 useMinRun in microseconds. A case that ran that long ends
// (its subshell's EXIT trap, which exit in single_case.sh reaches too, as
// long as the script sets no EXIT trap of its own) replaced by
// "farm __case-end STATUS", which writes "u RSS CPU" on the worker's fd 4
// (opened again through /proc: the case has it closed) and exits with
// STATUS (if it is not there, as after an upgrade that moved it, the case
// ends as before: -x is asked first, since a subshell whose exec fails
// exits, whatever execfail says). How long it ran is measured
// with EPOCHREALTIME (bash 5), or SECONDS (whole seconds) in an older
// bash, from the worker's reading before the fork (a write in the
// subshell costs a copy of a page of bash's).
const workerScript = `FARM_CASE_SCRIPT=$1 farm_end_bin=$2 farm_end_us=$3; shift 3
if [ "${LC_ALL+set}" ]; then farm_lc_all=$LC_ALL; farm_lc_set=1; else farm_lc_set=; fi
LC_ALL=C
if [ "$EPOCHREALTIME" ]; then
farm_end() {
  if (( ${EPOCHREALTIME/[.,]/} - farm_t0 >= farm_end_us )) && [ -x "$farm_end_bin" ]; then
    exec "$farm_end_bin" __case-end "$1" 4>"/proc/$$/fd/4"; fi
  exit "$1"
}
else
farm_end() {
  if (( SECONDS - farm_t0 >= (farm_end_us + 999999) / 1000000 )) && [ -x "$farm_end_bin" ]; then
    exec "$farm_end_bin" __case-end "$1" 4>"/proc/$$/fd/4"; fi
  exit "$1"
}
fi
farm_case() { exec 3<&- 4>&-
  trap 'farm_end "$?"' EXIT
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
  farm_t0=${EPOCHREALTIME/./}; farm_t0=${farm_t0:-$SECONDS}
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
