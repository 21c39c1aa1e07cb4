# Generated from tests/drivers/_async/test_semaphore.py by tools/unasync.py: do not edit.
"""A Semaphore against a real redis-server, on both drivers (the sync twin is written from
this module by ``tools/unasync.py``; a loss cancelling the body and a blocked event loop
are in ``tests/drivers/test_semaphore_asyncio.py``).

Outcomes that depend on time wait on Redis's own state (its clock passing a permit's
expiry instant), never on a sleep being long enough; losses are forced by removing a
permit behind its holder's back.  TTLs that must not run out are 30 s.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock import (
    LockClosedError,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ValidationError,
)
from distlock._protocol import (
    ACQUIRE,
    EXTEND,
    R_ACQUIRE,
    R_RELEASE,
    R_RENEW,
    RELEASE,
    RELEASE_MEMORY_MS,
    S_ACQUIRE,
    S_RELEASE,
    S_RENEW,
    Script,
    fence_key,
    permits_released_key,
    released_key,
)
from distlock import Lock, LockHandle, PermitHandle, ReentrantLock, Semaphore
from distlock.tools.inspect import format_table, inspect, read_only_acl
from tests.docs_acl import documented_acl
from tests.redis_server import RedisServer, redis_ms

from .concurrency import (
    UNCANCELLED,
    Event,
    client_for,
    closed_port_client,
    signalled,
    spawn,
    until,
)

TTL = 30_000
QUICK = 100  # heartbeat: a removed permit is noticed within one


def semaphore(server: RedisServer, **kwargs: Any) -> Semaphore:
    options: dict[str, Any] = {"limit": 2, "ttl_ms": TTL, "heartbeat_ms": QUICK, **kwargs}
    return Semaphore(client_for(server), **options)



def expiry_of(r: redis.Redis, permit: PermitHandle) -> float | None:
    return r.zscore(permit.key, permit.token)


def until_redis_passes(r: redis.Redis, instant: float) -> None:
    """Until Redis's own clock is past ``instant`` (ms): a permit ending there has expired."""
    until(lambda: redis_ms(r) > instant, "Redis's clock passing the instant")


def nothing(permit: object) -> None:
    return None


def token_of(permit: PermitHandle) -> str:
    return permit.token


def test_at_most_limit_permits_and_each_is_a_member(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with semaphore(redis_server) as sem:
        a, b = sem.acquire("pool"), sem.acquire("pool")
        assert a is not None and b is not None and a.token != b.token
        assert isinstance(a, PermitHandle)
        assert a.key == b.key == "sem:pool"
        assert sem.acquire("pool") is None
        assert set(r.zrange("sem:pool", 0, -1)) == {a.token.encode(), b.token.encode()}
        assert r.type("sem:pool") == b"zset"
        # The key lives exactly as long as its latest permit.
        assert r.pexpiretime("sem:pool") == max(expiry_of(r, a) or 0, expiry_of(r, b) or 0)
        with pytest.raises(LockNotAcquiredError):
            sem.run("pool", nothing)
        with pytest.raises(LockNotAcquiredError):
            with sem.hold("pool"):
                pass
        assert a.release() is True
        assert a.release() is False
        c = sem.acquire("pool")
        assert c is not None and c.held
        assert sem.acquire("other") is not None  # ids are counted apart


def test_the_key_is_gone_once_the_last_permit_is_released(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def members(permit: PermitHandle) -> int:
        return r.zcard(permit.key)

    with semaphore(redis_server) as sem:
        a, b = sem.acquire("k"), sem.acquire("k")
        assert a is not None and b is not None
        assert a.release() is True
        assert r.exists("sem:k") == 1
        assert b.release() is True
        assert r.exists("sem:k") == 0
        assert sem.run("k", members) == 1
        assert r.exists("sem:k") == 0


def test_a_waiter_gets_the_permit_a_holder_gives_back(redis_server: RedisServer) -> None:
    refused = Event()

    def watch(event: dict[str, Any]) -> None:
        if event["action"] == "AcquireReply" and not event["granted"]:
            refused.set()

    with semaphore(redis_server, limit=1, trace=watch) as sem:
        holder = sem.acquire("k")
        assert holder is not None
        waiter = spawn(sem.run, "k", token_of, retries=1_000, retry_delay_ms=10)
        refused.wait()
        assert holder.release() is True
        assert waiter.result() != holder.token


def test_a_dead_holder_s_permit_is_reclaimed_after_its_own_ttl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    renewed = Event()

    def watch(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            renewed.set()

    with semaphore(redis_server, trace=watch) as sem:
        dead = sem.acquire("k")
        assert dead is not None
        with sem.hold("k", heartbeat_ms=QUICK) as alive:
            assert sem.acquire("k") is None  # both permits live: the dead one's 30 s run
            # The dead holder shortens its permit to 1.5 s, then is never heard from again.
            assert dead.extend(1_500) is True
            ends = expiry_of(r, dead)
            assert ends is not None
            renewed.clear()
            renewed.wait()
            # Another holder's renewals keep its own permit alive, not the dead one's.
            assert expiry_of(r, dead) == ends
            until_redis_passes(r, ends)
            third = sem.acquire("k")
            assert third is not None, "the dead permit was not reclaimed after its TTL"
            assert r.zscore("sem:k", dead.token) is None
            assert alive.held and (expiry_of(r, alive) or 0) > redis_ms(r)
            assert third.release() is True
        assert dead.release() is False  # evicted: not ours any more


def test_renewal_moves_the_permit_s_expiry_while_the_body_runs(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    renewals: list[int] = []
    three = Event()

    def watch(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            renewals.append(1)
            if len(renewals) >= 3:
                three.set()

    def body(permit: PermitHandle) -> float:
        first = expiry_of(r, permit)
        assert first is not None
        renewals.clear()
        three.clear()
        three.wait()
        later = expiry_of(r, permit)
        assert later is not None and later > first
        return later

    with semaphore(redis_server, limit=3, ttl_ms=2_000, trace=watch) as sem:
        sem.run("k", body)
    assert r.exists("sem:k") == 0


def test_renewal_keeps_the_permit_while_the_body_outlives_its_ttl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # The heartbeat is a tenth of the TTL: only a stall of the machine of nearly a whole
    # TTL between two renewals could cost the permit.
    seen: list[float] = []

    def body(permit: PermitHandle) -> bool:
        first = r.zscore(permit.key, permit.token)
        assert first is not None
        # Past the first TTL in Redis's time: only renewals can have kept it.
        until_redis_passes(r, first)
        later = r.zscore(permit.key, permit.token)
        seen.extend([first, later or 0.0])
        return permit.held

    with semaphore(redis_server, limit=1, ttl_ms=2_000, heartbeat_ms=200) as sem:
        assert sem.run("k", body) is True
    assert seen[1] > seen[0]
    assert r.exists("sem:k") == 0


def test_a_renewal_moves_the_key_s_own_expiry_with_its_permit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # The key expires at its latest permit's instant and takes every permit with it: a
    # renewal that re-scored its permit but left the key's expiry where the grant put it
    # would lose the permit at the old instant while its holder's lease runs on.
    with semaphore(redis_server) as sem:
        permit = sem.acquire("k")
        assert permit is not None
        granted = r.pexpiretime("sem:k")
        assert granted == expiry_of(r, permit)
        until_redis_passes(r, granted - TTL + 2)
        assert r.eval(S_RENEW.source, 1, "sem:k", permit.token, TTL) == 1
        renewed = expiry_of(r, permit)
        assert renewed is not None and renewed > granted
        assert r.pexpiretime("sem:k") == renewed
        assert permit.release() is True


def test_a_removed_permit_fires_the_signal_and_fails_the_hold(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    seen: list[bool] = []

    def body(permit: PermitHandle) -> None:
        r.zrem(permit.key, permit.token)
        signalled(permit.signal)
        seen.append(permit.held)  # not cancelled, though the loss was known

    with semaphore(redis_server) as sem:
        with pytest.raises(LockLeaseLostError) as info:
            sem.run("k", body, **UNCANCELLED)
    assert seen == [False]
    assert info.value.reason is LossReason.RENEW_REJECTED
    assert info.value.key == "sem:k"


def test_a_manual_extend_of_a_removed_permit_is_false_and_fires_the_signal(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with semaphore(redis_server) as sem:
        permit = sem.acquire("k")
        assert permit is not None
        assert permit.extend() is True
        r.zrem(permit.key, permit.token)
        assert permit.extend() is False
        assert permit.signal.aborted
        assert permit.release() is False


def test_an_expired_permit_is_never_renewed_back(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with semaphore(redis_server, limit=1) as sem:
        permit = sem.acquire("k", ttl_ms=1_000)
        assert permit is not None
        ends = expiry_of(r, permit)
        assert ends is not None
        until_redis_passes(r, ends)
        # The key may still be there (Redis expires it lazily or on its next sweep), but a
        # permit past its instant is not ours: extending it would exceed the limit.
        assert permit.extend() is False
        assert permit.release() is False


def test_the_completion_check_reports_a_body_that_outlived_its_permit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    def body(permit: PermitHandle) -> None:
        ends = expiry_of(r, permit)
        assert ends is not None
        until_redis_passes(r, ends)

    with semaphore(redis_server, limit=1, ttl_ms=1_000, heartbeat_ms=False) as sem:
        with pytest.raises(LockLeaseLostError) as info:
            sem.run("k", body)
    # Whichever sees it first: the timer at the deadline, or the check at the body's end.
    assert info.value.reason in (LossReason.DEADLINE_PASSED, LossReason.DEADLINE_AT_COMPLETION)
    assert r.exists("sem:k") == 0


def test_a_resent_release_is_answered_as_released(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with semaphore(redis_server) as sem:
        a, b = sem.acquire("k"), sem.acquire("k")
        assert a is not None and b is not None
        assert a.release() is True and b.release() is True
    memory = permits_released_key("sem:k")
    # The client library resends both releases (their replies were lost): each token is
    # remembered on its own.
    for token in (a.token, b.token):
        assert r.eval(S_RELEASE.source, 2, "sem:k", memory, token, RELEASE_MEMORY_MS) == 1
    assert r.eval(S_RELEASE.source, 2, "sem:k", memory, "f" * 32, RELEASE_MEMORY_MS) == 0
    assert r.pttl(memory) > 0


def test_a_resent_acquire_takes_no_second_permit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with semaphore(redis_server) as sem:
        a, b = sem.acquire("k"), sem.acquire("k")
        assert a is not None and b is not None
    # Our own acquire run again (a resend after a lost reply) at the limit: granted, once.
    assert r.eval(S_ACQUIRE.source, 1, "sem:k", a.token, TTL, 2) == 1
    assert r.zcard("sem:k") == 2
    assert r.eval(S_ACQUIRE.source, 1, "sem:k", "f" * 32, TTL, 2) == 0


def test_expired_permits_are_evicted_by_the_next_acquire(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    past = redis_ms(r) - 1
    r.zadd("sem:k", {f"dead{i}": past - i for i in range(500)})
    with semaphore(redis_server) as sem:
        permit = sem.acquire("k")
        assert permit is not None
        assert r.zrange("sem:k", 0, -1) == [permit.token.encode()]
        assert r.pexpiretime("sem:k") == expiry_of(r, permit)


def test_locks_and_semaphores_refuse_each_other_s_keys(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = client_for(redis_server)
    with (
        semaphore(redis_server) as sem,
        Lock(client, prefix="sem") as locks,
        ReentrantLock(client, prefix="sem") as rlocks,
    ):
        permit = sem.acquire("shared")
        assert permit is not None
        assert locks.acquire("shared") is None
        assert rlocks.acquire("shared") is None
        with pytest.raises(LockNotAcquiredError, match="sem:shared"):
            locks.run("shared", nothing)
        with pytest.raises(LockNotAcquiredError, match="sem:shared"):
            rlocks.run("shared", nothing)
        lock = locks.acquire("lock-held")
        rlock = rlocks.acquire("rlock-held")
        assert lock is not None and rlock is not None
        assert sem.acquire("lock-held") is None
        assert sem.acquire("rlock-held") is None
        with pytest.raises(LockNotAcquiredError, match="sem:lock-held"):
            sem.run("lock-held", nothing)
        with pytest.raises(LockNotAcquiredError, match="sem:rlock-held"):
            sem.run("rlock-held", nothing)
        assert r.get("sem:lock-held") == lock.token.encode()
        assert lock.release() is True and rlock.release() is True
        assert permit.held and permit.release() is True
    client.close()


def test_callers_with_different_limits_each_count_against_their_own(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with (
        semaphore(redis_server, limit=2) as two,
        semaphore(redis_server, limit=3) as three,
    ):
        assert two.acquire("k") is not None and two.acquire("k") is not None
        assert two.acquire("k") is None
        assert three.acquire("k") is not None  # 2 live < 3
        assert three.acquire("k") is None
        assert r.zcard("sem:k") == 3


BAD_LIMITS: list[object] = [0, -1, -3, 1.5, 2.0, "1", "2", True, False, None]


@pytest.mark.parametrize("limit", BAD_LIMITS)
def test_a_bad_limit_is_rejected_before_any_command(limit: object) -> None:
    made: list[int] = []

    def factory() -> Any:
        made.append(1)
        return closed_port_client()

    with pytest.raises(ValidationError, match="limit"):
        Semaphore(factory, limit=limit)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="limit"):
        Semaphore(closed_port_client(), limit=limit)  # type: ignore[arg-type]
    assert made == []


@pytest.mark.parametrize(
    "kwargs", [{"ttl_ms": 0}, {"retries": -1}, {"heartbeat_ms": 0}, {"ttl_ms": 1.5}]
)
def test_bad_options_are_rejected_before_any_command(kwargs: dict[str, Any]) -> None:
    # The client points at a closed port: a command sent would be a ConnectionError.
    with Semaphore(closed_port_client(), limit=1) as sem:
        with pytest.raises(ValidationError):
            sem.run("k", nothing, **kwargs)
        with pytest.raises(ValidationError):
            sem.hold("k", **kwargs)
        with pytest.raises(ValidationError):
            sem.acquire("", **{k: v for k, v in kwargs.items() if k != "heartbeat_ms"})


def test_a_closed_semaphore_says_so(redis_server: RedisServer) -> None:
    sem = Semaphore(client_for(redis_server), limit=1)
    sem.close()
    with pytest.raises(LockClosedError, match="this Semaphore is closed") as info:
        sem.acquire("k")
    assert info.value.primitive == "Semaphore" and info.value.key == sem.key("k")


def test_the_constructor_takes_a_lock_s_forms_and_a_required_limit(
    redis_server: RedisServer,
) -> None:
    client = client_for(redis_server)

    def factory() -> Any:
        return client

    with Semaphore(factory, limit=1, prefix="workers") as sem:
        assert sem.limit == 1 and sem.prefix == "workers"
        permit = sem.acquire("k")
        assert permit is not None and permit.key == "workers:k"
        assert permit.release() is True
    with pytest.raises(TypeError):
        Semaphore(client)  # type: ignore[call-arg]
    with Semaphore(client, limit=1) as default:
        assert default.prefix == "sem"
    client.close()


def test_a_semaphore_offers_only_what_it_supports(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """A Semaphore is no Lock: one permit at a time (no ``hold_many``/``run_many``), no
    one owner, and a permit has no fence: the attributes are absent, not ones that raise."""

    def fenced(permit: PermitHandle) -> bool:
        return hasattr(permit, "fence")

    with semaphore(redis_server) as sem:
        assert not isinstance(sem, Lock | ReentrantLock)
        for name in ("hold_many", "run_many", "owner"):
            assert not hasattr(Semaphore, name) and not hasattr(sem, name)
            with pytest.raises(AttributeError):
                getattr(sem, name)
        permit = sem.acquire("k")
        assert permit is not None and not isinstance(permit, LockHandle)
        assert not hasattr(PermitHandle, "fence") and not hasattr(permit, "fence")
        with pytest.raises(AttributeError):
            _ = permit.fence  # type: ignore[attr-defined]
        assert "fence" not in repr(permit)
        with sem.hold("k") as held:
            assert not hasattr(held, "fence") and held.held
        assert sem.run("k", fenced) is False
        assert permit.release() is True
        # What it does offer, as a Lock does.
        assert sem.locked("k") is False and sem.force_unlock("k") is False
        assert r.exists("sem:k") == 0


#: The documented ACL (docs/acl.md) for semaphores under the prefix "workers": the scripts'
#: commands only.
SEMAPHORE_ACL = documented_acl("worker")


def test_the_documented_acl_is_enough(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    admin.execute_command("ACL", "SETUSER", "worker", *SEMAPHORE_ACL)  # type: ignore[no-untyped-call]
    restricted = client_for(fresh_redis, username="worker", password="s3cret")

    def held(permit: PermitHandle) -> bool:
        return permit.held

    with Semaphore(restricted, prefix="workers", limit=2, ttl_ms=10_000) as sem:
        assert sem.run("1", held) is True
        permit = sem.acquire("2")
        assert permit is not None and permit.extend(20_000) is True
        admin.script_flush()  # EVALSHA fails, EVAL takes over
        assert permit.release() is True
    with pytest.raises(redis.exceptions.NoPermissionError):
        restricted.get("workers:1")
    assert admin.keys("workers:*") == []
    admin.close()
    restricted.close()


def test_inspect_shows_each_permit_with_its_time_left(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with semaphore(redis_server) as sem:
        long = sem.acquire("k")
        short = sem.acquire("k", ttl_ms=10_000)
        assert long is not None and short is not None
    dead = "0123456789abcdef0123456789abcdef"
    r.zadd("sem:k", {dead: redis_ms(r) - 1})  # expired, not yet evicted
    [held] = inspect(r, "sem").held
    assert (held.key, held.kind, held.redis_type, held.permit_count) == (
        "sem:k", "semaphore", "zset", 3
    )
    assert held.permits is not None
    # Soonest to expire first; time left by Redis's clock.
    assert [p.token_prefix for p in held.permits] == [dead[:8], short.token[:8], long.token[:8]]
    assert [p.live for p in held.permits] == [False, True, True]
    assert 0 < held.permits[1].ttl_ms <= 10_000 < held.permits[2].ttl_ms <= TTL
    assert held.as_dict()["permit_count"] == 3
    table = format_table(inspect(r, "sem"))
    assert f"sem:k: 3 permits: {dead[:8]} expired, {short.token[:8]} " in table


def test_the_inspector_s_read_only_acl_reads_semaphores(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    rules = ["on", ">s3cret", *read_only_acl("sem")]
    admin.execute_command("ACL", "SETUSER", "inspector", *rules)  # type: ignore[no-untyped-call]
    reader = redis.Redis(port=fresh_redis.port, username="inspector", password="s3cret")
    with Semaphore(client_for(fresh_redis), limit=2) as sem:
        permit = sem.acquire("k")
        assert permit is not None
        [held] = inspect(reader, "sem").held
        assert held.kind == "semaphore" and held.permits is not None
        assert held.permits[0].token_prefix == permit.token[:8]
    admin.close()
    reader.close()


def test_every_script_refuses_a_key_of_another_kind(r: redis.Redis) -> None:
    """No script of one primitive errors on another's key: each answers 0 (refused)."""
    token = "0123456789abcdef0123456789abcdef"
    r.set("sem:string", token, px=TTL)
    r.hset("sem:hash", mapping={token: 1, "fence": 1})
    r.zadd("sem:zset", {token: redis_ms(r) + TTL})

    def run(script: Script, keys: list[str], *args: str | int) -> Any:
        return r.eval(script.source, len(keys), *keys, *args)

    for key in ("sem:string", "sem:hash"):
        assert run(S_ACQUIRE, [key], token, TTL, 5) == 0
        assert run(S_RENEW, [key], token, TTL) == 0
        assert run(S_RELEASE, [key, permits_released_key(key)], token, 1_000) == 0
    zset = "sem:zset"
    assert run(ACQUIRE, [zset, fence_key(zset)], token, TTL) == 0
    assert run(EXTEND, [zset], token, TTL) == 0
    assert run(RELEASE, [zset, released_key(zset, token)], token, 1_000) == 0
    assert run(R_ACQUIRE, [zset, fence_key(zset)], token, TTL) == [0, 0]
    assert run(R_RENEW, [zset], token, TTL) == 0
    assert run(R_RELEASE, [zset, fence_key(zset), released_key(zset, token)], token, 1_000) == 0
    # Nothing was changed by the refusals.
    assert r.get("sem:string") == token.encode()
    assert r.hget("sem:hash", token) == b"1"
    assert r.zscore(zset, token) is not None


def test_a_permit_s_transitions_are_recorded_with_the_kind_and_limit(
    redis_server: RedisServer,
) -> None:
    events: list[dict[str, Any]] = []
    with semaphore(redis_server, limit=4, trace=events.append) as sem:
        sem.run("k", nothing)
    assert [e["action"] for e in events] == [
        "Acquire", "AcquireReply", "BodyDone", "Release", "ReleaseReply"
    ]
    acquire = events[0]
    assert (acquire["kind"], acquire["limit"], acquire["key"]) == ("semaphore", 4, "sem:k")
    assert all(e["fence"] is None for e in events)
    assert events[-1]["ok"] is True and events[-1]["outcome"] == "ok"


def test_a_silent_redis_is_a_loss_by_the_deadline(fresh_redis: RedisServer) -> None:
    client = client_for(fresh_redis)

    def body(permit: PermitHandle) -> None:
        fresh_redis.pause()  # renewals hang: no reply, no error
        try:
            signalled(permit.signal)
        finally:
            fresh_redis.resume()

    # Silence past the lease counted from the send time is the loss; the TTL only has to
    # be long enough that the grant itself is never late.
    with Semaphore(client, limit=2, ttl_ms=2_000) as sem:
        with pytest.raises(LockLeaseLostError) as info:
            sem.run("k", body)
    assert info.value.reason is LossReason.DEADLINE_PASSED
    client.close()
