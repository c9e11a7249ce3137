# ceph.conf.sh: the rig's CephFS (integration/ceph-up): its settings and
# the helpers that ceph-up, ceph-down, cluster (a node's boot, kill-mds,
# start-mds) and cluster-down share. Sourced after cluster.conf.sh. See
# integration/CLUSTER.md, "CephFS".

CEPH_DIR=$DIR/ceph                  # ceph.conf, the daemons' data, records, logs
CEPH_CONF=$CEPH_DIR/ceph.conf
CEPH_PIDS=$CEPH_DIR/pids            # NAME PID STARTTIME, as the rig's (rig.sh)
CEPH_MNT=$MNT/ceph                  # where the head and every node mount it
CEPH_FS=farmfs                      # the filesystem's name
CEPH_MDS=a                          # the one MDS's name (mds.a)
# The monitor's ports on the head's address: msgr2 and the legacy one.
CEPH_MON_PORT=${FARM_CEPH_MON_PORT:-3300}
CEPH_MON_V1_PORT=${FARM_CEPH_MON_V1_PORT:-6789}
CEPH_OSDS=${FARM_CEPH_OSDS:-2}
# Each OSD's memstore: its objects in its memory, at most this many bytes.
CEPH_OSD_BYTES=${FARM_CEPH_OSD_BYTES:-1073741824}
# The MDS's cache, and each ceph-fuse client's object cache.
CEPH_MDS_CACHE=${FARM_CEPH_MDS_CACHE:-134217728}
CEPH_CLIENT_OC=${FARM_CEPH_CLIENT_OC:-33554432}

# ceph_cli ARGS...: the ceph command on the rig's cluster, bounded.
ceph_cli() { timeout 30 ceph -c "$CEPH_CONF" --connect-timeout 20 "$@"; }

# ceph_is_up: ceph-up finished (its env file) and its daemons are recorded.
ceph_is_up() { [[ -s $CEPH_DIR/env && -n $(rig_recorded "$CEPH_PIDS" "ceph-mon") ]]; }

# ceph_fuse_opts NAME: ceph-fuse's options for the client called NAME
# (head, node1, ...): the rig's ceph.conf, and an admin socket, a log and a
# pid file of its own (the nodes' PID namespaces reuse PIDs, so the
# defaults' $pid would not tell their clients apart).
ceph_fuse_opts() {
  echo "-c $CEPH_CONF --admin-socket $CEPH_DIR/run/client.$1.asok --log-file $CEPH_DIR/log/client.$1.log --pid-file $CEPH_DIR/run/client.$1.pid"
}

# ceph_mount_here NAME: mount the CephFS at $CEPH_MNT with ceph-fuse, in
# the namespaces this runs in (a node's: its init at boot, or ceph-up
# through nsenter; or the head's), replacing a copy of the head's mount
# inherited by a node's mount namespace. ceph-fuse returns once mounted.
ceph_mount_here() {
  local i
  for ((i = 0; i < 5; i++)); do
    in_mount_table "$CEPH_MNT" || break
    umount -l "$CEPH_MNT" 2>/dev/null || true
  done
  mkdir -p "$CEPH_MNT"
  # shellcheck disable=SC2046
  timeout 60 ceph-fuse $(ceph_fuse_opts "$1") "$CEPH_MNT" >>"$CEPH_DIR/log/client.$1.out" 2>&1 7>&- 8>&- 9>&- ||
    { echo "ceph-fuse could not mount $CEPH_MNT (see $CEPH_DIR/log/client.$1.log)" >&2; return 1; }
  for ((i = 0; i < 150; i++)); do
    mounted "$CEPH_MNT" && return 0
    sleep 0.2
  done
  echo "$CEPH_MNT did not answer after ceph-fuse mounted it" >&2
  return 1
}

# ceph_mds_active: the filesystem's rank 0 is up:active, by the monitor
# ("farmfs:1 {0=a=up:active}").
ceph_mds_active() { ceph_cli mds stat 2>/dev/null | grep -q "{0=$CEPH_MDS=up:active}"; }

# ceph_save_settings: the settings ceph-up started the cluster with, which
# ceph-down, cluster and the health check then use whatever the
# environment says.
ceph_save_settings() {
  local v
  for v in CEPH_MON_PORT CEPH_MON_V1_PORT CEPH_OSDS CEPH_OSD_BYTES CEPH_MDS_CACHE CEPH_CLIENT_OC; do
    printf '%s=%q\n' "$v" "${!v}"
  done >"$CEPH_DIR/settings"
}
if [[ -r $CEPH_DIR/settings ]]; then
  # shellcheck disable=SC1091
  . "$CEPH_DIR/settings"
fi

# ceph_record_pidfile NAME FILE: wait for FILE to name a running process,
# and record it in $CEPH_PIDS as NAME (once). Says why and returns 1 if not.
ceph_record_pidfile() {
  local p
  rig_until 30 "$2" sh -c "test -s $2 && test -e /proc/\$(tr -dc 0-9 <$2)" || { echo "$1 did not start ($2)" >&2; return 1; }
  p=$(tr -dc 0-9 <"$2")
  [[ -n $(rig_recorded "$CEPH_PIDS" "$1" | awk -v p="$p" '$2 == p') ]] || rig_record "$CEPH_PIDS" "$1" "$p" ||
    { echo "$1 ($p) exited at once" >&2; return 1; }
}

# ceph_daemon TYPE ID: start ceph-TYPE (mon, mgr, osd, mds) ID in the
# foreground (-f: it logs to its log file all the same) in a session of
# its own, its output to $CEPH_DIR/log, and record it as ceph-TYPE (an
# OSD as ceph-osd.ID). In the foreground, not daemonized, because the MDS
# and the manager respawn themselves (exec of their own command line) when
# the monitor fails them: daemonized, they would fork again, and live on
# under a PID that no record holds.
ceph_daemon() {
  local type=$1 id=$2 name=ceph-$1
  [[ $type != osd ]] || name=ceph-osd.$id
  rm -f "$CEPH_DIR/run/$type.$id.pid"
  setsid "ceph-$type" -f -c "$CEPH_CONF" -i "$id" </dev/null >>"$CEPH_DIR/log/$type.$id.out" 2>&1 7>&- 8>&- 9>&- &
  ceph_record_pidfile "$name" "$CEPH_DIR/run/$type.$id.pid"
}

# ceph_node_mounted N: node N (running) has its own client at $CEPH_MNT.
ceph_node_mounted() {
  local p
  p=$(node_pid "$1")
  [[ -n $p ]] && nsenter -t "$p" -m -p -- timeout 10 stat -f "$CEPH_MNT" >/dev/null 2>&1 &&
    nsenter -t "$p" -m -p -- awk -v m="$CEPH_MNT" '$2 == m && $3 ~ /ceph/ { f = 1 } END { exit !f }' /proc/self/mounts
}

# ceph_healthy: ceph-up's cluster runs: every daemon it recorded, rank 0
# active, the head's mount and every running node's answer.
ceph_healthy() {
  local d n
  ceph_is_up || return 1
  for d in ceph-mon ceph-mgr ceph-mds client:head; do
    [[ -n $(rig_recorded "$CEPH_PIDS" "$d") ]] || return 1
  done
  (($(rig_recorded "$CEPH_PIDS" 'ceph-osd.*' | wc -l) >= CEPH_OSDS)) || return 1
  mounted "$CEPH_MNT" || return 1
  ceph_mds_active || return 1
  for n in $(seq "$ALL"); do
    [[ -z $(node_pid "$n") ]] || ceph_node_mounted "$n" || return 1
  done
}
