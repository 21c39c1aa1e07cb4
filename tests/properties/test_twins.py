"""The sync and the asyncio drivers are twins: one scenario, one sequence of core transitions.

Each scenario is written once per driver with the same script, and is made deterministic
with events (a gate that holds extend calls, the trace itself), never with sleeps: a
renewal count is fixed by letting exactly N extend calls through the gate, and the test
waits for a late reply by waiting for its trace event.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

import pytest
import redis

import distlock
import distlock.asyncio
from distlock._protocol import fence_key
from tests.properties.gates import AsyncGatedRedis, Gate, GatedRedis
from tests.redis_server import RedisServer

WAIT_S: Final = 30.0


class Collector:
    """A trace callable that lets a test wait for an event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def count(self, action: str) -> int:
        with self._cond:
            return sum(1 for e in self.events if e["action"] == action)

    def wait_for(self, action: str, n: int = 1) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.count_locked(action) >= n, WAIT_S), (
                f"no {action} #{n} in {self.actions()}"
            )

    def count_locked(self, action: str) -> int:
        return sum(1 for e in self.events if e["action"] == action)

    def actions(self) -> list[str]:
        return [e["action"] for e in self.events]


@dataclass
class World:
    server: RedisServer
    admin: redis.Redis
    prefix: str
    gate: Gate
    trace: Collector

    def key(self, id: str) -> str:
        return f"{self.prefix}:{id}"

    def sync_lock(self, **kw: Any) -> distlock.Lock:
        client = GatedRedis(self.gate, host=self.server.host, port=self.server.port)
        return distlock.Lock(client, prefix=self.prefix, trace=self.trace, **kw)

    def aio_lock(self, **kw: Any) -> distlock.asyncio.Lock:
        client = AsyncGatedRedis(self.gate, host=self.server.host, port=self.server.port)
        return distlock.asyncio.Lock(client, prefix=self.prefix, trace=self.trace, **kw)


SyncScenario = Callable[[World], str]
AsyncScenario = Callable[[World], Coroutine[Any, Any, str]]

# -- scenarios: each returns what the caller saw ---------------------------------------------


def denied_sync(w: World) -> str:
    w.admin.set(w.key("x"), "someone-else", px=60_000)
    with w.sync_lock(ttl_ms=1000) as locks:
        try:
            with locks.hold("x", retries=2, retry_delay_ms=5):
                return "entered"
        except distlock.LockNotAcquiredError:
            return "not_acquired"


async def denied_aio(w: World) -> str:
    w.admin.set(w.key("x"), "someone-else", px=60_000)
    async with w.aio_lock(ttl_ms=1000) as locks:
        try:
            async with locks.hold("x", retries=2, retry_delay_ms=5):
                return "entered"
        except distlock.LockNotAcquiredError:
            return "not_acquired"


def manual_sync(w: World) -> str:
    with w.sync_lock(ttl_ms=1000) as locks:
        handle = locks.acquire("x")
        assert handle is not None
        results = [handle.extend(), handle.extend(2000), handle.release(), handle.release()]
        return repr(results)


async def manual_aio(w: World) -> str:
    async with w.aio_lock(ttl_ms=1000) as locks:
        handle = await locks.acquire("x")
        assert handle is not None
        results = [
            await handle.extend(),
            await handle.extend(2000),
            await handle.release(),
            await handle.release(),
        ]
        return repr(results)


def manual_lost_sync(w: World) -> str:
    with w.sync_lock(ttl_ms=1000) as locks:
        handle = locks.acquire("x")
        assert handle is not None
        w.admin.delete(w.key("x"))
        return repr([handle.extend(), handle.signal.aborted, handle.release()])


async def manual_lost_aio(w: World) -> str:
    async with w.aio_lock(ttl_ms=1000) as locks:
        handle = await locks.acquire("x")
        assert handle is not None
        w.admin.delete(w.key("x"))
        return repr([await handle.extend(), handle.signal.aborted, await handle.release()])


def _issued(w: World, id: str, fence: int) -> str:
    """What a body saw of its fence, the same in both drivers: the one its slot's counter
    kept (the value itself is a floor on Redis's clock, never the same twice)."""
    assert w.admin.get(fence_key(w.key(id))) == str(fence).encode()
    return "fence issued"


def quick_body_sync(w: World) -> str:
    with w.sync_lock(ttl_ms=1000, heartbeat_ms=False) as locks:
        return _issued(w, "x", locks.run("x", lambda h: h.fence))


async def quick_body_aio(w: World) -> str:
    async def body(h: distlock.asyncio.LockHandle) -> int:
        return h.fence

    async with w.aio_lock(ttl_ms=1000, heartbeat_ms=False) as locks:
        return _issued(w, "x", await locks.run("x", body))


def renewed_sync(w: World) -> str:
    """Two renewals answered, the third held at the gate while the body ends; its reply
    (0: the key is released by then) arrives after the release."""
    w.gate.allow(2)
    with w.sync_lock(ttl_ms=2000, heartbeat_ms=40) as locks:
        with locks.hold("x"):
            assert w.gate.wait_blocked(1, WAIT_S)
        w.gate.open()
        w.trace.wait_for("RenewReply", 3)
    return "ok"


async def renewed_aio(w: World) -> str:
    w.gate.allow(2)
    async with w.aio_lock(ttl_ms=2000, heartbeat_ms=40) as locks:
        async with locks.hold("x"):
            assert await asyncio.to_thread(w.gate.wait_blocked, 1, WAIT_S)
        w.gate.open()
        await asyncio.to_thread(w.trace.wait_for, "RenewReply", 3)
    return "ok"


def key_deleted_sync(w: World) -> str:
    """The key vanishes; the first renewal (held until then) finds it gone."""
    w.gate.close()
    with w.sync_lock(ttl_ms=2000, heartbeat_ms=40) as locks:
        try:
            with locks.hold("x") as handle:
                w.admin.delete(w.key("x"))
                w.gate.open()
                assert handle.signal.wait(WAIT_S)
        except distlock.LockLeaseLostError as exc:
            return exc.reason.name
    return "ok"


async def key_deleted_aio(w: World) -> str:
    w.gate.close()
    async with w.aio_lock(ttl_ms=2000, heartbeat_ms=40) as locks:
        try:
            async with locks.hold("x") as handle:
                w.admin.delete(w.key("x"))
                w.gate.open()
                await asyncio.wait_for(handle.signal.wait(), WAIT_S)
        except distlock.LockLeaseLostError as exc:
            return exc.reason.name
    return "ok"


def lease_timeout_sync(w: World) -> str:
    """No heartbeat: the watch fires at the deadline and the body learns of the loss."""
    with w.sync_lock(ttl_ms=150, heartbeat_ms=False) as locks:
        try:
            with locks.hold("x") as handle:
                assert handle.signal.wait(WAIT_S)
        except distlock.LockLeaseLostError as exc:
            return exc.reason.name
    return "ok"


async def lease_timeout_aio(w: World) -> str:
    async with w.aio_lock(ttl_ms=150, heartbeat_ms=False) as locks:
        try:
            async with locks.hold("x") as handle:
                await asyncio.wait_for(handle.signal.wait(), WAIT_S)
        except distlock.LockLeaseLostError as exc:
            return exc.reason.name
    return "ok"


def hung_renewal_sync(w: World) -> str:
    """The first renewal hangs: the deadline passes with it still in flight."""
    w.gate.close()
    with w.sync_lock(ttl_ms=200, heartbeat_ms=20) as locks:
        try:
            with locks.hold("x") as handle:
                assert handle.signal.wait(WAIT_S)
        except distlock.LockLeaseLostError as exc:
            outcome = exc.reason.name
        else:
            outcome = "ok"
        w.gate.open()
        w.trace.wait_for("RenewReply")
    return outcome


async def hung_renewal_aio(w: World) -> str:
    w.gate.close()
    async with w.aio_lock(ttl_ms=200, heartbeat_ms=20, cancel_on_loss=False) as locks:
        try:
            async with locks.hold("x") as handle:
                await asyncio.wait_for(handle.signal.wait(), WAIT_S)
        except distlock.LockLeaseLostError as exc:
            outcome = exc.reason.name
        else:
            outcome = "ok"
        w.gate.open()
        await asyncio.to_thread(w.trace.wait_for, "RenewReply")
    return outcome


SCENARIOS: Final[dict[str, tuple[SyncScenario, AsyncScenario]]] = {
    "denied": (denied_sync, denied_aio),
    "manual": (manual_sync, manual_aio),
    "manual_lost": (manual_lost_sync, manual_lost_aio),
    "quick_body": (quick_body_sync, quick_body_aio),
    "renewed": (renewed_sync, renewed_aio),
    "key_deleted": (key_deleted_sync, key_deleted_aio),
    "lease_timeout": (lease_timeout_sync, lease_timeout_aio),
    "hung_renewal": (hung_renewal_sync, hung_renewal_aio),
}

_ACQUIRED: Final = ("Acquire", "AcquireReply")
_RELEASED: Final = ("Release", "ReleaseReply")
_RENEWAL: Final = ("RenewSend", "RenewReply")

#: What each scenario must produce (both drivers): the transitions of its one section.
EXPECTED: Final[dict[str, list[str]]] = {
    "denied": [*_ACQUIRED, *_ACQUIRED, *_ACQUIRED],
    "manual": [*_ACQUIRED, "Extend", "ExtendReply", "Extend", "ExtendReply", *_RELEASED],
    "manual_lost": [*_ACQUIRED, "Extend", "ExtendReply", *_RELEASED],
    "quick_body": [*_ACQUIRED, "BodyDone", *_RELEASED],
    # the third renewal's reply comes after the release
    "renewed": [
        *_ACQUIRED,
        *_RENEWAL,
        *_RENEWAL,
        "RenewSend",
        "BodyDone",
        *_RELEASED,
        "RenewReply",
    ],
    "key_deleted": [*_ACQUIRED, *_RENEWAL, "BodyDone", *_RELEASED],
    "lease_timeout": [*_ACQUIRED, "LeaseTimeout", "BodyDone", *_RELEASED],
    "hung_renewal": [*_ACQUIRED, "RenewSend", "LeaseTimeout", "BodyDone", *_RELEASED, "RenewReply"],
}


def _world(server: RedisServer, admin: redis.Redis, name: str) -> World:
    return World(server, admin, f"twins-{name}", Gate(), Collector())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_drivers_take_the_same_transitions(
    name: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    run_sync, run_aio = SCENARIOS[name]
    sync_world = _world(redis_server, r, f"{name}-sync")
    sync_seen = run_sync(sync_world)
    aio_world = _world(redis_server, r, f"{name}-aio")
    aio_seen = asyncio.run(run_aio(aio_world))

    sync_actions = sync_world.trace.actions()
    aio_actions = aio_world.trace.actions()
    assert sync_actions == aio_actions, f"sync {sync_actions}\naio  {aio_actions}"
    assert sync_seen == aio_seen
    assert sync_actions == EXPECTED[name]
    # One section per scenario, and the same final verdict in both.
    assert len({e["client"] for e in sync_world.trace.events}) == 1
    assert sync_world.trace.events[-1]["outcome"] == aio_world.trace.events[-1]["outcome"]
