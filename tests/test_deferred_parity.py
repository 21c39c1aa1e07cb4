"""The deferred ``run()`` (:mod:`distlock._async.deferred`) held to the core's decisions,
transition for transition: for any config, instants and replies, what it decides without
a section is what a section decides with them, and the commands it sends are the ones the
section's Acquire and Release send, byte for byte as encoded."""

from __future__ import annotations

import redis.asyncio as aredis
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distlock._async.deferred import DeferredHandle, _command, deferrable, granted_until
from distlock._core.commands import Op
from distlock._core.lease import lease_until, renewal_wake
from distlock._core.section import Outcome, Phase, Section
from distlock._protocol import encode
from distlock.asyncio import Lock

TOKEN = 0x0123456789ABCDEF0123456789ABCDEF


def _lock(ttl_ms: int, drift: float) -> Lock:
    # A client that is never connected: only the config and the section's birth are used.
    return Lock(aredis.Redis(), prefix="p", ttl_ms=ttl_ms, drift_factor=drift)


def _handle(lock: Lock) -> DeferredHandle:
    config = lock._deferred_config
    assert config is not None
    return DeferredHandle(lock, lock._key("id"), TOKEN, config)


def _section(handle: DeferredHandle) -> Section:
    return handle._lock._new_section(handle._key, TOKEN, handle._config, "c", False)


ttls = st.integers(min_value=30, max_value=120_000)
drifts = st.sampled_from([0.0, 0.01, 0.05, 0.2])
instants = st.floats(min_value=0.0, max_value=1e9, allow_nan=False)
delays = st.floats(min_value=0.0, max_value=200_000.0, allow_nan=False)
fences = st.integers(min_value=-3_600_000, max_value=2**53)


@settings(max_examples=400, deadline=None)
@given(ttls, drifts, instants, delays, fences)
@example(1000, 0.0, 0.0, 1000.0, 1)  # the reply at the deadline: too late
@example(1000, 0.0, 0.0, 999.0, 1)
def test_the_grant_is_deferred_exactly_when_the_section_would_hold(
    ttl: int, drift: float, sent_at: float, delay: float, fence: int
) -> None:
    lock = _lock(ttl, drift)
    handle = _handle(lock)
    config = handle._config
    replied_at = sent_at + delay
    deadline = granted_until(config, sent_at, replied_at, fence)
    section = _section(handle)
    command = section.acquire(sent_at).send
    assert command is not None
    assert encode(command) == encode(_command(Op.ACQUIRE, handle))
    step = section.reply(replied_at, command, fence)
    held = section.phase is Phase.HELD and step.loss is None
    assert (deadline is not None) == held
    if deadline is not None:
        assert section.deadline == deadline
        assert section.fence == fence
        every = config.renew_every_ms
        assert every is not None
        assert section.wake_at == renewal_wake(sent_at, every, deadline)


@settings(max_examples=300, deadline=None)
@given(ttls, drifts, instants, delays, delays, st.integers(min_value=-1, max_value=2))
@example(1000, 0.0, 0.0, 1000.0, 0.0, 1)  # the body done at the deadline
def test_the_release_is_done_without_the_section_exactly_when_it_would_end_ok(
    ttl: int, drift: float, sent_at: float, held_for: float, delay: float, reply: int
) -> None:
    lock = _lock(ttl, drift)
    handle = _handle(lock)
    config = handle._config
    deadline = lease_until(sent_at, config.ttl_ms, config.drift_factor)
    replied_at = sent_at  # granted at once
    done_at = replied_at + held_for
    section = _section(handle)
    command = section.acquire(sent_at).send
    assert command is not None
    section.reply(replied_at, command, 7)
    assert section.phase is Phase.HELD
    # run()'s exit: past the deadline the section decides; else a release, OK on 1.
    body_done = section.body_done(done_at)
    if done_at >= deadline:
        assert body_done.loss is not None
        return
    assert body_done.loss is None
    release = section.release(done_at).send
    assert release is not None
    assert encode(release) == encode(_command(Op.RELEASE, handle))
    section.release_reply(done_at + delay, reply == 1)
    assert (section.outcome is Outcome.OK) == (reply == 1)


@settings(max_examples=200, deadline=None)
@given(ttls, drifts, instants, st.floats(min_value=0.0, max_value=0.99), fences)
def test_settling_replays_the_grant_the_cycle_had(
    ttl: int, drift: float, sent_at: float, part: float, fence: int
) -> None:
    lock = _lock(ttl, drift)
    handle = _handle(lock)
    config = handle._config
    deadline = lease_until(sent_at, config.ttl_ms, config.drift_factor)
    replied_at = sent_at + part * (deadline - sent_at)
    if fence <= 0 or replied_at >= deadline:
        return
    handle._sent_at, handle._fence, handle._replied_at = sent_at, fence, replied_at
    handle._deadline, handle._deferred = deadline, True
    handle._task, handle._cancelling = None, 0
    assert handle.held and handle.fence == fence
    handle._settle()
    section = handle._section
    assert not handle._deferred
    assert section.phase is Phase.HELD and section.lost is None
    assert section.fence == fence and section.attempts == 1
    assert section.token == handle.token
    assert section.deadline == deadline
    every = config.renew_every_ms
    assert every is not None
    assert section.wake_at == renewal_wake(sent_at, every, deadline)
    assert handle.held and handle.fence == fence


def test_only_a_plain_lock_with_its_defaults_defers() -> None:
    client = aredis.Redis()
    assert deferrable(Lock(client)) is not None
    assert deferrable(Lock(client, trace=lambda event: None)) is None
    assert deferrable(Lock(client, observers=[lambda event: None])) is None
    assert deferrable(Lock(client, on_renew_error=lambda error: None)) is None
    assert deferrable(Lock(client, wait_ms=100)) is None
    assert deferrable(Lock(client, replicas=1)) is None
