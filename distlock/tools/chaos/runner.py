"""Runs registered scenarios one at a time, each against a fresh proxy (and a fresh
redis-server of its own unless the settings name an external Redis), and records how
each ended in the report.  ``python -m distlock chaos`` and the project's pytest
wrappers both run scenarios through :class:`Runner`.

``Runner.run`` waits for TLC's verdict on a scenario's traced trial before it returns,
but for the scenarios named in ``defer_traces``: their check runs on beside the next
scenarios' trials, and :meth:`Runner.trace_verdict` waits for it later (the test suite
asks for each in a test of its own, after the scenarios, instead of idling through each
check in turn).
"""

from __future__ import annotations

import shutil
import time
import traceback
from collections.abc import Collection
from contextlib import ExitStack
from dataclasses import dataclass

import redis

from distlock.tools import specfiles
from distlock.tools.chaos.failures import NEEDS_OWN_REDIS, ScenarioFailed, ScenarioNotRun
from distlock.tools.chaos.harness import DeferredTrace
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
        self,
        settings: Settings,
        toxiproxy: ToxiproxyClient,
        report: ChaosReport,
        *,
        defer_traces: Collection[str] = (),
    ) -> None:
        self.settings = settings
        self.toxiproxy = toxiproxy
        self.report = report
        #: Scenarios (:attr:`Entry.name`) whose TLC verdict :meth:`trace_verdict` gives,
        #: instead of :meth:`run` waiting for it.
        self.defer_traces = frozenset(defer_traces)
        #: Their checks, from :meth:`run` to :meth:`trace_verdict`.
        self._deferred: dict[str, list[DeferredTrace]] = {}

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
            defer = entry.name in self.defer_traces
            ctx = Context(
                entry.title, target, proxy, self.settings, self.report, admin,
                defer_traces=defer,
            )
            stack.callback(ctx.close)
            try:
                entry.run(ctx)
            except ScenarioNotRun as exc:
                status, message = "not run", str(exc)
            except (ScenarioFailed, AssertionError) as exc:
                status, message = "failed", str(exc) or type(exc).__name__
            except Exception:
                status, message = "failed", traceback.format_exc()
            finally:
                if defer:
                    self._deferred[entry.name] = [
                        sc.deferred
                        for sc in ctx.made
                        if sc.deferred is not None and status != "not run"
                    ]
        if status == "not run":
            del self.report.rows[since:]
            self.report.not_run(entry.title, message or "")
        elif status == "failed":
            self.report.failed(entry.title, message or "", since)
        return Result(entry, status, message, time.monotonic() - started)

    def trace_verdict(self, entry: Entry) -> Result:
        """TLC's verdict on the traced trial of ``entry``, run earlier with its check left
        for later (``defer_traces``): waits for it; a rejection fails the scenario's row.
        "not run" when the scenario ended before its checks (its own result says why);
        "failed" when it has not run at all."""
        started = time.monotonic()
        if entry.name not in self.defer_traces:
            raise ValueError(f"{entry.name}: its trace is checked by run(), not left for later")
        pending = self._deferred.pop(entry.name, None)
        if pending is None:
            message = "the scenario has not run: its verdict is asked for before its run"
            return Result(entry, "failed", message, 0.0)
        if not pending:
            message = "no check of a traced trial: the scenario ended before its checks"
            return Result(entry, "not run", message, 0.0)
        failures: list[str] = []
        for deferred in pending:
            found = deferred.problems()
            if found is None:
                continue
            failures.append(found)
            row = deferred.row
            if row.status == "failed" and row.reason:
                row.reason = f"{row.reason}\n{found}"
            else:
                row.status, row.reason = "failed", found
        status: Status = "failed" if failures else "passed"
        return Result(
            entry, status, "\n".join(failures) or None, time.monotonic() - started
        )

    def _target(self, stack: ExitStack) -> RedisTarget:
        if self.settings.redis_url is not None:
            return ExternalTarget(self.settings.redis_url, self.settings.redis_upstream)
        server = RedisServer()
        stack.callback(server.stop)
        server.start()
        return LocalTarget(server)
