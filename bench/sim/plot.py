#!/usr/bin/python3
"""Draws plot.png from a phalanx-sim output directory.

Usage: /usr/bin/python3 bench/sim/plot.py OUT_DIR

Reads OUT_DIR/summary.json (for the policy names and what was replayed) and
OUT_DIR/timeseries-<policy>.csv; draws utilization and queue length over time,
one line per policy. Needs Debian's python3-matplotlib.
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_series(path):
    hours, utilization, pending = [], [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            hours.append(float(row["hours"]) / 24.0)
            utilization.append(float(row["utilization"]))
            pending.append(float(row["pending_gangs"]))
    return hours, utilization, pending


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    out = argv[1]
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    meta = summary["meta"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for name, policy in summary["policies"].items():
        path = os.path.join(out, "timeseries-%s.csv" % name)
        if not policy.get("available") or not os.path.exists(path):
            continue
        days, utilization, pending = read_series(path)
        top.plot(days, utilization, label=name, linewidth=0.8)
        bottom.plot(days, pending, label=name, linewidth=0.8)
    window_days = meta["window_hours"] / 24.0
    for axis in (top, bottom):
        axis.axvline(window_days, color="grey", linestyle=":", linewidth=0.8)
        axis.grid(True, alpha=0.3)
    top.set_ylabel("GPU utilization")
    top.set_ylim(0, 1.05)
    top.legend(loc="lower right", fontsize="small")
    bottom.set_ylabel("pending gangs")
    bottom.set_xlabel("days since first submit (dotted: last submit)")
    fleet = meta["fleet"]
    fig.suptitle("%s: %d jobs on %d nodes x %d GPUs" % (
        os.path.basename(meta["trace"]), meta["jobs"], fleet["nodes"],
        fleet["gpus_per_node"]))
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv)
