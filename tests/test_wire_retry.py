"""The direct send's retries are the connection's ``Retry``'s, exactly: the first attempt
goes out before the retry loop (two coroutines fewer on every reply), and a failure of it
is handed to the loop as the loop's own first.  Against attempts scripted to fail, for
each number of retries and failures, both drivers make the same attempts, the same
disconnects (with the same failure counts) and end the same way as the loop does with
every attempt inside it, as ``execute_command`` does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff

from distlock._async import wire as async_wire
from distlock._core.commands import Command, Op
from distlock._sync import wire as sync_wire

COMMAND = Command(Op.RELEASE, "k", "0" * 32, 1000)


class Attempts:
    """Attempts that fail with ``failures`` errors (a ``ConnectionError``, or a reply
    error for ``kind="response"``), then answer 1; and the disconnects they cause."""

    def __init__(self, failures: int, kind: str) -> None:
        self.failures = failures
        self.kind = kind
        self.made = 0
        self.disconnects: list[dict[str, Any]] = []

    def attempt(self) -> int:
        self.made += 1
        if self.made <= self.failures:
            if self.kind == "response":
                raise redis.ResponseError("an error reply")
            raise redis.ConnectionError(f"attempt {self.made}")
        return 1


class SyncConn:
    def __init__(self, attempts: Attempts, retries: int) -> None:
        self.attempts = attempts
        self.retry = redis.retry.Retry(NoBackoff(), retries)

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self.attempts.disconnects.append(kwargs)


class AsyncConn:
    def __init__(self, attempts: Attempts, retries: int) -> None:
        self.attempts = attempts
        self.retry = redis.asyncio.retry.Retry(NoBackoff(), retries)

    async def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self.attempts.disconnects.append(kwargs)


def _outcome(call: Any) -> tuple[str, object]:
    try:
        return ("reply", call())
    except Exception as error:
        return ("raised", str(error))


CASES = [
    (retries, failures, kind)
    for retries in (0, 1, 2, 3)
    for failures in (0, 1, 2, 3, 4)
    for kind in ("connection", "response")
]


@pytest.mark.parametrize(("retries", "failures", "kind"), CASES)
def test_the_sync_send_retries_as_the_loop_with_every_attempt_inside_it(
    retries: int, failures: int, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = Attempts(failures, kind)
    conn = SyncConn(expected, retries)
    want = _outcome(lambda: conn.retry.call_with_retry(expected.attempt, conn.disconnect))

    got = Attempts(failures, kind)
    monkeypatch.setattr(sync_wire, "script_reply", lambda *args: got.attempt())
    conn = SyncConn(got, retries)
    assert _outcome(lambda: sync_wire.send(None, COMMAND, conn)) == want
    assert got.made == expected.made
    # The loop's disconnects; a failure that leaves the send also drops the connection
    # (an error reply, read whole, leaves it clean).
    drops: list[dict[str, Any]] = [{}] if want[0] == "raised" and kind == "connection" else []
    assert got.disconnects == [*expected.disconnects, *drops]


@pytest.mark.parametrize(("retries", "failures", "kind"), CASES)
def test_the_asyncio_send_retries_as_the_loop_with_every_attempt_inside_it(
    retries: int, failures: int, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        expected = Attempts(failures, kind)
        conn = AsyncConn(expected, retries)

        async def attempt() -> int:
            return expected.attempt()

        async def fail(error: BaseException, count: int) -> None:
            await conn.disconnect(error=error, failure_count=count)

        try:
            want: tuple[str, object] = (
                "reply",
                await conn.retry.call_with_retry(attempt, fail, with_failure_count=True),
            )
        except Exception as error:
            want = ("raised", str(error))

        got = Attempts(failures, kind)

        async def scripted(*args: Any) -> int:
            return got.attempt()

        monkeypatch.setattr(async_wire, "script_reply", scripted)
        conn = AsyncConn(got, retries)
        try:
            have: tuple[str, object] = ("reply", await async_wire.send(None, COMMAND, conn))
        except Exception as error:
            have = ("raised", str(error))
        assert have == want
        assert got.made == expected.made
        loop = [d for d in got.disconnects if "nowait" not in d]
        assert [(d["failure_count"], str(d["error"])) for d in loop] == [
            (d["failure_count"], str(d["error"])) for d in expected.disconnects
        ]

    asyncio.run(main())
