"""The reentrant lock's pure machine: guards and effects of the six per-holder actions."""

from __future__ import annotations

import pytest

from distlock._core.actions import (
    CLIENT_ACTIONS,
    ENVIRONMENT_ACTIONS,
    REENTRANT_ACTIONS,
    method_name,
)
from distlock._core.commands import Op
from distlock._core.reentrant import ReentrantSection
from distlock._core.section import Phase, Section, SectionConfig
from distlock._protocol import R_SCRIPTS, encode
from distlock.errors import LossReason, ProtocolError, UsageError
from distlock.events import Transition

TTL = 10_000


def held(watch: bool = True, record: bool = True) -> ReentrantSection:
    """A section granted at t=0 (renewal every 2.5 s when watched)."""
    config = SectionConfig(ttl_ms=TTL, renew_every_ms=TTL // 4 if watch else None, watch=watch)
    section = ReentrantSection("k", "tok", config, record=record)
    command = section.acquire(0.0).send
    assert command is not None and command.reentrant and command.op is Op.ACQUIRE
    section.acquire_reply(1.0, 7)
    assert section.phase is Phase.HELD and section.depth == 1
    return section


def actions(section: ReentrantSection) -> list[str]:
    return [e.action for e in section.take_events() if isinstance(e, Transition)]


def test_the_vocabulary_is_apart_from_the_lock_s() -> None:
    assert not set(REENTRANT_ACTIONS) & (set(CLIENT_ACTIONS) | set(ENVIRONMENT_ACTIONS))
    for action in REENTRANT_ACTIONS:
        assert callable(getattr(ReentrantSection, method_name(action)))
        assert not hasattr(Section, method_name(action))


def test_every_command_is_carried_by_a_reentrant_script() -> None:
    section = held()
    enter = section.reenter(2.0).send
    assert enter is not None
    script, keys, args = encode(enter)
    assert script is R_SCRIPTS[Op.REENTER] and keys == ["k"] and args == ["tok", TTL, 2]
    section.reenter_reply(3.0, True)
    leave = section.leave(4.0).send
    assert leave is not None
    script, keys, args = encode(leave)
    assert script is R_SCRIPTS[Op.LEAVE] and args == ["tok", 1]
    release = section.release(5.0).send
    assert release is not None
    script, keys, _ = encode(release)
    assert script is R_SCRIPTS[Op.RELEASE] and len(keys) == 5


def test_reenter_reply_one_deepens_and_refreshes_the_lease() -> None:
    section = held()
    before = section.deadline
    assert section.reenter(5_000.0).send is not None
    assert section.depth == 1 and not section.depth_mirrored
    section.reenter_reply(5_010.0, True)
    assert section.depth == 2 and section.depth_mirrored
    assert section.deadline == pytest.approx(5_000.0 + TTL * 0.99)
    assert section.deadline > before
    assert actions(section)[-2:] == ["Reenter", "ReenterReply"]


def test_reenter_reply_zero_is_the_loss_without_cancelling() -> None:
    section = held()
    section.reenter(2.0)
    step = section.reenter_reply(3.0, False)
    assert step.loss is not None and step.loss.reason is LossReason.REENTER_REJECTED
    assert not step.cancel_body
    assert section.depth == 1 and section.lost is step.loss


def test_reenter_fail_keeps_the_depth_and_is_not_a_loss() -> None:
    section = held()
    section.reenter(2.0)
    section.reenter_fail(3.0)
    assert section.depth == 1 and section.lost is None
    assert not section.depth_mirrored  # Redis may hold 2 until the next depth write
    section.reenter(4.0)
    section.reenter_reply(5.0, True)
    assert section.depth == 2 and section.depth_mirrored


def test_a_reply_after_a_known_loss_opens_no_level() -> None:
    section = held()
    section.reenter(2.0)
    renew = section.renew_send(2_600.0).send
    assert renew is not None
    section.renew_reply(2_601.0, False)
    assert section.lost is not None
    section.reenter_reply(2_602.0, True)
    assert section.depth == 1 and not section.depth_mirrored


def test_leave_lowers_the_depth_at_once() -> None:
    section = held()
    section.reenter(2.0)
    section.reenter_reply(3.0, True)
    section.reenter(4.0)
    section.reenter_reply(5.0, True)
    assert section.depth == 3
    command = section.leave(6.0).send
    assert command is not None and command.depth == 2 and section.depth == 2
    assert section.leave_reply(7.0, True).loss is None
    section.leave(8.0)
    section.leave_fail(9.0)
    assert section.depth == 1 and section.lost is None and not section.depth_mirrored


def test_leave_reply_zero_is_the_loss() -> None:
    section = held()
    section.reenter(2.0)
    section.reenter_reply(3.0, True)
    section.leave(4.0)
    step = section.leave_reply(5.0, False)
    assert step.loss is not None and step.loss.reason is LossReason.LEAVE_REJECTED
    assert not step.cancel_body


def test_guards() -> None:
    section = held()
    with pytest.raises(ProtocolError):
        section.leave(2.0)  # the outermost level is not an inner exit
    with pytest.raises(ProtocolError):
        section.reenter_reply(2.0, True)
    with pytest.raises(ProtocolError):
        section.leave_reply(2.0, True)
    section.reenter(2.0)
    with pytest.raises(ProtocolError):
        section.reenter(2.5)  # one depth write at a time
    with pytest.raises(ProtocolError):
        section.leave_fail(3.0)
    section.reenter_reply(3.0, True)
    with pytest.raises(UsageError):
        section.check_outermost_exit()
    section.leave(4.0)
    section.leave_reply(5.0, True)
    section.check_outermost_exit()


def test_after_a_known_loss_a_reentry_sends_nothing_and_an_inner_exit_still_leaves() -> None:
    section = held()
    section.reenter(2.0)
    section.reenter_reply(3.0, True)
    section.renew_send(2_600.0)
    section.renew_reply(2_601.0, False)
    actions(section)
    assert section.reenter(2_700.0).send is None
    assert actions(section) == []
    # The spec's Leave fires while the outermost level is held, lost or not.
    assert section.leave(2_800.0).send is not None
    section.leave_reply(2_801.0, False)
    assert section.depth == 1
    assert actions(section) == ["Leave", "LeaveReply"]


def test_manual_outermost_level() -> None:
    section = held(watch=False)
    section.reenter(2.0)
    section.reenter_reply(3.0, True)
    assert section.depth == 2 and section.wake_at is None
    section.leave(4.0)
    section.leave_reply(5.0, True)
    assert section.release(6.0).send is not None


def test_only_the_innermost_open_level_may_exit() -> None:
    section = held()
    for t in (2.0, 4.0):
        section.reenter(t)
        section.reenter_reply(t + 1, True)
    assert section.depth == 3
    actions(section)
    with pytest.raises(UsageError, match=r"level 2 of 'k' cannot exit while level 3 is open"):
        section.check_inner_exit(2)
    # Refused before anything happens: no action, no depth write, the depth unchanged.
    assert actions(section) == [] and section.depth == 3 and section.depth_op is None
    section.check_inner_exit(3)
    section.leave(6.0)
    section.leave_reply(7.0, True)
    with pytest.raises(UsageError, match="exit the innermost level first"):
        section.check_inner_exit(3)  # a level already left is no longer the innermost
    section.check_inner_exit(2)


def test_the_outermost_level_ends_once_the_section_is_no_longer_held() -> None:
    section = held(watch=False)
    section.reenter(2.0)
    section.reenter_reply(3.0, True)
    with pytest.raises(UsageError, match=r"1 inner level\(s\) of 'k' still open \(level 2\)"):
        section.check_outermost_exit()
    assert not section.outermost_ended  # refused: the level stays open, the key held
    section.leave(4.0)
    section.leave_reply(5.0, True)
    section.check_outermost_exit()
    section.release(6.0)
    section.release_fail(7.0)  # no answer: release() sends again, but the level is over
    assert section.phase is Phase.RELEASE_UNKNOWN and section.outermost_ended
    section.release(8.0)
    section.release_reply(9.0, True)
    assert section.outermost_ended


def test_a_loss_does_not_end_the_outermost_level_before_its_release() -> None:
    section = held()
    section.renew_send(2_600.0)
    section.renew_reply(2_601.0, False)
    # Lost, but still held: the outermost level closes with its release, as a lock's does.
    assert section.lost is not None and not section.outermost_ended
