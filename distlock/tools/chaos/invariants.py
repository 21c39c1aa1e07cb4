"""The checks every chaos scenario ends with, as pure functions of what was recorded.

- NoOverlappingSuccess, for a key of ``limit`` permits (1 for a lock, a semaphore's
  limit for a semaphore): never more than ``limit`` sections on one key that ended
  successfully had their bodies running at the same time.
- Every loss surfaced: the key cannot have granted more than ``limit`` of the bodies that
  ran at one instant, so at every instant at most ``limit`` of them may have kept quiet;
  the others must have raised ``LockLeaseLostError`` or seen their signal fire (for a
  lock: any section that overlapped a successful one, and at least one of any overlapping
  pair).  And a body that outlived its lease (it ran past a full TTL after the send
  time of its last successful acquire or renewal) must end in ``LockLeaseLostError``.
- At most one renewal in flight per section (a reentrant lock's depth writes, sent by the
  holder on its own schedule, are not renewals).
- Every open level surfaced the loss: for a reentrant section, the inner level's ``with``
  raised ``LockLeaseLostError`` whenever the loss was known before it exited (the signal
  fired) or its lease ran out before it exited, the outermost level raised it whenever the
  inner one did, and the inner handle shared the outer's token and fence at depth 2.
- Detection: a body still running a full TTL after its last successful renewal was sent
  must have seen its signal fire by then, give or take a scheduling slack (or, when the
  grant itself arrived after that, by the start of the body, give or take the slack).  Starved
  sections (event loop or GIL held by the body: a victim's starves every victim's, one
  process and one loop) cannot fire timers; for them the signal must fire once the
  starvation ends.

- Waits end on time: a section that waited with ``wait_ms`` (a waiter) got the key, or
  ``run`` returned without it (timed out, or failed), within its ``wait_ms`` plus an
  allowance for a round trip hung at the deadline and a loaded machine.
- No waiter holds without the lock: its sections are checked like every other (a body
  that ran without the key overlaps a successful section, or its grant is not on the
  wire), and every waiting attempt Redis granted on the wire either started a body with
  its token or was given back by a release with that token (a grant nobody knows of
  would hold the key until its TTL).
- A read-write lock's key: the checks above, with two readers' bodies free to overlap (a
  writer's body beside any other body is an overlap, judged as a lock's pair is); and its
  fences follow the order of the scripts on the wire (:func:`check_fences`): a writer's
  is larger than every fence granted before it, a reader's at least the last writer's.

Times are ``time.monotonic()`` seconds; the lease arithmetic is in milliseconds.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from distlock.tools.chaos.recorder import Recorder, Section


@dataclass
class Verdict:
    sections: int = 0
    ok: int = 0
    surfaced: int = 0
    #: Violations of NoOverlappingSuccess (pairs of successes for a lock; instants with
    #: more than ``limit`` successes running for a semaphore).
    overlaps: int = 0
    overlapping_pairs: int = 0
    #: Times more than ``limit`` bodies on one key started running at once: a fault let
    #: another client in while a lapsed holder still ran (the checks above then mattered).
    crowded: int = 0
    detections_ms: list[float] = field(default_factory=list)
    starved_detections_ms: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    #: Waits (sections run with ``wait_ms``) by how they ended.
    waits: int = 0
    waits_granted: int = 0
    waits_timed_out: int = 0
    waits_failed: int = 0
    #: How long each wait took past its ``wait_ms`` (0 when it ended within it), ms.
    wait_overruns_ms: list[float] = field(default_factory=list)
    #: Pairs of a read-write lock's sections, one of them a writer, whose fences were
    #: compared (see :func:`check_fences`).
    fence_pairs: int = 0

    @property
    def worst_wait_overrun_ms(self) -> float | None:
        return max(self.wait_overruns_ms) if self.wait_overruns_ms else None

    @property
    def worst_detection_ms(self) -> float | None:
        every = self.detections_ms + self.starved_detections_ms
        return max(every) if every else None


def check(
    recorder: Recorder,
    *,
    slack_ms: float,
    wait_allowance_ms: float = math.inf,
    limit: int = 1,
) -> Verdict:
    """Every check above on what ``recorder`` holds; ``limit``: the permits of each key
    (1: a lock)."""
    verdict = Verdict()
    _check_waits(recorder, wait_allowance_ms, verdict)
    _check_waiting_grants(recorder, verdict)
    sections = recorder.entered()
    origin = recorder.origin
    verdict.sections = len(sections)
    verdict.ok = sum(1 for s in sections if s.outcome == "ok")
    # A grant that arrived after its own lease is a loss raised before any body started.
    verdict.surfaced = sum(1 for s in sections if s.surfaced) + sum(
        1 for s in recorder.sections if not s.entered and s.outcome == "lost"
    )

    for s in sections:
        if s.outcome == "pending":
            verdict.violations.append(f"run() never returned: {s.describe(origin)}")
        if s.end is None:
            verdict.violations.append(f"body never finished: {s.describe(origin)}")

    for i, a in enumerate(sections):
        for b in sections[i + 1 :]:
            if a.key != b.key or not a.overlaps(b) or _readers(a, b):
                continue
            verdict.overlapping_pairs += 1
            if limit > 1:
                continue  # a pair is within any limit above one: _check_crowds judges
            pair = f"{a.describe(origin)} | {b.describe(origin)}"
            if a.outcome == "ok" and b.outcome == "ok":
                verdict.overlaps += 1
                verdict.violations.append(f"NoOverlappingSuccess violated: {pair}")
            elif (a.outcome == "ok" and not b.surfaced) or (b.outcome == "ok" and not a.surfaced):
                verdict.violations.append(f"silent loss beside a success: {pair}")
            elif not a.surfaced and not b.surfaced:
                verdict.violations.append(f"overlap with no loss surfaced: {pair}")

    _check_crowds(sections, limit, verdict, origin)
    verdict.fence_pairs, wrong = check_fences(recorder)
    verdict.violations += wrong

    starvations = sorted(
        (s.starved_from, s.starved_until)
        for s in sections
        if s.starved_from is not None and s.starved_until is not None
    )
    for s in sections:
        _check_lease(recorder, s, slack_ms, verdict, starvations)
        _check_one_renewal_in_flight(recorder, s, verdict)
        _check_levels(recorder, s, verdict)
    return verdict


def _check_waits(recorder: Recorder, allowance_ms: float, verdict: Verdict) -> None:
    """Every wait ended within its ``wait_ms`` (plus the allowance): granted, or ``run``
    returned without the key."""
    origin = recorder.origin
    for s in recorder.sections:
        if s.wait_ms is None:
            continue
        verdict.waits += 1
        if s.entered:
            verdict.waits_granted += 1
        elif s.outcome == "not_acquired":
            verdict.waits_timed_out += 1
        elif s.outcome != "pending":
            verdict.waits_failed += 1
        waited = s.waited_s
        if waited is None:
            verdict.violations.append(
                f"a wait of {s.wait_ms} ms never ended: {s.describe(origin)}, asked at "
                f"{(s.attempt_started - origin) * 1000:.1f} ms"
            )
            continue
        over_ms = max(0.0, waited * 1000 - s.wait_ms)
        verdict.wait_overruns_ms.append(over_ms)
        if over_ms > allowance_ms:
            verdict.violations.append(
                f"a wait of {s.wait_ms} ms ended {waited * 1000:.0f} ms after it began "
                f"({s.outcome}; allowance {allowance_ms:.0f} ms): {s.describe(origin)}, "
                f"asked at {(s.attempt_started - origin) * 1000:.1f} ms"
            )


def _check_waiting_grants(recorder: Recorder, verdict: Verdict) -> None:
    """Every grant of a waiting attempt started a body, or a release gave it back."""
    used = {s.token for s in recorder.entered()}
    commands = list(recorder.commands)
    given_back = {c.token for c in commands if c.release}
    origin = recorder.origin
    for c in commands:
        if c.waiting_grant and c.token not in used and c.token not in given_back:
            verdict.violations.append(
                f"a waiting attempt was granted (sent {(c.sent - origin) * 1000:.1f} ms, token "
                f"{str(c.token)[:8]}) but no body ran on it and no release gave it back"
            )


def _check_crowds(sections: list[Section], limit: int, verdict: Verdict, origin: float) -> None:
    """At each body's start (the only instants a key's running set grows), at most
    ``limit`` running bodies may have succeeded, and at most ``limit`` may have kept quiet
    about a loss.  For a lock (``limit`` 1) the pairwise checks above say the same with
    the pair named; here only the crowds are counted."""
    by_key: dict[str, list[Section]] = {}
    for s in sections:
        if s.start is not None:
            by_key.setdefault(s.key, []).append(s)
    for group in by_key.values():
        group.sort(key=lambda s: s.start or 0.0)
        crowded = False
        for newest in group:
            start = newest.start
            assert start is not None
            running = [
                s
                for s in group
                if s.start is not None and s.start <= start and (s.end is None or s.end > start)
            ]
            if len(running) <= limit or _readers(*running):
                crowded = False
                continue
            if not crowded:
                verdict.crowded += 1
            crowded = True
            if limit == 1:
                continue
            ok = [s for s in running if s.outcome == "ok"]
            quiet = [s for s in running if not s.surfaced]
            named = " | ".join(s.describe(origin) for s in running)
            if len(ok) > limit:
                verdict.overlaps += 1
                verdict.violations.append(
                    f"NoOverlappingSuccess violated: {len(ok)} successful sections at once "
                    f"with limit {limit}: {named}"
                )
            elif len(quiet) > limit:
                verdict.violations.append(
                    f"silent loss: {len(running)} bodies at once with limit {limit}, only "
                    f"{len(running) - len(quiet)} surfaced a loss: {named}"
                )


def _readers(*sections: Section) -> bool:
    """Readers of a read-write lock only: their bodies share the key, and may overlap."""
    return all(s.rw == "read" for s in sections)


def check_fences(recorder: Recorder) -> tuple[int, list[str]]:
    """A read-write lock's fences, by the order of the scripts on the wire: a writer's
    fence is larger than every fence granted before its first attempt was sent, and a
    reader's is at least, a writer's more than, the fence of every writer whose grant
    was answered before it first sent anything.  "Before" is read from the wire alone (a
    reply received before a request was sent was made by a script that ran first), so a
    pair whose round trips overlap in time is not compared.  Returns how many pairs with
    a writer were compared, and the violations."""
    granted: list[tuple[Section, float, float]] = []  # (section, first send, grant reply)
    for s in recorder.entered():
        if s.rw is None or s.fence is None:
            continue
        commands = recorder.commands_of(s)
        grants = [c.replied for c in commands if c.ok]
        if not commands or not grants:
            continue
        granted.append((s, min(c.sent for c in commands), min(grants)))
    compared = 0
    problems: list[str] = []
    origin = recorder.origin
    for w, w_sent, w_granted in granted:
        if w.rw != "write":
            continue
        assert w.fence is not None
        for x, x_sent, x_granted in granted:
            if x is w:
                continue
            assert x.fence is not None
            if x_granted < w_sent:
                compared += 1
                if not x.fence < w.fence:
                    problems.append(
                        f"a writer's fence is not larger than one granted before it: "
                        f"{x.describe(origin)} then {w.describe(origin)}"
                    )
            elif x.rw == "read" and w_granted < x_sent:
                compared += 1
                if not x.fence >= w.fence:
                    problems.append(
                        f"a reader's fence is smaller than an earlier writer's: "
                        f"{w.describe(origin)} then {x.describe(origin)}"
                    )
    return compared, problems


def _check_levels(recorder: Recorder, s: Section, verdict: Verdict) -> None:
    """A reentrant section's inner level surfaced the loss as its outermost level did."""
    inner = s.inner
    if inner is None or s.start is None or s.end is None:
        return
    origin = recorder.origin
    verdict.violations += [f"{p}: {s.describe(origin)}" for p in inner.problems]
    if inner.outcome == "pending":
        verdict.violations.append(f"inner level never settled: {s.describe(origin)}")
        return
    if inner.outcome == "lost" and s.outcome != "lost":
        verdict.violations.append(
            f"the inner level raised LockLeaseLostError but the outermost did not: "
            f"{s.describe(origin)}"
        )
    if inner.start is None or inner.end is None:
        return
    if inner.outcome == "lost":
        return
    if s.signal_at is not None and s.signal_at <= inner.end:
        verdict.violations.append(
            f"the signal fired at depth {inner.depth} but its exit did not raise "
            f"LockLeaseLostError: {s.describe(origin)}"
        )
        return
    last = recorder.last_ok_send(s, before=inner.end)
    lease_end = recorder.lease_end(s, before=inner.end)
    if last is not None and lease_end is not None and inner.end > lease_end:
        verdict.violations.append(
            f"depth {inner.depth} outlived its lease ({(inner.end - last) * 1000:.0f} ms after "
            f"the last successful send, ttl {s.ttl_ms} ms) without LockLeaseLostError: "
            f"{s.describe(origin)}"
        )


def _check_one_renewal_in_flight(recorder: Recorder, s: Section, verdict: Verdict) -> None:
    """While the body runs, the only lock commands carrying its token are renewals; at most
    one of them may be on the wire at a time."""
    if s.start is None or s.end is None:
        return
    start, end = s.start, s.end
    renewals = sorted(
        (c for c in recorder.commands_of(s) if start <= c.sent < end and c.depth_write is None),
        key=lambda c: c.sent,
    )
    origin = recorder.origin
    for earlier, later in itertools.pairwise(renewals):
        if later.sent < earlier.replied:
            verdict.violations.append(
                f"two renewals in flight at once (sent {1000 * (earlier.sent - origin):.1f} "
                f"and {1000 * (later.sent - origin):.1f} ms): {s.describe(origin)}"
            )
            return


def _starvation_end(until: float, starvations: list[tuple[float, float]], slack: float) -> float:
    """When the process could next run timers after a starvation that ended at ``until``.

    Starved sections of one scenario share a process (and, for asyncio, an event loop): a
    second section that starves it before the first one's timers got their slack keeps the
    first one starved too, so the windows are merged.
    """
    for start, end in starvations:
        if start <= until + slack and end > until:
            until = end
    return until


#: The roles whose sections run in the victims' process (threads, or tasks of its loop).
STARVED_TOGETHER = ("victim", "waiter")


def _starved_until(s: Section, starvations: list[tuple[float, float]]) -> float | None:
    """When the starvation that held ``s``'s timers ended (None: none did).

    A body that starves the timers starves its own section, and every victim's and
    waiter's: they share one process (and, in asyncio, one event loop).  Under a lock no
    other section is inside its body then; under a semaphore of several permits one can be.
    """
    if s.starved_until is not None:
        return s.starved_until
    if not s.client.startswith(STARVED_TOGETHER) or s.start is None or s.end is None:
        return None
    start, end = s.start, s.end
    overlapping = [until for since, until in starvations if since < end and until > start]
    return max(overlapping) if overlapping else None


def _check_lease(
    recorder: Recorder,
    s: Section,
    slack_ms: float,
    verdict: Verdict,
    starvations: list[tuple[float, float]],
) -> None:
    if s.start is None or s.end is None:
        return
    origin = recorder.origin
    slack = slack_ms / 1000.0
    horizon = s.end if s.signal_at is None else min(s.signal_at, s.end)
    last = recorder.last_ok_send(s, before=horizon)
    if last is None:
        verdict.violations.append(f"no successful acquire on the wire for {s.describe(origin)}")
        return
    lease_end = recorder.lease_end(s, before=horizon)
    assert lease_end is not None  # a successful send sets a lease
    if s.end > lease_end and s.outcome != "lost":
        verdict.violations.append(
            f"body outlived its lease ({(s.end - last) * 1000:.0f} ms after the last successful "
            f"send, ttl {s.ttl_ms} ms) without LockLeaseLostError: {s.describe(origin)}"
        )
    fired_in_body = s.signal_at is not None and s.signal_at <= s.end
    starved_until = _starved_until(s, starvations)
    if starved_until is not None:
        lapsed = lease_end < starved_until
        resumed = _starvation_end(starved_until, starvations, slack)
        if (
            lapsed
            and s.end > resumed + slack
            and (s.signal_at is None or s.signal_at > resumed + slack)
        ):
            verdict.violations.append(
                f"signal not fired within {slack_ms:.0f} ms after the starvation ended: "
                f"{s.describe(origin)}"
            )
        if fired_in_body and s.signal_at is not None:
            verdict.starved_detections_ms.append((s.signal_at - last) * 1000)
        return
    # A grant whose reply arrives after its own lease ran out cannot be detected before
    # the body starts: then the bound is the body's start (plus the slack).
    bound = max(lease_end, s.start) + slack
    if s.end > bound and (s.signal_at is None or s.signal_at > bound):
        verdict.violations.append(
            f"loss not detected within ttl + {slack_ms:.0f} ms of the last successful send "
            f"(at {(last - origin) * 1000:.1f} ms): {s.describe(origin)}"
        )
    # A late grant (its lease over before the body started) is not a detection delay of
    # the renewal machinery; the network scenarios (scenarios/network.py) check those.
    if fired_in_body and s.signal_at is not None and s.start <= lease_end:
        verdict.detections_ms.append((s.signal_at - last) * 1000)
