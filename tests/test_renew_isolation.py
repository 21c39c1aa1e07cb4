"""One hung renewal must not hold up the renewals of other locks on the same ``Lock``.

Renewal round trips leave the timer thread so that a connection that never answers cannot
delay anything else; but if they then queue for a small, fixed set of workers, a handful
of hung renewals occupy every worker and a healthy lock's renewal waits behind them until
its lease runs out.  Renewals due in one tick go out in one pipeline: five locks' renewals
are held at a gate here (their pipeline hangs) and a sixth lock's renewal, due in a later
tick, must still be sent and answered.

Nothing depends on timing: the TTL is a minute, so no lease can run out during the test,
and the healthy renewal is awaited as an event (its ``RenewReply``), with a bound only so
that a failure is a failure and not a hang.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from distlock import Lock, LockLeaseLostError
from distlock import _protocol as scripts
from tests.properties.gates import Gate, extends_queued
from tests.redis_server import RedisServer

WAIT = 10.0  # the healthy renewal is due 100 ms after its acquire; this only bounds a failure
TTL_MS = 60_000
HEARTBEAT_MS = 100
PREFIX = "iso"
HUNG = [f"hung{i}" for i in range(5)]


class KeyGatedPipeline(redis.client.Pipeline):
    gates: dict[str, Gate]

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        for key in extends_queued(self):
            gate = self.gates.get(key)
            if gate is not None:
                gate.passage()
        return super().execute(raise_on_error)


class KeyGatedRedis(redis.Redis):
    """A client whose EXTEND calls (renewals) on a key with a gate in ``gates`` wait there,
    sent alone or pipelined (a pipeline waits at the gate of each gated key it carries)."""

    def __init__(self, gates: dict[str, Gate], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gates = gates

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> KeyGatedPipeline:
        pipe = KeyGatedPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.gates = self.gates
        return pipe

    def _gate(self, args: tuple[Any, ...]) -> None:
        # EVALSHA / EVAL arguments: script, numkeys, KEYS..., ARGV...
        if len(args) >= 3 and args[0] in (scripts.EXTEND.sha, scripts.EXTEND.source):
            gate = self.gates.get(str(args[2]))
            if gate is not None:
                gate.passage()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[0] in ("EVALSHA", "EVAL"):
            self._gate(args[1:])
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


class Renewals:
    """A ``trace=`` callable: which key each section is, and the renewals sent and answered."""

    def __init__(self, watched: str) -> None:
        self.watched = watched
        self._clients: dict[str, str] = {}
        self._cond = threading.Condition()
        self.sent: dict[str, int] = {}
        self.answered: dict[str, int] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        with self._cond:
            if event["action"] == "Acquire":
                self._clients[event["client"]] = event["key"]
                return
            key = self._clients.get(event["client"], "?")
            if event["action"] == "RenewSend":
                self.sent[key] = self.sent.get(key, 0) + 1
            elif event["action"] == "RenewReply" and event["ok"]:
                self.answered[key] = self.answered.get(key, 0) + 1
                self._cond.notify_all()

    def wait_answered(self, key: str, timeout: float) -> bool:
        return self.wait_more(key, 0, timeout)

    def wait_more(self, key: str, than: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.answered.get(key, 0) > than, timeout)


@pytest.fixture
def gates() -> Iterator[dict[str, Gate]]:
    gates = {f"{PREFIX}:{id}": Gate() for id in HUNG}
    for gate in gates.values():
        gate.close()
    yield gates
    for gate in gates.values():  # whatever happened, nothing stays parked
        gate.open()


def test_hung_renewals_do_not_block_another_locks_renewal(
    redis_server: RedisServer, r: redis.Redis, gates: dict[str, Gate]
) -> None:
    healthy = f"{PREFIX}:healthy"
    renewals = Renewals(healthy)
    client = KeyGatedRedis(gates, port=redis_server.port)
    try:
        with Lock(client, prefix=PREFIX, ttl_ms=TTL_MS, heartbeat_ms=HEARTBEAT_MS,
                  trace=renewals) as locks, locks.hold_many(HUNG):
            # The hung renewals' pipeline is parked at the first key's gate (sorted keys:
            # hung0 leads its tick's batch) before the healthy lock exists, so the healthy
            # renewal can only come after it.
            first = gates[f"{PREFIX}:{HUNG[0]}"]
            assert first.wait_blocked(1, WAIT), "the hung renewals never reached their gate"
            parked = sum(g.blocked for g in gates.values())
            try:
                with locks.hold("healthy") as handle:
                    answered = renewals.wait_answered(healthy, WAIT)
                    assert answered, (
                        f"the healthy lock's renewal was never answered while "
                        f"{parked} renewals hung (renewals it sent: "
                        f"{renewals.sent.get(healthy, 0)}, answered: 0)"
                    )
                    assert handle.held
                    assert r.pttl(healthy) > 0 and r.get(healthy) == handle.token.encode()
            finally:
                for gate in gates.values():
                    gate.open()
    finally:
        client.close()


def test_a_slow_observer_does_not_hold_up_another_locks_renewal(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The deadline of a lock whose renewal hangs is found by a timer tick, on the Lock's
    one timer thread; the observer told of that loss blocks.  Another lock of the same
    Lock must go on renewing meanwhile, so the observer must not be running on the timer
    thread."""
    from distlock.events import Event, Lost

    gate = Gate()
    gate.close()
    doomed, healthy = f"{PREFIX}:doomed", f"{PREFIX}:fine"
    observing = threading.Event()
    release_observer = threading.Event()

    def slow_observer(event: Event) -> None:
        if isinstance(event, Lost) and event.key == doomed:
            observing.set()
            release_observer.wait(WAIT)

    renewals = Renewals(healthy)
    client = KeyGatedRedis({doomed: gate}, port=redis_server.port)
    try:
        with Lock(client, prefix=PREFIX, ttl_ms=1_000, heartbeat_ms=HEARTBEAT_MS,
                  trace=renewals, observers=[slow_observer]) as locks:
            seen: list[bool] = []

            def doomed_body(handle: object) -> None:
                # The doomed renewal hangs (its pipeline waits at the gate) before the
                # healthy lock exists, so no renewal of it can share that pipeline.
                assert gate.wait_blocked(1, WAIT), "the doomed renewal never reached its gate"
                with locks.hold("fine"):
                    # Its deadline passes; its observer blocks.
                    assert observing.wait(WAIT), "the doomed lock's loss was never observed"
                    before = renewals.answered.get(healthy, 0)
                    # Two more: one may already have been on the wire when the observer
                    # blocked.
                    seen.append(renewals.wait_more(healthy, before + 1, WAIT))

            try:
                with pytest.raises(LockLeaseLostError):
                    locks.run("doomed", doomed_body)
                assert seen == [True], (
                    "no renewal of the healthy lock was answered while an observer was busy"
                )
            finally:
                release_observer.set()
                gate.open()
    finally:
        client.close()
