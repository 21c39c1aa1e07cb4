"""The reentrant lock's pure machine: a lock section plus its holder's depth.

The outermost level of a reentrant hold is a lock section, action for action
(:class:`~distlock._core.section.Section`: Acquire, RenewSend, Release, ...), run by the
``R_*`` scripts of :mod:`distlock._protocol` on a hash instead of a string.  The levels
inside it add six actions, one method each, named after the actions of
``spec/Reentrant.tla`` in snake case (``ReenterReply`` is
:meth:`ReentrantSection.reenter_reply`):

- ``Reenter``: the holder, at depth d of a held section not known lost, writes depth d+1
  (the write refreshes the TTL, so it is a lease write like a renewal);
- ``ReenterReply``: 1 is depth d+1 and a confirmed lease write; 0 is the loss;
- ``ReenterFail``: no reply: the depth stays d and the caller gets the error (Redis may hold
  d+1 until the next write of the depth: the depth in Redis is advisory);
- ``Leave``: an inner level exits: depth d-1 at once on the client, and written to Redis;
- ``LeaveReply``: 1 is nothing more; 0 is the loss;
- ``LeaveFail``: no reply: not a loss.

Who the holder is (a thread, a task) is the driver's business; the machine knows one
holder's depth on one key.  A re-entry on a section known lost (or no
longer held) takes no action and sends nothing: it raises the loss.  An inner exit is
``Leave`` as long as the outermost level is held, lost or not.

The order of exits is decided here too, by checks that are not actions and that both
drivers ask before an exit: only the innermost open level may exit
(:meth:`ReentrantSection.check_inner_exit`), the outermost one only once no inner level is
open (:meth:`ReentrantSection.check_outermost_exit`), and the outermost level is over once
its section is no longer held (:attr:`ReentrantSection.outermost_ended`).

``Section`` itself is left untouched, so ``tests/test_parity.py`` keeps comparing it with
``spec/DistLock.tla``; :data:`distlock._core.actions.REENTRANT_ACTIONS` lists the actions
added here.
"""

from __future__ import annotations

from distlock._core.commands import NOTHING, Command, Kind, Op, Step
from distlock._core.lease import Write
from distlock._core.section import Phase, Section, SectionConfig
from distlock.errors import LossReason, UsageError

__all__ = ["ReentrantSection"]


class ReentrantSection(Section):
    """One holder's hold on one reentrant key: the outermost section and the depth in it."""

    __slots__ = ("depth", "depth_op", "depth_unsettled", "enter_write")

    def __init__(
        self,
        key: str,
        token: str | int,
        config: SectionConfig,
        *,
        client: str = "c",
        record: bool = False,
    ) -> None:
        super().__init__(key, token, config, client=client, record=record)
        #: Levels open on the client: 0 before the grant, 1 for the outermost level.
        self.depth = 0
        #: The depth write in flight (Op.REENTER or Op.LEAVE), if any: one at a time,
        #: because one holder does one thing at a time.
        self.depth_op: Op | None = None
        #: The lease write of the re-entry in flight (its TTL refresh).
        self.enter_write: Write | None = None
        #: A depth write failed since the last one that was answered: Redis's depth may
        #: differ from ours until the next answered write.
        self.depth_unsettled = False

    # -- what the spec observes -------------------------------------------------------------

    @property
    def depth_mirrored(self) -> bool:
        """Nothing in flight and nothing failed since the last settled write: Redis holds
        our depth (while it holds our token)."""
        return self.depth_op is None and not self.depth_unsettled

    def _fill(self, command: Command) -> None:
        command.kind = Kind.REENTRANT
        command.depth = self.depth

    def _depth_command(self, op: Op, depth: int, write: Write | None) -> Command:
        return Command(
            op, self.key, self.token, self.config.ttl_ms, write, reentrant=True, depth=depth
        )

    # -- the outermost level -----------------------------------------------------------------

    @property
    def kind(self) -> Kind:
        return Kind.REENTRANT

    def _granted(self, now: float, fence: int, handed: bool = False) -> Step:
        """A grant (an attempt's, or a key handed over) opens the outermost level."""
        self.depth = 1
        return super()._granted(now, fence, handed)

    def check_outermost_exit(self) -> None:
        """Not an action: the outermost level may exit only once no inner level is open.

        The one rule of every outermost exit (a manual ``release()``, ``with handle:``, and
        the end of the ``hold``/``run`` block): refused, nothing sent, nothing changed.
        The key stays held (and renewed, for a ``hold``/``run``), so an inner level still
        in use is never left holding a key already freed, and nothing is left unsignalled;
        the caller exits the inner levels and then releases the outermost handle.
        """
        if self.depth > 1 and self.phase is Phase.HELD:
            levels = "level 2" if self.depth == 2 else f"levels 2 to {self.depth}"
            raise UsageError(
                f"{self.depth - 1} inner level(s) of {self.key!r} still open ({levels}), "
                "so the outermost level cannot exit: the key stays held (and renewed under "
                "hold/run); release the inner levels' handles, innermost first, then the "
                "outermost level's handle",
                self.key,
            )

    @property
    def outermost_ended(self) -> bool:
        """Not an action: after an outermost exit was let through, whether its level is
        closed, which it is once the section is no longer held (released, or a release
        with no answer, which a second ``release()`` sends again).  Only an exit refused
        before it sent anything leaves the outermost level open."""
        return self.phase is not Phase.HELD

    def check_inner_exit(self, level: int) -> None:
        """Not an action: an inner level may exit only when it is the innermost open one.

        ``level`` is the exiting level's depth (2 or more).  Levels exit innermost first,
        as ``with`` blocks do; a manual ``release()`` of an outer inner level while a
        deeper one is open is refused: nothing sent, nothing changed.
        """
        if self.depth != level:
            raise UsageError(
                f"level {level} of {self.key!r} cannot exit while level "
                f"{self.depth} is open: exit the innermost level first",
                self.key,
            )

    # -- re-entry --------------------------------------------------------------------------

    def reenter(self, now: float) -> Step:
        """Reenter: at depth d of a held section not known lost, write depth d+1 and
        refresh the TTL.  Nothing to send (no action) when the section is no longer held
        or known lost: the driver raises the loss instead."""
        if not self.holding:
            return NOTHING
        self._guard(
            "Reenter",
            self.holding and self.depth >= 1 and self.depth_op is None,
        )
        ttl = self.config.ttl_ms
        self.enter_write = write = self.lease_send(now, ttl)
        self.depth_op = Op.REENTER
        if self.recording:
            self._record("Reenter", now, depth=self.depth, to=self.depth + 1)
        return Step(send=self._depth_command(Op.REENTER, self.depth + 1, write))

    def reenter_reply(self, now: float, ok: bool) -> Step:
        """ReenterReply: 1 is depth d+1 (and the TTL refreshed from the send time, like a
        renewal); 0 means the key is not ours: the loss.  A reply that finds the loss
        already known opens no level."""
        write = self.enter_write
        self._guard("ReenterReply", self.depth_op is Op.REENTER and write is not None)
        assert write is not None
        self.depth_op = None
        self.enter_write = None
        step = NOTHING
        if ok:
            self.depth_unsettled = False
            if self.holding:
                self.lease_confirm(write)
                self.depth += 1
            else:
                # Redis now holds d+1 for a level that will never open.
                self.lease_settle(write)
                self.depth_unsettled = True
        else:
            self.lease_settle(write)
            step = self._lose(now, LossReason.REENTER_REJECTED, body_running=False)
        if self.recording:
            self._record("ReenterReply", now, ok=ok, depth=self.depth)
        return step

    def reenter_fail(self, now: float) -> Step:
        """ReenterFail: no reply; the depth stays and the caller gets the error.  Not a loss:
        the write may still run, so Redis may hold d+1 until the next depth write."""
        write = self.enter_write
        self._guard("ReenterFail", self.depth_op is Op.REENTER and write is not None)
        assert write is not None
        self.depth_op = None
        self.enter_write = None
        self.depth_unsettled = True
        self.lease_fail(write)
        if self.recording:
            self._record("ReenterFail", now, depth=self.depth)
        return NOTHING

    # -- inner exits -------------------------------------------------------------------------

    def leave(self, now: float) -> Step:
        """Leave: an inner level (depth d >= 2) exits; depth d-1 at once, and written.

        A section known lost still writes its depth (the spec's ``Leave`` fires whenever
        the section is held): Redis may still hold our token, and the write is harmless
        if not.  Once the outermost level has ended there is nothing to write to: the level
        only stops counting.
        """
        if self.phase is not Phase.HELD:
            if self.depth >= 2:
                self.depth -= 1
            return NOTHING
        self._guard("Leave", self.depth >= 2 and self.depth_op is None)
        self.depth -= 1
        self.depth_op = Op.LEAVE
        if self.recording:
            self._record("Leave", now, depth=self.depth)
        return Step(send=self._depth_command(Op.LEAVE, self.depth, None))

    def leave_reply(self, now: float, ok: bool) -> Step:
        """LeaveReply: 1 is nothing more; 0 means the key is not ours: the loss, which
        that inner exit raises."""
        self._guard("LeaveReply", self.depth_op is Op.LEAVE)
        self.depth_op = None
        step = NOTHING
        if ok:
            self.depth_unsettled = False
        else:
            step = self._lose(now, LossReason.LEAVE_REJECTED, body_running=False)
        if self.recording:
            self._record("LeaveReply", now, ok=ok, depth=self.depth)
        return step

    def leave_fail(self, now: float) -> Step:
        """LeaveFail: no reply.  Not a loss: the depth in Redis is advisory until the next
        depth write, and only the outermost release frees the key."""
        self._guard("LeaveFail", self.depth_op is Op.LEAVE)
        self.depth_op = None
        self.depth_unsettled = True
        if self.recording:
            self._record("LeaveFail", now, depth=self.depth)
        return NOTHING
