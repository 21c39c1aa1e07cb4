"""The asyncio driver's cancellation accounting: everything the driver does because a
task can be cancelled at an ``await``.  :mod:`distlock._sync.cancellation` offers the same
names as no-ops (a thread is not cancelled), so the generated sync driver carries the
calls and none of the cost of a decision.

The counts are the task's own (``Task.cancelling()``/``uncancel()``, Python 3.11+): a
cancel the driver sends (a loss cancelling the body, ``aclose()`` cancelling a waiter) is
taken back by the driver with ``uncancel()``, so ``asyncio.timeout`` and ``TaskGroup``
around a call still see exactly the cancels sent from outside.

The contract at each await point of the driver that a cancel can interrupt (what state
is left, and what the caller sees):

``Lock._run``, at a command (``_call``: an acquire, extend, re-entry, leave, close)
    The cancel is thrown into the flow at that request, as any error is: the flow gives
    back what the request may have taken (an acquire is released with its token) and the
    ``CancelledError`` propagates.  A cancel that a library below us swallowed
    (``asyncio.wait_for`` on 3.11 returns normally when the send finished just before the
    cancel reached it) is raised where it was lost (:func:`raise_swallowed`): the request
    counts as interrupted, exactly as if the cancel had been raised there.

``Lock._run``, at a release or a withdrawal (:func:`finishes_in_background`)
    The key is ours until Redis answers a release, and a place in the queue holds up the
    queue until it expires: the request is sent again, same token, from a background task
    that runs the flow to its end (``aclose()`` waits for it).  The caller sees its
    ``CancelledError`` at once; the section ends as the background flow decides.

``Lock._run``, at a backoff (``Sleep``)
    Thrown into the flow: nothing was taken by the refused attempt, the cancel propagates.

``Lock._wait``, at the waiter's BLPOP and the attempt after it
    The waiter's connection is disconnected (Redis forgets the block with the socket) and
    the cancel is thrown into the flow, which withdraws the place before it propagates.
    If the cancel was ``aclose()``'s (the task is in the Lock's ``closing`` set),
    :func:`closed_instead` takes it back and the caller sees ``LockClosedError``.  A
    swallowed cancel is raised as at a command.

``hold``/``run`` body (a loss)
    A loss while the body runs cancels the body's task once (``cancel_on_loss``,
    :func:`cancel_body`).  The hold's exit takes that one cancel back
    (:func:`outside_cancel`) and raises ``LockLeaseLostError``; a cancel from outside on
    top of it (the count is higher than at entry) wins and propagates.  A reentrant
    lock's levels share one hold: whichever level's exit sees the loss's cancel first
    takes it back (:func:`take_loss_cancel`), so every level surfaces the loss.

    A loss the body's own call finds (its own release, its own ``aclose()``) cancels the
    body's task while that task runs: the cancel is delivered at the body's next await.
    A body that ends without one leaves it pending, and Python before 3.13 keeps a
    pending cancel through ``uncancel()``, so it would hit the caller's next await after
    the hold: the exit receives it first (:func:`receive_loss_cancel`).

``hold`` exit (the release)
    As a release at ``Lock._run``: finished in the background; the exit raises the
    ``CancelledError``.

``Lock.aclose``, at each open section's close and at draining the background
    A cancel of the closing task (a body closing its own Lock is cancelled by the loss
    it causes) is kept until every section is closed and the background drained, then
    raised: closing is never left half done.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from distlock._core.commands import Command, Op
from distlock.errors import LockClosedError

if TYPE_CHECKING:
    from distlock._core.group import Group
    from distlock.options import Options

#: What a cancel is raised as.
Cancelled = asyncio.CancelledError
#: What a cancel interrupts: a task.
Task: TypeAlias = "asyncio.Task[Any]"
#: Requests that go on after their caller is cancelled: a release (the key is ours until
#: Redis answers one) and a withdrawal (the place would hold up the queue until it expires).
_FINISH_IN_BACKGROUND = frozenset({Op.RELEASE, Op.WITHDRAW})


class Body(Protocol):
    """A hold's view of its body: the task a loss cancels, and its count at entry."""

    task: asyncio.Task[Any] | None
    _cancelling: int


class OuterLevel(Body, Protocol):
    """A reentrant lock's outermost hold: whether its loss cancel was taken back yet."""

    _consumed: bool


def current_task() -> asyncio.Task[Any] | None:
    return asyncio.current_task()


def cancelling(task: asyncio.Task[Any] | None) -> int:
    """The task's count of cancels requested and not taken back."""
    return task.cancelling() if task is not None else 0


def raise_swallowed(task: asyncio.Task[Any] | None, cancels: int) -> None:
    """Raise the cancel a library below us swallowed: the count went up since ``cancels``
    and no ``CancelledError`` came out (see ``Lock._run``)."""
    if task is not None and task.cancelling() > cancels:
        raise asyncio.CancelledError


def is_cancel(error: BaseException | None) -> bool:
    return isinstance(error, asyncio.CancelledError)


def finishes_in_background(request: object) -> bool:
    """Whether an interrupted ``request`` is sent again from a background task."""
    return isinstance(request, Command) and request.op in _FINISH_IN_BACKGROUND


def cancels_body(options: Options) -> bool:
    """Whether a loss cancels a hold's body (the ``cancel_on_loss`` option)."""
    return options.cancel_on_loss


def cancel_body(body: Body | None) -> None:
    """A loss cancels the body of the hold it happened under (once: the core says when)."""
    if body is not None and body.task is not None:
        body.task.cancel()


def outside_cancel(
    machine: Group, task: asyncio.Task[Any] | None, at_entry: int, error: BaseException | None
) -> bool:
    """At a hold's exit: take back the cancel the loss sent the body, if it did; True if a
    cancel from outside came on top of it (then that one propagates, not the loss)."""
    return (
        machine.body_cancelled
        and task is not None
        and task.uncancel() > at_entry
        and isinstance(error, asyncio.CancelledError)
    )


async def receive_loss_cancel(
    machine: Group, task: asyncio.Task[Any] | None, error: BaseException | None
) -> BaseException | None:
    """At a hold's exit, before anything else: the loss's cancel still pending on the
    body's task (sent by the body's own call, and the body ended without another await)
    is received here, at one checkpoint, so that the exit takes it back as any loss's
    cancel.  What the body's end counts as from then on: the ``CancelledError`` received,
    or ``error``."""
    if (
        not machine.body_cancelled
        or task is None
        or is_cancel(error)
        or task is not asyncio.current_task()
    ):
        return error
    try:
        await asyncio.sleep(0)
    except asyncio.CancelledError as cancel:
        return cancel
    return error


def take_loss_cancel(
    level: OuterLevel, machine: Group, error: BaseException | None
) -> bool | None:
    """For a reentrant lock's levels: None if there is no loss cancel to take back (or it
    was taken already).  Otherwise take it back: True if a cancel from outside came on
    top of it (that one propagates), else False."""
    task = level.task
    if not machine.body_cancelled or level._consumed or task is None:
        return None
    level._consumed = True
    return task.uncancel() > level._cancelling and isinstance(error, asyncio.CancelledError)


def closed_instead(
    closing: set[asyncio.Task[Any]],
    task: asyncio.Task[Any] | None,
    error: BaseException,
    closed_error: LockClosedError,
) -> BaseException:
    """What a waiter interrupted by ``error`` sees: ``aclose()``'s cancel (the task is in
    ``closing``) is taken back, and the caller sees ``closed_error``."""
    if task is not None and task in closing:
        closing.discard(task)
        task.uncancel()
        return closed_error
    return error
