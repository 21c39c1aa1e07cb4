"""Leader election under faults: the leader's process killed, and Redis paused past the
TTL under a leader with campaigners waiting.

``election-leader-killed``: a candidate in a child process campaigns and leads (renewed);
a candidate of this process campaigns and blocks in the election's queue; the child is
SIGKILLed at a random point of its heartbeat.  The waiting campaigner must become leader
no sooner than the dead leader's key expires (its PTTL, read right after the kill), and
promptly after: within the key's expiry (or the kill plus a TTL) plus the scheduling
slack, the bound the lock's killed-holder scenario holds a waiter to.  ``spec/Election.tla``
bounds the same wait in ticks (``DeathBound``: the dead leader's TTL, then the
campaigner's next attempt, sent within a block and a round trip of its last, and its
reply); the scenario's report line gives the measured takeover times beside it.  Its
fence is larger than the dead leader's, and ``leader()`` names the dead leader while its
lease runs, the new one after, and nobody once it resigned.

``election-redis-paused-past-the-ttl``: a leader and campaigners waiting (two, one in
the traced trial), each on a connection of its own; redis-server is paused (SIGSTOP) for
2.5 TTLs.  The leader's signal must fire by its lease's deadline (the last renewal Redis
could answer was sent before the pause: the deadline is at most a TTL after it), give or
take the slack the other scenarios allow for a timer, and ``is_leader``, a read of the
clock, must be False past that deadline exactly: every read of it that returned True
began before the pause's start plus a TTL.  After the pause a campaigner leads, then
resigns, handing the lease on (a campaigner whose attempt was sent during the pause and
granted after it counts its lease from that send, as the spec does, so little of it may
be left, and it may lapse before a renewal is answered: its signal must say so).  Each
candidate reads ``is_leader`` every few ms while it leads, on the one monotonic clock of
this process: from the end of its first True read to the start of its last it was leader
throughout (once False, a leadership's ``is_leader`` stays False), and no two
candidates' such spans may overlap; fences increase from one leader to the next.

The first trial of each is traced (the candidates' events, the dead leader's process's
up to the kill, and the observer's ``leader()`` reads recorded with
:func:`distlock.trace.traced_leader`) and checked by TLC against ``spec/Election.tla``
(``spec/ElectionTrace.tla``), as the other scenarios' first trials are: its first four
TTLs, condensed, at four ticks per TTL.  To the trace check the dead leader is a section
that stops, its key lapsing at its TTL.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from distlock import Election, Leader, Leadership
from distlock._core.waiting import LONGEST_BLOCK_MS
from distlock.asyncio import Election as AsyncElection
from distlock.asyncio import Leadership as AsyncLeadership
from distlock.tools.chaos.failures import ScenarioFailed, require
from distlock.tools.chaos.harness import DeferredTrace, Scenario
from distlock.tools.chaos.holder import DOOMED
from distlock.tools.chaos.leaks import check_no_leaks
from distlock.tools.chaos.processes import Child
from distlock.tools.chaos.recorder import now
from distlock.tools.chaos.registration import MODES, Context, scenario
from distlock.tools.chaos.report import Row
from distlock.trace import NdjsonRecorder, atraced_leader, traced_leader

#: The killed leader's TTL (its heartbeat a quarter of it).
KILL_TTL_MS = 300
#: The paused scenario's TTL, as the lock's paused scenarios have it.
PAUSE_TTL_MS = 200
TRIALS = 3
#: Campaigners waiting beside the paused leader (the traced trial has one: each section
#: at once is a model client more for TLC).
CAMPAIGNERS = 2
#: A campaign's wait: far longer than any trial.
WAIT_MS = 20_000
#: How long a campaigner leads after the pause before it resigns, in TTLs (a term of a
#: few renewals; the length of a leader's work, not a wait for something).
TERM_TTLS = 1.5
#: How often a leader reads ``is_leader``, s.
READ_EVERY_S = 0.002
#: Redis reports PTTL in whole milliseconds; the replies are timed on our side.
TOLERANCE = 0.002


class _Events:
    """A trace callable for the candidates: the traced trial's events go to its sink (if
    any), and it tells whoever waits how many campaigns have blocked in the queue."""

    def __init__(self, sink: NdjsonRecorder | None) -> None:
        self.sink = sink
        self._cond = threading.Condition()
        self._blocked: set[str] = set()

    def __call__(self, event: dict[str, Any]) -> None:
        if self.sink is not None:
            self.sink(event)
        if event.get("action") == "Block":
            with self._cond:
                self._blocked.add(str(event["client"]))
                self._cond.notify_all()

    def wait_blocked(self, campaigns: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self._blocked) >= campaigns, timeout)


@dataclass
class _Term:
    """One candidate's leadership: when it was granted, with what fence, its True reads
    of ``is_leader`` (start and end of each), when its signal fired, what resign said."""

    name: str
    granted_at: float | None = None
    fence: int | None = None
    reads: list[tuple[float, float]] = field(default_factory=list)
    signal_at: float | None = None
    resigned: bool | None = None

    def span(self) -> tuple[float, float] | None:
        """From the end of the first True read to the start of the last: leader
        throughout (None: fewer than two reads)."""
        if len(self.reads) < 2:
            return None
        return self.reads[0][1], self.reads[-1][0]


def _who(leader: Leader | None) -> tuple[str, int] | None:
    return None if leader is None else (leader.identity, leader.fence)


def _read(election: Election, sink: NdjsonRecorder | None) -> tuple[str, int] | None:
    """Who leads, as the observer reads it (recorded into the traced trial's trace)."""
    return _who(election.leader() if sink is None else traced_leader(election, sink))


def _row(sc: Scenario, *, ok: int, lost: int, overlaps: int, detection: float | None,
         note: str) -> Row:
    trace = sc.trace
    return Row(
        scenario=sc.params.name,
        trials=sc.recorder.trials,
        faults=sc.recorder.faults,
        ok=ok,
        lost=lost,
        overlaps=overlaps,
        worst_detection_ms=None if detection is None else round(detection, 1),
        traces_validated=(
            None if trace.excluded or not sc.params.settings.validate_traces else trace.validated
        ),
        trace_seconds=round(trace.seconds, 1),
        trace_excluded=trace.excluded,
        trace_note=trace.note,
        note=note,
    )


def _finish(sc: Scenario, problems: list[str], row: Callable[[], Row]) -> None:
    """The trace's verdict (or, with ``defer_trace``, the check left running for later,
    as :meth:`Scenario.finish` leaves it), the leak checks, the report row; fail on any
    problem."""
    sc.clients.close_sync()
    sc.trace.stop()
    if not sc.defer_trace:
        problems = problems + sc.trace.verdict()
    # A check left for later is still running: the only thread meant to outlive this.
    checking = sc.trace.checking if sc.defer_trace else None
    problems += check_no_leaks(
        sc.baseline,
        admin=sc.admin,
        name_prefix=sc.params.tag,
        ignore_threads=() if checking is None else (checking,),
    )
    made = row()
    sc.report.add(made)
    if sc.defer_trace:
        sc.deferred = DeferredTrace(sc.params.name, sc.params, sc.recorder, sc.trace, made)
    if problems:
        raise ScenarioFailed(f"{sc.params.name}:\n  " + "\n  ".join(problems))


# -- the leader's process killed ------------------------------------------------------------


@scenario(
    "election-leader-killed",
    "election: the leader's process killed (SIGKILL) [sync]",
    "the leader's process SIGKILLed after a renewal, a campaigner waiting: it leads no "
    "sooner than the dead leader's key expires, and promptly after, with a larger fence",
)
def election_leader_killed(ctx: Context) -> None:
    sc = ctx.scenario(ttl_ms=KILL_TTL_MS)
    params = sc.params
    rng = random.Random(20_261_206)
    takeovers: list[float] = []
    problems: list[str] = []
    for trial in range(TRIALS):
        sc.recorder.trials += 1
        # The first trial's trace has the dead leader's events too, up to the kill.
        part = sc.trace.part(trial)
        extra = () if part is None else (part,)
        sc.trace.start(trial)
        sink = sc.trace.sink
        events = _Events(sink)
        heir = Election(
            sc.clients.sync_client(f"heir-t{trial}", via_proxy=False),
            params.key_id,
            identity=f"heir-{trial}",
            prefix=params.prefix,
            ttl_ms=params.ttl_ms,
            trace=events,
        )
        child = Child(
            "campaign", sc.target.url, params.prefix, params.key_id, params.ttl_ms, *extra
        )
        won: list[tuple[Leadership | None, float]] = []
        try:
            acquired = child.expect("ACQUIRED", 20)
            child.expect("RENEWED", 20)
            waiting = threading.Thread(
                target=_campaign,
                args=(heir, won),
                name="chaos-heir",
                daemon=True,
            )
            waiting.start()
            require(events.wait_blocked(1, 20), "the campaigner never blocked in the queue")
            seen = _read(heir, sink)
            require(
                seen == (DOOMED, acquired["fence"]),
                f"leader() before the kill: {seen}, want {(DOOMED, acquired['fence'])}",
            )
            # Kill at a random point of the heartbeat cycle (a fault's timing, not a wait).
            time.sleep(rng.uniform(0, params.ttl / 4))
            killed_at = child.kill()
            sc.recorder.fault("the leader's process SIGKILLed")
            asked = now()
            pttl = sc.admin.pttl(params.key)
            answered = now()
            waiting.join(timeout=params.ttl + 10)
            require(not waiting.is_alive(), "the campaigner never returned")
            ((leadership, granted_at),) = won
            require(leadership is not None, "the campaigner never led after the leader died")
            assert leadership is not None
            seen = _read(heir, sink)
            mine = (f"heir-{trial}", leadership.fence)
            require(seen == mine, f"leader() after the takeover: {seen}, want {mine}")
            require(leadership.resign(), "the new leader lost its lease before resigning")
            seen = _read(heir, sink)
            require(seen is None, f"leader() after the resignation: {seen}, want nobody")
        finally:
            child.close()
            heir.close()
        sc.clients.close_sync()
        sc.trace.stop()
        if part is not None:
            sc.trace.add_part(part, "leader-process")

        require(0 < pttl <= params.ttl_ms, f"PTTL right after the kill: {pttl} ms")
        expires_lo = asked + pttl / 1000 - TOLERANCE
        expires_hi = answered + pttl / 1000 + TOLERANCE
        takeover = 1000 * (granted_at - killed_at)
        takeovers.append(takeover)
        if granted_at < expires_lo:
            problems.append(
                f"trial {trial}: led {1000 * (expires_lo - granted_at):.0f} ms before the dead "
                f"leader's key expired (PTTL {pttl} ms at the kill)"
            )
        if granted_at > max(expires_hi, killed_at + params.ttl) + params.slack:
            problems.append(
                f"trial {trial}: led {takeover:.0f} ms after the kill (TTL {params.ttl_ms} "
                f"ms, PTTL {pttl} ms at the kill, slack {params.slack_ms:.0f} ms)"
            )
        if leadership.fence <= acquired["fence"]:
            problems.append(
                f"trial {trial}: the new leader's fence {leadership.fence} is not above the "
                f"dead leader's {acquired['fence']}"
            )

    def row() -> Row:
        measured = ", ".join(f"{t:.0f}" for t in takeovers)
        return _row(
            sc,
            ok=len(takeovers),
            lost=0,
            overlaps=0,
            detection=None,
            note=(
                f"takeover after the kill {measured} ms (worst {max(takeovers):.0f}); "
                f"checked: after the dead leader's key expired, within its expiry + "
                f"{params.slack_ms:.0f} ms slack; spec's DeathBound: TTL ({params.ttl_ms} "
                f"ms) + the next attempt (a block of at most {LONGEST_BLOCK_MS} ms, ended at "
                "the key's PTTL, and a round trip) + its reply"
            ),
        )

    _finish(sc, problems, row)


def _campaign(election: Election, won: list[tuple[Leadership | None, float]]) -> None:
    won.append((election.campaign(wait_ms=WAIT_MS), now()))


# -- Redis paused past the TTL ------------------------------------------------------------


@dataclass
class _Trial:
    """What one paused trial saw."""

    terms: list[_Term]
    #: When the pause began (right after SIGSTOP was sent) and ended.
    stopped: float = 0.0
    resumed: float = 0.0
    #: leader() before the pause, and once every candidate resigned.
    before: tuple[str, int] | None = None
    after: tuple[str, int] | None = None


def _sync_paused_trial(sc: Scenario, trial: int, campaigners: int) -> _Trial:
    params = sc.params
    server = sc.own_redis().server
    sink = sc.trace.sink
    events = _Events(sink)

    def election(name: str) -> Election:
        client = sc.clients.sync_client(f"{name}-t{trial}", via_proxy=False)
        return Election(
            client, params.key_id, identity=name, prefix=params.prefix,
            ttl_ms=params.ttl_ms, trace=events,
        )

    first = election("leader")
    others = [election(f"campaigner{i}") for i in range(campaigners)]
    terms = [_Term("leader"), *(_Term(f"campaigner{i}") for i in range(campaigners))]
    out = _Trial(terms)
    stop = threading.Event()
    led = threading.Event()

    def lead(election: Election, term: _Term, *, until_lost: bool) -> None:
        leadership = election.campaign(wait_ms=WAIT_MS)
        if leadership is None:
            return
        term.granted_at, term.fence = now(), leadership.fence
        resigned = threading.Event()
        watcher = threading.Thread(
            target=_watch_signal,
            args=(leadership, term, resigned),
            name="chaos-signal",
            daemon=True,
        )
        watcher.start()
        ends = term.granted_at + TERM_TTLS * params.ttl
        while until_lost or now() < ends:
            t0 = now()
            leading = leadership.is_leader
            t1 = now()
            if not leading:
                break
            term.reads.append((t0, t1))
            led.set()
            if stop.wait(READ_EVERY_S):
                break
        term.resigned = leadership.resign()
        resigned.set()
        watcher.join(timeout=params.ttl + 10)

    try:
        threads = [
            threading.Thread(
                target=lead, args=(first, terms[0]), kwargs={"until_lost": True},
                name="chaos-leader", daemon=True,
            )
        ]
        threads[0].start()
        require(led.wait(20), "the leader never led")
        for election_, term in zip(others, terms[1:], strict=True):
            threads.append(
                threading.Thread(
                    target=lead, args=(election_, term), kwargs={"until_lost": False},
                    name="chaos-campaigner", daemon=True,
                )
            )
            threads[-1].start()
        require(events.wait_blocked(campaigners, 20), "the campaigners never blocked")
        out.before = _read(first, sink)
        server.pause()
        out.stopped = now()
        sc.recorder.fault("redis-server paused")
        try:
            # The pause's length is the fault being injected, not a wait for something.
            time.sleep(2.5 * params.ttl)
        finally:
            server.resume()
            out.resumed = now()
        for thread in threads:
            thread.join(timeout=30)
        require(not any(t.is_alive() for t in threads), "a candidate never finished")
        out.after = _read(first, sink)
    finally:
        stop.set()
        for election_ in (first, *others):
            election_.close()
    return out


def _watch_signal(leadership: Leadership, term: _Term, resigned: threading.Event) -> None:
    """Note when the leadership's signal fires, until its candidate has resigned (a
    resignation fires no signal: the wait's time-out is only the check for that)."""
    while not resigned.is_set():
        if leadership.signal.wait(0.01):
            term.signal_at = now()
            return


async def _async_paused_trial(sc: Scenario, trial: int, campaigners: int) -> _Trial:
    params = sc.params
    server = sc.own_redis().server
    sink = sc.trace.sink
    events = _Events(sink)
    clients = []

    def election(name: str) -> AsyncElection:
        client = sc.clients.async_client(f"{name}-t{trial}", via_proxy=False)
        clients.append(client)
        return AsyncElection(
            client, params.key_id, identity=name, prefix=params.prefix,
            ttl_ms=params.ttl_ms, trace=events,
        )

    first = election("leader")
    others = [election(f"campaigner{i}") for i in range(campaigners)]
    terms = [_Term("leader"), *(_Term(f"campaigner{i}") for i in range(campaigners))]
    out = _Trial(terms)
    led = asyncio.Event()

    async def read() -> tuple[str, int] | None:
        return _who(await (first.leader() if sink is None else atraced_leader(first, sink)))

    async def watch_signal(leadership: AsyncLeadership, term: _Term) -> None:
        await leadership.signal.wait()
        term.signal_at = now()

    async def lead(election: AsyncElection, term: _Term, *, until_lost: bool) -> None:
        leadership = await election.campaign(wait_ms=WAIT_MS)
        if leadership is None:
            return
        term.granted_at, term.fence = now(), leadership.fence
        watcher = asyncio.create_task(watch_signal(leadership, term))
        ends = term.granted_at + TERM_TTLS * params.ttl
        while until_lost or now() < ends:
            t0 = now()
            leading = leadership.is_leader
            t1 = now()
            if not leading:
                break
            term.reads.append((t0, t1))
            led.set()
            await asyncio.sleep(READ_EVERY_S)
        term.resigned = await leadership.resign()
        if term.signal_at is None:
            watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)

    tasks: list[asyncio.Task[None]] = []
    try:
        tasks.append(asyncio.create_task(lead(first, terms[0], until_lost=True)))
        await asyncio.wait_for(led.wait(), 20)
        tasks += [
            asyncio.create_task(lead(e, term, until_lost=False))
            for e, term in zip(others, terms[1:], strict=True)
        ]
        blocked = await asyncio.to_thread(events.wait_blocked, campaigners, 20)
        require(blocked, "the campaigners never blocked")
        out.before = await read()
        server.pause()
        out.stopped = now()
        sc.recorder.fault("redis-server paused")
        try:
            # The pause's length is the fault being injected, not a wait for something.
            await asyncio.sleep(2.5 * params.ttl)
        finally:
            server.resume()
            out.resumed = now()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        out.after = await read()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for election_ in (first, *others):
            await election_.aclose()
        for client in clients:
            await client.aclose()
    return out


def _judge(sc: Scenario, trial: int, seen: _Trial, problems: list[str]) -> float | None:
    """The paused trial's checks (see the module's docstring); returns how long after the
    latest possible deadline the leader's signal fired (ms), if it did."""
    params = sc.params
    leader, *campaigners = seen.terms
    deadline = seen.stopped + params.ttl  # the latest the leader's lease can end
    detection = None

    def fail(what: str) -> None:
        problems.append(f"trial {trial}: {what}")

    if seen.before != ("leader", leader.fence):
        fail(f"leader() before the pause: {seen.before}, want {('leader', leader.fence)}")
    late = [t0 for t0, _ in leader.reads if t0 >= deadline]
    if late:
        fail(
            f"is_leader True {1000 * (late[-1] - deadline):.1f} ms past the deadline (the "
            "pause's start plus a TTL)"
        )
    if leader.signal_at is None:
        fail("the leader's signal never fired")
    else:
        detection = 1000 * (leader.signal_at - deadline)
        if detection > params.slack_ms:
            fail(f"the leader's signal fired {detection:.0f} ms past its deadline")
    if leader.resigned is not False:
        fail(f"the deposed leader's resign() said {leader.resigned}, want False")
    led = [t for t in seen.terms if t.granted_at is not None]
    if len(led) != len(seen.terms):
        fail(f"only {[t.name for t in led]} led: every campaigner must lead in turn")
    # A campaigner may lose its lease too (an attempt sent during the pause, granted after
    # it: its lease counts from the send): its loss must be surfaced, as every lapsed
    # lease's is.
    silent = [t.name for t in campaigners if t.resigned is False and t.signal_at is None]
    if silent:
        fail(f"a campaigner's resign() said its lease was lost, its signal silent: {silent}")
    order = sorted(led, key=lambda t: t.granted_at or 0.0)
    fences = [(t.name, t.fence) for t in order]
    if any((a.fence or 0) >= (b.fence or 0) for a, b in itertools.pairwise(order)):
        fail(f"fences do not increase from one leader to the next: {fences}")
    spans = [(t.name, t.span()) for t in seen.terms]
    for i, (a, sa) in enumerate(spans):
        for b, sb in spans[i + 1 :]:
            if sa is not None and sb is not None and sa[0] < sb[1] and sb[0] < sa[1]:
                fail(
                    f"{a} and {b} both acted as leader from {1000 * max(sa[0], sb[0]):.1f} to "
                    f"{1000 * min(sa[1], sb[1]):.1f} ms (monotonic)"
                )
    if seen.after is not None:
        fail(f"leader() once every candidate resigned: {seen.after}, want nobody")
    return detection


@scenario(
    "election-redis-paused-past-the-ttl",
    "election: Redis paused (SIGSTOP) 2.5xTTL under a leader, campaigners waiting [{mode}]",
    "redis-server paused 2.5xTTL under a leader with campaigners waiting: its signal fires "
    "and is_leader turns False by its deadline, no two candidates act as leader at once, "
    "fences increase from leader to leader",
    modes=MODES,
    needs_own_redis=True,
)
def election_redis_paused_past_the_ttl(ctx: Context, mode: str) -> None:
    sc = ctx.scenario(ttl_ms=PAUSE_TTL_MS)
    sc.own_redis()
    problems: list[str] = []
    detections: list[float] = []
    terms = 0
    lapsed = 0
    for trial in range(TRIALS):
        sc.recorder.trials += 1
        sc.trace.start(trial)
        # The traced trial has one campaigner (each section at once is a model client
        # more for TLC).
        campaigners = 1 if sc.trace.traced(trial) else CAMPAIGNERS
        if mode == "sync":
            seen = _sync_paused_trial(sc, trial, campaigners)
        else:
            seen = asyncio.run(_async_paused_trial(sc, trial, campaigners))
        sc.clients.close_sync()
        sc.trace.stop()
        detection = _judge(sc, trial, seen, problems)
        if detection is not None:
            detections.append(detection)
        terms += len(seen.terms)
        lapsed += sum(1 for t in seen.terms[1:] if t.resigned is False)

    def row() -> Row:
        worst = max(detections) if detections else None
        return _row(
            sc,
            ok=terms - TRIALS - lapsed,
            lost=len(detections) + lapsed,
            overlaps=0,
            detection=None if worst is None else max(0.0, worst),
            note=(
                "the deposed leader's signal, ms after the latest deadline (pause + TTL): "
                + ", ".join(f"{d:.0f}" for d in detections)
                + f" (allowed: {sc.params.slack_ms:.0f}); is_leader False past it on every "
                "read; no two leaders' is_leader spans overlapped; fences increased; "
                f"campaigners' leases lapsed after the pause (surfaced): {lapsed}"
            ),
        )

    _finish(sc, problems, row)

