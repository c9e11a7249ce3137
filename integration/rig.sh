# rig.sh: shell functions shared by slurm-up/-down and cluster-up/-down and
# cluster.
# Sourced, not run. See integration/SLURM.md and integration/CLUSTER.md.
#
# Every daemon a start script launches is recorded in a file as
# "NAME PID STARTTIME" (STARTTIME: field 22 of /proc/PID/stat, clock ticks
# since boot). A stop script signals only processes whose PID *and* start
# time still match a record: never a process found by name, never a reused
# PID.

export PATH=$PATH:/usr/sbin:/sbin

# rig_alive PID: the process exists and is not a zombie.
rig_alive() {
  local st
  [[ -n ${1:-} && -r /proc/$1/stat ]] || return 1
  st=$(rig_stat_field "$1" 3) || return 1
  [[ -n $st && $st != Z && $st != X ]]
}

# rig_stat_field PID N: field N of /proc/PID/stat (the command name, field 2,
# may hold blanks and parentheses: fields are counted after its last ')').
rig_stat_field() {
  local s n=$(($2 - 2))
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  [[ $n -ge 1 ]] || return 1
  # shellcheck disable=SC2086
  set -- $s
  echo "${!n}"
}

# rig_starttime PID: the process's start time in clock ticks since boot.
rig_starttime() { rig_stat_field "$1" 22; }

# rig_record FILE NAME PID: remember that we started PID as NAME.
rig_record() {
  local start
  start=$(rig_starttime "$3") || return 1
  echo "$2 $3 $start" >>"$1"
}

# rig_ours PID START: PID is still the process that was recorded.
rig_ours() {
  rig_alive "$1" && [[ $(rig_starttime "$1") == "$2" ]]
}

# rig_recorded FILE [NAME-PATTERN]: "NAME PID" of every recorded process
# that still runs (newest record first), optionally only names matching
# the shell pattern.
rig_recorded() {
  local file=$1 pat=${2:-*} name pid start
  [[ -r $file ]] || return 0
  tac "$file" | while read -r name pid start; do
    # shellcheck disable=SC2053
    [[ -n $name && $name == $pat ]] || continue
    rig_ours "$pid" "$start" && echo "$name $pid"
  done
  return 0
}

# rig_adopt FILE NAME PIDFILE: record the daemon NAME that PIDFILE (in the
# rig's own state directory) names, if it runs under that name and no NAME is
# recorded yet: a daemon started by an older script that kept no records.
rig_adopt() {
  local p
  [[ -z $(rig_recorded "$1" "$2") && -s $3 ]] || return 0
  p=$(tr -dc 0-9 <"$3")
  if [[ -n $p ]] && rig_alive "$p" && [[ $(cat "/proc/$p/comm" 2>/dev/null) == "$2" ]]; then
    rig_record "$1" "$2" "$p" || true
  fi
}

# rig_stop FILE NAME-PATTERN [WAIT-SECONDS]: SIGTERM the recorded processes
# whose names match, wait, then SIGKILL those left. Exit 1 if any survives.
rig_stop() {
  local file=$1 pat=$2 wait=${3:-20} name pid left i
  local -a pids=() names=()
  while read -r name pid; do
    [[ -n $name ]] || continue
    names+=("$name") pids+=("$pid")
  done < <(rig_recorded "$file" "$pat")
  ((${#pids[@]})) || return 0
  rig_say "stopping ${names[*]} (${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for ((i = 0; i < wait * 5; i++)); do
    left=$(rig_recorded "$file" "$pat")
    [[ -z $left ]] && return 0
    sleep 0.2
  done
  rig_say "still running after ${wait}s, killing: $(echo $left)"
  rig_kill9 "$file" "$pat"
}

# rig_kill9 FILE NAME-PATTERN: SIGKILL the recorded processes that match and
# wait (10 s at most) until they are gone. Exit 1 if any survives.
rig_kill9() {
  local file=$1 pat=$2 name pid i
  while read -r name pid; do
    [[ -n $name ]] && kill -KILL "$pid" 2>/dev/null
  done < <(rig_recorded "$file" "$pat")
  for ((i = 0; i < 50; i++)); do
    [[ -z $(rig_recorded "$file" "$pat") ]] && return 0
    sleep 0.2
  done
  rig_say "survived SIGKILL: $(rig_recorded "$file" "$pat" | tr '\n' ' ')"
  return 1
}

RIG_T0=${RIG_T0:-$EPOCHREALTIME}
RIG_NAME=${RIG_NAME:-${0##*/}}
# rig_say MSG: a progress line on stderr, with the seconds since start.
rig_say() {
  printf '%s: [%5.1fs] %s\n' "$RIG_NAME" "$(awk -v a="$RIG_T0" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}')" "$*" >&2
}

# rig_until SECONDS WHAT CMD...: run CMD every 0.2 s until it succeeds (exit
# 0) or gives up (exit 2 or more: returned at once); after SECONDS, fail with
# "timed out after SECONDS s waiting for WHAT".
rig_until() {
  local secs=$1 what=$2 deadline rc
  shift 2
  deadline=$((SECONDS + secs))
  while :; do
    rc=0
    "$@" || rc=$?
    ((rc == 0)) && return 0
    ((rc >= 2)) && return "$rc"
    if ((SECONDS >= deadline)); then
      echo "timed out after ${secs}s waiting for $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

# rig_apt_install PREFIX WHAT PKG...: install Debian packages
# non-interactively. Prints "PREFIX: cannot install WHAT: why" and returns 3
# when it cannot (not root, no apt, apt failed).
rig_apt_install() {
  local prefix=$1 what=$2 aptlog
  shift 2
  if [[ $(id -u) -ne 0 ]]; then
    echo "$prefix: cannot install $what: not root" >&2
    return 3
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$prefix: cannot install $what: apt-get not found" >&2
    return 3
  fi
  rig_say "installing $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  aptlog=$(mktemp "${TMPDIR:-/tmp}/farm-apt.XXXXXX")
  # Another apt run (say, slurm-up's) may hold the lock: wait for it.
  if ! apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "$@" >"$aptlog" 2>&1; then
    apt-get update -qq -o DPkg::Lock::Timeout=300 >>"$aptlog" 2>&1 ||
      { echo "$prefix: cannot install $what: apt-get update failed: $(grep -E '^(E|W):' "$aptlog" | tail -n1) (log: $aptlog)" >&2; return 3; }
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "$@" >>"$aptlog" 2>&1 ||
      { echo "$prefix: cannot install $what: apt-get install failed: $(grep -E '^(E|W):' "$aptlog" | tail -n1) (log: $aptlog)" >&2; return 3; }
  fi
  rm -f "$aptlog"
  rig_say "installed"
}

# rig_munge_up RECORDS: make sure munged answers; if it has to start it, it
# records it in RECORDS as "munged" (so that only the script that started it
# stops it). Returns 1 with a message when munged cannot be started.
rig_munge_up() {
  local records=$1 pid
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
  id munge >/dev/null 2>&1 || { echo "user munge does not exist" >&2; return 1; }
  mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
  chown munge:munge /var/lib/munge /var/log/munge /run/munge /etc/munge
  chmod 0700 /etc/munge /var/log/munge
  chmod 0711 /var/lib/munge
  chmod 0755 /run/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    rig_say "creating /etc/munge/munge.key"
    mungekey --create --keyfile=/etc/munge/munge.key --force 2>/dev/null ||
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  rig_say "starting munged"
  # As the Debian unit does: run as the munge user. --force: ignore a stale socket.
  if ! runuser -u munge -- /usr/sbin/munged --force 9>&- 2>&1; then
    tail -n 20 /var/log/munge/munged.log >&2 2>/dev/null || true
    echo "munged failed to start" >&2
    return 1
  fi
  rig_until 10 "munged to answer" sh -c 'munge -n 2>/dev/null | unmunge >/dev/null 2>&1' || {
    tail -n 20 /var/log/munge/munged.log >&2 2>/dev/null || true
    return 1
  }
  pid=$(tr -dc '0-9' </run/munge/munged.pid 2>/dev/null)
  [[ -n $pid ]] && rig_record "$records" munged "$pid"
  return 0
}

# rig_munge_release RECORDS: the stop of the rig whose records are RECORDS
# no longer needs munged. If that rig started it (recorded "munged"), it is
# stopped — unless the other rig's Slurm controller still runs: the record
# then moves to that rig's records (under that rig's lock), whose stop will
# stop it.
rig_munge_release() {
  local own=$1 pid line f
  pid=$(rig_recorded "$own" munged | awk 'NR==1{print $2}')
  [[ -n $pid ]] || return 0
  line=$(awk -v p="$pid" '$1 == "munged" && $2 == p' "$own" | tail -n1)
  for f in "${FARM_SLURM_DIR:-/tmp/farm-slurm}/pids" "${FARM_CLUSTER_DIR:-/tmp/farm-cluster}/pids"; do
    [[ -e $f && ! $f -ef $own ]] || continue
    if [[ -n $(rig_recorded "$f" slurmctld) ]] &&
      (flock -w 30 7 && echo "$line" >>"$f") 7>"$(dirname "$f")/.lock"; then
      sed -i '/^munged /d' "$own"
      rig_say "munged left running for the Slurm recorded in $f"
      return 0
    fi
  done
  rig_stop "$own" munged 10
}

# rig_node_state NODE: the node's state in Slurm, lower case (idle, mixed,
# down*, ...), as sinfo shows it to the Slurm of $SLURM_CONF.
rig_node_state() { timeout 10 sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n1; }

# rig_node_ok NODE: the node can run jobs.
rig_node_ok() {
  case "$(rig_node_state "$1")" in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
  esac
}

# rig_cancel_jobs WAIT: cancel every job of the Slurm of $SLURM_CONF, if its
# controller answers, and wait up to WAIT seconds for the queue to empty.
rig_cancel_jobs() {
  local jobs i
  timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' || return 0
  jobs=$(timeout 10 squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ' || true)
  [[ -n ${jobs// /} ]] || return 0
  rig_say "cancelling jobs: $jobs"
  # shellcheck disable=SC2086
  timeout 10 scancel $jobs 2>/dev/null || true
  for ((i = 0; i < $1 * 5; i++)); do
    [[ -z $(timeout 10 squeue -h -o '%A' 2>/dev/null || true) ]] && break
    sleep 0.2
  done
}

# rig_slurm_conf_common [DBDHOST [DBDPORT]]: the slurm.conf settings both
# rigs share (root runs everything, munge, no cgroups, scheduling within
# about a second); accounting through the slurmdbd on DBDHOST (at DBDPORT,
# or Slurm's default 6819), or none.
rig_slurm_conf_common() {
  cat <<'EOF'
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
PropagateResourceLimits=NONE
SlurmctldDebug=info
SlurmdDebug=info
# scheduling: react within about a second
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1,batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MinJobAge=300
KillWait=5
OverTimeLimit=0
InactiveLimit=0
WaitTime=0
# job arrays: indexes 0..1000 (this is also Slurm's default)
MaxArraySize=1001
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
EOF
  if [[ -n ${1:-} ]]; then
    printf '# accounting: slurmdbd\nAccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=%s\n' "$1"
    [[ -z ${2:-} ]] || printf 'AccountingStoragePort=%s\n' "$2"
  else
    printf '# no accounting\nAccountingStorageType=accounting_storage/none\n'
  fi
}

# rig_real_memory: RealMemory for a node of this machine: its memory less a
# little, so that slurmd never drains it for "Low RealMemory". With CR_Core
# memory is not consumed: --mem only has to fit.
rig_real_memory() {
  local total
  total=$(free -m | awk '/^Mem:/ {print $2}')
  echo $((total > 2048 ? total - 512 : total * 9 / 10))
}

# Slurm's accounting (slurmdbd on Debian's MariaDB), for the tests that
# compare farm's core-hours with what Slurm records (sacct).

# rig_accounting_have: MariaDB's and slurmdbd's commands are installed.
rig_accounting_have() {
  local c
  for c in slurmdbd mariadbd mariadb-install-db mariadb sacctmgr sacct; do
    command -v "$c" >/dev/null 2>&1 || return 1
  done
}

# rig_accounting_install PREFIX: install slurmdbd and MariaDB if missing,
# without letting the packages start a MariaDB of the system's (a
# policy-rc.d that refuses, for the install only, where there is none).
# Returns 3 with a message if they cannot be installed.
rig_accounting_install() {
  local prefix=$1 rc=0 guard=
  rig_accounting_have && return 0
  if [[ $(id -u) -eq 0 && ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d && guard=1
  fi
  rig_apt_install "$prefix" "Slurm's accounting" slurmdbd mariadb-server || rc=$?
  [[ -z $guard ]] || rm -f /usr/sbin/policy-rc.d
  ((rc == 0)) || return "$rc"
  rig_accounting_have || { echo "$prefix: cannot install Slurm's accounting: packages installed but commands are still missing" >&2; return 3; }
}

# rig_db_answers SOCKET: the MariaDB on SOCKET answers root.
rig_db_answers() { mariadb --no-defaults -S "$1" -u root -e 'SELECT 1' >/dev/null 2>&1 || return 1; }

# rig_mariadb_up DIR RECORDS PORT: a MariaDB of its own (data in DIR/db,
# socket DIR/db.sock, TCP on 127.0.0.1:PORT), started if not running and
# recorded in RECORDS as "mariadbd", with Slurm's database and its user
# (slurm@127.0.0.1). Idempotent; returns 1 with a message on failure.
rig_mariadb_up() {
  local dir=$1 records=$2 port=$3
  if [[ -z $(rig_recorded "$records" mariadbd) ]]; then
    if [[ ! -d $dir/db/mysql ]]; then
      rm -rf "$dir/db"
      mariadb-install-db --no-defaults --datadir="$dir/db" --user=root --auth-root-authentication-method=socket \
        --skip-test-db >"$dir/db-install.log" 2>&1 ||
        { echo "mariadb-install-db failed: $(tail -n 3 "$dir/db-install.log")" >&2; return 1; }
    fi
    rm -f "$dir/db.pid"
    setsid mariadbd --no-defaults --user=root --datadir="$dir/db" --socket="$dir/db.sock" --pid-file="$dir/db.pid" \
      --port="$port" --bind-address=127.0.0.1 --skip-name-resolve --innodb-buffer-pool-size=64M \
      --innodb-lock-wait-timeout=900 --log-error="$dir/db.log" </dev/null >/dev/null 2>&1 9>&- &
    rig_until 30 "MariaDB's pid file" test -s "$dir/db.pid" || return 1
    rig_record "$records" mariadbd "$(tr -dc 0-9 <"$dir/db.pid")" ||
      { echo "mariadbd exited at once: $(tail -n 3 "$dir/db.log")" >&2; return 1; }
  fi
  rig_until 30 "MariaDB to answer" rig_db_answers "$dir/db.sock" || return 1
  mariadb --no-defaults -S "$dir/db.sock" -u root -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'farm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
    { echo "MariaDB: cannot make Slurm's database" >&2; return 1; }
}

# rig_dbd_answers: slurmdbd answers sacctmgr (through slurm.conf's
# AccountingStorageHost).
rig_dbd_answers() { timeout 10 sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1 || return 1; }

# rig_slurmdbd_up DIR RECORDS DBPORT CLUSTER [DBDADDR [DBDPORT]]: slurmdbd
# (slurmdbd.conf beside $SLURM_CONF, its pid file and log in DIR) over the
# MariaDB on 127.0.0.1:DBPORT, reached at DBDADDR (127.0.0.1 by default)
# on DBDPORT (Slurm's default 6819: slurmdbd listens on it on every
# address, so two of them need two ports), started if not running and
# recorded in RECORDS; then CLUSTER, an account "farm" in it and root's
# user of that account. slurm.conf must already name DBDADDR (and
# DBDPORT) as AccountingStorageHost (and AccountingStoragePort).
# Idempotent; returns 1 with a message on failure.
rig_slurmdbd_up() {
  local dir=$1 records=$2 port=$3 cluster=$4 addr=${5:-127.0.0.1} dbdport=${6:-} conf
  conf=$(dirname "${SLURM_CONF:-/etc/slurm/slurm.conf}")/slurmdbd.conf
  cat >"$conf.farm-new" <<EOC
# generated by farm integration/rig.sh (rig_slurmdbd_up)
AuthType=auth/munge
DbdHost=localhost
DbdAddr=$addr
${dbdport:+DbdPort=$dbdport}
SlurmUser=root
PidFile=$dir/slurmdbd.pid
LogFile=$dir/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$port
StorageUser=slurm
StoragePass=farm
StorageLoc=slurm_acct_db
EOC
  chmod 0600 "$conf.farm-new"
  if [[ -e $conf ]] && ! grep -q '^# generated by farm' "$conf" && [[ ! -e $conf.pre-farm ]]; then
    rig_say "keeping the existing $conf as $conf.pre-farm"
    cp -a "$conf" "$conf.pre-farm"
  fi
  mv -f "$conf.farm-new" "$conf"
  if [[ -z $(rig_recorded "$records" slurmdbd) ]]; then
    rm -f "$dir/slurmdbd.pid"
    slurmdbd >>"$dir/slurmdbd.start.log" 2>&1 9>&- || { echo "slurmdbd failed to start: $(tail -n 3 "$dir/slurmdbd.start.log")" >&2; return 1; }
    rig_until 30 "slurmdbd's pid file" test -s "$dir/slurmdbd.pid" || return 1
    rig_record "$records" slurmdbd "$(tr -dc 0-9 <"$dir/slurmdbd.pid")" ||
      { echo "slurmdbd exited at once: $(tail -n 3 "$dir/slurmdbd.log")" >&2; return 1; }
  fi
  rig_until 30 "slurmdbd to answer" rig_dbd_answers || return 1
  local have
  have=$(sacctmgr -n -P show cluster format=cluster 2>/dev/null)
  grep -qx "$cluster" <<<"$have" || sacctmgr -i add cluster "$cluster" >/dev/null ||
    { echo "sacctmgr could not add cluster $cluster" >&2; return 1; }
  have=$(sacctmgr -n -P show assoc where cluster="$cluster" user=root format=account 2>/dev/null)
  if ! grep -qx farm <<<"$have"; then
    sacctmgr -i add account farm cluster="$cluster" >/dev/null 2>&1 || true
    sacctmgr -i add user root account=farm cluster="$cluster" >/dev/null ||
      { echo "sacctmgr could not add root to account farm" >&2; return 1; }
  fi
}
