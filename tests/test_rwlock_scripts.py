"""The read-write lock's scripts (``distlock/lua/rwlock_*.lua``), case by case, on what each
leaves in Redis: the key's hash, its readers, the fence counter, the queue and its places,
the wake lists and the release records, and what each reply says.

Each case sends the scripts as the drivers would (``EVALSHA`` of what
:func:`distlock._protocol.encode` makes), in some interleaving, and reads the keys
afterwards.  Nothing waits on time: a lease or a place that has ended is written as one, on
Redis's clock, so each case is fast and exact (but for a place that ends while a script
runs, made by giving the script work to do after its NOW, and checked to have ended
then).  ``tests/mutation.py`` names the script bug
each one catches; ``spec/ReadWrite.tla``'s RedisStep is what the replies follow.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock._core.commands import Command, Kind, Op
from distlock._core.waiting import LONGEST_BLOCK_MS, QUEUE_GRACE_MS
from distlock._fence_floor import floor_at
from distlock._protocol import (
    RELEASE_MEMORY_MS,
    encode,
    fence_key,
    queue_keys,
    readers_key,
    released_key,
)

KEY = "rwt:k"
READERS = readers_key(KEY)
FENCES = fence_key(KEY)
QUEUE, PLACES, WAKE = queue_keys(KEY, Kind.READ)
TTL = 60_000
#: A waiting attempt's wait: its place ends LONGEST_BLOCK_MS + QUEUE_GRACE_MS from now.
WAIT = 5_000
PLACE_MS = LONGEST_BLOCK_MS + QUEUE_GRACE_MS
R1, R2, R3 = "1" * 32, "2" * 32, "3" * 32
W1, W2, W3 = "a" * 32, "b" * 32, "c" * 32
READ, WRITE = Kind.READ, Kind.WRITE
#: A few ms for the steps of a case, where a reply counts down on Redis's clock.
SLACK = 1_000


def send(r: redis.Redis, command: Command) -> Any:
    """The script's reply, as Redis gives it (a list for an acquire, else an integer)."""
    script, keys, args = encode(command)
    try:
        return r.evalsha(script.sha, len(keys), *keys, *args)
    except redis.exceptions.NoScriptError:
        r.script_load(script.source)
        return r.evalsha(script.sha, len(keys), *keys, *args)


def acquire(
    r: redis.Redis, role: Kind, token: str, wait: int | None = None, ttl: int = TTL
) -> list[int]:
    """A fail-fast attempt (``wait`` None: ``{1, fence}`` or ``{0, 0}``) or a waiting one
    (``{fence, 0}``, ``{0, ms}``; ``wait`` 0: the last attempt)."""
    reply = send(r, Command(Op.ACQUIRE, KEY, token, ttl, kind=role, queue_ms=wait))
    return [int(v) for v in reply]


def renew(r: redis.Redis, role: Kind, token: str, ttl: int = TTL) -> int:
    return int(send(r, Command(Op.RENEW, KEY, token, ttl, kind=role)))


def release(r: redis.Redis, role: Kind, token: str) -> int:
    return int(send(r, Command(Op.RELEASE, KEY, token, TTL, kind=role)))


def withdraw(r: redis.Redis, role: Kind, token: str) -> int:
    return int(send(r, Command(Op.WITHDRAW, KEY, token, TTL, kind=role, queue_ms=0)))


def now(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def queued(r: Any) -> list[str]:
    return [t.decode() for t in r.lrange(QUEUE, 0, -1)]


def woken(r: Any, token: str) -> list[str]:
    return [e.decode() for e in r.lrange(WAKE + token, 0, -1)]


def place(r: Any, token: str) -> int:
    return int(r.hget(PLACES, token) or 0)


def readers(r: Any) -> dict[str, int]:
    return {t.decode(): int(s) for t, s in r.zrange(READERS, 0, -1, withscores=True)}


def writer(r: Any) -> dict[str, str]:
    fields = {k.decode(): v.decode() for k, v in r.hgetall(KEY).items()}
    assert fields.get("rw") == "1", fields
    return {k: v for k, v in fields.items() if k != "rw"}


def ended(r: redis.Redis) -> int:
    """An instant just passed on Redis's clock."""
    return now(r) - 1


# -- who is granted ----------------------------------------------------------------------


def test_readers_share_and_a_writer_waits_for_the_last(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, READ, R2)[0] == 1
    assert set(readers(r)) == {R1, R2}
    assert acquire(r, WRITE, W1) == [0, 0]
    assert writer(r) == {}
    assert queued(r) == []  # a fail-fast refusal takes no place
    assert release(r, READ, R1) == 1
    assert acquire(r, WRITE, W1) == [0, 0]  # R2 still reads
    assert release(r, READ, R2) == 1
    assert acquire(r, WRITE, W1)[0] == 1


def test_a_reader_is_refused_while_a_writer_holds(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, READ, R1) == [0, 0]
    assert acquire(r, WRITE, W2) == [0, 0]
    fence, ms = acquire(r, READ, R1, WAIT)
    assert fence == 0 and TTL - SLACK <= ms <= TTL  # blocks until the writer's lease ends
    assert readers(r) == {}


def test_a_reader_does_not_pass_a_writer_waiting_before_it(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0  # queued behind the reader
    assert r.hget(PLACES, ">" + W1) == b"w"
    # No writer holds, but one waits: a new reader, fail-fast or waiting, goes behind it.
    assert acquire(r, READ, R2) == [0, 0]
    assert acquire(r, READ, R3, WAIT)[0] == 0
    assert queued(r) == [W1, R3]
    assert r.hget(PLACES, ">" + R3) is None
    assert set(readers(r)) == {R1}
    # Once the reader is gone, the writer is first and alone.
    assert release(r, READ, R1) == 1
    assert acquire(r, READ, R3, WAIT)[0] == 0
    assert acquire(r, WRITE, W1, WAIT)[0] >= 1
    assert queued(r) == [R3]


def test_a_reader_before_a_waiting_writer_is_granted(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert queued(r) == [R1, W2, R2]
    assert release(r, WRITE, W1) == 1
    # R1 is before the waiting writer: granted; R2 is after it: refused.
    assert acquire(r, READ, R1, WAIT)[0] >= 1
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert set(readers(r)) == {R1}
    assert queued(r) == [W2, R2]


def test_a_reader_whose_place_ended_counts_every_writer_waiting(r: redis.Redis) -> None:
    """An ended place is no place: the reader is behind every live one (spec's Ahead)."""
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert release(r, WRITE, W1) == 1
    r.hset(PLACES, R2, ended(r))  # its attempt came too late: the place has ended
    assert acquire(r, READ, R2) == [0, 0]


def test_an_ended_place_queues_again_at_the_tail(r: redis.Redis) -> None:
    """A waiter whose place ended while it was not first takes a new one behind those that
    queued meanwhile, as if it had never waited (spec's Enqueued): its old one is not
    revived, neither for a reader, who would pass a waiting writer, nor for a writer."""
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    r.hset(PLACES, R2, ended(r))
    assert acquire(r, WRITE, W3, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert queued(r) == [R1, W2, W3, R2]
    assert place(r, R2) > now(r)
    r.hset(PLACES, W2, ended(r))
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert queued(r) == [R1, W3, R2, W2]
    assert r.hget(PLACES, ">" + W2) == b"w"
    # The writer is gone and the readers go first, but R2 now waits behind W3.
    assert release(r, WRITE, W1) == 1
    assert acquire(r, READ, R1, WAIT)[0] >= 1
    assert acquire(r, READ, R2, WAIT)[0] == 0


def test_a_free_key_goes_to_the_first_waiter(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert release(r, READ, R1) == 1
    # Free, but W1 waits: no other writer, fail-fast or waiting, takes it first.
    assert acquire(r, WRITE, W2) == [0, 0]
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert queued(r) == [W1, W2]
    fence = acquire(r, WRITE, W1, WAIT)[0]
    assert fence >= 1
    assert writer(r)["w"] == W1 and int(writer(r)["f"]) == fence
    assert queued(r) == [W2]


def test_expired_readers_are_evicted_and_count_for_nothing(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, READ, R2)[0] == 1
    r.zadd(READERS, {R1: ended(r)}, xx=True)  # R1 died: its own lease has ended
    assert renew(r, READ, R1) == 0
    assert set(readers(r)) == {R2}  # evicted by the renewal's look
    r.zadd(READERS, {R2: ended(r)}, xx=True)
    assert acquire(r, WRITE, W1)[0] >= 1
    assert readers(r) == {}


def test_an_expired_writer_counts_for_nothing(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    r.hset(KEY, "x", ended(r))  # W1 died: its lease has ended, the key lingers
    assert renew(r, WRITE, W1) == 0
    assert release(r, WRITE, W1) == 0
    assert acquire(r, READ, R1)[0] == 1
    assert set(readers(r)) == {R1}


# -- each lease its own ------------------------------------------------------------------


def test_each_reader_keeps_its_own_expiry(r: redis.Redis) -> None:
    """A reader's grant or renewal moves its own expiry only: a dead reader's lease ends
    at its own TTL, whoever else keeps renewing (spec's ReaderReclaimedAtOwnExpiry)."""
    assert acquire(r, READ, R1, ttl=1_000)[0] == 1
    short = readers(r)[R1]
    assert acquire(r, READ, R2)[0] == 1
    assert readers(r)[R1] == short
    assert renew(r, READ, R2) == 1
    assert readers(r)[R1] == short
    assert acquire(r, READ, R2)[0] == 1  # a resend
    assert readers(r)[R1] == short
    assert readers(r)[R2] > short + TTL // 2


def test_renewals_check_the_token(r: redis.Redis) -> None:
    assert renew(r, WRITE, W1) == 0
    assert renew(r, READ, R1) == 0
    assert r.exists(KEY, READERS) == 0
    assert acquire(r, WRITE, W1, ttl=1_000)[0] == 1
    x = writer(r)["x"]
    assert renew(r, WRITE, W2) == 0
    assert renew(r, READ, R1) == 0
    assert writer(r) == {"w": W1, "f": writer(r)["f"], "x": x}
    assert readers(r) == {}
    assert renew(r, WRITE, W1) == 1
    assert int(writer(r)["x"]) > int(x) + TTL // 2


def test_a_renewal_moves_the_keys_expiry(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1, ttl=1_000)[0] == 1
    assert renew(r, WRITE, W1) == 1
    x = int(writer(r)["x"])
    assert r.pexpiretime(KEY) == x
    assert release(r, WRITE, W1) == 1
    assert acquire(r, READ, R1, ttl=1_000)[0] == 1
    assert renew(r, READ, R1) == 1
    score = readers(r)[R1]
    assert score > now(r) + TTL // 2
    assert r.pexpiretime(KEY) == score == r.pexpiretime(READERS)


# -- fences ------------------------------------------------------------------------------


def test_a_writers_fence_is_new_and_readers_share_the_current_one(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    first = int(writer(r)["f"])
    assert int(r.get(FENCES) or 0) == first
    assert release(r, WRITE, W1) == 1
    one, fence1 = acquire(r, READ, R1)
    two, fence2 = acquire(r, READ, R2)
    assert one == two == 1
    assert fence1 == fence2 == first  # the counter as it stands: no new fence
    assert int(r.get(FENCES) or 0) == first
    assert release(r, READ, R1) == release(r, READ, R2) == 1
    granted, fence = acquire(r, WRITE, W2)
    assert granted == 1 and fence > first  # larger than any value a reader was given
    assert int(writer(r)["f"]) == fence == int(r.get(FENCES) or 0)


def test_a_reader_on_a_slot_without_a_counter_makes_one(r: redis.Redis) -> None:
    before = floor_at(now(r))
    granted, fence = acquire(r, READ, R1)
    assert granted == 1 and fence >= before
    assert int(r.get(FENCES) or 0) == fence


def test_a_resent_write_acquire_keeps_its_fence_and_refreshes_its_lease(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1, ttl=1_000)[0] == 1
    fence = int(writer(r)["f"])
    assert acquire(r, WRITE, W1, WAIT) == [fence, 0]  # the same attempt, sent again
    assert acquire(r, WRITE, W1) == [1, fence]
    assert int(r.get(FENCES) or 0) == fence
    x = int(writer(r)["x"])
    assert x > now(r) + TTL // 2
    assert r.pexpiretime(KEY) == x


def test_a_resent_read_acquire_is_granted_past_a_waiting_writer(r: redis.Redis) -> None:
    assert acquire(r, READ, R1, ttl=1_000)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert acquire(r, READ, R1)[0] == 1  # a resend: its lease is live, whoever waits
    assert readers(r)[R1] > now(r) + TTL // 2
    assert acquire(r, READ, R1, WAIT)[0] >= 1
    assert queued(r) == [W1]


# -- the key's life ----------------------------------------------------------------------


def test_the_key_expires_with_its_latest_lease(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, READ, R2, ttl=1_000)[0] == 1
    latest = readers(r)[R1]
    assert r.pexpiretime(KEY) == latest == r.pexpiretime(READERS)
    assert release(r, READ, R1) == 1
    assert r.pexpiretime(KEY) == readers(r)[R2] == r.pexpiretime(READERS)
    assert release(r, READ, R2) == 1
    assert acquire(r, WRITE, W1)[0] == 1
    assert r.pexpiretime(KEY) == int(writer(r)["x"])
    assert r.exists(READERS) == 0


def test_the_key_goes_with_its_last_lease(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert release(r, WRITE, W1) == 1
    assert r.exists(KEY) == 0
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, READ, R2)[0] == 1
    assert release(r, READ, R1) == 1
    assert r.exists(KEY) == 1
    assert release(r, READ, R2) == 1
    assert r.exists(KEY, READERS) == 0


# -- release -----------------------------------------------------------------------------


def test_a_release_checks_the_token(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert release(r, WRITE, W2) == 0
    assert release(r, READ, R1) == 0
    assert writer(r)["w"] == W1
    assert release(r, WRITE, W1) == 1
    assert acquire(r, READ, R1)[0] == 1
    assert release(r, READ, R2) == 0
    assert release(r, WRITE, W2) == 0
    assert set(readers(r)) == {R1}


def test_a_resent_release_is_answered_from_its_record(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert release(r, WRITE, W1) == 1  # its reply is lost
    record = released_key(KEY, W1)
    assert r.get(record) == W1.encode()
    assert 0 < r.pttl(record) <= RELEASE_MEMORY_MS
    assert acquire(r, WRITE, W2)[0] == 1
    assert release(r, WRITE, W1) == 1  # the resend: released, though W2 holds
    assert writer(r)["w"] == W2
    assert release(r, WRITE, W2) == 1
    assert acquire(r, READ, R1)[0] == 1
    assert release(r, READ, R1) == 1
    assert release(r, READ, R1) == 1
    assert release(r, READ, R2) == 0  # never held: no record


def test_a_release_drops_its_place(r: redis.Redis) -> None:
    """A waiter whose attempt got no answer releases: whatever it took goes, its place too."""
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert release(r, READ, R1) == 0
    assert release(r, WRITE, W2) == 0
    assert queued(r) == []
    assert r.exists(PLACES) == 0


# -- wake-ups ----------------------------------------------------------------------------


def test_a_writers_release_wakes_the_first_waiter(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert release(r, WRITE, W1) == 1
    assert woken(r, W2) == ["1"]
    assert woken(r, R1) == []
    assert r.exists(KEY) == 0
    assert 0 < r.pttl(WAKE + W2) <= PLACE_MS


def test_a_readers_release_wakes_a_writer_only_when_no_reader_is_left(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, READ, R2)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert release(r, READ, R1) == 1
    assert woken(r, W1) == []  # R2 still keeps it out
    assert release(r, READ, R2) == 1
    assert woken(r, W1) == ["1"]


def test_a_readers_grant_wakes_the_next_reader_not_a_writer(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert release(r, WRITE, W1) == 1
    assert woken(r, R1) == ["1"] and woken(r, R2) == []
    # Readers reach the key one after another, each woken by the one before...
    assert acquire(r, READ, R1, WAIT)[0] >= 1
    assert woken(r, R1) == []
    assert woken(r, R2) == ["1"]
    # ...and the last wakes no writer that they keep out.
    assert acquire(r, READ, R2, WAIT)[0] >= 1
    assert woken(r, W2) == []
    assert queued(r) == [W2]


def test_a_waiter_already_woken_is_not_woken_twice(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert release(r, WRITE, W1) == 1
    assert woken(r, R1) == ["1"]
    # A reader that does not wait comes in before R1 attempts: its grant would wake R1,
    # whose list already holds the wake-up it will read.
    assert acquire(r, READ, R3)[0] == 1
    assert woken(r, R1) == ["1"] and woken(r, R2) == []


def add_ended_readers(r: redis.Redis, count: int) -> None:
    """``count`` readers whose leases ended long ago: a script's first read of the readers
    evicts them, which keeps it busy for some ms after its NOW."""
    r.eval(
        "local n, t = tonumber(ARGV[1]), {} "
        "for i = 1, n do "
        "  t[#t + 1] = 1; t[#t + 1] = 'ended' .. i "
        "  if #t == 2000 or i == n then redis.call('ZADD', KEYS[1], unpack(t)) t = {} end "
        "end",
        1, READERS, count,
    )


def test_the_waiter_chosen_is_woken_though_its_place_ends_as_the_script_runs(
    r: redis.Redis,
) -> None:
    """The release chooses whom to wake at its NOW, by role, and wakes that waiter: a first
    place that ends while the script runs (TIME moves on within it) does not pass the
    wake-up on to the next waiter, here a writer the reader left keeps out.  The place ends
    a few ms after the release is sent, among the evictions of many ended readers that come
    after its NOW; the case is tried again until the script's NOW was before that end (the
    place is still there: else the end is put later) and its release record was written
    after (else more ended readers are evicted)."""
    count, margin = 200_000, 10
    for _ in range(8):
        r.flushall()
        # R1 and R2 read; R3, first in line before the writer W2, took its wake-up (the
        # grant of R2 before it woke it) and went quiet.
        assert acquire(r, WRITE, W1)[0] == 1
        for token in (R1, R2, R3):
            assert acquire(r, READ, token, WAIT)[0] == 0
        assert acquire(r, WRITE, W2, WAIT)[0] == 0
        assert release(r, WRITE, W1) == 1
        assert acquire(r, READ, R1, WAIT)[0] >= 1
        assert acquire(r, READ, R2, WAIT)[0] >= 1
        assert queued(r) == [R3, W2] and woken(r, R3) == ["1"]
        r.delete(WAKE + R3)
        add_ended_readers(r, count)
        ends = now(r) + margin
        r.hset(PLACES, R3, ends)
        assert release(r, READ, R1) == 1
        assert woken(r, W2) == []  # R2 still reads
        written = r.pexpiretime(released_key(KEY, R1)) - RELEASE_MEMORY_MS
        if R3 not in queued(r):
            margin *= 2  # the release started after the place ended: a busy machine
        elif written < ends:
            count *= 2  # the script ended before the place did: more to evict
        else:
            break
    else:
        pytest.fail("no release's NOW came before the end of the place and its record after")
    assert queued(r) == [R3, W2]
    assert woken(r, R3) == ["1"]
    # Its wake list lasts the rest of the place as NOW saw it: past its end by the ms the
    # script ran after NOW.
    assert 0 < r.pexpiretime(WAKE + R3) - ends <= SLACK


def test_a_refused_attempt_clears_its_wake_list(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    r.rpush(WAKE + W2, "1")  # a wake-up that came before this attempt
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert woken(r, W2) == []


# -- places ------------------------------------------------------------------------------


def test_a_waiting_attempt_takes_a_place_at_the_tail_and_keeps_it(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    t0 = now(r)
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert queued(r) == [R1, W2]
    assert t0 + PLACE_MS <= place(r, R1) <= now(r) + PLACE_MS
    # A place never ends earlier than promised: a shorter wait keeps its end.
    promised = place(r, R1)
    assert acquire(r, READ, R1, 100)[0] == 0
    assert place(r, R1) == promised
    assert queued(r) == [R1, W2]
    for queue_key in (QUEUE, PLACES):
        assert promised <= r.pexpiretime(queue_key) <= now(r) + PLACE_MS


def test_a_last_attempt_refused_leaves_the_queue(r: redis.Redis) -> None:
    assert acquire(r, WRITE, W1)[0] == 1
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, 0) == [0, 0]
    assert queued(r) == [R1]
    assert r.hget(PLACES, ">" + W2) is None
    assert acquire(r, READ, R1, 0) == [0, 0]
    assert r.exists(QUEUE, PLACES) == 0


def test_a_last_attempt_refused_first_in_line_wakes_only_who_may_come_in(
    r: redis.Redis,
) -> None:
    # A writer first in line keeps out the readers behind it; its refused last attempt
    # takes it out of the queue, and the reader behind it, which a live reader's lease
    # does not keep out, is woken (as a withdrawal wakes it).
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert acquire(r, WRITE, W1, 0) == [0, 0]
    assert queued(r) == [R2] and woken(r, R2) == ["1"]
    # A writer behind it, which the live reader still keeps out, is not woken.
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert acquire(r, WRITE, W3, WAIT)[0] == 0
    assert queued(r) == [R2, W2, W3]
    assert withdraw(r, READ, R2) == 1
    assert acquire(r, WRITE, W2, 0) == [0, 0]
    assert queued(r) == [W3] and woken(r, W3) == []


def test_a_granted_waiter_leaves_the_queue(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert release(r, READ, R1) == 1
    assert acquire(r, WRITE, W1, WAIT)[0] >= 1
    assert r.exists(QUEUE, PLACES, WAKE + W1) == 0


def test_how_long_a_refused_waiter_may_block(r: redis.Redis) -> None:
    """Until the holder's lease ends, or sooner: the end of the first waiter's place (it
    may leave holding the wake-up), of a waiting writer's before it (the writer may take
    the key and let it lapse), cut to a lease; the place lasts the block, at most the
    longest, and a grace."""
    assert acquire(r, WRITE, W1)[0] == 1
    _, ms = acquire(r, READ, R1, WAIT)
    assert TTL - SLACK <= ms <= TTL
    assert place(r, R1) <= now(r) + PLACE_MS
    _, ms = acquire(r, READ, R2, WAIT)  # behind R1, whose place ends sooner
    assert PLACE_MS - SLACK <= ms <= PLACE_MS
    _, ms = acquire(r, WRITE, W2, WAIT)
    assert PLACE_MS - SLACK <= ms <= PLACE_MS
    # A writer that waits, not first: a reader behind it looks again when its place ends.
    t = now(r)
    r.hset(PLACES, R1, t + 50_000)
    r.hset(PLACES, W2, t + 3_000)
    _, ms = acquire(r, READ, R3, WAIT)
    assert 3_000 - SLACK <= ms <= 3_000
    # And the same on a free key, cut to one lease.
    assert release(r, WRITE, W1) == 1
    _, ms = acquire(r, READ, R3, WAIT)
    assert 3_000 - SLACK <= ms <= 3_000
    _, ms = acquire(r, READ, R3, WAIT, ttl=100)
    assert ms == 100


# -- withdrawal --------------------------------------------------------------------------


def test_a_first_waiter_that_withdraws_passes_the_wake_up_on(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert withdraw(r, WRITE, W1) == 1
    assert queued(r) == [R2]
    assert r.hget(PLACES, ">" + W1) is None
    assert woken(r, R2) == ["1"]  # nothing keeps the reader out now


def test_a_withdrawal_wakes_no_one_the_key_keeps_out(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert acquire(r, WRITE, W2, WAIT)[0] == 0
    assert withdraw(r, WRITE, W1) == 1
    assert woken(r, W2) == []  # the reader still holds
    assert release(r, READ, R1) == 1
    assert woken(r, W2) == ["1"]
    assert acquire(r, WRITE, W2, WAIT)[0] >= 1
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert acquire(r, READ, R3, WAIT)[0] == 0
    assert withdraw(r, READ, R2) == 1
    assert woken(r, R3) == []  # the writer holds
    assert queued(r) == [R3]


def test_a_withdrawal_not_first_wakes_no_one(r: redis.Redis) -> None:
    assert acquire(r, READ, R1)[0] == 1
    assert acquire(r, WRITE, W1, WAIT)[0] == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert acquire(r, READ, R3, WAIT)[0] == 0
    assert withdraw(r, READ, R2) == 1
    assert queued(r) == [W1, R3]
    assert woken(r, W1) == [] and woken(r, R3) == []


# -- another primitive's key ---------------------------------------------------------------


FOREIGN = [
    pytest.param(lambda r: r.set(KEY, "x" * 32, px=TTL), id="lock"),
    pytest.param(lambda r: r.hset(KEY, mapping={"x" * 32: 1, "fence": 7}), id="reentrant"),
    pytest.param(lambda r: r.zadd(KEY, {"x" * 32: now(r) + TTL}), id="semaphore"),
]


@pytest.mark.parametrize("occupy", FOREIGN)
def test_another_primitives_key_is_refused_and_left_alone(r: redis.Redis, occupy: Any) -> None:
    occupy(r)
    before = r.dump(KEY)
    assert acquire(r, READ, R1) == [0, 0]
    assert acquire(r, WRITE, W1) == [0, 0]
    _, ms = acquire(r, WRITE, W1, WAIT)
    ttl = r.pttl(KEY)
    busy = ttl if ttl > 0 else QUEUE_GRACE_MS  # a key with no expiry: looked at again soon
    assert busy <= ms <= busy + SLACK
    assert acquire(r, READ, R1, WAIT)[0] == 0
    assert renew(r, READ, R1) == renew(r, WRITE, W1) == 0
    assert release(r, WRITE, W2) == 0
    assert acquire(r, READ, R2, WAIT)[0] == 0
    assert withdraw(r, WRITE, W1) == 1  # first, but the key is not free: no one is woken
    assert woken(r, R1) == []
    assert r.dump(KEY) == before
    assert r.exists(READERS) == 0
