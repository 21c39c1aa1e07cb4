"""Where the chaos scenarios find Redis and Toxiproxy, and how they hurt Redis.

By default everything is local and owned by the tool: a redis-server per scenario
(started without persistence on a free loopback port) and one Toxiproxy server for the
run.  A team points it at its own infrastructure with ``python -m distlock chaos
--redis URL --toxiproxy URL`` (see :mod:`distlock.tools.chaos.cli`), and the project's
pytest wrappers read the same settings from the environment (:meth:`Settings.from_env`):

``TOXIPROXY_URL``         an already running Toxiproxy API, e.g. ``http://127.0.0.1:8474``
``CHAOS_REDIS_URL``       a Redis the clients reach directly, e.g. ``redis://127.0.0.1:6380/0``
``CHAOS_REDIS_UPSTREAM``  how Toxiproxy reaches that Redis (``redis:6379`` inside compose);
                          defaults to the host and port of ``CHAOS_REDIS_URL``
``CHAOS_PROXY_LISTEN``    where Toxiproxy listens for the proxy, e.g. ``0.0.0.0:26379``
``CHAOS_PROXY_ADDRESS``   where the clients reach that listener, e.g. ``127.0.0.1:26379``
``CHAOS_DETECTION_SLACK_MS``  scheduling slack on top of the TTL for detection (default
                          ``max(150, ttl / 2)`` per scenario)
``CHAOS_TRACE_DIR``       keep each scenario's traced trial there (``<scenario>.ndjson``),
                          for ``python -m distlock validate-trace``

A Redis the tool did not start is never paused, killed or restarted: the scenarios that
need that (:attr:`~distlock.tools.chaos.registration.Entry.needs_own_redis`) are reported as
not run against it.  Against such a Redis the tool touches only keys under each
scenario's own random prefix (``chaos-<hex>``), deleted after the scenario, and bumps the
fence counters of their hash slots (``distlock:fence:*``, which only ever grow).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import redis

from distlock.tools.servers.redis_server import RedisServer

#: Every scenario's keys start with this (``chaos-<hex>:res`` and the like).
KEY_PREFIX = "chaos-"


@dataclass(frozen=True)
class Settings:
    toxiproxy_url: str | None
    redis_url: str | None
    redis_upstream: str | None
    proxy_listen: str | None
    proxy_address: str | None
    slack_ms: float | None
    #: Where to keep each scenario's traced trial as NDJSON (None: not kept).
    trace_dir: str | None = None
    #: Ask TLC whether each traced trial is a behaviour of the spec.  False where TLC is
    #: not installed: the report then says "not checked: no TLC" instead of a count.
    validate_traces: bool = True

    @classmethod
    def from_env(cls) -> Settings:
        def get(name: str) -> str | None:
            value = os.environ.get(name, "").strip()
            return value or None

        slack = get("CHAOS_DETECTION_SLACK_MS")
        return cls(
            toxiproxy_url=get("TOXIPROXY_URL"),
            redis_url=get("CHAOS_REDIS_URL"),
            redis_upstream=get("CHAOS_REDIS_UPSTREAM"),
            proxy_listen=get("CHAOS_PROXY_LISTEN"),
            proxy_address=get("CHAOS_PROXY_ADDRESS"),
            slack_ms=float(slack) if slack else None,
            trace_dir=get("CHAOS_TRACE_DIR"),
        )

    def slack_for(self, ttl_ms: int) -> float:
        return self.slack_ms if self.slack_ms is not None else max(150.0, ttl_ms / 2)


class RedisTarget(Protocol):
    host: str
    port: int

    @property
    def url(self) -> str: ...

    @property
    def upstream(self) -> str:
        """``host:port`` as Toxiproxy must dial it."""
        ...

    @property
    def external(self) -> bool:
        """A Redis this tool did not start (never paused, killed or restarted)."""
        ...

    def cleanup(self, prefix: str) -> None:
        """Delete what a scenario with keys under ``prefix`` left behind."""
        ...


class LocalTarget:
    """A redis-server this tool started: SIGSTOP/SIGCONT and SIGKILL + restart, for real."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.host = server.host
        self.port = server.port

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def upstream(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def external(self) -> bool:
        return False

    def pause(self, seconds: float) -> None:
        """SIGSTOP for ``seconds``: answer nothing and expire nothing; returns when over."""
        self.server.pause()
        try:
            # The pause's length is the fault being injected, not a wait for something.
            time.sleep(seconds)
        finally:
            self.server.resume()

    def lose_data(
        self, down_for: float = 0.0, down: Callable[[float, float], None] | None = None
    ) -> None:
        """SIGKILL, down ``down_for`` seconds, back on the same port with no data.
        ``down`` is told the stretch (monotonic seconds) in which no redis-server could
        serve a request sent in it: from the SIGKILL (see ``RedisServer.kill``) to right
        before the new one starts."""
        since = self.server.kill()  # returns once the process has exited
        assert since is not None, "the target's redis-server was not running"
        # How long Redis stays down is part of the fault, not a wait for something.
        time.sleep(down_for)
        if down is not None:
            down(since, time.monotonic())
        self.server.start()

    def cleanup(self, prefix: str) -> None:
        """Nothing: the server goes away with the scenario."""


class ExternalTarget:
    """A Redis the team runs itself; only the scenario's own keys are touched."""

    def __init__(self, url: str, upstream: str | None) -> None:
        parts = urlsplit(url)
        self._url = url
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 6379
        self._upstream = upstream or f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return self._url

    @property
    def upstream(self) -> str:
        return self._upstream

    @property
    def external(self) -> bool:
        return True

    def cleanup(self, prefix: str) -> None:
        """Delete the scenario's keys: ``<prefix>:*`` and distlock's records beside them
        (release records, waiters' queues and wake lists)."""
        admin = redis.Redis.from_url(self._url, socket_timeout=10)
        try:
            keys = list(admin.scan_iter(match=f"*{prefix}*", count=1000))
            if keys:
                admin.delete(*keys)
        finally:
            admin.close()


def is_own_key(key: str) -> bool:
    """A key the chaos scenarios write: under ``chaos-``, distlock's own record beside one
    (a release record, a waiters' queue or wake list), or a fence counter (shared per hash
    slot, created by any distlock lock)."""
    return (
        key.startswith(KEY_PREFIX)
        or key.startswith("distlock:fence:")
        or (key.startswith("distlock:") and f":{KEY_PREFIX}" in key)
    )


def foreign_keys(client: redis.Redis, *, limit: int = 100_000) -> int:
    """How many keys outside the tool's own (see :func:`is_own_key`): 0 on an empty
    Redis at the cost of one DBSIZE; otherwise counted with SCAN (never KEYS), up to
    ``limit`` keys looked at."""
    size = int(client.dbsize())
    if size == 0:
        return 0
    foreign = 0
    for seen, raw in enumerate(client.scan_iter(count=1000)):
        if seen >= limit:
            # Past the limit: the rest are counted as foreign (the refusal stands).
            return foreign + max(0, size - seen)
        key = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        if not is_own_key(key):
            foreign += 1
    return foreign
