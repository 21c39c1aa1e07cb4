"""The three Lua scripts and the keys they touch.

Each script touches only the keys passed in KEYS, and the fence counter shares the lock
key's hash slot, so every script is Redis Cluster compatible.  Scripts run atomically and
see time frozen at their start, which is what makes the token checks sound.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from distlock._core.section import Op


@dataclass(frozen=True, slots=True)
class Script:
    source: str
    sha: str

    @classmethod
    def of(cls, source: str) -> Script:
        return cls(source, hashlib.sha1(source.encode()).hexdigest())


#: KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] ttl ms.
#: Returns the new fence, or 0 when another token holds the key.  Idempotent for the same
#: token: a client-side retry of a request that already ran gets its own fence back
#: instead of being told the lock is taken by someone else (itself).
ACQUIRE: Final = Script.of(
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
EXTEND: Final = Script.of(
    """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
)

#: KEYS[1] lock key; ARGV[1] token. 1 if deleted, 0 if not ours.
RELEASE: Final = Script.of(
    """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
)

SCRIPTS: Final = {Op.ACQUIRE: ACQUIRE, Op.EXTEND: EXTEND, Op.RELEASE: RELEASE}


def fence_key(key: str) -> str:
    """The fence counter's key, in the lock key's Cluster hash slot.

    A key with a hash tag (``{...}`` with something inside) already chooses its slot, and
    appending keeps the tag; otherwise the whole lock key becomes the tag.
    """
    start = key.find("{")
    if start != -1:
        end = key.find("}", start + 1)
        if end > start + 1:
            return f"{key}:fence"
    return f"{{{key}}}:fence"


def command(op: Op, key: str, token: str, ttl_ms: int) -> tuple[Script, list[str], list[str | int]]:
    """The script, KEYS and ARGV for ``op``."""
    if op is Op.ACQUIRE:
        return ACQUIRE, [key, fence_key(key)], [token, ttl_ms]
    if op is Op.EXTEND:
        return EXTEND, [key], [token, ttl_ms]
    return RELEASE, [key], [token]
