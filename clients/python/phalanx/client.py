"""The Phalanx client: channels to phalanxd, typed calls over the real
gRPC API (phalanx.v1).

Several endpoints ("a:1,b:2,c:3" or a list: the replicas of an HA cluster,
docs/ha.md): calls go to one. A follower answers a call it does not serve
(every write) with UNAVAILABLE and trailing metadata ``phalanx-leader:
ADDRESS``; the client then sends the call there at once, whatever the call
(the follower refused it before doing anything), at most 4 hops per call.
A plain UNAVAILABLE moves the client to the next endpoint, and the call is
resent only when it is retried (below).

Retries. A call is retried (with backoff, up to ``retries`` times, on
UNAVAILABLE and DEADLINE_EXCEEDED only) when repeating it cannot change the
outcome:

- reads: get, list, explain, list_nodes; watch resumes after the last
  revision it delivered;
- submit: always sent with a ``request_id`` (one is generated when the
  caller gives none), so the daemon answers a repeat with the same gang;
- reports of a state (RUNNING, SUCCEEDED, FAILED) and of a checkpoint: the
  daemon treats a repeated report of the gang's current state, or of the
  same checkpoint, as a no-op, so they are idempotent;
- renew_lease: renewing twice only moves the expiry.

Not retried blindly: cancel and acknowledge_preemption. After a transport
failure the client reads the gang and resends only if the first call
evidently did not land (the gang is not yet CANCELLED or finished; the gang
is still PREEMPTING in the same attempt and, for an elastic gang's shrink,
the same resize). A blind second acknowledgement could acknowledge a later
preemption or shrink of the same gang.

Thread-safety: a Client may be shared by threads (gRPC channels and stubs
are thread-safe); a watch iterator belongs to one thread.
"""

import dataclasses
import datetime
import ipaddress
import random
import threading
import time
import uuid

import grpc
from google.protobuf import duration_pb2, json_format, timestamp_pb2

from phalanx.v1 import fleet_pb2, fleet_pb2_grpc  # noqa: F401
from phalanx.v1 import scheduler_pb2, scheduler_pb2_grpc, types_pb2

GangState = types_pb2.GangState
EventType = types_pb2.EventType
# Why a gang waits or how it ended, as a code (``gang.reason_code``; the
# detail is ``gang.reason``). docs/reasons.md lists each.
ReasonCode = types_pb2.ReasonCode


def reason_code_name(gang):
    """The gang's reason code without its prefix: "NO_FIT", "QUOTA", ...;
    "UNSPECIFIED" while it is admitted or running."""
    return ReasonCode.Name(gang.reason_code)[len("REASON_CODE_"):]


# Where a pending gang stands in the leader's plan (``gang.plan_status``).
PlanStatus = types_pb2.PlanStatus


@dataclasses.dataclass(frozen=True)
class PlannedStart:
    """A gang's place in the plan, as ``plan_of`` reads it from a Gang.

    ``status``: "PLANNED", "UNPLANNED", "BEYOND_DEPTH", "BEYOND_WINDOW",
    "NEVER_FITS", "NOT_PENDING", or "UNSPECIFIED" when the gang carries no
    plan (read from an HA follower, or from a watch event). The other three
    are set only when PLANNED: ``estimated_start`` (an aware UTC datetime),
    ``domain`` (the planned domain's path, "/" for the whole fleet) and
    ``rank`` (1-based among planned gangs); else None."""
    status: str
    estimated_start: "datetime.datetime | None" = None
    domain: "str | None" = None
    rank: "int | None" = None

    @property
    def planned(self):
        return self.status == "PLANNED"


def plan_of(gang):
    """The gang's place in the plan (a ``PlannedStart``), from the output-only
    fields the leader fills in ``get``, ``list`` and ``explain``."""
    status = PlanStatus.Name(gang.plan_status)[len("PLAN_STATUS_"):]
    if status != "PLANNED":
        return PlannedStart(status)
    start = None
    if gang.HasField("estimated_start"):
        start = gang.estimated_start.ToDatetime().replace(
            tzinfo=datetime.timezone.utc)
    return PlannedStart(status, start, gang.planned_domain or None,
                        gang.plan_rank or None)

_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

_LEADER_KEY = "phalanx-leader"
_MAX_HOPS = 4        # leader hints followed per call
_MAX_ENDPOINTS = 64  # given plus learnt from hints
_TERMINAL = (
    types_pb2.GANG_STATE_SUCCEEDED,
    types_pb2.GANG_STATE_FAILED,
    types_pb2.GANG_STATE_CANCELLED,
)


# Reconnect soon after the daemon comes back (gRPC's default backoff grows to
# 2 minutes): a launcher's calls and watch should resume within seconds.
_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5000),
)


def _events_of(stream, batched):
    """The GangEvents of a WatchGangBatches stream (each message's events
    in order) or of a WatchGangs stream."""
    if not batched:
        yield from stream
        return
    for batch in stream:
        yield from batch.events


@dataclasses.dataclass(frozen=True)
class GangChange:
    """A change of a gang its launcher acts on (``Client.follow``).

    ``kind``:

    - "ADMITTED": admitted (again, after a requeue): start the ranks of
      ``gang.placement``.
    - "RESIZED": an elastic gang grew, or finished a shrink; it is RUNNING
      on its new placement (``previous_pods`` pods before). Restart every
      rank at the new size, or start and stop only the ranks whose pods
      came or went (``rank_diff``).
    - "SHRINK": an elastic gang is asked to shrink: it keeps the pods of its
      elastic pod set of index below ``gang.shrink_to_count``
      (``after_shrink(gang)``). Stop the ranks of the other pods (or every
      rank) by ``deadline``, then ``acknowledge_preemption``; a RESIZED
      follows (also without the acknowledgement, at the deadline).
    - "PREEMPTED": a whole preemption: stop every rank by ``deadline``, then
      ``acknowledge_preemption``; the gang is requeued.
    - "REQUEUED": back to PENDING (preempted, evicted, start timeout); an
      ADMITTED follows when it is admitted again.
    - "FINISHED": SUCCEEDED, FAILED or CANCELLED; ``follow`` ends.

    ``gang`` is the gang's state with the change, ``revision`` the event's."""
    kind: str
    gang: types_pb2.Gang
    revision: int
    previous_pods: int = 0

    @property
    def deadline(self):
        """The grace deadline (an aware UTC datetime) of a SHRINK or a
        PREEMPTED, else None."""
        if not self.gang.HasField("grace_deadline"):
            return None
        return self.gang.grace_deadline.ToDatetime().replace(
            tzinfo=datetime.timezone.utc)


def _change_of(last, gang, revision):
    """The GangChange from state ``last`` to state ``gang`` of one gang, or
    None when the launcher has nothing to do. Compares states rather than
    event types, so a re-list (OUT_OF_RANGE) reads the same."""
    state, before = gang.state, last.state
    if state in _TERMINAL:
        return GangChange("FINISHED", gang, revision)
    if state == types_pb2.GANG_STATE_PREEMPTING:
        if before == state and last.shrink_to_count == gang.shrink_to_count:
            return None
        kind = "SHRINK" if gang.shrink_to_count > 0 else "PREEMPTED"
        return GangChange(kind, gang, revision)
    if state == types_pb2.GANG_STATE_PENDING:
        return None if before == state else GangChange(
            "REQUEUED", gang, revision)
    if before == types_pb2.GANG_STATE_PENDING:
        return GangChange("ADMITTED", gang, revision)
    if gang.resizes != last.resizes:
        return GangChange("RESIZED", gang, revision, len(last.placement))
    return None


class GangFinished(Exception):
    """wait() saw the gang reach a final state it was not waiting for."""

    def __init__(self, gang):
        super().__init__(
            "gang %s ended %s (%s): %s"
            % (
                gang.id,
                GangState.Name(gang.state),
                reason_code_name(gang),
                gang.reason,
            )
        )
        self.gang = gang


@dataclasses.dataclass
class Tls:
    """TLS options, as phalanxctl's --tls-* flags: the PEM roots that verify
    the server (``ca_file``; None = the system's roots), a client
    certificate and key for mutual TLS (both or neither), and the name to
    check in the server's certificate instead of the target's host."""

    ca_file: str = None
    cert_file: str = None
    key_file: str = None
    server_name: str = None


def _read(path):
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def _is_loopback(target):
    host = target
    for prefix in ("dns:///", "ipv4:", "ipv6:"):
        if host.startswith(prefix):
            host = host[len(prefix):]
    if host.startswith("unix:"):
        return True
    if host.startswith("["):
        host = host[1:host.find("]")]
    elif host.count(":") == 1:
        host = host.split(":")[0]
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _duration(value):
    """A Duration from seconds (int/float), a timedelta or "90s"-style
    text."""
    d = duration_pb2.Duration()
    if isinstance(value, datetime.timedelta):
        d.FromTimedelta(value)
    elif isinstance(value, str):
        d.FromJsonString(value if value.endswith("s") else value + "s")
    else:
        d.FromNanoseconds(int(value * 1e9))
    return d


def _timestamp(value=None):
    ts = timestamp_pb2.Timestamp()
    if value is None:
        ts.GetCurrentTime()
    elif isinstance(value, datetime.datetime):
        ts.FromDatetime(value)
    else:
        ts.FromNanoseconds(int(value * 1e9))
    return ts


def _endpoints(target):
    """The endpoints of ``target``: a list, or "a:1,b:2" split at commas (a
    target with a gRPC scheme, "ipv4:a,b" or "dns:///h:p", is one)."""
    if not isinstance(target, str):
        out = [str(t) for t in target]
    elif ":/" in target or target.startswith(("ipv4:", "ipv6:", "unix")):
        out = [target]
    else:
        out = [t for t in target.split(",") if t]
    if not out:
        raise ValueError("no endpoint in %r" % (target,))
    return out


def _leader_hint(error):
    """The leader address an HA follower named in ``error``, or None."""
    try:
        trailers = error.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - not a call error
        return None
    for key, value in trailers:
        if key == _LEADER_KEY and value and len(value) <= 256:
            return value.decode() if isinstance(value, bytes) else value
    return None


class _Endpoint:
    def __init__(self, address, channel):
        self.address = address
        self.channel = channel
        self.scheduler = scheduler_pb2_grpc.SchedulerStub(channel)
        self.fleet = fleet_pb2_grpc.FleetStub(channel)


class Client:
    """A connection to phalanxd at ``target`` ("host:port", several as
    "a:1,b:2,c:3" or a list: see the module's notes).

    ``token``: a bearer token sent with every call (refused in plain text to
    a target off loopback unless ``insecure``). ``tls``: a ``Tls`` (or True
    for the system roots); None = plain text. ``timeout``: seconds per unary
    call. ``retries``: attempts after the first for calls safe to repeat.
    """

    def __init__(self, target, token=None, tls=None, *, timeout=10.0,
                 retries=5, insecure=False):
        if tls is True:
            tls = Tls()
        addresses = _endpoints(target)
        # A token in plain text goes to loopback only (hints included).
        self._loopback_only = token is not None and tls is None and \
            not insecure
        if self._loopback_only and \
                not all(_is_loopback(a) for a in addresses):
            raise ValueError(
                "a token in plain text to %s (not loopback): give tls= or "
                "insecure=True" % ",".join(addresses))
        if tls is not None:
            if (tls.cert_file is None) != (tls.key_file is None):
                raise ValueError("Tls: cert_file and key_file go together")
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls.ca_file),
                private_key=_read(tls.key_file),
                certificate_chain=_read(tls.cert_file))
            options = list(_CHANNEL_OPTIONS)
            if tls.server_name:
                options.append(
                    ("grpc.ssl_target_name_override", tls.server_name))
            self._open = lambda a: grpc.secure_channel(a, creds, options)
        else:
            self._open = lambda a: grpc.insecure_channel(a, _CHANNEL_OPTIONS)
        self._lock = threading.Lock()
        self._endpoints = [_Endpoint(a, self._open(a)) for a in addresses]
        self._current = 0
        self._metadata = (("authorization", "Bearer " + token),) \
            if token else ()
        self._timeout = timeout
        self._retries = retries
        # Watches use WatchGangBatches (one message per wake-up of the
        # stream) until a daemon answers UNIMPLEMENTED; then WatchGangs.
        self._batched_watch = True

    @property
    def _endpoint(self):
        with self._lock:
            return self._endpoints[self._current]

    @property
    def scheduler(self):
        """The Scheduler stub of the endpoint calls go to now."""
        return self._endpoint.scheduler

    @property
    def fleet(self):
        """The Fleet stub of the endpoint calls go to now."""
        return self._endpoint.fleet

    @property
    def address(self):
        """The endpoint calls go to now."""
        return self._endpoint.address

    def _follow(self, leader, refused_by):
        """Moves to ``leader`` (an HA follower's hint); False when the hint
        cannot be followed (it names the endpoint that refused, or an
        address off loopback with a plain-text token, or too many)."""
        if leader == refused_by.address:
            return False
        if self._loopback_only and not _is_loopback(leader):
            return False
        with self._lock:
            for i, endpoint in enumerate(self._endpoints):
                if endpoint.address == leader:
                    self._current = i
                    return True
            if len(self._endpoints) >= _MAX_ENDPOINTS:
                return False
            self._endpoints.append(_Endpoint(leader, self._open(leader)))
            self._current = len(self._endpoints) - 1
            return True

    def _next(self, failed):
        """Moves past ``failed`` (plain UNAVAILABLE) to the next endpoint."""
        with self._lock:
            if self._endpoints[self._current] is failed:
                self._current = (self._current + 1) % len(self._endpoints)

    def close(self):
        with self._lock:
            endpoints = list(self._endpoints)
        for endpoint in endpoints:
            endpoint.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- plumbing --------------------------------------------------------

    def _call(self, service, name, request, retry):
        """Calls ``service``.``name`` ("scheduler", "SubmitGang") on the
        current endpoint. Follows a leader hint at once (at most _MAX_HOPS
        times); on UNAVAILABLE/DEADLINE_EXCEEDED retries when ``retry``,
        with exponential backoff and jitter (0.1 s .. 2 s), moving to the
        next endpoint when there are several. With one endpoint a retry
        waits for the channel to be ready (up to the timeout) rather than
        failing at once while it reconnects."""
        delay = 0.1
        hops = 0
        attempt = 0
        while True:
            endpoint = self._endpoint
            method = getattr(getattr(endpoint, service), name)
            single = len(self._endpoints) == 1
            try:
                return method(request, timeout=self._timeout,
                              metadata=self._metadata,
                              wait_for_ready=(attempt > 0 and single) or None)
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.UNAVAILABLE:
                    leader = _leader_hint(error)
                    if leader is not None and hops < _MAX_HOPS and \
                            self._follow(leader, endpoint):
                        hops += 1
                        continue  # the follower did nothing: no backoff
                if not retry or error.code() not in _RETRYABLE or \
                        attempt == self._retries:
                    raise
                if not single:
                    self._next(endpoint)
            attempt += 1
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    # -- gangs -----------------------------------------------------------

    @staticmethod
    def spec(spec=None, *, queue=None, pods=None, gpus=None, level=None,
             mode=None, priority=None, priority_class=None, name=None,
             labels=None, models=None, request_id=None,
             estimated_runtime=None, max_runtime=None, lease_duration=None,
             min_pods=None):
        """Returns a GangSpec: from ``spec`` (a dict in proto3 JSON form, or
        a GangSpec) or from keyword arguments (one pod set "workers" of
        ``pods`` pods of ``gpus`` GPUs; ``level`` without ``mode`` means
        REQUIRED, as phalanxctl's --level). ``min_pods`` (1..pods) makes
        that pod set elastic (its ``min_count``): the gang runs with
        min_pods..pods pods, grows and shrinks (``follow``). Keywords given
        with ``spec`` override its fields."""
        if isinstance(spec, types_pb2.GangSpec):
            out = types_pb2.GangSpec()
            out.CopyFrom(spec)
        elif spec is not None:
            out = json_format.ParseDict(spec, types_pb2.GangSpec())
        else:
            out = types_pb2.GangSpec()
            if pods is None or gpus is None:
                raise ValueError("pods and gpus are required without spec")
            out.pod_sets.add(name="workers")
        if pods is not None or gpus is not None or level or mode or \
                min_pods is not None:
            if not out.pod_sets:
                out.pod_sets.add(name="workers")
            pod_set = out.pod_sets[0]
            if pods is not None:
                pod_set.count = pods
            if min_pods is not None:
                if not 1 <= min_pods <= pod_set.count:
                    raise ValueError("min_pods: want 1..%d (pods), got %r"
                                     % (pod_set.count, min_pods))
                pod_set.min_count = min_pods
            if gpus is not None:
                pod_set.gpus = gpus
            if models:
                pod_set.gpu_models[:] = list(models)
            if level:
                pod_set.topology.level = level
                pod_set.topology.mode = types_pb2.TOPOLOGY_MODE_REQUIRED
            if mode:
                pod_set.topology.mode = types_pb2.TopologyMode.Value(
                    "TOPOLOGY_MODE_" + mode.upper())
        if queue is not None:
            out.queue = queue
        if priority is not None:
            out.priority = priority
        if priority_class is not None:
            out.priority_class = priority_class
        if labels:
            out.labels.update(labels)
        if name is not None:
            out.labels["name"] = name
        if request_id is not None:
            out.request_id = request_id
        if estimated_runtime is not None:
            out.estimated_runtime.CopyFrom(_duration(estimated_runtime))
        if max_runtime is not None:
            out.max_runtime.CopyFrom(_duration(max_runtime))
        if lease_duration is not None:
            out.lease_duration.CopyFrom(_duration(lease_duration))
        return out

    def submit(self, spec=None, **kwargs):
        """Submits a gang (see ``spec()`` for the arguments); returns the
        Gang. A request_id is generated when none is given, which makes the
        call safe to retry: a repeat returns the same gang."""
        gang_spec = self.spec(spec, **kwargs)
        if not gang_spec.request_id:
            gang_spec.request_id = "py-" + uuid.uuid4().hex
        reply = self._call("scheduler", "SubmitGang",
                           scheduler_pb2.SubmitGangRequest(spec=gang_spec),
                           retry=True)
        return reply.gang

    def get(self, gang_id):
        """Returns the Gang (NOT_FOUND raises grpc.RpcError)."""
        return self.get_with_revision(gang_id)[0]

    def get_with_revision(self, gang_id):
        """Returns (Gang, revision it was read at)."""
        reply = self._call("scheduler", "GetGang",
                           scheduler_pb2.GetGangRequest(gang_id=gang_id),
                           retry=True)
        return reply.gang, reply.revision

    def list(self, queue="", states=()):
        """Returns (gangs, revision): every gang of ``queue`` (all when
        empty) in ``states`` (all when empty), one consistent snapshot."""
        return self._list(queue, states, ())

    def _list(self, queue, states, gang_ids):
        gangs, token, revision = [], "", 0
        while True:
            reply = self._call("scheduler", "ListGangs",
                scheduler_pb2.ListGangsRequest(queue=queue, states=states,
                                               page_size=1000,
                                               page_token=token),
                retry=True)
            if not token:
                revision = reply.revision
            gangs.extend(g for g in reply.gangs
                         if not gang_ids or g.id in gang_ids)
            token = reply.next_page_token
            if not token:
                return gangs, revision

    def explain(self, gang_id):
        """Returns the ExplainGangResponse (reason, position, ...)."""
        return self._call("scheduler", "ExplainGang",
                          scheduler_pb2.ExplainGangRequest(gang_id=gang_id),
                          retry=True)

    def cancel(self, gang_id, reason=""):
        """Cancels the gang; returns the Gang. After a transport failure the
        gang is read first: a gang already finished is returned as is, else
        the cancel is sent again (once per retry)."""
        request = scheduler_pb2.CancelGangRequest(gang_id=gang_id,
                                                  reason=reason)
        for attempt in range(self._retries + 1):
            try:
                return self._call("scheduler", "CancelGang", request,
                                  retry=False).gang
            except grpc.RpcError as error:
                if error.code() not in _RETRYABLE or \
                        attempt == self._retries:
                    raise
            gang = self.get(gang_id)
            if gang.state in _TERMINAL:
                return gang
        raise AssertionError("unreachable")

    # -- reports ---------------------------------------------------------

    def _report(self, request, retry=True):
        return self._call("scheduler", "ReportGang", request, retry=retry)

    def report_running(self, gang_id, message=""):
        """Reports that every rank started (ADMITTED -> RUNNING)."""
        return self._report(scheduler_pb2.ReportGangRequest(
            gang_id=gang_id, state=types_pb2.GANG_STATE_RUNNING,
            message=message))

    def report_succeeded(self, gang_id, message=""):
        return self._report(scheduler_pb2.ReportGangRequest(
            gang_id=gang_id, state=types_pb2.GANG_STATE_SUCCEEDED,
            message=message))

    def report_failed(self, gang_id, message=""):
        return self._report(scheduler_pb2.ReportGangRequest(
            gang_id=gang_id, state=types_pb2.GANG_STATE_FAILED,
            message=message))

    def report_checkpoint(self, gang_id, when=None):
        """Reports the last checkpoint: ``when`` is a datetime, seconds
        since the epoch, or None for now."""
        return self._report(scheduler_pb2.ReportGangRequest(
            gang_id=gang_id, last_checkpoint_time=_timestamp(when)))

    def acknowledge_preemption(self, gang_id, message=""):
        """Tells the daemon the preempted gang's ranks stopped: PREEMPTING
        -> PENDING (requeued) for a whole preemption; for a shrink
        (``shrink_to_count`` > 0) the ranks of the pods given up stopped,
        and the gang is RUNNING again on the pods it keeps (a RESIZED
        event). Returns the ReportGangResponse (its ``gang`` is the new
        state). Not idempotent: after a transport failure the gang is read,
        and the acknowledgement resent only while the gang is still
        PREEMPTING in the same attempt and resize (else None)."""
        before = self.get(gang_id)
        request = scheduler_pb2.ReportGangRequest(
            gang_id=gang_id, preemption_acknowledged=True, message=message)
        for attempt in range(self._retries + 1):
            try:
                return self._report(request, retry=False)
            except grpc.RpcError as error:
                if error.code() not in _RETRYABLE or \
                        attempt == self._retries:
                    raise
            now = self.get(gang_id)
            if now.state != types_pb2.GANG_STATE_PREEMPTING or \
                    now.attempts != before.attempts or \
                    now.resizes != before.resizes:
                return None
        raise AssertionError("unreachable")

    def renew_lease(self, gang_id):
        """Renews the gang's lease; returns the new expiry (Timestamp)."""
        reply = self._call("scheduler", "RenewGangLease",
            scheduler_pb2.RenewGangLeaseRequest(gang_id=gang_id), retry=True)
        return reply.lease_expire_time

    # -- watching --------------------------------------------------------

    def watch(self, gang_ids=(), queues=(), after_revision=None,
              bookmarks=False, stop=None):
        """Yields GangEvents after ``after_revision`` (None: live events
        only), then live ones, forever (or until ``stop``, a
        threading.Event, is set and the next event or bookmark arrives).

        Across a lost connection (daemon restart, network) it reconnects
        with backoff and resumes after the last revision it saw (bookmarks
        included), so no event is missed or repeated. When that revision
        was trimmed from the daemon's history (OUT_OF_RANGE) it re-lists:
        it yields one event per matching gang, of type
        EVENT_TYPE_UNSPECIFIED, carrying the gang's current state and the
        list's revision, then watches after that revision. BOOKMARK events
        are yielded only with ``bookmarks=True``."""
        revision = after_revision
        delay = 0.1
        while stop is None or not stop.is_set():
            request = scheduler_pb2.WatchGangsRequest(
                queues=queues, gang_ids=gang_ids)
            if revision is not None:
                request.after_revision = revision
            endpoint = self._endpoint
            batched = self._batched_watch
            stream = (endpoint.scheduler.WatchGangBatches if batched else
                      endpoint.scheduler.WatchGangs)(request,
                                                     metadata=self._metadata)
            try:
                for event in _events_of(stream, batched):
                    delay = 0.1
                    revision = max(revision or 0, event.revision)
                    if event.type == types_pb2.EVENT_TYPE_BOOKMARK and \
                            not bookmarks:
                        if stop is not None and stop.is_set():
                            break
                        continue
                    yield event
                    if stop is not None and stop.is_set():
                        break
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.UNIMPLEMENTED and batched:
                    self._batched_watch = False  # a daemon older than it
                    continue
                if error.code() == grpc.StatusCode.OUT_OF_RANGE:
                    gangs, revision = self._list("", (), tuple(gang_ids))
                    for gang in gangs:
                        if queues and gang.spec.queue not in queues:
                            continue
                        yield types_pb2.GangEvent(
                            revision=revision, gang=gang,
                            type=types_pb2.EVENT_TYPE_UNSPECIFIED)
                    continue
                if error.code() not in _RETRYABLE + (
                        grpc.StatusCode.CANCELLED,
                        grpc.StatusCode.RESOURCE_EXHAUSTED):
                    raise
                if error.code() == grpc.StatusCode.UNAVAILABLE and \
                        len(self._endpoints) > 1:
                    self._next(endpoint)  # every replica serves watches
            finally:
                stream.cancel()
            if stop is not None and stop.is_set():
                return
            # The stream ended (the daemon shut down) or broke: resume.
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    def follow(self, gang, stop=None):
        """Yields the ``GangChange``s a launcher acts on, for one gang:
        ADMITTED, RESIZED (an elastic gang grew or finished a shrink),
        SHRINK (asked to shrink), PREEMPTED, REQUEUED and, last, FINISHED;
        other events (RUNNING, checkpoints) are skipped.

        ``gang``: the Gang whose state the launcher acts on (e.g. what
        ``wait`` returned, the ranks started on its placement): the changes
        after its ``revision``. Or a gang id: the gang is read now, and a
        PREEMPTING or final state yields its change first. Reconnects as
        ``watch`` does; ends after FINISHED, or when ``stop`` (a
        threading.Event) is set and the next event or bookmark arrives."""
        if isinstance(gang, str):
            last, revision = self.get_with_revision(gang)
            if last.state in _TERMINAL or \
                    last.state == types_pb2.GANG_STATE_PREEMPTING:
                running = types_pb2.Gang(state=types_pb2.GANG_STATE_RUNNING,
                                         resizes=last.resizes)
                change = _change_of(running, last, revision)
                yield change
                if change.kind == "FINISHED":
                    return
        else:
            last, revision = gang, gang.revision
        for event in self.watch(gang_ids=(last.id,), after_revision=revision,
                                stop=stop):
            change = _change_of(last, event.gang, event.revision)
            last = event.gang
            if change is None:
                continue
            yield change
            if change.kind == "FINISHED":
                return

    def wait(self, gang_id, states, timeout=None):
        """Waits until the gang is in one of ``states`` (GangState values or
        names such as "RUNNING"); returns the Gang. Raises GangFinished when
        it reaches another final state first, TimeoutError after
        ``timeout`` seconds (None: no limit)."""
        if isinstance(states, (int, str)):
            states = (states,)
        wanted = {types_pb2.GangState.Value("GANG_STATE_" + s.upper())
                  if isinstance(s, str) else s for s in states}
        deadline = None if timeout is None else time.monotonic() + timeout
        result = {}
        done = threading.Event()

        def watch():
            try:
                gang, revision = self.get_with_revision(gang_id)
                if not self._settled(gang, wanted, result):
                    for event in self.watch(gang_ids=(gang_id,),
                                            after_revision=revision,
                                            stop=done):
                        if self._settled(event.gang, wanted, result):
                            break
            except Exception as error:  # noqa: BLE001: handed to the caller
                result["error"] = error
            done.set()

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        left = None if deadline is None else max(0, deadline - time.monotonic())
        if not done.wait(left):
            done.set()  # the watcher stops at its next event or bookmark
            raise TimeoutError("gang %s not %s after %ss" % (
                gang_id, "/".join(GangState.Name(s) for s in wanted),
                timeout))
        if "error" in result:
            raise result["error"]
        if "finished" in result:
            raise GangFinished(result["finished"])
        return result["gang"]

    @staticmethod
    def _settled(gang, wanted, result):
        if gang.state in wanted:
            result["gang"] = gang
            return True
        if gang.state in _TERMINAL:
            result["finished"] = gang
            return True
        return False

    # -- fleet -----------------------------------------------------------

    def list_nodes(self):
        """Returns every Node."""
        return list(self._call("fleet", "ListNodes",
                               fleet_pb2.ListNodesRequest(),
                               retry=True).nodes)

    def node_addresses(self):
        """Returns {node id: address}, the address being Node.address, or
        the id when the node has none."""
        return {n.id: getattr(n, "address", "") or n.id
                for n in self.list_nodes()}


class LeaseKeeper:
    """Keeps a gang's lease: a background thread calls RenewGangLease every
    ``interval`` seconds (default: the gang's lease_duration / 3). Use as a
    context manager around the work::

        with LeaseKeeper(client, gang.id):
            run_training()

    A renewal that fails with a transport error is tried again at the next
    tick; one the daemon refuses (FAILED_PRECONDITION: the gang finished or
    its lease already expired; NOT_FOUND) stops the keeper and sets
    ``lost`` (a threading.Event) and ``error``."""

    def __init__(self, client, gang_id, interval=None):
        self._client = client
        self.gang_id = gang_id
        if interval is None:
            lease = client.get(gang_id).spec.lease_duration
            seconds = lease.seconds + lease.nanos / 1e9
            if seconds <= 0:
                raise ValueError("gang %s has no lease_duration" % gang_id)
            interval = seconds / 3
        self.interval = interval
        self.lost = threading.Event()
        self.error = None
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="phalanx-lease-" + self.gang_id)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _run(self):
        while not self._stop.is_set():
            try:
                self._client.renew_lease(self.gang_id)
                self.renewals += 1
            except grpc.RpcError as error:
                if error.code() not in _RETRYABLE:
                    self.error = error
                    self.lost.set()
                    return
            self._stop.wait(self.interval)
