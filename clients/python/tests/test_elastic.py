"""Elastic gangs through the Python client: min_pods, the placement
helpers of a resize, and follow() against the real phalanxd (see
conftest.py) as an elastic gang grows and is asked to shrink."""

import threading

import pytest

import phalanx
from phalanx import Client
from phalanx.client import _change_of
from phalanx.v1 import types_pb2

from conftest import demo_config

RUNNING = types_pb2.GANG_STATE_RUNNING
PREEMPTING = types_pb2.GANG_STATE_PREEMPTING
PENDING = types_pb2.GANG_STATE_PENDING


def elastic_gang(workers, shrink_to=0):
    """A gang of a fixed pod set "head" (1 pod) and an elastic pod set
    "workers" (2..6 pods) holding ``workers`` pods, one a node."""
    gang = types_pb2.Gang(id="g-9", shrink_to_count=shrink_to)
    gang.spec.pod_sets.add(name="head", count=1, gpus=8)
    gang.spec.pod_sets.add(name="workers", count=6, min_count=2, gpus=8)
    gang.placement.add(pod_set="head", index=0, node="n-head",
                       gpu_indices=[0])
    for i in range(workers):
        gang.placement.add(pod_set="workers", index=i, node="n-%d" % i,
                           gpu_indices=[0])
    return gang


def test_spec_min_pods_makes_the_pod_set_elastic():
    spec = Client.spec(queue="a", pods=4, gpus=8, min_pods=2)
    assert (spec.pod_sets[0].count, spec.pod_sets[0].min_count) == (4, 2)
    assert Client.spec(queue="a", pods=4, gpus=8).pod_sets[0].min_count == 0
    for bad in (0, 5):
        with pytest.raises(ValueError, match=r"min_pods: want 1\.\.4"):
            Client.spec(queue="a", pods=4, gpus=8, min_pods=bad)


def test_nnodes_range_after_shrink_and_rank_diff():
    assert phalanx.nnodes_range(elastic_gang(3).spec) == (3, 7)
    fixed = Client.spec(queue="a", pods=4, gpus=8)
    assert phalanx.nnodes_range(fixed) == (4, 4)

    shrinking = elastic_gang(5, shrink_to=2)
    kept = phalanx.after_shrink(shrinking)
    assert [p.node for p in kept.placement] == ["n-head", "n-0", "n-1"]
    assert len(shrinking.placement) == 6, "a copy: the gang is unchanged"
    assert len(phalanx.after_shrink(elastic_gang(5)).placement) == 6

    assert phalanx.rank_diff(elastic_gang(2), elastic_gang(5)) == (
        [3, 4, 5], [])
    assert phalanx.rank_diff(shrinking, kept) == ([], [3, 4, 5])
    moved = elastic_gang(3)
    moved.placement[2].node = "n-elsewhere"
    assert phalanx.rank_diff(elastic_gang(3), moved) == ([2], [2])


def test_changes_are_read_from_states():
    def gang(state, resizes=0, shrink_to=0, workers=2):
        g = elastic_gang(workers, shrink_to)
        g.state, g.resizes = state, resizes
        return g

    running = gang(RUNNING)
    cases = [
        ("grown", running, gang(RUNNING, 1, workers=5), "RESIZED"),
        ("asked to shrink", running, gang(PREEMPTING, shrink_to=2),
         "SHRINK"),
        ("preempted whole", running, gang(PREEMPTING), "PREEMPTED"),
        ("shrink done", gang(PREEMPTING, shrink_to=2), gang(RUNNING, 1),
         "RESIZED"),
        ("requeued", gang(PREEMPTING), gang(PENDING), "REQUEUED"),
        ("admitted again", gang(PENDING),
         gang(types_pb2.GANG_STATE_ADMITTED), "ADMITTED"),
        ("finished", running, gang(types_pb2.GANG_STATE_SUCCEEDED),
         "FINISHED"),
        ("a checkpoint", running, gang(RUNNING), None),
        ("still shrinking", gang(PREEMPTING, shrink_to=2),
         gang(PREEMPTING, shrink_to=2), None),
    ]
    for name, before, after, kind in cases:
        change = _change_of(before, after, 7)
        assert (change.kind if change else None) == kind, name
    resized = _change_of(gang(RUNNING, workers=5), gang(RUNNING, 1), 7)
    assert resized.previous_pods == 6 and resized.revision == 7


def next_change(changes):
    change = next(changes, None)
    assert change is not None, "no change within the test's time"
    return change


def test_follow_an_elastic_gang_as_it_grows_and_shrinks(make_daemon):
    config = demo_config(
        elastic={"growInterval": "0s"},
        preemption={"enabled": True, "minRuntime": "0s",
                    "gracePeriod": "600s"})
    client = Client(make_daemon(config=config).address)
    blocker = client.submit(queue="b", pods=6, gpus=8)
    client.wait(blocker.id, "ADMITTED", timeout=30)
    gang = client.submit(queue="a", pods=4, min_pods=1, gpus=8)
    gang = client.wait(gang.id, "ADMITTED", timeout=30)
    assert len(gang.placement) == 2, "the largest size that fits"
    gang = client.report_running(gang.id).gang

    stop = threading.Event()  # ends follow() at the next bookmark
    timer = threading.Timer(60, stop.set)
    timer.start()
    try:
        changes = client.follow(gang, stop=stop)
        client.cancel(blocker.id)
        grown = next_change(changes)
        assert (grown.kind, grown.previous_pods) == ("RESIZED", 2)
        assert grown.gang.state == RUNNING
        assert len(grown.gang.placement) == 4
        assert phalanx.rank_diff(gang, grown.gang) == ([2, 3], [])

        # 7 of the 8 nodes: the elastic gang keeps 1, and no node is left
        # for it to grow back onto (grow_interval is 0s).
        high = client.submit(queue="a", pods=7, gpus=8, priority=10)
        shrink = next_change(changes)
        assert shrink.kind == "SHRINK"
        assert shrink.gang.shrink_to_count == 1
        assert shrink.deadline is not None
        kept = phalanx.after_shrink(shrink.gang)
        assert phalanx.rank_diff(shrink.gang, kept) == ([], [1, 2, 3])
        reply = client.acknowledge_preemption(gang.id)
        assert reply.gang.state == RUNNING
        assert len(reply.gang.placement) == 1

        shrunk = next_change(changes)
        assert (shrunk.kind, shrunk.previous_pods) == ("RESIZED", 4)
        assert list(shrunk.gang.placement) == list(kept.placement)
        assert shrunk.gang.resizes == 2
        client.wait(high.id, "ADMITTED", timeout=30)

        client.cancel(gang.id)
        assert next_change(changes).kind == "FINISHED"
        assert next(changes, None) is None, "follow() ends after FINISHED"
    finally:
        timer.cancel()


def test_follow_by_id_reports_a_pending_shrink_first(make_daemon):
    config = demo_config(preemption={"enabled": True, "minRuntime": "0s",
                                     "gracePeriod": "600s"})
    client = Client(make_daemon(config=config).address)
    gang = client.submit(queue="a", pods=8, min_pods=2, gpus=8)
    client.wait(gang.id, "ADMITTED", timeout=30)
    client.report_running(gang.id)
    client.submit(queue="a", pods=6, gpus=8, priority=10)
    client.wait(gang.id, "PREEMPTING", timeout=30)

    stop = threading.Event()
    timer = threading.Timer(60, stop.set)
    timer.start()
    try:
        changes = client.follow(gang.id, stop=stop)
        shrink = next_change(changes)
        assert (shrink.kind, shrink.gang.shrink_to_count) == ("SHRINK", 2)
        client.acknowledge_preemption(gang.id)
        shrunk = next_change(changes)
        assert (shrunk.kind, len(shrunk.gang.placement)) == ("RESIZED", 2)
        stop.set()
    finally:
        timer.cancel()
