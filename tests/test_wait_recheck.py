"""The waiting attempt's refusal: how long a waiter may block before it looks again.

These are the rules ``spec/Wait.tla`` refutes the lost wake-up without (its broken
variants ``wait-mutant-recheck-ignores-head-ticket`` and ``wait-mutant-recheck-ignores-ttl``),
checked on the script itself against a real Redis: a waiter first in line that holds the
wake-up may give up or die, and a waiter first in line may take the key and let it lapse.
"""

from __future__ import annotations

import redis

from distlock._core.commands import Command, Op
from distlock._core.waiting import HANDED_TTL_MS, LONGEST_BLOCK_MS, QUEUE_GRACE_MS
from distlock._protocol import encode, fence_key, queue_keys

KEY = "rc:k"
LONG_MS = 60_000


def handed_fence(r: redis.Redis, token: str) -> int:
    """The fence a release handed ``token`` (the one element of its wake list, ``=fence``):
    a new one, which the key's fence counter kept."""
    [element] = r.lrange(queue_keys(KEY)[2] + token, 0, -1)
    text = element.decode() if isinstance(element, bytes) else str(element)
    assert text.startswith("=")
    fence = int(text[1:])
    assert r.get(fence_key(KEY)) == str(fence).encode()
    return fence


def attempt(
    r: redis.Redis, token: str, queue_ms: int, ttl_ms: int = LONG_MS, handoff: bool = True
) -> list[int]:
    """One waiting attempt: ``[fence, recheck_ms]``.  Without ``handoff`` the waiter asks
    to be woken rather than handed the key (as one whose grants replicas must confirm)."""
    command = Command(Op.ACQUIRE, KEY, token, ttl_ms, queue_ms=queue_ms)
    command.hand_ms = min(ttl_ms, HANDED_TTL_MS) if handoff else 0
    script, keys, args = encode(command)
    return [int(x) for x in r.eval(script.source, len(keys), *keys, *args)]


def release(r: redis.Redis, token: str) -> int:
    script, keys, args = encode(Command(Op.RELEASE, KEY, token, LONG_MS))
    return int(r.eval(script.source, len(keys), *keys, *args))


def place_ends(r: redis.Redis, token: str) -> int:
    return int(r.hget(queue_keys(KEY)[1], token) or 0)


def test_behind_another_waiter_the_block_ends_with_its_place(r: redis.Redis) -> None:
    assert attempt(r, "holder", 0)[0] > 0  # held for a minute
    # First in line, with a place that ends in about the grace period (a waiter with
    # almost no wait left, which then gives up or dies).
    assert attempt(r, "first", 1)[0] == 0
    fence, recheck = attempt(r, "second", LONG_MS)
    assert fence == 0
    # Not the holder's minute: once "first"'s place ends holding a release's wake-up,
    # "second" is first with nobody to wake it.
    assert recheck <= QUEUE_GRACE_MS + 1


def test_a_free_key_behind_another_waiter_is_looked_at_within_a_lease(r: redis.Redis) -> None:
    assert attempt(r, "holder", 0)[0] > 0
    # A place of about a minute, for a waiter that is woken rather than handed the key.
    assert attempt(r, "first", LONG_MS, handoff=False)[0] == 0
    assert release(r, "holder") == 1  # free now; "first" is woken but has not come
    fence, recheck = attempt(r, "second", LONG_MS, ttl_ms=1_000)
    assert fence == 0
    # "first" may take the key and die with it: the key is free again within a lease.
    assert recheck <= 1_000


def test_a_place_never_ends_earlier_than_it_was_promised(r: redis.Redis) -> None:
    assert attempt(r, "holder", 0)[0] > 0
    assert attempt(r, "w", LONG_MS)[0] == 0
    promised = place_ends(r, "w")
    assert attempt(r, "w", 1)[0] == 0  # a later attempt with little wait left
    assert place_ends(r, "w") >= promised


def test_a_key_handed_over_takes_the_short_ttl_and_the_next_blocks_by_it(
    r: redis.Redis,
) -> None:
    held = attempt(r, "holder", 0)[0]
    assert held > 0
    assert attempt(r, "first", LONG_MS, ttl_ms=5_000)[0] == 0
    assert release(r, "holder") == 1  # handed to "first", with the short TTL it offered
    assert r.get(KEY) == b"first" and HANDED_TTL_MS - 1_000 < r.pttl(KEY) <= HANDED_TTL_MS
    handed = handed_fence(r, "first")  # its new fence
    assert handed > held
    assert r.hkeys(queue_keys(KEY)[1]) == []  # "first" is out of the queue
    fence, recheck = attempt(r, "second", LONG_MS)
    assert fence == 0 and recheck <= HANDED_TTL_MS
    # "first" never read the element (its block ended): its next attempt finds the key
    # its own, keeps the fence it was handed, and sets the TTL it asks for (a re-grant
    # that left the handed TTL would give it less than its clock counts).
    assert attempt(r, "first", LONG_MS, ttl_ms=5_000) == [handed, 0]
    assert r.pttl(KEY) > HANDED_TTL_MS


def test_a_dead_waiter_costs_the_queue_a_handed_ttl_not_its_own(r: redis.Redis) -> None:
    """A waiter with a 30 s TTL that died while queued is handed the key: it idles for
    the short handed TTL, not 30 s, and the next waiter is told to look again by then."""
    assert attempt(r, "holder", 0)[0] > 0
    assert attempt(r, "dead", LONG_MS, ttl_ms=30_000)[0] == 0  # ...and never comes back
    assert attempt(r, "live", LONG_MS, ttl_ms=30_000)[0] == 0
    assert release(r, "holder") == 1
    assert r.get(KEY) == b"dead" and r.pttl(KEY) <= HANDED_TTL_MS
    fence, recheck = attempt(r, "live", LONG_MS, ttl_ms=30_000)
    assert fence == 0 and recheck <= HANDED_TTL_MS


def test_a_dead_waiter_s_place_ends_a_block_and_a_grace_after_its_last_attempt(
    r: redis.Redis,
) -> None:
    """Whatever the holder's TTL, a waiter's place is renewed by attempts at least once
    per longest block, so one that died is dropped soon after."""
    assert attempt(r, "holder", 0)[0] > 0  # held for a minute
    assert attempt(r, "dead", LONG_MS)[0] == 0
    now_ms = int(r.time()[0]) * 1000 + int(r.time()[1]) // 1000
    assert place_ends(r, "dead") <= now_ms + LONGEST_BLOCK_MS + QUEUE_GRACE_MS + 50


def withdraw(r: redis.Redis, token: str) -> int:
    script, keys, args = encode(Command(Op.WITHDRAW, KEY, token, LONG_MS, queue_ms=0))
    return int(r.eval(script.source, len(keys), *keys, *args))


def test_a_waiter_that_stops_waiting_hands_a_key_handed_to_it_on(r: redis.Redis) -> None:
    assert attempt(r, "holder", 0)[0] > 0
    assert attempt(r, "first", LONG_MS)[0] == 0
    assert attempt(r, "second", LONG_MS, ttl_ms=7_000)[0] == 0
    assert release(r, "holder") == 1
    assert r.get(KEY) == b"first"
    first = handed_fence(r, "first")
    # "first" is cancelled before it reads the element: it holds nothing, so the key it
    # was handed goes on to "second", and nothing of "first" is left.
    assert withdraw(r, "first") == 1
    assert r.get(KEY) == b"second" and r.pttl(KEY) <= HANDED_TTL_MS
    assert handed_fence(r, "second") > first
    assert not r.exists(queue_keys(KEY)[2] + "first")
    assert r.llen(queue_keys(KEY)[0]) == 0


def test_a_refusal_empties_the_wake_list_of_a_key_handed_over_that_lapsed(
    r: redis.Redis,
) -> None:
    """A key handed to "first" expired before it read the grant, and another took the
    key: the grant left in its wake list must not reach its next block, where it would
    read as the key's."""
    assert attempt(r, "holder", 0)[0] > 0
    assert attempt(r, "first", LONG_MS, ttl_ms=5_000)[0] == 0
    assert release(r, "holder") == 1
    wake = queue_keys(KEY)[2] + "first"
    assert r.llen(wake) == 1  # the grant, unread
    r.delete(KEY)  # its lease ran out
    assert attempt(r, "other", 0)[0] > 0  # a fail-fast caller takes the free key
    fence, recheck = attempt(r, "first", LONG_MS, ttl_ms=5_000)
    assert fence == 0 and recheck > 0  # refused, queued again...
    assert r.llen(wake) == 0  # ...with nothing left to read as a grant
