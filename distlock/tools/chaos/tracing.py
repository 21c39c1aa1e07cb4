"""The traced trial's lock events, and their check against the spec with TLC.

Every Lock of the traced trial (:data:`~distlock.tools.chaos.params.TRACED_TRIAL`)
records its events into one trace (:attr:`TrialTrace.sink`, which
:class:`~distlock.tools.chaos.clients.Clients` hands to each Lock it makes); the events
of other processes of that trial are merged in (:meth:`TrialTrace.part`,
:meth:`TrialTrace.add_part`).  Once the trial is over, TLC checks the trace in a thread
of its own while the next trials run; :meth:`TrialTrace.verdict` waits for it.
"""

from __future__ import annotations

import heapq
import io
import json
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from distlock.tools import tracecheck
from distlock.tools.chaos.params import SOCKET_TIMEOUT, TRACED_TRIAL, Params
from distlock.tools.chaos.recorder import now
from distlock.trace import NdjsonRecorder, iter_events, read_events, write_events

#: The report's note where TLC is not installed and traces go unchecked.
NO_TLC = "not checked: no TLC"
#: Upper bound, in CPU seconds, for TLC on one key of a traced trial: past it, the trace is
#: reported unchecked (a search too big for the suite's budget is no verdict on the run).
#: CPU, not wall time: TLC runs at the lowest priority, and a loaded machine must not turn
#: a small search into "unchecked".
TRACE_CPU_S = 90.0
#: The wall-clock bound behind it, for a TLC that gets no CPU at all.
TRACE_WALL_S = 900.0
#: Failed round trips beyond which TLC is not run on a semaphore's or a reentrant lock's
#: traced trial: each is a fault the model must place (and a failed acquire may have taken
#: the key; one sent and failed while no Redis ran, which the restart scenarios declare,
#: is none, and is not counted), and a storm of them (a proxy refusing every connection)
#: makes a search far beyond the suite's budget, each failed attempt being a section and
#: a model client more.
#: A plain lock's trial has no such bound: its sections run as rounds of as few model
#: clients as run at once (see tracecheck.lock_rounds), and a Redis down for a while (a
#: failed attempt and its failed cleanup release every few ms, 15-25 failures in the part
#: checked) costs TLC 10-25 s of CPU; ``TRACE_CPU_S`` still bounds it.  A reentrant
#: lock's sections take the spec's three holders in turn (an attempt refused on its
#: connection leaves its holder), but its model of a Redis restarted empty is costlier:
#: each refused attempt may have run at Redis and moved the fence counter, which the
#: declared data loss lets a key loss reset (before the declared stretch without Redis),
#: so such a trial (11 failures left of 28 in one) is far past ``TRACE_CPU_S`` and is still
#: skipped.
TRACE_MAX_FAILURES = 10
#: The same bound for a semaphore's traced trial, whose two permits make each failed round
#: trip that may have run costlier still: with 3 such failures a restart trial was accepted
#: in 36 s, with 7 and 8 TLC ran past ``TRACE_CPU_S``; past this bound the trial is skipped
#: at once rather than spending the suite's time on a search that will not end.
SEMAPHORE_TRACE_MAX_FAILURES = 4
#: How much of the traced trial TLC checks, in TTLs from its first event: the fault
#: lands on the first body and plays out (lapse, takeover, the first victim's verdict)
#: within it.  Runs of refused attempts are condensed (see tracecheck.condense).  Both keep the
#: check of a genuine run sound and TLC's search to seconds.
TRACE_TTLS = 4
#: The same for a semaphore's trial, whose sections are more (two permits: more grants per
#: TTL) and longer (TTL 500 ms): its first two TTLs hold the fault, the lapse and the
#: takeover (not yet the lapsed victim's refused release), and cost TLC 15-40 s where
#: four cost 45-95 s.
SEMAPHORE_TRACE_TTLS = 2
#: Model ticks per TTL for the chaos traces: coarser than the trace tests' model (whose
#: corruptions need the finer one), and four times fewer states.
TRACE_TICKS = 4
#: TLC runs on traced trials under way at once in this process; a check waits for a slot
#: before its TLC starts (the bounds above count from there).  A scenario whose verdict is
#: asked for after later scenarios ran (the test suite's ``Runner(defer_traces=...)``)
#: leaves its check running beside their trials, so several may be pending: two at a time,
#: for the two cores CI has (a trial mostly sleeps, and TLC, one worker at the lowest
#: priority, takes only the CPU the trials leave), and no more JVM heaps than that at once.
TLC_SLOTS = 2
_slots = threading.BoundedSemaphore(TLC_SLOTS)

def rejection_command(within_ms: float) -> str:
    """The command that checks a traced trial's events as the chaos suite does."""
    return (
        "python -m distlock validate-trace TRACE.ndjson --condense "
        f"--within-ms {within_ms:g} --ticks {TRACE_TICKS} "
        f"--hang-after-ms {SOCKET_TIMEOUT * 1000.0:g}"
    )


def rejection_report(checked: list[dict[str, Any]], within_ms: float) -> str:
    """The events TLC checked, as NDJSON, and the command that checks them again."""
    out = io.StringIO()
    for event in checked:
        out.write(json.dumps(event, sort_keys=True) + "\n")
    return (
        f"the events TLC checked, to check again: save the lines below as TRACE.ndjson "
        f"and run {rejection_command(within_ms)}\n{out.getvalue()}"
    )


class TrialTrace:
    """The trace of one scenario's traced trial, and what TLC made of it."""

    def __init__(self, params: Params) -> None:
        self.params = params
        #: Where the Locks of the traced trial record their events (None: not recording).
        self.sink: NdjsonRecorder | None = None
        #: Why this scenario's trace is not checked against the spec (None: it is).
        self.excluded: str | None = None
        self.validated = 0
        self.seconds = 0.0
        #: Why the traced trial was not checked after all (too many failures, TLC timeout).
        self.note: str | None = None
        self._stream: io.StringIO | None = None
        self._events: list[dict[str, Any]] = []
        self._check: threading.Thread | None = None
        #: Set once the check has its slot (:data:`TLC_SLOTS`) and is running.
        self._running = threading.Event()
        #: Traces of other processes of the traced trial still to be merged.
        self._parts = 0
        self._problems: list[str] = []

    def exclude(self, reason: str) -> None:
        """Record no trace: the spec cannot explain this scenario's runs, for ``reason``
        (a second reason is added to the first)."""
        if self.excluded is None:
            self.excluded = reason
        elif reason not in self.excluded:
            self.excluded = f"{self.excluded}; and {reason}"

    def traced(self, trial: int) -> bool:
        """Whether ``trial``'s events are recorded for TLC."""
        return trial == TRACED_TRIAL and self.excluded is None

    def start(self, trial: int) -> None:
        """Record the lock events of ``trial``, if it is the traced one, in every Lock made
        from now on; :meth:`stop` ends it."""
        if self.traced(trial) and self.sink is None:
            self._stream = io.StringIO()
            self.sink = NdjsonRecorder(self._stream)

    def stop(self) -> None:
        """Keep the events of the traced trial, once every Lock of it is closed, and check
        them."""
        if self.sink is None or self._stream is None:
            return
        self.sink.close()
        self._events = list(iter_events(self._stream.getvalue().splitlines()))
        self.sink, self._stream = None, None
        self._start_validation()

    def part(self, trial: int) -> str | None:
        """Where a process of ``trial`` other than this one writes its lock events, to be
        merged into the trial's trace with :meth:`add_part` (None: not traced)."""
        if not self.traced(trial):
            return None
        self._parts += 1
        fd, path = tempfile.mkstemp(prefix="chaos-trace-", suffix=".ndjson")
        os.close(fd)
        return path

    def add_part(self, path: str, name: str) -> None:
        """Merge another process's events (one monotonic clock for every process)."""
        try:
            part = [{**e, "client": f"{name}:{e['client']}"} for e in read_events(path)]
        finally:
            Path(path).unlink(missing_ok=True)
        self._events = list(heapq.merge(self._events, part, key=lambda e: e["t"]))
        self._parts -= 1
        self._start_validation()

    def declare_data_loss(self) -> None:
        """Redis is about to lose its data: fences start over (see distlock.trace)."""
        if self.sink is not None:
            self.sink.declare_data_loss(now() * 1000.0)

    def declare_redis_down(self, since: float, until: float) -> None:
        """No Redis process ran from ``since`` to ``until`` (monotonic seconds): a round
        trip sent and failed in between never ran (see distlock.trace)."""
        if self.sink is not None:
            self.sink.declare_redis_down(since * 1000.0, until * 1000.0)

    def verdict(self) -> list[str]:
        """What TLC found wrong with the trace, once it is done (after the checks ahead
        of it for a slot, each bounded as this one is)."""
        check = self._check
        if check is not None:
            while not self._running.wait(1.0) and check.is_alive():
                pass
            check.join(TRACE_WALL_S + 30)
            if check.is_alive():
                return [f"TLC still running on the recorded trace after {TRACE_WALL_S:.0f} s"]
        return list(self._problems)

    @property
    def checking(self) -> threading.Thread | None:
        """The thread checking the trace, while it runs or waits for its slot."""
        check = self._check
        return check if check is not None and check.is_alive() else None

    def _start_validation(self) -> None:
        if self._parts or not self._events or self._check is not None:
            return
        settings = self.params.settings
        keep = settings.trace_dir
        if keep is not None:
            name = re.sub(r"[^A-Za-z0-9]+", "-", self.params.name).strip("-")
            Path(keep).mkdir(parents=True, exist_ok=True)
            write_events(Path(keep) / f"{name}.ndjson", self._events)
        if not settings.validate_traces:
            self.note = NO_TLC
            return
        # TLC (one core) runs while the next trials do.
        self._check = threading.Thread(target=self._in_slot, name="chaos-tlc", daemon=True)
        self._check.start()

    def _in_slot(self) -> None:
        with _slots:
            self._running.set()
            self._validate()

    def _validate(self) -> None:
        """TLC on the traced trial's events, one key at a time; notes the problems found."""
        if self.excluded is not None or not self._events:
            return
        params = self.params
        within = (TRACE_TTLS if params.limit is None else SEMAPHORE_TRACE_TTLS) * params.ttl_ms
        checked = tracecheck.first_ms(tracecheck.condense(self._events), within)
        # A round trip that failed while no Redis ran never ran: no fault to place.
        failures = sum(
            1 for e in checked if str(e["action"]).endswith("Fail")
        ) - tracecheck.never_ran_failures(
            checked, reentrant=params.reentrant, hang_after_ms=SOCKET_TIMEOUT * 1000.0
        )
        plain = params.limit is None and not params.reentrant
        bound = TRACE_MAX_FAILURES if params.limit is None else SEMAPHORE_TRACE_MAX_FAILURES
        if failures > bound and not plain:
            self.note = f"skipped: {failures} failed round trips"
            return
        unchecked = self._reentrant_unchecked(within)
        if unchecked is not None:
            self.note = f"skipped: {unchecked}"
            return
        try:
            verdicts = tracecheck.check(
                self._events,
                timeout_s=TRACE_WALL_S,
                cpu_s=TRACE_CPU_S,
                condensed=True,
                within_ms=within,
                ticks=TRACE_TICKS,
                # A round trip that failed sooner than the socket timeout failed on its
                # connection: that request cannot run in Redis later.
                hang_after_ms=SOCKET_TIMEOUT * 1000.0,
                # TLC runs beside the next trials: their timing comes first.
                niceness=19,
            )
        except subprocess.TimeoutExpired:
            self.note = f"TLC timeout ({TRACE_CPU_S:.0f} s of CPU)"
            return
        except tracecheck.TraceError as exc:
            self._problems.append(f"the recorded trace could not be checked: {exc}")
            return
        self.validated = sum(v.accepted for v in verdicts)
        self.seconds = sum(v.seconds for v in verdicts)
        rejected = [v for v in verdicts if not v.accepted]
        self._problems += [
            f"the recorded trace is no behaviour of the spec: {v.describe()}" for v in rejected
        ]
        if rejected and params.settings.trace_dir is None:
            # Nothing else keeps the trace: a rejection seen once, on a machine gone since
            # (a CI run), can be checked again only from the report.
            self._problems.append(rejection_report(checked, within))

    def _reentrant_unchecked(self, within_ms: float) -> str | None:
        """Why the part of a reentrant key's trace that TLC would check is outside what
        ``spec/Reentrant.tla``'s trace check takes (see tracecheck.reentrant_unchecked),
        or None.  Such a trial is skipped, not failed: its shape says nothing about the
        lock."""
        by_key = tracecheck.split_by_key(tracecheck.condense(self._events))
        for events in by_key.values():
            if tracecheck.is_reentrant(events):
                why = tracecheck.reentrant_unchecked(
                    tracecheck.first_ms(events, within_ms),
                    hang_after_ms=SOCKET_TIMEOUT * 1000.0,
                )
                if why is not None:
                    return why
        return None
