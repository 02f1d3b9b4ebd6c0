#!/bin/bash
# The scale grid (bench/README.md "Performance"): the core at
# 1k / 10k / 50k nodes × 10k / 100k / 1M pending gangs (and 0, the RSS
# baseline), one phalanx-scale-bench process a point, each under `timeout`,
# and the first full-fleet cycle over never-reached gangs (--waiting);
# then phalanxd restarts with 10k / 100k / 1M stored gangs
# (phalanx-scale-restart). Writes bench/results/scale.json and scale.md
# (bench/perf/assemble_scale.py) and the raw points in
# bench/results/raw/scale/.
#
#   bench/scale.sh [--quick]     (bench/run.sh --scale [--quick] runs this)
#
# Full: 3 repeats of the grid, 3 restarts a count (~15 min on 2 cores).
# Quick: 1k and 10k nodes × 10k and 100k pending, restarts at 10k and 100k,
# once (~1 min).
set -euo pipefail

mode=full
for arg in "$@"; do
  case "$arg" in
    --quick) mode=quick ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "scale.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
build=${PHALANX_BENCH_BUILD_DIR:-$root/build-bench}
results=$root/bench/results
raw=$results/raw/scale
if [[ $mode == quick ]]; then
  nodes=(1000 10000); pending=(0 10000 100000); repeats=1
  stored=10000,100000; restart_runs=1; seconds=2
else
  nodes=(1000 10000 50000); pending=(0 10000 100000 1000000); repeats=3
  stored=10000,100000,1000000; restart_runs=3; seconds=5
fi

start=$(date +%s)
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPHALANX_BENCH=ON >/dev/null
fi
cmake --build "$build" -j1 --target phalanx-scale-bench phalanx-scale-restart phalanxd
built=$(date +%s)
echo "scale.sh: built in $((built - start)) s" >&2

rm -rf "$raw"  # no stale points
mkdir -p "$raw"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$repeats"); do
  for n in "${nodes[@]}"; do
    for p in "${pending[@]}"; do
      extra=()
      [[ $p == 0 ]] && extra=(--rss_only)
      t0=$(date +%s.%N)
      # A point that fails or overruns is reported and left out.
      timeout 600 "$build/bench/perf/phalanx-scale-bench" --nodes "$n" \
        --pending "$p" --seconds "$seconds" "${extra[@]}" \
        --out "$raw/core-$n-$p-$r.json" ||
        { echo "scale.sh: point $n x $p failed" >&2; rm -f "$raw/core-$n-$p-$r.json"; }
      t1=$(date +%s.%N)
      printf 'scale.sh: repeat %d, %d nodes x %d pending: %.1f s (load %s)\n' \
        "$r" "$n" "$p" "$(echo "$t1 - $t0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)" >&2
    done
  done
  # The one-off rewrite of never-reached gangs' reasons: at 10k nodes the
  # fill is the first cycle that finds the fleet full.
  for p in "${pending[@]}"; do
    [[ $p == 0 ]] && continue
    timeout 600 "$build/bench/perf/phalanx-scale-bench" --nodes 10000 \
      --pending "$p" --waiting --max_cycles 0 --max_steps 0 \
      --out "$raw/stamp-10000-$p-$r.json" ||
      { echo "scale.sh: stamp point $p failed" >&2; rm -f "$raw/stamp-10000-$p-$r.json"; }
  done
done
core_done=$(date +%s)
echo "scale.sh: core grid took $((core_done - built)) s" >&2

timeout 3600 "$build/bench/perf/phalanx-scale-restart" --phalanxd="$build/server/phalanxd" \
  --stored="$stored" --runs="$restart_runs" --out="$raw/restart.json" ||
  echo "scale.sh: phalanx-scale-restart failed (partial results)" >&2
end=$(date +%s)
echo "scale.sh: restarts took $((end - core_done)) s" >&2
printf '{"load_before": "%s", "load_after": "%s", "seconds": %d, "mode": "%s"}\n' \
  "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "$((end - built))" "$mode" \
  >"$raw/meta.json"

cd "$root"
/usr/bin/python3 "$root/bench/perf/assemble_scale.py" "$raw" "$results"
/usr/bin/python3 "$root/bench/perf/assemble.py" --refresh-scale "$results"
echo "scale.sh: $mode run took $((end - start)) s ($((end - built)) s after the build)" >&2
