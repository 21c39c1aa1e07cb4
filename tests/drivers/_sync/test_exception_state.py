# Generated from tests/drivers/_async/test_exception_state.py by tools/unasync.py: do not edit.
"""A failure a call raises leaves nothing in the caller's exception state: once the caller
has handled it, no exception is being handled, and the next error carries no context from
an earlier one.

Compiled with mypyc, a generator shares its caller's exception state.  A flow that caught
the error a driver threw into it, and then yielded the cleanup inside its ``except`` block,
left that error as the exception being handled when it finished.  Every later error chained
onto the one before, so the chain (and the memory its tracebacks hold) grew with every
failure.  These tests fail on such a build; a pure build never had the fault."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from distlock import Lock
from tests.redis_server import RedisServer

from .concurrency import client_for, exceptions_being_handled

#: Failures in a row: a leak shows from the second on.
ROUNDS = 3


def _user(server: RedisServer, name: str, *rules: str) -> None:
    admin = redis.Redis(port=server.port)
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", name, "reset", "on", ">s3cret", "~*", "&*", "+@all", *rules
    )
    admin.close()


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__context__


def _nothing_left(failure: BaseException, earlier: list[BaseException]) -> None:
    assert exceptions_being_handled() == [], "an exception is still being handled"
    assert not [e for e in _chain(failure) if e in earlier], "chained onto an earlier failure"
    earlier.append(failure)


def test_a_failed_acquire_leaves_no_exception_being_handled(
    fresh_redis: RedisServer,
) -> None:
    """The acquire's script fails (a user without SET): the flow's cleanup release, and
    the error raised to the caller."""
    _user(fresh_redis, "noset", "-set")
    client = client_for(fresh_redis, username="noset", password="s3cret")
    earlier: list[BaseException] = []
    with Lock(client, prefix="es", retries=0) as locks:
        for _ in range(ROUNDS):
            with pytest.raises(redis.ResponseError) as failed:
                locks.acquire("a")
            _nothing_left(failed.value, earlier)
    client.close()


def test_a_failed_wait_in_a_group_leaves_no_exception_being_handled(
    fresh_redis: RedisServer,
) -> None:
    """The group's second key is held, and its waiter's block fails (a user without
    BLPOP): the withdrawal from the queue, the release of the first key, and the error."""
    _user(fresh_redis, "noblpop", "-blpop")
    admin = redis.Redis(port=fresh_redis.port)
    admin.set("es:b", "someone else", px=60_000)
    client = client_for(fresh_redis, username="noblpop", password="s3cret")
    earlier: list[BaseException] = []
    with Lock(client, prefix="es") as locks:
        for _ in range(ROUNDS):
            with pytest.raises(redis.exceptions.NoPermissionError) as failed:
                with locks.hold_many(["a", "b"], wait_ms=30_000):
                    raise AssertionError("never entered")
            _nothing_left(failed.value, earlier)
            assert admin.exists("es:a") == 0  # the first key was given back
    client.close()
    admin.close()
