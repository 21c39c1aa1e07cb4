"""The wire protocol: the Lua scripts, the keys they touch, and how a command becomes a call.

The scripts are files, ``distlock/lua/*.lua``, each with a header naming its KEYS, ARGV,
reply and spec action; :mod:`distlock._lua` assembles them with their shared pieces
(``distlock/lua/lib/``), once, at import.

Each script touches only keys in one Cluster hash slot (the fence counter is found
through :mod:`distlock._slots`; a key's queue and wake lists carry its slot's tag), so
every script is Redis Cluster compatible.  All are passed in KEYS except a waiter's wake
list, whose name a release learns only from the queue; it shares the slot's tag.
Scripts run atomically and see time frozen at their start, which is what
makes the token checks sound.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Final

from distlock._core.commands import Command, Kind, Op
from distlock._core.waiting import QUEUE_GRACE_MS
from distlock._lua import assemble_all
from distlock._queue_names import PLACES_PREFIX, QUEUE_PREFIX, WAKE_PREFIX
from distlock._slots import key_slot, slot_tag


class Script:
    __slots__ = ("_head", "sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        #: ``EVALSHA <sha>`` as RESP bulk strings (see :func:`pack_evalsha`).
        self._head = b"$7\r\nEVALSHA\r\n$40\r\n" + self.sha.encode() + b"\r\n"

    def __repr__(self) -> str:
        return f"Script({self.sha[:8]})"


#: Every script's text, by its file's name (``acquire`` for ``distlock/lua/acquire.lua``):
#: assembled once, at import, with its pieces (see :mod:`distlock._lua`).  Each file's
#: header says what its KEYS and ARGV are, what it returns and which spec action it
#: implements; the constants below are the files, one for one.
_SOURCES: Final = assemble_all()

#: How long a release is remembered, so that a resend of it (a client library retrying a
#: release whose reply was lost) is answered as released instead of "not ours".  It must
#: outlast the client's retries; redis-py 8's default policy gives up within seconds.
RELEASE_MEMORY_MS: Final = 30_000

# -- the lock: a string <token> under the lock key --------------------------------------
ACQUIRE: Final = Script(_SOURCES["acquire"])
W_ACQUIRE: Final = Script(_SOURCES["w_acquire"])
WITHDRAW: Final = Script(_SOURCES["withdraw"])
EXTEND: Final = Script(_SOURCES["extend"])
RELEASE: Final = Script(_SOURCES["release"])

# -- the reentrant lock: a hash {<token>: depth, fence: <fence>} under the lock key ---------
R_ACQUIRE: Final = Script(_SOURCES["r_acquire"])
RW_ACQUIRE: Final = Script(_SOURCES["rw_acquire"])
R_WITHDRAW: Final = Script(_SOURCES["r_withdraw"])
R_ENTER: Final = Script(_SOURCES["r_enter"])
R_LEAVE: Final = Script(_SOURCES["r_leave"])
R_RENEW: Final = Script(_SOURCES["r_renew"])
R_RELEASE: Final = Script(_SOURCES["r_release"])

# -- the semaphore: a sorted set {<token>: expiry instant} under the semaphore key ----------
S_ACQUIRE: Final = Script(_SOURCES["s_acquire"])
SW_ACQUIRE: Final = Script(_SOURCES["sw_acquire"])
S_WITHDRAW: Final = Script(_SOURCES["s_withdraw"])
S_RENEW: Final = Script(_SOURCES["s_renew"])
S_RELEASE: Final = Script(_SOURCES["s_release"])

# -- the read-write lock: a hash {rw, w, f, x} under the key, its readers in a sorted set --------
RWLOCK_ACQUIRE: Final = Script(_SOURCES["rwlock_acquire"])
RWLOCK_RENEW: Final = Script(_SOURCES["rwlock_renew"])
RWLOCK_RELEASE: Final = Script(_SOURCES["rwlock_release"])
RWLOCK_WITHDRAW: Final = Script(_SOURCES["rwlock_withdraw"])

# -- the election: the lock's string <token> under the key, the leader record beside it ---
# A campaign, a withdrawal and a resignation are the lock's W_ACQUIRE, WITHDRAW and
# RELEASE, given the leader record (and the candidate's identity) that their grants write.
E_RENEW: Final = Script(_SOURCES["e_renew"])
E_LEADER: Final = Script(_SOURCES["e_leader"])

# -- for operators: who holds a key, and taking it away ------------------------------------
#
# Not part of any lock cycle: ``Lock.owner`` / ``locked`` (a Semaphore's) and
# ``Lock.force_unlock`` send these (see :mod:`distlock._operator`).
OWNER: Final = Script(_SOURCES["owner"])
FORCE_UNLOCK: Final = Script(_SOURCES["force_unlock"])

SCRIPTS: Final = {Op.ACQUIRE: ACQUIRE, Op.RENEW: EXTEND, Op.EXTEND: EXTEND, Op.RELEASE: RELEASE}
#: The reentrant lock's scripts, by the operation they carry out.
R_SCRIPTS: Final = {
    Op.ACQUIRE: R_ACQUIRE,
    Op.RENEW: R_RENEW,
    Op.EXTEND: R_RENEW,
    Op.RELEASE: R_RELEASE,
    Op.REENTER: R_ENTER,
    Op.LEAVE: R_LEAVE,
}


#: The semaphore's scripts, by the operation they carry out.
S_SCRIPTS: Final = {
    Op.ACQUIRE: S_ACQUIRE,
    Op.RENEW: S_RENEW,
    Op.EXTEND: S_RENEW,
    Op.RELEASE: S_RELEASE,
}


#: Keys whose derived names are cached: enough for the keys a busy client cycles through
#: (a hit saves a CRC16 and a format), few enough that holding thousands of distinct locks
#: does not pay an entry per lock (an entry is about 170 bytes).
KEY_NAME_CACHE: Final = 512


@functools.lru_cache(maxsize=KEY_NAME_CACHE)
def fence_key(key: str) -> str:
    """The fence counter that serves ``key``: one per Cluster hash slot, in ``key``'s slot.

    Fences from one counter strictly increase, so they strictly increase for each key
    that draws from it; sharing a counter between the keys of a slot only makes the gaps
    larger, and keeps the number of counters bounded by the number of slots.
    """
    return f"distlock:fence:{{{slot_tag(key_slot(key))}}}"


@functools.lru_cache(maxsize=KEY_NAME_CACHE)
def _released_prefix(key: str) -> str:
    return f"distlock:released:{{{slot_tag(key_slot(key))}}}:"


def released_key(key: str, token: str) -> str:
    """The short-lived record of ``token``'s release of ``key``, in ``key``'s Cluster slot.

    One per token, so that a resend of a release is recognised whoever released the key
    after it.  The token (fixed length, hex) comes before the key, so no record of a
    release by a client that named it after the key alone (``...:{<tag>}:<key>``) shares
    its name with one of these unless the lock's name starts with this very token.
    """
    return f"{_released_prefix(key)}{token}:{key}"


@functools.lru_cache(maxsize=KEY_NAME_CACHE)
def permits_released_key(key: str) -> str:
    """The release memory of semaphore ``key`` (token -> forget instant), in ``key``'s
    Cluster slot.  Not :func:`released_key`: a lock's release of the same name reads that
    one as a string."""
    return f"distlock:sem-released:{{{slot_tag(key_slot(key))}}}:{key}"


#: What sets a kind's queue apart from another kind's on the same key: the kinds refuse
#: each other's keys, so a release must never hand a key to (or wake) another kind's
#: waiter.  The lock's has no mark; a mark ends before the ``{`` of the slot's tag, which
#: a key's own name cannot reach.
#: A read-write lock's readers and writers are one queue: FIFO across both roles.
_QUEUE_MARK: Final = {
    Kind.LOCK: "",
    Kind.REENTRANT: "r:",
    Kind.SEMAPHORE: "s:",
    Kind.READ: "rw:",
    Kind.WRITE: "rw:",
    Kind.CAMPAIGN: "e:",
}


@functools.lru_cache(maxsize=KEY_NAME_CACHE)
def queue_keys(key: str, kind: Kind = Kind.LOCK) -> tuple[str, str, str]:
    """The queue of ``kind``'s waiters for ``key``, its places, and the prefix of its
    waiters' wake lists (a token is appended), all in ``key``'s Cluster slot."""
    tag = slot_tag(key_slot(key))
    mark = _QUEUE_MARK[kind]
    return (
        f"{QUEUE_PREFIX}{mark}{{{tag}}}:{key}",
        f"{PLACES_PREFIX}{mark}{{{tag}}}:{key}",
        f"{WAKE_PREFIX}{mark}{{{tag}}}:{key}:",
    )


@functools.lru_cache(maxsize=KEY_NAME_CACHE)
def readers_key(key: str) -> str:
    """The sorted set of read-write lock ``key``'s readers (token -> the instant its lease
    ends), in ``key``'s Cluster slot."""
    return f"distlock:readers:{{{slot_tag(key_slot(key))}}}:{key}"


@functools.lru_cache(maxsize=KEY_NAME_CACHE)
def leader_key(key: str) -> str:
    """The leader record of election ``key`` (a hash: ``tok``, ``id``, ``fence`` of the
    key's last grant, living as long as that lease), in ``key``'s Cluster slot."""
    return f"distlock:leader:{{{slot_tag(key_slot(key))}}}:{key}"


def wake_key(key: str, token: str, kind: Kind = Kind.LOCK) -> str:
    """The list the waiter ``token`` blocks on for a wake-up from ``key``'s release."""
    return queue_keys(key, kind)[2] + token


def encode(command: Command) -> tuple[Script, list[str], list[str | int]]:
    """The script, KEYS and ARGV that carry out ``command``."""
    op = command.op
    key = command.key
    kind = command.kind
    if kind is not Kind.LOCK:
        if op is Op.WITHDRAW and kind in _WITHDRAWALS:
            return _encode_waiting(_WITHDRAWALS[kind], command)
        return _ENCODERS[kind](command)
    if op is Op.WITHDRAW:
        return _encode_waiting(WITHDRAW, command)
    if op is Op.ACQUIRE:
        if command.queue_ms is not None:
            return _encode_waiting(W_ACQUIRE, command)
        return ACQUIRE, [key, fence_key(key)], [command.token, command.ttl_ms]
    if op is Op.RELEASE:
        # No wake lists' prefix: the script makes it from the queue's name (release.lua).
        queue, places, _ = queue_keys(key)
        return (
            RELEASE,
            [key, released_key(key, command.token), queue, places, fence_key(key)],
            [command.token, RELEASE_MEMORY_MS],
        )
    return EXTEND, [key], [command.token, command.ttl_ms]


def _encode_waiting(script: Script, command: Command) -> tuple[Script, list[str], list[str | int]]:
    """A waiting attempt, or a withdrawal: both take the queue's KEYS and ARGV."""
    key = command.key
    queue, places, wake = queue_keys(key, command.kind)
    argv: list[str | int] = [
        command.token,
        command.ttl_ms,
        command.queue_ms or 0,
        QUEUE_GRACE_MS,
        wake,
    ]
    if command.kind is Kind.SEMAPHORE:
        # The semaphore's claim counts against the caller's limit; it has no fence.
        argv.append(command.limit)
        # KEYS[2], never touched, is the key again: Redis checks a user's rights on every
        # key passed, and the semaphore's documented ACL has none on the fence counters.
        counter = key
    else:
        # The TTL a release may hand the key over with; 0: woken instead (see Command).
        argv.append(command.hand_ms)
        counter = fence_key(key)
    return script, [key, counter, queue, places], argv


_WITHDRAWALS: Final = {Kind.LOCK: WITHDRAW, Kind.REENTRANT: R_WITHDRAW, Kind.SEMAPHORE: S_WITHDRAW}


def _encode_reentrant(command: Command) -> tuple[Script, list[str], list[str | int]]:
    op = command.op
    key = command.key
    token = command.token
    if op is Op.ACQUIRE:
        if command.queue_ms is not None:
            return _encode_waiting(RW_ACQUIRE, command)
        return R_ACQUIRE, [key, fence_key(key)], [token, command.ttl_ms]
    if op is Op.RELEASE:
        queue, places, wake = queue_keys(key, Kind.REENTRANT)
        return (
            R_RELEASE,
            [key, fence_key(key), released_key(key, token), queue, places],
            [token, RELEASE_MEMORY_MS, wake],
        )
    if op is Op.REENTER:
        return R_ENTER, [key], [token, command.ttl_ms, command.depth]
    if op is Op.LEAVE:
        return R_LEAVE, [key], [token, command.depth]
    return R_RENEW, [key], [token, command.ttl_ms]


def _encode_semaphore(command: Command) -> tuple[Script, list[str], list[str | int]]:
    op = command.op
    key = command.key
    if op is Op.ACQUIRE:
        if command.queue_ms is not None:
            return _encode_waiting(SW_ACQUIRE, command)
        return S_ACQUIRE, [key], [command.token, command.ttl_ms, command.limit]
    if op is Op.RELEASE:
        queue, places, wake = queue_keys(key, Kind.SEMAPHORE)
        return (
            S_RELEASE,
            [key, permits_released_key(key), queue, places],
            [command.token, RELEASE_MEMORY_MS, wake],
        )
    return S_RENEW, [key], [command.token, command.ttl_ms]


def _encode_readwrite(command: Command) -> tuple[Script, list[str], list[str | int]]:
    op = command.op
    key = command.key
    token = command.token
    role = command.kind.value
    if op is Op.RENEW or op is Op.EXTEND:
        return RWLOCK_RENEW, [key, readers_key(key)], [token, command.ttl_ms, role]
    queue, places, wake = queue_keys(key, command.kind)
    if op is Op.RELEASE:
        return (
            RWLOCK_RELEASE,
            [key, readers_key(key), released_key(key, token), queue, places],
            [token, RELEASE_MEMORY_MS, role, wake],
        )
    queue_ms = -1 if command.queue_ms is None or op is not Op.ACQUIRE else command.queue_ms
    return (
        RWLOCK_ACQUIRE if op is Op.ACQUIRE else RWLOCK_WITHDRAW,
        [key, readers_key(key), fence_key(key), queue, places],
        [token, command.ttl_ms, role, queue_ms, QUEUE_GRACE_MS, wake],
    )


def _encode_campaign(command: Command) -> tuple[Script, list[str], list[str | int]]:
    op = command.op
    key = command.key
    token = command.token
    record = leader_key(key)
    if op is Op.RENEW or op is Op.EXTEND:
        return E_RENEW, [key, record], [token, command.ttl_ms]
    queue, places, wake = queue_keys(key, Kind.CAMPAIGN)
    if op is Op.RELEASE:
        # No wake lists' prefix: the script makes it from the queue's name (release.lua).
        return (
            RELEASE,
            [key, released_key(key, token), queue, places, fence_key(key), record],
            [token, RELEASE_MEMORY_MS],
        )
    # A campaign's attempt is always a waiting one: with no wait (wait_ms=0) it is the
    # last, queue_ms 0, which is refused while another candidate is first in line.
    return (
        W_ACQUIRE if op is Op.ACQUIRE else WITHDRAW,
        [key, fence_key(key), queue, places, record],
        [token, command.ttl_ms, command.queue_ms or 0, QUEUE_GRACE_MS, wake,
         command.hand_ms, command.identity],
    )


#: The encoding of every kind but the lock's (which :func:`encode` makes itself, first).
_ENCODERS: Final = {
    Kind.REENTRANT: _encode_reentrant,
    Kind.SEMAPHORE: _encode_semaphore,
    Kind.READ: _encode_readwrite,
    Kind.WRITE: _encode_readwrite,
    Kind.CAMPAIGN: _encode_campaign,
}


def pack_evalsha(
    script: Script, keys: list[str], args: list[str | int], encoding: str, errors: str
) -> bytes:
    """``EVALSHA`` of ``script`` as the bytes a redis-py connection would send for it, with
    the connection's encoding of text: what its ``pack_command`` makes, without a Python
    call per argument (the asyncio connection packs in Python; a release has 11).
    Arguments are text or integers, never bools: ``encode`` makes nothing else."""
    out = [b"*%d\r\n" % (3 + len(keys) + len(args)), script._head]
    count = b"%d" % len(keys)
    out.append(b"$%d\r\n%b\r\n" % (len(count), count))
    for key in keys:
        data = key.encode(encoding, errors)
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    for arg in args:
        data = arg.encode(encoding, errors) if isinstance(arg, str) else b"%d" % arg
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def decode(command: Command, reply: object) -> int:
    """The integer a machine takes from ``command``'s reply: the fence for an acquire (0:
    refused), 1 or 0 for everything else.  A waiting attempt's refusal is ``-ms``, the
    time it can last at most (see ``distlock/lua/lib/wait.lua``), or 0 when it was the
    last attempt."""
    if command.op is Op.ACQUIRE and (
        command.queue_ms is not None or command.kind is Kind.CAMPAIGN
    ):
        parts: Any = reply  # {fence, ms}: a campaign's is always a waiting attempt's
        fence = int(parts[0])
        return fence if fence > 0 else -int(parts[1])
    if isinstance(reply, list):
        # R_ACQUIRE's {granted, fence}
        return int(reply[1]) if int(reply[0]) == 1 else 0
    value: Any = reply  # an int (an annotation, not a cast() call on every reply)
    return int(value)
