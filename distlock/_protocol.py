"""The wire protocol: the Lua scripts, the keys they touch, and how a command becomes a call.

Each script touches only the keys passed in KEYS, all in one Cluster hash slot (the fence
counter is found through :mod:`distlock._slots`), so every script is Redis Cluster
compatible.  Scripts run atomically and see time frozen at their start, which is what
makes the token checks sound.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Final

from distlock._core.commands import Command, Op
from distlock._slots import key_slot, slot_tag


class Script:
    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __repr__(self) -> str:
        return f"Script({self.sha[:8]})"


#: KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] ttl ms.
#: Returns the new fence, or 0 when another token holds the key.  Idempotent for the same
#: token: a client-side retry of a request that already ran gets its own fence back
#: instead of being told the lock is taken by someone else (itself).  The counter may have
#: moved on since (other keys of the slot share it): its current value is still above every
#: earlier owner's fence and below every later owner's, which is all a fence promises.
ACQUIRE: Final = Script(
    """local cur = redis.call('GET', KEYS[1])
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
    """if redis.call('GET', KEYS[1]) == ARGV[1] then
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
    """if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[1] then return 1 end
return 0
"""
)

SCRIPTS: Final = {Op.ACQUIRE: ACQUIRE, Op.RENEW: EXTEND, Op.EXTEND: EXTEND, Op.RELEASE: RELEASE}


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


def encode(command: Command) -> tuple[Script, list[str], list[str | int]]:
    """The script, KEYS and ARGV that carry out ``command``."""
    op = command.op
    key = command.key
    if op is Op.ACQUIRE:
        return ACQUIRE, [key, fence_key(key)], [command.token, command.ttl_ms]
    if op is Op.RELEASE:
        return RELEASE, [key, released_key(key)], [command.token, RELEASE_MEMORY_MS]
    return EXTEND, [key], [command.token, command.ttl_ms]
