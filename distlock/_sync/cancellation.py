"""The sync driver's cancellation accounting: none.  A thread is not cancelled, so every
name of :mod:`distlock._async.cancellation` is here a no-op or a constant answer, and
the generated sync driver decides nothing on it (hand-written, as the backend is)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from distlock._core.group import Group
    from distlock.options import Options


class Cancelled(BaseException):
    """Never raised: what an ``except`` for a cancel catches in the sync driver."""


#: No task: the sync driver passes None where the asyncio one passes the current task.
Task: TypeAlias = object


def current_task() -> Task | None:
    return None


def cancelling(task: object) -> int:
    return 0


def raise_swallowed(task: object, cancels: int) -> None:
    pass


def is_cancel(error: BaseException | None) -> bool:
    return False


def finishes_in_background(request: object) -> bool:
    return False


def cancels_body(options: Options) -> bool:
    """A sync body cannot be cancelled: a loss never asks for it."""
    return False


def cancel_body(body: object) -> None:
    pass


def outside_cancel(
    machine: Group, task: object, at_entry: int, error: BaseException | None
) -> bool:
    return False


def receive_loss_cancel(
    machine: Group, task: object, error: BaseException | None
) -> BaseException | None:
    return error


def take_loss_cancel(level: Any, machine: Group, error: BaseException | None) -> bool | None:
    return None
