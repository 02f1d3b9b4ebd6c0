"""Fixtures: the real phalanxd (the build's binary, $PHALANXD) on an
ephemeral loopback port with a temporary data directory and the demo fleet
of tests/daemon.cc (2 blocks x 2 racks x 2 nodes of 8 H100 GPUs, levels
block/rack, queues "a" and "b")."""

import json
import os
import queue
import re
import subprocess
import threading

import pytest

PHALANXD = os.environ.get("PHALANXD", "")


def demo_fleet(addresses=True):
    nodes = []
    for b in range(2):
        for r in range(2):
            for n in range(2):
                node = {"id": "node-%d%d%d" % (b, r, n), "gpuModel": "H100",
                        "gpuCount": 8,
                        "labels": {"block": "b%d" % b,
                                   "rack": "b%d-r%d" % (b, r)}}
                if addresses:
                    node["address"] = "10.0.%d.%d" % (b * 2 + r, n + 1)
                nodes.append(node)
    return {"nodes": nodes}


def demo_config(**overrides):
    config = {"topologyLevels": ["block", "rack"], "cycleInterval": "0.2s",
              "retention": {"events": "50"},
              "watch": {"bookmarkInterval": "0.5s"}}
    config.update(overrides)
    return config


class Daemon:
    """One phalanxd process at a time over one data directory."""

    def __init__(self, root, config=None, fleet=None):
        self.root = str(root)
        self.data_dir = os.path.join(self.root, "data")
        self.files = {}
        for name, content in (
                ("config.json", config or demo_config()),
                ("fleet.json", fleet or demo_fleet()),
                ("queues.json", {"queues": [{"name": "a", "weight": 1},
                                            {"name": "b", "weight": 1}]})):
            path = os.path.join(self.root, name)
            with open(path, "w") as f:
                json.dump(content, f)
            self.files[name] = path
        self.process = None
        self.address = None
        self.output = []

    def start(self, listen="127.0.0.1:0"):
        """Starts phalanxd; returns its address once it printed
        "grpc listening on HOST:PORT" (at most 30 s)."""
        if not PHALANXD:
            pytest.skip("PHALANXD is not set (run through CTest)")
        args = [PHALANXD, "--listen=" + listen,
                "--metrics-listen=127.0.0.1:0",
                "--data-dir=" + self.data_dir,
                "--config=" + self.files["config.json"],
                "--fleet=" + self.files["fleet.json"],
                "--queues=" + self.files["queues.json"]]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        lines = queue.Queue()

        def pump(stream):
            for line in stream:
                self.output.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, args=(self.process.stdout,),
                         daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=30)
            except queue.Empty:
                line = None
            if line is None:
                raise RuntimeError("phalanxd did not start:\n" +
                                   "".join(self.output))
            match = re.search(r"grpc listening on (\S+)", line)
            if match:
                self.address = match.group(1)
                return self.address

    def stop(self):
        """SIGTERM, then waits (SIGKILL after 30 s)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self):
        """Stops the daemon and starts it again on the same port and data
        directory."""
        address = self.address
        self.stop()
        return self.start(listen=address)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def make_daemon(tmp_path):
    """A factory for a daemon with another config: make_daemon(config=...)."""
    made = []

    def make(**kwargs):
        d = Daemon(tmp_path, **kwargs)
        d.start()
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop()
