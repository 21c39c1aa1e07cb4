"""The drivers' shared choreography, written once: which core action follows which reply.

The core decides; a flow says in what order its actions meet the network.  Each flow is a
generator that yields IO requests and is sent their results:

- a :class:`~distlock._core.commands.Command`: run it against Redis; the flow receives
  its integer reply, or the exception is thrown into it at the ``yield``;
- :class:`Sleep`: wait until an instant on the client clock (a retry's backoff); an
  exception raised while waiting (a cancellation, ``KeyboardInterrupt``) is thrown into
  the flow there too;
- :class:`Block`: wait for a release on a waiter's wake list (``BLPOP``), until an
  instant on the client clock at the latest; the flow receives the fence of a key the
  release handed it (> 0), -1 for a wake-up (look again), 0 when the time ran out.  A
  driver interrupted while blocked discards the connection (a connection still blocked in
  Redis must never go back to the pool), then throws the exception into the flow.

Every suspension point receives the caller's exception, so a flow can give back what it
took before the exception leaves; no flow catches ``GeneratorExit`` (a flow that is closed
unfinished yields nothing more).  No flow yields inside an ``except`` block: a flow keeps
the exception, leaves the handler, and only then gives back what it took.  Compiled with
mypyc, a generator has no exception state of its own: a handler that yielded would leave
its exception as the caller's exception being handled, chaining every later error onto
it (``tests/drivers/*/test_exception_state.py``), and a bare ``raise`` after the yield
would raise nothing.  A flow deletes the exception it kept as it raises it, as an
``except`` block deletes its name: its traceback holds the flow's frame, which would
otherwise hold it back, a reference cycle for the collector.  The sync driver runs a
flow with blocking calls, the asyncio driver with ``await``; that is all either adds.
Every core call goes through :func:`act`, which is where a transition meets the guard,
the timer, the observers and the signal, the same way for both drivers.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol, TypeVar

from distlock._base import HandleBase
from distlock._core.commands import Command, Kind, Op, Step
from distlock._core.reentrant import ReentrantSection
from distlock._core.section import Phase, Section, close_section
from distlock.errors import UsageError
from distlock.events import Event, Transition

T = TypeVar("T")
H = TypeVar("H", bound=HandleBase, contravariant=True)


class Sleep:
    """Wait until ``until_ms`` on the client clock."""

    __slots__ = ("until_ms",)

    def __init__(self, until_ms: float) -> None:
        self.until_ms = until_ms

    def __repr__(self) -> str:
        return f"Sleep({self.until_ms})"


class Block:
    """Wait for a wake-up on ``token``'s wake list for ``key``, until ``until_ms`` on the
    client clock at the latest."""

    __slots__ = ("key", "kind", "last", "token", "until_ms")

    def __init__(
        self, key: str, token: str, until_ms: float, kind: Kind = Kind.LOCK, last: bool = False
    ) -> None:
        self.key = key
        self.token = token
        self.until_ms = until_ms
        #: Whose queue the waiter is in (each kind has its own).
        self.kind = kind
        #: The block ends the wait: the driver ends it at ``until_ms`` on the client's
        #: clock, whenever Redis's timers would (up to 1/hz late).
        self.last = last

    def __repr__(self) -> str:
        return f"Block({self.key!r}, {self.until_ms})"


Request = Command | Sleep | Block
Flow = Generator[Request, int, T]


class Guard(Protocol):
    """A reentrant lock held around core calls (``threading.RLock``)."""

    def acquire(self) -> bool: ...

    def release(self) -> None: ...


class Effects(Protocol[H]):
    """What a flow asks of its driver besides IO."""

    #: Held around core calls: timers and renewals may run on other threads.  One for the
    #: whole driver, read as an attribute: a method returning it would cost every
    #: transition a call.  None for a driver whose core calls all run on one thread (the
    #: event loop's), which needs none.
    _core_guard: Guard | None

    def _now(self) -> float:
        """The client's monotonic clock, in milliseconds."""

    def _arm(self, handle: H) -> None:
        """Re-arm the handle's timer for ``section.wake_at`` (called under the guard)."""

    def _record(self, events: list[Transition | Event]) -> None:
        """Hand transitions to ``trace`` (called under the guard, so in order)."""

    def _notify(self, handle: H, events: list[Transition | Event]) -> None:
        """Hand lifecycle events to observers (called outside the guard)."""

    def _apply(self, handle: H, step: Step) -> None:
        """Fire the signal and cancel the body for a step with a loss, start the renewal a
        step sends (called outside the guard, and only for such steps)."""


def act(fx: Effects[H], handle: H, action: Callable[..., Step], *args: Any) -> Step:
    """Take one core action on ``handle``'s section, then do what it asks."""
    section = handle._section
    # Taken and let go by hand: a ``with`` statement costs a transition more than the
    # lock itself does.
    guard = fx._core_guard
    if guard is not None:
        guard.acquire()
    try:
        # Called by its number of arguments: compiled, a call with ``*args`` builds a list,
        # extends it and copies it to a tuple, on every transition of every cycle.
        count = len(args)
        if count == 0:
            step = action(section, fx._now())
        elif count == 1:
            step = action(section, fx._now(), args[0])
        elif count == 2:
            step = action(section, fx._now(), args[0], args[1])
        else:
            step = action(section, fx._now(), *args)
        if section.wake_at != handle._armed_at:
            fx._arm(handle)
        events = section.events
        if events:
            section.events = []
            fx._record(events)
    finally:
        if guard is not None:
            guard.release()
    if events:
        fx._notify(handle, events)
    # Most steps send an acquire or a release, which the flow itself sends: the driver is
    # called only for what the flow does not do.
    if step.loss is not None or (step.send is not None and step.send.op is Op.RENEW):
        fx._apply(handle, step)
    return step


def acquire(fx: Effects[H], handle: H) -> Flow[None]:
    """Attempt until granted or refused for good.

    A failed round trip may still have taken the key: release it with our token before
    the error goes on.  A grant that arrived after its own lease is released and raised as
    the loss it is; no body may start on it.  An exception during a backoff leaves nothing
    to give back: the last attempt was refused.
    """
    section = handle._section
    while True:
        command = act(fx, handle, Section.acquire).send
        assert command is not None
        failed: BaseException | None = None
        try:
            fence = yield command
        except GeneratorExit:
            raise
        except BaseException as exc:
            failed = exc  # handled below, outside the handler: see the module's note
        if failed is not None:
            act(fx, handle, Section.acquire_fail)
            try:
                yield from release(fx, handle)
            except Exception as cleanup:
                failed.add_note(
                    f"distlock: the cleanup release of {section.key!r} also failed "
                    f"({cleanup!r}); if the acquire had run, the key expires after its TTL"
                )
            yield from _withdraw_noting(fx, handle, failed)
            try:
                raise failed
            finally:
                del failed  # no cycle through the traceback: see the module's note
        step = act(fx, handle, Section.reply, command, fence)
        if step.loss is not None:
            yield from release(fx, handle)
            raise step.loss
        if section.phase is Phase.WAITING:
            if (yield from _block(fx, handle)):
                return
        elif section.phase is Phase.BACKOFF:
            yield Sleep(section.retry_at)
        else:
            return


def _block(fx: Effects[H], handle: H) -> Flow[bool]:
    """A refused waiter blocks until a release hands it the key (it then holds it) or
    wakes it, or until the refusal may have run out; an exception while blocked (a
    cancellation, ``KeyboardInterrupt``, a lost connection) withdraws its place, and gives
    back a key handed to it, before it leaves.  True when it holds the key; a key handed
    over after its lease ran out on our clock is given back and raised as lost, as a late
    grant is."""
    section = handle._section
    act(fx, handle, Section.block)
    until = section.block_until
    assert until is not None
    woken = 0
    if until > fx._now():
        interrupted: BaseException | None = None
        try:
            woken = yield Block(
                section.key, section.token, until, section.kind, section.block_ends_wait
            )
        except GeneratorExit:
            raise
        except BaseException as exc:
            interrupted = exc  # handled below, outside the handler: see the module's note
        if interrupted is not None:
            yield from _withdraw_noting(fx, handle, interrupted)
            try:
                raise interrupted
            finally:
                del interrupted  # no cycle through the traceback: see the module's note
    step = act(fx, handle, Section.wake, woken != 0, max(woken, 0))
    if step.loss is not None:
        yield from release(fx, handle)
        raise step.loss
    return section.phase is Phase.HELD


def _withdraw_noting(fx: Effects[H], handle: H, exc: BaseException) -> Flow[None]:
    """Withdraw while ``exc`` is on its way out; a withdrawal that fails only adds a note
    (the place expires by itself)."""
    try:
        yield from withdraw(fx, handle)
    except Exception as cleanup:
        exc.add_note(
            f"distlock: withdrawing from the queue of {handle._section.key!r} also failed "
            f"({cleanup!r}); the place expires by itself"
        )


def withdraw(fx: Effects[H], handle: H) -> Flow[None]:
    """Give up our place in the key's queue, if Redis may hold one (best effort)."""
    command = act(fx, handle, Section.withdraw).send
    if command is None:
        return
    try:
        yield command
    except GeneratorExit:
        raise
    except BaseException:
        act(fx, handle, Section.withdraw_fail)
        raise
    act(fx, handle, Section.withdraw_reply)


def acquire_all(fx: Effects[H], handles: Sequence[H]) -> Flow[None]:
    """Take every lock of a group, in the order given (the group's order: sorted keys);
    if one cannot be had (within the group's ``wait_ms``, which bounds the whole group),
    or the caller is interrupted, give back those taken, newest first, before the
    exception leaves."""
    taken: list[H] = []
    if handles:
        handles[0]._machine.start(fx._now())  # one wait deadline for the whole group
    try:
        for handle in handles:
            yield from acquire(fx, handle)
            if handle._section.phase is not Phase.HELD:
                raise handle._section.not_acquired_error()
            taken.append(handle)
        # Earlier keys are renewed while later ones are taken; one may be lost meanwhile.
        loss = handles[0]._machine.first_loss if handles else None
        if loss is not None:
            raise loss
        return
    except GeneratorExit:
        raise
    except BaseException as exc:
        first = exc  # handled below, outside the handler: see the module's note
    # Give every key back even if one release fails or is itself interrupted; the error
    # that stopped the acquisition is the one to report, unless a second interrupt came.
    interrupted: BaseException | None = None
    for handle in reversed(taken):
        try:
            yield from release(fx, handle)
        except GeneratorExit:
            raise
        except Exception:
            continue
        except BaseException as again:
            interrupted = interrupted or again
    try:
        if interrupted is not None:
            raise interrupted from first
        raise first
    finally:
        del first, interrupted  # no cycle through the traceback: see the module's note


def release(fx: Effects[H], handle: H) -> Flow[bool]:
    """Compare-and-delete with our token. True only if the key was still ours.

    A failed round trip is the caller's error for a manual handle, and the loss for run/hold.
    """
    section = handle._section
    command = act(fx, handle, Section.release).send
    if command is None:
        return False
    try:
        reply = yield command
    except GeneratorExit:
        raise
    except Exception as exc:
        step = act(fx, handle, Section.release_fail)
        if step.loss is not None:
            step.loss.__cause__ = exc
        if section.release_error_to_caller:
            raise
        return False
    ok = reply == 1
    act(fx, handle, Section.release_reply, ok)
    return ok


def close(fx: Effects[H], handle: H) -> Flow[None]:
    """The Lock object was closed with ``handle``'s section open: the core's
    :func:`~distlock._core.section.close_section` (the loss, with the signal and an
    asyncio body's cancellation), then one attempt at the release.  Its failure changes
    nothing for anyone (the key expires after its TTL): it is not raised."""
    command = act(fx, handle, close_section).send
    if command is None:
        return
    try:
        reply = yield command
    except GeneratorExit:
        raise
    except Exception:
        act(fx, handle, Section.release_fail)
        return
    act(fx, handle, Section.release_reply, reply == 1)


def finish_all(fx: Effects[H], handles: Sequence[H]) -> Flow[None]:
    """The body of a group is done: every completion check first, then the releases,
    newest first.  A section the body already released itself keeps the outcome its
    release gave it."""
    for handle in handles:
        if handle._section.phase is Phase.HELD:
            act(fx, handle, Section.body_done)
    for handle in reversed(handles):
        yield from release(fx, handle)


def extend(fx: Effects[H], handle: H, ttl_ms: int) -> Flow[bool]:
    """A manual, token-checked extend. False (and the signal) if the key is not ours."""
    command = act(fx, handle, Section.extend, ttl_ms).send
    if command is None:
        return False
    return (yield from _exchange(fx, handle, command, Section.extend_fail, Section.extend_reply))


def _exchange(
    fx: Effects[H],
    handle: H,
    command: Command,
    failed: Callable[..., Step],
    replied: Callable[..., Step],
) -> Flow[bool]:
    """One token-checked write whose reply is 1 or 0: the ``...Fail`` action on any error
    (then re-raised), else the ``...Reply`` action.  True when Redis answered 1."""
    try:
        reply = yield command
    except GeneratorExit:
        raise
    except BaseException:
        act(fx, handle, failed)
        raise
    ok = reply == 1
    act(fx, handle, replied, ok)
    return ok


def renew(fx: Effects[H], handle: H, command: Command) -> Flow[None]:
    """One background renewal round trip (the core's RenewSend already happened).

    A failed round trip is not a loss: observers (``on_renew_error``) hear of it, and the
    next tick retries or the deadline decides.
    """
    try:
        reply = yield command
    except GeneratorExit:
        raise
    except BaseException as exc:
        act(fx, handle, Section.renew_fail, exc)
        if not isinstance(exc, Exception):
            raise
        return
    act(fx, handle, Section.renew_reply, reply == 1)


def tick(fx: Effects[H], handle: H) -> None:
    """The section's timer fired: let the core pick LeaseTimeout, RenewSend or nothing.

    The timer is spent, so the next one is armed even if the wake-up time did not move
    (a timer may fire a little early on another clock's rounding).
    """
    handle._armed_at = None
    act(fx, handle, Section.tick)


# -- the reentrant lock's inner levels --------------------------------------------------------
#
# ``handle`` is always the holder's outermost handle: it owns the section's timer, so a
# re-entry's lease write re-arms the same renewal schedule every level shares.


def reenter(fx: Effects[H], handle: H) -> Flow[None]:
    """Open one more level of a held reentrant section (never waits).

    A section known lost sends nothing and raises the loss at once; a reply 0 is the loss
    (the signal fires) and raises it; a failed round trip raises its error with the depth
    unchanged.
    """
    section = handle._section
    assert isinstance(section, ReentrantSection)
    command = act(fx, handle, ReentrantSection.reenter).send
    if command is None:
        raise _gone(section)
    yield from _exchange(
        fx, handle, command, ReentrantSection.reenter_fail, ReentrantSection.reenter_reply
    )
    if section.lost is not None:
        raise section.lost


def leave(fx: Effects[H], handle: H) -> Flow[bool]:
    """Close the innermost inner level.  True if Redis confirmed our token still holds the
    key and no loss is known; False if the outermost level is over (nothing is sent), the
    loss is known, or the reply was 0 (the signal fires).  A failed round trip raises its
    error: not a loss, and the level is closed."""
    section = handle._section
    assert isinstance(section, ReentrantSection)
    command = act(fx, handle, ReentrantSection.leave).send
    if command is None:
        return False
    ok = yield from _exchange(
        fx, handle, command, ReentrantSection.leave_fail, ReentrantSection.leave_reply
    )
    return ok and section.lost is None


def _gone(section: Section) -> BaseException:
    """Why a re-entry sent nothing: the loss, or a section already over."""
    if section.lost is not None:
        return section.lost
    return UsageError(
        f"the outermost level of {section.key!r} was already released: a re-entry needs "
        "the outermost level open",
        section.key,
    )
