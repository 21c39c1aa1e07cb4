"""Trace validation of the deferred ``run()`` (:mod:`distlock._async.deferred`).

A deferred cycle records no transitions (a ``trace=`` turns deferral off), so its trace
is made here from what went over the wire: each script sent, with the client's clock
before it left and after its reply came, replayed on a recording section in the order
the section's own flow takes them.  TLC then checks those transitions against
``spec/DistLock.tla``, beside those of an ordinary traced Lock on the same keys, and
the replayed section's verdict must be the one ``run()`` gave.  A forged variant of the
same trace is rejected, so the check can fail."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import distlock.asyncio
from distlock import LockLeaseLostError, LockNotAcquiredError
from distlock._clock import now_ms
from distlock._core.commands import Command, Op
from distlock._core.section import Outcome, Phase, Section
from distlock.events import Transition
from distlock.tools import tracecheck
from tests.redis_server import RedisServer

needs_tlc = pytest.mark.skipif(
    not (tracecheck.spec_dir() / "DistLock.tla").is_file() or shutil.which("java") is None,
    reason="needs spec/DistLock.tla and java",
)


@dataclass
class Sent:
    command: Command
    sent_at: float
    reply: int | BaseException
    replied_at: float


@dataclass
class Wire:
    """Stands in for a Lock's ``_call``: sends through it, and keeps each script sent with
    its instants and its reply."""

    call: Callable[[Command], Awaitable[int]]
    sent: list[Sent] = field(default_factory=list)

    async def __call__(self, command: Command) -> int:
        sent_at = now_ms()
        try:
            reply = await self.call(command)
        except BaseException as exc:
            self.sent.append(Sent(command, sent_at, exc, now_ms()))
            raise
        self.sent.append(Sent(command, sent_at, reply, now_ms()))
        return reply


def _replayed(cycle: list[Sent], config: Any, client: str) -> Section:
    """The cycle's sends replayed on a recording section, as its flow would take them."""
    acquire = cycle[0]
    assert acquire.command.op is Op.ACQUIRE and isinstance(acquire.reply, int)
    section = Section(acquire.command.key, acquire.command.token, config, client=client,
                      record=True)
    command = section.acquire(acquire.sent_at).send
    assert command is not None
    section.reply(acquire.replied_at, command, acquire.reply)
    if section.phase is not Phase.HELD:
        assert len(cycle) == 1
        return section
    (release,) = cycle[1:]
    assert release.command.op is Op.RELEASE and isinstance(release.reply, int)
    section.body_done(release.sent_at)
    assert section.release(release.sent_at).send is not None
    section.release_reply(release.replied_at, release.reply == 1)
    return section


def _transitions(section: Section) -> list[dict[str, Any]]:
    return [e.as_dict() for e in section.take_events() if isinstance(e, Transition)]


async def _cycles(url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Deferred cycles beside a traced Lock: plain ones, one whose key is deleted under it,
    one refused while the traced Lock holds the key.  Returns every transition, and the
    deleted cycle's alone."""
    traced: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    deleted: list[dict[str, Any]] = []
    async with (
        distlock.asyncio.Lock(url, prefix="trd", ttl_ms=400) as locks,
        distlock.asyncio.Lock(url, prefix="trd", ttl_ms=400, trace=traced.append) as other,
    ):
        client = await locks.client()
        recorder = Wire(locks._call)
        locks._call = recorder  # type: ignore[method-assign]
        config = locks._deferred_config
        assert config is not None
        outcomes: list[Outcome] = []

        async def body(handle: distlock.asyncio.LockHandle) -> int:
            assert handle._deferred
            return handle.fence

        for _ in range(3):
            await locks.run("a", body)
            outcomes.append(Outcome.OK)

        async def deleting(handle: distlock.asyncio.LockHandle) -> None:
            await client.delete(handle.key)

        with pytest.raises(LockLeaseLostError):
            await locks.run("b", deleting)
        outcomes.append(Outcome.LOST)

        holder = await other.acquire("a")
        assert holder is not None
        with pytest.raises(LockNotAcquiredError):
            await locks.run("a", body)
        outcomes.append(Outcome.NOT_ACQUIRED)
        await holder.release()
    cycles: list[list[Sent]] = []
    for sent in recorder.sent:
        if sent.command.op is Op.ACQUIRE:
            cycles.append([])
        cycles[-1].append(sent)
    assert len(cycles) == len(outcomes)
    for n, (cycle, outcome) in enumerate(zip(cycles, outcomes, strict=True)):
        section = _replayed(cycle, config, f"deferred.{n}")
        assert section.outcome is outcome  # run()'s verdict is the section's
        transitions = _transitions(section)
        events += transitions
        if outcome is Outcome.LOST:
            deleted = transitions
    events += traced
    events.sort(key=lambda e: e["t"])
    return events, deleted


@needs_tlc
@pytest.mark.tlc
def test_deferred_cycles_replayed_are_behaviours_of_the_spec(redis_server: RedisServer) -> None:
    events, deleted = asyncio.run(_cycles(redis_server.url))
    verdicts = tracecheck.check(events)
    assert len(verdicts) == 2  # the keys a and b
    for verdict in verdicts:
        assert verdict.accepted, verdict.describe() + "\n" + verdict.output[-2000:]

    # Forged: the deleted key's release answered before it was sent.
    actions = [e["action"] for e in deleted]
    i = actions.index("Release")
    reordered = [*deleted[:i], deleted[i + 1], deleted[i], *deleted[i + 2 :]]
    (verdict,) = tracecheck.check(reordered)
    assert not verdict.accepted
    assert verdict.first_unexplained == i
    assert verdict.event is not None and verdict.event["action"] == "ReleaseReply"
