"""What both drivers' ``locked``, ``owner`` and ``force_unlock`` share: the scripts' KEYS
and ARGV, and how a reply becomes a :class:`LockOwner`.

These are reads for dashboards and a tool for operators, never part of a lock cycle:
what they report is a snapshot, stale the moment it is returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from distlock._core.commands import Kind
from distlock._protocol import FORCE_UNLOCK, OWNER, Script, fence_key, queue_keys, readers_key

_TOKEN: Final = re.compile(r"[0-9a-f]{32}")
_FENCE: Final = re.compile(r"[1-9][0-9]{0,18}")


@dataclass(frozen=True, slots=True)
class LockOwner:
    """Who holds a key, as Redis saw it at one instant (see ``Lock.owner``).

    ``ttl_ms`` is the time the key has left (None: it has no TTL and never expires).
    ``fence`` is the holder's fence where Redis stores it (a ``ReentrantLock``'s); a
    ``Lock``'s holder's fence lives only in its handle, so it is None there.
    ``token_prefix`` is the first 8 digits of the holder's token (what the ``distlock``
    logger and ``python -m distlock inspect`` show), None when the key holds no token
    (another primitive's key): compare it with ``handle.token[:8]`` to tell your own.

    ``kind`` is what holds the key, told by its Redis type and layout: ``"lock"``,
    ``"reentrant"``, ``"semaphore"``, ``"read-write"`` or ``"unknown"``.  A read-write
    lock's key reports its live writer as the holder (``token_prefix`` and ``fence``,
    None while no writer holds it) and in ``readers`` how many readers are live by
    Redis's clock (None for every other kind, and where the readers' set cannot be read:
    a user without read rights on ``distlock:readers:*``).
    """

    key: str
    ttl_ms: int | None
    fence: int | None
    token_prefix: str | None
    kind: str = "lock"
    readers: int | None = None


def as_text(value: Any) -> str:
    """A reply's string, as text whether the client decodes replies or not."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def owner_call(key: str) -> tuple[Script, list[str], list[str | int]]:
    return OWNER, [key], [readers_key(key)]


def force_unlock_call(
    key: str, *also: str
) -> tuple[Script, list[str], list[str | int]]:
    """The key, its fence counter, then each queue and places (a read-write lock's readers
    and writers share one); each queue's wake lists' prefix: whatever kind held the key,
    the first waiter of every kind looks again.  ``also``: keys deleted with the key (a
    read-write lock's readers)."""
    keys = [key, fence_key(key)]
    wakes: list[str | int] = []
    for kind in Kind:
        queue, places, wake = queue_keys(key, kind)
        if wake not in wakes:
            keys += [queue, places]
            wakes.append(wake)
    return FORCE_UNLOCK, [*keys, *also], wakes


def read_owner(key: str, reply: Any) -> LockOwner | None:
    """The :class:`LockOwner` of ``OWNER``'s reply (None: the key is free)."""
    if not reply:
        return None
    kind, ttl, token, fence = as_text(reply[0]), int(reply[1]), as_text(reply[2]), as_text(reply[3])
    count = reply[4]
    if kind == "zset" and int(count) == 0:
        return None  # a semaphore whose permits all expired holds nothing
    is_token = _TOKEN.fullmatch(token) is not None
    readers = int(count) if kind == _READ_WRITE and isinstance(count, int) else None
    if kind == _READ_WRITE and not is_token and readers == 0:
        return None  # a read-write lock whose leases all ended holds nothing
    return LockOwner(
        key=key,
        ttl_ms=None if ttl < 0 else ttl,
        fence=int(fence) if kind in ("hash", _READ_WRITE) and _FENCE.fullmatch(fence) else None,
        token_prefix=token[:8] if is_token else None,
        kind=_kind(kind, is_token, count),
        readers=readers,
    )


#: OWNER's type for a read-write lock's hash.
_READ_WRITE: Final = "read-write"


def _kind(redis_type: str, is_token: bool, count: Any) -> str:
    """What holds a key, from OWNER's reply: a reentrant lock's hash is the one OWNER
    found of its layout (count 1)."""
    if redis_type == _READ_WRITE:
        return "read-write"
    if redis_type == "string" and is_token:
        return "lock"
    if redis_type == "hash" and is_token and count == 1:
        return "reentrant"
    if redis_type == "zset":
        return "semaphore"
    return "unknown"


def permits_full(reply: Any, limit: int) -> bool:
    """Whether ``OWNER``'s reply shows a key on which a semaphore of ``limit`` grants no
    permit now: ``limit`` permits live, or another primitive's key."""
    if not reply:
        return False
    if as_text(reply[0]) != "zset":
        return True
    return int(reply[4]) >= limit


__all__ = [
    "LockOwner",
    "force_unlock_call",
    "owner_call",
    "permits_full",
    "read_owner",
]
