"""A lock client in a process of its own, for the scenarios a thread cannot play.

``python -m distlock.tools.chaos.holder hold URL PREFIX ID TTL_MS [TRACE]``
    takes the lock with ``run`` and keeps it (renewed) until killed; prints ``ACQUIRED``
    and, after its first successful renewal, ``RENEWED`` (one JSON object per line);
    with TRACE, its lock events go there as NDJSON, each written as it happens (a
    SIGKILL loses none recorded before it), for the parent's trace.
``python -m distlock.tools.chaos.holder intrude URL PREFIX ID TTL_MS [TRACE]``
    keeps trying to take the lock (short bodies) until its stdin closes, then prints its
    sections and the lock commands it sent, as JSON, so the parent can check them along
    with its own (``time.monotonic()`` is one clock for every process on the machine);
    with TRACE, its lock events go there as NDJSON, for the parent's trace.
``python -m distlock.tools.chaos.holder intrude-reentrant URL PREFIX ID TTL_MS``
    the same on a ``ReentrantLock`` (each section holds the key at depth 1).
``python -m distlock.tools.chaos.holder hold-semaphore URL PREFIX ID TTL_MS LIMIT``
``python -m distlock.tools.chaos.holder intrude-semaphore URL PREFIX ID TTL_MS LIMIT``
    the same two on a ``Semaphore`` of LIMIT permits: one permit each section.
``python -m distlock.tools.chaos.holder hold-read URL PREFIX ID TTL_MS``
    ``hold``, as a reader of a ``ReadWriteLock`` (its ``.read``).
``python -m distlock.tools.chaos.holder campaign URL PREFIX ID TTL_MS [TRACE]``
    ``hold``, as a candidate of the ``Election`` ID (identity ``doomed``): campaigns,
    leads (renewed) until killed.

Used when the parent's own threads cannot run: a body holding the GIL, or the holder
being killed with SIGKILL.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from redis.connection import parse_url

from distlock import (
    Election,
    Lock,
    LockHandle,
    LockLeaseLostError,
    LockNotAcquiredError,
    PermitHandle,
    ReadLock,
    ReadWriteLock,
    ReentrantLock,
    Semaphore,
)
from distlock.tools.chaos.recorder import Recorder, RecordingRedis, Section
from distlock.trace import NdjsonRecorder

#: Retries of the intruder's sections: the parent's (the spec has one Retries per trace).
RETRIES = 400

#: However the parent fares, this process gives up after this long.
MAX_SECONDS = 60.0


def _emit(kind: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()


def _client(url: str, recorder: Recorder, name: str) -> RecordingRedis:
    parse: Callable[[str], dict[str, Any]] = parse_url
    kwargs = {
        k: v for k, v in parse(url).items() if k in ("host", "port", "db", "username", "password")
    }
    return RecordingRedis(
        **kwargs,
        recorder=recorder,
        client_name=name,
        socket_timeout=1.0,
        socket_connect_timeout=1.0,
    )


def hold(
    url: str,
    prefix: str,
    id: str,
    ttl_ms: int,
    limit: int | None = None,
    trace: str | None = None,
    *,
    read: bool = False,
) -> None:
    """Take the key (a permit of it, with ``limit``; a read of it, with ``read``) and keep
    it until killed."""
    recorder = Recorder("holder")
    client = _client(url, recorder, f"{prefix}-holder")
    # Line-buffered: every event is in the file before the next one happens.
    events = (
        NdjsonRecorder(open(trace, "w", encoding="utf-8", buffering=1))  # noqa: SIM115
        if trace
        else None
    )
    rw = ReadWriteLock(client, prefix=prefix, ttl_ms=ttl_ms, trace=events) if read else None
    lock: Lock | ReentrantLock | Semaphore | ReadLock = (
        _primitive(client, prefix, ttl_ms, limit=limit, trace=events) if rw is None else rw.read
    )
    # A traced holder takes a free key (the spec has one Retries for a trace's sections:
    # the pollers beside it have none).
    options: dict[str, Any] = {"retries": 0} if trace else {}

    def body(handle: LockHandle | PermitHandle) -> None:
        start = time.monotonic()
        fence = None if isinstance(handle, PermitHandle) else handle.fence
        _emit("ACQUIRED", token=handle.token, fence=fence, at=start)
        token = handle.token
        recorder.wait_until(
            lambda: any(c.ok and c.sent > start and c.carries(token) for c in recorder.commands),
            MAX_SECONDS,
        )
        _emit("RENEWED", at=time.monotonic())
        # Held, and renewed, until the parent kills this process.
        handle.signal.wait(MAX_SECONDS)
        _emit("SIGNAL", at=time.monotonic())

    try:
        lock.run(id, body, **options)
    finally:
        (lock if rw is None else rw).close()
        client.close()


#: The identity of the candidate a ``campaign`` process runs.
DOOMED = "doomed"


def campaign(url: str, prefix: str, id: str, ttl_ms: int, trace: str | None = None) -> None:
    """Campaign for election ``id`` and lead until killed."""
    recorder = Recorder("leader")
    client = _client(url, recorder, f"{prefix}-leader")
    # Line-buffered: every event is in the file before the next one happens.
    events = (
        NdjsonRecorder(open(trace, "w", encoding="utf-8", buffering=1))  # noqa: SIM115
        if trace
        else None
    )
    election = Election(client, id, identity=DOOMED, prefix=prefix, ttl_ms=ttl_ms, trace=events)
    try:
        leadership = election.campaign(wait_ms=int(MAX_SECONDS * 1000))
        if leadership is None:
            _emit("NOT_LEADER", at=time.monotonic())
            return
        start = time.monotonic()
        token = leadership.token
        _emit("ACQUIRED", token=token, fence=leadership.fence, at=start)
        recorder.wait_until(
            lambda: any(c.ok and c.sent > start and c.carries(token) for c in recorder.commands),
            MAX_SECONDS,
        )
        _emit("RENEWED", at=time.monotonic())
        # Leads, renewed, until the parent kills this process.
        leadership.signal.wait(MAX_SECONDS)
        _emit("SIGNAL", at=time.monotonic())
    finally:
        election.close()
        client.close()


def intrude(
    url: str,
    prefix: str,
    id: str,
    ttl_ms: int,
    trace: str | None = None,
    *,
    reentrant: bool = False,
    limit: int | None = None,
) -> None:
    """Keep taking the key (a ReentrantLock's, with ``reentrant``, held at depth 1; a
    permit of a Semaphore of ``limit``, with ``limit``)."""
    recorder = Recorder("intruder")
    client = _client(url, recorder, f"{prefix}-intruder")
    events = NdjsonRecorder(trace, append=False) if trace else None
    lock = _primitive(client, prefix, ttl_ms, reentrant=reentrant, limit=limit, trace=events)
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    _emit("READY", at=time.monotonic())
    give_up = time.monotonic() + MAX_SECONDS
    while not stop.is_set() and time.monotonic() < give_up:
        section = recorder.new_section("intruder-process", f"{prefix}:{id}", ttl_ms)

        def body(handle: LockHandle | PermitHandle, section: Section = section) -> None:
            fence = None if isinstance(handle, PermitHandle) else handle.fence
            recorder.enter(section, handle.token, fence)
            try:
                if handle.signal.wait(ttl_ms * 0.75 / 1000):
                    recorder.signal_fired(section)
                    handle.signal.raise_if_aborted()
            finally:
                recorder.leave(section)

        try:
            lock.run(id, body, retries=RETRIES, retry_delay_ms=5)
        except LockLeaseLostError as exc:
            recorder.settle(section, "lost", exc)
        except LockNotAcquiredError as exc:
            recorder.settle(section, "not_acquired", exc)
        except Exception as exc:
            recorder.settle(section, "error", exc)
        else:
            recorder.settle(section, "ok")
        if section.entered:
            stop.wait(ttl_ms * 1.5 / 1000)
    lock.close()
    client.close()
    if events is not None:
        events.close()
    _emit(
        "RESULT",
        sections=[asdict(s) for s in recorder.entered()],
        commands=[asdict(c) for c in recorder.commands],
    )


def _primitive(
    client: RecordingRedis,
    prefix: str,
    ttl_ms: int,
    *,
    reentrant: bool = False,
    limit: int | None = None,
    trace: NdjsonRecorder | None = None,
) -> Lock | ReentrantLock | Semaphore:
    if limit is not None:
        return Semaphore(client, prefix=prefix, limit=limit, ttl_ms=ttl_ms, trace=trace)
    kind = ReentrantLock if reentrant else Lock
    return kind(client, prefix=prefix, ttl_ms=ttl_ms, trace=trace)


def main(argv: list[str]) -> None:
    mode, url, prefix, id, ttl, *rest = argv
    limit: int | None = None
    if mode.endswith("-semaphore"):
        limit, rest = int(rest[0]), rest[1:]
    if mode == "campaign":
        campaign(url, prefix, id, int(ttl), *rest)
    elif mode == "hold-read":
        hold(url, prefix, id, int(ttl), None, *rest, read=True)
    elif mode.startswith("hold"):
        hold(url, prefix, id, int(ttl), limit, *rest)
    else:
        intrude(
            url, prefix, id, int(ttl), *rest, reentrant=mode == "intrude-reentrant", limit=limit
        )


if __name__ == "__main__":
    main(sys.argv[1:])
