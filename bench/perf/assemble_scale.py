#!/usr/bin/python3
"""Folds the scale grid (bench/scale.sh) into bench/results/scale.json and
scale.md: each figure at each size, and how each cost grows.

usage: assemble_scale.py RAW_DIR OUT_DIR

RAW_DIR holds core-<nodes>-<pending>-<repeat>.json (phalanx-scale-bench),
stamp-<nodes>-<pending>-<repeat>.json (the same with --waiting: its fill is
the first full-fleet cycle over never-reached gangs), restart.json
(phalanx-scale-restart) and meta.json (scale.sh: load, mode). In quick mode
(two sizes, one repeat) the exponents are shown but superlinear terms are
not counted. A figure measured in several
repeats is their median. Growth: the exponent k of a least-squares fit of
log(cost) on log(size) over the series (cost ~ size^k), named by
growth_class(). Standard library only.
"""
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

# Exponent bounds of the classes: a cost that grows as log(size) over a
# 10x..100x span fits k ~ 0.05..0.3, a linear one k ~ 1.
CLASSES = ((0.15, "constant"), (0.5, "log"), (1.25, "linear"))


def growth_exponent(points):
    """Least-squares slope of log(y) on log(x); None under two usable
    points (x and y must be positive)."""
    usable = [(math.log(x), math.log(y)) for x, y in points
              if x > 0 and y is not None and y > 0]
    if len(usable) < 2:
        return None
    mx = sum(p[0] for p in usable) / len(usable)
    my = sum(p[1] for p in usable) / len(usable)
    sxx = sum((p[0] - mx) ** 2 for p in usable)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in usable) / sxx


def growth_class(k):
    """'constant', 'log', 'linear' or 'superlinear' for exponent k."""
    if k is None:
        return "not measured"
    for bound, name in CLASSES:
        if k < bound:
            return name
    return "superlinear"


def read_json(path):
    """The JSON object in `path`; {} when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def dig(obj, path):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


# (name, unit, how to get it from a point, what the size is per-what)
CORE_FIGURES = (
    ("build_s", "s", lambda d: d.get("build_seconds")),
    ("fill_cycle_ms", "ms", lambda d: ms(dig(d, "fill.seconds"))),
    ("fill_admissions_per_sec", "/s", lambda d: dig(d, "fill.admissions_per_sec")),
    ("fill_gangs_written", "", lambda d: dig(d, "fill.gangs_written")),
    ("unchanged_cycle_p50_us", "us", lambda d: dig(d, "unchanged.p50_us")),
    ("unchanged_cycle_mean_us", "us", lambda d: dig(d, "unchanged.mean_us")),
    ("one_done_cycle_p50_us", "us", lambda d: dig(d, "one_done.p50_us")),
    ("one_done_cycle_mean_us", "us", lambda d: dig(d, "one_done.mean_us")),
    ("churn_admissions_per_sec", "/s", lambda d: dig(d, "churn.admissions_per_sec")),
    ("churn_cycle_only_admissions_per_sec", "/s",
     lambda d: dig(d, "churn.cycle_only_admissions_per_sec")),
    ("churn_cycle_mean_us", "us", lambda d: dig(d, "churn.cycle_mean_us")),
    ("submit_us_per_gang", "us", lambda d: dig(d, "churn.submit_us_per_gang")),
    ("report_us_per_gang", "us", lambda d: dig(d, "churn.report_us_per_gang")),
)

# Costs whose growth is classified (rates are turned into seconds per
# admission, a cost). Not the mean cycle after one completion: its phase is
# bounded in time, so a one-off cycle (the first that finds the fleet full
# rewrites every unreached gang's reason) is averaged over fewer cycles the
# more gangs are pending; the table shows it, the p50 is classified.
GROWTH_COSTS = (
    ("build_s", "build (generate + Restore)", False),
    ("fill_cycle_ms", "fill cycle (one RunCycle into the empty fleet)", False),
    ("fill_admissions_per_sec", "fill: seconds per admission", True),
    ("unchanged_cycle_p50_us", "unchanged cycle (p50)", False),
    ("one_done_cycle_p50_us", "cycle after one completion (p50)", False),
    ("churn_admissions_per_sec", "churn: seconds per admission (whole step)",
     True),
    ("churn_cycle_only_admissions_per_sec",
     "churn: seconds per admission (cycle only)", True),
    ("submit_us_per_gang", "Submit per gang", False),
    ("report_us_per_gang", "Report (completion) per gang", False),
    ("rss_bytes_per_pending_gang", "RSS per pending gang", False),
)


def ms(seconds):
    return None if seconds is None else seconds * 1e3


def core_points(raw, prefix="core"):
    """{(nodes, pending): {figure: median over repeats}}."""
    runs = {}
    for path in glob.glob(os.path.join(raw, prefix + "-*.json")):
        m = re.match(prefix + r"-(\d+)-(\d+)-\d+\.json$",
                     os.path.basename(path))
        data = read_json(path)
        if m and data:
            runs.setdefault((int(m.group(1)), int(m.group(2))), []).append(data)
    points = {}
    for key, datas in runs.items():
        figures = {"repeats": len(datas)}
        for name, _, get in CORE_FIGURES:
            values = [v for v in (get(d) for d in datas) if v is not None]
            figures[name] = statistics.median(values) if values else None
        figures["rss_bytes"] = statistics.median(d["rss_bytes"] for d in datas)
        points[key] = figures
    for (nodes, pending), figures in points.items():
        base = points.get((nodes, 0))
        figures["rss_bytes_per_pending_gang"] = (
            (figures["rss_bytes"] - base["rss_bytes"]) / pending
            if base and pending > 0 else None)
    return points


def cost(figures, name, is_rate):
    value = figures.get(name)
    if value is None or value <= 0:
        return None
    return 1.0 / value if is_rate else value


def growth_rows(points):
    """One row per cost and axis: the exponent along pending at each node
    count, and along nodes at each pending count."""
    nodes_axis = sorted({n for n, p in points})
    pending_axis = sorted({p for n, p in points if p > 0})
    rows = []

    def add(name, label, is_rate, axis, fixed, series_keys):
        series = [(x, cost(points[key], name, is_rate))
                  for x, key in series_keys if key in points]
        k = growth_exponent(series)
        rows.append({"cost": name, "label": label, "axis": axis,
                     "fixed": fixed, "exponent": k, "growth": growth_class(k)})

    for name, label, is_rate in GROWTH_COSTS:
        for nodes in nodes_axis:
            add(name, label, is_rate, "pending", f"{nodes} nodes",
                [(p, (nodes, p)) for p in pending_axis])
        for pending in pending_axis:
            add(name, label, is_rate, "nodes", f"{pending} pending",
                [(n, (n, pending)) for n in nodes_axis])
    return rows


def restart_rows(restart):
    rows = []
    for key, point in sorted(restart.items(),
                             key=lambda kv: kv[1].get("stored_gangs", 0)):
        if not isinstance(point, dict):
            continue
        rows.append({
            "stored_gangs": point.get("stored_gangs"),
            "nodes": point.get("nodes"),
            "active_gangs": dig(point, "restart.active_gangs"),
            "pending_gangs": dig(point, "restart.pending_gangs"),
            "prepare_seconds": dig(point, "restart.prepare_seconds"),
            "store_bytes": dig(point, "restart.store_bytes"),
            "seconds_to_serving": dig(point,
                                      "restart.median_seconds_to_serving"),
            "cpu_seconds_to_serving": dig(
                point, "restart.median_cpu_seconds_to_serving"),
            "empty_store_seconds": dig(
                point, "empty_store.median_seconds_to_serving"),
            "rss_bytes": dig(point, "restart.rss_bytes"),
            "rss_bytes_per_stored_gang": point.get(
                "rss_bytes_per_stored_gang"),
            "error": point.get("error"),
        })
    series = [(r["stored_gangs"], r["seconds_to_serving"]) for r in rows]
    k = growth_exponent(series)
    cpu = [(r["stored_gangs"], r["cpu_seconds_to_serving"]) for r in rows]
    k_cpu = growth_exponent(cpu)
    rss = [(r["stored_gangs"], r["rss_bytes"]) for r in rows]
    k_rss = growth_exponent(rss)
    growth = [
        {"cost": "restart_seconds", "label": "restart to first answer",
         "axis": "stored gangs (fleet grows with them)", "exponent": k,
         "growth": growth_class(k)},
        {"cost": "restart_cpu_seconds",
         "label": "restart: daemon CPU to first answer",
         "axis": "stored gangs (fleet grows with them)", "exponent": k_cpu,
         "growth": growth_class(k_cpu)},
        {"cost": "restart_rss_bytes", "label": "daemon RSS after restart",
         "axis": "stored gangs (fleet grows with them)", "exponent": k_rss,
         "growth": growth_class(k_rss)},
    ]
    return rows, growth


def stamp_growth(stamp):
    rows = []
    # Its cycle time only: how many gangs it rewrites (shown) depends on how
    # far the cycle got before the fleet was full.
    for name, label in (("fill_cycle_ms", "first full-fleet cycle over "
                         "never-reached gangs (one-off)"),):
        for nodes in sorted({n for n, _ in stamp}):
            series = [(p, cost(f, name, False))
                      for (n, p), f in sorted(stamp.items()) if n == nodes]
            k = growth_exponent(series)
            rows.append({"cost": "stamp_" + name, "label": label,
                         "axis": "pending", "fixed": f"{nodes} nodes",
                         "exponent": k, "growth": growth_class(k)})
    return rows


def fmt(value, digits=3):
    if value is None:
        return "not measured"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(doc):
    lines = [f"# Scale grid — commit {doc['commit']}", "",
             f"{doc['date']}; load average before the run "
             f"{doc['load_before']}, after {doc['load_after']}. "
             "Core: one process per point (phalanx-scale-bench), median of "
             f"{doc['repeats']} repeat(s); core times are CPU seconds of the "
             "benchmark thread. Command: `bench/run.sh --scale`.",
             "", "## Core figures", ""]
    names = [n for n, _, _ in CORE_FIGURES] + ["rss_bytes_per_pending_gang"]
    lines.append("| nodes | pending | " + " | ".join(names) + " |")
    lines.append("| --- | --- |" + " --- |" * len(names))
    for point in doc["core"]:
        lines.append(f"| {point['nodes']:,} | {point['pending']:,} | " +
                     " | ".join(fmt(point.get(n)) for n in names) + " |")
    lines += ["", "## First full-fleet cycle over never-reached gangs "
              "(`--waiting`)", "", "| nodes | pending | cycle ms | gangs written |",
              "| --- | --- | --- | --- |"]
    for s in doc["stamp"]:
        lines.append(f"| {s['nodes']:,} | {s['pending']:,} | "
                     f"{fmt(s['cycle_ms'])} | {fmt(s['gangs_written'])} |")
    lines += ["", "## Growth (cost ~ size^k)", "",
              "| cost | along | at | k | growth |", "| --- | --- | --- | --- | --- |"]
    for row in doc["growth"]:
        lines.append(f"| {row['label']} | {row['axis']} | {row.get('fixed', '')}"
                     f" | {fmt(row['exponent'], 2)} | {row['growth']} |")
    lines += ["", "## Restart", "",
              "| stored | nodes | active | pending | s to serving | CPU s"
              " | empty store s"
              " | RSS MiB | RSS/stored gang B | store MiB | prepare s |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["restart"]:
        lines.append(
            f"| {fmt(r['stored_gangs'])} | {fmt(r['nodes'])} | "
            f"{fmt(r['active_gangs'])} | {fmt(r['pending_gangs'])} | "
            f"{fmt(r['seconds_to_serving'])} | "
            f"{fmt(r['cpu_seconds_to_serving'])} | "
            f"{fmt(r['empty_store_seconds'])} | "
            f"{fmt(r['rss_bytes'] and r['rss_bytes'] / 2**20)} | "
            f"{fmt(r['rss_bytes_per_stored_gang'])} | "
            f"{fmt(r['store_bytes'] and r['store_bytes'] / 2**20)} | "
            f"{fmt(r['prepare_seconds'])} |")
    superlinear = [r for r in doc["growth"] if r["growth"] == "superlinear"]
    counted = ("not counted in quick mode (two sizes, one repeat)"
               if doc["superlinear_terms"] is None else len(superlinear))
    lines += ["", f"Superlinear terms: {counted} (goal: 0)" +
              "".join(f"\n- {r['label']} along {r['axis']} at "
                      f"{r.get('fixed', '')}: k = {r['exponent']:.2f}"
                      for r in superlinear)]
    return "\n".join(lines) + "\n"


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    raw, out = sys.argv[1], sys.argv[2]
    points = core_points(raw)
    stamp = core_points(raw, "stamp")
    restart = read_json(os.path.join(raw, "restart.json"))
    restart_table, restart_growth = restart_rows(restart)
    meta = read_json(os.path.join(raw, "meta.json"))
    doc = {
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": meta.get("load_before"),
        "load_after": meta.get("load_after"),
        "seconds": meta.get("seconds"),
        "repeats": max((f["repeats"] for f in points.values()), default=0),
        "core": [dict(nodes=n, pending=p, **f)
                 for (n, p), f in sorted(points.items())],
        "stamp": [{"nodes": n, "pending": p,
                   "cycle_ms": f["fill_cycle_ms"],
                   "gangs_written": f["fill_gangs_written"]}
                  for (n, p), f in sorted(stamp.items())],
        "growth": growth_rows(points) + stamp_growth(stamp) + restart_growth,
        "superlinear_terms": None,
        "restart": restart_table,
    }
    doc["mode"] = meta.get("mode")
    doc["superlinear_terms"] = None if doc["mode"] == "quick" else sum(
        1 for r in doc["growth"] if r["growth"] == "superlinear")
    with open(os.path.join(out, "scale.json"), "w") as f:
        json.dump(doc, f, indent=1)
    text = markdown(doc)
    with open(os.path.join(out, "scale.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
