# Generated from tests/drivers/_async/test_lock.py by tools/unasync.py: do not edit.
"""A Lock against a real redis-server, on both drivers (the sync twin is written from this
module by ``tools/unasync.py``).  Asyncio's cancellation at every point is in
``tests/drivers/test_lock_asyncio.py``, the GIL's starvation of the timer thread in
``tests/drivers/test_lock_threads.py``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from distlock import LockLeaseLostError, LockNotAcquiredError, LossReason, ValidationError
from distlock._protocol import fence_key
from distlock import Lock, LockHandle, ReentrantLock, Semaphore
from tests.garbage import collector_saves_all
from tests.redis_server import RedisServer

from .concurrency import (
    UNCANCELLED,
    Event,
    background_work,
    client_for,
    closed_port_client,
    disconnected,
    gather,
    no_retry,
    running,
    signalled,
    sleep,
    spawn,
    timers_stopped,
    until,
)

#: A renewal interval far below the TTL: a test that waits for a renewal's verdict gets it
#: within one heartbeat, and no stall of the machine short of the whole TTL can turn it
#: into a deadline loss instead.
QUICK_HEARTBEAT_MS = 100

#: Commands the Lua scripts run inside Redis; commandstats counts them too.
#: (TIME: the clock's floor under each new fence, lib/fence.lua)
SCRIPT_INTERNAL = {"get", "set", "incr", "time", "del", "pexpire", "exists"}


def command_calls(r: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = r.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(v["calls"])
        for name, v in stats.items()
        if name not in ("cmdstat_info", "cmdstat_config|resetstat")
    }


def order_locks(server: RedisServer) -> Lock:
    return Lock(client_for(server), prefix="order", ttl_ms=10_000)


def nothing(h: object) -> None:
    return None


def fence_of(h: LockHandle) -> int:
    return h.fence


def test_run_holds_the_key_with_our_token_and_releases(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    seen: dict[str, object] = {}

    def body(h: LockHandle) -> str:
        seen["value"] = r.get("order:42")
        seen["token"], seen["key"], seen["fence"] = h.token, h.key, h.fence
        return "done"

    with order_locks(redis_server) as locks:
        assert locks.run("42", body) == "done"
    assert seen["key"] == "order:42"
    assert seen["value"] == str(seen["token"]).encode()
    assert len(str(seen["token"])) == 32 and int(str(seen["token"]), 16) >= 0
    assert r.get("order:42") is None
    assert r.get(fence_key("order:42")) == str(seen["fence"]).encode()  # the counter kept


def test_fences_increase_with_each_owner(redis_server: RedisServer) -> None:
    with order_locks(redis_server) as locks:
        fences = [locks.run("f", fence_of) for _ in range(5)]
    assert fences == sorted(set(fences)) and len(fences) == 5


def test_six_callers_fail_fast_one_runs(redis_server: RedisServer) -> None:
    failures: list[LockNotAcquiredError] = []
    all_failed = Event()

    def body(h: LockHandle) -> str:
        all_failed.wait()  # the other five gave up meanwhile
        return "ran"

    with order_locks(redis_server) as locks:

        def caller() -> str:
            try:
                return locks.run("job", body)
            except LockNotAcquiredError as exc:
                failures.append(exc)
                if len(failures) == 5:
                    all_failed.set()
                raise

        results = gather(*(caller for _ in range(6)))
    assert results.count("ran") == 1
    assert len(failures) == 5
    assert all(f.key == "order:job" for f in failures)


def test_with_retries_all_six_run_one_at_a_time(redis_server: RedisServer) -> None:
    steps: list[int] = []  # +1 on entering the body, -1 on leaving it

    def body(h: LockHandle) -> None:
        steps.append(1)
        sleep(0.02)  # the work being protected
        steps.append(-1)

    with order_locks(redis_server) as locks:

        def caller() -> None:
            # Retries are a spin, not a queue: leave a slow machine room for an unlucky one.
            locks.run("job", body, retries=1_000, retry_delay_ms=50)

        results = gather(*(caller for _ in range(6)))
    assert results == [None] * 6
    inside = [sum(steps[: i + 1]) for i in range(len(steps))]
    assert len(steps) == 12 and max(inside) == 1


def test_short_body_costs_two_commands_and_no_background_work(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with order_locks(redis_server) as locks:
        locks.run("warm", nothing)  # loads the scripts and starts the shared timer
        with background_work() as started:
            r.config_resetstat()
            for _ in range(20):
                locks.run("cheap", nothing)
            calls = command_calls(r)
    assert calls.pop("evalsha") == 40
    assert set(calls) <= SCRIPT_INTERNAL  # what the scripts call inside Redis
    assert started == []  # no task, no thread


def test_a_finished_hold_leaves_no_reference_cycle(redis_server: RedisServer) -> None:
    """A hold's objects are freed when it ends, by reference counting: a cycle among them
    would be freed only by the cycle collector, whose passes over every young object
    would cost each lock cycle a share (and a service holding many locks, pauses).  Each
    primitive, with the holds that fail to enter and a reentrant hold's inner level."""

    def cycles(locks: Lock | ReentrantLock | Semaphore) -> None:
        locks.run("k", nothing)
        with locks.hold("k") as h:
            assert h.key == f"{locks.prefix}:k"
            if isinstance(locks, ReentrantLock):
                with locks.hold("k") as inner:
                    assert inner.depth == 2
        if isinstance(locks, Lock):
            locks.run_many(["a", "b"], nothing)
        if not isinstance(locks, Semaphore):
            with pytest.raises(LockNotAcquiredError):  # an enter that fails
                with locks.hold("taken"):
                    pass

    client = client_for(redis_server)
    for locks in (
        Lock(client, prefix="cyc"),
        ReentrantLock(client, prefix="cyc-r"),
        Semaphore(client, prefix="cyc-s", limit=2),
    ):
        with locks:
            client.set(f"{locks.prefix}:taken", "another owner")
            cycles(locks)  # connections, scripts
            with collector_saves_all() as garbage:
                for _ in range(3):
                    cycles(locks)
            assert garbage == [], type(locks).__name__
    client.close()


def test_renews_while_the_body_outlives_the_ttl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    ttl_ms, heartbeat_ms = 2_000, 200
    # Each renewal is sent at least one heartbeat after the one before, so this many
    # successful renewals mean the body has outlived 1.5 TTLs, and it is still held.  The
    # heartbeat is a tenth of the TTL, so only a stall of the machine of nearly a whole
    # TTL between two renewals can cost the lease.
    enough = (ttl_ms * 3 // 2) // heartbeat_ms
    renewed = Event()
    replies: list[dict[str, Any]] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            replies.append(event)
            if len(replies) >= enough:
                renewed.set()

    def body(h: LockHandle) -> bool:
        renewed.wait()
        return h.held

    with Lock(
        client_for(redis_server), prefix="renew", ttl_ms=ttl_ms, heartbeat_ms=heartbeat_ms,
        trace=trace,
    ) as locks:
        assert locks.run("k", body) is True
    assert len(replies) >= enough
    assert r.get("renew:k") is None


def test_deleted_key_is_a_loss_even_when_the_body_returns(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    seen: dict[str, Any] = {}

    def body(h: LockHandle) -> str:
        r.delete(h.key)
        signalled(h.signal)
        seen["signal"] = h.signal
        return "finished anyway"  # not cancelled, though the loss was known

    # The deadline is ten seconds away: the next renewal, one short heartbeat later, is
    # what must find the key gone.
    with order_locks(redis_server) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            locks.run("42", body, heartbeat_ms=QUICK_HEARTBEAT_MS, **UNCANCELLED)
    assert info.value.key == "order:42"
    assert info.value.reason is LossReason.RENEW_REJECTED
    assert seen["signal"].reason is info.value


def test_silent_redis_is_a_loss_by_the_deadline(fresh_redis: RedisServer) -> None:
    client = client_for(fresh_redis)

    def body(h: LockHandle) -> None:
        fresh_redis.pause()  # renewals hang: no reply, no error
        try:
            signalled(h.signal)
        finally:
            fresh_redis.resume()

    # A paused Redis answers nothing, so the deadline is the only way out; the TTL only has
    # to be long enough that the grant itself is never late.
    with Lock(client, prefix="p", ttl_ms=1_000) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            locks.run("k", body)
    assert info.value.reason is LossReason.DEADLINE_PASSED
    client.close()


def test_taken_over_key_fails_release_and_is_reported(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def body(h: LockHandle) -> str:
        r.set(h.key, "someone-else")  # another owner after an expiry we did not see
        return "ok"

    with order_locks(redis_server) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            locks.run("42", body)
    assert info.value.reason is LossReason.RELEASE_REJECTED
    assert r.get("order:42") == b"someone-else"  # never deleted another owner's key


def test_old_owner_cannot_release_or_extend_a_retaken_key(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with order_locks(redis_server) as locks:
        old = locks.acquire("42")
        assert old is not None
        r.pexpire("order:42", 1)
        r.delete("order:42")  # expired
        new = locks.acquire("42")
        assert new is not None and new.fence > old.fence
        assert old.extend() is False
        assert old.signal.aborted and old.signal.reason is not None
        assert old.release() is False
        assert r.get("order:42") == new.token.encode()
        assert new.release() is True


def test_manual_handle_is_never_renewed(redis_server: RedisServer, r: redis.Redis) -> None:
    events: list[str] = []
    with Lock(
        client_for(redis_server), prefix="m", ttl_ms=10_000,
        trace=lambda e: events.append(e["action"]),
    ) as locks:
        h = locks.acquire("k")
        assert h is not None
        assert locks.acquire("k") is None
        assert h.extend(20_000) is True
        assert 10_000 < r.pttl("m:k") <= 20_000
        assert not h.signal.aborted
        assert h.release() is True
        assert h.release() is False
    assert "RenewSend" not in events
    assert events.count("Extend") == 1


def test_body_error_propagates_and_the_lock_is_released(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def body(h: LockHandle) -> None:
        raise KeyError("boom")

    with order_locks(redis_server) as locks:
        with pytest.raises(KeyError):
            locks.run("42", body)
    assert r.get("order:42") is None


def test_body_error_with_a_loss_raises_the_loss_chained(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def body(h: LockHandle) -> None:
        r.delete(h.key)
        raise KeyError("boom")

    with order_locks(redis_server) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            locks.run("42", body)
    assert isinstance(info.value.__cause__, KeyError)


def test_body_raising_the_abort_reason_propagates_it_unchanged(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    reasons: list[BaseException] = []

    def body(h: LockHandle) -> None:
        r.delete(h.key)
        signalled(h.signal)
        assert h.signal.reason is not None
        reasons.append(h.signal.reason)
        h.signal.raise_if_aborted()

    with order_locks(redis_server) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            locks.run("42", body, heartbeat_ms=QUICK_HEARTBEAT_MS, **UNCANCELLED)
    assert info.value is reasons[0]


def test_hold_is_run_as_a_context_manager(redis_server: RedisServer, r: redis.Redis) -> None:
    with order_locks(redis_server) as locks:
        with locks.hold("42") as h:
            assert r.get("order:42") == h.token.encode()
            with pytest.raises(LockNotAcquiredError):
                with locks.hold("42"):
                    pass
        assert r.get("order:42") is None
        with pytest.raises(LockLeaseLostError):
            with locks.hold("42") as h:
                r.delete(h.key)


def test_on_renew_error_sees_failed_round_trips(fresh_redis: RedisServer) -> None:
    # No client-side retries: each timed-out round trip reaches the hook at once.
    client = client_for(fresh_redis, socket_timeout=0.3, retry=no_retry())
    errors: list[BaseException] = []
    first = Event()

    def hook(exc: BaseException) -> None:
        errors.append(exc)
        first.set()

    def body(h: LockHandle) -> bool:
        fresh_redis.pause()
        try:
            first.wait()
            return h.signal.aborted  # one failed trip is not a loss
        finally:
            fresh_redis.resume()

    with Lock(
        client, prefix="p", ttl_ms=5_000, heartbeat_ms=200, on_renew_error=hook
    ) as locks:
        assert locks.run("k", body) is False
    assert isinstance(errors[0], redis.exceptions.TimeoutError)
    client.close()


BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("", {}),
    ("ok", {"ttl_ms": 0}),
    ("ok", {"ttl_ms": -5}),
    ("ok", {"ttl_ms": 1.5}),
    ("ok", {"ttl_ms": True}),
    ("ok", {"retries": -1}),
    ("ok", {"retries": 1.0}),
    ("ok", {"retry_delay_ms": -1}),
    ("ok", {"retry_delay_ms": float("nan")}),
    ("ok", {"retry_delay_ms": float("inf")}),
    ("ok", {"retry_delay_ms": 2**31}),
    ("ok", {"ttl_ms": 2**31}),  # past what a timer of the driver can be trusted to wait
    ("ok", {"heartbeat_ms": 0}),
    ("ok", {"heartbeat_ms": -1}),
    ("ok", {"heartbeat_ms": True}),
    ("ok", {"heartbeat_ms": 2.5}),
    ("ok", {"ttl_ms": 1_000, "heartbeat_ms": 501}),
    ("ok", {"on_renew_error": "not callable"}),
]


@pytest.mark.parametrize(("id", "kwargs"), BAD_CALLS)
def test_bad_input_is_rejected_before_any_command(id: str, kwargs: dict[str, Any]) -> None:
    # The client points at a closed port: had any command been sent, we'd see a
    # ConnectionError instead of the ValidationError.
    with Lock(closed_port_client()) as locks:
        with pytest.raises(ValidationError):
            locks.run(id, nothing, **kwargs)
        with pytest.raises(ValueError):  # noqa: PT011
            with locks.hold(id, **kwargs):
                pass


def test_validation_before_any_command() -> None:
    with Lock(closed_port_client()) as locks:
        with pytest.raises(ValidationError):
            locks.run("", nothing)
        with pytest.raises(ValidationError):
            locks.hold("k", ttl_ms=1_000, heartbeat_ms=600)
        with pytest.raises(ValidationError):
            locks.acquire("k", retries=-1)
        with pytest.raises(redis.exceptions.ConnectionError):
            locks.acquire("k")


def test_bad_constructor_and_id_types() -> None:
    client = closed_port_client()
    with pytest.raises(ValidationError, match="half of ttl_ms"):
        Lock(client, ttl_ms=1_000, heartbeat_ms=2_000)
    with pytest.raises(ValidationError):
        Lock(client, prefix="")
    with Lock(client) as locks:
        with pytest.raises(ValidationError, match="str"):
            locks.acquire(42)  # type: ignore[arg-type]


def test_extend_beyond_the_longest_ttl_is_rejected_before_any_command(
    redis_server: RedisServer,
) -> None:
    with order_locks(redis_server) as locks:
        handle = locks.acquire("long")
        assert handle is not None
        with pytest.raises(ValidationError, match="at most"):
            handle.extend(2**31)
        assert handle.held and handle.release()


def test_heartbeat_at_exactly_half_is_allowed_and_false_disables(
    redis_server: RedisServer,
) -> None:
    def one(h: LockHandle) -> int:
        return 1

    def two(h: LockHandle) -> int:
        return 2

    with order_locks(redis_server) as locks:
        assert locks.run("h", one, ttl_ms=1_000, heartbeat_ms=500) == 1
        assert locks.run("h", two, heartbeat_ms=False) == 2


def test_connection_failure_is_not_contention() -> None:
    with Lock(closed_port_client()) as locks:
        with pytest.raises(redis.exceptions.ConnectionError):
            locks.run("k", nothing)
        with pytest.raises(redis.exceptions.ConnectionError):
            locks.acquire("k")


def test_url_client_is_owned_and_closed(redis_server: RedisServer) -> None:
    locks = Lock(redis_server.url, prefix="url")
    assert locks.run("k", fence_of) >= 1
    client = locks.client
    locks.close()
    assert disconnected(client)
    assert timers_stopped(locks)


def test_factory_client_is_called_once_on_first_use(redis_server: RedisServer) -> None:
    made: list[Any] = []

    def factory() -> Any:
        made.append(client_for(redis_server))
        return made[-1]

    with Lock(factory, prefix="fac") as locks:
        assert made == []
        locks.run("a", nothing)
        locks.run("b", nothing)
    assert len(made) == 1
    made[0].close()


def test_scripts_are_reloaded_after_a_script_flush(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def reloaded(h: LockHandle) -> str:
        return "reloaded"

    with order_locks(redis_server) as locks:
        locks.run("s", nothing)
        r.script_flush()
        assert locks.run("s", reloaded) == "reloaded"


def test_close_leaves_no_background_work(redis_server: RedisServer) -> None:
    before = running()
    locks = Lock(client_for(redis_server), prefix="leak", ttl_ms=200)
    renewed = Event()
    # A renewal, so the renewal's background work exists too; the long TTL keeps the lease
    # whatever the machine's load.
    locks2 = Lock(
        client_for(redis_server), prefix="leak2", ttl_ms=2_000, heartbeat_ms=QUICK_HEARTBEAT_MS,
        trace=lambda e: renewed.set() if e["action"] == "RenewReply" else None,
    )

    def body(h: LockHandle) -> bool:
        renewed.wait()
        return True

    locks.run("k", nothing)
    assert locks2.run("k", body) is True
    locks.close()
    locks2.close()
    assert running() == before  # no task, no thread left


class LateGrant:
    """A ``trace=`` callable, and a way to run one acquisition whose grant arrives after
    the lease it grants, whatever the machine's load: Redis holds writes, and the acquire
    is let through only once its whole TTL has passed on the client's clock since it was
    sent (the trace's ``t``, the client's monotonic clock in milliseconds)."""

    def __init__(self, ttl_ms: int) -> None:
        self.ttl_ms = ttl_ms
        self.sent_at: list[float] = []
        self.released: list[bool] = []
        self._sent = Event()

    def __call__(self, event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            self.sent_at.append(event["t"])
            self._sent.set()
        elif event["action"] == "ReleaseReply":
            self.released.append(event["ok"])

    def run(
        self, r: redis.Redis, call: Callable[[], object]
    ) -> BaseException | None:
        """Run ``call`` concurrently; return what it raised."""

        def caller() -> BaseException | None:
            try:
                call()
            except BaseException as exc:
                return exc
            return None

        r.client_pause(60_000, all=False)  # scripts wait unexecuted until the unpause
        try:
            task = spawn(caller)
            self._sent.wait()
            # The one thing to wait for here is the clock itself.
            until(
                lambda: time.monotonic() * 1000 > self.sent_at[0] + self.ttl_ms,
                "the lease's end on the client's clock",
            )
        finally:
            r.client_unpause()
        return task.result()


@pytest.mark.parametrize("how", ["run", "acquire"])
def test_a_grant_arriving_after_its_lease_runs_no_body(
    redis_server: RedisServer, r: redis.Redis, how: str
) -> None:
    late = LateGrant(ttl_ms=100)
    ran: list[int] = []

    def body(h: LockHandle) -> None:
        ran.append(1)

    with Lock(
        client_for(redis_server), prefix="order", ttl_ms=late.ttl_ms, trace=late
    ) as locks:
        if how == "run":
            error = late.run(r, lambda: locks.run("late", body))
        else:
            error = late.run(r, lambda: locks.acquire("late"))
    assert isinstance(error, LockLeaseLostError), error
    assert error.reason is LossReason.GRANTED_TOO_LATE
    assert ran == []
    assert late.released == [True]  # released with our token, not left to expire
    assert r.get("order:late") is None
