"""A release is remembered for every token released within the memory, not only the last.

Client A releases and its reply is lost; B acquires and releases the same key; then A's
client library sends A's release again.  The resend must be answered as released: A kept
its key to the end, and a memory of the last releaser only (B) would report A's section
lost.  Checked here on the scripts themselves, for the lock and the reentrant lock; through
both drivers in ``tests/drivers/_async/test_release_resend.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock._core.commands import Command, Kind, Op
from distlock._protocol import RELEASE_MEMORY_MS, encode

TTL = 60_000
KINDS = (Kind.LOCK, Kind.REENTRANT)


def send(r: redis.Redis, command: Command) -> int:
    script, keys, args = encode(command)
    reply: Any = r.eval(script.source, len(keys), *keys, *args)
    if isinstance(reply, list):
        return int(reply[1]) if int(reply[0]) == 1 else 0
    return int(reply)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name.lower())
def test_a_resend_after_another_release_is_answered_released(r: redis.Redis, kind: Kind) -> None:
    a, b = "a" * 32, "b" * 32

    def cmd(op: Op, token: str) -> Command:
        return Command(op, "mem:k", token, TTL, kind=kind)

    assert send(r, cmd(Op.ACQUIRE, a)) >= 1
    assert send(r, cmd(Op.RELEASE, a)) == 1  # its reply is lost
    assert send(r, cmd(Op.ACQUIRE, b)) >= 1
    assert send(r, cmd(Op.RELEASE, b)) == 1
    assert send(r, cmd(Op.RELEASE, a)) == 1  # A's resend: A's release, remembered
    assert send(r, cmd(Op.RELEASE, b)) == 1
    # Never released by this token: not ours, and not remembered as ours.
    assert send(r, cmd(Op.RELEASE, "c" * 32)) == 0
    assert r.get("mem:k") is None


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name.lower())
def test_each_record_is_short_lived(r: redis.Redis, kind: Kind) -> None:
    for token in ("a" * 32, "b" * 32):
        assert send(r, Command(Op.ACQUIRE, "mem:k", token, TTL, kind=kind)) >= 1
        assert send(r, Command(Op.RELEASE, "mem:k", token, TTL, kind=kind)) == 1
    records = r.keys("distlock:released:*")
    assert len(records) == 2
    assert all(0 < r.pttl(record) <= RELEASE_MEMORY_MS for record in records)
