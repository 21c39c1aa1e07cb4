"""The wire protocol: the Lua scripts, the keys they touch, and how a command becomes a call.

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
import textwrap
from typing import Any, Final

from distlock._core.commands import Command, Kind, Op
from distlock._core.waiting import LONGEST_BLOCK_MS, QUEUE_GRACE_MS
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


# -- waiting: a queue per key, and a wake list per waiter -----------------------------------
#
# Beside a key K, in K's Cluster slot: its queue (a list of waiters' tokens, in arrival
# order), the queue's places (a hash: token -> the Redis-clock ms at which that waiter's
# place expires unless its next attempt renews it), and one wake list per waiter, which a
# release pushes to and the waiter BLPOPs.  A list remembers a wake-up pushed before its
# waiter blocks, so no release between an attempt and its block is lost.  A waiter's
# place is what a waiter that dies without withdrawing leaves behind; it expires, and
# whoever next reads the head of the queue drops it.
#
# The queue knows nothing of what is claimed: a primitive's waiting acquire defines
# ``busy()`` (0 if the caller may claim now, else the ms until a claim may be possible)
# and ``claim()`` (its plain acquire), and ``_WAIT`` does the rest; its release calls
# ``wake_head``.

#: The queue's functions (``queue``, ``places``: its two keys; ``wake``: the prefix of its
#: wake lists, to which a token is appended).
_QUEUE: Final = """local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function leave(queue, places, wake, token)
  redis.call('LREM', queue, 1, token)
  redis.call('HDEL', places, token, '>' .. token)
  redis.call('DEL', wake .. token)
end
local function live_head(queue, places, wake, now)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then return nil, 0 end
    local until_ms = tonumber(redis.call('HGET', places, head) or '0')
    if until_ms > now then return head, until_ms end
    redis.call('LPOP', queue)
    redis.call('HDEL', places, head, '>' .. head)
    redis.call('DEL', wake .. head)
  end
end
local function hand_head(queue, places, wake, grant)
  if redis.call('EXISTS', queue) == 0 then return end
  local now = now_ms()
  local head, until_ms = live_head(queue, places, wake, now)
  if not head then return end
  local ttl = grant and redis.call('HGET', places, '>' .. head)
  local element = '1'
  if ttl then
    element = '=' .. grant(head, ttl)
    leave(queue, places, wake, head)
  elseif redis.call('LLEN', wake .. head) > 0 then
    return
  end
  redis.call('RPUSH', wake .. head, element)
  redis.call('PEXPIRE', wake .. head, until_ms - now)
end
local function wake_head(queue, places, wake) hand_head(queue, places, wake, nil) end
"""

#: A waiting acquire, around the primitive's ``busy()`` and ``claim()``.  KEYS[3] the
#: queue, KEYS[4] its places (KEYS[1], KEYS[2] and ARGV[1], ARGV[2] are the claim's own:
#: the key, the fence counter, the token, the TTL); ARGV[3] the ms the caller may still
#: wait (0: its last attempt), ARGV[4] how long a place outlives its block, ms, ARGV[5]
#: the wake lists' prefix.  No block is longer than ``LONGEST_BLOCK``, so neither is a
#: place's life, less its grace.
#: ``{fence, 0}`` when granted: if the key is free and nobody waits before us, or if it
#: is ours already (a resend of an attempt that was granted); our place, our wake list
#: and any wake-up in it go.  ``{0, ms}`` when refused: we are in
#: the queue (at our old place, if we had one) and may block for up to ``ms``, the time
#: the refusal can last at most: the holder's remaining TTL, cut to the rest of the first
#: waiter's place when that is another's (it may give up holding the wake-up); or, when
#: the key is free but another waiter is first, the rest of that waiter's place, cut to
#: one lease (it may take the key and let it lapse).  A place's end never moves earlier.
#: ``{0, 0}``: the last attempt was refused, and we are out of the queue.
#: With ``HANDOFF`` (a lock's or a reentrant lock's waiter that asked for it: ARGV[6], the
#: TTL to hand the key over with, > 0), a refused waiter's place also keeps that TTL
#: (field ``>token``), so that a release can hand it the key (``hand_head``).
_WAIT: Final = """local token, queue, places, wake = ARGV[1], KEYS[3], KEYS[4], ARGV[5]
local now = now_ms()
local head, head_until = live_head(queue, places, wake, now)
local busy_ms, mine = busy()
if mine or (busy_ms == 0 and (not head or head == token)) then
  local fence = claim()
  if type(fence) == 'table' then fence = fence[2] end
  leave(queue, places, wake, token)
  if room() then wake_head(queue, places, wake) end
  return {fence, 0}
end
local left = tonumber(ARGV[3])
if left <= 0 then
  leave(queue, places, wake, token)
  return {0, 0}
end
local recheck = busy_ms
if recheck == 0 then
  -- Free, but another waiter is first: it may take the key and let it lapse (it died)
  -- before its place ends, so look again within a lease from now.
  recheck = math.min(head_until - now, tonumber(ARGV[2]))
elseif head and head ~= token then
  -- Behind another waiter: if its place ends holding the wake-up (it gave up or died),
  -- we are first with nobody to wake us, so look again by then.
  recheck = math.min(recheck, head_until - now)
end
recheck = math.max(1, recheck)
-- The place ends a grace after the longest block we may take, so that a waiter that
-- died is dropped within LONGEST_BLOCK + grace of its last attempt, whatever the TTL.
local life = math.min(left, recheck, LONGEST_BLOCK) + tonumber(ARGV[4])
local had = redis.call('HGET', places, token)
if not had then redis.call('RPUSH', queue, token) end
-- A place never ends earlier than it was promised: whoever is behind it counts on that.
redis.call('HSET', places, token, math.max(tonumber(had or '0'), now + life))
-- The TTL a release hands us the key with: short, until our first renewal.
if HANDOFF then redis.call('HSET', places, '>' .. token, ARGV[6]) end
-- Whatever a release left in our wake list came before this refusal: a key handed to us
-- that has since expired (and been taken by another), or a wake-up this attempt answers.
redis.call('DEL', wake .. token)
if redis.call('PTTL', queue) < life then
  redis.call('PEXPIRE', queue, life)
  redis.call('PEXPIRE', places, life)
end
return {0, recheck}
"""


#: ``room()``: whether the key can take another holder right after a grant (a lock never
#: can; a semaphore can while permits are left), so the next waiter is woken at once.
_NO_ROOM: Final = "local function room() return false end\n"


#: Where the key can be handed to a waiter (a lock's, a reentrant lock's): ``claim_as`` (the
#: primitive's plain acquire for any token and TTL) gives the fence of a handed key, and a
#: waiter takes a handed key only if its attempts asked for it (ARGV[6], the TTL to hand it
#: over with, > 0; a waiter whose grants must reach replicas before its body starts, or
#: that is not renewed, is woken instead, and sends its own).
_HANDS_OFF: Final = """local function handed(token, ttl)
  local fence = claim_as(token, ttl)
  if type(fence) == 'table' then fence = fence[2] end
  return fence
end
local function claim() return claim_as(ARGV[1], ARGV[2]) end
"""
#: A waiting attempt's ``HANDOFF``: whether it offered a TTL to be handed the key with.
_HANDOFF: Final = "local HANDOFF = tonumber(ARGV[6]) > 0\n"


_LONGEST_BLOCK: Final = f"local LONGEST_BLOCK = {LONGEST_BLOCK_MS}\n"


def _waiting(claim: str, busy: str, room: str = _NO_ROOM, prelude: str = "") -> Script:
    """A primitive's waiting acquire: its ``claim()`` (its plain acquire) in ``claim`` or
    ``prelude``, its ``busy()`` and its ``room()``; ``prelude`` defines what those share,
    and ``HANDOFF``."""
    return Script(_READ + _QUEUE + prelude + claim + busy + room + _LONGEST_BLOCK + _WAIT)


#: A primitive's withdrawal, around its ``busy()``, ``drop()`` and ``GRANT``: KEYS and ARGV
#: as ``_WAIT``'s.  A waiter that stops waiting: its place and wake list go; a key handed
#: to it (or granted by an attempt whose reply it never read) is given back (``drop()``:
#: it stops waiting, so it holds nothing); and if it was first in line or gave a key back,
#: and the key is free, the key (``GRANT``, where keys are handed) or a wake-up goes to
#: the next waiter: neither is ever dropped with its waiter.  Always 1.
_WITHDRAW: Final = """local token, queue, places, wake = ARGV[1], KEYS[3], KEYS[4], ARGV[5]
local head = live_head(queue, places, wake, now_ms())
leave(queue, places, wake, token)
local _, mine = busy()
if mine then mine = drop() end
if (head == token or mine) and busy() == 0 then hand_head(queue, places, wake, GRANT) end
return 1
"""

#: The withdrawal's ``drop()`` where nothing is handed (a semaphore's permit granted late
#: is given back by the client's own release).
_NO_DROP: Final = "local function drop() return false end\nlocal GRANT = nil\n"


def _withdrawing(busy: str, drop: str = _NO_DROP, prelude: str = "") -> Script:
    """A primitive's withdrawal (``_WITHDRAW``) around its ``busy()`` and ``drop()``."""
    return Script(_READ + _QUEUE + prelude + busy + drop + _WITHDRAW)


#: KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] ttl ms.
#: Returns the new fence, or 0 when another token holds the key.  Idempotent for the same
#: token: a client-side retry of a request that already ran gets its own fence back
#: instead of being told the lock is taken by someone else (itself).  The counter may have
#: moved on since (other keys of the slot share it): its current value is still above every
#: earlier owner's fence and below every later owner's, which is all a fence promises.
#: ``SET NX`` first: a free key, the common case, costs two calls, not three (each call
#: from a script costs Redis a few microseconds); it fails without an error on a key of
#: any type, and only then is the holder read (``held_as``: the key is ours again only
#: if this token holds it).
_HELD: Final = """local function held_as(token, ttl)
  if read('GET', KEYS[1]) == token then
    redis.call('PEXPIRE', KEYS[1], ttl)
    return tonumber(redis.call('GET', FENCES) or '1')
  end
  return 0
end
"""
#: A free key's claim: the key set to ``token`` for ``ttl`` ms, and a new fence.
_FREE: Final = """if redis.call('SET', KEYS[1], {token}, 'NX', 'PX', {ttl}) then
  return redis.call('INCR', {fences})
end
"""
_CLAIM: Final = (
    _HELD
    + "local function claim_as(token, ttl)\n"
    + textwrap.indent(_FREE.format(token="token", ttl="ttl", fences="FENCES"), "  ")
    + """  return held_as(token, ttl)
end
"""
)
#: ``claim_as(ARGV[1], ARGV[2])``, with its ``SET NX`` before anything is defined: defining
#: the functions a held key needs costs Redis more than a tenth of a free key's acquire.
ACQUIRE: Final = Script(
    _FREE.format(token="ARGV[1]", ttl="ARGV[2]", fences="KEYS[2]")
    + _READ
    + "local FENCES = KEYS[2]\n"
    + _HELD
    + "return held_as(ARGV[1], ARGV[2])\n"
)

#: The lock's waiting acquire (see ``_WAIT``): the key is busy for its remaining TTL
#: unless it is free or ours (a resend of our own granted attempt).
_BUSY: Final = """local function busy()
  local cur, foreign = read('GET', KEYS[1])
  if cur == ARGV[1] then return 0, true end
  if not (cur or foreign) then return 0, false end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl, false end
  return tonumber(ARGV[4]), false
end
"""
W_ACQUIRE: Final = _waiting(
    "", _BUSY, prelude="local FENCES = KEYS[2]\n" + _CLAIM + _HANDS_OFF + _HANDOFF
)
#: The lock's withdrawal (see ``_WITHDRAW``): a key handed to the waiter is deleted, and
#: handed on.
_DROP: Final = """local function drop() redis.call('DEL', KEYS[1]) return true end
local GRANT = handed
"""
WITHDRAW: Final = _withdrawing(_BUSY, _DROP, "local FENCES = KEYS[2]\n" + _CLAIM + _HANDS_OFF)

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

#: KEYS[1] lock key, KEYS[2] this token's release record, KEYS[3] its queue, KEYS[4] the
#: queue's places, KEYS[5] the fence counter; ARGV[1] token, ARGV[2] memory ms, ARGV[3] the
#: wake lists' prefix.
#: 1 if deleted now, or if this token's release already deleted it (a resend); 0 if the
#: key is not ours and we did not release it.  The record is a short-lived key of its own,
#: so the lock key is gone the moment it is released; it is named after the token
#: (:func:`released_key`), so every token released within the memory is remembered, not
#: only the last: a resend that comes after another owner's whole section is still ours.
#: A record per token costs the release nothing more than one per key (a ``SET`` with a
#: TTL, which Redis expires itself), where a set of tokens would add the clock, a trim
#: and an expiry to every release.  Deleting the key and waking the
#: first waiter are one atomic step: the key goes straight to the first live waiter, with
#: the TTL its place keeps and a new fence, which its wake list carries (``=fence``), so
#: the waiter holds the key the moment its ``BLPOP`` answers, with no attempt of its own;
#: a key handed before it was deleted would be held twice.  The queue's functions are
#: defined only where there is a queue: defining them costs Redis about a microsecond, and
#: most releases have nobody waiting.
RELEASE: Final = Script(
    _READ
    + """if read('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  if redis.call('EXISTS', KEYS[3]) == 1 then
"""
    + _QUEUE
    + "local FENCES = KEYS[5]\n"
    + _CLAIM
    + _HANDS_OFF
    + """hand_head(KEYS[3], KEYS[4], ARGV[3], handed)
  end
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
_R_CLAIM: Final = """local function claim_as(token, ttl)
  local cur, foreign = read('HGET', KEYS[1], token)
  if foreign then return {0, 0} end
  if cur then
    redis.call('PEXPIRE', KEYS[1], ttl)
    return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], token, 1, 'fence', fence)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, fence}
end
"""
R_ACQUIRE: Final = Script(_READ + _R_CLAIM + "return claim_as(ARGV[1], ARGV[2])\n")

#: The reentrant lock's waiting acquire (see ``_WAIT``): the hash is busy for its
#: remaining TTL unless it is gone or holds our token.
_R_BUSY: Final = """local function busy()
  local cur, foreign = read('HGET', KEYS[1], ARGV[1])
  if cur then return 0, true end
  if not foreign and redis.call('EXISTS', KEYS[1]) == 0 then return 0, false end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl, false end
  return tonumber(ARGV[4]), false
end
"""
RW_ACQUIRE: Final = _waiting("", _R_BUSY, prelude=_R_CLAIM + _HANDS_OFF + _HANDOFF)
#: The reentrant lock's withdrawal (see ``_WITHDRAW``).
R_WITHDRAW: Final = _withdrawing(_R_BUSY, _DROP, _R_CLAIM + _HANDS_OFF)

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

#: KEYS[1] lock key, KEYS[2] fence counter (unused), KEYS[3] this token's release record
#: (:func:`released_key`), KEYS[4] the
#: key's queue, KEYS[5] the queue's places; ARGV[1] token, ARGV[2] memory ms, ARGV[3] the
#: wake lists' prefix.  The outermost exit: 1 if deleted now, or if this token's release
#: already deleted it (a resend); else 0.  The record is the one ``RELEASE`` writes; the
#: key is handed to the first waiter in the same step, as ``RELEASE`` hands it (a new hash
#: at depth 1 with a new fence).
R_RELEASE: Final = Script(
    _READ
    + _QUEUE
    + _R_CLAIM
    + _HANDS_OFF
    + """if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
  hand_head(KEYS[4], KEYS[5], ARGV[3], handed)
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

#: What every semaphore script shares (``now_ms`` is the queue's, so both are one clock).
_S_HELPERS: Final = """local function ms(n) return string.format('%.0f', n) end
local function expire_at_last(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', key, ms(tonumber(last[2]))) end
end
"""

#: The semaphore's plain acquire, for ``LIMIT`` (each script sets it from its own ARGV):
#: 1 if granted, 0 if ``LIMIT`` permits are live or the key is another type (a lock's).
#: Permits expired by now are evicted first: O(log N + evicted), no scan.  Idempotent for
#: the same token: a client-library resend of our own acquire finds our live permit and
#: re-sets its expiry instead of taking a second one.  Each caller compares the live count
#: with its own limit.
_S_CLAIM: Final = """local score, foreign = read('ZSCORE', KEYS[1], ARGV[1])
if foreign then return 0 end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))
if not (score and tonumber(score) > now)
    and redis.call('ZCARD', KEYS[1]) >= LIMIT then
  return 0
end
redis.call('ZADD', KEYS[1], ms(now + tonumber(ARGV[2])), ARGV[1])
expire_at_last(KEYS[1])
return 1
"""

#: KEYS[1] semaphore key; ARGV[1] token, ARGV[2] ttl ms, ARGV[3] limit.  See ``_S_CLAIM``.
S_ACQUIRE: Final = Script(
    _READ + _QUEUE + _S_HELPERS + "local LIMIT = tonumber(ARGV[3])\n" + _S_CLAIM
)

#: The semaphore's waiting acquire (see ``_WAIT``; ARGV[6] the limit).  It is busy until
#: its earliest permit expires while ``LIMIT`` are live, unless our permit is among them
#: (a resend of our own granted attempt); after a grant, the next waiter is woken at once
#: while permits are left, so N free permits reach the first N waiters.
_S_BUSY: Final = """local function busy()
  local score, foreign = read('ZSCORE', KEYS[1], ARGV[1])
  local now = now_ms()
  if score and tonumber(score) > now then return 0, true end
  if foreign then return tonumber(ARGV[4]), false end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))
  if redis.call('ZCARD', KEYS[1]) < LIMIT then return 0, false end
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(first[2]) - now), false
end
"""
_S_ROOM: Final = """local function room()
  return redis.call('ZCARD', KEYS[1]) < LIMIT
end
"""
_S_WAIT_PRELUDE: Final = _S_HELPERS + "local LIMIT = tonumber(ARGV[6])\n"
SW_ACQUIRE: Final = _waiting(
    "local function claim()\n" + _S_CLAIM + "end\n",
    _S_BUSY,
    _S_ROOM,
    _S_WAIT_PRELUDE + "local HANDOFF = false\n",
)
#: The semaphore's withdrawal (see ``_WITHDRAW``): a permit free when the first waiter
#: gives up passes the wake-up on.
S_WITHDRAW: Final = _withdrawing(_S_BUSY, prelude=_S_WAIT_PRELUDE)

#: KEYS[1] semaphore key; ARGV[1] token, ARGV[2] ttl ms.  1 if our permit was live and now
#: ends ttl ms from now, else 0.  The membership check is what keeps an evicted (or
#: expired, not yet evicted) permit from coming back past the limit.
S_RENEW: Final = Script(
    _READ
    + _QUEUE
    + _S_HELPERS
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
#: instant), KEYS[3] its queue, KEYS[4] the queue's places; ARGV[1] token, ARGV[2] memory
#: ms, ARGV[3] the wake lists' prefix.  1 if our permit was live and is now removed (and
#: the first waiter woken, in the same step), or if this token's release is remembered (a
#: resend); else 0.  The memory is per token because several holders release
#: concurrently; it is its own key, so the semaphore key is gone the moment its last
#: permit is.
S_RELEASE: Final = Script(
    _READ
    + _QUEUE
    + _S_HELPERS
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
  wake_head(KEYS[3], KEYS[4], ARGV[3])
  return 1
end
local forget = redis.call('ZSCORE', KEYS[2], ARGV[1])
if forget and tonumber(forget) > now then return 1 end
return 0
"""
)

# -- for operators: who holds a key, and taking it away ------------------------------------
#
# Not part of any lock cycle: ``Lock.owner`` / ``locked`` (a Semaphore's) and
# ``Lock.force_unlock`` send these (see :mod:`distlock._operator`).

#: KEYS[1] the key.  Read only: false when the key is free, else ``{type, pttl, token,
#: fence, count}``, whatever the key's type (never a WRONGTYPE error): a string's value as
#: the token; a hash of two fields (a reentrant lock's) its token field and its fence (as
#: text: a fence may exceed a Lua number's exact range); a sorted set's (a semaphore's)
#: permits live by Redis's clock as ``count``.  '' and '' where a part is unknown.
OWNER: Final = Script(
    """local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return false end
local ttl = redis.call('PTTL', KEYS[1])
if kind == 'string' then
  return {kind, ttl, redis.call('GETRANGE', KEYS[1], 0, 63), '', 1}
end
if kind == 'hash' then
  if redis.call('HLEN', KEYS[1]) ~= 2 then return {kind, ttl, '', '', 0} end
  local fields = redis.call('HGETALL', KEYS[1])
  local token, fence = '', ''
  for i = 1, #fields, 2 do
    if fields[i] == 'fence' then fence = fields[i + 1] else token = fields[i] end
  end
  return {kind, ttl, token, fence, 1}
end
if kind == 'zset' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local live = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')
  return {kind, ttl, '', '', live}
end
return {kind, ttl, '', '', 0}
"""
)

#: KEYS[1] the key, KEYS[2] its slot's fence counter, then each kind's queue and its
#: places (KEYS[1 + 2i], KEYS[2 + 2i]); ARGV[i] that kind's wake lists' prefix.  Deletes
#: the key whatever holds it and bumps the fence counter in the same step, so every later
#: owner's fence is larger than the evicted holder's even if a resource saw that one;
#: wakes each kind's first waiter (woken, not handed the key: its own attempt takes it,
#: with a fence of its own).  1 if a key was deleted, else 0.
FORCE_UNLOCK: Final = Script(
    _QUEUE
    + """local deleted = redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[2])
for i = 1, #ARGV do wake_head(KEYS[1 + 2 * i], KEYS[2 + 2 * i], ARGV[i]) end
return deleted
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
_QUEUE_MARK: Final = {Kind.LOCK: "", Kind.REENTRANT: "r:", Kind.SEMAPHORE: "s:"}


@functools.lru_cache(maxsize=KEY_NAME_CACHE)
def queue_keys(key: str, kind: Kind = Kind.LOCK) -> tuple[str, str, str]:
    """The queue of ``kind``'s waiters for ``key``, its places, and the prefix of its
    waiters' wake lists (a token is appended), all in ``key``'s Cluster slot."""
    tag = slot_tag(key_slot(key))
    mark = _QUEUE_MARK[kind]
    return (
        f"distlock:queue:{mark}{{{tag}}}:{key}",
        f"distlock:queued:{mark}{{{tag}}}:{key}",
        f"distlock:wake:{mark}{{{tag}}}:{key}:",
    )


def wake_key(key: str, token: str, kind: Kind = Kind.LOCK) -> str:
    """The list the waiter ``token`` blocks on for a wake-up from ``key``'s release."""
    return queue_keys(key, kind)[2] + token


def encode(command: Command) -> tuple[Script, list[str], list[str | int]]:
    """The script, KEYS and ARGV that carry out ``command``."""
    op = command.op
    key = command.key
    if op is Op.WITHDRAW:
        return _encode_waiting(_WITHDRAWALS[command.kind], command)
    if command.kind is Kind.REENTRANT:
        return _encode_reentrant(command)
    if command.kind is Kind.SEMAPHORE:
        return _encode_semaphore(command)
    if op is Op.ACQUIRE:
        if command.queue_ms is not None:
            return _encode_waiting(W_ACQUIRE, command)
        return ACQUIRE, [key, fence_key(key)], [command.token, command.ttl_ms]
    if op is Op.RELEASE:
        queue, places, wake = queue_keys(key)
        return (
            RELEASE,
            [key, released_key(key, command.token), queue, places, fence_key(key)],
            [command.token, RELEASE_MEMORY_MS, wake],
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
    time it can last at most (see ``_WAIT``), or 0 when it was the last attempt."""
    if command.queue_ms is not None and command.op is Op.ACQUIRE:
        parts: Any = reply  # {fence, ms}
        fence = int(parts[0])
        return fence if fence > 0 else -int(parts[1])
    if isinstance(reply, list):
        # R_ACQUIRE's {granted, fence}
        return int(reply[1]) if int(reply[0]) == 1 else 0
    value: Any = reply  # an int (an annotation, not a cast() call on every reply)
    return int(value)
