"""Recording the core's transitions as NDJSON, one event per line.

Every :class:`~distlock._core.section.Section` calls its ``trace`` callable once per transition with
a flat dict (the action's name, the client, the client-clock time ``t`` in ms, and the
state variables the specification observes).  :class:`NdjsonRecorder` is such a callable:

>>> from distlock import Lock
>>> from distlock.trace import NdjsonRecorder
>>> recorder = NdjsonRecorder("locks.ndjson")  # doctest: +SKIP
>>> locks = Lock("redis://127.0.0.1:6379/0", trace=recorder)  # doctest: +SKIP

``python -m distlock validate-trace locks.ndjson`` then asks TLC whether the recorded
events are a behaviour of ``spec/DistLock.tla`` (see :mod:`distlock.tools.tracecheck`).

Redis losing its data (a restart without persistence, a failover to a replica that had
not caught up) loses the fence counter; fences keep increasing then only under a clock
assumption (each fence is at least a floor on Redis's clock: see "Fencing tokens" in the
documentation), which a trace cannot show.  Only whoever
caused or saw it knows it happened: :meth:`NdjsonRecorder.declare_data_loss` writes a
:data:`DATA_LOSS` event saying so, and the checker compares fences within each stretch
between such events only.

An election's ``leader()`` reads are no section's transitions: whoever reads records them
beside the candidates' events with :func:`traced_leader` (or :func:`atraced_leader` for
the asyncio driver), as :data:`LEADER_SEND` before the read is sent and
:data:`LEADER_READ` (what it reported) or :data:`LEADER_FAIL` once it returned.  The
checker then holds each read to the spec's ``LeaderRead`` (``spec/ElectionTrace.tla``).

Whoever stopped Redis may also say when no Redis process ran at all
(:meth:`NdjsonRecorder.declare_redis_down`, a :data:`REDIS_DOWN` event; a stretch may
start at the instant a SIGKILL was sent: from then on the dying process serves no request
sent to it, since it must first read it with a system call, on whose return the pending
signal ends it): a request sent in that stretch whose failure was recorded in it never
ran anywhere, so the checker takes it
for what it is, a failure with no effect at Redis, and places the declared data loss
before the stretch ends.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Final, Protocol

from distlock._clock import now_ms

if TYPE_CHECKING:
    from distlock._leader import Leader

#: The action of an event declaring that Redis lost its data (keys and fence counters).
DATA_LOSS: Final = "RedisLostData"
#: The action of an event declaring that no Redis process ran from its ``since`` to its
#: ``t`` (ms on the clients' monotonic clock): killed and waited for, not yet started again.
REDIS_DOWN: Final = "RedisDown"
#: The actions of the declarations: what the clients' own sections did not record.
DECLARATIONS: Final = frozenset({DATA_LOSS, REDIS_DOWN})
#: An election's ``leader()`` read: sent (recorded before the call), and what it reported
#: (``identity`` and ``fence``, both None when nobody leads) or that it failed.
LEADER_SEND: Final = "LeaderSend"
LEADER_READ: Final = "LeaderRead"
LEADER_FAIL: Final = "LeaderReadFail"
#: The actions of an election's observers: reads, no section's transitions.
LEADER_ACTIONS: Final = frozenset({LEADER_SEND, LEADER_READ, LEADER_FAIL})


def data_loss_event(t: float, key: str | None = None) -> dict[str, Any]:
    """The event declaring that Redis lost its data at ``t`` (ms on the clients' monotonic
    clock), for ``key`` only, or for every key when None."""
    event: dict[str, Any] = {"action": DATA_LOSS, "client": "redis", "t": t}
    if key is not None:
        event["key"] = key
    return event


def redis_down_event(since: float, until: float) -> dict[str, Any]:
    """The event declaring that no Redis process ran from ``since`` to ``until`` (ms on
    the clients' monotonic clock): the old one had exited (killed and waited for) by
    ``since``, and the new one was not started before ``until``.  It is written at
    ``until``: its ``t``."""
    if not since <= until:
        raise ValueError(f"a stretch that ends before it starts: {since} > {until}")
    return {"action": REDIS_DOWN, "client": "redis", "t": until, "since": since}


class NdjsonRecorder:
    """A thread-safe ``trace`` callable writing one JSON object per line.

    Events from every section sharing the recorder (several Locks, both drivers, several
    threads) land in one file in the order the transitions happened: each section's own
    events are in order, and the lines of different sections are never interleaved.
    ``path`` is opened for appending (``append=False`` truncates it); pass an open text
    stream instead to write there.
    """

    def __init__(self, path: str | os.PathLike[str] | IO[str], *, append: bool = True) -> None:
        self._lock = threading.Lock()
        if isinstance(path, str | os.PathLike):
            self.path: Path | None = Path(path)
            self._stream: IO[str] = open(self.path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
            self._owns = True
        else:
            self.path = None
            self._stream = path
            self._owns = False
        self.count = 0
        self._closed = False

    def __call__(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n"
        with self._lock:
            if self._closed:
                return
            self._stream.write(line)
            self.count += 1

    def declare_data_loss(self, t: float, key: str | None = None) -> None:
        """Record that Redis lost its data at ``t`` (see :func:`data_loss_event`)."""
        self(data_loss_event(t, key))

    def declare_redis_down(self, since: float, until: float) -> None:
        """Record that no Redis process ran from ``since`` to ``until``, at ``until`` (see
        :func:`redis_down_event`)."""
        self(redis_down_event(since, until))

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._stream.flush()

    def close(self) -> None:
        """Flush and close (a stream passed in is flushed, not closed). Later events are
        dropped: a renewal finishing after the caller stopped recording is not an error."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stream.flush()
            if self._owns:
                self._stream.close()

    def __enter__(self) -> NdjsonRecorder:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events of an NDJSON trace, in file order (blank lines skipped)."""
    return list(iter_events(Path(path).read_text(encoding="utf-8").splitlines()))


def iter_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        event = json.loads(line)
        if not isinstance(event, dict) or "action" not in event or "client" not in event:
            raise ValueError(f"line {n}: not a distlock trace event: {line[:80]!r}")
        yield event


class _Election(Protocol):
    key: str


def _leader_event(action: str, key: str, observer: str, **fields: Any) -> dict[str, Any]:
    return {"action": action, "client": observer, "key": key, "t": now_ms(), **fields}


def _reported(leader: Leader | None) -> dict[str, Any]:
    if leader is None:
        return {"identity": None, "fence": None, "ttl_ms": None}
    return {"identity": leader.identity, "fence": leader.fence, "ttl_ms": leader.ttl_ms}


def traced_leader(
    election: _Election,
    trace: Callable[[dict[str, Any]], None],
    observer: str = "observer",
) -> Leader | None:
    """``election.leader()`` (a sync :class:`~distlock.Election`), recorded into ``trace``
    as the read of ``observer``: :data:`LEADER_SEND` before it is sent, then
    :data:`LEADER_READ` with what it reported, or :data:`LEADER_FAIL` (the error is
    re-raised).  An observer has one read in flight at a time."""
    read: Callable[[], Leader | None] = election.leader  # type: ignore[attr-defined]
    trace(_leader_event(LEADER_SEND, election.key, observer))
    try:
        leader = read()
    except BaseException:
        trace(_leader_event(LEADER_FAIL, election.key, observer))
        raise
    trace(_leader_event(LEADER_READ, election.key, observer, **_reported(leader)))
    return leader


async def atraced_leader(
    election: _Election,
    trace: Callable[[dict[str, Any]], None],
    observer: str = "observer",
) -> Leader | None:
    """:func:`traced_leader` for an asyncio :class:`~distlock.asyncio.Election`."""
    read: Callable[[], Awaitable[Leader | None]] = election.leader  # type: ignore[attr-defined]
    trace(_leader_event(LEADER_SEND, election.key, observer))
    try:
        leader = await read()
    except BaseException:
        trace(_leader_event(LEADER_FAIL, election.key, observer))
        raise
    trace(_leader_event(LEADER_READ, election.key, observer, **_reported(leader)))
    return leader


def write_events(path: str | os.PathLike[str], events: Iterable[dict[str, Any]]) -> None:
    """Write ``events`` as an NDJSON trace (used by tests to build corrupted traces)."""
    with NdjsonRecorder(Path(path), append=False) as rec:
        for event in events:
            rec(event)


__all__ = [
    "DATA_LOSS",
    "DECLARATIONS",
    "LEADER_ACTIONS",
    "LEADER_FAIL",
    "LEADER_READ",
    "LEADER_SEND",
    "REDIS_DOWN",
    "NdjsonRecorder",
    "atraced_leader",
    "data_loss_event",
    "iter_events",
    "read_events",
    "redis_down_event",
    "traced_leader",
    "write_events",
]
