"""What a scenario module registers itself with: the :func:`scenario` decorator, the
:class:`Context` a scenario function gets, and the :class:`Entry` each registration makes.

A scenario is a plain function of a :class:`Context` (and, for the ones run in both
drivers, of ``mode``: ``"sync"`` or ``"asyncio"``), registered with :func:`scenario`.
It makes its :class:`~distlock.tools.chaos.harness.Scenario` with
:meth:`Context.scenario`, runs its trials, and ends with ``Scenario.finish``; a failed
check raises :class:`~distlock.tools.chaos.failures.ScenarioFailed`.  The scenario modules
import this one; :mod:`~distlock.tools.chaos.registry` imports them and lists what they
registered.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import redis

from distlock.tools.chaos.harness import Scenario
from distlock.tools.chaos.report import ChaosReport
from distlock.tools.chaos.targets import RedisTarget, Settings
from distlock.tools.servers.toxiproxy import Proxy

MODES = ("sync", "asyncio")


@dataclass
class Context:
    """What a scenario function gets: the Redis, the proxy in front of it, the report."""

    title: str
    target: RedisTarget
    proxy: Proxy
    settings: Settings
    report: ChaosReport
    admin: redis.Redis
    made: list[Scenario] = field(default_factory=list)
    #: The scenarios made leave TLC's verdict on their traced trial for later
    #: (:attr:`Scenario.deferred <distlock.tools.chaos.harness.Scenario.deferred>`).
    defer_traces: bool = False

    def scenario(
        self,
        *,
        ttl_ms: int,
        reentrant: bool = False,
        limit: int | None = None,
        cooperative_every: int = 3,
    ) -> Scenario:
        """The scenario's recorder, clients and checks, for locks of ``ttl_ms``; with
        ``reentrant``, on ReentrantLocks whose victims re-enter the key in their bodies;
        with ``limit``, on Semaphores of that many permits.  Long victim bodies are
        cooperative in one trial of ``cooperative_every``."""
        made = Scenario(
            name=self.title,
            ttl_ms=ttl_ms,
            reentrant=reentrant,
            limit=limit,
            cooperative_every=cooperative_every,
            target=self.target,
            proxy=self.proxy,
            settings=self.settings,
            report=self.report,
            admin=self.admin,
            defer_trace=self.defer_traces,
        )
        self.made.append(made)
        return made

    def close(self) -> None:
        """Close every client and Lock left open, and delete the scenario's keys."""
        for made in self.made:
            made.clients.close_sync()
            self.target.cleanup(made.params.prefix)


@dataclass(frozen=True)
class Entry:
    #: What ``--scenarios`` and pytest's test ids call it, e.g. ``proxy-down-past-the-ttl-sync``.
    name: str
    #: The name without the driver, selecting both (``proxy-down-past-the-ttl``).
    group: str
    #: The report row's name, e.g. ``proxy disabled 2xTTL then re-enabled [sync]``.
    title: str
    #: One line: the fault and what the lock must do about it.
    summary: str
    run: Callable[[Context], None]
    #: Pauses or kills Redis itself: runs only against a redis-server this tool started.
    needs_own_redis: bool = False


REGISTRY: dict[str, Entry] = {}


def scenario(
    name: str,
    title: str,
    summary: str,
    *,
    modes: Iterable[str] | None = None,
    needs_own_redis: bool = False,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register the decorated function; with ``modes``, once per driver (it then takes
    ``mode`` as a keyword, and ``{mode}`` in ``title`` names it)."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        variants: list[tuple[str, str, Callable[[Context], None]]] = []
        if modes is None:
            variants.append((name, title, fn))
        else:
            for mode in modes:
                run: Callable[[Context], None] = functools.partial(fn, mode=mode)
                variants.append((f"{name}-{mode}", title.format(mode=mode), run))
        for full, full_title, run in variants:
            if full in REGISTRY:
                raise ValueError(f"two chaos scenarios named {full!r}")
            REGISTRY[full] = Entry(full, name, full_title, summary, run, needs_own_redis)
        return fn

    return register
