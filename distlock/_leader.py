"""What both drivers' elections share: a candidate's identity, the read of who leads, and
how its reply becomes a :class:`Leader`."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Final

from distlock._operator import as_text
from distlock._protocol import E_LEADER, Script, leader_key
from distlock.errors import ValidationError
from distlock.options import MAX_MS

#: The longest identity a candidate may give: it is written into the leader record at
#: every grant and read by every observer, so it is a name, not a payload.
MAX_IDENTITY: Final = 256


@dataclass(frozen=True, slots=True)
class Leader:
    """Who leads an election, as Redis saw it at one instant (see ``Election.leader``).

    ``identity`` is the string the leader gave when it campaigned; ``fence`` the fence it
    was granted (larger than every earlier leader's: pass it on with the leader's writes
    so that a resource can refuse a deposed leader's); ``ttl_ms`` the time its lease has
    left at Redis, unless it is renewed (or, at most, until a resignation ends it)."""

    identity: str
    fence: int
    ttl_ms: int


def default_identity() -> str:
    """A candidate's identity when it gives none: ``<host>:<pid>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def check_identity(identity: object) -> str:
    """``identity`` if it is a non-empty str of at most :data:`MAX_IDENTITY` characters."""
    if not isinstance(identity, str) or not identity or len(identity) > MAX_IDENTITY:
        raise ValidationError(
            f"identity must be a non-empty str of at most {MAX_IDENTITY} characters (the "
            f"name leader() reports for this candidate), got {identity!r:.80}"
        )
    return identity


def check_poll(poll_ms: object) -> int:
    if isinstance(poll_ms, int) and not isinstance(poll_ms, bool) and 1 <= poll_ms <= MAX_MS:
        return poll_ms
    raise ValidationError(
        f"poll_ms must be an int of milliseconds from 1 to {MAX_MS} (how often observe() "
        f"reads who leads when no notification comes), got {poll_ms!r:.80}"
    )


def leader_call(key: str) -> tuple[Script, list[str], list[str | int]]:
    """``E_LEADER`` for election ``key``: its key and its leader record."""
    return E_LEADER, [key, leader_key(key)], []


def read_leader(reply: Any) -> Leader | None:
    """The :class:`Leader` of ``E_LEADER``'s reply (None: nobody leads)."""
    if not reply:
        return None
    identity, fence, ttl = reply
    return Leader(as_text(identity), int(fence), int(ttl))


def keyspace_channel(db: int, key: str) -> str:
    """The keyspace notifications' channel of ``key`` in database ``db``."""
    return f"__keyspace@{db}__:{key}"
