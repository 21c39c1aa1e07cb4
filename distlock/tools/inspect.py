"""What is held under a prefix: a read-only look at one Redis node, for operators.

:func:`inspect` walks the keys ``<prefix>:*`` with ``SCAN`` (never ``KEYS``), and reads each
batch in one pipelined round trip: ``TYPE``, ``GETRANGE 0 32`` and ``PTTL`` of every key,
and ``GET`` of the fence counters of their slots.  A batch that holds hashes takes one more
round trip, for its hashes only: ``HLEN``, ``HRANDFIELD <key> 2 WITHVALUES`` and ``PTTL``,
so at most two fields of any hash are read, however large it is; a batch that holds sorted
sets takes one more, for them only: ``TIME``, then ``ZCARD``, ``ZRANGE <key> 0 63
WITHSCORES`` and ``PTTL``; one that holds waiting queues takes two more: ``TIME``,
``LLEN``, ``LRANGE <queue> 0 63`` and ``PTTL``, then ``HMGET`` of the places of the
waiters read.  It sends no write and no
script, so it is safe on a production Redis; a user limited to these read commands is
enough (:func:`read_only_acl`; for the prefix ``lock``)::

    ACL SETUSER inspector on >s3cret resetkeys %R~lock:* %R~distlock:fence:*
        -@all +scan +type +pttl +getrange +get +hlen +hrandfield +zcard +zrange +time
        +llen +lrange +hmget

(one line in redis-cli).

What each key is, is decided by its Redis ``TYPE`` (:data:`READERS`):

- ``lock``: a string holding a token (32 hex digits), the key of a :class:`distlock.Lock`;
- ``reentrant``: a hash of exactly two fields, ``<token>`` -> depth (an integer >= 1) and
  ``fence`` -> the fence issued at the outermost grant, the key of a
  :class:`distlock.ReentrantLock`; any other hash is ``unknown``;
- ``semaphore``: a sorted set of tokens scored by their expiry instants in Redis's clock,
  the key of a :class:`distlock.Semaphore`: its permits (:class:`Permit`) are listed with
  the time each has left, measured on Redis's clock (``TIME``), never the inspector's;
- ``fence-counter``, ``release-record``, ``queue``, ``queue-places``, ``wake-list`` and
  ``leader-record``:
  distlock's own bookkeeping, ``distlock:<word>:{<tag>}`` or
  ``distlock:<word>:{<tag>}:<key>``, told by the ending of ``<word>`` (so that a family
  added later is recognised): ``fence``, ``...released`` (a release record, a string
  holding a token, one per released token, or a release memory, a sorted set of token
  -> forget instant, such as a semaphore's ``sem-released``), ``...queue`` (a waiting
  queue: its waiters, :class:`Waiter`, in order with the time each one's place has
  left), ``...queued`` (a queue's places), ``...wake`` (a waiter's wake list) and
  ``leader`` (an election's leader record: its last grant's token, identity and fence;
  the election's key itself is a ``lock``).  They live under
  ``distlock:``, so the scan of any other prefix never meets them; they are listed, under
  these kinds rather than as locks, only when the prefix is ``distlock`` (or starts with
  ``distlock:``);
- ``unknown``: anything else under the prefix (another type, or a string that is not a
  token), with its Redis type.  A primitive stored in another type adds its reader to
  :data:`READERS`.

The fence a :class:`distlock.Lock` holder was granted is not stored in Redis; what can be
known is its slot's counter (``fence_counter``): the last fence issued in the key's slot,
an upper bound on the holder's fence (other keys of the slot share the counter).  A
reentrant lock stores its holder's fence in its hash: ``fence`` is that exact value, and
``depth`` how deep its holder has entered.

A key that disappears while it is read (released, or expired, between ``SCAN`` and
``PTTL``), or a hash that changes type between its two round trips, is skipped.  Only the
node the client is connected to is read: for a Redis Cluster, inspect each primary.

>>> import redis
>>> from distlock.tools.inspect import inspect
>>> def show(client: redis.Redis) -> None:
...     for held in inspect(client, "order").held:
...         print(held.key, held.kind, held.ttl_ms, held.token_prefix, held.depth, held.fence)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distlock._base import _URL_SCHEMES
from distlock._core.commands import Kind
from distlock._operator import as_text
from distlock._protocol import fence_key, queue_keys, readers_key
from distlock.errors import LockError, ValidationError
from distlock.options import DEFAULT_PREFIX, check_prefix

#: The SCAN batch size: how many hash-table buckets one SCAN call visits on the server.
DEFAULT_COUNT: Final = 500

#: Kinds of held keys.
LOCK: Final = "lock"
REENTRANT: Final = "reentrant"
SEMAPHORE: Final = "semaphore"
READ_WRITE: Final = "read-write"
READER_SET: Final = "readers"
FENCE_COUNTER: Final = "fence-counter"
RELEASE_RECORD: Final = "release-record"
QUEUE: Final = "queue"
QUEUE_PLACES: Final = "queue-places"
LEADER_RECORD: Final = "leader-record"
WAKE_LIST: Final = "wake-list"
UNKNOWN: Final = "unknown"

#: distlock's bookkeeping keys: ``distlock:<word>:{<tag>}`` (a fence counter) or
#: ``distlock:<word>:{<tag>}:<key>``.  The word says what the key is, read by its ending
#: so that a family added later (a second queue, another release memory) is recognised:
#: ``...released`` a release record or memory, ``...queue`` a waiting queue, ``...queued``
#: a queue's places, ``...wake`` a waiter's wake list, ``fence`` a counter, ``readers`` a
#: read-write lock's readers.  A queue's family may carry its kind's mark before the tag
#: (``distlock:queue:r:{<tag>}:<key>``, a reentrant lock's; ``rw:``, a read-write lock's;
#: see ``distlock._protocol.queue_keys``).
_INTERNAL: Final = re.compile(
    r"distlock:([a-z][a-z-]*):(?:([a-z]+):)?\{[^}]*\}(?::(.*))?", re.S
)
#: The mark of a read-write lock's queue family: its waiters' places say their role.
_READ_WRITE_MARK: Final = "rw"
#: A read-write lock's hash: ``rw`` -> "1", and while a writer holds it ``w`` -> its token,
#: ``f`` -> its fence, ``x`` -> the instant its lease ends (ms of Redis's clock).  Read
#: with one HMGET of these four fields, whatever the hash holds.
_READ_WRITE_FIELDS: Final = ("rw", "w", "f", "x")
_FENCE_PREFIX: Final = "distlock:fence:"

#: How many waiters of one queue are read (the first ones: the head and those next).
WAITERS_READ: Final = 64

#: How many permits of one semaphore key are read (the soonest to expire first): the key
#: may hold as many as its callers' limit, and an operator needs the first few, not all.
PERMITS_READ: Final = 64

#: A token is 32 lowercase hex digits; reading 33 bytes tells a token from a longer string.
_TOKEN: Final = re.compile(r"[0-9a-f]{32}")
_TOKEN_READ: Final = 32  # GETRANGE's end index is inclusive: bytes 0..32

#: A reentrant lock's hash: two fields, ``<token>`` -> depth and ``fence`` -> fence, each an
#: integer >= 1 written by Redis (no sign, no leading zero, at most 19 digits: an int64).
_REENTRANT_FIELDS: Final = 2
_FENCE_FIELD: Final = "fence"
_POSITIVE: Final = re.compile(r"[1-9][0-9]{0,18}")

#: Characters special to SCAN's MATCH globs.
_GLOB: Final = re.compile(r"([*?\[\]\\])")


class InspectError(LockError):
    """Redis could not be read: it is unreachable, or it failed a command."""


class InspectRefusedError(InspectError):
    """Redis refused a command (an ACL): ``command`` is what was refused, ``permission``
    the ACL rule the user needs for it."""

    def __init__(self, command: str, permission: str, detail: str, key: str | None = None) -> None:
        on = f" on {key!r}" if key is not None else ""
        super().__init__(
            f"Redis refused {command}{on} ({detail}); the user needs {permission} "
            "(see the ACL in the docs of distlock.tools.inspect)",
            key,
        )
        self.command = command
        self.permission = permission


@dataclass(frozen=True, slots=True)
class Permit:
    """One permit of a semaphore key: its holder's token (first 8 characters) and the time
    it has left by Redis's clock; 0 or less is a permit that expired and that the next
    acquire evicts (it no longer counts against the limit)."""

    token_prefix: str
    ttl_ms: int

    @property
    def live(self) -> bool:
        return self.ttl_ms > 0

    def as_dict(self) -> dict[str, object]:
        return {"token_prefix": self.token_prefix, "ttl_ms": self.ttl_ms, "live": self.live}


@dataclass(frozen=True, slots=True)
class Waiter:
    """One waiter of a queue, in arrival order: its token (first 8 characters), the time
    its place has left by Redis's clock (``place_ms``; 0 or less: expired, dropped by the
    next script that reads the head; None: no place, it is leaving), the TTL a release
    hands it the key with (``handoff_ttl_ms``; None: it is woken instead, a semaphore's
    waiter, a read-write lock's, or one that waits for replicas), and in a read-write
    lock's queue its ``role``, ``"read"`` or ``"write"`` (None in every other queue)."""

    token_prefix: str
    place_ms: int | None
    handoff_ttl_ms: int | None = None
    role: str | None = None

    @property
    def live(self) -> bool:
        return self.place_ms is not None and self.place_ms > 0

    def as_dict(self) -> dict[str, object]:
        return {
            "token_prefix": self.token_prefix,
            "place_ms": self.place_ms,
            "handoff_ttl_ms": self.handoff_ttl_ms,
            "role": self.role,
            "live": self.live,
        }


@dataclass(frozen=True, slots=True)
class Held:
    """One key found under the prefix.

    ``ttl_ms`` is the time it has left (``PTTL``), or None when it has no TTL: such a key
    never expires (``stuck``, unless it is a fence counter, which never expires by
    design), and a lock in that state blocks its id until someone deletes it.
    ``token_prefix`` is the first 8 characters of the token it holds (locks, reentrant
    locks and release records).  ``fence_counter`` is, for a lock, the last fence issued
    in its slot (an upper bound on the holder's fence; None if the counter is gone), and
    for a fence counter its value.  ``depth`` and ``fence`` are a reentrant lock's: how
    deep its holder has entered, and the exact fence it was granted (stored in its hash);
    None for every other kind.  ``permits`` and ``permit_count`` are a semaphore's: its
    permits, soonest to expire first (at most :data:`PERMITS_READ` of them), and how many
    members its key holds, expired ones not yet evicted included (the limit is not stored:
    each caller passes its own).  ``waiters`` and ``waiter_count`` are a queue's: its
    first waiters in arrival order (the head first; at most :data:`WAITERS_READ`), and
    how many it holds.  ``remembered`` and
    ``remembered_count`` are a release memory's (a sorted set): the releases it remembers
    (token, and the ms before it forgets each), soonest forgotten first.

    A read-write lock's key (``read-write``) has its live writer's token in
    ``token_prefix`` and fence in ``fence`` (None while no writer holds it), its slot's
    counter in ``fence_counter`` (a reader's fence is that counter as it stood at its
    grant), ``readers`` and ``reader_count`` (its readers, soonest to expire first, at
    most :data:`PERMITS_READ`, and how many are live by Redis's clock), and ``waiters``
    and ``waiter_count`` (its queue, readers and writers in one, each waiter with its
    role); these four are None when the user may not read the sorted set and queue beside
    the key (``distlock:readers:*``, ``distlock:queue:*``), which the read-only ACL of a
    prefix other than ``distlock`` does not grant.  A read-write lock's readers' set,
    listed under ``--prefix distlock`` (``readers``), has the same ``readers`` and
    ``reader_count``.
    """

    key: str
    kind: str
    redis_type: str
    ttl_ms: int | None
    token_prefix: str | None = None
    fence_counter: int | None = None
    depth: int | None = None
    fence: int | None = None
    permits: tuple[Permit, ...] | None = None
    permit_count: int | None = None
    waiters: tuple[Waiter, ...] | None = None
    waiter_count: int | None = None
    remembered: tuple[Permit, ...] | None = None
    remembered_count: int | None = None
    readers: tuple[Permit, ...] | None = None
    reader_count: int | None = None

    @property
    def head(self) -> Waiter | None:
        """A queue's first waiter: the one a release wakes (or hands the key to)."""
        return self.waiters[0] if self.waiters else None

    @property
    def expires(self) -> bool:
        """False when the key has no TTL and will stay until it is deleted."""
        return self.ttl_ms is not None

    @property
    def stuck(self) -> bool:
        """No TTL where one is expected: every key but a fence counter (counters never
        expire by design) should go away on its own."""
        return not self.expires and self.kind != FENCE_COUNTER

    def as_dict(self) -> dict[str, object]:
        """The record as JSON-ready fields (``--json`` prints a list of these)."""
        return {
            "key": self.key,
            "kind": self.kind,
            "redis_type": self.redis_type,
            "ttl_ms": self.ttl_ms,
            "expires": self.expires,
            "stuck": self.stuck,
            "token_prefix": self.token_prefix,
            "fence_counter": self.fence_counter,
            "depth": self.depth,
            "fence": self.fence,
            "permits": None if self.permits is None else [p.as_dict() for p in self.permits],
            "permit_count": self.permit_count,
            "waiters": None if self.waiters is None else [w.as_dict() for w in self.waiters],
            "waiter_count": self.waiter_count,
            "remembered": (
                None if self.remembered is None else [p.as_dict() for p in self.remembered]
            ),
            "remembered_count": self.remembered_count,
            "readers": None if self.readers is None else [p.as_dict() for p in self.readers],
            "reader_count": self.reader_count,
        }


@dataclass(frozen=True, slots=True)
class Inspection:
    """What :func:`inspect` found: ``held`` sorted by key; ``truncated`` when ``limit``
    stopped the scan early (more keys may be held)."""

    prefix: str
    held: tuple[Held, ...]
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class Probe:
    """What one round trip read about one key, before it is given a kind."""

    key: str
    redis_type: str
    ttl_ms: int | None
    head: str | None  # the first 33 characters of a string value, else None
    counter: int | None  # the value of the key's slot fence counter, if any
    length: int | None = None  # a hash's HLEN, else None
    fields: tuple[tuple[str, str], ...] = ()  # at most two (field, value) pairs of a hash
    #: A sorted set's first members and the ms each has left by Redis's clock.
    members: tuple[tuple[str, int], ...] = ()
    #: A queue's first waiters, read with their places (None: not read).
    waiters: tuple[Waiter, ...] | None = None
    #: A hash's ``rw``, ``w``, ``f`` and ``x`` fields (None: absent), and Redis's clock
    #: when they were read (ms): what tells a read-write lock's key and its live writer.
    rw_fields: tuple[str | None, ...] = ()
    clock: int | None = None
    #: A read-write lock's readers and queue, read beside its key (see :func:`_beside`).
    beside: Beside | None = None


@dataclass(frozen=True, slots=True)
class Beside:
    """What a read-write lock keeps beside its key: its readers' set and its queue, as the
    user could read them (``readable`` False: refused by an ACL, the rest None)."""

    readable: bool
    readers: tuple[Permit, ...] | None = None
    reader_count: int | None = None
    waiters: tuple[Waiter, ...] | None = None
    waiter_count: int | None = None


def _live_count(members: tuple[tuple[str, int], ...], length: int) -> int:
    """Live members of a sorted set of expiry instants, from its first (soonest to expire)
    ``members`` and its ``length``: the expired ones come first, and are few (every
    script of the key evicts them)."""
    return length - sum(1 for _, left in members if left <= 0)


def internal_word(key: str) -> str | None:
    """The ``<word>`` of one of distlock's own keys (``distlock:<word>:{<tag>}...``), else
    None."""
    found = _INTERNAL.fullmatch(key)
    return None if found is None else found.group(1)


def _mark(key: str) -> str | None:
    """The kind's mark of one of distlock's own keys (``r``, ``rw``), else None."""
    found = _INTERNAL.fullmatch(key)
    return None if found is None else found.group(2)


def _is_queue(word: str | None) -> bool:
    return word is not None and word.endswith("queue")


def places_key(queue: str) -> str:
    """The places hash of the queue ``queue`` (``distlock:<word>d:...``: ``queue`` ->
    ``queued``, and so for any queue family)."""
    word = internal_word(queue)
    assert word is not None
    return f"distlock:{word}d:" + queue[len(f"distlock:{word}:"):]


def _read_string(probe: Probe) -> Held:
    """A string: a lock when it holds a token, or one of distlock's bookkeeping keys."""
    head = probe.head or ""
    token = head if _TOKEN.fullmatch(head) else None
    key, redis_type, ttl_ms = probe.key, probe.redis_type, probe.ttl_ms
    word = internal_word(key)
    if key.startswith(_FENCE_PREFIX) and head.isdigit():
        return Held(key, FENCE_COUNTER, redis_type, ttl_ms, fence_counter=int(head))
    if word is not None and word.endswith("released") and token is not None:
        return Held(key, RELEASE_RECORD, redis_type, ttl_ms, token_prefix=token[:8])
    if word is not None:
        return Held(key, UNKNOWN, redis_type, ttl_ms)
    if token is not None:
        return Held(key, LOCK, redis_type, ttl_ms, token[:8], probe.counter)
    return Held(key, UNKNOWN, redis_type, ttl_ms)


def _read_hash(probe: Probe) -> Held:
    """A hash: a reentrant lock when it is exactly ``{<token>: depth, "fence": fence}``; a
    queue's places (``distlock:...queued:``), listed by kind only (the queue's own row
    shows each waiter's place)."""
    key, redis_type, ttl_ms = probe.key, probe.redis_type, probe.ttl_ms
    word = internal_word(key)
    if word is not None:
        if word.endswith("queued"):
            return Held(key, QUEUE_PLACES, redis_type, ttl_ms)
        if word == "leader":
            return Held(key, LEADER_RECORD, redis_type, ttl_ms)
        return Held(key, UNKNOWN, redis_type, ttl_ms)
    if _is_read_write(probe):
        return _read_read_write(probe)
    fields = dict(probe.fields)
    fence = fields.pop(_FENCE_FIELD, None)
    if (
        probe.length == _REENTRANT_FIELDS
        and len(probe.fields) == _REENTRANT_FIELDS
        and fence is not None
        and _POSITIVE.fullmatch(fence)
    ):
        [(token, depth)] = fields.items()
        if _TOKEN.fullmatch(token) and _POSITIVE.fullmatch(depth):
            return Held(
                key, REENTRANT, redis_type, ttl_ms, token[:8], depth=int(depth), fence=int(fence)
            )
    return Held(key, UNKNOWN, redis_type, ttl_ms)


def _is_read_write(probe: Probe) -> bool:
    return probe.redis_type == "hash" and bool(probe.rw_fields) and probe.rw_fields[0] == "1"


def _read_read_write(probe: Probe) -> Held:
    """A read-write lock's hash: its live writer (a token whose lease ends after Redis's
    clock when read), and what was read beside it."""
    _, writer, fence, until = probe.rw_fields
    token: str | None = None
    writer_fence: int | None = None
    ends = _int_or_none(until)
    if (
        writer is not None
        and _TOKEN.fullmatch(writer)
        and ends is not None
        and probe.clock is not None
        and ends > probe.clock
    ):
        token = writer[:8]
        writer_fence = int(fence) if fence is not None and _POSITIVE.fullmatch(fence) else None
    beside = probe.beside or Beside(readable=False)
    return Held(
        probe.key,
        READ_WRITE,
        probe.redis_type,
        probe.ttl_ms,
        token,
        probe.counter,
        fence=writer_fence,
        waiters=beside.waiters,
        waiter_count=beside.waiter_count,
        readers=beside.readers,
        reader_count=beside.reader_count,
    )


def _read_zset(probe: Probe) -> Held:
    """A sorted set: a semaphore when every member read is a token; a release memory (a
    semaphore's ``distlock:sem-released:``, or any ``distlock:...released:`` kept as token
    -> forget instant), with the releases it remembers and how long each is kept."""
    key, redis_type, ttl_ms = probe.key, probe.redis_type, probe.ttl_ms
    word = internal_word(key)
    if not all(_TOKEN.fullmatch(member) for member, _ in probe.members):
        return Held(key, UNKNOWN, redis_type, ttl_ms)
    if word == READER_SET:
        readers = tuple(Permit(member[:8], left) for member, left in probe.members)
        return Held(
            key, READER_SET, redis_type, ttl_ms, readers=readers,
            reader_count=_live_count(probe.members, probe.length or 0),
        )
    if word is not None:
        if not word.endswith("released"):
            return Held(key, UNKNOWN, redis_type, ttl_ms)
        remembered = tuple(Permit(member[:8], left) for member, left in probe.members)
        return Held(
            key, RELEASE_RECORD, redis_type, ttl_ms, remembered=remembered,
            remembered_count=probe.length,
        )
    permits = tuple(Permit(member[:8], left) for member, left in probe.members)
    return Held(
        key, SEMAPHORE, redis_type, ttl_ms, permits=permits, permit_count=probe.length
    )


def _read_list(probe: Probe) -> Held:
    """A list: a waiting queue (``distlock:...queue:``), its waiters in order with their
    places; a waiter's wake list (``distlock:wake:``).  Any other list is ``unknown``."""
    key, redis_type, ttl_ms = probe.key, probe.redis_type, probe.ttl_ms
    word = internal_word(key)
    if _is_queue(word) and probe.waiters is not None:
        return Held(
            key, QUEUE, redis_type, ttl_ms, waiters=probe.waiters, waiter_count=probe.length
        )
    if word is not None and word.endswith("wake"):
        return Held(key, WAKE_LIST, redis_type, ttl_ms)
    return Held(key, UNKNOWN, redis_type, ttl_ms)


#: Redis TYPE -> how a key of that type is read.  Every other type is ``unknown``.
READERS: Final[dict[str, Callable[[Probe], Held]]] = {
    "string": _read_string,
    "hash": _read_hash,
    "zset": _read_zset,
    "list": _read_list,
}

#: The Redis types read by a second round trip of their own (:func:`_read_hashes`).
_SECOND_READ: Final = frozenset({"hash"})


def read_only_acl(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """The ACL rules (after ``ACL SETUSER <user>``) of a user that can inspect ``prefix``
    and nothing more: read access to its keys, the fence counters, and what a key's
    holders and waiters keep beside it (a read-write lock's readers, the queues and their
    places), and the read commands :func:`inspect` sends (``LLEN``, ``LRANGE`` and
    ``HMGET`` read waiting queues).  Add ``on`` and a password (``>...``)."""
    return [
        "resetkeys", f"%R~{match_pattern(prefix)}", "%R~distlock:fence:*",
        "%R~distlock:readers:*", "%R~distlock:queue:*", "%R~distlock:queued:*",
        "-@all", "+scan", "+type", "+pttl", "+getrange", "+get", "+hlen", "+hrandfield",
        "+zcard", "+zrange", "+time", "+llen", "+lrange", "+hmget",
    ]


def match_pattern(prefix: str) -> str:
    """The SCAN MATCH pattern of the keys ``<prefix>:<id>``, glob characters escaped."""
    return _GLOB.sub(r"\\\1", check_prefix(prefix)) + ":*"


def _slot_counter_key(key: bytes | str) -> str | None:
    """The fence counter of ``key``'s slot; None for a key that is not UTF-8 (distlock
    makes none)."""
    try:
        return fence_key(key.decode() if isinstance(key, bytes) else key)
    except UnicodeDecodeError:
        return None


def inspect(
    client: redis.Redis,
    prefix: str = DEFAULT_PREFIX,
    *,
    count: int = DEFAULT_COUNT,
    limit: int | None = None,
) -> Inspection:
    """List what is held under ``prefix`` on the node ``client`` is connected to.

    ``count`` is the SCAN batch size; ``limit`` stops after that many keys (the result is
    then ``truncated``).  Sends only SCAN, TYPE, GETRANGE, PTTL and GET, for hashes
    HLEN and HRANDFIELD (two fields at most), and for sorted sets TIME, ZCARD and ZRANGE
    (64 members at most).  Raises
    :class:`ValidationError` for a bad argument, :class:`InspectRefusedError` when an ACL
    refuses a command and :class:`InspectError` when Redis cannot be reached or fails.
    """
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValidationError(f"count must be a positive int, got {count!r}")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValidationError(f"limit must be a positive int or None, got {limit!r}")
    pattern = match_pattern(prefix)
    found: dict[str, Held] = {}
    truncated = False
    for batch in _scan(client, pattern, count):
        # SCAN may return a key twice; a key already read is not read again.
        fresh = [k for k in batch if as_text(k) not in found]
        for held in _read_batch(client, fresh, pattern):
            if limit is not None and len(found) >= limit:
                truncated = True
                break
            found[held.key] = held
        if truncated:
            break
    return Inspection(prefix, tuple(found[k] for k in sorted(found)), truncated)


def _scan(client: redis.Redis, pattern: str, count: int) -> Iterator[list[Any]]:
    cursor = 0
    while True:
        with _translated("SCAN", "+scan"):
            cursor, keys = client.scan(cursor=cursor, match=pattern, count=count)
        if keys:
            yield keys
        if int(cursor) == 0:
            return


def _read_batch(client: redis.Redis, keys: list[Any], pattern: str) -> list[Held]:
    """One round trip for the whole batch: TYPE, GETRANGE, PTTL of each key (PTTL last,
    so a key gone at any point of its reading is seen gone), then the fence counters; and
    one more for the batch's hashes, if it has any (:func:`_read_hashes`)."""
    if not keys:
        return []
    counters = sorted({c for c in map(_slot_counter_key, keys) if c is not None})
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
        pipe.getrange(key, 0, _TOKEN_READ)
        pipe.pttl(key)
    for counter in counters:
        pipe.get(counter)
    with _translated("a pipeline of TYPE, GETRANGE, PTTL and GET", "+type +pttl +getrange +get"):
        replies = pipe.execute(raise_on_error=False)
    n = 3 * len(keys)
    counter_values: dict[str, int | None] = {}
    for counter, reply in zip(counters, replies[n:], strict=True):
        _check(reply, "GET", counter, "distlock:fence:*")
        counter_values[counter] = _int_or_none(reply)
    probes: list[tuple[Any, Probe]] = []
    for i, raw in enumerate(keys):
        key = as_text(raw)
        kind, head_reply, ttl = replies[3 * i : 3 * i + 3]
        _check(kind, "TYPE", key, pattern)
        _check(ttl, "PTTL", key, pattern)
        redis_type = as_text(kind)
        if redis_type == "none" or ttl == -2:
            continue  # gone since SCAN: released, expired or deleted
        head: str | None = None
        if isinstance(head_reply, Exception):
            if redis_type == "string" or not _wrong_type(head_reply):
                _check(head_reply, "GETRANGE", key, pattern)
                continue  # a string replaced by another type while it was read
        else:
            head = as_text(head_reply)
        slot_counter = _slot_counter_key(raw)
        probe = Probe(
            key=key,
            redis_type=redis_type,
            ttl_ms=_ttl(ttl),
            head=head,
            counter=None if slot_counter is None else counter_values.get(slot_counter),
        )
        probes.append((raw, probe))
    held: list[Held] = []
    probes = _read_sorted_sets(client, probes, pattern)
    probes = _read_queues(client, probes, pattern)
    for probe in _beside(client, _read_hashes(client, probes, pattern), pattern):
        reader = READERS.get(probe.redis_type)
        if reader is None:
            held.append(Held(probe.key, UNKNOWN, probe.redis_type, probe.ttl_ms))
        else:
            held.append(reader(probe))
    return held


def _read_hashes(
    client: redis.Redis, probes: list[tuple[Any, Probe]], pattern: str
) -> list[Probe]:
    """The probes of a batch, its hashes completed by one more round trip: ``TIME``, then
    ``HLEN``, ``HRANDFIELD <key> 2 WITHVALUES`` (two fields at most, whatever the hash's
    size: a large foreign hash is never read whole), ``PTTL`` and ``HMGET`` of a
    read-write lock's four fields (``rw``, ``w``, ``f``, ``x``) of each.  No round trip
    when the batch has no hash.  A hash gone since its TYPE, or no longer a hash, is left
    out."""
    hashes = [i for i, (_, probe) in enumerate(probes) if probe.redis_type in _SECOND_READ]
    if not hashes:
        return [probe for _, probe in probes]
    pipe = client.pipeline(transaction=False)
    pipe.time()
    for raw, _ in (probes[i] for i in hashes):
        pipe.hlen(raw)
        pipe.hrandfield(raw, _REENTRANT_FIELDS, withvalues=True)
        pipe.pttl(raw)
        pipe.hmget(raw, _READ_WRITE_FIELDS)
    with _translated(
        "a pipeline of TIME, HLEN, HRANDFIELD, PTTL and HMGET",
        "+time +hlen +hrandfield +pttl +hmget",
    ):
        replies = pipe.execute(raise_on_error=False)
    clock = replies[0]
    _check(clock, "TIME", "", pattern)
    seconds, micros = clock
    now = int(seconds) * 1000 + int(micros) // 1000
    completed: dict[int, Probe | None] = {}  # by position in probes
    for n, i in enumerate(hashes):
        probe = probes[i][1]
        length, pairs, ttl, rw_fields = replies[1 + 4 * n : 5 + 4 * n]
        key = probe.key
        if any(isinstance(r, Exception) and _wrong_type(r) for r in (length, pairs, rw_fields)):
            completed[i] = None  # no longer a hash: it changed since its TYPE was read
            continue
        _check(length, "HLEN", key, pattern)
        _check(pairs, "HRANDFIELD", key, pattern)
        _check(ttl, "PTTL", key, pattern)
        _check(rw_fields, "HMGET", key, pattern)
        if length == 0 or ttl == -2:
            completed[i] = None  # gone since its TYPE was read
            continue
        completed[i] = Probe(
            key=key,
            redis_type=probe.redis_type,
            ttl_ms=_ttl(ttl),
            head=None,
            counter=probe.counter,
            length=int(length),
            fields=_pairs(pairs),
            rw_fields=tuple(None if v is None else as_text(v) for v in rw_fields),
            clock=now,
        )
    kept: list[Probe] = []
    for i, (_, probe) in enumerate(probes):
        read = completed.get(i, probe)
        if read is not None:
            kept.append(read)
    return kept


def _read_sorted_sets(
    client: redis.Redis,
    probes: list[tuple[Any, Probe]],
    pattern: str,
    denied: set[str] | None = None,
) -> list[tuple[Any, Probe]]:
    """The probes of a batch, its sorted sets completed by one more round trip: ``TIME``
    (a permit's expiry is an instant of Redis's clock, so its time left is measured on
    that clock too), then ``ZCARD``, ``ZRANGE <key> 0 63 WITHSCORES`` (the soonest to
    expire first, never the whole set) and ``PTTL`` of each.  No round trip when the batch
    has no sorted set.  One gone since its TYPE, or no longer a sorted set, is left out;
    so is one an ACL refuses, its key added to ``denied``, when that is given (else the
    refusal is raised)."""
    zsets = [i for i, (_, probe) in enumerate(probes) if probe.redis_type == "zset"]
    if not zsets:
        return probes
    pipe = client.pipeline(transaction=False)
    pipe.time()
    for raw, _ in (probes[i] for i in zsets):
        pipe.zcard(raw)
        pipe.zrange(raw, 0, PERMITS_READ - 1, withscores=True)
        pipe.pttl(raw)
    with _translated("a pipeline of TIME, ZCARD, ZRANGE and PTTL", "+time +zcard +zrange +pttl"):
        replies = pipe.execute(raise_on_error=False)
    clock = replies[0]
    _check(clock, "TIME", "", pattern)
    seconds, micros = clock
    now = int(seconds) * 1000 + int(micros) // 1000
    kept: list[tuple[Any, Probe]] = []
    completed: dict[int, Probe | None] = {}
    for n, i in enumerate(zsets):
        probe = probes[i][1]
        length, members, ttl = replies[1 + 3 * n : 4 + 3 * n]
        key = probe.key
        if any(isinstance(r, Exception) and _wrong_type(r) for r in (length, members)):
            completed[i] = None
            continue
        if _refused_to(denied, key, length, members, ttl):
            completed[i] = None
            continue
        _check(length, "ZCARD", key, pattern)
        _check(members, "ZRANGE", key, pattern)
        _check(ttl, "PTTL", key, pattern)
        if length == 0 or ttl == -2:
            completed[i] = None
            continue
        completed[i] = Probe(
            key=key,
            redis_type=probe.redis_type,
            ttl_ms=_ttl(ttl),
            head=None,
            counter=probe.counter,
            length=int(length),
            members=tuple((as_text(m), int(score) - now) for m, score in members),
        )
    for i, (raw, probe) in enumerate(probes):
        now_probe = completed.get(i, probe)
        if now_probe is not None:
            kept.append((raw, now_probe))
    return kept


def _read_queues(
    client: redis.Redis,
    probes: list[tuple[Any, Probe]],
    pattern: str,
    denied: set[str] | None = None,
) -> list[tuple[Any, Probe]]:
    """The probes of a batch, its waiting queues completed by two more round trips:
    ``TIME``, then ``LLEN``, ``LRANGE <queue> 0 63`` and ``PTTL`` of each queue; then
    ``HMGET`` of the places of the waiters read (their place's end, and the TTL a handoff
    gives them, or a read-write lock's waiter's role).  No round trip when the batch has
    no queue.  One gone since its TYPE, or no longer a list, is left out; so is one an ACL
    refuses, its key added to ``denied``, when that is given (else the refusal is
    raised)."""
    queues = [
        i for i, (_, probe) in enumerate(probes)
        if probe.redis_type == "list" and _is_queue(internal_word(probe.key))
    ]
    if not queues:
        return probes
    pipe = client.pipeline(transaction=False)
    pipe.time()
    for raw, _ in (probes[i] for i in queues):
        pipe.llen(raw)
        pipe.lrange(raw, 0, WAITERS_READ - 1)
        pipe.pttl(raw)
    with _translated("a pipeline of TIME, LLEN, LRANGE and PTTL", "+time +llen +lrange +pttl"):
        replies = pipe.execute(raise_on_error=False)
    clock = replies[0]
    _check(clock, "TIME", "", pattern)
    seconds, micros = clock
    now = int(seconds) * 1000 + int(micros) // 1000
    read: dict[int, tuple[int, int | None, list[str]]] = {}
    completed: dict[int, Probe | None] = {}
    for n, i in enumerate(queues):
        key = probes[i][1].key
        length, tokens, ttl = replies[1 + 3 * n : 4 + 3 * n]
        if any(isinstance(r, Exception) and _wrong_type(r) for r in (length, tokens)):
            completed[i] = None
            continue
        if _refused_to(denied, key, length, tokens, ttl):
            completed[i] = None
            continue
        _check(length, "LLEN", key, pattern)
        _check(tokens, "LRANGE", key, pattern)
        _check(ttl, "PTTL", key, pattern)
        if length == 0 or ttl == -2:
            completed[i] = None
            continue
        read[i] = (int(length), _ttl(ttl), [as_text(t) for t in tokens])
    if read:
        pipe = client.pipeline(transaction=False)
        for i, (_, _, tokens) in read.items():
            fields = [*tokens, *(">" + t for t in tokens)]
            pipe.hmget(places_key(probes[i][1].key), fields)
        with _translated("HMGET", "+hmget"):
            places = pipe.execute(raise_on_error=False)
        for (i, (length, ttl_ms, tokens)), values in zip(read.items(), places, strict=True):
            probe = probes[i][1]
            if isinstance(values, Exception) and (
                _wrong_type(values) or _refused_to(denied, probe.key, values)
            ):
                values = [None] * (2 * len(tokens))
            _check(values, "HMGET", places_key(probe.key), pattern)
            ends, handoffs = values[: len(tokens)], values[len(tokens) :]
            roles = _mark(probe.key) == _READ_WRITE_MARK
            completed[i] = Probe(
                key=probe.key,
                redis_type=probe.redis_type,
                ttl_ms=ttl_ms,
                head=None,
                counter=probe.counter,
                length=length,
                waiters=tuple(
                    Waiter(
                        token[:8],
                        None if (end := _int_or_none(e)) is None else end - now,
                        None if roles else _int_or_none(h),
                        ("write" if h is not None else "read") if roles else None,
                    )
                    for token, e, h in zip(tokens, ends, handoffs, strict=True)
                ),
            )
    kept: list[tuple[Any, Probe]] = []
    for i, (raw, probe) in enumerate(probes):
        now_probe = completed.get(i, probe)
        if now_probe is not None:
            kept.append((raw, now_probe))
    return kept


def _refused_to(denied: set[str] | None, key: str, *replies: object) -> bool:
    """Whether an ACL refused a read of ``key``, noted in ``denied`` (never when None)."""
    if denied is None or not any(
        isinstance(r, redis.exceptions.NoPermissionError) for r in replies
    ):
        return False
    denied.add(key)
    return True


def _beside(client: redis.Redis, probes: list[Probe], pattern: str) -> list[Probe]:
    """The probes of a batch, each read-write lock's completed with its readers' set and
    its queue (:class:`Beside`): read as a semaphore's set and a queue are, in the same
    round trips (three at most), a refusal by the ACL noted rather than raised, since the
    read-only ACL of a prefix grants no access to distlock's keys beside it."""
    found = [
        i for i, p in enumerate(probes) if _is_read_write(p) and internal_word(p.key) is None
    ]
    if not found:
        return probes
    names = {
        i: (readers_key(probes[i].key), queue_keys(probes[i].key, Kind.READ)[0]) for i in found
    }
    denied: set[str] = set()
    sets = _read_sorted_sets(
        client,
        [(z, Probe(z, "zset", None, None, None)) for z, _ in names.values()],
        pattern,
        denied,
    )
    queues = _read_queues(
        client,
        [(q, Probe(q, "list", None, None, None)) for _, q in names.values()],
        pattern,
        denied,
    )
    read = {p.key: p for _, p in [*sets, *queues]}
    completed = list(probes)
    for i, (zset, queue) in names.items():
        if zset in denied or queue in denied:
            beside = Beside(readable=False)
        else:
            readers = read.get(zset)
            waiting = read.get(queue)
            members = () if readers is None else readers.members
            beside = Beside(
                readable=True,
                readers=tuple(Permit(m[:8], left) for m, left in members),
                reader_count=0 if readers is None else _live_count(members, readers.length or 0),
                waiters=() if waiting is None else waiting.waiters,
                waiter_count=0 if waiting is None else waiting.length,
            )
        completed[i] = dataclasses.replace(probes[i], beside=beside)
    return completed


def _pairs(reply: object) -> tuple[tuple[str, str], ...]:
    """HRANDFIELD ... WITHVALUES as (field, value) pairs: a flat list under RESP2, a list
    of pairs under RESP3."""
    if not isinstance(reply, list | tuple):
        return ()
    if all(isinstance(item, list | tuple) for item in reply):
        return tuple((as_text(f), as_text(v)) for f, v in reply)
    items = iter(reply)
    return tuple((as_text(f), as_text(v)) for f, v in zip(items, items, strict=True))


def _ttl(reply: Any) -> int | None:
    """PTTL's reply as a TTL: None for a key without one (-1)."""
    return None if reply == -1 else int(reply)


def _int_or_none(reply: object) -> int | None:
    if isinstance(reply, bytes | str):
        text = as_text(reply)
        if text.lstrip("-").isdigit():
            return int(text)
    return None


def _wrong_type(error: Exception) -> bool:
    return str(error).startswith("WRONGTYPE")


def _check(reply: object, command: str, key: str, pattern: str) -> None:
    """Raise the typed error for a failed reply in a pipeline."""
    if not isinstance(reply, Exception):
        return
    if isinstance(reply, redis.exceptions.NoPermissionError):
        raise _refused(command, f"+{command.lower()}", reply, key, pattern) from reply
    raise InspectError(f"Redis failed {command} on {key!r}: {reply}", key) from reply


def _refused(
    command: str, permission: str, error: Exception, key: str | None, pattern: str | None
) -> InspectRefusedError:
    detail = str(error)
    if pattern is not None and "key" in detail.lower():
        permission = f"read access to the keys {pattern!r} (%R~{pattern})"
    return InspectRefusedError(command, permission, detail, key)


@contextlib.contextmanager
def _translated(command: str, permission: str) -> Iterator[None]:
    """Turn redis-py's errors raised by one step into distlock's typed ones."""
    try:
        yield
    except redis.exceptions.NoPermissionError as error:
        raise _refused(command, permission, error, None, None) from error
    except redis.exceptions.AuthenticationError as error:
        raise InspectError(
            f"Redis refused the credentials: {str(error).rstrip('.')}; check the user and "
            "password in the URL"
        ) from error
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
        raise InspectError(
            f"cannot reach Redis: {str(error).rstrip('.')}; check the URL and that Redis is running"
        ) from error
    except redis.exceptions.RedisError as error:
        raise InspectError(f"Redis failed {command}: {error}") from error


# -- the command line: python -m distlock inspect URL ---------------------------------------

#: Explains the fence column wherever it is shown.
FENCE_NOTE: Final = (
    "fence_counter is the last fence issued in the key's slot: an upper bound on the "
    "holder's fence"
)


#: Said under any semaphore's permits: a permit count has no limit to compare with.
LIMIT_NOTE: Final = (
    "a semaphore's limit is not stored in Redis: each caller passes its own, so a count of "
    "permits is all that can be read"
)


def _cell(text: str) -> str:
    return text if text.isprintable() else repr(text)


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def format_table(inspection: Inspection) -> str:
    """The human table of :func:`inspect`'s result: one row per key, sorted by key, and
    a warning naming every key that has no TTL."""
    held = inspection.held
    if not held:
        return f"nothing held under prefix {inspection.prefix!r}"
    header = ("KEY", "KIND", "TTL_MS", "TOKEN", "DEPTH", "FENCE", "FENCE_COUNTER")
    rows = [header]
    for h in held:
        kind = h.kind if h.kind != UNKNOWN else f"unknown ({h.redis_type})"
        ttl = str(h.ttl_ms) if h.ttl_ms is not None else "none!" if h.stuck else "none"
        token = h.token_prefix or "-"
        depth = _number(h.depth)
        fence = _number(h.fence)
        counter = _number(h.fence_counter)
        rows.append((_cell(h.key), kind, ttl, token, depth, fence, counter))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.append("")
    lines.append(
        f"{len(held)} key{'' if len(held) == 1 else 's'} under prefix {inspection.prefix!r}"
        " on this node"
    )
    if any(h.kind == LOCK and h.fence_counter is not None for h in held):
        lines.append(FENCE_NOTE)
    if any(h.kind == SEMAPHORE for h in held):
        lines.append(LIMIT_NOTE)
    persistent = [h.key for h in held if h.stuck]
    if persistent:
        lines.append(
            f"warning: {len(persistent)} key{'' if len(persistent) == 1 else 's'} without a "
            f"TTL (none!) will never expire: {', '.join(map(_cell, persistent))}; a lock in "
            "that state blocks its id until it is deleted"
        )
    for h in held:
        if h.kind == READ_WRITE:
            lines.append(_read_write_text(h))
            continue
        if h.readers is not None:
            shown = _permits(h.readers)
            lines.append(f"{_cell(h.key)}: {h.reader_count} live readers{_first(h)}: {shown}")
        if h.permits is not None:
            shown = ", ".join(
                f"{p.token_prefix} {p.ttl_ms} ms" if p.live else f"{p.token_prefix} expired"
                for p in h.permits
            )
            more = "" if h.permit_count == len(h.permits) else f" (first {len(h.permits)})"
            lines.append(f"{_cell(h.key)}: {h.permit_count} permits{more}: {shown}")
        if h.waiters is not None:
            more = "" if h.waiter_count == len(h.waiters) else f" (first {len(h.waiters)})"
            lines.append(
                f"{_cell(h.key)}: {h.waiter_count} waiters{more}, head first: "
                + ", ".join(_waiter_text(w) for w in h.waiters)
            )
        if h.remembered is not None:
            shown = ", ".join(
                f"{p.token_prefix} for {p.ttl_ms} ms" if p.live else f"{p.token_prefix} expired"
                for p in h.remembered
            )
            lines.append(f"{_cell(h.key)}: remembers {h.remembered_count} releases: {shown}")
    if inspection.truncated:
        lines.append("stopped at --limit: more keys may be held")
    return "\n".join(lines)


#: Said of a read-write lock's key whose readers and queue the user may not read.
BESIDE_NOTE: Final = (
    "readers and queue not read (no read access to distlock:readers:* and "
    "distlock:queue:*; a user with %R~distlock:* sees them)"
)


def _permits(permits: tuple[Permit, ...]) -> str:
    return ", ".join(
        f"{p.token_prefix} {p.ttl_ms} ms" if p.live else f"{p.token_prefix} expired"
        for p in permits
    )


def _first(h: Held) -> str:
    """`` (first N)`` when fewer readers were read than the key has live."""
    shown = 0 if h.readers is None else sum(1 for p in h.readers if p.live)
    return "" if h.reader_count is None or shown >= h.reader_count else f" (first {shown})"


def _read_write_text(h: Held) -> str:
    """The line under the table for a read-write lock's key: its writer, readers, queue."""
    writer = "no writer" if h.token_prefix is None else f"writer {h.token_prefix}"
    if h.token_prefix is not None and h.fence is not None:
        writer += f" fence {h.fence}"
    if h.reader_count is None or h.readers is None:
        return f"{_cell(h.key)}: read-write, {writer}; {BESIDE_NOTE}"
    live = tuple(p for p in h.readers if p.live)
    readers = f"{h.reader_count} live readers" + (
        f"{_first(h)}: {_permits(live)}" if live else ""
    )
    if h.waiters:
        more = "" if h.waiter_count == len(h.waiters) else f" (first {len(h.waiters)})"
        queue = f"{h.waiter_count} waiters{more}, head first: " + ", ".join(
            _waiter_text(w) for w in h.waiters
        )
    else:
        queue = "no waiters"
    return f"{_cell(h.key)}: read-write, {writer}; {readers}; {queue}"


def _waiter_text(waiter: Waiter) -> str:
    if waiter.place_ms is None:
        place = "no place (leaving)"
    elif waiter.live:
        place = f"place {waiter.place_ms} ms"
    else:
        place = "place expired"
    handoff = "" if waiter.handoff_ttl_ms is None else f", handed ttl {waiter.handoff_ttl_ms}"
    role = "" if waiter.role is None else f" ({waiter.role})"
    return f"{waiter.token_prefix}{role} {place}{handoff}"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url", metavar="URL",
        help="redis://, rediss:// or unix:// URL of one node; with --fences also "
        "postgresql:// or sqlite:///PATH",
    )
    parser.add_argument(
        "--fences", action="store_true",
        help="show the newest fence per resource that a distlock.fencing guard recorded at URL",
    )
    parser.add_argument(
        "--table", default="distlock_fences",
        help="with --fences: the SQL guard's table (default: distlock_fences)",
    )
    parser.add_argument(
        "--fence-prefix", default="distlock:fenced:",
        help="with --fences: the Redis guard's prefix (default: distlock:fenced:)",
    )
    parser.add_argument(
        "--prefix", default=DEFAULT_PREFIX, help=f"the Lock's prefix (default: {DEFAULT_PREFIX})"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of objects")
    parser.add_argument(
        "--count", type=_positive, default=DEFAULT_COUNT,
        help=f"SCAN batch size (default: {DEFAULT_COUNT})",
    )
    parser.add_argument("--limit", type=_positive, help="stop after this many keys")


def _client(url: str) -> redis.Redis:
    """A client that fails fast: a few seconds to connect, one retry, no long backoff.
    Options in the URL's query string (``?socket_timeout=30``) win over these."""
    if not url.startswith(_URL_SCHEMES):
        raise ValidationError(f"the URL must start with {', '.join(_URL_SCHEMES)}; got {url!r}")
    try:
        return redis.Redis.from_url(
            url,
            socket_connect_timeout=5,
            socket_timeout=10,
            retry=Retry(NoBackoff(), 1),
        )
    except ValueError as exc:
        raise ValidationError(f"bad Redis URL {url!r}: {exc}") from exc


def run_cli(args: argparse.Namespace) -> int:
    """0 when the node was read (also when nothing is held), 2 for a bad URL or argument,
    1 when Redis could not be read; errors are one line on stderr."""
    if args.fences:
        from distlock.tools import fences

        return fences.run(
            args.url, table=args.table, prefix=args.fence_prefix,
            limit=args.limit or 1000, as_json=args.json,
        )
    try:
        client = _client(args.url)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        inspection = inspect(client, args.prefix, count=args.count, limit=args.limit)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except InspectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    if args.json:
        print(json.dumps([h.as_dict() for h in inspection.held], indent=2))
        if inspection.truncated:
            print("stopped at --limit: more keys may be held", file=sys.stderr)
    else:
        print(format_table(inspection))
    return 0
