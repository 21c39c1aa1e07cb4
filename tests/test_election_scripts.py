"""The election's scripts, case by case, on what each leaves in Redis: the key, the leader
record beside it (``tok``, ``id``, ``fence``) and its TTL, the queue's places with their
``'#token'`` notes, the wake lists, and what each reply says.

A campaign, a withdrawal and a resignation are the lock's W_ACQUIRE, WITHDRAW and RELEASE
given the leader record (and the candidate's identity); E_RENEW and E_LEADER are the
election's own.  Each case sends the scripts as the drivers would (``EVALSHA`` of what
:func:`distlock._protocol.encode` makes of a ``Kind.CAMPAIGN`` command), in some
interleaving, and reads the keys afterwards.  Nothing waits on time: a place that has
ended is written as one, on Redis's clock.  ``tests/mutation.py`` names the script bug each
case catches; ``spec/Election.tla``'s RecordGrant and LeaderRead are what they follow.
"""

from __future__ import annotations

from typing import Any

import redis

from distlock import _protocol
from distlock._core.commands import Command, Kind, Op
from distlock._core.config import SectionConfig
from distlock._core.election import CampaignSection
from distlock._core.waiting import HANDED_TTL_MS, QUEUE_GRACE_MS
from distlock._leader import leader_call, read_leader
from distlock._protocol import (
    RELEASE,
    W_ACQUIRE,
    WITHDRAW,
    encode,
    fence_key,
    leader_key,
    queue_keys,
)

KEY = "elt:k"
RECORD = leader_key(KEY)
FENCES = fence_key(KEY)
QUEUE, PLACES, WAKE = queue_keys(KEY, Kind.CAMPAIGN)
TTL = 60_000
#: The TTL a release or a withdrawal hands the key over with (a renewed campaign's).
HAND = min(TTL, HANDED_TTL_MS)
WAIT = 5_000
A, B, C = "a" * 32, "b" * 32, "c" * 32
IDS = {A: "node-a", B: "node-b", C: "node-c"}
#: A few ms for the steps of a case, where a TTL counts down on Redis's clock.
SLACK = 1_000


def call(r: redis.Redis, script: _protocol.Script, keys: list[str], args: list[Any]) -> Any:
    try:
        return r.evalsha(script.sha, len(keys), *keys, *args)
    except redis.exceptions.NoScriptError:
        r.script_load(script.source)
        return r.evalsha(script.sha, len(keys), *keys, *args)


def send(r: redis.Redis, command: Command) -> Any:
    """The script's reply, as Redis gives it."""
    return call(r, *encode(command))


def campaign(r: redis.Redis, token: str, wait: int = WAIT, ttl: int = TTL) -> list[int]:
    """A candidate's attempt, asking to be handed the key as a renewed campaign does:
    ``{fence, 0}`` granted, ``{0, ms}`` refused and queued, ``{0, 0}`` its last (``wait``
    0) refused."""
    command = Command(
        Op.ACQUIRE, KEY, token, ttl, kind=Kind.CAMPAIGN, queue_ms=wait, identity=IDS[token]
    )
    command.hand_ms = min(ttl, HANDED_TTL_MS)
    return [int(v) for v in send(r, command)]


def resign(r: redis.Redis, token: str) -> int:
    return int(send(r, Command(Op.RELEASE, KEY, token, TTL, kind=Kind.CAMPAIGN)))


def withdraw(r: redis.Redis, token: str) -> int:
    command = Command(
        Op.WITHDRAW, KEY, token, TTL, kind=Kind.CAMPAIGN, queue_ms=0, identity=IDS[token]
    )
    return int(send(r, command))


def renew(r: redis.Redis, token: str, ttl: int = TTL) -> int:
    return int(send(r, Command(Op.RENEW, KEY, token, ttl, kind=Kind.CAMPAIGN)))


def leader(r: redis.Redis) -> list[Any]:
    """E_LEADER's reply, as Redis gives it."""
    return list(call(r, *leader_call(KEY)))


def record(r: Any) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in r.hgetall(RECORD).items()}


def notes(r: Any) -> dict[str, str]:
    """The places' '#token' fields: each queued candidate's identity."""
    return {
        k.decode()[1:]: v.decode() for k, v in r.hgetall(PLACES).items() if k.startswith(b"#")
    }


def queued(r: Any) -> list[str]:
    return [t.decode() for t in r.lrange(QUEUE, 0, -1)]


def woken(r: Any, token: str) -> list[str]:
    return [e.decode() for e in r.lrange(WAKE + token, 0, -1)]


def holder(r: Any) -> str | None:
    value = r.get(KEY)
    return value.decode() if value else None


def now(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def granted_with(r: Any, token: str) -> int:
    """The fence a release or a withdrawal handed ``token`` the key with (its wake list)."""
    (element,) = woken(r, token)
    assert element.startswith("=")
    return int(element[1:])


# -- the grant writes the record --------------------------------------------------------


def test_a_campaign_is_the_locks_waiting_acquire_with_the_record_and_the_identity() -> None:
    config = SectionConfig(TTL, watch=True, renew_every_ms=TTL // 3, wait_ms=WAIT)
    section = CampaignSection(KEY, A, config)
    section.identity = IDS[A]
    command = section.acquire(0.0).send
    assert command is not None and command.kind is Kind.CAMPAIGN
    script, keys, args = encode(command)
    assert script is W_ACQUIRE
    assert keys == [KEY, FENCES, QUEUE, PLACES, RECORD]
    assert args == [A, TTL, WAIT, QUEUE_GRACE_MS, WAKE, HAND, IDS[A]]


def test_a_granted_campaign_writes_the_record_with_the_keys_ttl(r: redis.Redis) -> None:
    fence, _ = campaign(r, A)
    assert fence > 0
    assert holder(r) == A
    assert record(r) == {"tok": A, "id": "node-a", "fence": str(fence)}
    assert TTL - SLACK < r.pttl(RECORD) <= TTL
    assert abs(r.pttl(RECORD) - r.pttl(KEY)) <= SLACK
    identity, text, ttl = leader(r)
    assert (identity, text) == (b"node-a", str(fence).encode())
    assert TTL - SLACK < ttl <= TTL
    assert notes(r) == {} and queued(r) == []


def test_a_refused_campaign_keeps_its_identity_in_its_place(r: redis.Redis) -> None:
    fence, _ = campaign(r, A)
    refused, ms = campaign(r, B)
    assert refused == 0 and ms > 0
    assert queued(r) == [B]
    assert notes(r) == {B: "node-b"}
    assert r.hget(PLACES, ">" + B) == str(HAND).encode()
    assert record(r) == {"tok": A, "id": "node-a", "fence": str(fence)}, "A's, untouched"
    assert campaign(r, B)[0] == 0  # a later attempt keeps its note
    assert notes(r) == {B: "node-b"}
    # Its last attempt refused: the candidate is out of the queue, its note with it.
    assert campaign(r, B, wait=0) == [0, 0]
    assert queued(r) == [] and notes(r) == {}
    assert r.hget(PLACES, B) is None and r.hget(PLACES, ">" + B) is None


# -- a handoff writes the next candidate's record ----------------------------------------


def test_a_resignation_hands_the_key_and_the_record_to_the_first_live_candidate(
    r: redis.Redis,
) -> None:
    first, _ = campaign(r, A)
    assert campaign(r, B)[0] == 0
    assert campaign(r, C)[0] == 0
    assert notes(r) == {B: "node-b", C: "node-c"}
    assert resign(r, A) == 1
    assert holder(r) == B
    fence = granted_with(r, B)
    assert fence > first
    assert record(r) == {"tok": B, "id": "node-b", "fence": str(fence)}
    assert HAND - SLACK < r.pttl(RECORD) <= HAND, "the record lives as the handed lease"
    assert abs(r.pttl(RECORD) - r.pttl(KEY)) <= SLACK
    assert queued(r) == [C] and notes(r) == {C: "node-c"}, "B left the queue, note and all"
    found = read_leader(leader(r))
    assert found is not None and (found.identity, found.fence) == ("node-b", fence)
    # B's first renewal gives its lease, and the record, B's own TTL.
    assert renew(r, B) == 1
    assert TTL - SLACK < r.pttl(RECORD) <= TTL
    assert leader(r)[:2] == [b"node-b", str(fence).encode()]


def test_a_withdrawal_of_the_candidate_handed_the_key_hands_it_on(r: redis.Redis) -> None:
    campaign(r, A)
    campaign(r, B)
    campaign(r, C)
    assert resign(r, A) == 1
    handed = granted_with(r, B)
    # B gives up before it reads its wake-up: the key it was handed goes on to C, with C's
    # identity, not B's (whose withdrawal carries B's identity) nor A's.
    assert withdraw(r, B) == 1
    assert holder(r) == C
    fence = granted_with(r, C)
    assert fence > handed
    assert record(r) == {"tok": C, "id": "node-c", "fence": str(fence)}
    assert HAND - SLACK < r.pttl(RECORD) <= HAND
    assert queued(r) == [] and notes(r) == {}
    assert leader(r)[:2] == [b"node-c", str(fence).encode()]


def test_a_withdrawal_first_in_line_before_a_free_key_hands_it_to_the_next(
    r: redis.Redis,
) -> None:
    campaign(r, A)
    campaign(r, B)
    campaign(r, C)
    r.delete(KEY)  # A's lease ran out: the key is free, B first in line
    assert withdraw(r, B) == 1
    assert holder(r) == C
    assert record(r) == {"tok": C, "id": "node-c", "fence": str(granted_with(r, C))}


def test_an_ended_place_is_dropped_with_its_note_and_the_next_candidate_is_handed_the_key(
    r: redis.Redis,
) -> None:
    campaign(r, A)
    campaign(r, B)
    campaign(r, C)
    r.hset(PLACES, B, now(r) - 1)  # B died waiting: its place has ended
    assert resign(r, A) == 1
    assert holder(r) == C
    assert record(r) == {"tok": C, "id": "node-c", "fence": str(granted_with(r, C))}
    assert r.hgetall(PLACES) == {}, "B's place, TTL and note dropped, C's left with it"
    assert queued(r) == [] and woken(r, B) == []


def test_a_handed_candidate_whose_place_kept_no_note_is_named_by_nothing_else(
    r: redis.Redis,
) -> None:
    campaign(r, A)
    campaign(r, B)
    r.hdel(PLACES, "#" + B)
    assert resign(r, A) == 1
    assert holder(r) == B
    assert record(r)["id"] == "", "never the resigning leader's, nor another's"


# -- a resend, a renewal ---------------------------------------------------------------


def test_a_resend_of_a_granted_campaign_rewrites_the_record_with_the_fence_it_returns(
    r: redis.Redis,
) -> None:
    first, _ = campaign(r, A)
    r.set(FENCES, first + 7)  # other keys of the slot drew fences since
    r.hset(RECORD, mapping={"id": "stale", "fence": "1"})
    r.pexpire(KEY, 5_000)
    r.pexpire(RECORD, 5_000)
    fence, _ = campaign(r, A)
    assert fence == first + 7, "held_as: the counter as it stands"
    assert record(r) == {"tok": A, "id": "node-a", "fence": str(fence)}
    assert TTL - SLACK < r.pttl(RECORD) <= TTL and TTL - SLACK < r.pttl(KEY) <= TTL


def test_a_renewal_resets_both_ttls_for_the_keys_holder_alone(r: redis.Redis) -> None:
    campaign(r, A)
    r.pexpire(KEY, 5_000)
    r.pexpire(RECORD, 5_000)
    assert renew(r, B) == 0, "not B's"
    assert 0 < r.pttl(KEY) <= 5_000 and 0 < r.pttl(RECORD) <= 5_000, "both left alone"
    assert renew(r, A) == 1
    assert TTL - SLACK < r.pttl(KEY) <= TTL and TTL - SLACK < r.pttl(RECORD) <= TTL
    r.delete(KEY)
    r.hset(KEY, mapping={A: 1, "fence": 7})  # another primitive's hash: not ours, no error
    r.pexpire(RECORD, 5_000)
    assert renew(r, A) == 0
    assert 0 < r.pttl(RECORD) <= 5_000 and r.ttl(KEY) == -1


# -- who leads ---------------------------------------------------------------------------


def test_leader_reports_nobody_for_a_free_key(r: redis.Redis) -> None:
    assert leader(r) == []
    campaign(r, A)
    r.delete(KEY)  # the lease ended; its record may outlive it by a ms
    assert leader(r) == []
    r.delete(RECORD)
    assert leader(r) == []


def test_leader_reports_nobody_when_the_record_names_another_token(r: redis.Redis) -> None:
    campaign(r, A)
    r.set(KEY, B, px=TTL)  # a stale record: the key holds a token the record does not name
    assert leader(r) == []
    r.delete(RECORD)
    assert leader(r) == [], "a lock's string, no record"
    # A key of another type (a reentrant lock's hash, a semaphore's sorted set) under a
    # record that names the token it holds: nobody leads, never WRONGTYPE.
    r.hset(RECORD, mapping={"tok": A, "id": "node-a", "fence": "7"})
    r.delete(KEY)
    r.hset(KEY, mapping={A: 1, "fence": 7})
    assert leader(r) == []
    r.delete(KEY)
    r.zadd(KEY, {A: 1})
    assert leader(r) == []


def test_leader_reports_the_identity_the_fence_as_text_and_the_keys_ttl(
    r: redis.Redis,
) -> None:
    campaign(r, A)
    big = str(2**53 + 1)  # beyond a Lua number's exact range: passed on as text
    r.hset(RECORD, "fence", big)
    r.pexpire(RECORD, 5_000)  # the key's TTL is reported, not the record's
    identity, fence, ttl = leader(r)
    assert (identity, fence) == (b"node-a", big.encode())
    assert TTL - SLACK < ttl <= TTL
    found = read_leader([identity, fence, ttl])
    assert found is not None and found.fence == 2**53 + 1


def test_the_fences_of_successive_leaders_increase(r: redis.Redis) -> None:
    fences = [campaign(r, A)[0]]
    assert resign(r, A) == 1  # nobody waits: the key is free
    assert leader(r) == []
    fences.append(campaign(r, B)[0])
    campaign(r, C)
    assert resign(r, B) == 1
    fences.append(granted_with(r, C))
    assert campaign(r, A)[0] == 0
    assert withdraw(r, C) == 1  # C gives back the key it was handed: A is next
    assert holder(r) == A
    fences.append(granted_with(r, A))
    assert fences == sorted(set(fences)), fences
    assert record(r) == {"tok": A, "id": "node-a", "fence": str(fences[-1])}


# -- the lock pays nothing for it -----------------------------------------------------------


def test_the_locks_own_waiting_scripts_write_no_record_and_no_note(r: redis.Redis) -> None:
    queue, places, wake = queue_keys(KEY, Kind.LOCK)
    client: Any = r

    def lock(op: Op, token: str, wait: int | None = None) -> Any:
        command = Command(op, KEY, token, TTL, queue_ms=wait)
        command.hand_ms = HAND if op is Op.ACQUIRE else 0
        script, keys, args = encode(command)
        assert script in (W_ACQUIRE, WITHDRAW, RELEASE)
        assert (len(keys), len(args)) == ((5, 2) if script is RELEASE else (4, 6))
        assert RECORD not in keys
        return call(r, script, keys, args)

    def written() -> set[str]:
        names = {k.decode() for k in client.keys("*")}
        assert not any(n.startswith("distlock:leader:") for n in names), names
        assert not any(f.startswith(b"#") for f in client.hkeys(places))
        return names

    assert lock(Op.ACQUIRE, A, WAIT)[0] > 0
    assert lock(Op.ACQUIRE, B, WAIT)[0] == 0
    assert lock(Op.ACQUIRE, C, WAIT)[0] == 0
    assert {k.decode() for k in client.hkeys(places)} == {B, ">" + B, C, ">" + C}
    written()
    assert lock(Op.RELEASE, A) == 1
    assert r.get(KEY) == B.encode()
    written()
    assert lock(Op.WITHDRAW, B, 0) == 1
    assert r.get(KEY) == C.encode()
    assert r.hgetall(places) == {} and r.exists(queue) == 0 and r.exists(wake + B) == 0
    written()
