#!/bin/bash
# The HA mode's figures in one command (docs/ha.md, "Measured"): durable
# SubmitGang/s through a real phalanxd leader on a local 3-member etcd
# cluster at 1, 8 and 64 clients beside raw fenced etcd transactions of one
# log entry's size at the same concurrency; kill -9 and SIGSTOP failover
# times (3 rounds each); and a 100 000-gang snapshot written to etcd and
# loaded by an empty replica. Writes bench/results/ha.json and ha.md.
#
#   bench/ha_bench.sh [--quick]
#
# Builds phalanx-ha-bench, phalanx-etcd-bench and phalanxd in
# $PHALANX_BENCH_BUILD_DIR (default build-bench; configured Release when
# new). The run itself is bounded: `timeout` stops each part (150 s and
# 90 s; --quick: 1 s phases, 1 round, 20 000 gangs).
set -euo pipefail

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "ha_bench.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[[ -x /usr/bin/etcd ]] || { echo "ha_bench.sh: install etcd-server" >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PHALANX_BENCH_BUILD_DIR:-$root/build-bench}
results=$root/bench/results
mkdir -p "$results/raw"
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
nice cmake --build "$build" -j2 --target phalanx-ha-bench phalanx-etcd-bench phalanxd

seconds=3 rounds=3 gangs=100000
((quick)) && { seconds=1 rounds=1 gangs=20000; }
start=$(date +%s)
timeout 150 "$build/bench/perf/phalanx-ha-bench" --seconds="$seconds" \
  --failovers="$rounds" --out_json="$results/raw/ha.json" \
  --out_md="$results/raw/ha.md" >/dev/null
timeout 90 "$build/bench/perf/phalanx-etcd-bench" --writers= --seconds=1 \
  --snapshot_gangs="$gangs" >"$results/raw/etcd-snapshot.txt"
snapshot=$(grep '^snapshot ' "$results/raw/etcd-snapshot.txt" || echo "snapshot not measured")
took=$(($(date +%s) - start))

machine="$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
{
  echo "# HA bench, $(date -u +%Y-%m-%d) (bench/ha_bench.sh$([[ $quick == 1 ]] && echo ' --quick'))"
  echo
  echo "Machine: $machine; etcd $(/usr/bin/etcd --version | head -1 | awk '{print $3}'); run took ${took} s."
  echo
  cat "$results/raw/ha.md"
  echo
  echo "## Snapshot of the state (phalanx-etcd-bench --snapshot_gangs=$gangs)"
  echo
  echo '```'
  echo "$snapshot"
  echo '```'
} >"$results/ha.md"
/usr/bin/python3 - "$results/raw/ha.json" "$snapshot" "$results/ha.json" "$machine" <<'PY'
import json, sys
ha = json.load(open(sys.argv[1]))
snap = dict(kv.split("=", 1) for kv in sys.argv[2].split()[1:] if "=" in kv)
ha["snapshot"] = {k: (float(v) if v.replace(".", "", 1).lstrip("-").isdigit() else v)
                  for k, v in snap.items()}
ha["machine"] = sys.argv[4]
json.dump(ha, open(sys.argv[3], "w"), indent=1)
PY
cat "$results/ha.md"
