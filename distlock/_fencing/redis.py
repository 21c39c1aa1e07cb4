"""The Redis guards: the fence check and the caller's writes in one Lua script.

A script runs alone on its Redis, so no other command comes between the check and the
writes: a stale fence applies none of them.  The record (``prefix + resource``, the largest
admitted fence as a decimal string, no TTL) is written before the writes, so that a write
that fails part way (a wrong type) still fences out every older holder.  Redis does not roll
back a script: the writes before a failing one stay applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio as aredis

from distlock._fencing.common import Fence, check_fence, check_limit, check_resource
from distlock.errors import StaleFenceError, ValidationError

DEFAULT_PREFIX = "distlock:fenced:"

#: Fences go up to 2**63-1, past a Lua number's 53 exact bits, so the script compares them
#: as canonical decimal strings: a longer one is larger, and at equal length the order is
#: the strings' order.
ADMIT_SCRIPT = """
local fence = ARGV[1]
local newest = redis.call('GET', KEYS[1])
if newest then
  if not string.match(newest, '^%d+$') then
    return redis.error_reply('distlock: ' .. KEYS[1] .. ' does not hold a fence')
  end
  if #newest > #fence or (#newest == #fence and newest > fence) then
    return {0, newest}
  end
end
redis.call('SET', KEYS[1], fence)
local at = 2
for k = 2, #KEYS do
  local n = tonumber(ARGV[at + 1])
  redis.call(ARGV[at], KEYS[k], unpack(ARGV, at + 2, at + 1 + n))
  at = at + 2 + n
end
return {1}
"""

Value = str | bytes | int | float
_MAX_ARGS = 1000  # Lua's unpack() has a stack of about 8,000 values


def _value(value: object) -> Value:
    if isinstance(value, bool) or not isinstance(value, str | bytes | int | float):
        raise ValidationError(
            f"a Redis value must be str, bytes, int or float, not {type(value).__name__}"
        )
    return value


def _key(key: object) -> str | bytes:
    if not isinstance(key, str | bytes) or not key:
        raise ValidationError(f"a Redis key must be a non-empty str or bytes, not {key!r}")
    return key


class RedisWrites:
    """The writes one admission applies, in order; each method returns the batch.

    Only these commands, each on one key, so the script can name every key it writes (a
    Cluster routes the script by them: give them and the resource one hash tag).
    """

    def __init__(self) -> None:
        self.commands: list[tuple[str, str | bytes, tuple[Value, ...]]] = []

    def _add(self, command: str, key: object, args: Sequence[object]) -> RedisWrites:
        if len(args) > _MAX_ARGS:
            raise ValidationError(f"{command}: at most {_MAX_ARGS} arguments in one write")
        self.commands.append((command, _key(key), tuple(_value(a) for a in args)))
        return self

    def set(self, key: str | bytes, value: Value, *, px: int | None = None) -> RedisWrites:
        """``SET key value`` (``PX px``: with a TTL in milliseconds)."""
        if px is None:
            return self._add("SET", key, (value,))
        if isinstance(px, bool) or not isinstance(px, int) or px <= 0:
            raise ValidationError(f"px must be a positive int of milliseconds, not {px!r}")
        return self._add("SET", key, (value, "PX", px))

    def delete(self, key: str | bytes) -> RedisWrites:
        """``DEL key``."""
        return self._add("DEL", key, ())

    def hset(self, key: str | bytes, mapping: dict[str, Value]) -> RedisWrites:
        """``HSET key field value [field value ...]``."""
        if not isinstance(mapping, dict) or not mapping:
            raise ValidationError("hset takes a non-empty dict of fields to values")
        return self._add("HSET", key, [x for pair in mapping.items() for x in pair])

    def hdel(self, key: str | bytes, *fields: str) -> RedisWrites:
        """``HDEL key field [field ...]``."""
        if not fields:
            raise ValidationError("hdel takes at least one field")
        return self._add("HDEL", key, fields)

    def incrby(self, key: str | bytes, amount: int) -> RedisWrites:
        """``INCRBY key amount``."""
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise ValidationError(f"incrby takes an int amount, not {amount!r}")
        return self._add("INCRBY", key, (amount,))

    def rpush(self, key: str | bytes, *values: Value) -> RedisWrites:
        """``RPUSH key value [value ...]``."""
        if not values:
            raise ValidationError("rpush takes at least one value")
        return self._add("RPUSH", key, values)

    def pexpire(self, key: str | bytes, ms: int) -> RedisWrites:
        """``PEXPIRE key ms``."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms <= 0:
            raise ValidationError(f"pexpire takes a positive int of milliseconds, not {ms!r}")
        return self._add("PEXPIRE", key, (ms,))

    def __repr__(self) -> str:
        return f"RedisWrites({[(c, k) for c, k, _ in self.commands]!r})"


def _glob(prefix: str) -> str:
    """``prefix`` with SCAN's pattern characters escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in prefix)


class _Guard:
    def __init__(self, prefix: str) -> None:
        if not isinstance(prefix, str):
            raise ValidationError(f"prefix must be a str, not {type(prefix).__name__}")
        self.prefix = prefix

    def record_key(self, resource: str) -> str:
        """The key holding ``resource``'s largest admitted fence."""
        return self.prefix + check_resource(resource)

    def _call(
        self, writes: RedisWrites, resource: str, fence: Fence
    ) -> tuple[str, int, list[str | bytes], list[Value]]:
        resource, value = check_resource(resource), check_fence(fence)
        if not isinstance(writes, RedisWrites) or not writes.commands:
            raise ValidationError(
                "pass a RedisWrites with at least one write: an admission applies its writes "
                "in the same script, and a fence admitted alone protects no later write"
            )
        keys: list[str | bytes] = [self.prefix + resource]
        args: list[Value] = [str(value)]
        for command, key, cargs in writes.commands:
            keys.append(key)
            args += [command, len(cargs), *cargs]
        return resource, value, keys, args

    @staticmethod
    def _check(resource: str, fence: int, reply: Any) -> None:
        if int(reply[0]) != 1:
            raise StaleFenceError(resource, fence, int(reply[1]))


class RedisFence(_Guard):
    """Admits a fence and applies writes in one script, on a ``redis.Redis`` (or a
    ``RedisCluster``: the record and the written keys must share a hash slot)."""

    def __init__(
        self, client: redis.Redis | redis.RedisCluster, *, prefix: str = DEFAULT_PREFIX
    ) -> None:
        super().__init__(prefix)
        self.client = client
        self._script = client.register_script(ADMIT_SCRIPT)

    def admit(self, writes: RedisWrites, resource: str, fence: Fence) -> None:
        """Apply ``writes`` if ``fence`` is at least the largest admitted for ``resource``,
        recording it; else raise :class:`StaleFenceError` and apply nothing."""
        resource, value, keys, args = self._call(writes, resource, fence)
        self._check(resource, value, self._script(keys=keys, args=args))

    def admit_and_set(
        self, resource: str, fence: Fence, key: str | bytes, value: Value,
        *, px: int | None = None,
    ) -> None:
        """``admit(RedisWrites().set(key, value, px=px), resource, fence)``."""
        self.admit(RedisWrites().set(key, value, px=px), resource, fence)

    def newest(self, resource: str) -> int | None:
        """The largest fence admitted for ``resource`` (None: none)."""
        found = self.client.get(self.record_key(resource))
        return None if found is None else int(found)

    def fences(self, limit: int = 1000) -> list[tuple[str, int]]:
        """Every resource recorded under the prefix on the node ``client`` reads, and the
        largest fence admitted for it, in the resources' order, at most ``limit`` of them
        (``SCAN``, never ``KEYS``; what ``python -m distlock inspect --fences`` shows)."""
        limit = check_limit(limit)
        keys: list[str] = []
        for key in self.client.scan_iter(match=_glob(self.prefix) + "*", count=1000):
            keys.append(key.decode() if isinstance(key, bytes) else str(key))
        chosen = sorted(keys)[:limit]
        # one round trip for all the values, not one per record (a Cluster's pipeline
        # splits it by node)
        pipe = self.client.pipeline(transaction=False)
        for key in chosen:
            pipe.get(key)
        values = pipe.execute()
        # admitted records have no TTL: a None is one deleted since the scan
        return [
            (key[len(self.prefix):], int(value))
            for key, value in zip(chosen, values, strict=True)
            if value is not None
        ]


class AsyncRedisFence(_Guard):
    """:class:`RedisFence` on a ``redis.asyncio.Redis`` (or its ``RedisCluster``)."""

    def __init__(
        self, client: aredis.Redis | aredis.RedisCluster, *, prefix: str = DEFAULT_PREFIX
    ) -> None:
        super().__init__(prefix)
        self.client = client
        self._script = client.register_script(ADMIT_SCRIPT)

    async def admit(self, writes: RedisWrites, resource: str, fence: Fence) -> None:
        """As :meth:`RedisFence.admit`."""
        resource, value, keys, args = self._call(writes, resource, fence)
        self._check(resource, value, await self._script(keys=keys, args=args))

    async def admit_and_set(
        self, resource: str, fence: Fence, key: str | bytes, value: Value,
        *, px: int | None = None,
    ) -> None:
        """As :meth:`RedisFence.admit_and_set`."""
        await self.admit(RedisWrites().set(key, value, px=px), resource, fence)

    async def newest(self, resource: str) -> int | None:
        """As :meth:`RedisFence.newest`."""
        found = await self.client.get(self.record_key(resource))
        return None if found is None else int(found)
