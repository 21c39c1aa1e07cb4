"""Leader election's pure machine: a candidate's campaign.

A campaign is a lock's waiting section with the handoff, action for action (``Acquire``
... ``ReleaseFail``, and a waiter's ``Block``, ``Wake`` and ``Withdraw``), with the same
guards and the same :class:`~distlock._core.lease.LeaseClock`: ``spec/Election.tla``
EXTENDS ``spec/DistLock.tla`` and takes the lock's client actions as they are.  What the
election adds is not a decision of the client:

- the encoding: the commands carry ``Kind.CAMPAIGN`` and the candidate's identity, and
  :mod:`distlock._protocol` carries them out with the ``E_*`` scripts, which are the
  lock's, plus the leader record (token, identity, fence) that every grant writes in the
  same step (the spec's ``RecordGrant``): the campaign's own, and a resignation's or a
  withdrawal's handoff to the next candidate;
- the reading: :func:`leading` is the handle's check before its leader acts (the spec's
  ``Acting``): held, no loss known, and the deadline not passed on the client's clock.
"""

from __future__ import annotations

from typing import Any

from distlock._core.commands import Command, Kind
from distlock._core.config import SectionConfig
from distlock._core.section import Section
from distlock._native import mypyc_attr

__all__ = ["CampaignSection", "leading"]


@mypyc_attr(allow_interpreted_subclasses=True)
class CampaignSection(Section):
    """One candidate's campaign for one election's key, from its first attempt to the end
    of its leadership (or of its wait)."""

    __slots__ = ("identity",)

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
        #: Who the candidate says it is: what ``leader()`` reports once it is granted.
        self.identity = ""

    @property
    def kind(self) -> Kind:
        return Kind.CAMPAIGN

    def _fill(self, command: Command) -> None:
        command.kind = Kind.CAMPAIGN
        command.identity = self.identity

    def _record(self, action: str, now: float, **extra: Any) -> None:
        if action == "Acquire":
            # What a trace is checked against besides the lock's: who campaigns.
            extra["identity"] = self.identity
        super()._record(action, now, **extra)


def leading(section: Section, now: float) -> bool:
    """Whether the section's candidate may act as leader at ``now`` (the client's clock):
    held, no loss known, and its lease valid by its own clock (the spec's ``Leading``).  A
    read of the clock, not a timer's verdict: an event loop too busy to run the loss timer
    still gets False here once the deadline has passed."""
    return section.holding and not section.lease_expired(now)
