"""An acquire resent for a token that already holds the key re-sets the key's TTL.

A client library resends an acquire whose reply was lost; the first run granted the key,
and part of its TTL has been spent by the time the resend runs.  The resend is answered
with the grant, and the caller's lease clock starts from the resend's send time: the key
must live the whole TTL asked from then, or the holder believes in a lease Redis ends
sooner.  Values, not timing: the TTL is cut far down by hand, and must come back close
to the one asked.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock._core.commands import Command, Kind, Op
from distlock._protocol import decode, encode

TTL = 60_000
SPENT = 1_000
TOKEN = "a" * 32

CASES = [
    pytest.param(Kind.LOCK, None, id="lock"),
    pytest.param(Kind.LOCK, 5_000, id="lock-waiting"),
    pytest.param(Kind.REENTRANT, None, id="reentrant"),
    pytest.param(Kind.REENTRANT, 5_000, id="reentrant-waiting"),
]


def send(r: redis.Redis, command: Command) -> int:
    script, keys, args = encode(command)
    reply: Any = r.eval(script.source, len(keys), *keys, *args)
    return decode(command, reply)


@pytest.mark.parametrize(("kind", "queue_ms"), CASES)
def test_a_resent_acquire_refreshes_the_ttl(
    r: redis.Redis, kind: Kind, queue_ms: int | None
) -> None:
    acquire = Command(Op.ACQUIRE, "refresh:k", TOKEN, TTL, kind=kind, queue_ms=queue_ms)
    fence = send(r, acquire)
    assert fence >= 1
    r.pexpire("refresh:k", SPENT)  # most of the lease spent before the resend runs
    assert send(r, acquire) == fence  # the resend is our own grant, with its fence
    assert r.pttl("refresh:k") > TTL // 2


@pytest.mark.parametrize("kind", [Kind.LOCK, Kind.REENTRANT], ids=["lock", "reentrant"])
def test_a_resent_acquire_of_another_s_key_changes_nothing(r: redis.Redis, kind: Kind) -> None:
    assert send(r, Command(Op.ACQUIRE, "refresh:k", "b" * 32, TTL, kind=kind)) >= 1
    r.pexpire("refresh:k", SPENT)
    assert send(r, Command(Op.ACQUIRE, "refresh:k", TOKEN, TTL, kind=kind)) == 0
    assert 0 < r.pttl("refresh:k") <= SPENT
