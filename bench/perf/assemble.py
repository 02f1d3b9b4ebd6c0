#!/usr/bin/python3
"""Folds the core benchmarks' JSON and phalanx-load's JSON into
bench/results/latest.json and latest.md (bench/run.sh calls this).

usage: assemble.py MODE CORE_JSON LOAD_JSON OUT_DIR
       assemble.py --refresh-scale OUT_DIR   (bench/scale.sh: name the new
           scale grid in an existing latest.{json,md}; nothing else changes)
"""
import json
import os
import platform
import subprocess
import sys
import time

from assemble_scale import read_json  # same folder

GOALS = {
    "core_admissions_per_sec": (">=", 50000),
    "unchanged_cycle_us": ("<", 100),
    "durable_submit_ratio": (">=", 0.80),
    "watch_p99_ms": ("<", 50),
    "watch_p99_ms_500_per_sec": ("<", 50),
    "restart_seconds_100k": ("<", 2),
}




def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            mem_kib = int(f.readline().split()[1])
    except OSError:
        mem_kib = 0
    fs = subprocess.run(["df", "-T", "/tmp"], capture_output=True,
                        text=True).stdout.splitlines()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 1048576, 1),
        "kernel": platform.release(),
        "os": platform.freedesktop_os_release().get("PRETTY_NAME", "")
        if hasattr(platform, "freedesktop_os_release") else "",
        "tmp_filesystem": fs[1].split()[1] if len(fs) > 1 else "",
        "hostname": platform.node(),
    }


def bench(core, prefix):
    for b in core.get("benchmarks", []):
        if b["name"].startswith(prefix):
            return b
    return None


def micros(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    return b["real_time"] * scale


def core_figures(core):
    out = {}
    churn = bench(core, "BM_SteadyChurn/nodes:10000/pending:100000/"
                        "completions:256")
    if churn:
        out["core_admissions_per_sec"] = churn["gangs_per_s"]
        out["core_cycle_only_admissions_per_sec"] = \
            churn["cycle_only_gangs_per_s"]
        out["core_admitted_per_step"] = churn["admitted_per_step"]
        out["core_gangs_written_per_step"] = churn.get("gangs_written_per_step")
    churn32 = bench(core, "BM_SteadyChurn/nodes:10000/pending:100000/"
                          "completions:32")
    if churn32:
        out["core_admissions_per_sec_32_completions"] = churn32["gangs_per_s"]
    unchanged = bench(core, "BM_UnchangedCycle/nodes:10000/pending:100000")
    if unchanged:
        out["unchanged_cycle_us"] = micros(unchanged)
    empty = {}
    for b in core.get("benchmarks", []):
        if b["name"].startswith("BM_AdmitIntoEmptyFleet/"):
            key = b["name"].split("/")[1] + "/" + b["name"].split("/")[2]
            empty[key] = b["gangs_per_s"]
        if b["name"].startswith("BM_UnchangedCycle/"):
            out.setdefault("unchanged_cycle_us_by_pending", {})[
                b["name"].split("/")[2]] = micros(b)
        if b["name"].startswith("BM_PlaceShape/"):
            out.setdefault("placement_us_by_shape", {})[
                b["name"].split("/")[1]] = micros(b)
        if b["name"].startswith("BM_FairShareLedgerUpdate"):
            out["fair_share_ledger_update_ns"] = micros(b) * 1e3
    out["admit_into_empty_fleet_gangs_per_sec"] = empty
    return out


def load_figures(load):
    out = {}
    daemon = load.get("daemon", {})
    submit = daemon.get("submit", {})
    for clients, entry in submit.items():
        suffix = "" if clients == "64" else "_%s_clients" % clients
        out["durable_submit_per_sec" + suffix] = \
            entry["durable_submit"]["ops_per_sec"]
        out["raw_rocksdb_sync_per_sec" + suffix] = \
            entry["raw_rocksdb_sync"]["ops_per_sec"]
        # Against the lower of the two limits (raw RocksDB, empty RPC).
        out["durable_submit_ratio" + suffix] = entry["ratio"]
        if "empty_rpc" in entry:
            out["empty_rpc_per_sec" + suffix] = \
                entry["empty_rpc"]["ops_per_sec"]
            out["durable_submit_ratio_vs_raw" + suffix] = \
                entry["ratio_vs_raw"]
            out["durable_submit_ratio_vs_empty_rpc" + suffix] = \
                entry["ratio_vs_empty_rpc"]
            out["durable_submit_limit" + suffix] = entry["limit"]
        cpu = entry["durable_submit"].get("cpu", {})
        if cpu:
            out["durable_submit_daemon_cpu_us" + suffix] = \
                cpu["daemon_cpu_us_per_op"]
            out["durable_submit_client_cpu_us" + suffix] = \
                cpu["load_generator_cpu_us_per_op"]
        cpu = entry.get("empty_rpc", {}).get("cpu", {})
        if cpu:
            out["empty_rpc_server_cpu_us" + suffix] = \
                cpu["daemon_cpu_us_per_op"]
            out["empty_rpc_client_cpu_us" + suffix] = \
                cpu["load_generator_cpu_us_per_op"]
    if "auth" in daemon:
        out["auth"] = daemon["auth"]
    get = daemon.get("get", {})
    if "64" in get:
        out["get_rps"] = get["64"]["ops_per_sec"]
    for clients, entry in get.items():
        if clients != "64":
            out["get_rps_%s_clients" % clients] = entry["ops_per_sec"]
    watch = daemon.get("watch", {})
    if watch:
        out["watch_p50_ms"] = watch["p50_ms"]
        out["watch_p99_ms"] = watch["p99_ms"]
        if "events_per_sec" in watch:
            out["watch_events_per_sec"] = watch["events_per_sec"]
    for rate, entry in daemon.get("watch_by_rate", {}).items():
        if rate == "50":
            suffix = ""
        else:
            suffix = "_%s_per_sec" % rate
            out["watch_p50_ms" + suffix] = entry["p50_ms"]
            out["watch_p99_ms" + suffix] = entry["p99_ms"]
            out["watch_events_per_sec" + suffix] = entry["events_per_sec"]
        cpu = entry.get("cpu_per_delivery", {})
        if cpu:
            out["watch_daemon_cpu_us_per_delivery" + suffix] = \
                cpu["daemon_cpu_us_per_op"]
            out["watch_client_cpu_us_per_delivery" + suffix] = \
                cpu["load_generator_cpu_us_per_op"]
            out["watch_client_cores" + suffix] = cpu["load_generator_cores"]
    restart = load.get("restart", {})
    if restart:
        out["restart_seconds_100k"] = restart["median_seconds_to_serving"]
    memory = daemon.get("memory", {})
    if memory:
        out["rss_bytes_per_pending_gang"] = memory["bytes_per_pending_gang"]
    return out


def verdicts(figures):
    out = {}
    for key, (op, goal) in GOALS.items():
        value = figures.get(key)
        if value is None:
            out[key] = "not measured"
        else:
            met = value >= goal if op == ">=" else value < goal
            out[key] = "met" if met else "MISSED"
    return out


def fmt(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "%.3g" % value if abs(value) < 100 else "{:,.0f}".format(value)
    return str(value)


def table(figures, meta, goal_status):
    rows = [
        ("core admissions/s (10k nodes, 100k pending, churn)",
         "core_admissions_per_sec", "≥ 50,000"),
        ("unchanged cycle µs (10k nodes, 100k pending)",
         "unchanged_cycle_us", "< 100"),
        ("durable SubmitGang/s, 64 clients (auth on)",
         "durable_submit_per_sec", ""),
        ("raw RocksDB sync writes/s, 64 writers", "raw_rocksdb_sync_per_sec",
         ""),
        ("empty unary RPC/s, 64 clients (same server set-up)",
         "empty_rpc_per_sec", ""),
        ("durable / lower limit, 64 clients", "durable_submit_ratio",
         "≥ 0.80"),
        ("durable / raw, 64 clients", "durable_submit_ratio_vs_raw", ""),
        ("durable / empty RPC, 64 clients",
         "durable_submit_ratio_vs_empty_rpc", ""),
        ("durable / lower limit, 8 clients", "durable_submit_ratio_8_clients",
         ""),
        ("durable / raw, 8 clients", "durable_submit_ratio_vs_raw_8_clients",
         ""),
        ("durable / empty RPC, 8 clients",
         "durable_submit_ratio_vs_empty_rpc_8_clients", ""),
        ("durable / lower limit, 1 client", "durable_submit_ratio_1_clients",
         ""),
        ("durable / raw, 1 client", "durable_submit_ratio_vs_raw_1_clients",
         ""),
        ("durable / empty RPC, 1 client",
         "durable_submit_ratio_vs_empty_rpc_1_clients", ""),
        ("daemon CPU µs per durable submit, 64 clients",
         "durable_submit_daemon_cpu_us", ""),
        ("client CPU µs per durable submit, 64 clients",
         "durable_submit_client_cpu_us", ""),
        ("server CPU µs per empty RPC, 64 clients",
         "empty_rpc_server_cpu_us", ""),
        ("client CPU µs per empty RPC, 64 clients",
         "empty_rpc_client_cpu_us", ""),
        ("GetGang/s, 64 clients", "get_rps", ""),
        ("watch p50 ms (1,000 watchers, 50 events/s)", "watch_p50_ms", ""),
        ("watch p99 ms (1,000 watchers, 50 events/s)", "watch_p99_ms",
         "< 50"),
        ("watch events/s achieved (asked: 50)", "watch_events_per_sec", ""),
        ("watch daemon CPU µs per delivery, 50/s",
         "watch_daemon_cpu_us_per_delivery", ""),
        ("watch client CPU µs per delivery, 50/s",
         "watch_client_cpu_us_per_delivery", ""),
        ("watch p50 ms (1,000 watchers, 500 events/s)",
         "watch_p50_ms_500_per_sec", ""),
        ("watch p99 ms (1,000 watchers, 500 events/s)",
         "watch_p99_ms_500_per_sec", "< 50"),
        ("watch events/s achieved (asked: 500)",
         "watch_events_per_sec_500_per_sec", ""),
        ("watch daemon CPU µs per delivery, 500/s",
         "watch_daemon_cpu_us_per_delivery_500_per_sec", ""),
        ("watch client CPU µs per delivery, 500/s",
         "watch_client_cpu_us_per_delivery_500_per_sec", ""),
        ("restart s, 100k active gangs", "restart_seconds_100k", "< 2"),
        ("RSS bytes per pending gang", "rss_bytes_per_pending_gang", ""),
    ]
    m = meta["machine"]
    lines = [
        "Measured %s, `bench/run.sh%s` (%s), commit %s%s, on %s: %s, %d cores, "
        "%.1f GiB, %s, /tmp on %s. Release build; Debian's libbenchmark "
        "reports itself as a DEBUG build." % (
            meta["date"], " --quick" if meta["mode"] == "quick" else "",
            meta["mode"], meta["commit"],
            " plus uncommitted changes to " + ", ".join(
                meta["uncommitted_sources"])
            if meta["uncommitted_sources"] else "",
            m["hostname"], m["cpu"], m["cores"],
            m["memory_gib"], m["os"], m["tmp_filesystem"]),
        "",
        "| figure | measured | goal | status |",
        "| --- | --- | --- | --- |",
    ]
    for label, key, goal in rows:
        value = figures.get(key)
        lines.append("| %s | %s | %s | %s |" % (
            label, "–" if value is None else fmt(value), goal,
            goal_status.get(key, "")))
    return "\n".join(lines) + "\n"


def scale_line(out_dir, result):
    """The scale grid's summary (bench/run.sh --scale writes scale.json,
    perhaps at another commit: it is named), added to `result`."""
    scale = read_json(os.path.join(out_dir, "scale.json"))
    if not scale:
        return ""
    result["scale"] = {"commit": scale.get("commit"), "date": scale.get("date"),
                       "mode": scale.get("mode"),
                       "superlinear_terms": scale.get("superlinear_terms")}
    terms = scale.get("superlinear_terms")
    return ("\nScale grid (`bench/run.sh --scale`%s, commit %s, %s): %s "
            "(goal 0); figures and growth rates in scale.md.\n" % (
                " --quick" if scale.get("mode") == "quick" else "",
                scale.get("commit"), scale.get("date"),
                "superlinear terms not counted" if terms is None
                else "%d superlinear terms" % terms))


def refresh_scale(out_dir):
    """Names the scale grid now in scale.json in latest.{json,md}, which
    keep their own figures, commit and date."""
    result = read_json(os.path.join(out_dir, "latest.json"))
    md_path = os.path.join(out_dir, "latest.md")
    if not result or not os.path.exists(md_path):
        return
    line = scale_line(out_dir, result)
    with open(os.path.join(out_dir, "latest.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=False)
        f.write("\n")
    with open(md_path) as f:
        md = f.read()
    start = md.find("\nScale grid (`bench/run.sh --scale")
    if start >= 0:
        md = md[:start]
    with open(md_path, "w") as f:
        f.write(md + line)


def main():
    if sys.argv[1:2] == ["--refresh-scale"]:
        refresh_scale(sys.argv[2])
        return
    mode, core_path, load_path, out_dir = sys.argv[1:5]
    core = read_json(core_path)
    load = read_json(load_path)
    figures = core_figures(core)
    figures.update(load_figures(load))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    # Sources built but not committed (the build compiles the working tree).
    dirty = [line[3:] for line in subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "core",
         "server", "storage", "proto"],
        capture_output=True, text=True).stdout.splitlines()]
    meta = {
        "mode": mode,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit,
        "uncommitted_sources": dirty,
        "machine": machine(),
        "sizes": {
            "core_nodes": 10000, "gpus_per_node": 8, "core_pending": 100000,
            "churn_completions_per_step": 256,
            "daemon_nodes": 64, "restart_active_gangs":
                load.get("restart", {}).get("active_gangs"),
            "pending_for_memory":
                load.get("daemon", {}).get("memory", {}).get("pending_after"),
            "watchers":
                load.get("daemon", {}).get("watch", {}).get("watchers"),
        },
        "concurrency": {"submit_clients": [1, 8, 64], "get_clients": [1, 8, 64],
                        "headline_clients": 64},
        "core_benchmark_context": core.get("context", {}),
    }
    goal_status = verdicts(figures)
    result = {"meta": meta, **figures, "goals": goal_status,
              "load_detail": load}
    scale = scale_line(out_dir, result)
    with open(os.path.join(out_dir, "latest.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=False)
        f.write("\n")
    md = table(figures, meta, goal_status) + scale
    with open(os.path.join(out_dir, "latest.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
