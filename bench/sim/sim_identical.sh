#!/usr/bin/env bash
# Checks that two builds of phalanx-sim decide exactly alike: it replays the
# philly trace and two synthetic cells (one with node failures) through both
# and compares every output file byte for byte (summary.json without its
# wall-clock `sim_seconds`, summary.md likewise, every time series and every
# event log).
#
#   bench/sim/sim_identical.sh BASE_REF [CANDIDATE_SIM]
#
# BASE_REF is a git revision: its phalanx-sim is built in a temporary
# worktree (only the simulator and core, with ccache when present).
# CANDIDATE_SIM defaults to build/bench/phalanx-sim of this tree (built
# first). Exits 0 when every file matches, 1 naming the first that differs.
# Environment: SIM_IDENTICAL_KEEP=1 keeps the work folder; SIM_JOBS (default
# 20000; 0 = all) bounds each replay to the first N jobs.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
base_ref="${1:?usage: bench/sim/sim_identical.sh BASE_REF [CANDIDATE_SIM]}"
candidate="${2:-}"
jobs="${SIM_JOBS:-20000}"
work="$(mktemp -d /tmp/sim-identical.XXXXXX)"
cleanup() {
  git -C "$root" worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
  [ "${SIM_IDENTICAL_KEEP:-}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

build_sim() {  # build_sim SRC BUILD
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$1" -B "$2" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPHALANX_BENCH=ON >/dev/null
  cmake --build "$2" --target phalanx-sim -j "$(nproc)" >/dev/null
}

git -C "$root" worktree add --detach "$work/base-src" "$base_ref" >/dev/null
echo "building phalanx-sim at $base_ref" >&2
build_sim "$work/base-src" "$work/base-build"
base="$work/base-build/bench/phalanx-sim"
if [ -z "$candidate" ]; then
  echo "building phalanx-sim of this tree" >&2
  cmake --build build --target phalanx-sim -j "$(nproc)" >/dev/null
  candidate="$root/build/bench/phalanx-sim"
fi

# name | flags: philly as the bench runs it, a synthetic lab, and the same
# lab with node failures (repairs and evictions).
cells=(
  "philly|--trace $root/bench/traces/philly.csv --nodes 48"
  "synthetic|--synthetic 1 --days 7 --load 1.1"
  "failures|--synthetic 2 --days 7 --load 1.1 --node-mtbf-hours 200 --node-repair-hours 4"
)

status=0
for cell in "${cells[@]}"; do
  name="${cell%%|*}"
  read -r -a flags <<<"${cell#*|}"
  for side in base candidate; do
    bin="$base"
    [ "$side" = candidate ] && bin="$candidate"
    "$bin" "${flags[@]}" --max-jobs "$jobs" --event-log --plot=false \
      --progress=false --jobs 2 --out "$work/$side/$name" >/dev/null
    # sim_seconds is wall time, the only field allowed to differ.
    sed -i -E 's/"sim_seconds": *[0-9.eE+-]+/"sim_seconds": 0/' \
      "$work/$side/$name/summary.json"
    rm -f "$work/$side/$name/summary.md" "$work/$side/$name/plot.png"
  done
  if diff -r -q "$work/base/$name" "$work/candidate/$name"; then
    files=$(find "$work/base/$name" -type f | wc -l)
    echo "$name: $files files identical"
  else
    echo "$name: DIFFERS" >&2
    status=1
  fi
done
exit "$status"
