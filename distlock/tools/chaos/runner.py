"""Runs registered scenarios one at a time, each against a fresh proxy (and a fresh
redis-server of its own unless the settings name an external Redis), and records how
each ended in the report.  ``python -m distlock chaos`` and the project's pytest
wrappers both run scenarios through :class:`Runner`.
"""

from __future__ import annotations

import shutil
import time
import traceback
from contextlib import ExitStack
from dataclasses import dataclass

import redis

from distlock.tools import specfiles
from distlock.tools.chaos.failures import NEEDS_OWN_REDIS, ScenarioFailed, ScenarioNotRun
from distlock.tools.chaos.registration import Context, Entry
from distlock.tools.chaos.report import ChaosReport, Status
from distlock.tools.chaos.targets import ExternalTarget, LocalTarget, RedisTarget, Settings
from distlock.tools.servers.redis_server import RedisServer, free_port
from distlock.tools.servers.toxiproxy import ToxiproxyClient

#: The one proxy a scenario uses (created before it, deleted after it).
PROXY_NAME = "distlock-chaos"


@dataclass(frozen=True)
class Result:
    entry: Entry
    status: Status
    #: Why it failed (the checks' message with the timeline) or was not run.
    message: str | None
    seconds: float


def tlc_available() -> bool:
    """Java on PATH and TLC's jar installed: the traced trials can be checked."""
    if shutil.which("java") is None:
        return False
    try:
        return specfiles.tla2tools().is_file()
    except FileNotFoundError:
        return False


class Runner:
    """``Runner(settings, toxiproxy, report).run(entry)``: one scenario, start to end."""

    def __init__(
        self, settings: Settings, toxiproxy: ToxiproxyClient, report: ChaosReport
    ) -> None:
        self.settings = settings
        self.toxiproxy = toxiproxy
        self.report = report

    @property
    def external(self) -> bool:
        """The scenarios run against a Redis this tool did not start."""
        return self.settings.redis_url is not None

    def run(self, entry: Entry) -> Result:
        started = time.monotonic()
        if entry.needs_own_redis and self.external:
            self.report.not_run(entry.title, NEEDS_OWN_REDIS)
            return Result(entry, "not run", NEEDS_OWN_REDIS, 0.0)
        since = len(self.report.rows)
        status: Status = "passed"
        message: str | None = None
        with ExitStack() as stack:
            target = self._target(stack)
            listen = self.settings.proxy_listen or f"127.0.0.1:{free_port()}"
            proxy = self.toxiproxy.create_proxy(
                PROXY_NAME,
                listen=listen,
                upstream=target.upstream,
                address=self.settings.proxy_address,
            )
            stack.callback(proxy.delete)
            # A direct connection for looking at Redis (never through the proxy).
            admin = redis.Redis.from_url(target.url, socket_timeout=5)
            stack.callback(admin.close)
            ctx = Context(entry.title, target, proxy, self.settings, self.report, admin)
            stack.callback(ctx.close)
            try:
                entry.run(ctx)
            except ScenarioNotRun as exc:
                status, message = "not run", str(exc)
            except (ScenarioFailed, AssertionError) as exc:
                status, message = "failed", str(exc) or type(exc).__name__
            except Exception:
                status, message = "failed", traceback.format_exc()
        if status == "not run":
            del self.report.rows[since:]
            self.report.not_run(entry.title, message or "")
        elif status == "failed":
            self.report.failed(entry.title, message or "", since)
        return Result(entry, status, message, time.monotonic() - started)

    def _target(self, stack: ExitStack) -> RedisTarget:
        if self.settings.redis_url is not None:
            return ExternalTarget(self.settings.redis_url, self.settings.redis_upstream)
        server = RedisServer()
        stack.callback(server.stop)
        server.start()
        return LocalTarget(server)
