# Generated from tests/drivers/_async/test_logging.py by tools/unasync.py: do not edit.
"""What the ``distlock`` logger says, on both drivers against a real redis-server: a loss
is an error naming the primitive that was lost, a failed renewal a warning saying what
failed, a raising ``on_renew_error`` hook an error, and the happy path nothing.  (That the
package prints nothing unconfigured: ``tests/test_logging.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock import LockLeaseLostError
from distlock import Lock, LockHandle, PermitHandle, ReentrantLock, Semaphore
from tests.failing_clients import FAILURE
from tests.redis_server import RedisServer

from .concurrency import Event, FailsOneRenewal, client_for


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]


def renewal_seen(renewed: Event) -> Any:
    """A trace that sets ``renewed`` at a renewal's reply."""
    return lambda e: renewed.set() if e["action"] == "RenewReply" else None


def nothing(h: object) -> None:
    return None


def test_losses_and_failed_renewals_are_logged_and_the_happy_path_is_not(
    redis_server: RedisServer, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="distlock")
    with Lock(client_for(redis_server), prefix="h", ttl_ms=60_000) as locks:
        locks.run("quiet", nothing)
        assert caplog.records == []

        def body(h: LockHandle) -> None:
            r.delete(h.key)

        with pytest.raises(LockLeaseLostError):
            locks.run("lost", body)
    (record,) = caplog.records
    assert record.levelname == "ERROR"
    assert "h:lost" in record.getMessage() and "RELEASE_REJECTED" in record.getMessage()
    assert record.distlock_key == "h:lost"  # type: ignore[attr-defined]
    assert len(record.distlock_token) == 8  # type: ignore[attr-defined]


def test_a_failed_renewal_is_a_warning(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="distlock")
    client = FailsOneRenewal(port=redis_server.port)
    renewed = Event()
    locks = Lock(client, prefix="w", ttl_ms=60_000, heartbeat_ms=20, trace=renewal_seen(renewed))

    def body(h: LockHandle) -> None:
        renewed.wait()  # a failed renewal, then a good one

    with locks:
        locks.run("k", body)
    assert client.failed.is_set() and renewed.is_set()
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert warnings and "renewal of 'w:k' failed" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    client.close()


def test_a_failed_renewal_warning_carries_the_error_type_and_message(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="distlock")
    client = FailsOneRenewal(port=redis_server.port)
    renewed = Event()
    locks = Lock(
        client, prefix="lgw", ttl_ms=60_000, heartbeat_ms=20, trace=renewal_seen(renewed)
    )

    def body(h: LockHandle) -> None:
        renewed.wait()

    with locks:
        locks.run("k", body)
    assert client.failed.is_set()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings
    assert f"failed (1 in a row): ConnectionError: {FAILURE};" in warnings[0]
    client.close()


def test_an_on_renew_error_hook_that_raises_is_logged_and_renewal_goes_on(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="distlock")
    client = FailsOneRenewal(port=redis_server.port)
    renewed = Event()

    def hook(error: BaseException) -> None:
        raise RuntimeError("a bug in the hook")

    locks = Lock(
        client, prefix="hk", ttl_ms=60_000, heartbeat_ms=20, on_renew_error=hook,
        trace=renewal_seen(renewed),
    )

    def body(h: LockHandle) -> bool:
        renewed.wait()
        return True

    with locks:
        assert locks.run("k", body) is True
    assert any(
        r.levelname == "ERROR" and r.exc_info and "a bug in the hook" in str(r.exc_info[1])
        for r in caplog.records
    )
    client.close()


def test_a_lost_permit_is_logged_as_a_permit_not_a_lock(
    redis_server: RedisServer, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("ERROR", logger="distlock")
    sem = Semaphore(client_for(redis_server), limit=2, prefix="lgs")

    def body(permit: PermitHandle) -> None:
        r.delete(permit.key)

    with sem:
        with pytest.raises(LockLeaseLostError):
            sem.run("k", body)
    (message,) = errors(caplog)
    assert "semaphore 'lgs:k'" in message and "permit lost" in message
    assert "lock" not in message.removeprefix("distlock:")


def test_a_lost_reentrant_lock_and_a_lost_lock_are_named_so(
    redis_server: RedisServer, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("ERROR", logger="distlock")
    client = client_for(redis_server, decode_responses=True)

    def body(h: LockHandle) -> None:
        r.delete(h.key)

    with ReentrantLock(client, prefix="lgr") as rlocks:
        with pytest.raises(LockLeaseLostError):
            rlocks.run("k", body)
    with Lock(client, prefix="lgl") as locks:
        with pytest.raises(LockLeaseLostError):
            locks.run("k", body)
    first, second = errors(caplog)
    assert "reentrant lock 'lgr:k' lost" in first
    assert "lock 'lgl:k' lost" in second and "reentrant" not in second
    client.close()
