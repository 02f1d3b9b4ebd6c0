#!/usr/bin/env bash
# Checks that two builds of phalanx-sim decide exactly alike: it replays the
# philly trace and two synthetic cells (one with node failures) through both
# and compares every output file byte for byte (every time series and every
# event log), and summary.json value for value: every field the base wrote,
# except the wall-clock `sim_seconds`, must be equal in the candidate; fields
# only the candidate writes (new metrics) are listed, not compared.
#
#   bench/sim/sim_identical.sh BASE_REF [CANDIDATE_SIM]
#
# The policies compared are the four every revision knows (fifo,
# kueue-like, slurm-like, phalanx). BASE_REF is a git revision: its phalanx-sim is built in a temporary
# worktree (only the simulator and core, with ccache when present).
# CANDIDATE_SIM defaults to build/bench/phalanx-sim of this tree (built
# first). Exits 0 when every file matches, 1 naming the first that differs.
# Environment: SIM_IDENTICAL_KEEP=1 keeps the work folder; SIM_JOBS (default
# 20000; 0 = all) bounds each replay to the first N jobs; SIM_BASE_SIM, a
# phalanx-sim already built at BASE_REF, is used instead of building one
# (for builds made elsewhere, e.g. under a shared build lock).
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

base="${SIM_BASE_SIM:-}"
if [ -z "$base" ]; then
  git -C "$root" worktree add --detach "$work/base-src" "$base_ref" >/dev/null
  echo "building phalanx-sim at $base_ref" >&2
  build_sim "$work/base-src" "$work/base-build"
  base="$work/base-build/bench/phalanx-sim"
fi
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
      --policies fifo,kueue-like,slurm-like,phalanx \
      --progress=false --jobs 2 --out "$work/$side/$name" >/dev/null
    # sim_seconds is wall time, the only field allowed to differ.
    sed -i -E 's/"sim_seconds": *[0-9.eE+-]+/"sim_seconds": 0/' \
      "$work/$side/$name/summary.json"
    rm -f "$work/$side/$name/summary.md" "$work/$side/$name/plot.png"
  done
  if ! /usr/bin/python3 - "$work/base/$name/summary.json" \
    "$work/candidate/$name/summary.json" <<'PY'; then
import json, sys
base, cand = (json.load(open(p)) for p in sys.argv[1:3])
new = []
def same(b, c, path):
    if isinstance(b, dict) and isinstance(c, dict):
        new.extend(f"{path}.{k}" for k in c if k not in b)
        return all(k in c and same(b[k], c[k], f"{path}.{k}") for k in b)
    if b != c:
        print(f"summary.json{path}: {b!r} != {c!r}", file=sys.stderr)
        return False
    return True
ok = same(base, cand, "")
fields = sorted({p.split(".")[-1] for p in new})
if fields:
    print("  fields only the candidate writes: " + ", ".join(fields))
sys.exit(0 if ok else 1)
PY
    echo "$name: summary.json DIFFERS" >&2
    status=1
  fi
  rm -f "$work/base/$name/summary.json" "$work/candidate/$name/summary.json"
  # Every file the revision wrote must be byte-identical; files only this
  # tree writes (new reports) are listed, not compared.
  same_files=1
  while IFS= read -r file; do
    if ! cmp -s "$work/base/$name/$file" "$work/candidate/$name/$file"; then
      echo "$name: $file DIFFERS" >&2
      same_files=0
    fi
  done < <(cd "$work/base/$name" && find . -type f | sort)
  new_files=$(cd "$work/candidate/$name" && find . -type f | sort |
    while IFS= read -r file; do
      [ -e "$work/base/$name/$file" ] || printf ' %s' "${file#./}"
    done)
  if [ -n "$new_files" ]; then
    echo "  files only the candidate writes:$new_files"
  fi
  if [ "$same_files" = 1 ]; then
    files=$(($(find "$work/base/$name" -type f | wc -l) + 1))
    echo "$name: $files files identical (summary.json field by field)"
  else
    status=1
  fi
done
exit "$status"
