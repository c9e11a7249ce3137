# cluster.conf.sh: the cluster rig's settings and small helpers, sourced by
# cluster-up, cluster-down and cluster. See integration/CLUSTER.md.

DIR=${FARM_CLUSTER_DIR:-/tmp/farm-cluster}       # state, logs, bricks

# The Gluster volumes, one per profile, each mounted at $MNT/<profile>:
#   default   Gluster's default options (client-side caches on)
#   coherent  close-to-open consistent: client-side caches off
#   latency   coherent, and every operation the bricks serve takes
#             LATENCY_US more (debug/delay-gen), like a busy metadata server
#   dht       coherent, distribute-replicate: 2 replica sets under
#             Gluster's distribute translator (DHT), which places each name
#             on a set by a hash of the name: the layout sites run, where
#             link() is not exclusive. Each set 2 bricks (DHT_LAYOUT
#             replica2, the default), or 2 and an arbiter (arbiter), or 3
#             (replica3): integration/CLUSTER.md says why replica2
PROFILES="default coherent latency dht"

# cluster_settings: the settings from the environment (FARM_CLUSTER_*), or
# their defaults. A fresh cluster-up uses these and saves them in
# $DIR/settings.
cluster_settings() {
  MNT=${FARM_CLUSTER_MNT:-/mnt/farm-cluster}     # $MNT/<profile> on every node
  NODES=${FARM_CLUSTER_NODES:-4}                 # partition rig (the default)
  SPARE=${FARM_CLUSTER_SPARE_NODES:-2}           # partition spare, after them
  CPUS=${FARM_CLUSTER_CPUS:-4}                   # Slurm CPUs per node
  # Partition many (node1..node$NODES, as rig): each CPU may be given to
  # OVERSUBSCRIBE jobs at once (OverSubscribe=FORCE), so that up to
  # CPUS x OVERSUBSCRIBE one-CPU meta-jobs run on each node at once (128
  # with the defaults): the benchmarks of many meta-jobs a node
  OVERSUBSCRIBE=${FARM_CLUSTER_OVERSUBSCRIBE:-32}
  NET=${FARM_CLUSTER_NET:-10.199.77}             # a free /24: .1 head, .11.. nodes
  BRIDGE=${FARM_CLUSTER_BRIDGE:-farmbr0}
  NETNS=${FARM_CLUSTER_NETNS:-farm-node}         # farm-node1, farm-node2, ...
  VETH=${FARM_CLUSTER_VETH:-farmveth}            # head side of each node's link
  CTLD_PORT=${FARM_CLUSTER_SLURMCTLD_PORT:-6917} # beside slurm-up's 6817
  SLURMD_TIMEOUT=${FARM_CLUSTER_SLURMD_TIMEOUT:-20}
  MESSAGE_TIMEOUT=${FARM_CLUSTER_MESSAGE_TIMEOUT:-10}
  LATENCY_US=${FARM_CLUSTER_LATENCY_US:-1000}    # the latency profile's delay
  TIMEOUT=${FARM_CLUSTER_TIMEOUT:-120}           # longest wait for any one step
  DHT_LAYOUT=${FARM_CLUSTER_DHT_LAYOUT:-replica2} # the dht volume's replica sets
  # Slurm's accounting (slurmdbd on a MariaDB of the rig's own), so that
  # sacct answers for the rig's jobs: 1 (the default, unless
  # FARM_SLURM_ACCOUNTING=0 says none for slurm-up's Slurm too) or 0. Its
  # ports are beside slurm-up's (MariaDB 3307, slurmdbd 6819, which
  # slurmdbd listens on on every address).
  ACCT=${FARM_CLUSTER_ACCOUNTING:-${FARM_SLURM_ACCOUNTING:-1}}
  DB_PORT=${FARM_CLUSTER_DB_PORT:-3308}          # MariaDB, on 127.0.0.1
  DBD_PORT=${FARM_CLUSTER_SLURMDBD_PORT:-6919}   # slurmdbd, reached at the head's address
  cluster_derived
}

# cluster_save_settings: write the settings to $DIR/settings.
cluster_save_settings() {
  local v
  for v in MNT NODES SPARE CPUS OVERSUBSCRIBE NET BRIDGE NETNS VETH CTLD_PORT SLURMD_TIMEOUT MESSAGE_TIMEOUT LATENCY_US TIMEOUT DHT_LAYOUT ACCT DB_PORT DBD_PORT; do
    printf '%s=%q\n' "$v" "${!v}"
  done >"$DIR/settings"
}

cluster_derived() {
  ALL=$((NODES + SPARE))
  HEAD_IP=$NET.1
  SLURM_DIR=$DIR/slurm
  SLURM_CONF=$SLURM_DIR/etc/slurm.conf
  ACCT_DIR=$DIR/acct # MariaDB's data, socket and log; slurmdbd's pid file and log
}

# The settings of the rig that runs (or last ran) win over the environment,
# so that cluster, cluster-down and the health check of cluster-up act on
# the rig as it was started.
cluster_settings
if [[ -r $DIR/settings ]]; then
  DHT_LAYOUT=replica2 # a rig started before the setting existed
  ACCT=                # a rig started before accounting existed: unhealthy
  # shellcheck disable=SC1091
  . "$DIR/settings"
  cluster_derived
fi

node_ip() { echo "$NET.$((10 + $1))"; }
vol_name() { echo "farm-$1"; }
node_partition() { if (($1 <= NODES)); then echo rig; else echo spare; fi; }
# dht_layout_ok LAYOUT: LAYOUT is one the dht volume can have.
dht_layout_ok() { [[ $1 == replica2 || $1 == arbiter || $1 == replica3 ]]; }
# vol_replica PROFILE: the replica clause of 'gluster volume create' for
# the profile's volume: replica 2 but for dht, whose sets DHT_LAYOUT
# chooses: replica2 (2 bricks), arbiter ("replica 3 arbiter 1": 2 data
# bricks and an arbiter, which holds the names and their metadata, no
# data), replica3 (3 data bricks).
vol_replica() {
  if [[ $1 != dht ]]; then
    echo "replica 2"
    return
  fi
  case $DHT_LAYOUT in
    arbiter) echo "replica 3 arbiter 1" ;;
    replica3) echo "replica 3" ;;
    *) echo "replica 2" ;;
  esac
}
# vol_set_size PROFILE: the bricks of one replica set.
vol_set_size() {
  case "$(vol_replica "$1")" in
    "replica 3"*) echo 3 ;;
    *) echo 2 ;;
  esac
}
# vol_bricks PROFILE: the bricks of a profile's volume, in the order of
# 'gluster volume create': consecutive groups of vol_set_size bricks are the
# replica sets. dht: 2 sets (replica2: bricks 1-2 and 3-4; arbiter and
# replica3: 1-3 and 4-6, with an arbiter the third of each); the others: 1.
vol_bricks() {
  local i n
  n=$(vol_set_size "$1")
  [[ $1 == dht ]] && n=$((2 * n))
  for ((i = 1; i <= n; i++)); do echo "$HEAD_IP:$DIR/bricks/$1.$i"; done
}
# vol_layout PROFILE: the volume's layout, in words.
vol_layout() {
  local n k
  n=$(vol_bricks "$1" | wc -l)
  k=$(vol_set_size "$1")
  case "$(vol_replica "$1")" in
    *arbiter*) echo "$((n / k)) x (2 + 1 arbiter) distribute-replicate" ;;
    *) if ((n > k)); then echo "$((n / k)) x $k distribute-replicate"; else echo "replica $k"; fi ;;
  esac
}
# brick_role PROFILE I: brick I's place in its replica set ("data brick 1
# of set 1", "the arbiter of set 2").
brick_role() {
  local k j
  k=$(vol_set_size "$1")
  j=$((($2 - 1) % k + 1))
  if [[ $(vol_replica "$1") == *arbiter* ]] && ((j == k)); then
    echo "the arbiter of set $((($2 - 1) / k + 1))"
  else
    echo "data brick $j of set $((($2 - 1) / k + 1))"
  fi
}
# brick_pidfile PROFILE I: the pid file glusterd keeps for brick I of the
# profile's volume (HOST-PATH.pid, the path's slashes made dashes).
brick_pidfile() {
  echo "/var/run/gluster/vols/$(vol_name "$1")/$HEAD_IP-$(echo "$DIR/bricks/$1.$2" | sed 's|^/||; s|/|-|g').pid"
}

# client_opts PROFILE: the glusterfs client's options for a volume.
# default: what mount.glusterfs does (1 s attribute and entry caches, the
# volume's client-side performance translators on). coherent: no kernel
# attribute, entry or negative caching and no page cache kept across opens,
# on a volume whose client-side caching translators are off (cluster-up);
# latency and dht: as coherent.
client_opts() {
  echo "--process-name fuse --volfile-server=$HEAD_IP --volfile-id=$(vol_name "$1")"
  if [[ $1 != default ]]; then
    echo "--attribute-timeout=0 --entry-timeout=0 --negative-timeout=0 --fopen-keep-cache=off"
  fi
}

# mounted DIR: a filesystem that answers is mounted at DIR (a hung FUSE
# mount does not hang the caller).
mounted() { timeout 10 mountpoint -q "$1" && timeout 10 stat -f "$1" >/dev/null 2>&1; }

# in_mount_table DIR: something is mounted at DIR in this mount namespace,
# by /proc/self/mounts. Unlike mountpoint(1), which stats DIR, it also sees a
# FUSE mount whose client has died (every stat there fails: "Transport
# endpoint is not connected"): what a killed session or machine leaves.
in_mount_table() {
  local p=${1//\\/\\134}
  p=${p// /\\040}
  P=$p awk '$2 == ENVIRON["P"] { found = 1 } END { exit !found }' /proc/self/mounts
}

# stale_mount DIR: a mount at DIR that no longer answers (its client died).
stale_mount() { in_mount_table "$1" && ! timeout 10 stat -f "$1" >/dev/null 2>&1; }

# cluster_record_pidfile NAME FILE: wait for FILE to name a running
# process, and record it in $DIR/pids as NAME (once). Says why and returns 1
# if it does not.
cluster_record_pidfile() {
  local p
  rig_until 30 "$2" sh -c "test -s $2 && test -e /proc/\$(tr -dc 0-9 <$2)" || { echo "$1 did not start ($2)" >&2; return 1; }
  p=$(tr -dc 0-9 <"$2")
  [[ -n $(rig_recorded "$DIR/pids" "$1" | awk -v p="$p" '$2 == p') ]] || rig_record "$DIR/pids" "$1" "$p" ||
    { echo "$1 ($p) exited at once" >&2; return 1; }
}

# volume_make PROFILE: create the profile's volume on its bricks (new,
# empty directories), set its options, start it, and record its bricks and
# the self-heal daemon. cluster-up makes every volume so, and 'cluster
# recreate-volume' one volume of a running rig. Says why and returns 1 on
# a failure.
volume_make() {
  local prof=$1 vol out opt pf
  local -a bricks opts=()
  vol=$(vol_name "$prof")
  mapfile -t bricks < <(vol_bricks "$prof")
  rig_say "glusterfs: volume $vol ($(vol_layout "$prof"), profile $prof)"
  # With more bricks than one replica set, a distribute-replicate volume:
  # consecutive groups of bricks are replica sets, and DHT spreads the
  # names over the sets. force: the bricks are on this host's root
  # filesystem, all of them on one host.
  # shellcheck disable=SC2046
  out=$(timeout 60 gluster --mode=script volume create "$vol" $(vol_replica "$prof") "${bricks[@]}" force 2>&1) ||
    { echo "gluster volume create $vol: $out" >&2; return 1; }
  if [[ $prof != default ]]; then
    # Close-to-open consistency between clients: no client-side caches.
    for opt in performance.quick-read performance.stat-prefetch performance.write-behind \
      performance.open-behind performance.io-cache performance.read-ahead \
      performance.readdir-ahead performance.nl-cache performance.parallel-readdir; do
      opts+=("$opt off")
    done
  fi
  if [[ $prof == latency ]]; then
    # Every operation that reaches the bricks' lock translator or below
    # (every one but what the clients answer from their own state) waits
    # LATENCY_US in the bricks' I/O threads: a slow metadata server. (This
    # kernel has no netem to delay the network itself.) Fixed at start:
    # delay-gen reads its options only then.
    opts+=("debug.delay-gen locks" "delay-gen.delay-duration $LATENCY_US" "delay-gen.delay-percentage 100")
  fi
  if [[ $prof == dht ]]; then
    # Client quorum (auto): a client writes to a replica set only while
    # it sees more than half of its bricks, or half of them including the
    # first. Replica 2 (where Gluster's default is none): without it, a
    # pair whose brick is reconnecting can take two creates of one name,
    # one per brick (a GFID split-brain); with it, the pair is read-only
    # (EROFS) while its first brick is down, writable while its second is.
    # Sets of 3 (where auto is Gluster's default already): any one brick
    # may be down. integration/CLUSTER.md.
    opts+=("cluster.quorum-type auto")
  fi
  for opt in "${opts[@]}"; do
    # shellcheck disable=SC2086
    out=$(timeout 60 gluster --mode=script volume set "$vol" $opt 2>&1) || { echo "gluster volume set $vol $opt: $out" >&2; return 1; }
  done
  out=$(timeout 60 gluster --mode=script volume start "$vol" 2>&1) || { echo "gluster volume start $vol: $out" >&2; return 1; }
  # The bricks and the self-heal daemon (one for all volumes) that
  # glusterd started for this volume.
  rig_until 30 "the pid files of $vol's ${#bricks[@]} bricks" sh -c "test \$(ls /var/run/gluster/vols/$vol/*.pid 2>/dev/null | wc -l) -ge ${#bricks[@]}" ||
    { echo "the bricks of $vol did not start" >&2; return 1; }
  for pf in /var/run/gluster/vols/"$vol"/*.pid; do
    cluster_record_pidfile "brick:$vol" "$pf" || return 1
  done
  cluster_record_pidfile glustershd "/var/run/gluster/shd/$vol/$vol-shd.pid"
}

# volume_mount_head PROFILE: the head's own client of the profile's
# volume, at the same path as every node's, recorded.
volume_mount_head() {
  local prof=$1
  mkdir -p "$MNT/$prof"
  # shellcheck disable=SC2046
  glusterfs $(client_opts "$prof") -p "$DIR/run/head.$prof.pid" -l "$DIR/log/client.head.$prof.log" "$MNT/$prof" 7>&- 9>&- ||
    { echo "mounting $(vol_name "$prof") on $MNT/$prof failed" >&2; return 1; }
  grep -qxF "mount $MNT/$prof" "$DIR/created" 2>/dev/null || echo "mount $MNT/$prof" >>"$DIR/created"
  rig_until 30 "$MNT/$prof to be mounted" mounted "$MNT/$prof" || { echo "$MNT/$prof did not come up" >&2; return 1; }
  cluster_record_pidfile "client:head:$prof" "$DIR/run/head.$prof.pid" || return 1
  chmod 1777 "$MNT/$prof"
}

# node_pid N: the host PID of node N's init (pid 1 of its PID namespace),
# if it runs.
node_pid() { rig_recorded "$DIR/pids" "node:$1" | awk 'NR==1{print $2}'; }

# node_state N: node N's state in Slurm, lower case (idle, mixed, down*, ...).
node_state() { SLURM_CONF=$SLURM_CONF rig_node_state "node$1"; }
node_ok() { SLURM_CONF=$SLURM_CONF rig_node_ok "node$1"; }

# cluster_healthy: every daemon cluster-up recorded runs, every node is up
# in Slurm, and the head's mounts answer.
cluster_healthy() {
  local n prof
  [[ -n $(rig_recorded "$DIR/pids" glusterd) ]] || return 1
  [[ -n $(rig_recorded "$DIR/pids" slurmctld) ]] || return 1
  for prof in $PROFILES; do
    mounted "$MNT/$prof" || return 1
  done
  SLURM_CONF=$SLURM_CONF timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' || return 1
  # Every partition cluster-up makes (a rig started before partition many
  # existed is started afresh).
  SLURM_CONF=$SLURM_CONF timeout 10 scontrol show partition many >/dev/null 2>&1 || return 1
  for n in $(seq "$ALL"); do
    [[ -n $(node_pid "$n") ]] && node_ok "$n" || return 1
  done
  # Its accounting, if it was started with it (a rig from before the rig
  # had any is started afresh).
  [[ -n $ACCT ]] || return 1
  if [[ $ACCT == 1 ]]; then
    [[ -n $(rig_recorded "$DIR/pids" mariadbd) && -n $(rig_recorded "$DIR/pids" slurmdbd) ]] || return 1
    SLURM_CONF=$SLURM_CONF rig_dbd_answers || return 1
  fi
}

# The lock a test run holds, shared, while it uses the rig (run-tests):
# cluster-down, and a cluster-up that would rebuild the rig, refuse while
# it is held.
INUSE=$DIR/.inuse

# cluster_not_in_use: take the in-use lock exclusively on fd 7, or say who
# holds it and fail.
cluster_not_in_use() {
  exec 7>"$INUSE"
  flock -xn 7 && return 0
  echo "$RIG_NAME: the rig is in use by a test run (integration/run-tests holds a lock on $INUSE); run this again when the run has ended" >&2
  return 1
}
