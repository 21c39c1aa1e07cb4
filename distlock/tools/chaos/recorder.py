"""What happened during a chaos scenario: every section, every lock command, every fault.

A *section* is one ``run`` call that got as far as the body: who ran it, when the body
started and ended (``time.monotonic()``, one clock for every thread and every process on
the machine), when its signal fired, and how ``run`` ended.  A *command* is one lock script
(EVAL/EVALSHA) a client sent, with its send and reply instants and whether Redis said yes;
commands are matched to sections by the token they carry, so a section's last successful
renewal is known from the wire, not from the lock's own bookkeeping.  A key a release
handed to a waiter is known from the waiter's ``BLPOP`` reply, and counts as a grant sent
with the waiter's last attempt.

The redis clients below are the real redis-py clients with overrides that note each
command's timing and each ``BLPOP`` reply on their way through: the IO is untouched.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import redis
import redis.asyncio

from distlock._core.waiting import HANDED_TTL_MS
from distlock._protocol import (
    R_ENTER,
    R_LEAVE,
    R_RELEASE,
    R_WITHDRAW,
    RELEASE,
    RW_ACQUIRE,
    W_ACQUIRE,
    WITHDRAW,
)

Outcome = Literal["pending", "ok", "lost", "error", "not_acquired"]

#: The commands the lock's scripts travel in.
SCRIPT_COMMANDS = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO"})
#: A reentrant lock's depth writes, by the first argument they travel with (the script's
#: SHA for EVALSHA, its source for EVAL).  They carry the section's token like every other
#: script, but the holder sends them, not the renewal: a re-entry (``R_ENTER``) refreshes
#: the TTL, an inner exit (``R_LEAVE``) does not.
DEPTH_SCRIPTS = {
    R_ENTER.sha: "enter",
    R_ENTER.source: "enter",
    R_LEAVE.sha: "leave",
    R_LEAVE.source: "leave",
}

#: A waiter's withdrawal from the key's queue: it carries the waiter's token and answers
#: 1, but writes no lease.
WITHDRAW_SCRIPTS = frozenset({WITHDRAW.sha, WITHDRAW.source, R_WITHDRAW.sha, R_WITHDRAW.source})

#: A waiting attempt (granted: ``{fence, 0}``), and the releases that give a key back.
WAITING_ACQUIRE_SCRIPTS = frozenset(
    {W_ACQUIRE.sha, W_ACQUIRE.source, RW_ACQUIRE.sha, RW_ACQUIRE.source}
)
RELEASE_SCRIPTS = frozenset({RELEASE.sha, RELEASE.source, R_RELEASE.sha, R_RELEASE.source})
#: A key a release handed to a waiter, as the waiter's ``BLPOP`` read it (``=fence``): noted
#: as a granted lease write sent when the waiter's last attempt was, since Redis set the
#: key's TTL after that attempt, at the release (``args``: this marker, no KEYS, the
#: token, the fence).
HANDOVER = "<handover>"


def now() -> float:
    return time.monotonic()


@dataclass(frozen=True)
class Command:
    """One lock script on the wire: ``ok`` when Redis answered with a positive integer
    (granted fence, extended, released)."""

    name: str
    args: tuple[str, ...]
    sent: float
    replied: float
    ok: bool
    error: str | None = None

    def carries(self, token: str) -> bool:
        return token in self.args

    @property
    def token(self) -> str | None:
        """The script's ARGV[1] (every lock script's token), after its KEYS."""
        try:
            at = 2 + int(self.args[1])
        except (IndexError, ValueError):
            return None
        return self.args[at] if at < len(self.args) else None

    @property
    def waiting_grant(self) -> bool:
        """A waiting attempt that Redis answered with a grant."""
        return (
            self.ok
            and bool(self.args)
            and (self.args[0] in WAITING_ACQUIRE_SCRIPTS or self.args[0] == HANDOVER)
        )

    @property
    def release(self) -> bool:
        return bool(self.args) and self.args[0] in RELEASE_SCRIPTS

    @property
    def depth_write(self) -> str | None:
        """``"enter"`` or ``"leave"`` for a reentrant lock's depth write, else None."""
        return DEPTH_SCRIPTS.get(self.args[0]) if self.args else None

    @property
    def lease_write(self) -> bool:
        """A reply of 1 confirms the lease from this send (acquire, renewal, re-entry): an
        inner exit's reply says the key was ours, but refreshes nothing; nor does a
        waiter's withdrawal from the queue."""
        return self.depth_write != "leave" and not (self.args and self.args[0] in WITHDRAW_SCRIPTS)


@dataclass
class Level:
    """An inner level of a reentrant section (``with locks.hold(key)`` inside the body):
    when it opened and closed (inside the outermost body) and how its ``with`` ended."""

    depth: int
    #: When the re-entry was asked for (its round trip starts here).
    asked: float
    start: float | None = None
    end: float | None = None
    outcome: Outcome = "pending"
    error: str | None = None
    #: What the inner handle got wrong (depth, token, fence differing from the outer's).
    problems: list[str] = field(default_factory=list)

    @property
    def entered(self) -> bool:
        return self.start is not None


@dataclass
class Section:
    client: str
    key: str
    ttl_ms: int
    seq: int
    attempt_started: float
    start: float | None = None
    end: float | None = None
    finished: float | None = None
    outcome: Outcome = "pending"
    error: str | None = None
    signal_at: float | None = None
    token: str | None = None
    fence: int | None = None
    #: This section's body was starved (event loop or GIL held): timers cannot fire, so the
    #: detection bound is replaced by "detected when the starvation ends".
    starved_until: float | None = None
    starved_from: float | None = None
    renew_errors: int = 0
    #: ``handle.signal.aborted`` as the body's first statement saw it.
    aborted_at_entry: bool | None = None
    notes: list[str] = field(default_factory=list)
    #: A reentrant victim's inner level (None: the body does not re-enter).
    inner: Level | None = None
    #: The ``wait_ms`` a waiter asked for (None: the section did not wait).
    wait_ms: int | None = None
    #: A read-write lock's section: ``"read"`` or ``"write"`` (None: another primitive's).
    #: Two readers' bodies may overlap; a writer's may overlap no other.
    rw: str | None = None

    @property
    def waited_s(self) -> float | None:
        """How long the wait took: until the body started, or until ``run`` returned
        without one (None while it has neither)."""
        ended = self.start if self.start is not None else self.finished
        return None if ended is None else ended - self.attempt_started

    @property
    def entered(self) -> bool:
        return self.start is not None

    @property
    def surfaced(self) -> bool:
        """The loss is visible to the caller: ``run`` raised it, or the signal fired."""
        return self.outcome == "lost" or self.signal_at is not None

    def overlaps(self, other: Section) -> bool:
        if self.start is None or other.start is None:
            return False
        a_end = self.end if self.end is not None else float("inf")
        b_end = other.end if other.end is not None else float("inf")
        return self.start < b_end and other.start < a_end

    def describe(self, origin: float = 0.0) -> str:
        def ms(t: float | None) -> str:
            return "-" if t is None else f"{(t - origin) * 1000:.1f}"

        inner = self.inner
        return (
            f"{self.client}#{self.seq}" + (f" ({self.rw})" if self.rw else "")
            + f" fence={self.fence} "
            f"body=[{ms(self.start)}, {ms(self.end)}]ms "
            f"signal={ms(self.signal_at)} outcome={self.outcome}"
            + (f" ({self.error})" if self.error else "")
            + (
                ""
                if inner is None
                else f" depth {inner.depth}=[{ms(inner.start)}, {ms(inner.end)}]ms "
                f"outcome={inner.outcome}" + (f" ({inner.error})" if inner.error else "")
            )
        )


class Recorder:
    """Thread-safe log of sections, commands and faults, with a condition to wait on."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.origin = now()
        self.sections: list[Section] = []
        self.commands: list[Command] = []
        self.faults = 0
        self.fault_log: list[tuple[float, str]] = []
        self.trials = 0
        self._cond = threading.Condition()
        self._seq = itertools.count(1)

    # -- writing ------------------------------------------------------------------------

    def new_section(
        self, client: str, key: str, ttl_ms: int, wait_ms: int | None = None
    ) -> Section:
        section = Section(client, key, ttl_ms, next(self._seq), now(), wait_ms=wait_ms)
        with self._cond:
            self.sections.append(section)
        return section

    def add_section(self, section: Section) -> None:
        """A section recorded elsewhere (another process)."""
        with self._cond:
            self.sections.append(section)
            self._cond.notify_all()

    def changed(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def enter(
        self, section: Section, token: str, fence: int | None, aborted: bool | None = None
    ) -> None:
        with self._cond:
            section.start = now()
            section.aborted_at_entry = aborted
            section.token = token
            section.fence = fence
            self._cond.notify_all()

    def leave(self, section: Section) -> None:
        with self._cond:
            section.end = now()
            self._cond.notify_all()

    def reenter(self, section: Section, depth: int) -> Level:
        """The body asks for an inner level of ``section``."""
        level = Level(depth, now())
        with self._cond:
            section.inner = level
            self._cond.notify_all()
        return level

    def level_entered(self, level: Level) -> None:
        with self._cond:
            level.start = now()
            self._cond.notify_all()

    def level_left(self, level: Level) -> None:
        with self._cond:
            level.end = now()
            self._cond.notify_all()

    def level_settled(
        self, level: Level, outcome: Outcome, error: BaseException | None = None
    ) -> None:
        with self._cond:
            level.outcome = outcome
            if error is not None:
                level.error = f"{type(error).__name__}: {error}"
            self._cond.notify_all()

    def signal_fired(self, section: Section, at: float | None = None) -> None:
        with self._cond:
            if section.signal_at is None:
                section.signal_at = now() if at is None else at
            self._cond.notify_all()

    def settle(
        self, section: Section, outcome: Outcome, error: BaseException | None = None
    ) -> None:
        with self._cond:
            section.finished = now()
            section.outcome = outcome
            if error is not None:
                section.error = f"{type(error).__name__}: {error}"
            self._cond.notify_all()

    def command(self, command: Command) -> None:
        with self._cond:
            self.commands.append(command)
            self._cond.notify_all()

    def handover(self, token: str, fence: int) -> None:
        """A waiter's ``BLPOP`` read a key handed to it (see ``HANDOVER``)."""
        replied = now()
        with self._cond:
            attempts = [
                c.sent
                for c in self.commands
                if c.args and c.args[0] in WAITING_ACQUIRE_SCRIPTS and c.carries(token)
            ]
            sent = max(attempts) if attempts else replied
            self.commands.append(
                Command("BLPOP", (HANDOVER, "0", token, str(fence)), sent, replied, True)
            )
            self._cond.notify_all()

    def fault(self, what: str) -> None:
        with self._cond:
            self.faults += 1
            self.fault_log.append((now(), what))
            self._cond.notify_all()

    # -- reading ------------------------------------------------------------------------

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until ``predicate()`` holds (re-checked on every recorded change)."""
        give_up = now() + timeout
        with self._cond:
            while not predicate():
                left = give_up - now()
                if left <= 0:
                    return False
                # The timeout only bounds the wait; every change notifies.
                self._cond.wait(min(left, 0.05))
            return True

    def commands_of(self, section: Section) -> list[Command]:
        token = section.token
        if token is None:
            return []
        with self._cond:
            return [c for c in self.commands if c.carries(token)]

    def renewed_in_body(self, section: Section) -> bool:
        """At least one successful lease write was sent after the body started (after its
        inner level opened, for a reentrant section: the fault must land at depth 2)."""
        start = section.start
        if start is None or section.end is not None:
            return False
        inner = section.inner
        if inner is not None:
            if inner.start is None or inner.end is not None:
                return False
            start = inner.start
        return any(c.ok and c.lease_write and c.sent >= start for c in self.commands_of(section))

    def last_ok_send(self, section: Section, before: float) -> float | None:
        """When the last successful lease write (acquire, renewal, re-entry) answered before
        ``before`` was sent."""
        sends = [
            c.sent
            for c in self.commands_of(section)
            if c.ok and c.lease_write and c.replied <= before
        ]
        return max(sends) if sends else None

    def lease_end(self, section: Section, before: float) -> float | None:
        """When the lease given by the successful lease writes answered before ``before``
        ends at the earliest: each write's send plus the TTL it set (a key handed over
        gets the short handed TTL, which its holder's first renewal replaces)."""
        ttl = section.ttl_ms / 1000.0
        handed = min(section.ttl_ms, HANDED_TTL_MS) / 1000.0
        ends = [
            c.sent + (handed if c.args and c.args[0] == HANDOVER else ttl)
            for c in self.commands_of(section)
            if c.ok and c.lease_write and c.replied <= before
        ]
        return max(ends) if ends else None

    def entered(self) -> list[Section]:
        with self._cond:
            return [s for s in self.sections if s.entered]

    def in_body(self) -> list[Section]:
        with self._cond:
            return [s for s in self.sections if s.entered and s.end is None]


def _positive(reply: Any) -> bool:
    """A granted fence, an extension or a release: a positive integer, or, from a waiting
    acquire (``{fence, 0}`` granted, ``{0, ms}`` refused), a list led by one."""
    if isinstance(reply, list | tuple) and reply:
        reply = reply[0]
    return isinstance(reply, int) and not isinstance(reply, bool) and reply > 0


def _record(
    recorder: Recorder, args: tuple[Any, ...], sent: float, reply: Any, error: str | None
) -> None:
    name = str(args[0]).upper() if args else ""
    if name not in SCRIPT_COMMANDS:
        return
    text = tuple(a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in args[1:])
    ok = error is None and _positive(reply)
    recorder.command(Command(name, text, sent, now(), ok, error))


def _record_handover(recorder: Recorder, reply: Any) -> None:
    """Note a ``BLPOP`` reply that hands a key over (``[wake list, "=fence"]``)."""
    if not isinstance(reply, list | tuple) or len(reply) != 2:
        return
    key, element = (x.decode() if isinstance(x, bytes) else str(x) for x in reply)
    if element.startswith("="):
        # A wake list is named after its waiter's token, last after the key's name.
        recorder.handover(key.rsplit(":", 1)[1], int(element[1:]))


def _record_pipeline(
    recorder: Recorder, stack: list[Any], sent: float, replies: list[Any] | BaseException
) -> None:
    """Every command of a pipeline (renewals due together go out in one), each with the
    pipeline's send instant and its own reply or error, or the pipeline's error."""
    for i, (args, _options) in enumerate(stack):
        reply = replies if isinstance(replies, BaseException) else replies[i]
        if isinstance(reply, BaseException):
            _record(recorder, args, sent, None, f"{type(reply).__name__}: {reply}")
        else:
            _record(recorder, args, sent, reply, None)


class RecordingPipeline(redis.client.Pipeline):
    recorder: Recorder

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack, sent = list(self.command_stack), now()
        try:
            replies = super().execute(raise_on_error)
        except Exception as exc:
            _record_pipeline(self.recorder, stack, sent, exc)
            raise
        _record_pipeline(self.recorder, stack, sent, replies)
        return replies


class RecordingAsyncPipeline(redis.asyncio.client.Pipeline):
    recorder: Recorder

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack, sent = list(self.command_stack), now()
        try:
            replies = await super().execute(raise_on_error)
        except BaseException as exc:
            _record_pipeline(self.recorder, stack, sent, exc)
            raise
        _record_pipeline(self.recorder, stack, sent, replies)
        return replies


class RecordingRedis(redis.Redis):
    """``redis.Redis`` that notes every lock script it sends in a :class:`Recorder`, alone
    or pipelined."""

    def __init__(self, *args: Any, recorder: Recorder, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = recorder

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> RecordingPipeline:
        pipe = RecordingPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.recorder = self.recorder
        return pipe

    def parse_response(self, connection: Any, command_name: Any, **options: Any) -> Any:
        parse: Callable[..., Any] = super().parse_response
        reply = parse(connection, command_name, **options)
        if command_name == "BLPOP":
            _record_handover(self.recorder, reply)
        return reply

    def execute_command(self, *args: Any, **options: Any) -> Any:
        sent = now()
        send: Callable[..., Any] = super().execute_command
        try:
            reply = send(*args, **options)
        except Exception as exc:
            _record(self.recorder, args, sent, None, f"{type(exc).__name__}: {exc}")
            raise
        _record(self.recorder, args, sent, reply, None)
        return reply


class RecordingAsyncRedis(redis.asyncio.Redis):
    """``redis.asyncio.Redis`` that notes every lock script it sends in a :class:`Recorder`,
    alone or pipelined."""

    def __init__(self, *args: Any, recorder: Recorder, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = recorder

    def pipeline(
        self, transaction: bool = True, shard_hint: Any = None
    ) -> RecordingAsyncPipeline:
        pipe = RecordingAsyncPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.recorder = self.recorder
        return pipe

    async def parse_response(self, connection: Any, command_name: Any, **options: Any) -> Any:
        parse: Callable[..., Awaitable[Any]] = super().parse_response
        reply = await parse(connection, command_name, **options)
        if command_name == "BLPOP":
            _record_handover(self.recorder, reply)
        return reply

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        sent = now()
        send: Callable[..., Awaitable[Any]] = super().execute_command
        try:
            reply = await send(*args, **options)
        except BaseException as exc:
            _record(self.recorder, args, sent, None, f"{type(exc).__name__}: {exc}")
            raise
        _record(self.recorder, args, sent, reply, None)
        return reply
