"""The wire protocol: the Lua scripts, the keys they touch, and how a command becomes a call.

Each script touches only the keys passed in KEYS, all in one Cluster hash slot (the fence
counter is found through :mod:`distlock._slots`), so every script is Redis Cluster
compatible.  Scripts run atomically and see time frozen at their start, which is what
makes the token checks sound.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Final

from distlock._core.commands import Command, Kind, Op
from distlock._slots import key_slot, slot_tag


class Script:
    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"Script({self.sha[:8]})"


#: Reads a key in a script without the risk of a WRONGTYPE error: ``read(cmd, key, ...)``
#: returns the command's reply and ``false``, or ``false, true`` when the key holds another
#: type (a ``Lock``'s string where a ``ReentrantLock`` keeps a hash or a ``Semaphore`` a
#: sorted set, in any combination): such a key is held by someone else, never an error.
#: Any other error is raised as it is.
_READ: Final = """local function read(...)
  local v = redis.pcall(...)
  if type(v) == 'table' and v.err then
    if string.find(v.err, 'WRONGTYPE', 1, true) then return false, true end
    error(v)
  end
  return v, false
end
"""

#: KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] ttl ms.
#: Returns the new fence, or 0 when another token holds the key.  Idempotent for the same
#: token: a client-side retry of a request that already ran gets its own fence back
#: instead of being told the lock is taken by someone else (itself).  The counter may have
#: moved on since (other keys of the slot share it): its current value is still above every
#: earlier owner's fence and below every later owner's, which is all a fence promises.
ACQUIRE: Final = Script(
    _READ
    + """local cur, foreign = read('GET', KEYS[1])
if foreign then return 0 end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]) or '1')
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return redis.call('INCR', KEYS[2])
"""
)

#: KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms. 1 if extended, 0 if not ours.
EXTEND: Final = Script(
    _READ
    + """if read('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
)

#: How long a release is remembered, so that a resend of it (a client library retrying a
#: release whose reply was lost) is answered as released instead of "not ours".  It must
#: outlast the client's retries; redis-py 8's default policy gives up within seconds.
RELEASE_MEMORY_MS: Final = 30_000

#: KEYS[1] lock key, KEYS[2] its release record; ARGV[1] token, ARGV[2] memory ms.
#: 1 if deleted now, or if this token's release already deleted it (a resend); 0 if the
#: key is not ours and we did not release it.  The record is a short-lived key of its own,
#: so the lock key is gone the moment it is released.
RELEASE: Final = Script(
    _READ
    + """if read('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[1] then return 1 end
return 0
"""
)

# -- the reentrant lock: a hash {<token>: depth, fence: <fence>} under the lock key ---------

#: KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] ttl ms.
#: {1, fence} when granted: a new hash with our token at depth 1 and a fresh fence, or our
#: own hash again (the client library resent our outermost acquire: the TTL is re-set, the
#: depth is left alone and the stored fence comes back).  {0, 0} when the key is held by
#: another token, or is another type (a ``Lock``'s string): refused, never an error.
R_ACQUIRE: Final = Script(
    _READ
    + """local cur, foreign = read('HGET', KEYS[1], ARGV[1])
if foreign then return {0, 0} end
if cur then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
local fence = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], 1, 'fence', fence)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fence}
"""
)

#: KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms, ARGV[3] the new depth.
#: A re-entry: 1 if the hash holds our token (its depth is set, its TTL refreshed), else 0.
#: Setting rather than incrementing makes a resend harmless.
R_ENTER: Final = Script(
    _READ
    + """if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
)

#: KEYS[1] lock key; ARGV[1] token, ARGV[2] the new depth (at least 1).
#: An inner exit: 1 if the hash holds our token (its depth is set), else 0.  Never deletes:
#: only the outermost exit frees the key.
R_LEAVE: Final = Script(
    _READ
    + """if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
"""
)

#: KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms.  1 if extended, 0 if not ours.  The
#: depth is left as it is: the renewal runs on its own schedule and knows nothing of it.
R_RENEW: Final = Script(
    _READ
    + """if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
)

#: KEYS[1] lock key, KEYS[2] fence counter (unused), KEYS[3] release record; ARGV[1] token,
#: ARGV[2] memory ms.  The outermost exit: 1 if deleted now, or if this token's release
#: already deleted it (a resend); else 0.  The record is the one ``RELEASE`` writes.
R_RELEASE: Final = Script(
    _READ
    + """if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
  return 1
end
if redis.call('GET', KEYS[3]) == ARGV[1] then return 1 end
return 0
"""
)

# -- the semaphore: a sorted set {<token>: expiry instant} under the semaphore key ----------
#
# A permit's expiry is an instant of Redis's clock (ms, from TIME inside the script), never
# a client's: clients disagree, and a fast one would evict live permits.  The key itself
# expires at its latest permit's instant, so it is gone once its last permit is released
# or expired.  Scores and instants are formatted with %.0f: a Lua number handed to Redis
# as is may be written in exponent form, which PEXPIREAT refuses.

_S_HELPERS: Final = (
    _READ
    + """local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ms(n) return string.format('%.0f', n) end
local function expire_at_last(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', key, ms(tonumber(last[2]))) end
end
"""
)

#: KEYS[1] semaphore key; ARGV[1] token, ARGV[2] ttl ms, ARGV[3] limit.
#: 1 if granted, 0 if ``limit`` permits are live or the key is another type (a lock's).
#: Permits expired by now are evicted first: O(log N + evicted), no scan.  Idempotent for
#: the same token: a client-library resend of our own acquire finds our live permit and
#: re-sets its expiry instead of taking a second one.  Each caller compares the live count
#: with its own limit.
S_ACQUIRE: Final = Script(
    _S_HELPERS
    + """local score, foreign = read('ZSCORE', KEYS[1], ARGV[1])
if foreign then return 0 end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))
if not (score and tonumber(score) > now)
    and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], ms(now + tonumber(ARGV[2])), ARGV[1])
expire_at_last(KEYS[1])
return 1
"""
)

#: KEYS[1] semaphore key; ARGV[1] token, ARGV[2] ttl ms.  1 if our permit was live and now
#: ends ttl ms from now, else 0.  The membership check is what keeps an evicted (or
#: expired, not yet evicted) permit from coming back past the limit.
S_RENEW: Final = Script(
    _S_HELPERS
    + """local score = read('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
local now = now_ms()
if tonumber(score) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'XX', ms(now + tonumber(ARGV[2])), ARGV[1])
expire_at_last(KEYS[1])
return 1
"""
)

#: KEYS[1] semaphore key, KEYS[2] its release memory (a sorted set token -> forget
#: instant); ARGV[1] token, ARGV[2] memory ms.  1 if our permit was live and is now
#: removed, or if this token's release is remembered (a resend); else 0.  The memory is
#: per token because several holders release concurrently; it is its own key, so the
#: semaphore key is gone the moment its last permit is.
S_RELEASE: Final = Script(
    _S_HELPERS
    + """local score, foreign = read('ZSCORE', KEYS[1], ARGV[1])
if foreign then return 0 end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))
if score and tonumber(score) > now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  expire_at_last(KEYS[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms(now))
  redis.call('ZADD', KEYS[2], ms(now + tonumber(ARGV[2])), ARGV[1])
  expire_at_last(KEYS[2])
  return 1
end
local forget = redis.call('ZSCORE', KEYS[2], ARGV[1])
if forget and tonumber(forget) > now then return 1 end
return 0
"""
)

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


@functools.lru_cache(maxsize=4096)
def fence_key(key: str) -> str:
    """The fence counter that serves ``key``: one per Cluster hash slot, in ``key``'s slot.

    Fences from one counter strictly increase, so they strictly increase for each key
    that draws from it; sharing a counter between the keys of a slot only makes the gaps
    larger, and keeps the number of counters bounded by the number of slots.
    """
    return f"distlock:fence:{{{slot_tag(key_slot(key))}}}"


@functools.lru_cache(maxsize=4096)
def released_key(key: str) -> str:
    """The short-lived record of ``key``'s last release, in ``key``'s Cluster slot."""
    return f"distlock:released:{{{slot_tag(key_slot(key))}}}:{key}"


@functools.lru_cache(maxsize=4096)
def permits_released_key(key: str) -> str:
    """The release memory of semaphore ``key`` (token -> forget instant), in ``key``'s
    Cluster slot.  Not :func:`released_key`: a lock's release of the same name reads that
    one as a string."""
    return f"distlock:sem-released:{{{slot_tag(key_slot(key))}}}:{key}"


def encode(command: Command) -> tuple[Script, list[str], list[str | int]]:
    """The script, KEYS and ARGV that carry out ``command``."""
    op = command.op
    key = command.key
    if command.kind is Kind.REENTRANT:
        return _encode_reentrant(command)
    if command.kind is Kind.SEMAPHORE:
        return _encode_semaphore(command)
    if op is Op.ACQUIRE:
        return ACQUIRE, [key, fence_key(key)], [command.token, command.ttl_ms]
    if op is Op.RELEASE:
        return RELEASE, [key, released_key(key)], [command.token, RELEASE_MEMORY_MS]
    return EXTEND, [key], [command.token, command.ttl_ms]


def _encode_reentrant(command: Command) -> tuple[Script, list[str], list[str | int]]:
    op = command.op
    key = command.key
    token = command.token
    if op is Op.ACQUIRE:
        return R_ACQUIRE, [key, fence_key(key)], [token, command.ttl_ms]
    if op is Op.RELEASE:
        return (
            R_RELEASE,
            [key, fence_key(key), released_key(key)],
            [token, RELEASE_MEMORY_MS],
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
        return S_ACQUIRE, [key], [command.token, command.ttl_ms, command.limit]
    if op is Op.RELEASE:
        return (
            S_RELEASE,
            [key, permits_released_key(key)],
            [command.token, RELEASE_MEMORY_MS],
        )
    return S_RENEW, [key], [command.token, command.ttl_ms]


def decode(command: Command, reply: object) -> int:
    """The integer a machine takes from ``command``'s reply: the fence for an acquire (0:
    refused), 1 or 0 for everything else."""
    if isinstance(reply, list):
        # R_ACQUIRE's {granted, fence}
        return int(reply[1]) if int(reply[0]) == 1 else 0
    value: Any = reply  # an int (an annotation, not a cast() call on every reply)
    return int(value)
