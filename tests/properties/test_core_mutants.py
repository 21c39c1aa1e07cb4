"""Broken variants of the pure core that the state machine must catch on its own.

Each variant is a :class:`~tests.core_helpers.TracedSection` with one method broken the
way a plausible regression would break it.  The machine of ``test_core_stateful.py``
runs against it with a fixed seed, for at most :data:`MAX_EXAMPLES` examples of
:data:`STEPS` steps and no shrinking (the first counterexample is the evidence), and must
fail in the named check with its message.  The control run gives the real core the same
settings and must pass, so a check that fires on any core proves nothing.

============================  ======================================  ========  =========
variant                       check that fails                        examples  seeds 0-4
============================  ======================================  ========  =========
no completion-time check      ``overrun_is_loss`` (invariant)              156  13 to 206
deadline from the reply       ``signal_sound`` (invariant)                   9  9 to 633
renewal 0 fires no signal     ``rejection_is_loss`` (invariant)            379  9 to 379
no timeout while renewing     ``_tick``, in the ``clock`` rule               9  9 to 156
grant too late kept           ``grant_within_lease`` (invariant)             7  3 to 13
============================  ======================================  ========  =========

"examples": how many examples the machine ran, up to and including the first that
failed, with :data:`SEED` and Hypothesis 6.170 (each run records it as the test's
``examples`` property).  "seeds 0-4": the fewest and most under seeds 0 to 4, for how much room
:data:`MAX_EXAMPLES` leaves when another Hypothesis version draws other examples.  The
whole module takes about a minute, most of it the control's :data:`MAX_EXAMPLES`.

What each check states, and why it sees the variant at the step that goes wrong rather
than when the damage happens to surface:

- ``overrun_is_loss``: a body that finished at or past its deadline is known lost.  The
  spec's OkWithinLease speaks only of an OK outcome, which the variant reaches only when
  Redis still holds the key at the release.
- ``signal_sound``: SignalSound, and the key outlives the client's deadline now (what
  SignalSound needs in the future where only time passes).  A renewal reply that arrives
  after Redis ran it makes the variant trust the lease past the key's end.
- ``rejection_is_loss``: a renewal or extend answered 0 while held is a known loss
  (RenewReply, ExtendReply).
- ``_tick``: a timer that fired is not due again at once; the spec lets time pass only
  when no timer is due, and a lease that cannot time out stops the clock.
- ``grant_within_lease``: no body starts on a lease that ran out before its grant came
  (AcquireReply).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar, Final

import hypothesis
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from distlock._core.commands import NOTHING, Step
from distlock._core.section import Phase
from distlock.events import Acquired
from tests.core_helpers import TracedSection
from tests.properties import test_core_stateful as stateful

#: About twice what the slowest catch needs with :data:`SEED` (see the table above).
MAX_EXAMPLES: Final = 800
#: Fixed, not the profile's: the example counts above hold for this length only.
STEPS: Final = 60
#: Fixed so that CI runs the same examples every time (with no example database).
SEED: Final = 0

SETTINGS: Final = settings(
    max_examples=MAX_EXAMPLES,
    stateful_step_count=STEPS,
    database=None,
    # The first counterexample is enough to say which check fired; shrinking it would
    # cost more than finding it.
    phases=[hypothesis.Phase.generate],
    report_multiple_bugs=False,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# -- the variants ----------------------------------------------------------------------------


class NoCompletionCheck(TracedSection):
    """BodyDone does not look at the deadline: a starved body that overran is OK."""

    __slots__ = ()

    def body_done(self, now: float) -> Step:
        self._guard("BodyDone", self.phase is Phase.HELD)
        self.phase = Phase.BODY_DONE
        self.finished = True
        if self.events is not None:
            self._record("BodyDone", now)
        return NOTHING


class DeadlineFromReply(TracedSection):
    """A renewal's lease runs from the reply's arrival instead of the request's send time."""

    __slots__ = ()

    def renew_reply(self, now: float, ok: bool) -> Step:
        if self.renew_write is not None:
            self.renew_write.sent_at = now
        return super().renew_reply(now, ok)


class RejectedRenewalIgnored(TracedSection):
    """A renewal answered 0 (the key is not ours) records no loss and fires no signal."""

    __slots__ = ()

    def renew_reply(self, now: float, ok: bool) -> Step:
        write = self.renew_write
        if ok or write is None or self.phase is not Phase.HELD:
            return super().renew_reply(now, ok)
        self.renew_write = None
        self.lease_settle(write)
        if self.events is not None:
            self._record("RenewReply", now, ok=ok)
        return NOTHING


class NoTimeoutWhileRenewing(TracedSection):
    """The timer never retires the lease while a renewal is in flight: a hung renewal
    keeps the lease alive for ever."""

    __slots__ = ()

    def tick(self, now: float) -> Step:
        if self.renew_write is not None:
            return NOTHING
        return super().tick(now)


class GrantedTooLateKept(TracedSection):
    """A grant whose reply arrives after its own lease ran out is kept as held."""

    __slots__ = ()

    def acquire_reply(self, now: float, fence: int) -> Step:
        if fence <= 0:
            return super().acquire_reply(now, fence)
        self._guard("AcquireReply", self.phase is Phase.ACQUIRING)
        self.phase = Phase.HELD
        self.fence = fence
        self.lease_grant(self.sent_at, self.config.ttl_ms)
        self.schedule_renewal(self.sent_at)
        self._emit(
            Acquired(self.key, self.client, now, fence, self.attempts, now - self.first_sent_at)
        )
        if self.events is not None:
            self._record("AcquireReply", now, granted=True)
        return NOTHING


#: variant: (the check that must fail, what its message must say)
VARIANTS: Final[dict[type[TracedSection], tuple[str, str]]] = {
    NoCompletionCheck: ("overrun_is_loss", r"past its deadline .* not known lost"),
    DeadlineFromReply: ("signal_sound", r"trusts its lease until .* Redis"),
    RejectedRenewalIgnored: ("rejection_is_loss", r"was refused at .* not known lost"),
    NoTimeoutWhileRenewing: ("_tick", r"LeaseTimeout did not fire"),
    GrantedTooLateKept: ("grant_within_lease", r"past the deadline .* and kept it"),
}


# -- running the machine -----------------------------------------------------------------------


class CountingMachine(stateful.CoreMachine):
    """The core machine, counting the examples it runs."""

    built: ClassVar[int] = 0

    def __init__(self) -> None:
        type(self).built += 1
        super().__init__()


def _machine(section_type: type[TracedSection]) -> type[CountingMachine]:
    """The core machine over ``section_type``, with the fixed seed."""
    machine = type(
        f"CoreMachine_{section_type.__name__}",
        (CountingMachine,),
        {"section_type": section_type, "built": 0},
    )
    return hypothesis.seed(SEED)(machine)


def _failed_check(error: BaseException) -> str:
    """The innermost function of the machine's module on the failure's traceback: the
    invariant, rule or helper whose assertion fired."""
    names = []
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == stateful.__file__:
            names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert names, f"the failure did not come from the machine: {error!r}"
    return names[-1]


RecordProperty = Callable[[str, object], None]


@pytest.mark.parametrize("variant", list(VARIANTS), ids=lambda v: v.__name__)
def test_machine_catches_variant(
    variant: type[TracedSection], record_property: RecordProperty
) -> None:
    check, message = VARIANTS[variant]
    machine = _machine(variant)
    with pytest.raises(AssertionError) as caught:
        run_state_machine_as_test(machine, settings=SETTINGS)
    # Hypothesis runs the failing example once more to report it.
    record_property("examples", machine.built - 1)
    assert _failed_check(caught.value) == check, caught.value
    assert re.search(message, str(caught.value)), caught.value


def test_control_real_core_passes(record_property: RecordProperty) -> None:
    machine = _machine(TracedSection)
    run_state_machine_as_test(machine, settings=SETTINGS)
    record_property("examples", machine.built)
    assert machine.built >= MAX_EXAMPLES, "the control ran fewer examples than a variant may"
