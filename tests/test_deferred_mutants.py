"""Mutants of the deferred ``run()`` (:mod:`distlock._async.deferred`) and of the driver's
hooks that settle it, each killed by a scenario against a real Redis or by the parity
check: evidence that the tests of the deferred path can fail.

A mutant of ``deferred.py`` is one exact text replacement, loaded as a module of its own
beside the real one, whose ``run_deferred`` the Lock then calls (its handles are the
mutant's class, so a settle from the timer or a close runs the mutant's code).  A mutant
of a hook replaces the Runner's method with one that leaves the settle out.  Each
scenario passes on the real code (the ``real`` case) and must fail on its mutant."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from distlock import LockLeaseLostError
from distlock import _flows as flows
from distlock._async import deferred, primitive
from distlock._async.handles import Handle
from distlock._async.runner import Runner
from distlock._core.commands import Op
from distlock._protocol import encode
from distlock.asyncio import Lock, LockHandle
from distlock.errors import LossReason
from tests.redis_server import RedisServer

SOURCE = Path(deferred.__file__).with_suffix(".py")


async def _until(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll ``condition()`` (an event distlock offers no hook for) for up to ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        await asyncio.sleep(0.005)
    return False


def _where(client: aredis.Redis) -> dict[str, Any]:
    kwargs = client.connection_pool.connection_kwargs
    return {"host": kwargs["host"], "port": kwargs["port"]}


# -- scenarios: each returns on the real code, and fails (raises) on its mutant -------------


async def renewed(mod: ModuleType, client: aredis.Redis) -> None:
    """A body past its first heartbeat is settled by the timer, renewed, and ends held."""
    async with Lock(client, prefix="m-renew", ttl_ms=1500) as locks:

        async def body(handle: LockHandle) -> None:
            assert handle.held
            assert await _until(lambda: not handle._deferred, 5), "never settled"
            section = handle._section
            granted_at = section.confirmed_at
            assert await _until(lambda: section.confirmed_at > granted_at, 5), "never renewed"

        await locks.run("a", body)


async def unlocked(mod: ModuleType, client: aredis.Redis) -> None:
    """A release answered 0 is the loss, RELEASE_REJECTED."""
    async with Lock(client, prefix="m-unlock") as locks:

        async def body(handle: LockHandle) -> None:
            await locks.force_unlock("a")

        with pytest.raises(LockLeaseLostError) as lost:
            await locks.run("a", body)
        assert lost.value.reason is LossReason.RELEASE_REJECTED
        assert await client.exists("m-unlock:a") == 0


async def starved(mod: ModuleType, client: aredis.Redis) -> None:
    """A body that starves the loop past the deadline on our clock ends as
    DEADLINE_AT_COMPLETION, though Redis still keeps the key (the drift allowance) and
    would answer the release 1."""
    async with Lock(client, prefix="m-starve", ttl_ms=2000, drift_factor=0.45) as locks:

        async def body(handle: LockHandle) -> None:
            time.sleep(1.2)  # noqa: ASYNC251  # starves the loop: no timer runs before the exit
            with redis.Redis(**_where(client)) as plain:  # a read that does not yield
                assert plain.pttl("m-starve:a") > 0

        with pytest.raises(LockLeaseLostError) as lost:
            await locks.run("a", body)
        assert lost.value.reason is LossReason.DEADLINE_AT_COMPLETION


async def closed(mod: ModuleType, client: aredis.Redis) -> None:
    """Closing the Lock mid-body cancels the body; the run raises LOCK_CLOSED."""
    locks = Lock(client, prefix="m-close")
    entered = asyncio.Event()

    async def body(handle: LockHandle) -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(locks.run("a", body))
    await entered.wait()
    await locks.aclose()
    try:
        async with asyncio.timeout(5):
            with pytest.raises(LockLeaseLostError) as lost:
                await task
    finally:
        task.cancel()
    assert lost.value.reason is LossReason.LOCK_CLOSED
    assert await client.exists("m-close:a") == 0


async def disarmed(mod: ModuleType, client: aredis.Redis) -> None:
    """A cycle over leaves no timer armed for its handle."""
    async with Lock(client, prefix="m-disarm") as locks:
        handles: list[LockHandle] = []

        async def body(handle: LockHandle) -> None:
            handles.append(handle)

        await locks.run("a", body)
        assert handles[0]._armed_at is None


async def ended(mod: ModuleType, client: aredis.Redis) -> None:
    """After a cycle that ended well, its handle says what an ordinary one says."""
    async with Lock(client, prefix="m-ended") as locks:
        handles: list[LockHandle] = []

        async def body(handle: LockHandle) -> None:
            handles.append(handle)

        await locks.run("a", body)
        (handle,) = handles
        assert not handle.held and not handle.signal.aborted
        assert "phase=done" in repr(handle)
        assert await handle.release() is False


async def granted(mod: ModuleType, client: aredis.Redis) -> None:
    """The grant's decision and commands at their edges, against the section's."""
    lock = Lock(client, prefix="m-grant", ttl_ms=1000, drift_factor=0.0)
    config = lock._deferred_config
    assert config is not None
    for replied_at, fence, held in ((999.0, 1, True), (1000.0, 1, False), (0.0, 0, False)):
        assert (mod.granted_until(config, 0.0, replied_at, fence) is not None) is held
    handle = mod.DeferredHandle(lock, "m-grant:a", 7, config)
    section = lock._new_section("m-grant:a", 7, config, "c", False)
    acquire = section.acquire(0.0).send
    assert acquire is not None
    assert encode(acquire) == encode(mod._command(Op.ACQUIRE, handle))
    section.reply(1.0, acquire, 5)
    # A settle replays the grant with the instants the cycle kept: the lease counts from
    # the acquire's send.
    settled = mod.DeferredHandle(lock, "m-grant:a", 7, config)
    settled._sent_at, settled._fence, settled._replied_at = 0.0, 5, 1.0
    settled._deadline, settled._deferred = 1000.0, True
    settled._task, settled._cancelling = None, 0
    settled._settle()
    assert settled._section.deadline == section.deadline == 1000.0
    assert settled._section.wake_at == section.wake_at
    section.body_done(2.0)
    release = section.release(2.0).send
    assert release is not None
    assert encode(release) == encode(mod._command(Op.RELEASE, handle))


Scenario = Callable[[ModuleType, aredis.Redis], Awaitable[None]]
#: How a scenario fails: an assertion (pytest.raises's own included), the loss or a hang.
KILLED = (AssertionError, pytest.fail.Exception, LockLeaseLostError, TimeoutError)


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    old: str
    new: str
    scenario: Scenario


MUTANTS = (
    Mutant("D1", "the renewal timer is never armed",
           "lock._timers.arm(renewal_wake(sent_at, every, deadline), handle)", "pass", renewed),
    Mutant("D2", "a reply after the lease lapsed is taken as a grant",
           "fence > 0 and not lapsed(replied_at, deadline)", "fence > 0", granted),
    Mutant("D3", "a refusal is taken as a grant",
           "return deadline if fence > 0 and", "return deadline if fence >= 0 and", granted),
    Mutant("D4", "the exit does not look at the deadline",
           "if lapsed(done_at, handle._deadline):", "if False:", starved),
    Mutant("D5", "a release answered 0 passes for one answered 1",
           "if reply != 1:", "if reply == 2:", unlocked),
    Mutant("D6", "a settled cycle's loss cancels no body",
           "            self._deferred = False\n            self._hold()",
           "            self._deferred = False", closed),
    Mutant("D7", "the exit leaves the renewal timer armed",
           "lock._timers.disarm(handle)", "pass", disarmed),
    Mutant("D8", "the release is sent as the acquire",
           "    return _command(Op.RELEASE, handle)", "    return _command(Op.ACQUIRE, handle)",
           unlocked),
    Mutant("D10", "a cycle that ended well settles as one still held",
           "            section.release_reply(self._released_at, True)\n",
           "", ended),
    Mutant("D9", "the settle replays the grant at the reply's instant",
           "command = section.acquire(self._sent_at).send",
           "command = section.acquire(self._replied_at).send", granted),
)


def _tick_without_settle(self: Runner, handle: Handle) -> None:
    flows.tick(self, handle)


async def _close_without_settle(self: Runner, handle: Handle) -> None:
    with contextlib.suppress(Exception):
        await self._run(flows.close(self, handle))


#: The driver's hooks, each with its settle left out: (name, what, attribute, stand-in,
#: scenario).
HOOKS = (
    ("H1", "a timer's tick does not settle the cycle", "_tick", _tick_without_settle, renewed),
    ("H2", "a close does not settle the cycle", "_close_section", _close_without_settle, closed),
)


def _mutated(mutant: Mutant) -> ModuleType:
    text = SOURCE.read_text()
    assert text.count(mutant.old) == 1, f"{mutant.name}: its text is not in deferred.py once"
    name = f"distlock._async._deferred_{mutant.name}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "distlock._async"
    sys.modules[name] = module
    exec(compile(text.replace(mutant.old, mutant.new), str(SOURCE), "exec"), module.__dict__)
    return module


@pytest.fixture
def client(redis_server: RedisServer) -> str:
    return f"redis://{redis_server.host}:{redis_server.port}/0"


def _play(scenario: Scenario, mod: ModuleType, url: str) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with asyncio.timeout(30):
                await scenario(mod, client)
        finally:
            await client.aclose()

    asyncio.run(main())


SCENARIOS = sorted({m.scenario for m in MUTANTS} | {h[4] for h in HOOKS}, key=lambda s: s.__name__)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_each_scenario_passes_on_the_real_code(scenario: Scenario, client: str) -> None:
    _play(scenario, deferred, client)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_of_the_deferred_run_is_killed(
    mutant: Mutant, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _mutated(mutant)
    monkeypatch.setattr(primitive, "run_deferred", mod.run_deferred)
    try:
        with pytest.raises(KILLED):
            _play(mutant.scenario, mod, client)
    finally:
        sys.modules.pop(mod.__name__, None)


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h[0])
def test_each_hook_without_its_settle_is_killed(
    hook: tuple[str, str, str, Any, Scenario], client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, attribute, stand_in, scenario = hook
    monkeypatch.setattr(Runner, attribute, stand_in)
    with pytest.raises(KILLED):
        _play(scenario, deferred, client)
