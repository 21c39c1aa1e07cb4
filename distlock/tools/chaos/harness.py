"""Trials: several clients contend for one key while a fault is injected, and all is recorded.

A trial has *victims* (clients whose traffic goes through the Toxiproxy proxy, or that
share the faulted Redis), an *intruder* (a client on a direct connection that keeps trying
to take the key, so that whenever a victim's lease lapses someone really does take it),
and an *injector* that waits for a victim to be inside its body with at least one
successful renewal on the wire, then injects the scenario's fault and heals it.

On a semaphore (``Scenario.limit``) the same roles take permits of one key, and the
checks allow ``limit`` bodies at once where a lock allows one (``invariants.check``).

Bodies simulate work by waiting on the handle's signal (that sleep is the work, not a
synchronisation); an oblivious body keeps working after the signal fires, a cooperative
one stops and raises the signal's reason.  A watcher (a thread, or a task in asyncio)
records the instant each signal fires.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import io
import os
import re
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.connection import parse_url
from redis.retry import Retry

from distlock import (
    Lock,
    LockHandle,
    LockLeaseLostError,
    LockNotAcquiredError,
    PermitHandle,
    ReentrantLock,
    Semaphore,
)
from distlock.asyncio import Lock as AsyncLock
from distlock.asyncio import LockHandle as AsyncLockHandle
from distlock.asyncio import PermitHandle as AsyncPermitHandle
from distlock.asyncio import ReentrantLock as AsyncReentrantLock
from distlock.asyncio import Semaphore as AsyncSemaphore
from distlock.options import AsyncHoldOptions, HoldOptions
from distlock.tools import tracecheck
from distlock.tools.chaos.invariants import Verdict, check
from distlock.tools.chaos.leaks import Baseline, check_no_leaks, leaked_tasks
from distlock.tools.chaos.recorder import (
    Level,
    Recorder,
    RecordingAsyncRedis,
    RecordingRedis,
    Section,
    now,
)
from distlock.tools.chaos.report import ChaosReport, Row
from distlock.tools.chaos.targets import LocalTarget, RedisTarget, Settings
from distlock.tools.chaos.toxiproxy import Proxy
from distlock.trace import NdjsonRecorder, iter_events, read_events, write_events

#: A scenario's primitive (a lock, a reentrant lock or a semaphore of ``limit`` permits),
#: and the handle its ``run`` gives (a reentrant level's is a ``LockHandle``).
AnyLock: TypeAlias = Lock | ReentrantLock | Semaphore
AnyAsyncLock: TypeAlias = AsyncLock | AsyncReentrantLock | AsyncSemaphore
AnyHandle: TypeAlias = LockHandle | PermitHandle
AnyAsyncHandle: TypeAlias = AsyncLockHandle | AsyncPermitHandle

#: Socket timeouts on every client: long against the TTLs used here (a hang is a hang for
#: the lease), short enough that a stuck call ends within the scenario.
SOCKET_TIMEOUT = 1.0
#: Upper bound for one trial's threads and tasks to finish.
TRIAL_TIMEOUT = 30.0
#: Attempts per planned body when the acquire itself fails with a connection error.
VICTIM_ATTEMPTS = 20
#: How long the injector waits for a victim to renew inside its body.
ARM_TIMEOUT = 10.0
#: The trial of each scenario whose lock events (every Lock of the trial, the intruder's
#: too) are recorded and checked against the spec with TLC: one sample per scenario.
TRACED_TRIAL = 0
#: Retries of every section, victims and intruder alike: the spec has one Retries for all
#: the sections of a trace.  Denials only back off: no section gives up on contention.
RETRIES = 400
#: Upper bound, in CPU seconds, for TLC on one key of a traced trial: past it, the trace is
#: reported unchecked (a search too big for the suite's budget is no verdict on the run).
#: CPU, not wall time: TLC runs at the lowest priority, and a loaded machine must not turn
#: a small search into "unchecked".
TRACE_CPU_S = 90.0
#: The wall-clock bound behind it, for a TLC that gets no CPU at all.
TRACE_WALL_S = 900.0
#: Failed round trips beyond which TLC is not run on a semaphore's or a reentrant lock's
#: traced trial: each is a fault the model must place (and a failed acquire may have taken
#: the key; one sent and failed while no Redis ran, which the restart scenarios declare,
#: is none, and is not counted), and a storm of them (a proxy refusing every connection)
#: makes a search far beyond the suite's budget, each failed attempt being a section and
#: a model client more.
#: A plain lock's trial has no such bound: its sections run as rounds of as few model
#: clients as run at once (see tracecheck.lock_rounds), and a Redis down for a while (a
#: failed attempt and its failed cleanup release every few ms, 15-25 failures in the part
#: checked) costs TLC 10-25 s of CPU; ``TRACE_CPU_S`` still bounds it.  A reentrant
#: lock's sections take the spec's three holders in turn (an attempt refused on its
#: connection leaves its holder), but its model of a Redis restarted empty is costlier:
#: each refused attempt may have run at Redis and moved the fence counter, which the
#: declared data loss lets a key loss reset (before the declared stretch without Redis),
#: so such a trial (11 failures left of 28 in one) is far past ``TRACE_CPU_S`` and is still
#: skipped.
TRACE_MAX_FAILURES = 10
#: The same bound for a semaphore's traced trial, whose two permits make each failed round
#: trip that may have run costlier still: with 3 such failures a restart trial was accepted
#: in 36 s, with 7 and 8 TLC ran past ``TRACE_CPU_S``; past this bound the trial is skipped
#: at once rather than spending the suite's time on a search that will not end.
SEMAPHORE_TRACE_MAX_FAILURES = 4
#: How much of the traced trial TLC checks, in TTLs from its first event: the fault
#: lands on the first body and plays out (lapse, takeover, the first victim's verdict)
#: within it.  Runs of refused attempts are condensed (see tracecheck.condense).  Both keep the
#: check of a genuine run sound and TLC's search to seconds.
TRACE_TTLS = 4
#: The same for a semaphore's trial, whose sections are more (two permits: more grants per
#: TTL) and longer (TTL 500 ms): its first two TTLs hold the fault, the lapse and the
#: takeover (not yet the lapsed victim's refused release), and cost TLC 15-40 s where
#: four cost 45-95 s.
SEMAPHORE_TRACE_TTLS = 2
#: Victims of a scenario's traced trial (the others have three): the fault lands on the
#: first body, and each section at once is a section more in TLC's model.  With the
#: intruder and the trial's waiter, three sections at once at most: a lock's trace with
#: three victims cost TLC 45-90 s of CPU, past its bound on a loaded machine; and
#: ``spec/Reentrant.tla`` has three holders (its ASSUME allows no more), so a reentrant
#: trial with more would be skipped.  The other trials keep their three victims, for the
#: invariants checked on every trial; so does a semaphore's traced trial, whose victims
#: are what takes it over its limit, and whose check is shorter (``SEMAPHORE_TRACE_TTLS``).
TRACED_VICTIMS = 1
#: Model ticks per TTL for the chaos traces: coarser than the trace tests' model (whose
#: corruptions need the finer one), and four times fewer states.
TRACE_TICKS = 4

_usleep = ctypes.PyDLL(None).usleep  # PyDLL: the GIL stays held during the call
_usleep.argtypes = [ctypes.c_uint]
_usleep.restype = ctypes.c_int


#: Depth of the inner level a reentrant victim's body opens and spends its time in.
INNER_DEPTH = 2
#: The report's note where TLC is not installed and traces go unchecked.
NO_TLC = "not checked: no TLC"
#: Why a scenario that pauses or kills Redis does not run against a Redis it did not start.
NEEDS_OWN_REDIS = "needs a Redis this tool started"


class ScenarioFailed(Exception):
    """A scenario's check failed: the message says which, with the trial's timeline."""


class ScenarioNotRun(Exception):
    """A scenario cannot run here (the message says why); it neither passed nor failed."""


def require(condition: object, message: str) -> None:
    """Fail the scenario with ``message`` unless ``condition`` holds (an ``assert`` that
    survives ``python -O`` and carries a type of its own)."""
    if not condition:
        raise ScenarioFailed(message)


def hold_gil(ms: float) -> None:
    """Block in a C call that keeps the GIL: no other thread of this process runs."""
    _usleep(int(ms * 1000))


@dataclass
class Body:
    """What a section does while it holds the lock."""

    ms: float
    #: Stop when the signal fires and raise its reason (else keep working, oblivious).
    cooperative: bool = False
    #: Starve the section's timers at the start of the body: hold the GIL (sync) or block
    #: the event loop with ``time.sleep`` (asyncio).
    starve_ms: float = 0.0
    at_start: Callable[[Section], None] | None = None
    at_end: Callable[[Section], None] | None = None


Fault = Callable[[Section], None]


class Injector(threading.Thread):
    """Runs the scenario's fault function; its exception fails the trial."""

    def __init__(self, fault: Callable[[], None]) -> None:
        super().__init__(name="chaos-injector", daemon=True)
        self.fault = fault
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            self.fault()
        except BaseException as exc:
            self.errors.append(exc)


@dataclass
class Scenario:
    name: str
    ttl_ms: int
    target: RedisTarget
    proxy: Proxy | None
    settings: Settings
    report: ChaosReport
    admin: redis.Redis
    #: Victims and intruder on a ReentrantLock; each victim's body re-enters the key and
    #: spends its time at depth 2 (the intruder holds its own key at depth 1).
    reentrant: bool = False
    #: Victims and intruder on a Semaphore of this many permits (None: on a lock).  The
    #: checks then allow up to ``limit`` bodies at once (see ``invariants.check``).
    limit: int | None = None
    #: Long victim bodies are cooperative in one trial out of this many, oblivious in the
    #: others (see :meth:`cooperative`).
    cooperative_every: int = 3
    recorder: Recorder = field(init=False)
    tag: str = field(init=False)
    prefix: str = field(init=False)
    baseline: Baseline = field(init=False)
    targets: list[Section] = field(default_factory=list)
    #: Why this scenario's trace is not checked against the spec (None: it is).
    trace_excluded: str | None = None
    traces_validated: int = 0
    trace_seconds: float = 0.0
    #: Why the traced trial was not checked after all (too many failures, TLC timeout).
    trace_note: str | None = None
    _trace: NdjsonRecorder | None = None
    _trace_stream: io.StringIO | None = None
    _trace_events: list[dict[str, Any]] = field(default_factory=list)
    _trace_check: threading.Thread | None = None
    #: Traces of other processes of the traced trial still to be merged.
    _trace_parts: int = 0
    _trace_problems: list[str] = field(default_factory=list)
    _sync_clients: list[redis.Redis] = field(default_factory=list)
    _locks: list[AnyLock] = field(default_factory=list)
    _finished: bool = False

    def __post_init__(self) -> None:
        self.recorder = Recorder(self.name)
        self.tag = f"chaos-{uuid.uuid4().hex[:10]}"
        self.prefix = self.tag
        self.admin.ping()
        self.baseline = Baseline.take()

    def own_redis(self) -> LocalTarget:
        """The redis-server this tool started, for a fault that pauses or kills it; a Redis
        the tool did not start is never touched that way (:class:`ScenarioNotRun`)."""
        if not isinstance(self.target, LocalTarget):
            raise ScenarioNotRun(NEEDS_OWN_REDIS)
        return self.target

    # -- parameters -----------------------------------------------------------------------

    @property
    def key_id(self) -> str:
        return "res"

    @property
    def key(self) -> str:
        return f"{self.prefix}:{self.key_id}"

    @property
    def ttl(self) -> float:
        return self.ttl_ms / 1000.0

    @property
    def capacity(self) -> int:
        """How many sections may hold the key at once: the semaphore's limit, or 1."""
        return 1 if self.limit is None else self.limit

    def cooperative(self, trial: int) -> bool:
        """Whether ``trial``'s long bodies stop when their signal fires."""
        return trial % self.cooperative_every == self.cooperative_every - 1

    @property
    def slack_ms(self) -> float:
        return self.settings.slack_for(self.ttl_ms)

    @property
    def slack(self) -> float:
        return self.slack_ms / 1000.0

    def detection_window(self) -> float:
        """How long to keep a fault in place while waiting for a victim's signal."""
        return self.ttl + self.slack + 0.5

    # -- clients and locks ----------------------------------------------------------------

    def connection_kwargs(self, via_proxy: bool) -> dict[str, Any]:
        """Host, port, db and credentials of the target, or of the proxy in front of it."""
        parse: Callable[[str], dict[str, Any]] = parse_url
        parsed = parse(self.target.url)
        kwargs: dict[str, Any] = {
            k: parsed[k] for k in ("host", "port", "db", "username", "password") if k in parsed
        }
        if via_proxy:
            assert self.proxy is not None, "this scenario has no proxy"
            kwargs["host"], kwargs["port"] = self.proxy.host, self.proxy.port
        return kwargs

    def sync_client(self, role: str, *, via_proxy: bool, **kwargs: Any) -> RecordingRedis:
        client = RecordingRedis(
            **self.connection_kwargs(via_proxy),
            recorder=self.recorder,
            client_name=f"{self.tag}-{role}",
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=SOCKET_TIMEOUT,
            retry=Retry(ExponentialBackoff(cap=0.02, base=0.005), 1),
            **kwargs,
        )
        self._sync_clients.append(client)
        return client

    def async_client(self, role: str, *, via_proxy: bool) -> RecordingAsyncRedis:
        return RecordingAsyncRedis(
            **self.connection_kwargs(via_proxy),
            recorder=self.recorder,
            client_name=f"{self.tag}-{role}",
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=SOCKET_TIMEOUT,
            retry=AsyncRetry(ExponentialBackoff(cap=0.02, base=0.005), 1),
        )

    def sync_lock(self, client: redis.Redis, **options: Any) -> AnyLock:
        """The scenario's kind of lock (a Semaphore of ``limit`` permits, when it has one)
        on ``client``; ``options`` override the scenario's (``ttl_ms`` among them)."""
        options = {"prefix": self.prefix, "ttl_ms": self.ttl_ms, **options}
        lock: AnyLock
        if self.limit is not None:
            lock = Semaphore(client, limit=self.limit, trace=self._trace, **options)
        else:
            kind = ReentrantLock if self.reentrant else Lock
            lock = kind(client, trace=self._trace, **options)
        self._locks.append(lock)
        return lock

    def async_lock(self, client: redis.asyncio.Redis) -> AnyAsyncLock:
        if self.limit is not None:
            return AsyncSemaphore(
                client, prefix=self.prefix, limit=self.limit, ttl_ms=self.ttl_ms, trace=self._trace
            )
        kind = AsyncReentrantLock if self.reentrant else AsyncLock
        return kind(client, prefix=self.prefix, ttl_ms=self.ttl_ms, trace=self._trace)

    # -- the trace checked against the spec ------------------------------------------------

    def exclude_trace(self, reason: str) -> None:
        """Record no trace: the spec cannot explain this scenario's runs, for ``reason``
        (a second reason is added to the first)."""
        if self.trace_excluded is None:
            self.trace_excluded = reason
        elif reason not in self.trace_excluded:
            self.trace_excluded = f"{self.trace_excluded}; and {reason}"

    def waiters_in(self, trial: int) -> bool:
        """Waiters join every trial, the one whose trace TLC checks too: the trace check
        takes a waiting section's blocks, wake-ups, withdrawals and handed keys (see
        :mod:`distlock.tools.tracecheck`); that trial has fewer of them
        (``waiters.TRACED_WAITERS``)."""
        return True

    def traced(self, trial: int) -> bool:
        """Whether ``trial``'s events are recorded for TLC."""
        return trial == TRACED_TRIAL and self.trace_excluded is None

    def _victims(self, trial: int, victims: int) -> int:
        """The victims of ``trial``: fewer in a lock's traced trial (:data:`TRACED_VICTIMS`)."""
        if self.traced(trial) and self.limit is None:
            return min(victims, TRACED_VICTIMS)
        return victims

    def start_trace(self, trial: int) -> None:
        """For a scenario that runs its own trials (not :meth:`sync_trial`): record the
        lock events of ``trial``, if it is the traced one, in every Lock made from now on
        (:meth:`sync_lock`); :meth:`stop_trace` ends it."""
        self._start_trace(trial)

    def stop_trace(self) -> None:
        """End what :meth:`start_trace` began, once the trial's Locks are closed
        (:meth:`close_sync`), and check the trace."""
        self._stop_trace()

    def _start_trace(self, trial: int) -> None:
        if trial == TRACED_TRIAL and self.trace_excluded is None and self._trace is None:
            self._trace_stream = io.StringIO()
            self._trace = NdjsonRecorder(self._trace_stream)

    def _stop_trace(self) -> None:
        """Keep the events of the traced trial; every Lock of it is closed by now."""
        if self._trace is None or self._trace_stream is None:
            return
        self._trace.close()
        self._trace_events = list(iter_events(self._trace_stream.getvalue().splitlines()))
        self._trace, self._trace_stream = None, None
        self._start_validation()

    def trace_part(self, trial: int) -> str | None:
        """Where a process of ``trial`` other than this one writes its lock events, to be
        merged into the trial's trace with :meth:`add_trace_part` (None: not traced)."""
        if trial != TRACED_TRIAL or self.trace_excluded is not None:
            return None
        self._trace_parts += 1
        fd, path = tempfile.mkstemp(prefix="chaos-trace-", suffix=".ndjson")
        os.close(fd)
        return path

    def add_trace_part(self, path: str, name: str) -> None:
        """Merge another process's events (one monotonic clock for every process)."""
        try:
            part = [{**e, "client": f"{name}:{e['client']}"} for e in read_events(path)]
        finally:
            Path(path).unlink(missing_ok=True)
        self._trace_events = list(heapq.merge(self._trace_events, part, key=lambda e: e["t"]))
        self._trace_parts -= 1
        self._start_validation()

    def _start_validation(self) -> None:
        if self._trace_parts or not self._trace_events or self._trace_check is not None:
            return
        keep = self.settings.trace_dir
        if keep is not None:
            name = re.sub(r"[^A-Za-z0-9]+", "-", self.name).strip("-")
            Path(keep).mkdir(parents=True, exist_ok=True)
            write_events(Path(keep) / f"{name}.ndjson", self._trace_events)
        if not self.settings.validate_traces:
            self.trace_note = NO_TLC
            return
        # TLC (one core) runs while the next trials do.
        self._trace_check = threading.Thread(
            target=self._validate_trace, name="chaos-tlc", daemon=True
        )
        self._trace_check.start()

    def declare_data_loss(self) -> None:
        """Redis is about to lose its data: fences start over (see distlock.trace)."""
        if self._trace is not None:
            self._trace.declare_data_loss(now() * 1000.0)

    def declare_redis_down(self, since: float, until: float) -> None:
        """No Redis process ran from ``since`` to ``until`` (monotonic seconds): a round
        trip sent and failed in between never ran (see distlock.trace)."""
        if self._trace is not None:
            self._trace.declare_redis_down(since * 1000.0, until * 1000.0)

    def _validate_trace(self) -> None:
        """TLC on the traced trial's events, one key at a time; notes the problems found."""
        if self.trace_excluded is not None or not self._trace_events:
            return
        within = (TRACE_TTLS if self.limit is None else SEMAPHORE_TRACE_TTLS) * self.ttl_ms
        checked = tracecheck.first_ms(tracecheck.condense(self._trace_events), within)
        # A round trip that failed while no Redis ran never ran: no fault to place.
        failures = sum(
            1 for e in checked if str(e["action"]).endswith("Fail")
        ) - tracecheck.never_ran_failures(checked, reentrant=self.reentrant)
        plain = self.limit is None and not self.reentrant
        bound = TRACE_MAX_FAILURES if self.limit is None else SEMAPHORE_TRACE_MAX_FAILURES
        if failures > bound and not plain:
            self.trace_note = f"skipped: {failures} failed round trips"
            return
        unchecked = self._reentrant_unchecked(within)
        if unchecked is not None:
            self.trace_note = f"skipped: {unchecked}"
            return
        try:
            verdicts = tracecheck.check(
                self._trace_events,
                timeout_s=TRACE_WALL_S,
                cpu_s=TRACE_CPU_S,
                condensed=True,
                within_ms=within,
                ticks=TRACE_TICKS,
                # A round trip that failed sooner than the socket timeout failed on its
                # connection: that request cannot run in Redis later.
                hang_after_ms=SOCKET_TIMEOUT * 1000.0,
                # TLC runs beside the next trials: their timing comes first.
                niceness=19,
            )
        except subprocess.TimeoutExpired:
            self.trace_note = f"TLC timeout ({TRACE_CPU_S:.0f} s of CPU)"
            return
        except tracecheck.TraceError as exc:
            self._trace_problems.append(f"the recorded trace could not be checked: {exc}")
            return
        self.traces_validated = sum(v.accepted for v in verdicts)
        self.trace_seconds = sum(v.seconds for v in verdicts)
        self._trace_problems += [
            f"the recorded trace is no behaviour of the spec: {v.describe()}"
            for v in verdicts
            if not v.accepted
        ]

    def _reentrant_unchecked(self, within_ms: float) -> str | None:
        """Why the part of a reentrant key's trace that TLC would check is outside what
        ``spec/Reentrant.tla``'s trace check takes (see tracecheck.reentrant_unchecked),
        or None.  Such a trial is skipped, not failed: its shape says nothing about the
        lock."""
        by_key = tracecheck.split_by_key(tracecheck.condense(self._trace_events))
        for events in by_key.values():
            if tracecheck.is_reentrant(events):
                why = tracecheck.reentrant_unchecked(
                    tracecheck.first_ms(events, within_ms),
                    hang_after_ms=SOCKET_TIMEOUT * 1000.0,
                )
                if why is not None:
                    return why
        return None

    def _trace_verdict(self) -> list[str]:
        if self._trace_check is not None:
            self._trace_check.join(TRACE_WALL_S + 30)
            if self._trace_check.is_alive():
                return [f"TLC still running on the recorded trace after {TRACE_WALL_S:.0f} s"]
        return list(self._trace_problems)

    def close_sync(self) -> None:
        locks, self._locks = self._locks, []
        for lock in locks:
            lock.close()
        clients, self._sync_clients = self._sync_clients, []
        for client in clients:
            client.close()

    # -- sections -------------------------------------------------------------------------

    def _section(
        self, role: str, wait_ms: int | None = None, ttl_ms: int | None = None
    ) -> Section:
        return self.recorder.new_section(role, self.key, ttl_ms or self.ttl_ms, wait_ms)

    def _renew_hook(self, section: Section) -> Callable[[BaseException], None]:
        def hook(exc: BaseException) -> None:
            section.renew_errors += 1
            self.recorder.changed()

        return hook

    def run_sync_section(
        self,
        lock: AnyLock,
        role: str,
        body: Body,
        *,
        retries: int,
        retry_delay_ms: float,
        nest: bool = False,
        wait_ms: int | None = None,
        ttl_ms: int | None = None,
    ) -> Section:
        """One ``run``; with ``nest`` (a ReentrantLock), the body re-enters the key and does
        its work at depth 2; with ``wait_ms``, it waits for the key that long.  ``ttl_ms``:
        the lock's, when not the scenario's."""
        section = self._section(role, wait_ms, ttl_ms)
        reenter = None
        if nest:
            assert isinstance(lock, ReentrantLock), "only a ReentrantLock is re-entered"
            reenter = lock
        options: HoldOptions = {
            "retries": retries,
            "retry_delay_ms": retry_delay_ms,
            "on_renew_error": self._renew_hook(section),
        }
        if wait_ms is not None:
            options["wait_ms"] = wait_ms
        try:
            lock.run(
                self.key_id,
                lambda handle: self._sync_body(section, body, handle, reenter),
                **options,
            )
        except LockLeaseLostError as exc:
            self.recorder.settle(section, "lost", exc)
        except LockNotAcquiredError as exc:
            self.recorder.settle(section, "not_acquired", exc)
        except Exception as exc:
            self.recorder.settle(section, "error", exc)
        else:
            self.recorder.settle(section, "ok")
        return section

    def _sync_body(
        self,
        section: Section,
        body: Body,
        handle: AnyHandle,
        reenter: ReentrantLock | None = None,
    ) -> None:
        rec = self.recorder
        rec.enter(section, handle.token, _fence(handle), handle.signal.aborted)
        started = now()
        watcher = threading.Thread(
            target=self._watch_sync,
            args=(section, handle),
            name=f"watch-{section.seq}",
            daemon=True,
        )
        watcher.start()
        try:
            if reenter is None:
                self._sync_work(section, body, handle, started)
            else:
                self._sync_nested(section, body, handle, started, reenter)
        finally:
            rec.leave(section)
            watcher.join(timeout=5)

    def _check_level(
        self,
        level: Level,
        outer: AnyHandle | AnyAsyncHandle,
        inner: AnyHandle | AnyAsyncHandle,
    ) -> None:
        """The inner handle is the next level of the outer one, sharing what it must."""
        depth = getattr(inner, "depth", None)
        if depth != level.depth:
            level.problems.append(f"re-entry opened depth {depth}, want {level.depth}")
        theirs = (inner.token, _fence(inner), inner.signal)
        if theirs != (outer.token, _fence(outer), outer.signal):
            level.problems.append("the inner level's token, fence or signal is not the outer's")

    def _sync_nested(
        self,
        section: Section,
        body: Body,
        handle: AnyHandle,
        started: float,
        lock: ReentrantLock,
    ) -> None:
        """``with lock.hold(key)`` inside the body: a re-entry, where the work is done."""
        rec = self.recorder
        level = rec.reenter(section, INNER_DEPTH)
        try:
            with lock.hold(self.key_id) as inner:
                rec.level_entered(level)
                self._check_level(level, handle, inner)
                try:
                    self._sync_work(section, body, inner, started)
                finally:
                    rec.level_left(level)
        except LockLeaseLostError as exc:
            rec.level_settled(level, "lost", exc)
            raise
        except BaseException as exc:
            rec.level_settled(level, "error", exc)
            raise
        rec.level_settled(level, "ok")

    def _sync_work(
        self, section: Section, body: Body, handle: AnyHandle, started: float
    ) -> None:
        """The body's work (``started``: when the outermost body began)."""
        if body.at_start is not None:
            body.at_start(section)
        if body.starve_ms:
            section.starved_from = now()
            hold_gil(body.starve_ms)
            section.starved_until = now()
        left = body.ms / 1000.0 - (now() - started)
        if left > 0 and handle.signal.wait(left):
            if body.cooperative:
                handle.signal.raise_if_aborted()
            left = body.ms / 1000.0 - (now() - started)
            if left > 0:
                time.sleep(left)  # oblivious: the work goes on
        if body.at_end is not None:
            body.at_end(section)

    def _watch_sync(self, section: Section, handle: AnyHandle) -> None:
        # Bounded: a body lasts at most TRIAL_TIMEOUT.
        give_up = now() + TRIAL_TIMEOUT
        while section.end is None and now() < give_up:
            if handle.signal.wait(0.005):
                self.recorder.signal_fired(section)
                return

    async def run_async_section(
        self,
        lock: AnyAsyncLock,
        role: str,
        body: Body,
        *,
        retries: int,
        retry_delay_ms: float,
        cancel_on_loss: bool = True,
        nest: bool = False,
        wait_ms: int | None = None,
    ) -> Section:
        """One ``run``; with ``nest`` (a ReentrantLock), the body re-enters the key and does
        its work at depth 2; with ``wait_ms``, it waits for the key that long."""
        section = self._section(role, wait_ms)
        reenter = None
        if nest:
            assert isinstance(lock, AsyncReentrantLock), "only a ReentrantLock is re-entered"
            reenter = lock
        options: AsyncHoldOptions = {
            "retries": retries,
            "retry_delay_ms": retry_delay_ms,
            "on_renew_error": self._renew_hook(section),
            "cancel_on_loss": cancel_on_loss,
        }
        if wait_ms is not None:
            options["wait_ms"] = wait_ms
        try:
            await lock.run(
                self.key_id,
                lambda handle: self._async_body(section, body, handle, reenter),
                **options,
            )
        except LockLeaseLostError as exc:
            self.recorder.settle(section, "lost", exc)
        except LockNotAcquiredError as exc:
            self.recorder.settle(section, "not_acquired", exc)
        except Exception as exc:
            self.recorder.settle(section, "error", exc)
        else:
            self.recorder.settle(section, "ok")
        return section

    async def _async_body(
        self,
        section: Section,
        body: Body,
        handle: AnyAsyncHandle,
        reenter: AsyncReentrantLock | None = None,
    ) -> None:
        rec = self.recorder
        rec.enter(section, handle.token, _fence(handle), handle.signal.aborted)
        started = now()
        watcher = asyncio.create_task(self._watch_async(section, handle), name="chaos-watch")
        try:
            if reenter is None:
                await self._async_work(section, body, handle, started)
            else:
                await self._async_nested(section, body, handle, started, reenter)
        except asyncio.CancelledError:
            # cancel_on_loss: the cancellation is how the loss reaches the body.
            rec.signal_fired(section)
            raise
        finally:
            rec.leave(section)
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def _async_nested(
        self,
        section: Section,
        body: Body,
        handle: AnyAsyncHandle,
        started: float,
        lock: AsyncReentrantLock,
    ) -> None:
        """``async with lock.hold(key)`` inside the body: a re-entry, where the work is done.
        A loss cancels the body at this level; each level's exit must turn that into
        ``LockLeaseLostError``."""
        rec = self.recorder
        level = rec.reenter(section, INNER_DEPTH)
        try:
            async with lock.hold(self.key_id) as inner:
                rec.level_entered(level)
                self._check_level(level, handle, inner)
                try:
                    await self._async_work(section, body, inner, started)
                except asyncio.CancelledError:
                    rec.signal_fired(section)
                    raise
                finally:
                    rec.level_left(level)
        except LockLeaseLostError as exc:
            rec.level_settled(level, "lost", exc)
            raise
        except BaseException as exc:
            rec.level_settled(level, "error", exc)
            raise
        rec.level_settled(level, "ok")

    async def _async_work(
        self, section: Section, body: Body, handle: AnyAsyncHandle, started: float
    ) -> None:
        """The body's work (``started``: when the outermost body began)."""
        if body.at_start is not None:
            body.at_start(section)
        if body.starve_ms:
            section.starved_from = now()
            time.sleep(body.starve_ms / 1000.0)  # noqa: ASYNC251 (blocks the loop on purpose)
            section.starved_until = now()
        left = body.ms / 1000.0 - (now() - started)
        fired = False
        if left > 0:
            try:
                fired = await asyncio.wait_for(handle.signal.wait(), left)
            except TimeoutError:
                fired = False
        if fired:
            if body.cooperative:
                handle.signal.raise_if_aborted()
            left = body.ms / 1000.0 - (now() - started)
            if left > 0:
                await asyncio.sleep(left)
        if body.at_end is not None:
            body.at_end(section)

    async def _watch_async(self, section: Section, handle: AnyAsyncHandle) -> None:
        await handle.signal.wait()
        self.recorder.signal_fired(section)

    # -- the fault ------------------------------------------------------------------------

    def wait_for_victim(self, *, renewed: bool = True) -> Section | None:
        """A victim inside its body (with a successful renewal on the wire, by default)."""
        found: list[Section] = []

        def ready() -> bool:
            for s in self.recorder.in_body():
                if s.client.startswith("victim") and (
                    not renewed or self.recorder.renewed_in_body(s)
                ):
                    found.append(s)
                    return True
            return False

        self.recorder.wait_until(ready, ARM_TIMEOUT)
        return found[0] if found else None

    def inject(self, fault: Fault, *, expect_lapse: bool, renewed: bool = True) -> None:
        victim = self.wait_for_victim(renewed=renewed)
        if victim is None:
            raise ScenarioFailed(
                f"{self.name}: no victim renewed inside its body within {ARM_TIMEOUT}s"
            )
        if expect_lapse:
            self.targets.append(victim)
        fault(victim)

    def crowd(self, victim: Section) -> Callable[[], None]:
        """Take every permit of the key on direct connections while ``victim``'s lapsed,
        oblivious body still runs.  Call it with the fault still in place; it returns once
        every crowder holds a permit (or the victim's body is over), and what it returns
        waits for the crowders to leave.

        For a key of several permits, a fault that lapses one holder lets in only as many
        others as ask at the right moment: the intruder may be between two of its turns,
        and once the fault is gone the other victims race it.  So "more bodies than
        permits" would rest on scheduling.  Here ``capacity`` crowders poll (5 ms apart),
        with only the intruder to race while the fault holds the victims back, and each
        stays until the victim's body is over: with the victim, one body more than the
        key allows, whatever the timing."""
        stop = threading.Event()

        def stay(_section: Section) -> None:
            self.recorder.wait_until(lambda: victim.end is not None, TRIAL_TIMEOUT / 3)

        crowders = [
            threading.Thread(
                target=self._intrude_once,
                args=(
                    self.sync_lock(self.sync_client(f"crowder{i}", via_proxy=False)),
                    stop,
                    f"crowder{i}",
                    Body(0.0, at_start=stay),
                ),
                name=f"chaos-crowder{i}",
                daemon=True,
            )
            for i in range(self.capacity)
        ]
        for t in crowders:
            t.start()

        def settled() -> bool:
            inside = [
                s for s in self.recorder.in_body() if s.client.startswith("crowder")
            ]
            return victim.end is not None or len(inside) >= len(crowders)

        self.recorder.wait_until(settled, TRIAL_TIMEOUT / 3)
        stop.set()

        def leave() -> None:
            for t in crowders:
                t.join(TRIAL_TIMEOUT / 2)

        return leave

    def wait_signal(self, victim: Section, timeout: float | None = None) -> bool:
        """Keep a fault in place until the victim's signal fires or its body ends."""
        return self.recorder.wait_until(
            lambda: victim.signal_at is not None or victim.end is not None,
            self.detection_window() if timeout is None else timeout,
        )

    # -- trials ---------------------------------------------------------------------------

    def victim_bodies(self, trial: int, index: int) -> list[Body]:
        """A long first body (so faults land inside it) and a short second one.

        Long bodies are oblivious in most trials, so a lapsed lease leaves a body running
        while someone else takes the key; cooperative in one of ``cooperative_every``.
        """
        cooperative = self.cooperative(trial)
        return [
            Body(self.ttl_ms * 3.0, cooperative=cooperative),
            Body(self.ttl_ms * 0.5, cooperative=True),
        ]

    def sync_trial(
        self,
        trial: int,
        fault: Callable[[], None] | None,
        *,
        victims: int = 3,
        bodies: Callable[[int, int], list[Body]] | None = None,
        intruder: bool = True,
        victim_client: dict[str, Any] | None = None,
        via_proxy: bool = True,
        on_client: Callable[[str, redis.Redis], None] | None = None,
    ) -> None:
        """Victims on Locks over the faulted path (two share one Lock), an intruder on a
        direct connection, and the injector, all as threads of this process."""
        self.recorder.trials += 1
        self._start_trace(trial)
        victims = self._victims(trial, victims)
        make_bodies = bodies or self.victim_bodies
        options = victim_client or {}
        # Two victims share a Lock (and its client) unless each needs its own connection.
        share = not options.get("single_connection_client")
        shared: tuple[AnyLock, redis.Redis] | None = None
        threads: list[threading.Thread] = []
        for i in range(victims):
            role = f"victim{i}"
            if share and i < 2 and shared is not None:
                lock, client = shared
            else:
                client = self.sync_client(f"{role}-t{trial}", via_proxy=via_proxy, **options)
                lock = self.sync_lock(client)
                if share and i == 0:
                    shared = (lock, client)
            if on_client is not None:
                on_client(role, client)
            threads.append(
                threading.Thread(
                    target=self._sync_victim,
                    args=(lock, role, make_bodies(trial, i)),
                    name=f"chaos-{role}",
                    daemon=True,
                )
            )
        stop = threading.Event()
        intruder_thread = self._intruder_thread(trial, stop) if intruder else None
        injector = self._injector_thread(fault)
        from distlock.tools.chaos import waiters

        waiting = (
            waiters.sync_threads(self, trial, stop, via_proxy=via_proxy)
            if self.waiters_in(trial)
            else []
        )
        self._run_threads(threads, injector, intruder_thread, stop, waiting)
        self.close_sync()
        self._stop_trace()

    def _intruder_thread(self, trial: int, stop: threading.Event) -> threading.Thread:
        """The intruder: a sync client straight to Redis, never through the proxy."""
        lock = self.sync_lock(self.sync_client(f"intruder-t{trial}", via_proxy=False))
        return threading.Thread(
            target=self._sync_intruder, args=(lock, stop), name="chaos-intruder", daemon=True
        )

    def _injector_thread(self, fault: Callable[[], None] | None) -> Injector | None:
        return None if fault is None else Injector(fault)

    def _run_threads(
        self,
        victims: list[threading.Thread],
        injector: Injector | None,
        intruder: threading.Thread | None,
        stop: threading.Event,
        waiting: Sequence[threading.Thread] = (),
    ) -> None:
        helpers: list[threading.Thread] = [x for x in (injector, intruder) if x is not None]
        helpers.extend(waiting)
        for t in [*victims, *helpers]:
            t.start()
        give_up = now() + TRIAL_TIMEOUT
        for t in victims:
            t.join(timeout=max(0.0, give_up - now()))
        stop.set()
        for t in helpers:
            t.join(timeout=max(0.0, give_up - now()))
        hung = [t.name for t in [*victims, *helpers] if t.is_alive()]
        if hung:
            raise ScenarioFailed(
                f"{self.name}: still running after {TRIAL_TIMEOUT}s: {hung}\n" + self.timeline()
            )
        if injector is not None and injector.errors:
            raise injector.errors[0]

    def _sync_victim(self, lock: AnyLock, role: str, plan: list[Body]) -> None:
        for body in plan:
            # A fault can fail the acquire itself (a connection error, never contention):
            # try again so that every planned body runs.
            for _ in range(VICTIM_ATTEMPTS):
                section = self.run_sync_section(
                    lock, role, body, retries=RETRIES, retry_delay_ms=10, nest=self.reentrant
                )
                if section.entered or section.outcome != "error":
                    break
                time.sleep(0.01)

    def _sync_intruder(self, lock: AnyLock, stop: threading.Event) -> None:
        for _ in range(200):
            section = self._intrude_once(lock, stop)
            if section is None:
                return
            # Let the victims have the key between two intrusions.
            if stop.wait(self.ttl * 1.5):
                return

    def _intrude_once(
        self,
        lock: AnyLock,
        stop: threading.Event,
        role: str = "intruder",
        body: Body | None = None,
    ) -> Section | None:
        """Poll for the key (5 ms apart) until taken or ``stop`` (the trial's victims are
        done); then run ``body`` (by default a short cooperative one)."""
        for _ in range(int(TRIAL_TIMEOUT / 0.1)):
            if stop.is_set():
                return None
            section = self.run_sync_section(
                lock,
                role,
                body or Body(self.ttl_ms * 0.75, cooperative=True),
                retries=RETRIES,
                retry_delay_ms=5,
            )
            if section.entered:
                return section
        return None

    def async_trial(
        self,
        trial: int,
        fault: Callable[[], None] | None,
        *,
        victims: int = 3,
        bodies: Callable[[int, int], list[Body]] | None = None,
        intruder: bool = True,
        cancel_on_loss: bool = True,
        via_proxy: bool = True,
    ) -> None:
        """Victims as tasks of one event loop (two share one AsyncLock); the intruder and
        the injector are threads, so they keep going when the loop is blocked."""
        self.recorder.trials += 1
        self._start_trace(trial)
        victims = self._victims(trial, victims)
        make_bodies = bodies or self.victim_bodies
        stop = threading.Event()
        intruder_thread = self._intruder_thread(trial, stop) if intruder else None
        injector = self._injector_thread(fault)
        for t in (injector, intruder_thread):
            if t is not None:
                t.start()
        problems: list[str] = []
        try:
            asyncio.run(
                self._async_main(trial, victims, make_bodies, cancel_on_loss, via_proxy, problems)
            )
        finally:
            stop.set()
            give_up = now() + TRIAL_TIMEOUT
            for t in (injector, intruder_thread):
                if t is not None:
                    t.join(timeout=max(0.0, give_up - now()))
        hung = [t.name for t in (injector, intruder_thread) if t is not None and t.is_alive()]
        if hung:
            problems.append(f"still running: {hung}")
        if problems:
            raise ScenarioFailed(f"{self.name}: " + "; ".join(problems) + "\n" + self.timeline())
        if injector is not None and injector.errors:
            raise injector.errors[0]
        self.close_sync()
        self._stop_trace()

    async def _async_main(
        self,
        trial: int,
        victims: int,
        make_bodies: Callable[[int, int], list[Body]],
        cancel_on_loss: bool,
        via_proxy: bool,
        problems: list[str],
    ) -> None:
        try:
            await asyncio.wait_for(
                self._async_victims(trial, victims, make_bodies, cancel_on_loss, via_proxy),
                TRIAL_TIMEOUT,
            )
        except TimeoutError:
            problems.append(f"asyncio victims still running after {TRIAL_TIMEOUT}s")
        left = await leaked_tasks()
        if left:
            problems.append(f"asyncio tasks left after aclose(): {left}")

    async def _async_victims(
        self,
        trial: int,
        victims: int,
        make_bodies: Callable[[int, int], list[Body]],
        cancel_on_loss: bool,
        via_proxy: bool,
    ) -> None:
        clients: list[redis.asyncio.Redis] = []
        locks: list[AnyAsyncLock] = []

        def new_lock(role: str) -> AnyAsyncLock:
            client = self.async_client(role, via_proxy=via_proxy)
            clients.append(client)
            lock = self.async_lock(client)
            locks.append(lock)
            return lock

        shared = new_lock(f"victim-shared-t{trial}")

        async def victim(lock: AnyAsyncLock, role: str, plan: list[Body]) -> None:
            for body in plan:
                for _ in range(VICTIM_ATTEMPTS):
                    section = await self.run_async_section(
                        lock,
                        role,
                        body,
                        retries=RETRIES,
                        retry_delay_ms=10,
                        cancel_on_loss=cancel_on_loss,
                        nest=self.reentrant,
                    )
                    if section.entered or section.outcome != "error":
                        break
                    await asyncio.sleep(0.01)

        from distlock.tools.chaos import waiters

        victims_done = asyncio.Event()
        waiting = asyncio.create_task(
            waiters.async_waiters(self, trial, victims_done, via_proxy=via_proxy)
            if self.waiters_in(trial)
            else victims_done.wait()
        )
        tasks = []
        for i in range(victims):
            lock = shared if i < 2 else new_lock(f"victim{i}-t{trial}")
            tasks.append(asyncio.create_task(victim(lock, f"victim{i}", make_bodies(trial, i))))
        try:
            await asyncio.gather(*tasks)
        finally:
            victims_done.set()
            try:
                # The waiters end their current wait (bounded by its wait_ms) and stop.
                await waiting
            finally:
                for lock in locks:
                    await lock.aclose()
                for client in clients:
                    await client.aclose()

    # -- the verdict ----------------------------------------------------------------------

    def timeline(self) -> str:
        rec = self.recorder
        lines = [s.describe(rec.origin) for s in rec.entered()]
        lines += [f"fault at {(t - rec.origin) * 1000:.1f} ms: {what}" for t, what in rec.fault_log]
        return "\n".join(lines)

    def _reentered(self) -> list[str]:
        """Every victim body opened depth 2 (or was refused it with the loss), and each
        re-entry's R_ENTER is on the wire, matched to its section by the token."""
        rec = self.recorder
        problems: list[str] = []
        for s in rec.entered():
            if not s.client.startswith("victim"):
                continue
            inner = s.inner
            if inner is None or (not inner.entered and inner.outcome != "lost"):
                problems.append(
                    f"the body never reached depth {INNER_DEPTH}: {s.describe(rec.origin)}"
                )
            elif inner.start is not None and not any(
                c.depth_write == "enter" and c.ok and inner.asked <= c.sent <= inner.start
                for c in rec.commands_of(s)
            ):
                problems.append(
                    f"no re-entry on the wire for depth {INNER_DEPTH}: {s.describe(rec.origin)}"
                )
        return problems

    def _levels_surfaced(self, s: Section) -> list[str]:
        """A targeted reentrant victim: the fault landed at depth 2, and both levels
        raised ``LockLeaseLostError``."""
        inner = s.inner
        if inner is None or not inner.entered:
            return [
                f"the fault did not land at depth {INNER_DEPTH}: "
                + s.describe(self.recorder.origin)
            ]
        if inner.outcome != "lost" or s.outcome != "lost":
            return [
                "a level did not raise LockLeaseLostError on its exit: "
                + s.describe(self.recorder.origin)
            ]
        return []

    def finish(
        self,
        *,
        expect: str,
        min_overlaps: int = 0,
        check_server_connections: bool = True,
    ) -> Verdict:
        """Close everything, check leaks and invariants, add the report row, assert.

        ``expect``: ``"lapse"`` (every targeted victim must surface its loss, and the
        scenario as a whole must surface at least one per trial), ``"none"`` (no loss may
        be reported at all: the fault stayed within what the lock must ride out), or
        ``"any"``.
        """
        self._finished = True
        self.close_sync()
        self._stop_trace()
        trace_problems = self._trace_verdict()
        admin = self.admin if check_server_connections else None
        leaks = check_no_leaks(self.baseline, admin=admin, name_prefix=self.tag)
        from distlock.tools.chaos.waiters import WAIT_ALLOWANCE_MS

        verdict = check(
            self.recorder,
            slack_ms=self.slack_ms,
            wait_allowance_ms=WAIT_ALLOWANCE_MS,
            limit=self.capacity,
        )
        rec = self.recorder
        self.report.add(
            Row(
                scenario=self.name,
                trials=rec.trials,
                faults=rec.faults,
                ok=verdict.ok,
                lost=verdict.surfaced,
                overlaps=verdict.overlaps,
                worst_detection_ms=(
                    None
                    if verdict.worst_detection_ms is None
                    else round(verdict.worst_detection_ms, 1)
                ),
                traces_validated=(
                    None
                    if self.trace_excluded or not self.settings.validate_traces
                    else self.traces_validated
                ),
                trace_seconds=round(self.trace_seconds, 1),
                trace_excluded=self.trace_excluded,
                trace_note=self.trace_note,
                waits_granted=verdict.waits_granted,
                waits_timed_out=verdict.waits_timed_out,
                waits_failed=verdict.waits_failed,
                worst_wait_overrun_ms=(
                    None
                    if verdict.worst_wait_overrun_ms is None
                    else round(verdict.worst_wait_overrun_ms, 1)
                ),
            )
        )
        problems = list(verdict.violations) + leaks + trace_problems
        if not verdict.waits:
            problems.append("no client waited with wait_ms during the scenario")
        if rec.faults < rec.trials:
            problems.append(f"only {rec.faults} faults injected in {rec.trials} trials")
        if self.reentrant:
            problems += self._reentered()
        if expect == "lapse":
            for s in self.targets:
                if not s.surfaced:
                    problems.append(f"lapsed lease not surfaced: {s.describe(rec.origin)}")
                if self.reentrant and s.client.startswith("victim"):
                    problems += self._levels_surfaced(s)
            if verdict.surfaced < rec.trials:
                problems.append(
                    f"{verdict.surfaced} losses surfaced in {rec.trials} lapsing trials"
                )
        elif expect == "none":
            spurious = [s for s in rec.entered() if s.surfaced]
            problems += [f"spurious loss: {s.describe(rec.origin)}" for s in spurious]
        if verdict.crowded < min_overlaps:
            problems.append(
                f"only {verdict.crowded} times more than {self.capacity} bodies at once "
                f"(want >= {min_overlaps}): the fault never let another client take the "
                "key, so the check proved nothing"
            )
        if problems:
            raise ScenarioFailed(
                f"{self.name}:\n  "
                + "\n  ".join(problems)
                + "\n--- timeline ---\n"
                + self.timeline()
            )
        return verdict


def _fence(handle: AnyHandle | AnyAsyncHandle) -> int | None:
    """The handle's fence: a semaphore's permits have none."""
    return None if isinstance(handle, PermitHandle | AsyncPermitHandle) else handle.fence
