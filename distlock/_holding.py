"""What both drivers' reentrant levels, ``hold()`` objects and groups share: who holds
which reentrant key, what a ``with`` block raises on exit, and a group's handles by id."""

from __future__ import annotations

import threading
import weakref
from asyncio import CancelledError
from collections.abc import Iterator, Sequence
from typing import Generic

from distlock._base import HandleBase, HandleT, LockBase
from distlock._core.group import Group
from distlock._core.section import Section
from distlock.errors import UsageError


class Holders(Generic[HandleT]):
    """Who holds which key through one reentrant lock: holder -> key -> outermost handle.

    A holder is a thread or a task, keyed by the object itself (never by a number a dead
    thread's successor may reuse) and held weakly, so a holder that ends is forgotten even
    if it never exited its outermost level.  Entries are removed at the outermost exit.
    """

    __slots__ = ("_by_holder", "_mutex")

    def __init__(self) -> None:
        self._by_holder: weakref.WeakKeyDictionary[object, dict[str, HandleT]] = (
            weakref.WeakKeyDictionary()
        )
        self._mutex = threading.Lock()

    def get(self, holder: object, key: str) -> HandleT | None:
        with self._mutex:
            held = self._by_holder.get(holder)
            return None if held is None else held.get(key)

    def add(self, holder: object, key: str, handle: HandleT) -> None:
        with self._mutex:
            self._by_holder.setdefault(holder, {})[key] = handle

    def remove(self, holder: object, key: str, handle: HandleT) -> None:
        """Forget ``handle`` (and only it) as ``holder``'s outermost level of ``key``."""
        with self._mutex:
            held = self._by_holder.get(holder)
            if held is not None and held.get(key) is handle:
                del held[key]
                if not held:
                    del self._by_holder[holder]

    def __len__(self) -> int:
        with self._mutex:
            return sum(len(held) for held in self._by_holder.values())


def inner_verdict(section: Section, body_error: BaseException | None) -> None:
    """What an inner level's ``with`` block raises on exit: the section's loss, if known
    (chained from the body's exception; unchanged if the body raised the loss itself)."""
    loss = section.lost
    if loss is None or body_error is loss:
        return
    if body_error is None:
        raise loss
    raise loss from body_error


def conclude(machine: Group, body_error: BaseException | None) -> None:
    """Raise what the caller of a ``with`` block must see once every section is over, if
    not the body's own exception (which then simply propagates).  A body's
    :class:`asyncio.CancelledError` is a cancellation: ours (a loss asked for it) or the
    caller's, which the core tells apart."""
    outcome = machine.verdict(body_error, cancelled=isinstance(body_error, CancelledError))
    if outcome is body_error:
        return
    assert outcome is not None
    if body_error is None:
        raise outcome  # keeps the cause the flow set (a release's network error)
    raise outcome from body_error


class HoldingBase:
    """What a sync and an asyncio ``hold()`` share: one section per ``with``."""

    __slots__ = ("_entered",)

    def __init__(self) -> None:
        self._entered = False

    def _refuse_entry(self, lock: LockBase, handles: Sequence[HandleBase]) -> None:
        """Raise why this hold may not be entered: it was already, or ``lock`` is closed.
        Called only when one of the two is so (``self._entered or lock._closed``, tested
        where the hold is entered: this call is then off every lock cycle's path)."""
        if self._entered:
            raise UsageError(
                "this hold() was already entered; call hold() again for another section"
            )
        self._entered = True
        lock._check_open(handles[0].key if len(handles) == 1 else None)

    _conclude = staticmethod(conclude)


class GroupBase(Generic[HandleT]):
    """Several locks held together. ``group[id]`` is the handle of one of them.

    ``handles`` lists them in the order they were taken (sorted keys); they share one
    ``signal``, which aborts with the first loss among them.
    """

    __slots__ = ("_by_key", "_prefix", "handles")

    def __init__(self, prefix: str, handles: Sequence[HandleT]) -> None:
        self._prefix = prefix
        self.handles: tuple[HandleT, ...] = tuple(handles)
        #: Made on the first ``group[id]``: most groups are one ``hold`` nobody indexes.
        self._by_key: dict[str, HandleT] | None = None

    def __getitem__(self, id: str) -> HandleT:
        by_key = self._by_key
        if by_key is None:
            by_key = self._by_key = {h.key: h for h in self.handles}
        try:
            return by_key[f"{self._prefix}:{id}"]
        except KeyError:
            raise KeyError(f"{id!r} is not one of this group's ids") from None

    def __iter__(self) -> Iterator[HandleT]:
        return iter(self.handles)

    def __len__(self) -> int:
        return len(self.handles)

    @property
    def keys(self) -> list[str]:
        return [h.key for h in self.handles]

    @property
    def held(self) -> bool:
        return all(h.held for h in self.handles)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.keys} held={self.held}>"
