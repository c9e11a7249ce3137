# cluster.conf.sh: the cluster rig's settings and small helpers, sourced by
# cluster-up, cluster-down and cluster. See integration/CLUSTER.md.

DIR=${FARM_CLUSTER_DIR:-/tmp/farm-cluster}       # state, logs, bricks

# The Gluster volumes, one per profile, each mounted at $MNT/<profile>:
#   default   Gluster's default options (client-side caches on)
#   coherent  close-to-open consistent: client-side caches off
#   latency   coherent, and every operation the bricks serve takes
#             LATENCY_US more (debug/delay-gen), like a busy metadata server
#   dht       coherent, distribute-replicate: 2 replica-2 subvolumes (4
#             bricks) under Gluster's distribute translator (DHT), which
#             places each name on a subvolume by a hash of the name: the
#             layout sites run, where link() is not exclusive
PROFILES="default coherent latency dht"

# cluster_settings: the settings from the environment (FARM_CLUSTER_*), or
# their defaults. A fresh cluster-up uses these and saves them in
# $DIR/settings.
cluster_settings() {
  MNT=${FARM_CLUSTER_MNT:-/mnt/farm-cluster}     # $MNT/<profile> on every node
  NODES=${FARM_CLUSTER_NODES:-4}                 # partition rig (the default)
  SPARE=${FARM_CLUSTER_SPARE_NODES:-2}           # partition spare, after them
  CPUS=${FARM_CLUSTER_CPUS:-4}                   # Slurm CPUs per node
  NET=${FARM_CLUSTER_NET:-10.199.77}             # a free /24: .1 head, .11.. nodes
  BRIDGE=${FARM_CLUSTER_BRIDGE:-farmbr0}
  NETNS=${FARM_CLUSTER_NETNS:-farm-node}         # farm-node1, farm-node2, ...
  VETH=${FARM_CLUSTER_VETH:-farmveth}            # head side of each node's link
  CTLD_PORT=${FARM_CLUSTER_SLURMCTLD_PORT:-6917} # beside slurm-up's 6817
  SLURMD_TIMEOUT=${FARM_CLUSTER_SLURMD_TIMEOUT:-20}
  LATENCY_US=${FARM_CLUSTER_LATENCY_US:-1000}    # the latency profile's delay
  TIMEOUT=${FARM_CLUSTER_TIMEOUT:-120}           # longest wait for any one step
  cluster_derived
}

# cluster_save_settings: write the settings to $DIR/settings.
cluster_save_settings() {
  local v
  for v in MNT NODES SPARE CPUS NET BRIDGE NETNS VETH CTLD_PORT SLURMD_TIMEOUT LATENCY_US TIMEOUT; do
    printf '%s=%q\n' "$v" "${!v}"
  done >"$DIR/settings"
}

cluster_derived() {
  ALL=$((NODES + SPARE))
  HEAD_IP=$NET.1
  SLURM_DIR=$DIR/slurm
  SLURM_CONF=$SLURM_DIR/etc/slurm.conf
}

# The settings of the rig that runs (or last ran) win over the environment,
# so that cluster, cluster-down and the health check of cluster-up act on
# the rig as it was started.
cluster_settings
if [[ -r $DIR/settings ]]; then
  # shellcheck disable=SC1091
  . "$DIR/settings"
  cluster_derived
fi

node_ip() { echo "$NET.$((10 + $1))"; }
vol_name() { echo "farm-$1"; }
node_partition() { if (($1 <= NODES)); then echo rig; else echo spare; fi; }
# vol_bricks PROFILE: the bricks of a profile's volume, in the order of
# 'gluster volume create' (with replica 2, bricks 1-2 are the first
# replica set, 3-4 the second): 4 for dht, 2 for the others.
vol_bricks() {
  local i n=2
  [[ $1 == dht ]] && n=4
  for ((i = 1; i <= n; i++)); do echo "$HEAD_IP:$DIR/bricks/$1.$i"; done
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
  for n in $(seq "$ALL"); do
    [[ -n $(node_pid "$n") ]] && node_ok "$n" || return 1
  done
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
