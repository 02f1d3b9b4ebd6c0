#!/usr/bin/python3
"""Per-job waits of one cell replayed with every gang fixed and with elastic
gangs (phalanx-sim --elastic-fraction), under one policy.

Both runs must be made with `--compare POLICY,OTHER` (their compare.csv has
every job's wait); the elastic run's elastic-POLICY.csv names the elastic
jobs. Prints a Markdown table of the waits of the gangs of >= 64 GPUs,
elastic and fixed, fixed run -> elastic run, and how the elastic ones ran.

  bench/sim/elastic_compare.py FIXED_DIR ELASTIC_DIR POLICY
"""
import csv
import sys


def percentile(values, p):
    """numpy's default (linear) percentile of `values`; nan when empty."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = p / 100 * (len(v) - 1)
    i = int(k)
    if i + 1 >= len(v):
        return v[i]
    return v[i] + (v[i + 1] - v[i]) * (k - i)


def read(path):
    with open(path) as f:
        return {row["job_line"]: row for row in csv.DictReader(f)}


def main():
    fixed_dir, elastic_dir, policy = sys.argv[1:4]
    column = f"wait_{policy}_hours"
    fixed = read(f"{fixed_dir}/compare.csv")
    elastic = read(f"{elastic_dir}/compare.csv")
    marks = read(f"{elastic_dir}/elastic-{policy}.csv")

    def waits(run, jobs):
        return [float(run[j][column]) for j in jobs if run[j][column]]

    def row(name, jobs):
        a, b = waits(fixed, jobs), waits(elastic, jobs)
        if not a or not b:
            return f"| {name} | {len(jobs)} | – | – | – |"
        return (f"| {name} | {len(jobs)} | {sum(a) / len(a):.2f} → "
                f"{sum(b) / len(b):.2f} | {percentile(a, 50):.2f} → "
                f"{percentile(b, 50):.2f} | {percentile(a, 95):.2f} → "
                f"{percentile(b, 95):.2f} |")

    large = [j for j, r in fixed.items() if int(r["gpus"]) >= 64]
    gpus = {j: int(fixed[j]["gpus"]) for j in large}
    print("| gangs | jobs | mean wait h | p50 | p95 |")
    print("| --- | --- | --- | --- | --- |")
    for name, low, high in [("≥ 64 GPUs", 64, 1 << 30),
                            ("64–255 GPUs", 64, 256),
                            ("≥ 256 GPUs", 256, 1 << 30)]:
        sized = [j for j in large if low <= gpus[j] < high]
        print(row(f"elastic, {name}", [j for j in sized if j in marks]))
        print(row(f"fixed, {name}", [j for j in sized if j not in marks]))
    elastic_jobs = [j for j in large if j in marks]
    below = [j for j in elastic_jobs
             if int(marks[j]["first_gpus"]) < int(marks[j]["gpus"])]
    resized = [j for j in elastic_jobs if int(marks[j]["resizes"]) > 0]
    resizes = sum(int(marks[j]["resizes"]) for j in elastic_jobs)
    changes = [float(elastic[j][column]) - float(fixed[j][column])
               for j in below if elastic[j][column] and fixed[j][column]]
    print(f"\nElastic jobs: {len(elastic_jobs)}; started below full size: "
          f"{len(below)}; resized at least once: {len(resized)} "
          f"({resizes} resizes). Those started below full size waited "
          f"{sum(changes) / max(1, len(changes)):+.2f} h on average "
          f"({sum(1 for d in changes if d < 0)} less, "
          f"{sum(1 for d in changes if d > 0)} more).")


if __name__ == "__main__":
    main()
