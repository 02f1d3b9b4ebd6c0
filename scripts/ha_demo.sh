#!/bin/bash
# The 3-replica HA setup of deploy/ha/ on this machine, without systemd: 3
# etcd members and 3 phalanxd replicas on loopback, started from the very
# env files and the ExecStart line of deploy/ha/*.service (only the binary,
# data and /etc/phalanx paths are swapped for local ones; the TLS files, the
# --auth file and the admin token come from deploy/phalanx-bootstrap, in
# $PHALANX_HA_DEMO_DIR/etc). README.md, "High availability: 3 replicas",
# walks through it.
#
#   scripts/ha_demo.sh start          # 3 etcd members + r0, r1, r2
#   scripts/ha_demo.sh status         # who leads: etcd's key, each replica's health
#   scripts/ha_demo.sh submit         # a gang through the leader (phalanxctl)
#   scripts/ha_demo.sh kill-leader    # kill -9 the leader; wait for another
#   scripts/ha_demo.sh restart r0     # bring a replica back (it stands by)
#   scripts/ha_demo.sh stop           # stop everything, remove the state
#
# State and logs live in $PHALANX_HA_DEMO_DIR (default /tmp/phalanx-ha-demo);
# binaries come from $PHALANX_BUILD_DIR (default build/), built if missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
demo=${PHALANX_HA_DEMO_DIR:-/tmp/phalanx-ha-demo}
build=${PHALANX_BUILD_DIR:-$root/build}
ha=$root/deploy/ha
phalanxd=$build/server/phalanxd
phalanxctl=$build/clients/phalanxctl
etc=$demo/etc
replicas=(r0 r1 r2)
members=(e0 e1 e2)

die() { echo "ha_demo: $*" >&2; exit 1; }
say() { echo "ha_demo: $*"; }

# The variables of an env file, exported into this shell.
load_env() { set -a; . "$1"; set +a; }

ensure_built() {
  [[ -x $phalanxd && -x $phalanxctl ]] && return
  [[ -f $build/build.ninja ]] ||
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPHALANX_BENCH=OFF >/dev/null
  nice cmake --build "$build" -j2 --target phalanxd phalanxctl
}

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# grpc.health.v1.Health/Check of service $2 at $1: SERVING, NOT_SERVING or
# the RPC error (UNAVAILABLE when nothing listens).
health() {
  /usr/bin/python3 - "$1" "$2" "$etc/tls/ca.crt" <<'EOF'
import sys, grpc
service = sys.argv[2].encode()
with open(sys.argv[3], "rb") as ca:
    channel = grpc.secure_channel(sys.argv[1], grpc.ssl_channel_credentials(ca.read()))
check = channel.unary_unary("/grpc.health.v1.Health/Check")
try:
    reply = check(b"\x0a" + bytes([len(service)]) + service, timeout=1)
    print({b"\x08\x01": "SERVING", b"\x08\x02": "NOT_SERVING"}.get(reply, reply.hex()))
except grpc.RpcError as error:
    print(error.code().name)
EOF
}

# Replica $1's listen address (from its env file).
address_of() { (load_env "$ha/phalanxd-$1.env"; echo "$PHALANX_LISTEN"); }

etcd_endpoints() { (load_env "$ha/phalanxd.env"; echo "$PHALANX_ETCD_ENDPOINTS"); }

etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$(etcd_endpoints)" "$@"; }

# phalanxctl as the admin of $etc (TLS, token).
ctl() { "$phalanxctl" --tls-ca "$etc/tls/ca.crt" --token-file "$etc/admin.token" "$@"; }

# The CA, server certificate, auth.json and admin token of the replicas.
make_secrets() {
  [[ -f $etc/auth.json ]] && return
  "$root/deploy/phalanx-bootstrap" --dir "$etc" --group "$(id -gn)" \
    --name localhost --name 127.0.0.1 >/dev/null
}

start_member() {
  local m=$1
  mkdir -p "$demo/etcd/$m"
  (
    load_env "$ha/etcd-$m.env"
    ETCD_DATA_DIR=$demo/etcd/$m
    [[ -d $ETCD_DATA_DIR/member ]] && ETCD_INITIAL_CLUSTER_STATE=existing
    exec /usr/bin/etcd
  ) >"$demo/etcd-$m.log" 2>&1 &
  echo $! >"$demo/etcd-$m.pid"
}

# The unit's ExecStart for replica $1, words one per line, with %i, the
# env files' variables, the binary and the data dir filled in.
replica_command() {
  local r=$1 line
  line=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$ha/phalanxd@.service" |
    sed 's/^ExecStart=//; s/\\$//' | tr '\n' ' ' | sed "s/%i/$r/g")
  (
    load_env "$ha/phalanxd.env"
    load_env "$ha/phalanxd-$r.env"
    # The demo's start-up files are the repo's deploy/ ones.
    PHALANX_STARTUP_FLAGS="--config=$root/deploy/config.json --fleet=$root/deploy/fleet.json --queues=$root/deploy/queues.json"
    eval "set -- $line"
    for word in "$@"; do
      case $word in
        /usr/bin/phalanxd) echo "$phalanxd" ;;
        --data-dir=/var/lib/phalanx/*) echo "--data-dir=$demo/${word#--data-dir=/var/lib/phalanx/}" ;;
        --etcd-prefix=*) echo "--etcd-prefix=/phalanx/demo" ;;
        *=/etc/phalanx/*) echo "${word%%=*}=$etc/${word#*=/etc/phalanx/}" ;;
        *) echo "$word" ;;
      esac
    done
  )
}

start_replica() {
  local r=$1
  pid_alive "$demo/$r.pid" && die "$r runs already"
  mapfile -t command < <(replica_command "$r")
  "${command[@]}" >>"$demo/$r.log" 2>&1 &
  echo $! >"$demo/$r.pid"
}

# The replica whose phalanx.v1.Leader health is SERVING; waits at most $1 s.
await_leader() {
  local deadline=$((SECONDS + $1)) r
  while ((SECONDS < deadline)); do
    for r in "${replicas[@]}"; do
      pid_alive "$demo/$r.pid" || continue
      if [[ $(health "$(address_of "$r")" phalanx.v1.Leader) == SERVING ]]; then
        echo "$r"
        return 0
      fi
    done
    sleep 0.2
  done
  return 1
}

cmd_start() {
  command -v /usr/bin/etcd >/dev/null || die "install etcd-server (scripts/setup.sh)"
  ensure_built
  mkdir -p "$demo"
  make_secrets
  for m in "${members[@]}"; do start_member "$m"; done
  local deadline=$((SECONDS + 30))
  until etcdctl_ endpoint health >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "etcd did not become healthy; see $demo/etcd-*.log"
    sleep 0.3
  done
  say "etcd: $(etcd_endpoints) healthy"
  for r in "${replicas[@]}"; do
    start_replica "$r"
    # r0 first, so that it leads.
    [[ $r == r0 ]] && { await_leader 30 >/dev/null || die "r0 did not lead; see $demo/r0.log"; }
  done
  sleep 1
  cmd_status
}

cmd_status() {
  say "election key: $(etcdctl_ get /phalanx/demo/leader --print-value-only 2>/dev/null || echo none)"
  local r state
  for r in "${replicas[@]}"; do
    if pid_alive "$demo/$r.pid"; then
      state="pid $(cat "$demo/$r.pid"), phalanx.v1.Leader: $(health "$(address_of "$r")" phalanx.v1.Leader)"
    else
      state="not running"
    fi
    say "$r $(address_of "$r"): $state"
  done
}

cmd_submit() {
  local leader
  leader=$(await_leader 30) || die "nobody leads"
  say "submitting through $leader ($(address_of "$leader"))"
  ctl --server "$(address_of "$leader")" submit \
    --queue llm-finetune --pods 1 --gpus 8 --request-id "demo-$(date +%s%N)"
}

cmd_kill_leader() {
  local leader next start
  leader=$(await_leader 5) || die "nobody leads"
  start=$(date +%s%N)
  kill -9 "$(cat "$demo/$leader.pid")"
  rm -f "$demo/$leader.pid"
  say "killed $leader (kill -9); waiting for another replica to lead"
  next=$(await_leader 60) || die "no replica took over; see $demo/r*.log"
  say "$next leads, $((($(date +%s%N) - start) / 1000000)) ms after the kill"
  cmd_status
}

cmd_stop() {
  local f
  for f in "$demo"/r?.pid "$demo"/etcd-e?.pid; do
    [[ -f $f ]] || continue
    pid_alive "$f" && kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 1
  for f in "$demo"/r?.pid "$demo"/etcd-e?.pid; do
    [[ -f $f ]] || continue
    pid_alive "$f" && kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  rm -rf "$demo"
  say "stopped; $demo removed"
}

case ${1:-} in
  start) cmd_start ;;
  status) cmd_status ;;
  submit) cmd_submit ;;
  kill-leader) cmd_kill_leader ;;
  restart) [[ -n ${2:-} ]] || die "restart which replica (r0, r1, r2)?"
    start_replica "$2"; sleep 1; cmd_status ;;
  stop) cmd_stop ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
