"""What the ``distlock`` logger says, and that the library leaves its output to the
application: a loss names the primitive that was lost, a failed renewal says what failed,
and nothing reaches stderr unless the application configured logging."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError
from tests.failing_clients import FAILURE, AsyncFailsOneRenewal, FailsOneRenewal
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]


def test_a_lost_permit_is_logged_as_a_permit_not_a_lock(
    redis_server: RedisServer, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("ERROR", logger="distlock")
    sem = distlock.Semaphore(redis.Redis.from_url(redis_server.url), limit=2, prefix="lgs")

    def body(permit: distlock.PermitHandle) -> None:
        r.delete(permit.key)

    with sem, pytest.raises(LockLeaseLostError):
        sem.run("k", body)
    (message,) = _errors(caplog)
    assert "semaphore 'lgs:k'" in message and "permit lost" in message
    assert "lock" not in message.removeprefix("distlock:")


def test_a_lost_reentrant_lock_and_a_lost_lock_are_named_so(
    redis_server: RedisServer, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("ERROR", logger="distlock")
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    with distlock.ReentrantLock(client, prefix="lgr") as rlocks, pytest.raises(
        LockLeaseLostError
    ):
        rlocks.run("k", lambda h: r.delete(h.key))
    with distlock.Lock(client, prefix="lgl") as locks, pytest.raises(LockLeaseLostError):
        locks.run("k", lambda h: r.delete(h.key))
    first, second = _errors(caplog)
    assert "reentrant lock 'lgr:k' lost" in first
    assert "lock 'lgl:k' lost" in second and "reentrant" not in second
    client.close()


def test_a_failed_renewal_warning_carries_the_error_type_and_message(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="distlock")
    client = FailsOneRenewal(port=redis_server.port)
    renewed = threading.Event()
    locks = distlock.Lock(
        client, prefix="lgw", ttl_ms=60_000, heartbeat_ms=20,
        trace=lambda e: renewed.set() if e["action"] == "RenewReply" else None,
    )
    with locks:
        locks.run("k", lambda h: renewed.wait(30))
    assert client.failed.is_set()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings
    assert f"failed (1 in a row): ConnectionError: {FAILURE};" in warnings[0]
    client.close()


def test_asyncio_renewal_warning_carries_the_error_type_and_message(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="distlock")

    async def main() -> None:
        client = AsyncFailsOneRenewal(port=redis_server.port)
        renewed = asyncio.Event()
        locks = distlock.asyncio.Lock(
            client, prefix="lga", ttl_ms=60_000, heartbeat_ms=20,
            trace=lambda e: renewed.set() if e["action"] == "RenewReply" else None,
        )
        async with locks:
            async def body(h: distlock.asyncio.LockHandle) -> None:
                await asyncio.wait_for(renewed.wait(), 30)

            await locks.run("k", body)
        await client.aclose()

    asyncio.run(main())
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings and f"ConnectionError: {FAILURE}" in warnings[0]


def test_the_package_adds_a_null_handler_and_prints_nothing_unconfigured() -> None:
    """The library convention: a ``NullHandler`` on the package's logger, so that Python's
    last-resort handler does not print to stderr behind the application's back; an
    application that configures logging sees everything."""
    handlers = logging.getLogger("distlock").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    code = (
        "import logging, distlock\n"
        "logging.getLogger('distlock').error('distlock: lock %r lost', 'x')\n"
    )
    quiet = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert quiet.stderr == ""
    shown = subprocess.run(
        [sys.executable, "-c", "import logging; logging.basicConfig(level=logging.WARNING)\n"
         + code],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    assert "distlock: lock 'x' lost" in shown.stderr
