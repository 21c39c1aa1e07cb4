"""The sync Lock against a real redis-server."""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distlock import (
    Lock,
    LockHandle,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ValidationError,
)
from distlock._protocol import fence_key
from tests.redis_server import RedisServer, free_port

WAIT = 10.0  # generous bound on event waits; never a timing assertion
#: A renewal interval far below the TTL: a test that waits for a renewal's verdict gets it
#: within one heartbeat, and no stall of the machine short of the whole TTL can turn it
#: into a deadline loss instead.
QUICK_HEARTBEAT_MS = 100


@pytest.fixture
def locks(r: redis.Redis) -> Iterator[Lock]:
    with Lock(r, prefix="order", ttl_ms=10_000) as lock:
        yield lock


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


def test_run_holds_the_key_with_our_token_and_releases(locks: Lock, r: redis.Redis) -> None:
    seen: dict[str, object] = {}

    def body(h: LockHandle) -> str:
        seen["value"] = r.get("order:42")
        seen["token"], seen["key"], seen["fence"] = h.token, h.key, h.fence
        return "done"

    assert locks.run("42", body) == "done"
    assert seen["key"] == "order:42"
    assert seen["value"] == str(seen["token"]).encode()
    assert len(str(seen["token"])) == 32 and int(str(seen["token"]), 16) >= 0
    assert r.get("order:42") is None
    assert r.get(fence_key("order:42")) == str(seen["fence"]).encode()  # the counter kept


def test_fences_increase_with_each_owner(locks: Lock) -> None:
    fences = [locks.run("f", lambda h: h.fence) for _ in range(5)]
    assert fences == sorted(set(fences)) and len(fences) == 5


def test_six_callers_fail_fast_one_runs(locks: Lock) -> None:
    failures: list[LockNotAcquiredError] = []
    ran: list[int] = []
    start = threading.Barrier(6)
    all_failed = threading.Event()
    guard = threading.Lock()

    def body(h: LockHandle) -> None:
        ran.append(1)
        assert all_failed.wait(WAIT), "the other five never gave up"

    def caller() -> None:
        start.wait()
        try:
            locks.run("job", body)
        except LockNotAcquiredError as exc:
            with guard:
                failures.append(exc)
                if len(failures) == 5:
                    all_failed.set()

    threads = [threading.Thread(target=caller) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 2)
    assert len(ran) == 1
    assert len(failures) == 5
    assert all(f.key == "order:job" for f in failures)


def test_with_retries_all_six_run_one_at_a_time(locks: Lock) -> None:
    inside = 0
    most = 0
    runs = 0
    guard = threading.Lock()
    start = threading.Barrier(6)

    def body(h: LockHandle) -> None:
        nonlocal inside, most, runs
        with guard:
            inside += 1
            most = max(most, inside)
            runs += 1
        threading.Event().wait(0.02)  # the work being protected
        with guard:
            inside -= 1

    def caller() -> None:
        start.wait()
        # Retries are a spin, not a queue: leave a slow machine room for an unlucky caller.
        locks.run("job", body, retries=1_000, retry_delay_ms=50)

    threads = [threading.Thread(target=caller) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 6)
    assert runs == 6
    assert most == 1


def test_short_body_costs_two_commands_and_no_thread(locks: Lock, r: redis.Redis) -> None:
    locks.run("warm", lambda h: None)  # loads the scripts and starts the shared timer
    threads_before = threading.active_count()
    r.config_resetstat()
    for _ in range(20):
        locks.run("cheap", lambda h: None)
    calls = command_calls(r)
    assert calls.pop("evalsha") == 40
    assert set(calls) <= SCRIPT_INTERNAL  # what the scripts call inside Redis
    assert threading.active_count() == threads_before


def test_renews_while_the_body_outlives_the_ttl(r: redis.Redis) -> None:
    ttl_ms, heartbeat_ms = 2_000, 200
    # Each renewal is sent at least one heartbeat after the one before, so this many
    # successful renewals mean the body has outlived 1.5 TTLs, and it is still held.  The
    # heartbeat is a tenth of the TTL, so only a stall of the machine of nearly a whole
    # TTL between two renewals can cost the lease.
    enough = (ttl_ms * 3 // 2) // heartbeat_ms
    renewed = threading.Event()
    replies: list[dict[str, Any]] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            replies.append(event)
            if len(replies) >= enough:
                renewed.set()

    with Lock(r, prefix="renew", ttl_ms=ttl_ms, heartbeat_ms=heartbeat_ms, trace=trace) as locks:
        assert locks.run("k", lambda h: renewed.wait(WAIT) and h.held) is True
    assert len(replies) >= enough
    assert r.get("renew:k") is None


def test_deleted_key_is_a_loss_even_when_the_body_returns(locks: Lock, r: redis.Redis) -> None:
    seen: dict[str, Any] = {}

    def body(h: LockHandle) -> str:
        r.delete(h.key)
        seen["fired"] = h.signal.wait(WAIT)
        seen["signal"] = h.signal
        return "finished anyway"

    # The deadline is ten seconds away: the next renewal, one short heartbeat later, is
    # what must find the key gone.
    with pytest.raises(LockLeaseLostError) as info:
        locks.run("42", body, heartbeat_ms=QUICK_HEARTBEAT_MS)
    assert seen["fired"] is True
    assert info.value.key == "order:42"
    assert info.value.reason is LossReason.RENEW_REJECTED
    assert seen["signal"].reason is info.value


def test_silent_redis_is_a_loss_by_the_deadline(fresh_redis: RedisServer) -> None:
    client = redis.Redis(port=fresh_redis.port)

    def body(h: LockHandle) -> None:
        fresh_redis.pause()  # renewals hang: no reply, no error
        try:
            assert h.signal.wait(WAIT)
        finally:
            fresh_redis.resume()

    # A paused Redis answers nothing, so the deadline is the only way out; the TTL only has
    # to be long enough that the grant itself is never late.
    with Lock(client, prefix="p", ttl_ms=1_000) as locks, pytest.raises(LockLeaseLostError) as info:
        locks.run("k", body)
    assert info.value.reason is LossReason.DEADLINE_PASSED
    client.close()


def test_taken_over_key_fails_release_and_is_reported(locks: Lock, r: redis.Redis) -> None:
    def body(h: LockHandle) -> str:
        r.set(h.key, "someone-else")  # another owner after an expiry we did not see
        return "ok"

    with pytest.raises(LockLeaseLostError) as info:
        locks.run("42", body)
    assert info.value.reason is LossReason.RELEASE_REJECTED
    assert r.get("order:42") == b"someone-else"  # never deleted another owner's key


def test_old_owner_cannot_release_or_extend_a_retaken_key(locks: Lock, r: redis.Redis) -> None:
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


def test_gil_held_past_the_ttl_is_caught(r: redis.Redis) -> None:
    ttl_ms = 500
    # PyDLL calls keep the GIL, so the timer thread cannot run while usleep blocks.
    libc = ctypes.PyDLL(None)
    sent_at: list[float] = []
    ran: list[int] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            sent_at.append(event["t"])

    def body(h: LockHandle) -> None:
        ran.append(1)
        # Hold the GIL until the lease, counted from the acquire's send, is over on the
        # client's own clock: the section is certainly past its deadline when it ends.
        left_ms = sent_at[0] + ttl_ms - time.monotonic() * 1000
        libc.usleep(int(max(0.0, left_ms) * 1000) + 1_000)

    with (
        Lock(r, prefix="gil", ttl_ms=ttl_ms, heartbeat_ms=ttl_ms // 2, trace=trace) as locks,
        pytest.raises(LockLeaseLostError) as info,
    ):
        locks.run("k", body)
    assert ran == [1]
    # Whichever of the starved timer or the completion check sees the deadline first; a
    # renewal the timer sent just before the GIL was taken finds the key expired.  Not a
    # release rejection: the loss must be known before the release reply says so.
    assert info.value.reason in (
        LossReason.DEADLINE_AT_COMPLETION,
        LossReason.DEADLINE_PASSED,
        LossReason.RENEW_REJECTED,
    )


def test_manual_handle_is_never_renewed(r: redis.Redis) -> None:
    events: list[str] = []
    with Lock(r, prefix="m", ttl_ms=10_000, trace=lambda e: events.append(e["action"])) as locks:
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


def test_body_error_propagates_and_the_lock_is_released(locks: Lock, r: redis.Redis) -> None:
    def body(h: LockHandle) -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        locks.run("42", body)
    assert r.get("order:42") is None


def test_body_error_with_a_loss_raises_the_loss_chained(locks: Lock, r: redis.Redis) -> None:
    def body(h: LockHandle) -> None:
        r.delete(h.key)
        raise KeyError("boom")

    with pytest.raises(LockLeaseLostError) as info:
        locks.run("42", body)
    assert isinstance(info.value.__cause__, KeyError)


def test_body_raising_the_abort_reason_propagates_it_unchanged(locks: Lock, r: redis.Redis) -> None:
    reasons: list[BaseException] = []

    def body(h: LockHandle) -> None:
        r.delete(h.key)
        assert h.signal.wait(WAIT)
        assert h.signal.reason is not None
        reasons.append(h.signal.reason)
        h.signal.raise_if_aborted()

    with pytest.raises(LockLeaseLostError) as info:
        locks.run("42", body, heartbeat_ms=QUICK_HEARTBEAT_MS)
    assert info.value is reasons[0]


def test_hold_is_run_as_a_context_manager(locks: Lock, r: redis.Redis) -> None:
    with locks.hold("42") as h:
        assert r.get("order:42") == h.token.encode()
        with pytest.raises(LockNotAcquiredError):  # noqa: SIM117
            with locks.hold("42"):
                pass
    assert r.get("order:42") is None
    with pytest.raises(LockLeaseLostError), locks.hold("42") as h:
        r.delete(h.key)


def test_on_renew_error_sees_failed_round_trips(fresh_redis: RedisServer) -> None:
    # No client-side retries: each timed-out round trip reaches the hook at once.
    client = redis.Redis(port=fresh_redis.port, socket_timeout=0.3, retry=Retry(NoBackoff(), 0))
    errors: list[BaseException] = []
    first = threading.Event()

    def hook(exc: BaseException) -> None:
        errors.append(exc)
        first.set()

    def body(h: LockHandle) -> bool:
        fresh_redis.pause()
        try:
            assert first.wait(WAIT)
            return h.signal.aborted  # one failed trip is not a loss
        finally:
            fresh_redis.resume()

    with Lock(client, prefix="p", ttl_ms=5_000, heartbeat_ms=200, on_renew_error=hook) as locks:
        assert locks.run("k", body) is False
    assert isinstance(errors[0], redis.exceptions.TimeoutError)
    client.close()


def closed_port_client() -> redis.Redis:
    return redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


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
            locks.run(id, lambda h: None, **kwargs)
        with pytest.raises(ValueError):  # noqa: PT011, SIM117
            with locks.hold(id, **kwargs):
                pass


def test_bad_constructor_and_id_types() -> None:
    client = closed_port_client()
    with pytest.raises(ValidationError, match="half of ttl_ms"):
        Lock(client, ttl_ms=1_000, heartbeat_ms=2_000)
    with pytest.raises(ValidationError):
        Lock(client, prefix="")
    with Lock(client) as locks, pytest.raises(ValidationError, match="str"):
        locks.acquire(42)  # type: ignore[arg-type]


def test_extend_beyond_the_longest_ttl_is_rejected_before_any_command(locks: Lock) -> None:
    handle = locks.acquire("long")
    assert handle is not None
    with pytest.raises(ValidationError, match="at most"):
        handle.extend(2**31)
    assert handle.held and handle.release()


def test_heartbeat_at_exactly_half_is_allowed_and_false_disables(locks: Lock) -> None:
    assert locks.run("h", lambda h: 1, ttl_ms=1_000, heartbeat_ms=500) == 1
    assert locks.run("h", lambda h: 2, heartbeat_ms=False) == 2


def test_connection_failure_is_not_contention() -> None:
    with Lock(closed_port_client()) as locks:
        with pytest.raises(redis.exceptions.ConnectionError):
            locks.run("k", lambda h: None)
        with pytest.raises(redis.exceptions.ConnectionError):
            locks.acquire("k")


def test_url_client_is_owned_and_closed(redis_server: RedisServer) -> None:
    locks = Lock(redis_server.url, prefix="url")
    assert locks.run("k", lambda h: h.fence) >= 1
    client = locks.client
    assert isinstance(client, redis.Redis)
    pool = client.connection_pool
    locks.close()
    conns = pool._available_connections
    assert conns and all(c._sock is None for c in conns)  # disconnected
    assert locks._timers.running is False


def test_factory_client_is_called_once_on_first_use(redis_server: RedisServer) -> None:
    made: list[redis.Redis] = []

    def factory() -> redis.Redis:
        made.append(redis.Redis(port=redis_server.port))
        return made[-1]

    with Lock(factory, prefix="fac") as locks:
        assert made == []
        locks.run("a", lambda h: None)
        locks.run("b", lambda h: None)
    assert len(made) == 1
    made[0].close()


def test_scripts_are_reloaded_after_a_script_flush(locks: Lock, r: redis.Redis) -> None:
    locks.run("s", lambda h: None)
    r.script_flush()
    assert locks.run("s", lambda h: "reloaded") == "reloaded"


def test_close_leaves_no_thread(r: redis.Redis) -> None:
    before = {t.ident for t in threading.enumerate()}
    locks = Lock(r, prefix="leak", ttl_ms=200)
    renewed = threading.Event()
    # A renewal, so the worker pool exists too; the long TTL keeps the lease whatever the
    # machine's load.
    locks2 = Lock(r, prefix="leak2", ttl_ms=2_000, heartbeat_ms=QUICK_HEARTBEAT_MS,
                  trace=lambda e: renewed.set() if e["action"] == "RenewReply" else None)
    locks.run("k", lambda h: None)
    assert locks2.run("k", lambda h: renewed.wait(WAIT)) is True
    locks.close()
    locks2.close()
    assert {t.ident for t in threading.enumerate()} == before


class LateGrant:
    """A ``trace=`` callable, and a way to run one acquisition whose grant arrives after
    the lease it grants, whatever the machine's load: Redis holds writes, and the acquire
    is let through only once its whole TTL has passed on the client's clock since it was
    sent (the trace's ``t``, the client's monotonic clock in milliseconds)."""

    def __init__(self, ttl_ms: int) -> None:
        self.ttl_ms = ttl_ms
        self.sent_at: list[float] = []
        self.released: list[bool] = []
        self._sent = threading.Event()

    def __call__(self, event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            self.sent_at.append(event["t"])
            self._sent.set()
        elif event["action"] == "ReleaseReply":
            self.released.append(event["ok"])

    def run(self, r: redis.Redis, call: Callable[[], object]) -> BaseException | None:
        """Run ``call`` on another thread; return what it raised."""
        outcome: list[BaseException | None] = []

        def caller() -> None:
            try:
                call()
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        r.client_pause(60_000, all=False)  # scripts wait unexecuted until the unpause
        thread = threading.Thread(target=caller)
        try:
            thread.start()
            assert self._sent.wait(WAIT), "the acquire was never sent"
            # The one thing to wait for here is the clock itself.
            while (left := self.sent_at[0] + self.ttl_ms - time.monotonic() * 1000) >= 0:
                time.sleep(left / 1000 + 0.001)
        finally:
            r.client_unpause()
        thread.join(WAIT)
        assert not thread.is_alive() and outcome
        return outcome[0]


@pytest.mark.parametrize("how", ["run", "acquire"])
def test_a_grant_arriving_after_its_lease_runs_no_body(r: redis.Redis, how: str) -> None:
    late = LateGrant(ttl_ms=100)
    ran: list[int] = []
    with Lock(r, prefix="order", ttl_ms=late.ttl_ms, trace=late) as locks:
        if how == "run":
            error = late.run(r, lambda: locks.run("late", lambda h: ran.append(1)))
        else:
            error = late.run(r, lambda: locks.acquire("late"))
    assert isinstance(error, LockLeaseLostError), error
    assert error.reason is LossReason.GRANTED_TOO_LATE
    assert ran == []
    assert late.released == [True]  # released with our token, not left to expire
    assert r.get("order:late") is None
