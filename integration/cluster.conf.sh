# cluster.conf.sh: the cluster rig's settings and small helpers, sourced by
# cluster-up, cluster-down and cluster. See integration/CLUSTER.md.

DIR=${FARM_CLUSTER_DIR:-/tmp/farm-cluster}       # state, logs, bricks
MNT=${FARM_CLUSTER_MNT:-/mnt/farm-cluster}       # $MNT/<profile> on every node
NODES=${FARM_CLUSTER_NODES:-4}                   # partition rig (the default)
SPARE=${FARM_CLUSTER_SPARE_NODES:-2}             # partition spare, after them
ALL=$((NODES + SPARE))
CPUS=${FARM_CLUSTER_CPUS:-4}                     # Slurm CPUs per node
NET=${FARM_CLUSTER_NET:-10.199.77}               # a free /24: .1 head, .11.. nodes
BRIDGE=${FARM_CLUSTER_BRIDGE:-farmbr0}
NETNS=${FARM_CLUSTER_NETNS:-farm-node}           # farm-node1, farm-node2, ...
VETH=${FARM_CLUSTER_VETH:-farmveth}              # head side of each node's link
CTLD_PORT=${FARM_CLUSTER_SLURMCTLD_PORT:-6917}   # beside slurm-up's 6817
SLURMD_TIMEOUT=${FARM_CLUSTER_SLURMD_TIMEOUT:-20}
TIMEOUT=${FARM_CLUSTER_TIMEOUT:-120}             # longest wait for any one step
LATENCY_US=${FARM_CLUSTER_LATENCY_US:-1000}      # the latency profile's delay
# The Gluster volumes, one per profile, each mounted at $MNT/<profile>:
#   default   Gluster's default options (client-side caches on)
#   coherent  close-to-open consistent: client-side caches off
#   latency   coherent, and every operation the bricks serve takes
#             LATENCY_US more (debug/delay-gen), like a busy metadata server
PROFILES="default coherent latency"

HEAD_IP=$NET.1
SLURM_DIR=$DIR/slurm
SLURM_CONF=$SLURM_DIR/etc/slurm.conf

node_ip() { echo "$NET.$((10 + $1))"; }
vol_name() { echo "farm-$1"; }

# client_opts PROFILE: the glusterfs client's options for a volume.
# default: what mount.glusterfs does (1 s attribute and entry caches, the
# volume's client-side performance translators on). coherent: no kernel
# attribute, entry or negative caching and no page cache kept across opens,
# on a volume whose client-side caching translators are off (cluster-up);
# latency: as coherent.
client_opts() {
  echo "--process-name fuse --volfile-server=$HEAD_IP --volfile-id=$(vol_name "$1")"
  if [[ $1 != default ]]; then
    echo "--attribute-timeout=0 --entry-timeout=0 --negative-timeout=0 --fopen-keep-cache=off"
  fi
}

# node_pid N: the host PID of node N's init (pid 1 of its PID namespace),
# if it runs.
node_pid() { rig_recorded "$DIR/pids" "node:$1" | awk 'NR==1{print $2}'; }

# node_state N: node N's state in Slurm, lower case (idle, mixed, down*, ...).
node_state() { SLURM_CONF=$SLURM_CONF sinfo -h -N -n "node$1" -o '%T' 2>/dev/null | head -n1; }
node_ok() {
  case "$(node_state "$1")" in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
  esac
}

# cluster_healthy: every daemon cluster-up recorded runs, every node is up
# in Slurm, and the head's mounts answer.
cluster_healthy() {
  local n prof
  [[ -n $(rig_recorded "$DIR/pids" glusterd) ]] || return 1
  [[ -n $(rig_recorded "$DIR/pids" slurmctld) ]] || return 1
  for prof in $PROFILES; do
    mountpoint -q "$MNT/$prof" && timeout 10 stat -f "$MNT/$prof" >/dev/null || return 1
  done
  SLURM_CONF=$SLURM_CONF scontrol ping 2>/dev/null | grep -q 'is UP' || return 1
  for n in $(seq "$ALL"); do
    [[ -n $(node_pid "$n") ]] && node_ok "$n" || return 1
  done
}
