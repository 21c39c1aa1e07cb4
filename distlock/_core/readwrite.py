"""The read-write lock's pure machines: a reader's section and a writer's.

Each is a lease exactly as a lock's key is, action for action (``Acquire`` ...
``ReleaseFail``, and a waiter's ``Block``, ``Wake`` and ``Withdraw``), with the same guards
and the same :class:`~distlock._core.lease.LeaseClock`: ``spec/ReadWrite.tla`` takes the
lock's client actions one for one and adds no decision to them.  What the role changes is
not a decision of the client:

- the encoding: the commands carry ``Kind.READ`` or ``Kind.WRITE``, and
  :mod:`distlock._protocol` carries them out with the ``RWLOCK_*`` scripts, which grant a
  reader while no writer is live and no writer waits before it, and a writer while nobody
  holds the key and nobody waits before it (the spec's ``RedisStep``);
- the grant's value: a writer's is a new fence, larger than any issued before it on the
  key's slot; a reader's is the fence counter as it stands (the last writer's fence, or
  above it), shared with the other readers: readers are not ordered among themselves.

The reader's upgrade (the spec's ``Upgrade``) is refused before anything is sent; the
drivers know who holds what (a thread, a task), and raise
:class:`~distlock.errors.UpgradeError` there (:func:`reentry_refused`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from distlock._core.commands import Command, Kind
from distlock._core.section import Section
from distlock._native import mypyc_attr
from distlock.errors import ReentryError, UpgradeError

__all__ = ["ReadSection", "WriteSection", "reentry_refused"]


@mypyc_attr(allow_interpreted_subclasses=True)
class _RoleSection(Section):
    """A section whose commands carry its role's kind (see the module's docstring)."""

    __slots__ = ()

    #: The role of every section of the class: which scripts' rules apply.  A class
    #: variable: compiled, an instance field would keep this default in every subclass.
    _role: ClassVar[Kind] = Kind.WRITE

    def _fill(self, command: Command) -> None:
        command.kind = self._role

    @property
    def kind(self) -> Kind:
        return self._role

    def _record(self, action: str, now: float, **extra: Any) -> None:
        if action == "Acquire":
            # What a trace is checked against besides the lock's: the role.
            extra["kind"] = self._role.value
        super()._record(action, now, **extra)


@mypyc_attr(allow_interpreted_subclasses=True)
class ReadSection(_RoleSection):
    """One reader's lease of one key, from the first request to the verdict."""

    __slots__ = ()
    _role = Kind.READ


@mypyc_attr(allow_interpreted_subclasses=True)
class WriteSection(_RoleSection):
    """One writer's lease of one key, from the first request to the verdict."""

    __slots__ = ()
    _role = Kind.WRITE


def reentry_refused(key: str, holds: Kind, wants: Kind) -> ReentryError:
    """A holder of ``key`` asks the same read-write lock for it again.  Refused, with
    nothing sent.  A read asking for the write is the spec's ``Upgrade`` (two readers
    upgrading would each wait for the other's read to end); the spec has no other such
    step, and each would wait for the holder itself."""
    if holds is Kind.READ and wants is Kind.WRITE:
        return UpgradeError(key)
    return ReentryError(key, holds=holds.value, wants=wants.value)
