#!/usr/bin/env bash
# Measures the core churn benchmark of this tree against another revision in
# one run: both phalanx-core-bench binaries are built in Release (the
# setting of bench/run.sh), then run in turn ROUNDS times each, so a change
# in the machine's load hits both alike. Prints every run and the medians of
# admissions/s (CPU time) and, as a check that both decided alike, the
# admissions and gang writes per step (equal when the decisions are).
#
#   bench/perf/churn_ab.sh BASE_REF [ROUNDS]
#
# BASE_REF is a git revision, built in a temporary worktree (with ccache when
# present). This tree's binary is built in build-bench/. Environment: FILTER
# (default 'BM_SteadyChurn/nodes:10000/pending:100000/completions:256').
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
base_ref="${1:?usage: bench/perf/churn_ab.sh BASE_REF [ROUNDS]}"
rounds="${2:-5}"
filter="${FILTER:-BM_SteadyChurn/nodes:10000/pending:100000/completions:256}"
work="$(mktemp -d /tmp/churn-ab.XXXXXX)"
cleanup() {
  git -C "$root" worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

build_bench() {  # build_bench SRC BUILD
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if [ ! -f "$2/CMakeCache.txt" ]; then
    cmake -S "$1" -B "$2" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DPHALANX_WERROR=OFF >/dev/null
  fi
  cmake --build "$2" --target phalanx-core-bench -j "$(nproc)" >/dev/null
}

git -C "$root" worktree add --detach "$work/base-src" "$base_ref" >/dev/null
echo "building phalanx-core-bench at $base_ref and of this tree (Release)" >&2
build_bench "$work/base-src" "$work/base-build"
build_bench "$root" "$root/build-bench"
declare -A bin=(
  [base]="$work/base-build/bench/perf/phalanx-core-bench"
  [this]="$root/build-bench/bench/perf/phalanx-core-bench"
)

# One run: "admissions/s admitted/step written/step".
run_once() {
  "$1" --benchmark_filter="$filter" --benchmark_format=json 2>/dev/null |
    /usr/bin/python3 -c '
import json, sys
b = json.load(sys.stdin)["benchmarks"][0]
keys = ("gangs_per_s", "admitted_per_step", "gangs_written_per_step")
rate, admitted, written = (b[k] for k in keys)
print(f"{rate:.0f} {admitted:.2f} {written:.2f}")'
}

declare -A runs=()
for round in $(seq 1 "$rounds"); do
  for side in base this; do
    result="$(run_once "${bin[$side]}")"
    echo "round $round $side: $result admissions/s, admitted/step, written/step"
    runs[$side]+="$result"$'\n'
  done
done
for side in base this; do
  printf '%s' "${runs[$side]}" | /usr/bin/python3 -c '
import statistics, sys
rows = [line.split() for line in sys.stdin if line.strip()]
rates = [float(r[0]) for r in rows]
steps = sorted({(r[1], r[2]) for r in rows})
print(f"'"$side"': median {statistics.median(rates):,.0f} admissions/s "
      f"(min {min(rates):,.0f}, max {max(rates):,.0f}); "
      f"admitted/written per step {steps}")'
done
