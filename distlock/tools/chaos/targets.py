"""Where the suite finds Redis and Toxiproxy, and how it hurts Redis.

By default everything is local and owned by the suite: a redis-server per test (started
without persistence on a free loopback port) and one Toxiproxy server for the session.
A team points the suite at its own infrastructure with environment variables:

``TOXIPROXY_URL``         an already running Toxiproxy API, e.g. ``http://127.0.0.1:8474``
``CHAOS_REDIS_URL``       a Redis the tests reach directly, e.g. ``redis://127.0.0.1:6380/0``
``CHAOS_REDIS_UPSTREAM``  how Toxiproxy reaches that Redis (``redis:6379`` inside compose);
                          defaults to the host and port of ``CHAOS_REDIS_URL``
``CHAOS_PROXY_LISTEN``    where Toxiproxy listens for the proxy, e.g. ``0.0.0.0:26379``
``CHAOS_PROXY_ADDRESS``   where the tests reach that listener, e.g. ``127.0.0.1:26379``
``CHAOS_DETECTION_SLACK_MS``  scheduling slack on top of the TTL for detection (default
                          ``max(150, ttl / 2)`` per scenario)
``CHAOS_TRACE_DIR``       keep each scenario's traced trial there (``<scenario>.ndjson``),
                          for ``python -m distlock validate-trace``

With ``CHAOS_REDIS_URL`` the suite cannot SIGSTOP or SIGKILL that Redis: a pause becomes
``CLIENT PAUSE <ms> ALL`` (Redis >= 6.2; it also holds key expiry, like SIGSTOP) and a
restart that loses the data becomes the deletion of every key under the scenario's own
unique prefix (the lock keys and their release records; the fence counters are shared by
every key of a hash slot, so they are left alone).  Nothing else is touched.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import redis

from tests.redis_server import RedisServer


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
    def external(self) -> bool: ...

    def pause(self, seconds: float) -> None:
        """Answer nothing and expire nothing for ``seconds``; returns when it is over."""
        ...

    def lose_data(self, prefix: str, down_for: float = 0.0) -> None:
        """Forget every key under ``prefix``, as a restart without persistence does
        (a local server is killed, stays down ``down_for`` seconds, and comes back empty)."""
        ...


class LocalTarget:
    """A redis-server child process: SIGSTOP/SIGCONT and SIGKILL + restart, for real."""

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
        self.server.pause()
        try:
            # The pause's length is the fault being injected, not a wait for something.
            time.sleep(seconds)
        finally:
            self.server.resume()

    def lose_data(self, prefix: str, down_for: float = 0.0) -> None:
        self.server.kill()
        # How long Redis stays down is part of the fault, not a wait for something.
        time.sleep(down_for)
        self.server.start()


class ExternalTarget:
    """A Redis the team runs itself; the faults stay inside the scenario's key prefix."""

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

    def _admin(self) -> redis.Redis:
        return redis.Redis.from_url(self._url, socket_timeout=10)

    def pause(self, seconds: float) -> None:
        admin = self._admin()
        try:
            admin.client_pause(max(1, int(seconds * 1000)), all=True)
        finally:
            admin.close()
        time.sleep(seconds)

    def lose_data(self, prefix: str, down_for: float = 0.0) -> None:
        time.sleep(down_for)
        admin = self._admin()
        try:
            keys = list(admin.scan_iter(match=f"*{prefix}*", count=1000))
            if keys:
                admin.delete(*keys)
        finally:
            admin.close()
