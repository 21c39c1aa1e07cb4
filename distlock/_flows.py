"""The drivers' shared choreography, written once: which core action follows which reply.

The core decides; a flow says in what order its actions meet the network.  Each flow is a
generator that yields IO requests and is sent their results:

- :class:`Call`: run a script; the flow receives its integer reply, or the exception is
  thrown into it at the ``yield``;
- :class:`Sleep`: wait until an instant on the client clock (a retry's backoff).

The sync driver runs a flow with blocking calls, the asyncio driver with ``await``; that is
all either adds.  This is how the two drivers are kept from drifting apart: neither has its
own sequence of core calls.  The effects a flow needs from its driver (the clock, a guard
around core calls, re-arming a section's timer, firing its signal) come through
:class:`Effects`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from distlock import _protocol as scripts
from distlock._base import HandleBase
from distlock._core.section import Op, Phase, Section, Step

T = TypeVar("T")
H = TypeVar("H", bound=HandleBase, contravariant=True)


class Call:
    """Run ``script`` with ``keys`` and ``args`` against Redis.

    ``finish_on_cancel``: if the caller is cancelled while this is in flight, the driver
    sends it again and finishes the flow in the background instead of abandoning it (only
    releases: the token must be kept until Redis has answered one).
    """

    # A plain slotted class, not a frozen dataclass: two are made per lock cycle, and a
    # frozen dataclass's __init__ costs several times more.
    __slots__ = ("args", "finish_on_cancel", "keys", "script")

    def __init__(
        self,
        script: scripts.Script,
        keys: list[str],
        args: list[str | int],
        finish_on_cancel: bool = False,
    ) -> None:
        self.script = script
        self.keys = keys
        self.args = args
        self.finish_on_cancel = finish_on_cancel

    @classmethod
    def of(cls, op: Op, section: Section, ttl_ms: int) -> Call:
        script, keys, args = scripts.command(op, section.key, section.token, ttl_ms)
        return cls(script, keys, args, op is Op.RELEASE)

    def __repr__(self) -> str:
        return f"Call({self.script.sha[:8]}, keys={self.keys}, args={self.args})"


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait until ``until_ms`` on the client clock."""

    until_ms: float


Request = Call | Sleep
Flow = Generator[Request, int, T]


class Effects(Protocol[H]):
    """What a flow asks of its driver besides IO."""

    def now(self) -> float:
        """The client's monotonic clock, in milliseconds."""

    def guard(self, handle: H) -> AbstractContextManager[object]:
        """Held around core calls: timers and renewals may run on other threads."""

    def arm(self, handle: H) -> None:
        """Re-arm the handle's timer for ``section.wake_at`` (called under the guard)."""

    def apply(self, handle: H, step: Step) -> None:
        """Fire the signal, cancel the body, start a renewal (called outside the guard)."""


def acquire(fx: Effects[H], handle: H) -> Flow[None]:
    """Attempt until granted or refused for good.

    A failed round trip may still have taken the key: release it with our token before
    the error goes on.  A grant that arrived after its own lease is released and raised as
    the loss it is; no body may start on it.
    """
    section = handle.section
    while True:
        section.acquire(fx.now())
        try:
            fence = yield Call.of(Op.ACQUIRE, section, section.config.ttl_ms)
        except BaseException as exc:
            section.acquire_fail(fx.now())
            try:
                yield from release(fx, handle)
            except Exception as cleanup:
                exc.add_note(
                    f"distlock: the cleanup release of {section.key!r} also failed "
                    f"({cleanup!r}); if the acquire had run, the key expires after its TTL"
                )
            raise
        step = section.acquire_reply(fx.now(), fence)
        if step.loss is not None:
            fx.apply(handle, step)
            yield from release(fx, handle)
            raise step.loss
        if section.phase is not Phase.BACKOFF:
            return
        yield Sleep(section.retry_at)


def acquire_all(fx: Effects[H], handles: Sequence[H]) -> Flow[None]:
    """Take every lock of a group, in the order given (the caller sorts: see
    :mod:`distlock._core.group`); if one cannot be had, give back those taken, newest first."""
    taken: list[H] = []
    try:
        for handle in handles:
            yield from acquire(fx, handle)
            if handle.section.phase is not Phase.HELD:
                raise handle.section.not_acquired_error()
            taken.append(handle)
    except BaseException:
        for handle in reversed(taken):
            # The error that stopped the acquisition is the one to report.
            with contextlib.suppress(Exception):
                yield from release(fx, handle)
        raise


def release(fx: Effects[H], handle: H) -> Flow[bool]:
    """Compare-and-delete with our token. True only if the key was still ours.

    A failed round trip is the caller's error for a manual handle, and the loss for run/hold.
    """
    section = handle.section
    with fx.guard(handle):
        step = section.release(fx.now())
    if step.send is None:
        return False
    try:
        reply = yield Call.of(Op.RELEASE, section, section.config.ttl_ms)
    except Exception as exc:
        with fx.guard(handle):
            step = section.release_fail(fx.now())
        if step.loss is not None:
            step.loss.__cause__ = exc
        fx.apply(handle, step)
        if section.release_error_to_caller:
            raise
        return False
    ok = reply == 1
    with fx.guard(handle):
        step = section.release_reply(fx.now(), ok)
    fx.apply(handle, step)
    return ok


def finish_all(fx: Effects[H], handles: Sequence[H]) -> Flow[None]:
    """The body of a group is done: every completion check first, then the releases,
    newest first."""
    for handle in handles:
        with fx.guard(handle):
            step = handle.section.body_done(fx.now())
            fx.arm(handle)
        fx.apply(handle, step)
    for handle in reversed(handles):
        yield from release(fx, handle)


def extend(fx: Effects[H], handle: H, ttl_ms: int) -> Flow[bool]:
    """A manual, token-checked extend. False (and the signal) if the key is not ours."""
    section = handle.section
    with fx.guard(handle):
        step = section.extend(fx.now(), ttl_ms)
        fx.arm(handle)  # a shorter TTL moves the deadline earlier as the request leaves
    if step.send is None:
        return False
    try:
        reply = yield Call.of(Op.EXTEND, section, ttl_ms)
    except BaseException:
        with fx.guard(handle):
            section.extend_fail(fx.now())
        raise
    ok = reply == 1
    with fx.guard(handle):
        step = section.extend_reply(fx.now(), ok)
        fx.arm(handle)
    fx.apply(handle, step)
    return ok


def renew(fx: Effects[H], handle: H) -> Flow[None]:
    """One background renewal round trip (the core's RenewSend already happened)."""
    section = handle.section
    try:
        reply = yield Call.of(Op.EXTEND, section, section.config.ttl_ms)
    except Exception as exc:
        with fx.guard(handle):
            step = section.renew_fail(fx.now())
            fx.arm(handle)
        fx.apply(handle, step)
        hook = section.config.on_renew_error
        if hook is not None:
            hook(exc)
        return
    except BaseException:
        with fx.guard(handle):
            section.renew_fail(fx.now())
        raise
    with fx.guard(handle):
        step = section.renew_reply(fx.now(), reply == 1)
        fx.arm(handle)
    fx.apply(handle, step)


def tick(fx: Effects[H], handle: H) -> None:
    """The section's timer fired: let the core pick LeaseTimeout, RenewSend or nothing."""
    with fx.guard(handle):
        step = handle.section.tick(fx.now())
        fx.arm(handle)
    fx.apply(handle, step)
