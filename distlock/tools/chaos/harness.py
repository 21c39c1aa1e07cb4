"""A scenario: its parts, made for one name and TTL, and its end.

:class:`Scenario` composes the parts a scenario function uses:

- ``params`` (:mod:`~distlock.tools.chaos.params`): the name, the TTL and kind of lock,
  the key;
- ``recorder`` (:mod:`~distlock.tools.chaos.recorder`): every section and command;
- ``trace`` (:mod:`~distlock.tools.chaos.tracing`): the traced trial's events and TLC's
  check of them;
- ``clients`` (:mod:`~distlock.tools.chaos.clients`): recorded clients and locks, through
  the proxy or straight to Redis;
- ``sections`` (:mod:`~distlock.tools.chaos.sections`): one recorded ``run`` with a body;
- ``trials`` (:mod:`~distlock.tools.chaos.trials`): victims, intruder, waiters and the
  injector of one trial;
- ``faults`` (:mod:`~distlock.tools.chaos.faults`): when a fault lands and how long it
  stays;

and ends with :meth:`Scenario.finish`: the leak checks, the invariants, the report row
and the problems that fail it (:mod:`~distlock.tools.chaos.judging`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from distlock.tools.chaos import judging
from distlock.tools.chaos.clients import Clients
from distlock.tools.chaos.failures import (
    NEEDS_OWN_REDIS,
    ScenarioFailed,
    ScenarioNotRun,
    timeline,
)
from distlock.tools.chaos.faults import Faults
from distlock.tools.chaos.invariants import Verdict, check
from distlock.tools.chaos.leaks import Baseline, check_no_leaks
from distlock.tools.chaos.params import Params
from distlock.tools.chaos.recorder import Recorder
from distlock.tools.chaos.report import ChaosReport, Row
from distlock.tools.chaos.sections import Sections
from distlock.tools.chaos.targets import LocalTarget, RedisTarget, Settings
from distlock.tools.chaos.tracing import TrialTrace
from distlock.tools.chaos.trials import Trials
from distlock.tools.chaos.waiters import WAIT_ALLOWANCE_MS
from distlock.tools.servers.toxiproxy import Proxy


@dataclass
class Scenario:
    name: str
    ttl_ms: int
    target: RedisTarget
    proxy: Proxy | None
    settings: Settings
    report: ChaosReport
    admin: redis.Redis
    #: On ReentrantLocks (see :class:`~distlock.tools.chaos.params.Params`).
    reentrant: bool = False
    #: On Semaphores of this many permits (None: on locks).
    limit: int | None = None
    #: Long victim bodies are cooperative in one trial out of this many.
    cooperative_every: int = 3
    #: ``finish`` leaves TLC's verdict on the traced trial for later (:attr:`deferred`)
    #: instead of waiting for it.
    defer_trace: bool = False
    params: Params = field(init=False)
    recorder: Recorder = field(init=False)
    baseline: Baseline = field(init=False)
    trace: TrialTrace = field(init=False)
    clients: Clients = field(init=False)
    sections: Sections = field(init=False)
    trials: Trials = field(init=False)
    faults: Faults = field(init=False)
    #: With ``defer_trace``, once ``finish`` ran: TLC's verdict, still to be asked for.
    deferred: DeferredTrace | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.params = Params(
            self.name,
            self.ttl_ms,
            self.settings,
            reentrant=self.reentrant,
            limit=self.limit,
            cooperative_every=self.cooperative_every,
        )
        self.recorder = Recorder(self.name)
        self.admin.ping()
        self.baseline = Baseline.take()
        self.trace = TrialTrace(self.params)
        self.clients = Clients(self.params, self.target, self.proxy, self.recorder, self.trace)
        self.sections = Sections(self.params, self.recorder)
        self.trials = Trials(self.params, self.recorder, self.trace, self.clients, self.sections)
        self.faults = Faults(self.params, self.recorder, self.clients, self.sections)

    def own_redis(self) -> LocalTarget:
        """The redis-server this tool started, for a fault that pauses or kills it; a Redis
        the tool did not start is never touched that way (:class:`ScenarioNotRun`)."""
        if not isinstance(self.target, LocalTarget):
            raise ScenarioNotRun(NEEDS_OWN_REDIS)
        return self.target

    def finish(
        self,
        *,
        expect: str,
        min_overlaps: int = 0,
        check_server_connections: bool = True,
    ) -> Verdict:
        """Close everything, check leaks and invariants, add the report row, assert.

        ``expect``: ``"lapse"`` (every targeted victim must surface its loss, and the
        scenario as a whole must surface at least one per trial), ``"none"`` (no loss may
        be reported at all: the fault stayed within what the lock must ride out), or
        ``"any"``.
        """
        self.clients.close_sync()
        self.trace.stop()
        trace_problems = [] if self.defer_trace else self.trace.verdict()
        # A check left for later is still running: the only thread meant to outlive this.
        checking = self.trace.checking if self.defer_trace else None
        admin = self.admin if check_server_connections else None
        leaks = check_no_leaks(
            self.baseline,
            admin=admin,
            name_prefix=self.params.tag,
            ignore_threads=() if checking is None else (checking,),
        )
        verdict = check(
            self.recorder,
            slack_ms=self.params.slack_ms,
            wait_allowance_ms=WAIT_ALLOWANCE_MS,
            limit=self.params.capacity,
        )
        row = judging.row(self.params, self.recorder, verdict, self.trace)
        self.report.add(row)
        if self.defer_trace:
            self.deferred = DeferredTrace(self.name, self.params, self.recorder, self.trace, row)
        problems = list(verdict.violations) + leaks + trace_problems
        problems += judging.problems(
            self.params,
            self.recorder,
            verdict,
            self.faults.targets,
            expect=expect,
            min_overlaps=min_overlaps,
        )
        if problems:
            raise ScenarioFailed(failure(self.name, problems, self.recorder))
        return verdict


def failure(name: str, problems: list[str], recorder: Recorder) -> str:
    """A failed scenario's message: what failed it, then its timeline."""
    return f"{name}:\n  " + "\n  ".join(problems) + "\n--- timeline ---\n" + timeline(recorder)


@dataclass
class DeferredTrace:
    """TLC's verdict on a scenario's traced trial, left for after the scenario's end
    (``Scenario(defer_trace=True)``): the check runs on while later scenarios do, and
    :meth:`problems` waits for it.  The trace and the check are the same as ``finish``
    waits for otherwise; only when the answer is read changes."""

    name: str
    params: Params
    recorder: Recorder
    trace: TrialTrace
    #: The scenario's report row: its trace columns are filled in once TLC is done.
    row: Row

    def problems(self) -> str | None:
        """Wait for TLC; the failure, as ``finish`` would have raised it (None: the trace
        passed, or was not checked, as the row says)."""
        found = self.trace.verdict()
        judging.trace_columns(self.row, self.params, self.trace)
        return failure(self.name, found, self.recorder) if found else None
