"""Placement helpers: a gang's placement in rank order.

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
