"""Prefixes refused at construction, before any connection, by both drivers: one that
cannot be sent (not UTF-8) and one among distlock's own keys.  The rules a user meets
against a real redis-server, on both drivers, are in
``tests/drivers/_async/test_user_rules.py``."""

from __future__ import annotations

from typing import Any

import pytest

import distlock
import distlock.asyncio
from distlock import ValidationError

KINDS = ["lock", "reentrant", "semaphore"]


def _sync_primitive(kind: str, client: Any, **options: Any) -> Any:
    if kind == "semaphore":
        return distlock.Semaphore(client, limit=1, **options)
    if kind == "reentrant":
        return distlock.ReentrantLock(client, **options)
    return distlock.Lock(client, **options)


def _async_primitive(kind: str, client: Any, **options: Any) -> Any:
    if kind == "semaphore":
        return distlock.asyncio.Semaphore(client, limit=1, **options)
    if kind == "reentrant":
        return distlock.asyncio.ReentrantLock(client, **options)
    return distlock.asyncio.Lock(client, **options)


def test_unencodable_prefix_is_refused_at_construction() -> None:
    for make in (
        lambda: distlock.Lock("redis://127.0.0.1:1", prefix="p\ud800"),
        lambda: distlock.Semaphore("redis://127.0.0.1:1", limit=1, prefix="p\ud800"),
        lambda: distlock.asyncio.ReentrantLock("redis://127.0.0.1:1", prefix="\udc80"),
    ):
        with pytest.raises(ValidationError, match="UTF-8"):
            make()


# -- a prefix among distlock's own keys -------------------------------------------------

INTERNAL_PREFIXES = ["distlock", "distlock:fence", "distlock:queue:{x}", "distlock:"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prefix", INTERNAL_PREFIXES)
def test_a_prefix_among_distlocks_own_keys_is_refused(kind: str, prefix: str) -> None:
    url = "redis://127.0.0.1:1"  # never connected to: refused before
    with pytest.raises(ValidationError, match="distlock keeps its own keys"):
        _sync_primitive(kind, url, prefix=prefix)
    with pytest.raises(ValidationError, match="distlock keeps its own keys"):
        _async_primitive(kind, url, prefix=prefix)
