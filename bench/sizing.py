#!/usr/bin/python3
"""Measures what pending gangs cost phalanxd: memory, disk, and (--etcd) etcd.

Starts its own phalanxd on loopback ephemeral ports with a temporary
--data-dir (one node of 8 GPUs, one queue, limits raised so nothing is
refused), submits --gangs one-node 8-GPU gangs (the first is admitted, the
rest stay PENDING with reason NO_FIT), each with a request id, and prints,
at every step, the daemon's RSS and the data dir's size. Then it stops the
daemon (SIGTERM: the store is flushed and closed), measures the data dir,
restarts the daemon on it and measures RSS again, cancels every gang (one
CANCELLED event each), stops it and measures the data dir once more. It
also reads every event back over WatchGangs and reports the mean encoded
size of one.

With --etcd it first starts a one-member etcd (Debian's etcd-server) on
loopback, runs the daemon in HA mode against it, and reports etcd's
database size and the bytes under the cluster's prefix (log entries and
snapshots) after the submits.

    /usr/bin/python3 bench/sizing.py --phalanxd build/server/phalanxd \
        --gangs 20000 [--etcd]

Needs /usr/bin/python3 with Debian's python3-grpcio, and protoc with
grpc_python_plugin (protobuf-compiler-grpc) to generate the stubs. Every
process it starts is stopped by its PID, and its temporary directory is
removed.
"""
import argparse
import base64
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate_stubs(out):
    os.makedirs(out)
    protos = [os.path.join("phalanx/v1", p) for p in
              ("types.proto", "scheduler.proto", "admin.proto", "fleet.proto")]
    subprocess.run(
        ["protoc", "-I", os.path.join(ROOT, "proto"), "-I", "/usr/include",
         "--python_out", out, "--grpc_out", out,
         "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"] + protos,
        check=True)
    for d in ("phalanx", "phalanx/v1"):
        open(os.path.join(out, d, "__init__.py"), "a").close()
    sys.path.insert(0, out)


def write_files(tmp):
    config = {"limits": {"maxPendingGangsPerQueue": "10000000",
                         "requestsPerSecond": 1e9,
                         "requestBurst": "1000000000"}}
    fleet = {"nodes": [{"id": "n1", "gpuModel": "H100", "gpuCount": 8}]}
    queues = {"queues": [{"name": "q", "nominalGpus": {"H100": "8"},
                          "borrowingLimitGpus": "-1",
                          "lendingLimitGpus": "-1"}]}
    paths = {}
    for name, doc in (("config", config), ("fleet", fleet), ("queues", queues)):
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(doc, f)
    return paths


class Daemon:
    def __init__(self, binary, tmp, files, extra):
        self.address_file = os.path.join(tmp, "address.json")
        if os.path.exists(self.address_file):
            os.remove(self.address_file)
        self.log = open(os.path.join(tmp, "phalanxd.log"), "a")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--metrics-listen",
             "127.0.0.1:0", "--data-dir", os.path.join(tmp, "data"),
             "--config", files["config"], "--fleet", files["fleet"],
             "--queues", files["queues"],
             "--print-address-file", self.address_file] + extra,
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not os.path.exists(self.address_file):
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit("phalanxd did not start; see phalanxd.log")
            time.sleep(0.05)
        with open(self.address_file) as f:
            self.grpc = json.load(f)["grpc"]

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.close()


def dir_bytes(path):
    total = 0
    for base, _, names in os.walk(path):
        for n in names:
            total += os.lstat(os.path.join(base, n)).st_size
    return total


def submit_all(stubs, channel, first, count):
    types_pb2, scheduler_pb2, scheduler_grpc = stubs
    stub = scheduler_grpc.SchedulerStub(channel)

    def one(i):
        spec = types_pb2.GangSpec(queue="q", request_id="sizing-%08d" % i)
        spec.pod_sets.add(name="workers", count=1, gpus=8)
        return stub.SubmitGang(scheduler_pb2.SubmitGangRequest(spec=spec),
                               timeout=60).gang.id

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        return list(pool.map(one, range(first, first + count)))


def cancel_all(stubs, channel, ids):
    _, scheduler_pb2, scheduler_grpc = stubs
    stub = scheduler_grpc.SchedulerStub(channel)
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda g: stub.CancelGang(
            scheduler_pb2.CancelGangRequest(gang_id=g), timeout=60), ids))


def mean_event_bytes(stubs, channel, expected):
    _, scheduler_pb2, scheduler_grpc = stubs
    stub = scheduler_grpc.SchedulerStub(channel)
    total = count = 0
    stream = stub.WatchGangs(scheduler_pb2.WatchGangsRequest(after_revision=0),
                            timeout=120)
    for event in stream:
        if event.HasField("gang"):
            total += event.ByteSize()
            count += 1
        if count >= expected:
            stream.cancel()
            break
    return total / max(count, 1), count


def start_etcd(tmp):
    client, peer = "http://127.0.0.1:23791", "http://127.0.0.1:23792"
    log = open(os.path.join(tmp, "etcd.log"), "w")
    proc = subprocess.Popen(
        ["etcd", "--name", "s0", "--data-dir", os.path.join(tmp, "etcd"),
         "--listen-client-urls", client, "--advertise-client-urls", client,
         "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", "s0=" + peer, "--initial-cluster-state", "new"],
        stdout=log, stderr=subprocess.STDOUT)
    env = dict(os.environ, ETCDCTL_API="3")
    for _ in range(100):
        if subprocess.run(["etcdctl", "--endpoints", client, "endpoint",
                           "health"], env=env, capture_output=True).returncode == 0:
            return proc, client
        time.sleep(0.1)
    proc.kill()
    sys.exit("etcd did not start; see etcd.log")


def etcd_figures(client, prefix):
    env = dict(os.environ, ETCDCTL_API="3")
    status = json.loads(subprocess.run(
        ["etcdctl", "--endpoints", client, "endpoint", "status", "-w", "json"],
        env=env, capture_output=True, check=True).stdout)
    db = status[0]["Status"]["dbSize"]
    out = {"etcd_db_bytes": db}
    for part in ("log", "snapshot"):
        kvs = json.loads(subprocess.run(
            ["etcdctl", "--endpoints", client, "get", "--prefix",
             "%s/%s/" % (prefix, part), "-w", "json"],
            env=env, capture_output=True, check=True).stdout).get("kvs", [])
        out["%s_keys" % part] = len(kvs)
        out["%s_value_bytes" % part] = sum(
            len(base64.b64decode(kv.get("value", ""))) for kv in kvs)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phalanxd", default=os.path.join(
        ROOT, "build/server/phalanxd"))
    parser.add_argument("--gangs", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--etcd", action="store_true")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="phalanx-sizing-")
    etcd = None
    try:
        generate_stubs(os.path.join(tmp, "gen"))
        import grpc
        from phalanx.v1 import types_pb2, scheduler_pb2, scheduler_pb2_grpc
        stubs = (types_pb2, scheduler_pb2, scheduler_pb2_grpc)
        files = write_files(tmp)
        extra = []
        prefix = "/phalanx/sizing"
        if args.etcd:
            etcd, client = start_etcd(tmp)
            extra = ["--etcd-endpoints", client, "--replica-id", "r0",
                     "--etcd-prefix", prefix]
        daemon = Daemon(args.phalanxd, tmp, files, extra)
        channel = grpc.insecure_channel(daemon.grpc)
        data = os.path.join(tmp, "data")
        time.sleep(1)
        base_rss, base_disk = daemon.rss_bytes(), dir_bytes(data)
        print("gangs  rss_bytes  data_dir_bytes")
        print("%5d  %9d  %14d" % (0, base_rss, base_disk))
        ids, step = [], max(args.gangs // args.steps, 1)
        start = time.time()
        while len(ids) < args.gangs:
            ids += submit_all(stubs, channel, len(ids),
                              min(step, args.gangs - len(ids)))
            time.sleep(1.5)  # gauges and the loop settle
            print("%5d  %9d  %14d" % (len(ids), daemon.rss_bytes(),
                                      dir_bytes(data)))
        seconds = time.time() - start
        rss = daemon.rss_bytes()
        n = len(ids)
        print("submitted %d gangs in %.1f s" % (n, seconds))
        print("RSS per gang (live): %.0f bytes" % ((rss - base_rss) / n))
        size, events = mean_event_bytes(stubs, channel, n)
        print("mean encoded GangEvent: %.0f bytes over %d events" %
              (size, events))
        if args.etcd:
            figures = etcd_figures(client, prefix)
            print("etcd after %d gangs: %s" % (n, json.dumps(figures)))
            print("etcd db bytes per gang: %.0f" %
                  (figures["etcd_db_bytes"] / n))
        channel.close()
        daemon.stop()
        stopped = dir_bytes(data)
        print("data dir after a clean stop: %d bytes, %.0f per gang" %
              (stopped, (stopped - base_disk) / n))
        daemon = Daemon(args.phalanxd, tmp, files, extra)
        time.sleep(2)
        restarted = daemon.rss_bytes()
        print("RSS after restart with %d gangs: %d bytes" % (n, restarted))
        channel = grpc.insecure_channel(daemon.grpc)
        cancel_all(stubs, channel, ids)
        channel.close()
        daemon.stop()
        cancelled = dir_bytes(data)
        print("data dir after cancelling all (one event each) and a clean "
              "stop: %d bytes, %.0f more per event" %
              (cancelled, (cancelled - stopped) / n))
    finally:
        if etcd is not None:
            etcd.send_signal(signal.SIGTERM)
            etcd.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
