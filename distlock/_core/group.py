"""Sections held together: the decisions that concern a group, not one section.

Every ``hold``/``run`` is a group (of one section, or of several with ``hold_many``), and
so is a handle from ``acquire``.  The group decides:

- the order its keys are taken in: sorted, whatever order the caller named them in.  Locks
  taken one after another deadlock when two callers take the same keys in different
  orders; ``spec/MultiLock.tla`` shows TLC finding that deadlock in caller order and none in
  sorted order;
- the first loss: the one the group's signal reports, and the only one that may cancel the
  body (a body is cancelled once, however many of its locks are lost);
- the verdict the caller sees once every section is over.
"""

from __future__ import annotations

from collections.abc import Sequence

from distlock._core.commands import Step
from distlock._core.section import Outcome, Section
from distlock.errors import LockLeaseLostError, ProtocolError, ValidationError


def acquisition_order(keys: Sequence[str]) -> list[str]:
    """The order a group's keys are taken in: sorted, so every caller agrees on it."""
    if not keys:
        raise ValidationError("a group needs at least one lock id")
    if len(set(keys)) != len(keys):
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        raise ValidationError(f"lock ids in a group must be distinct; repeated: {dupes}")
    return sorted(keys)


class Group:
    """The sections of one ``hold``/``run``/``hold_many``/``run_many`` or manual handle."""

    __slots__ = ("_sections", "body_cancelled", "first_loss", "signal")

    def __init__(self, sections: Sequence[Section]) -> None:
        # A group of one (every hold() and acquire()) keeps its section, not a tuple of
        # it: thousands of locks may be held at once, and the tuple was 48 bytes each.
        self._sections: Section | tuple[Section, ...] = (
            sections[0] if len(sections) == 1 else tuple(sections)
        )
        #: The signal's reason: the first loss among the sections, once known.
        self.first_loss: LockLeaseLostError | None = None
        #: The body was cancelled because of a loss (at most once).
        self.body_cancelled = False
        #: The driver's signal of this group, made when first asked for: kept here, once
        #: per group, so that a held lock nobody asks for a signal carries none.  The core
        #: never reads it.
        self.signal: object | None = None

    @property
    def sections(self) -> tuple[Section, ...]:
        """In acquisition order."""
        sections = self._sections
        return sections if isinstance(sections, tuple) else (sections,)

    def start(self, now: float) -> None:
        """The group starts acquiring: ``wait_ms`` bounds the whole group, so every
        section waits until one deadline, however long the keys before it took."""
        for section in self.sections:
            if section.waiting is not None:
                section.waiting.start(now)

    def on_loss(self, step: Step) -> tuple[LockLeaseLostError | None, bool]:
        """A section's step reported a loss: (the loss to fire the signal with, or None if
        the signal already fired; whether to cancel the body now)."""
        if step.loss is None or self.first_loss is not None:
            return None, False
        self.first_loss = step.loss
        cancel = step.cancel_body and not self.body_cancelled
        self.body_cancelled = self.body_cancelled or cancel
        return step.loss, cancel

    @property
    def cancel_requested(self) -> bool:
        """A loss asked for the body to be cancelled."""
        return any(s.cancel_requested for s in self.sections)

    def verdict(
        self, body_error: BaseException | None, *, cancelled: bool = False
    ) -> BaseException | None:
        """What a ``run``/``hold`` caller sees once every section is over.

        ``cancelled`` is the driver's word that ``body_error`` is a cancellation of the
        body (what counts as one is the driver's business: the core knows no event loop).

        - success (every section ok): the body's own exception, if any, else nothing;
        - the body raised the loss itself (the signal's reason): that, unchanged;
        - the body was cancelled because of the loss: the loss;
        - the body was cancelled from outside: the cancellation, which the caller asked for;
        - any other loss: the loss, chained from the body's exception by the driver, because
          a loss is never hidden behind another error.
        """
        sections = self.sections
        if len(sections) == 1:
            ok = sections[0].outcome is Outcome.OK  # one hold(): no generator
        else:
            ok = all(s.outcome is Outcome.OK for s in sections)
        if ok:
            return body_error
        loss = self.first_loss
        if loss is None:
            loss = next((s.lost for s in sections if s.lost is not None), None)
        if loss is None:
            first = sections[0]
            raise ProtocolError(f"no verdict in phase {first.phase.value}", first.key)
        if body_error is loss:
            return body_error
        if cancelled and not self.cancel_requested:
            return body_error
        return loss
