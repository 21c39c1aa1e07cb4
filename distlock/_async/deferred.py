"""A ``Lock``'s uncontended ``run()`` under asyncio, with its section made only when needed.

With one asyncio task, the client's CPU is the whole of a lock cycle's critical path, and
what distlock added to it was mostly the code that runs, not what it decides: a section,
its group, six transitions through the flows, the flows' generators and the driver's loop
around them.  The core's decisions in an uncontended cycle are few and fixed: the acquire
is sent, a fence is granted in time, the renewal timer is armed, the body ends before the
lease's deadline, the release is answered 1.  So ``run()`` sends the two scripts itself
and keeps what the core needs to replay the cycle (the token, the instant the acquire
left, the fence and the instant it came).  The section is made, and the cycle so far
replayed on it with those instants, the moment anything else happens:

- the acquire is not granted in time, or its round trip fails or is interrupted: the
  section replays the attempt and the flow goes on from its reply as it always does
  (backoff, retries, the cleanup release);
- the renewal timer fires (the body outlived its first heartbeat), the Lock is closed,
  or the body asks its handle for more than its key, token and fence (``signal``,
  ``extend``, ``release``, ``async with``): from then on the cycle is an ordinary one;
- the body ends past the lease's deadline on our clock, the release is answered 0, or its
  round trip fails or is interrupted: the section replays ``BodyDone`` and ``Release``
  and the flow takes the answer, so the verdict is the core's.

Only what replays exactly qualifies: a ``Lock`` (not a reentrant lock, semaphore or a
group), called with its defaults (per-call options go the ordinary way), without
``trace``, observers, ``on_renew_error``, ``wait_ms`` or ``replicas``, on a client the
direct send serves.  ``tests/test_deferred_parity.py`` holds each decision made here to the
section's, transition for transition.  Only the asyncio driver defers: the sync driver's
timers run on a thread of their own, where a settle would race the body's exit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any, TypeVar

from distlock import _flows as flows
from distlock._base import _token
from distlock._clock import now_ms
from distlock._core.commands import Command, Op
from distlock._core.config import SectionConfig
from distlock._core.group import Group
from distlock._core.lease import lapsed, lease_until, renewal_wake
from distlock._core.section import Phase, Section
from distlock._core.state import Outcome
from distlock._flows import Flow, Request
from distlock._protocol import encode
from distlock.errors import ProtocolError
from distlock.events import Event, Transition
from distlock.signal import AsyncLeaseSignal

from . import backend, cancellation
from .handles import Handle, LockHandle, _Holding, _let_go

if TYPE_CHECKING:
    from .lock import Lock
    from .primitive import Primitive

T = TypeVar("T")


def deferrable(lock: Primitive[Any]) -> SectionConfig | None:
    """The config of ``lock``'s ``run()`` sections if its defaults let it defer them."""
    defaults = lock.defaults
    config = lock._config(
        defaults, watch=True, cancel_on_loss=cancellation.cancels_body(defaults)
    )
    if (
        lock._section_type is not Section
        or lock._handle_type is not LockHandle
        or lock._trace is not None
        or config.observed
        or config.wait_ms
        or config.replicas
        or config.renew_every_ms is None
    ):
        return None
    return config


class DeferredHandle(LockHandle):
    """The handle of an uncontended ``run()`` whose section is not made yet: it knows its
    key, token and fence, and whether it holds the key (deferred, nothing but its section
    could know otherwise; once its cycle ended well, not); anything more makes the
    section first, replaying on it the cycle so far."""

    __slots__ = (
        "_cancelling",
        "_config",
        "_deadline",
        "_deferred",
        "_done_at",
        "_ended",
        "_fence",
        "_key",
        "_released_at",
        "_replied_at",
        "_sent_at",
        "_task",
        "_token",
    )

    _sent_at: float
    _fence: int
    _replied_at: float
    _deadline: float
    _done_at: float
    _released_at: float
    _task: cancellation.Task | None
    _cancelling: int

    def __init__(self, lock: Lock, key: str, token: int, config: SectionConfig) -> None:
        # The section and its group are left unset until _settle makes them.
        self._lock = lock
        self._holding = None
        self._armed_at = None
        self._key = key
        self._token = token
        self._config = config
        #: Granted, the section unmade: the body runs, or its release is on the wire.
        self._deferred = False
        #: The cycle ended well (its release answered 1), the section unmade.
        self._ended = False

    # -- what the handle knows without a section ----------------------------------------------

    @property
    def key(self) -> str:
        return self._key

    @property
    def token(self) -> str:
        return self._token.to_bytes(16, "big").hex()

    @property
    def fence(self) -> int:
        return self._fence if self._deferred or self._ended else super().fence

    @property
    def held(self) -> bool:
        # Deferred, the section would say held: only a tick, a close or the exit, which
        # each settle first, could have learnt otherwise.
        if self._deferred:
            return True
        return False if self._ended else super().held

    def __repr__(self) -> str:
        self._settle()
        return super().__repr__().replace(type(self).__name__, "LockHandle", 1)

    # -- everything else settles first --------------------------------------------------------

    @property
    def signal(self) -> AsyncLeaseSignal:
        self._settle()
        return super().signal

    async def extend(self, ttl_ms: int | None = None) -> bool:
        self._settle()
        return await super().extend(ttl_ms)

    async def release(self) -> bool:
        self._settle()
        return await super().release()

    async def __aexit__(self, et: Any, ev: BaseException | None, tb: Any) -> None:
        self._settle()
        await super().__aexit__(et, ev, tb)

    def _settle(self) -> None:
        """Make the section, and replay on it the cycle so far with the instants it kept:
        the grant (from here on an ordinary held section, its timer already armed where
        the grant arms it), and for a cycle that ended well, its end too."""
        if self._deferred:
            self._granted()
            self._deferred = False
            self._hold()
        elif self._ended:
            section = self._granted()
            section.body_done(self._done_at)
            section.release(self._done_at)
            section.release_reply(self._released_at, True)
            self._ended = False

    def _granted(self) -> Section:
        section = self._born()
        self._machine.start(self._sent_at)
        command = section.acquire(self._sent_at).send
        assert command is not None
        step = section.reply(self._replied_at, command, self._fence)
        if step.loss is not None or section.phase is not Phase.HELD:
            raise ProtocolError(
                f"the deferred grant of {self._key!r} did not replay as held", self._key
            )
        return section

    def _born(self) -> Section:
        lock = self._lock
        section = lock._new_section(self._key, self._token, self._config, lock._label, False)
        self._section = section
        self._machine = Group((section,))
        return section

    def _hold(self) -> None:
        """The hold a loss now cancels the body of, as ``hold()``'s own is."""
        holding = _Holding()
        holding._entered = True
        holding.task = self._task
        holding._cancelling = self._cancelling
        self._holding = holding


class _Replay:
    """The Lock's effects for a flow that starts in the past: its clock gives the instants
    the deferred cycle recorded, in order, then the real time."""

    __slots__ = ("_core_guard", "_lock", "_times")

    def __init__(self, lock: Lock, *times: float) -> None:
        self._lock = lock
        self._times = list(times)
        self._core_guard = lock._core_guard

    def _now(self) -> float:
        return self._times.pop(0) if self._times else now_ms()

    def _arm(self, handle: Handle) -> None:
        self._lock._arm(handle)

    def _record(self, events: list[Transition | Event]) -> None:
        self._lock._record(events)

    def _notify(self, handle: Handle, events: list[Transition | Event]) -> None:
        self._lock._notify(handle, events)

    def _apply(self, handle: Handle, step: Any) -> None:
        self._lock._apply(handle, step)


def granted_until(
    config: SectionConfig, sent_at: float, replied_at: float, fence: int
) -> float | None:
    """The lease's deadline if the acquire's reply ``fence`` is a grant the section would
    hold (AcquireReply: a fence, and the lease it gives not lapsed by the reply), else
    None.  The lease's rules are the core's (:mod:`distlock._core.lease`)."""
    deadline = lease_until(sent_at, config.ttl_ms, config.drift_factor)
    return deadline if fence > 0 and not lapsed(replied_at, deadline) else None


def _command(op: Op, handle: DeferredHandle) -> Command:
    """The command the section's Acquire or Release sends (``_command`` of
    :class:`~distlock._core.state.SectionState`, for a lock's plain section)."""
    return Command(op, handle._key, handle.token, handle._config.ttl_ms)


async def run_deferred(
    lock: Lock, id: str, fn: Callable[[LockHandle], Awaitable[T]]
) -> T:
    """``lock.run(id, fn)`` with the section deferred (see the module's note).  The
    acquire is awaited here, not in a coroutine of its own: every coroutine between a
    cycle and the socket is resumed on every reply."""
    key = lock._key(id)
    if lock._closed:
        lock._check_open(key)
    config = lock._deferred_config
    assert config is not None
    handle = DeferredHandle(lock, key, _token(), config)
    task = cancellation.current_task()
    command = _command(Op.ACQUIRE, handle)
    sent_at = now_ms()
    cancels = cancellation.cancelling(task)
    try:
        fence = await lock._call(command)
        cancellation.raise_swallowed(task, cancels)
    except BaseException as exc:
        await _acquire_replayed(lock, handle, task, sent_at, now_ms(), exc)
    else:
        replied_at = now_ms()
        deadline = granted_until(config, sent_at, replied_at, fence)
        if deadline is not None:
            handle._sent_at = sent_at
            handle._fence = fence
            handle._replied_at = replied_at
            handle._deadline = deadline
            handle._deferred = True
            every = config.renew_every_ms
            assert every is not None
            if not lock._closed:  # as LockBase._arm: a closed Lock arms nothing
                lock._timers.arm(renewal_wake(sent_at, every, deadline), handle)
        else:
            await _acquire_replayed(lock, handle, task, sent_at, replied_at, fence)
    handle._task = task
    handle._cancelling = cancellation.cancelling(task)
    if not handle._deferred:  # the flow took the acquire's outcome
        handle._hold()
    if lock._closed:
        handle._settle()
        try:
            await lock._refuse_granted((handle,))
        finally:
            _let_go((handle,))
    try:
        body = fn(handle)
        if body.__class__ is not CoroutineType:
            body = backend.awaitable(fn, body)
        result = await body
    except BaseException as exc:
        await _exit(lock, handle, exc)
        raise
    await _exit(lock, handle, None)
    return result


async def _acquire_replayed(
    lock: Lock,
    handle: DeferredHandle,
    task: cancellation.Task | None,
    sent_at: float,
    replied_at: float,
    outcome: int | BaseException,
) -> None:
    """The acquire's outcome was not a grant in time: the section's own flow takes it,
    from the attempt it replays at ``sent_at``."""
    handle._born()
    flow = flows.acquire_all(_Replay(lock, sent_at, sent_at, replied_at), (handle,))
    try:
        request = _same(next(flow), _command(Op.ACQUIRE, handle))
        try:
            if isinstance(outcome, BaseException):
                request = lock._interrupted(flow, request, outcome)
            else:
                request = flow.send(outcome)
        except StopIteration:
            return
        await lock._run(flow, request, task)
    except BaseException:
        _let_go((handle,))
        raise


async def _exit(lock: Lock, handle: DeferredHandle, ev: BaseException | None) -> None:
    """The body is over (``ev``: what it raised): release as ``hold()``'s exit would, and
    raise what it would."""
    command = _leaving(lock, handle)
    if command is None:
        await _ordinary_exit(lock, handle, ev)
        return
    task = handle._task
    cancels = cancellation.cancelling(task)
    try:
        reply = await lock._call(command)
        cancellation.raise_swallowed(task, cancels)
    except BaseException as exc:
        await _release_replayed(lock, handle, now_ms(), exc, ev)
        return
    if not _answered(handle, reply):
        await _release_replayed(lock, handle, now_ms(), reply, ev)


def _leaving(lock: Lock, handle: DeferredHandle) -> Command | None:
    """The body is over: the release a deferred cycle sends, or None for the ordinary
    exit (the section made already, or made now: past the lease's deadline on our clock,
    BodyDone finds the loss)."""
    if not handle._deferred:
        return None
    handle._done_at = done_at = now_ms()
    lock._timers.disarm(handle)
    if lapsed(done_at, handle._deadline):
        handle._settle()
        return None
    return _command(Op.RELEASE, handle)


def _answered(handle: DeferredHandle, reply: int) -> bool:
    """Whether the release's ``reply`` ends the cycle well (1: the key was still ours);
    the handle then keeps what a settle would replay."""
    if reply != 1:
        return False
    handle._released_at = now_ms()
    handle._deferred = False
    handle._ended = True
    handle._task = None
    return True


async def _ordinary_exit(lock: Lock, handle: DeferredHandle, ev: BaseException | None) -> None:
    holding = handle._holding
    assert isinstance(holding, _Holding)
    await holding._exit(lock, (handle,), handle._machine, ev)


async def _release_replayed(
    lock: Lock,
    handle: DeferredHandle,
    replied_at: float,
    outcome: int | BaseException,
    ev: BaseException | None,
) -> None:
    """The release was not answered 1: the section's own flow takes the answer, from the
    ``BodyDone`` and ``Release`` it replays at the instant the body ended."""
    done_at = handle._done_at
    handle._settle()
    holding = handle._holding
    assert isinstance(holding, _Holding)
    machine = handle._machine
    flow: Flow[None] = flows.finish_all(_Replay(lock, done_at, done_at, replied_at), (handle,))
    try:
        request = _same(next(flow), _command(Op.RELEASE, handle))
        try:
            if isinstance(outcome, BaseException):
                request = lock._interrupted(flow, request, outcome)
            else:
                request = flow.send(outcome)
            await lock._run(flow, request, handle._task)
        except StopIteration:
            pass
    finally:
        _let_go((handle,))
    section = handle._section
    assert section.phase is Phase.DONE and section.outcome is not Outcome.OK
    holding._conclude(machine, ev)


def _same(request: Request, sent: Command) -> Request:
    """The replayed section's request, which must be the command the cycle sent: the
    same on the wire, and taken back the same way (no lease write to confirm, not a
    best-effort send, no replica wait)."""
    if not (
        isinstance(request, Command)
        and encode(request) == encode(sent)
        and request.write is None
        and not request.best_effort
        and not request.replicas
    ):
        raise ProtocolError(f"the replayed section of {sent.key!r} sent {request!r}", sent.key)
    return request
