"""The Python client against the real phalanxd (see conftest.py)."""

import datetime
import re
import subprocess
import sys
import threading
import time
import os

import grpc
import pytest

import phalanx
from phalanx import Client, GangFinished, LeaseKeeper
from phalanx.v1 import scheduler_pb2, types_pb2

from conftest import demo_config

RUNNING = types_pb2.GANG_STATE_RUNNING


def test_submit_watch_report_succeed(daemon):
    client = Client(daemon.address)
    gang = client.submit(queue="a", pods=2, gpus=8, level="rack",
                         name="job-1")
    assert gang.id and gang.spec.request_id.startswith("py-")
    # A repeat with the same request_id returns the same gang.
    again = client.submit(gang.spec)
    assert again.id == gang.id

    admitted = client.wait(gang.id, "ADMITTED", timeout=30)
    assert len(admitted.placement) == 2
    events = client.watch(gang_ids=[gang.id], after_revision=0)
    assert next(events).type == types_pb2.EVENT_TYPE_SUBMITTED
    assert next(events).type == types_pb2.EVENT_TYPE_ADMITTED

    client.report_running(gang.id)
    client.report_running(gang.id)  # a repeated report is a no-op
    event = next(events)
    assert event.type == types_pb2.EVENT_TYPE_RUNNING
    client.report_checkpoint(gang.id)
    client.report_succeeded(gang.id)
    done = client.wait(gang.id, "SUCCEEDED", timeout=30)
    assert done.state == types_pb2.GANG_STATE_SUCCEEDED
    assert done.reason_code == phalanx.ReasonCode.Value(
        "REASON_CODE_SUCCEEDED")
    assert phalanx.reason_code_name(done) == "SUCCEEDED"
    with pytest.raises(GangFinished, match=r"SUCCEEDED \(SUCCEEDED\)"):
        client.wait(gang.id, RUNNING, timeout=30)


def test_a_pending_gang_says_why_as_a_code(daemon):
    client = Client(daemon.address)
    whole = client.submit(queue="a", pods=8, gpus=8)  # the whole demo fleet
    client.wait(whole.id, "ADMITTED", timeout=30)
    waiting = client.submit(queue="a", pods=1, gpus=8)
    name = "WAITING"
    deadline = time.monotonic() + 15
    while name == "WAITING" and time.monotonic() < deadline:
        explained = client.explain(waiting.id)
        name = phalanx.reason_code_name(explained.gang)
        time.sleep(0.1)
    assert name in ("NO_FIT", "RESERVED"), explained
    assert explained.reason_code == explained.gang.reason_code
    assert explained.reason == explained.gang.reason
    # The leader fills the plan's fields: an admitted gang has no place in
    # it; a pending one is in the plan or waits for the next one.
    assert phalanx.plan_of(client.get(whole.id)).status == "NOT_PENDING"
    assert phalanx.plan_of(explained.gang).status in ("UNPLANNED", "PLANNED")
    listed = {g.id: g for g in client.list(queue="a")[0]}
    assert phalanx.plan_of(listed[whole.id]).status == "NOT_PENDING"
    assert phalanx.plan_of(listed[waiting.id]).status in (
        "UNPLANNED", "PLANNED")
    client.cancel(waiting.id)
    client.cancel(whole.id)


def test_plan_of_reads_the_plans_fields():
    when = datetime.datetime(2024, 5, 1, 12, 20, 3,
                             tzinfo=datetime.timezone.utc)
    gang = types_pb2.Gang(plan_status=types_pb2.PLAN_STATUS_PLANNED,
                          planned_domain="b1/r07", plan_rank=3)
    gang.estimated_start.FromDatetime(when.replace(tzinfo=None))
    plan = phalanx.plan_of(gang)
    assert plan == phalanx.PlannedStart("PLANNED", when, "b1/r07", 3)
    assert plan.planned
    deep = phalanx.plan_of(
        types_pb2.Gang(plan_status=types_pb2.PLAN_STATUS_BEYOND_DEPTH))
    assert deep == phalanx.PlannedStart("BEYOND_DEPTH")
    assert not deep.planned and deep.estimated_start is None
    # A gang read from an HA follower (or a watch event) carries no plan.
    assert phalanx.plan_of(types_pb2.Gang()).status == "UNSPECIFIED"
    assert phalanx.PlanStatus.Name(types_pb2.PLAN_STATUS_NEVER_FITS) == (
        "PLAN_STATUS_NEVER_FITS")


def test_batched_and_single_event_watches_agree(daemon):
    # watch() reads WatchGangBatches; a client that fell back to WatchGangs
    # (a daemon without it) yields exactly the same events.
    client = Client(daemon.address)
    gangs = [client.submit(queue="a", pods=1, gpus=1) for _ in range(5)]
    last = client.wait(gangs[-1].id, "ADMITTED", timeout=30)
    _, revision = client.get_with_revision(last.id)
    streams = []
    for batched in (True, False):
        client._batched_watch = batched
        events = client.watch(after_revision=0)
        seen = []
        while not seen or seen[-1].revision < revision:
            seen.append(next(events))
        streams.append([(e.revision, e.type, e.gang.id) for e in seen])
    assert streams[0] == streams[1]
    revisions = [r for r, _, _ in streams[0]]
    assert revisions == sorted(set(revisions)), "in order, none repeated"
    ids = {i for _, t, i in streams[0] if t == types_pb2.EVENT_TYPE_SUBMITTED}
    assert {g.id for g in gangs} <= ids


def test_spec_from_dict_and_errors(daemon):
    client = Client(daemon.address)
    gang = client.submit({"queue": "b", "podSets": [
        {"name": "w", "count": 1, "gpus": 4}]}, request_id="dict-1")
    assert gang.spec.queue == "b" and gang.spec.pod_sets[0].gpus == 4
    with pytest.raises(grpc.RpcError) as error:
        client.submit(queue="a", pods=0, gpus=8)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "pod_sets[0].count" in error.value.details()
    client.submit(queue="b", pods=7, gpus=8)  # the fleet has 8 nodes
    big = client.submit(queue="a", pods=2, gpus=8)  # waits for capacity
    with pytest.raises(TimeoutError):
        client.wait(big.id, RUNNING, timeout=1)
    cancelled = client.cancel(big.id, reason="test")
    assert cancelled.state == types_pb2.GANG_STATE_CANCELLED
    reason = client.explain(gang.id)
    assert isinstance(reason.reason, str)


def test_token_in_plain_text_off_loopback_is_refused():
    with pytest.raises(ValueError):
        Client("10.1.2.3:50051", token="secret")
    Client("127.0.0.1:1", token="secret").close()
    Client("10.1.2.3:50051", token="secret", insecure=True).close()


def _has_leases(gang):
    """Whether the daemon implements leases (it sets lease_expire_time on an
    admitted leased gang)."""
    return gang.HasField("lease_expire_time")


def test_lease_keeper_then_expiry(daemon):
    client = Client(daemon.address)
    gang = client.submit(queue="a", pods=1, gpus=8, lease_duration=1.5)
    gang = client.wait(gang.id, "ADMITTED", timeout=30)
    if not _has_leases(gang):
        pytest.skip("this phalanxd does not implement leases yet")
    client.report_running(gang.id)
    try:
        client.renew_lease(gang.id)
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.UNIMPLEMENTED:
            pytest.skip("this phalanxd has no RenewGangLease yet")
        raise
    with LeaseKeeper(client, gang.id) as keeper:
        assert keeper.interval == pytest.approx(0.5)
        # Outlive the lease several times over while the keeper renews.
        for _ in range(10):
            if keeper.renewals >= 8:
                break
            time.sleep(0.5)
        assert not keeper.lost.is_set(), keeper.error
        assert client.get(gang.id).state == RUNNING
    # Without renewals the lease expires and the gang fails.
    failed = client.wait(gang.id, "FAILED", timeout=30)
    assert failed.reason == "LEASE_EXPIRED", failed.reason


def test_watch_resumes_across_restart(daemon):
    client = Client(daemon.address)
    first = client.submit(queue="a", pods=1, gpus=8)
    seen = []
    stop = threading.Event()

    def collect():
        for event in client.watch(after_revision=0, stop=stop):
            seen.append(event)

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    daemon.restart()
    second = client.submit(queue="b", pods=1, gpus=8)
    for _ in range(600):  # at most 60 s
        if any(e.gang.id == second.id for e in list(seen)):
            break
        time.sleep(0.1)
    stop.set()
    revisions = [e.revision for e in list(seen)]
    assert revisions == sorted(set(revisions)), "in order, none repeated"
    ids = {e.gang.id for e in seen}
    assert first.id in ids and second.id in ids, seen


def test_out_of_range_relists(make_daemon):
    config = demo_config(retention={"events": "10"})  # the minimum
    daemon = make_daemon(config=config)
    client = Client(daemon.address)
    keep = client.submit(queue="a", pods=1, gpus=8)
    for _ in range(10):
        gang = client.submit(queue="b", pods=1, gpus=1)
        client.cancel(gang.id)
    # Wait (bounded) until the daemon trimmed revision 1 from its history.
    stub = client.scheduler
    for _ in range(100):
        stream = stub.WatchGangs(scheduler_pb2.WatchGangsRequest(
            after_revision=0))
        try:
            next(stream)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.OUT_OF_RANGE:
                break
        finally:
            stream.cancel()
        time.sleep(0.2)
    else:
        pytest.fail("history never trimmed")
    events = client.watch(queues=["a"], after_revision=0)
    first = next(events)
    assert first.type == types_pb2.EVENT_TYPE_UNSPECIFIED, "a re-list"
    assert first.gang.id == keep.id
    assert first.revision > 0
    # Then live events after the list's revision.
    client.cancel(keep.id)
    event = next(events)
    assert event.gang.id == keep.id
    assert event.type == types_pb2.EVENT_TYPE_CANCELLED
    assert event.revision > first.revision


def test_placement_helpers(daemon):
    client = Client(daemon.address)
    gang = client.submit(queue="a", pods=3, gpus=4, level="block")
    gang = client.wait(gang.id, "ADMITTED", timeout=30)
    hosts = phalanx.hosts(gang)
    assert hosts == [pod.node for pod in gang.placement]
    assert [len(g) for g in phalanx.gpu_lists(gang)] == [4, 4, 4]
    addresses = client.node_addresses()
    lines = phalanx.hostfile(gang, addresses).splitlines()
    assert lines == ["%s slots=4" % addresses[h] for h in hosts]
    if any(a != n for n, a in addresses.items()):
        assert all(re.match(r"10\.0\.\d\.\d slots=4", l) for l in lines)


def test_placement_helpers_rank_order_and_shared_nodes():
    gang = types_pb2.Gang(placement=[
        types_pb2.PodPlacement(node="n-2", gpu_indices=[4, 5, 6, 7]),
        types_pb2.PodPlacement(node="n-1", gpu_indices=[0, 1]),
        types_pb2.PodPlacement(node="n-2", gpu_indices=[0, 1, 2, 3]),
    ])
    assert phalanx.hosts(gang) == ["n-2", "n-1", "n-2"]
    assert phalanx.hosts(gang, {"n-2": "10.0.0.2", "n-1": ""}) == [
        "10.0.0.2", "n-1", "10.0.0.2"]
    assert phalanx.gpu_lists(gang) == [[4, 5, 6, 7], [0, 1], [0, 1, 2, 3]]
    assert phalanx.hostfile(gang) == (
        "n-2 slots=4\nn-1 slots=2\nn-2 slots=4\n")


def test_readme_example_runs(daemon, tmp_path):
    readme = os.path.join(os.path.dirname(__file__), "..", "README.md")
    with open(readme) as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README.md has a python block"
    script = tmp_path / "launcher.py"
    script.write_text(blocks[0])
    # It runs in tmp_path: make PYTHONPATH absolute.
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get(
        "PYTHONPATH", "").split(os.pathsep) if p)
    env = dict(os.environ, PHALANX_SERVER=daemon.address, PHALANX_QUEUE="a",
               PYTHONPATH=path)
    result = subprocess.run([sys.executable, str(script)], env=env,
                            cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "succeeded" in result.stdout


def test_endpoints_are_split_and_a_dead_one_is_skipped(daemon):
    from phalanx.client import _endpoints
    assert _endpoints("a:1,b:2,c:3") == ["a:1", "b:2", "c:3"]
    assert _endpoints(["a:1", "b:2"]) == ["a:1", "b:2"]
    assert _endpoints("ipv4:127.0.0.1:1,127.0.0.1:2") == \
        ["ipv4:127.0.0.1:1,127.0.0.1:2"]
    assert _endpoints("dns:///h:1") == ["dns:///h:1"]
    with pytest.raises(ValueError):
        Client(["10.0.0.1:1", "127.0.0.1:2"], token="t")
    # Nothing listens on port 1: reads and retried writes move on.
    client = Client("127.0.0.1:1," + daemon.address, timeout=5)
    gang = client.submit(queue="a", pods=1, gpus=8)
    assert client.address == daemon.address
    assert client.get(gang.id).id == gang.id
