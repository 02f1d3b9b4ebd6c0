#!/bin/bash
# Runs Phalanx's performance suites and writes bench/results/latest.json and
# latest.md (see bench/perf/README.md).
#
#   bench/run.sh [--quick] [--scale]
#
# --scale runs the scale grid instead (bench/scale.sh: bench/results/scale.*;
# with --quick, its small grid).
#
# Builds phalanx-core-bench, phalanx-load and phalanxd (Release, -j1) in
# $PHALANX_BENCH_BUILD_DIR (default build-bench), runs the core benchmarks
# and the gRPC load generator, and folds both into one JSON and one table.
set -euo pipefail

mode=full
scale=0
for arg in "$@"; do
  case "$arg" in
    --quick) mode=quick ;;
    --scale) scale=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $scale == 1 ]]; then
  scale_flag=()
  [[ $mode == quick ]] && scale_flag=(--quick)
  exec "$root/bench/scale.sh" "${scale_flag[@]}"
fi
build=${PHALANX_BENCH_BUILD_DIR:-$root/build-bench}
results=$root/bench/results
mkdir -p "$results/raw"
quick_flag=()
[[ $mode == quick ]] && quick_flag=(--quick)

start=$(date +%s)
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j1 --target phalanx-core-bench phalanx-load phalanxd phalanx-empty-rpc
built=$(date +%s)
echo "run.sh: built in $((built - start)) s" >&2

rm -f "$results/raw/core-bench.json" "$results/raw/load.json"  # no stale figures
echo "run.sh: core benchmarks ($mode)" >&2
# A failed suite is reported and its figures come out "not measured".
"$build/bench/perf/phalanx-core-bench" "${quick_flag[@]}" \
  --benchmark_format=json --benchmark_out_format=json \
  --benchmark_out="$results/raw/core-bench.json" >/dev/null ||
  echo "run.sh: phalanx-core-bench failed" >&2

echo "run.sh: load generator against phalanxd ($mode)" >&2
"$build/bench/perf/phalanx-load" "${quick_flag[@]}" \
  --phalanxd="$build/server/phalanxd" \
  --empty_rpc="$build/bench/perf/phalanx-empty-rpc" --out="$results/raw/load.json" ||
  echo "run.sh: phalanx-load failed (partial results)" >&2

cd "$root"
/usr/bin/python3 "$root/bench/perf/assemble.py" "$mode" \
  "$results/raw/core-bench.json" "$results/raw/load.json" "$results"
end=$(date +%s)
echo "run.sh: $mode run took $((end - start)) s ($((end - built)) s after the build)" >&2
