"""Placement helpers: a gang's placement in rank order, and how it changes
when an elastic gang grows or shrinks.

Rank r is the r-th entry of ``Gang.placement``, the order the scheduler
gave the pods, even when two pods share a node. Pure functions of the gang
(and, for addresses, of a node-id -> address map, e.g.
``Client.node_addresses()``).
"""


def hosts(gang, addresses=None):
    """Returns the host of every rank, in rank order: the node's address from
    ``addresses`` (node id -> address) when it has a non-empty one, else the
    node id. A node holding two pods appears twice."""
    addresses = addresses or {}
    return [addresses.get(pod.node) or pod.node for pod in gang.placement]


def gpu_lists(gang):
    """Returns the GPU indices of every rank, in rank order (lists of ints)."""
    return [list(pod.gpu_indices) for pod in gang.placement]


def hostfile(gang, addresses=None):
    """Returns a hostfile: one ``host slots=N`` line per rank, in rank order,
    N being the rank's number of GPUs (a pod of 0 GPUs has slots=1)."""
    lines = []
    for host, gpus in zip(hosts(gang, addresses), gpu_lists(gang)):
        lines.append("%s slots=%d\n" % (host, max(len(gpus), 1)))
    return "".join(lines)


def nnodes_range(spec):
    """Returns (fewest, most): the pods (ranks) a gang of ``spec`` (a
    GangSpec) runs with, for torchrun's ``--nnodes=MIN:MAX``. An elastic pod
    set (0 < min_count < count) counts min_count..count; a fixed one its
    count."""
    fewest = most = 0
    for pod_set in spec.pod_sets:
        elastic = 0 < pod_set.min_count < pod_set.count
        fewest += pod_set.min_count if elastic else pod_set.count
        most += pod_set.count
    return fewest, most


def after_shrink(gang):
    """Returns a copy of ``gang`` as it runs once its shrink is done: without
    the pods of its elastic pod set of index ``shrink_to_count`` and up
    (unchanged when ``shrink_to_count`` is 0)."""
    out = type(gang)()
    out.CopyFrom(gang)
    elastic = [p.name for p in gang.spec.pod_sets
               if 0 < p.min_count < p.count]
    if gang.shrink_to_count <= 0 or not elastic:
        return out
    del out.placement[:]
    out.placement.extend(
        pod for pod in gang.placement
        if pod.pod_set != elastic[0] or pod.index < gang.shrink_to_count)
    return out


def _pod_key(pod):
    return (pod.pod_set, pod.index, pod.node, tuple(pod.gpu_indices))


def rank_diff(before, after):
    """Returns (added, removed): the ranks of ``after`` whose pods ``before``
    does not have, and the ranks of ``before`` whose pods ``after`` does not
    have (both gangs; a pod is its pod set and index, on the same node and
    GPUs). What to start and what to stop when a resized gang's ranks keep
    running (torchrun's elastic rendezvous re-forms the group)."""
    old = {_pod_key(p) for p in before.placement}
    new = {_pod_key(p) for p in after.placement}
    added = [r for r, p in enumerate(after.placement)
             if _pod_key(p) not in old]
    removed = [r for r, p in enumerate(before.placement)
               if _pod_key(p) not in new]
    return added, removed
