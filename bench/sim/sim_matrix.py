#!/usr/bin/python3
"""Folds the matrix cells' summary.json files into one Markdown table.

Used by sim_matrix.sh; see bench/README.md "The matrix". For each candidate
policy, one table: a row per cell, a column per goal (the candidate's figure
against kueue-like or slurm-like), the worst case over the cells, and
whether every cell meets the goal; then the absolute figures.
"""
import argparse
import json
import math
import os
import re

INF = float("inf")
# Both waits 0: the candidate cannot be lower; counts as met, never worst.
EQUAL = "0 = 0"


def p95(policy, key):
    d = policy.get(key)
    return None if d is None else d["p95"] / 3600.0


def quarter_longest(policy):
    v = policy.get("quarter_fleet_longest_wait_seconds")
    return None if v is None else v / 3600.0


def ratio(num, den):
    """num / den; EQUAL for 0 / 0, inf for x / 0."""
    if num is None or den is None:
        return None
    if den == 0:
        return EQUAL if num == 0 else INF
    return num / den


# (column, description, function(candidate, kueue, slurm) -> value,
#  better ("max" or "min": which end is the worst case), threshold check)
GOALS = [
    ("K hp p95 ×", "kueue-like ÷ candidate high-priority p95 wait, ≥ 6",
     lambda c, k, s: ratio(p95(k, "high_priority_wait_seconds"),
                           p95(c, "high_priority_wait_seconds")),
     "min", lambda v: v >= 6),
    ("K large p95 ×", "kueue-like ÷ candidate large-gang (≥ 64 GPUs) p95, ≥ 2",
     lambda c, k, s: ratio(p95(k, "large_wait_seconds"),
                           p95(c, "large_wait_seconds")),
     "min", lambda v: v >= 2),
    ("K blocked ×", "candidate ÷ kueue-like blocked GPU-hours, ≤ 0.5",
     lambda c, k, s: ratio(c["blocked_gpu_hours"], k["blocked_gpu_hours"]),
     "max", lambda v: v <= 0.5),
    ("K goodput Δpt", "candidate − kueue-like goodput utilization, points, ≥ −1",
     lambda c, k, s: 100 * (c["goodput_utilization"] - k["goodput_utilization"]),
     "min", lambda v: v >= -1 - 1e-9),
    ("K Jain Δ", "candidate − kueue-like Jain index, ≥ −0.02",
     lambda c, k, s: c["jain_fairness"] - k["jain_fairness"],
     "min", lambda v: v >= -0.02 - 1e-9),
    ("lost %", "candidate lost ÷ demand GPU-hours, %, ≤ 2",
     lambda c, k, s: 100 * c["lost_gpu_hours"] / c["demand_gpu_hours"],
     "max", lambda v: v <= 2),
    ("S hp p95 ×", "candidate ÷ slurm-like high-priority p95, ≤ 1",
     lambda c, k, s: ratio(p95(c, "high_priority_wait_seconds"),
                           p95(s, "high_priority_wait_seconds")),
     "max", lambda v: v <= 1 + 1e-9),
    ("S large p95 ×", "candidate ÷ slurm-like large-gang p95, ≤ 1",
     lambda c, k, s: ratio(p95(c, "large_wait_seconds"),
                           p95(s, "large_wait_seconds")),
     "max", lambda v: v <= 1 + 1e-9),
    ("S p95 ×", "candidate ÷ slurm-like overall p95 wait, ≤ 1",
     lambda c, k, s: ratio(p95(c, "wait_seconds"), p95(s, "wait_seconds")),
     "max", lambda v: v <= 1 + 1e-9),
    ("S ¼ p95 ×", "candidate ÷ slurm-like p95 wait of gangs of ≥ ¼ of the "
     "fleet, ≤ 1",
     lambda c, k, s: ratio(p95(c, "quarter_fleet_wait_seconds"),
                           p95(s, "quarter_fleet_wait_seconds")),
     "max", lambda v: v <= 1 + 1e-9),
    ("S ¼ longest ×", "candidate ÷ slurm-like longest wait of gangs of ≥ ¼ "
     "of the fleet, ≤ 1",
     lambda c, k, s: ratio(quarter_longest(c), quarter_longest(s)),
     "max", lambda v: v <= 1 + 1e-9),
    ("S blocked ×", "candidate ÷ slurm-like blocked GPU-hours, ≤ 1",
     lambda c, k, s: ratio(c["blocked_gpu_hours"], s["blocked_gpu_hours"]),
     "max", lambda v: v <= 1 + 1e-9),
    ("S goodput Δpt", "candidate − slurm-like goodput, points, ≥ −0.5",
     lambda c, k, s: 100 * (c["goodput_utilization"] - s["goodput_utilization"]),
     "min", lambda v: v >= -0.5 - 1e-9),
    ("S Jain Δ", "candidate − slurm-like Jain index, ≥ −0.01",
     lambda c, k, s: c["jain_fairness"] - s["jain_fairness"],
     "min", lambda v: v >= -0.01 - 1e-9),
]


def fmt(v, col):
    if v is None:
        return "–"
    if v is EQUAL:
        return EQUAL
    if v == INF:
        return "∞"
    if "Δ" in col and "Jain" in col:
        return f"{v:+.3f}"
    if "Δ" in col:
        return f"{v:+.2f}"
    if col.startswith("lost"):
        return f"{v:.3f}"
    return f"{v:.2f}"


def load(dirname, cells):
    out = []
    for name in cells:
        path = os.path.join(dirname, name, "summary.json")
        with open(path) as f:
            summary = json.load(f)
        wall = None
        wall_path = os.path.join(dirname, name, "wall.txt")
        if os.path.exists(wall_path):
            with open(wall_path) as f:
                wall = float(f.read().split()[1])
        out.append((name, summary, wall))
    return out


def candidate_table(cand, rows):
    lines = [f"### `{cand}` against the baselines", ""]
    header = "| cell | " + " | ".join(g[0] for g in GOALS) + " |"
    lines += [header, "| --- |" + " --- |" * len(GOALS)]
    values = {g[0]: [] for g in GOALS}
    for name, summary, _ in rows:
        pol = summary["policies"]
        c, k, s = pol[cand], pol["kueue-like"], pol["slurm-like"]
        cells = []
        for col, _, fn, _, ok in GOALS:
            v = fn(c, k, s)
            if v is not None:
                values[col].append((v, name))
            mark = "" if v is None or v is EQUAL or ok(v) else " ✗"
            cells.append(fmt(v, col) + mark)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    worst, met = [], []
    for col, _, _, end, ok in GOALS:
        vs = values[col]
        if not vs:
            worst.append("–")
            met.append("n/a")
            continue
        numbers = [x for x in vs if x[0] is not EQUAL]
        if numbers:
            v, where = (min if end == "min" else max)(numbers,
                                                      key=lambda x: x[0])
            worst.append(f"{fmt(v, col)} ({where})")
        else:
            worst.append(EQUAL)
        n_ok = sum(1 for x, _ in vs if x is EQUAL or ok(x))
        met.append("**met**" if n_ok == len(vs) else f"missed ({n_ok}/{len(vs)})")
    lines.append("| **worst** | " + " | ".join(worst) + " |")
    lines.append("| **goal** | " + " | ".join(met) + " |")
    lines.append("")
    return lines


BASELINES = ["kueue-like", "slurm-like", "slurm-default"]
SIZES = ["1-8", "9-63", "64-255", "256-511", "512-1023", "1024+"]


# The worst case over the cells of each policy against slurm-like.
SUMMARY = [
    ("large p95 ×", lambda c, s: ratio(p95(c, "large_wait_seconds"),
                                       p95(s, "large_wait_seconds")), "max"),
    ("¼ longest ×", lambda c, s: ratio(quarter_longest(c),
                                       quarter_longest(s)), "max"),
    ("hp p95 ×", lambda c, s: ratio(p95(c, "high_priority_wait_seconds"),
                                    p95(s, "high_priority_wait_seconds")),
     "max"),
    ("p95 ×", lambda c, s: ratio(p95(c, "wait_seconds"),
                                 p95(s, "wait_seconds")), "max"),
    ("blocked ×", lambda c, s: ratio(c["blocked_gpu_hours"],
                                     s["blocked_gpu_hours"]), "max"),
    ("goodput Δpt", lambda c, s: 100 * (c["goodput_utilization"]
                                        - s["goodput_utilization"]), "min"),
    ("Jain Δ", lambda c, s: c["jain_fairness"] - s["jain_fairness"], "min"),
]


def summary_table(pols, rows):
    lines = ["### Worst case against slurm-like, per policy", "",
             "Each cell: the worst value over the matrix's cells (the cell in "
             "brackets); ratios are policy ÷ slurm-like (lower is better), "
             "Δ are policy − slurm-like (higher is better).", "",
             "| policy | " + " | ".join(c for c, _, _ in SUMMARY) + " |",
             "| --- |" + " --- |" * len(SUMMARY)]
    for p in pols:
        cells = []
        for col, fn, end in SUMMARY:
            vs = [(fn(summary["policies"][p], summary["policies"]["slurm-like"]),
                   name) for name, summary, _ in rows]
            vs = [x for x in vs if x[0] is not None and x[0] is not EQUAL]
            if not vs:
                cells.append("–")
                continue
            v, where = (min if end == "min" else max)(vs, key=lambda x: x[0])
            cells.append(f"{fmt(v, col)} ({where})")
        lines.append(f"| `{p}` | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def median_table(pols, rows):
    lines = ["### Median over the cells against slurm-like, per policy", "",
             "Each cell: the median over the matrix's cells, and in brackets "
             "in how many cells the policy is no worse than slurm-like (cells "
             "where both are 0, or slurm-like is 0, left out of the ratios).",
             "", "| policy | " + " | ".join(c for c, _, _ in SUMMARY) + " |",
             "| --- |" + " --- |" * len(SUMMARY)]
    for p in pols:
        cells = []
        for col, fn, end in SUMMARY:
            vs = [fn(summary["policies"][p], summary["policies"]["slurm-like"])
                  for _, summary, _ in rows]
            vs = [v for v in vs if v is not None and v is not EQUAL
                  and v != INF]
            if not vs:
                cells.append("–")
                continue
            vs.sort()
            n = len(vs)
            med = vs[n // 2] if n % 2 else (vs[n // 2 - 1] + vs[n // 2]) / 2
            if end == "max":
                ok = sum(1 for v in vs if v <= 1 + 1e-9)
            else:
                ok = sum(1 for v in vs if v >= -1e-9)
            cells.append(f"{fmt(med, col)} ({ok}/{n})")
        lines.append(f"| `{p}` | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def absolute_table(cands, rows):
    pols = BASELINES + [c for c in cands if c not in BASELINES]
    lines = ["### Absolute figures", "",
             "p95 waits in hours (high-priority / large-gang / all), p95 and "
             "longest wait of gangs of ≥ ¼ of the fleet, blocked GPU-hours, "
             "goodput utilization, Jain, lost work as % of demand, "
             "preemptions, node failures / repaired / evicted gangs, the "
             "longest wait in hours per size class (GPUs "
             + " / ".join(SIZES) + "), wall seconds of the replay.", ""]
    lines += ["| cell | policy | hp p95 | large p95 | p95 | ¼ p95 | ¼ longest "
              "| blocked | goodput | Jain | lost % | preempt "
              "| fail / rep / evict | longest by size | sim s |",
              "| --- |" + " --- |" * 14]
    for name, summary, _ in rows:
        for p in pols:
            m = summary["policies"][p]

            def h(key):
                v = p95(m, key)
                return "–" if v is None else f"{v:.2f}"

            q = quarter_longest(m)
            by_size = m.get("longest_wait_seconds_by_size") or {}
            sizes = " / ".join("–" if by_size.get(k) is None
                               else f"{by_size[k] / 3600:.0f}" for k in SIZES)
            lines.append(
                f"| {name} | {p} | {h('high_priority_wait_seconds')} | "
                f"{h('large_wait_seconds')} | {h('wait_seconds')} | "
                f"{h('quarter_fleet_wait_seconds')} | "
                f"{'–' if q is None else f'{q:.1f}'} | "
                f"{m['blocked_gpu_hours']:.0f} | {m['goodput_utilization']:.3f} | "
                f"{m['jain_fairness']:.3f} | "
                f"{100 * m['lost_gpu_hours'] / m['demand_gpu_hours']:.3f} | "
                f"{m['preemptions']} | {m['node_failures']} / {m['repairs']} / "
                f"{m['evictions']} | {sizes} | {m['sim_seconds']:.1f} |")
    lines.append("")
    return lines


def p50(policy, key):
    d = policy.get(key)
    return None if d is None else d["p50"] / 3600.0


def median(values):
    vs = sorted(values)
    n = len(vs)
    if n == 0:
        return None
    return vs[n // 2] if n % 2 else (vs[n // 2 - 1] + vs[n // 2]) / 2


def elastic_pairs(rows):
    """(elastic cell, its fixed twin) for every `-eF-` cell whose twin ran."""
    by_name = {name: summary for name, summary, _ in rows}
    pairs = []
    for name, summary, _ in rows:
        twin = re.sub(r"-e[0-9.]+-", "-", name, count=1)
        if twin != name and twin in by_name:
            pairs.append((name, summary, by_name[twin]))
    return pairs


# (column, function(policy) -> value, digits): what the elastic section
# shows fixed -> elastic.
ELASTIC = [
    ("large p50 h", lambda m: p50(m, "large_wait_seconds"), 2),
    ("large p95 h", lambda m: p95(m, "large_wait_seconds"), 2),
    ("blocked", lambda m: m["blocked_gpu_hours"], 0),
    ("util", lambda m: m["utilization"], 3),
    ("goodput", lambda m: m["goodput_utilization"], 3),
    ("lost %", lambda m: 100 * m["lost_gpu_hours"] / m["demand_gpu_hours"], 3),
]


def elastic_tables(cands, rows):
    pairs = elastic_pairs(rows)
    if not pairs:
        return []
    pols = BASELINES + [c for c in cands if c not in BASELINES]
    lines = ["### Elastic against fixed", "",
             "Each `-eF-` cell (a share F of the gangs of ≥ 64 GPUs elastic "
             "down to half their pods, the same work at any size) against "
             "the same cell with every gang fixed, per policy: fixed → "
             "elastic. Large = gangs of ≥ 64 GPUs; blocked GPU-hours count "
             "an elastic gang at its minimum size. Then the elastic jobs, "
             "their admissions below full size, grows and shrinks.", ""]
    lines += ["| cell | policy | " + " | ".join(c for c, _, _ in ELASTIC)
              + " | elastic / below full / grows / shrinks |",
              "| --- | --- |" + " --- |" * (len(ELASTIC) + 1)]

    def cell(v, digits):
        return "–" if v is None else f"{v:.{digits}f}"

    for name, elastic, fixed in pairs:
        for p in pols:
            e, f = elastic["policies"][p], fixed["policies"][p]
            cells = [f"{cell(fn(f), d)} → {cell(fn(e), d)}"
                     for _, fn, d in ELASTIC]
            counts = " / ".join(str(e.get(k, "–")) for k in (
                "elastic_jobs", "elastic_admitted_below_full", "grows",
                "shrinks"))
            lines.append(f"| {name} | {p} | " + " | ".join(cells)
                         + f" | {counts} |")
    lines += ["", "Median over the cell pairs of elastic − fixed (waits in "
              "hours, blocked in GPU-hours, utilization, goodput and lost "
              "work in points), and in brackets the pairs where elastic is "
              "no worse (lower waits, blocked and lost; higher utilization "
              "and goodput): over all pairs, then per mix (the cell name's "
              "first part).", ""]
    mixes = sorted({name.split("-")[0] for name, _, _ in pairs})
    groups = [("all", pairs)]
    if len(mixes) > 1:
        groups += [(mix, [x for x in pairs if x[0].split("-")[0] == mix])
                   for mix in mixes]
    for group, members in groups:
        lines += [f"| {group}: policy | "
                  + " | ".join(c for c, _, _ in ELASTIC) + " |",
                  "| --- |" + " --- |" * len(ELASTIC)]
        lines += [elastic_median_row(p, members) for p in pols]
        lines.append("")
    return lines


def elastic_median_row(p, pairs):
    higher_better = {"util", "goodput"}
    cells = []
    for col, fn, _ in ELASTIC:
        deltas = []
        for _, elastic, fixed in pairs:
            a, b = fn(fixed["policies"][p]), fn(elastic["policies"][p])
            if a is not None and b is not None:
                deltas.append(b - a)
        if not deltas:
            cells.append("–")
            continue
        scale = 100 if col in higher_better else 1
        digits = 0 if col == "blocked" else 2
        ok = sum(1 for d in deltas
                 if (d >= -1e-9 if col in higher_better else d <= 1e-9))
        cells.append(f"{scale * median(deltas):+.{digits}f} "
                     f"({ok}/{len(deltas)})")
    return f"| `{p}` | " + " | ".join(cells) + " |"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cells", required=True)
    ap.add_argument("--candidates", default="phalanx")
    ap.add_argument("--wall-seconds", type=float, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--mtbf-hours", type=float, default=6000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.cells) as f:
        cells = [line.split()[0] for line in f if line.strip()]
    rows = load(args.dir, cells)
    cands = args.candidates.split()
    lines = ["# phalanx-sim matrix", "",
             f"{len(rows)} cells, {args.wall_seconds:.0f} s wall with "
             f"{args.jobs} cells at once (bench/sim/sim_matrix.sh). `-ckpt` cells: "
             "checkpoints every 30 min of run time; `-fail` cells: also node "
             f"failures, MTBF {args.mtbf_hours:g} h a node, 4 h repair. "
             "K = against kueue-like, S = against slurm-like; ✗ = goal "
             "missed in that cell; – = no such jobs (Philly has no "
             f"priorities); {EQUAL}: both p95 waits are 0 (met: nothing "
             "can be lower).", ""]
    compared = ["kueue-like", "slurm-default"] + [
        c for c in cands if c not in BASELINES]
    lines += summary_table(compared, rows)
    lines += median_table(compared, rows)
    for cand in cands:
        lines += candidate_table(cand, rows)
    lines += ["Goals: " + "; ".join(f"{g[0]}: {g[1]}" for g in GOALS) + ".", ""]
    lines += absolute_table(cands, rows)
    lines += elastic_tables(cands, rows)
    walls = [f"{n} {w:.0f} s" for n, _, w in rows if w is not None and n.startswith("philly")]
    if walls:
        lines += ["Philly cells' wall time (all policies of the cell, one "
                  "process): " + ", ".join(walls) + ".", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
