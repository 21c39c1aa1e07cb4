"""The scenarios, by name: what ``python -m distlock chaos`` runs and the pytest wrappers
parametrize over.

Each scenario module registers its scenarios when imported
(:mod:`~distlock.tools.chaos.registration`); :func:`entries` imports them all and lists
them in the order the suite runs them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from distlock.tools.chaos.registration import REGISTRY, Entry


def entries() -> list[Entry]:
    """Every registered scenario, in the order the suite runs them."""
    _load()
    return list(REGISTRY.values())


def select(names: Iterable[str] | None) -> list[Entry]:
    """The entries named (a full name, or a group naming both drivers); every one for
    ``None``.  An unknown name is a ``KeyError`` listing the known ones."""
    every = entries()
    if names is None:
        return every
    wanted = list(names)
    unknown = [n for n in wanted if not any(n in (e.name, e.group) for e in every)]
    if unknown:
        raise KeyError(
            f"unknown chaos scenario(s) {', '.join(unknown)}: "
            "`python -m distlock chaos --list` names them all"
        )
    return [e for e in every if e.name in wanted or e.group in wanted]


def _load() -> None:
    # Importing the modules registers their scenarios.
    from distlock.tools.chaos.scenarios import (  # noqa: F401
        client_crash,
        election,
        network,
        readwrite,
        redis_process,
        reentrant,
        semaphore,
        starvation,
    )


def describe(entry: Entry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "title": entry.title,
        "summary": entry.summary,
        "needs_own_redis": entry.needs_own_redis,
    }
