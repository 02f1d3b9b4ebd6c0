#!/bin/bash
# Runs phalanx-sim's evaluation matrix and writes one table of the goals
# (bench/results/matrix.md; see bench/README.md "The matrix"):
#   philly.csv on 48 nodes, and two synthetic mixes on 256 × 8 H100 (racks
#   of 16 nodes, blocks of 4 racks) — the LLM lab (`syn-`) and the
#   half-fleet profile whose largest gangs are half the fleet (`half-`) —
#   seeds 1–5 × loads 0.85 and 0.95; each cell once with checkpoints only
#   (every 30 min of run time, the default) and once with node failures too
#   (MTBF 6,000 h a node, 4 h to repair). Baselines: kueue-like, slurm-like
#   (EASY) and slurm-default. With --elastic, each synthetic cell also runs
#   with that share of its gangs of >= 64 GPUs elastic (`-e0.5-` in the
#   cell's name), and the table compares each policy with and without.
#
#   bench/sim/sim_matrix.sh [--sim PATH] [--out DIR] [--jobs N] [--quick]
#                       [--candidates "phalanx phalanx:depth=2 ..."]
#                       [--seeds "1 2"] [--modes "ckpt"] [--profiles "lab"]
#                       [--loads "0.95"] [--elastic "0 0.5"]
#
# --sim      the phalanx-sim binary (default build/bench/phalanx-sim)
# --out      where each cell's summary.json goes (default /tmp/phalanx-matrix)
# --jobs     cells at once (default 2, each under `nice -n 19`)
# --quick    synthetic seeds 1–2 only, no Philly (a smoke run)
# --no-philly  the synthetic cells only (for quick lever sweeps)
# --candidates  policies judged against the baselines, each in its own
#            table (default "phalanx"); any PolicyConfig override works
# --seeds    synthetic seeds (default "1 2 3 4 5")
# --modes    ckpt and/or fail (default "ckpt fail")
# --profiles lab and/or half-fleet (default "lab half-fleet")
# --loads    synthetic loads (default "0.85 0.95")
# --elastic  elastic fractions of the synthetic cells (default "0": none);
#            "0 0.5" runs every synthetic cell fixed and half elastic
# --table    the Markdown file written (default bench/results/matrix.md)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
sim=$root/build/bench/phalanx-sim
out=/tmp/phalanx-matrix
jobs=2
quick=0
philly=1
candidates="phalanx"
table=$root/bench/results/matrix.md
mtbf=6000
seeds="1 2 3 4 5"
modes="ckpt fail"
profiles="lab half-fleet"
loads="0.85 0.95"
elastic="0"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sim) sim=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --quick) quick=1; philly=0; shift ;;
    --no-philly) philly=0; shift ;;
    --candidates) candidates=$2; shift 2 ;;
    --table) table=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --profiles) profiles=$2; shift 2 ;;
    --loads) loads=$2; shift 2 ;;
    --elastic) elastic=$2; shift 2 ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "sim_matrix.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x $sim ]] || { echo "sim_matrix.sh: no $sim (build phalanx-sim)" >&2; exit 1; }

policies="kueue-like,slurm-like,slurm-default"
for c in $candidates; do policies="$policies,$c"; done

mkdir -p "$out"
cells=$out/cells.txt
: >"$cells"
# One line a cell: name, then phalanx-sim's arguments.
# (No trailing blank: xargs -L would join the next line to it.)
add() { echo "$*" | sed 's/ *$//' >>"$cells"; }
[[ $quick == 1 ]] && seeds="1 2"
for mode in $modes; do
  extra=""
  [[ $mode == fail ]] && extra="--node-mtbf-hours $mtbf"
  if [[ $philly == 1 ]]; then
    add "philly-$mode --trace $root/bench/traces/philly.csv --nodes 48 $extra"
  fi
  for profile in $profiles; do
    for fraction in $elastic; do
      prefix=syn
      [[ $profile == half-fleet ]] && prefix=half
      flex=""
      if [[ $fraction != 0 ]]; then
        prefix="$prefix-e$fraction"
        flex="--elastic-fraction $fraction"
      fi
      for load in $loads; do
        for seed in $seeds; do
          add "$prefix-l$load-s$seed-$mode --synthetic $seed --days 14" \
              "--load $load --profile $profile --seed $seed --failure-seed $seed" \
              "$flex $extra"
        done
      done
    done
  done
done

start=$(date +%s)
export sim out policies
# Philly first: it is the longest cell.
xargs -P "$jobs" -L 1 bash -c '
  name=$0
  mkdir -p "$out/$name"
  t0=$(date +%s%3N)
  nice -n 19 "$sim" "$@" --policies "$policies" --out "$out/$name" \
      --plot=false --progress=false >"$out/$name/stdout.md" \
      2>"$out/$name/stderr.txt" || { echo "cell $name failed" >&2; exit 255; }
  t1=$(date +%s%3N)
  ms=$((t1 - t0))
  printf "%s %d.%d s\n" "$name" $((ms / 1000)) $((ms % 1000 / 100)) | tee "$out/$name/wall.txt"
' <"$cells"
end=$(date +%s)

/usr/bin/python3 "$root/bench/sim/sim_matrix.py" --dir "$out" --cells "$cells" \
  --candidates "$candidates" --wall-seconds $((end - start)) --jobs "$jobs" \
  --mtbf-hours "$mtbf" --out "$table"
echo "wrote $table (matrix: $((end - start)) s)"
