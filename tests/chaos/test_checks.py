"""The suite's own instruments, shown to catch what they claim to catch.

The invariant checks on hand-made records with the violations they exist for, the leak
check on a Lock left open, and the Toxiproxy client on real toxics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distlock import Lock
from distlock._protocol import R_ENTER, R_LEAVE
from distlock.tools import tracecheck
from distlock.tools.chaos import judging
from distlock.tools.chaos.harness import DeferredTrace, Scenario
from distlock.tools.chaos.invariants import check
from distlock.tools.chaos.leaks import Baseline, check_no_leaks
from distlock.tools.chaos.params import TRACED_TRIAL
from distlock.tools.chaos.recorder import Command, Level, Recorder, Section
from distlock.tools.chaos.report import ChaosReport
from distlock.tools.chaos.targets import RedisTarget, Settings, is_own_key
from distlock.tools.chaos.tracing import NO_TLC, TrialTrace
from distlock.tools.servers.toxiproxy import Proxy
from distlock.trace import read_events

pytestmark = pytest.mark.chaos

TTL_MS = 200


def _section(
    rec: Recorder,
    client: str,
    start: float,
    end: float,
    outcome: str,
    *,
    signal: float | None = None,
    sends: tuple[float, ...] = (),
) -> Section:
    """A section with body [start, end] (seconds after the origin) and successful lock
    commands sent at ``sends`` (each answered 1 ms later)."""
    o = rec.origin
    s = rec.new_section(client, "k", TTL_MS)
    token = f"tok-{s.seq}"
    s.start, s.end, s.token, s.fence = o + start, o + end, token, s.seq
    s.signal_at = None if signal is None else o + signal
    s.outcome = outcome  # type: ignore[assignment]
    s.finished = o + end
    for t in sends or (start - 0.001,):
        rec.command(Command("EVALSHA", ("sha", "1", "k", token), o + t, o + t + 0.001, True))
    return s


def test_overlapping_successes_are_caught() -> None:
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 0.1, "ok")
    _section(rec, "b", 0.05, 0.15, "ok")
    verdict = check(rec, slack_ms=50)
    assert verdict.overlaps == 1
    assert any("NoOverlappingSuccess" in v for v in verdict.violations)


def test_a_silent_loss_beside_a_success_is_caught() -> None:
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 0.1, "error")
    _section(rec, "b", 0.05, 0.15, "ok")
    verdict = check(rec, slack_ms=50)
    assert any("silent loss" in v for v in verdict.violations)


def test_a_surfaced_loss_beside_a_success_passes() -> None:
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 0.5, "lost", signal=0.199, sends=(-0.001,))
    _section(rec, "b", 0.21, 0.3, "ok")
    verdict = check(rec, slack_ms=50)
    assert verdict.violations == []
    assert verdict.worst_detection_ms == pytest.approx(200, abs=1)


def test_a_body_outliving_its_lease_must_end_lost() -> None:
    rec = Recorder("synthetic")
    # Renewed at 0 and never again, body ran to 0.3 s with a 200 ms TTL, reported ok.
    _section(rec, "a", 0.0, 0.3, "ok", signal=None, sends=(0.0,))
    verdict = check(rec, slack_ms=150)
    assert any("outlived its lease" in v for v in verdict.violations)


def test_late_detection_is_caught() -> None:
    rec = Recorder("synthetic")
    # Last successful send at 0; the signal fired at 0.5 s; TTL 200 ms + 100 ms slack.
    _section(rec, "a", 0.0, 1.0, "lost", signal=0.5, sends=(0.0,))
    verdict = check(rec, slack_ms=100)
    assert any("not detected within" in v for v in verdict.violations)


def test_renewals_move_the_detection_bound() -> None:
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 1.0, "lost", signal=0.55, sends=(0.0, 0.1, 0.2, 0.35))
    verdict = check(rec, slack_ms=50)
    assert verdict.violations == []
    assert verdict.worst_detection_ms == pytest.approx(200, abs=1)


def _rw(section: Section, role: str, fence: int | None = None) -> Section:
    section.rw = role
    if fence is not None:
        section.fence = fence
    return section


def test_two_readers_share_a_read_write_key() -> None:
    rec = Recorder("synthetic")
    _rw(_section(rec, "r1", 0.0, 0.1, "ok"), "read", 5)
    _rw(_section(rec, "r2", 0.05, 0.15, "ok"), "read", 5)
    verdict = check(rec, slack_ms=50)
    assert verdict.violations == []
    assert (verdict.overlaps, verdict.overlapping_pairs, verdict.crowded) == (0, 0, 0)


def test_a_writer_beside_a_reader_is_an_overlap() -> None:
    rec = Recorder("synthetic")
    _rw(_section(rec, "r1", 0.0, 0.1, "ok"), "read", 5)
    _rw(_section(rec, "w", 0.05, 0.15, "ok"), "write", 6)
    verdict = check(rec, slack_ms=50)
    assert verdict.overlaps == 1 and verdict.crowded == 1
    assert any("NoOverlappingSuccess" in v for v in verdict.violations)


def test_a_writer_beside_a_reader_that_surfaced_its_loss_passes() -> None:
    rec = Recorder("synthetic")
    _rw(_section(rec, "r1", 0.0, 0.5, "lost", signal=0.199, sends=(-0.001,)), "read", 5)
    _rw(_section(rec, "w", 0.21, 0.3, "ok"), "write", 6)
    verdict = check(rec, slack_ms=50)
    assert verdict.violations == []
    assert verdict.crowded == 1 and verdict.fence_pairs == 1


def test_a_writers_fence_not_above_an_earlier_grant_is_caught() -> None:
    rec = Recorder("synthetic")
    _rw(_section(rec, "r1", 0.0, 0.1, "ok"), "read", 7)
    _rw(_section(rec, "w", 0.2, 0.3, "ok"), "write", 7)
    verdict = check(rec, slack_ms=50)
    assert verdict.fence_pairs == 1
    assert any("writer's fence is not larger" in v for v in verdict.violations)


def test_a_readers_fence_below_an_earlier_writers_is_caught() -> None:
    rec = Recorder("synthetic")
    _rw(_section(rec, "w", 0.0, 0.1, "ok"), "write", 7)
    _rw(_section(rec, "r1", 0.2, 0.3, "ok"), "read", 6)
    verdict = check(rec, slack_ms=50)
    assert any("reader's fence is smaller" in v for v in verdict.violations)


def test_fences_of_round_trips_that_overlap_in_time_are_not_compared() -> None:
    rec = Recorder("synthetic")
    # Each grant is sent before the other's reply: either script may have run first.
    r = _rw(_section(rec, "r1", 0.0, 0.1, "ok", sends=(-0.002,)), "read", 9)
    w = _rw(_section(rec, "w", 0.2, 0.3, "ok", sends=(-0.0015,)), "write", 8)
    assert r.token is not None and w.token is not None
    verdict = check(rec, slack_ms=1000)
    assert verdict.fence_pairs == 0


def test_two_renewals_in_flight_are_caught() -> None:
    rec = Recorder("synthetic")
    s = _section(rec, "a", 0.0, 0.3, "ok", sends=(-0.001, 0.05, 0.1, 0.15, 0.2, 0.25))
    assert s.token is not None
    o = rec.origin
    rec.command(Command("EVALSHA", ("sha", "1", "k", s.token), o + 0.2, o + 0.24, False))
    verdict = check(rec, slack_ms=50)
    assert any("two renewals in flight" in v for v in verdict.violations)


def test_more_successes_at_once_than_the_limit_are_caught() -> None:
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 0.1, "ok")
    _section(rec, "b", 0.02, 0.15, "ok")
    _section(rec, "c", 0.05, 0.12, "ok")
    verdict = check(rec, slack_ms=50, limit=2)
    assert verdict.overlaps == 1 and verdict.crowded == 1
    assert any(
        "NoOverlappingSuccess" in v and "3 successful" in v and "limit 2" in v
        for v in verdict.violations
    )


def test_as_many_successes_at_once_as_the_limit_pass() -> None:
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 0.1, "ok")
    _section(rec, "b", 0.02, 0.15, "ok")
    _section(rec, "c", 0.11, 0.2, "ok")  # starts after a ended: two at a time
    verdict = check(rec, slack_ms=50, limit=2)
    assert verdict.violations == [] and verdict.crowded == 0
    assert verdict.overlapping_pairs == 2


def test_a_silent_loss_in_a_crowd_beyond_the_limit_is_caught() -> None:
    # Three bodies at once with two permits: one of them must have surfaced its loss.
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 0.1, "error")
    _section(rec, "b", 0.02, 0.15, "ok")
    _section(rec, "c", 0.05, 0.12, "ok")
    verdict = check(rec, slack_ms=50, limit=2)
    assert verdict.overlaps == 0
    assert any("silent loss" in v and "limit 2" in v for v in verdict.violations)


def test_a_crowd_whose_extra_body_surfaced_its_loss_passes() -> None:
    rec = Recorder("synthetic")
    _section(rec, "a", 0.0, 0.5, "lost", signal=0.199, sends=(-0.001,))
    _section(rec, "b", 0.21, 0.3, "ok")
    _section(rec, "c", 0.22, 0.35, "ok")
    verdict = check(rec, slack_ms=50, limit=2)
    assert verdict.violations == []
    assert verdict.crowded == 1


def test_a_victim_starved_by_another_victims_body_is_judged_by_the_starvation() -> None:
    # Two permits: victim1 holds the GIL from 0.05 to 0.45 s while victim0, in its body
    # since 0, cannot run its timers either; its signal fires as the starvation ends.
    rec = Recorder("synthetic")
    _section(rec, "victim0", 0.0, 0.46, "lost", signal=0.455, sends=(-0.001,))
    starver = _section(rec, "victim1", 0.05, 0.5, "lost", signal=0.452, sends=(0.049,))
    starver.starved_from, starver.starved_until = rec.origin + 0.05, rec.origin + 0.45
    verdict = check(rec, slack_ms=50, limit=2)
    assert verdict.violations == []
    # The same victim0 in another process (an intruder) would have been late.
    rec.sections[0].client = "intruder"
    assert any("not detected within" in v for v in check(rec, slack_ms=50, limit=2).violations)
    # A waiter granted a permit is a thread (or task) of the same process: starved alike.
    rec.sections[0].client = "waiter0"
    assert check(rec, slack_ms=50, limit=2).violations == []


def test_the_release_records_of_its_semaphores_are_the_tools_own_keys() -> None:
    # A Redis left with only these (a run stopped before its clean-up) is not "non-empty".
    assert is_own_key("distlock:sem-released:{tag}:chaos-0123456789:res")
    assert is_own_key("distlock:released:{tag}:chaos-0123456789:res")
    assert not is_own_key("distlock:sem-released:{tag}:workers:res")


def _depth_write(rec: Recorder, s: Section, script: str, at: float, *, took: float = 0.001) -> None:
    """A reentrant depth write (R_ENTER or R_LEAVE by SHA) of ``s``, answered 1."""
    assert s.token is not None
    o = rec.origin
    args = (script, "1", "k", s.token, str(TTL_MS), "2")
    rec.command(Command("EVALSHA", args, o + at, o + at + took, True))


def _inner(s: Section, rec: Recorder, start: float, end: float, outcome: str) -> Level:
    o = rec.origin
    s.inner = Level(2, o + start - 0.002, o + start, o + end, outcome)  # type: ignore[arg-type]
    return s.inner


def test_an_inner_exit_that_raised_nothing_after_the_signal_is_caught() -> None:
    rec = Recorder("synthetic")
    s = _section(rec, "victim0", 0.0, 0.5, "lost", signal=0.2, sends=(0.0,))
    _inner(s, rec, 0.01, 0.45, "ok")
    verdict = check(rec, slack_ms=50)
    assert any("exit did not raise" in v for v in verdict.violations)


def test_an_inner_level_lost_under_a_successful_outermost_is_caught() -> None:
    rec = Recorder("synthetic")
    s = _section(rec, "victim0", 0.0, 0.1, "ok", sends=(0.0,))
    _inner(s, rec, 0.01, 0.09, "lost")
    verdict = check(rec, slack_ms=50)
    assert any("the outermost did not" in v for v in verdict.violations)


def test_both_levels_surfacing_the_loss_pass() -> None:
    rec = Recorder("synthetic")
    s = _section(rec, "victim0", 0.0, 0.5, "lost", signal=0.2, sends=(0.0,))
    _inner(s, rec, 0.01, 0.45, "lost")
    assert check(rec, slack_ms=50).violations == []


def test_a_reentry_confirms_the_lease_and_an_inner_exit_does_not() -> None:
    rec = Recorder("synthetic")
    # Acquired at 0, re-entered at 0.1 (the TTL refreshed), inner exit at 0.25: the lease
    # runs to 0.3, so a signal at 0.3 is on time and the exit's reply moves nothing.
    s = _section(rec, "victim0", 0.0, 0.5, "lost", signal=0.3, sends=(0.0,))
    _depth_write(rec, s, R_ENTER.sha, 0.1)
    _depth_write(rec, s, R_LEAVE.sha, 0.25)
    _inner(s, rec, 0.101, 0.25, "ok")
    verdict = check(rec, slack_ms=50)
    assert verdict.violations == []
    assert verdict.worst_detection_ms == pytest.approx(200, abs=1)
    assert rec.last_ok_send(s, before=s.end or 0.0) == pytest.approx(rec.origin + 0.1)


def test_a_reentry_beside_a_renewal_is_not_two_renewals_in_flight() -> None:
    rec = Recorder("synthetic")
    s = _section(rec, "victim0", 0.0, 0.3, "ok", sends=(-0.001, 0.05, 0.1, 0.15, 0.2, 0.25))
    _depth_write(rec, s, R_ENTER.sha, 0.151, took=0.03)
    _inner(s, rec, 0.182, 0.28, "ok")
    _depth_write(rec, s, R_LEAVE.source, 0.28)
    assert check(rec, slack_ms=50).violations == []


def test_a_thread_left_running_is_a_leak() -> None:
    baseline = Baseline.take()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="scenario-thread", daemon=True)
    thread.start()
    try:
        problems = check_no_leaks(baseline, admin=None, name_prefix="x", timeout=0.05)
        assert any("thread left running: scenario-thread" in p for p in problems), problems
    finally:
        stop.set()
        thread.join()


def test_a_lock_left_open_is_a_leak(chaos_target: RedisTarget) -> None:
    admin = redis.Redis.from_url(chaos_target.url)
    admin.ping()
    baseline = Baseline.take()
    client = redis.Redis.from_url(chaos_target.url, client_name="leak-probe")
    lock = Lock(client, prefix="leak-probe", ttl_ms=TTL_MS)
    try:
        lock.run("x", lambda handle: time.sleep(TTL_MS / 1000))  # long enough to renew
        problems = check_no_leaks(baseline, admin=admin, name_prefix="leak-probe", timeout=0.2)
        # The timer and worker threads are the process's, shared by every Lock: no leak.
        assert not any("thread left running" in p for p in problems), problems
        assert any("socket left open" in p for p in problems), problems
        assert any("server still sees connection" in p for p in problems), problems
        lock.close()
        client.close()
        assert check_no_leaks(baseline, admin=admin, name_prefix="leak-probe") == []
    finally:
        lock.close()
        client.close()
        admin.close()


def test_toxics_really_hurt(chaos_proxy: Proxy) -> None:
    client = redis.Redis(
        host=chaos_proxy.host,
        port=chaos_proxy.port,
        socket_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        client.ping()
        with chaos_proxy.toxic("latency", stream="downstream", latency=150):
            started = time.monotonic()
            client.ping()
            assert time.monotonic() - started >= 0.14
        with (
            chaos_proxy.toxic("timeout", stream="downstream", timeout=0),
            pytest.raises(redis.TimeoutError),
        ):
            client.ping()
        chaos_proxy.disable()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        chaos_proxy.enable()
        assert client.ping()
    finally:
        client.close()


def _starved(
    rec: Recorder, client: str, start: float, starve_s: float, end: float, signal: float
) -> Section:
    s = _section(rec, client, start, end, "lost", signal=signal, sends=(start - 0.001,))
    s.starved_from = rec.origin + start
    s.starved_until = rec.origin + start + starve_s
    return s


def test_a_starved_signal_is_judged_from_the_end_of_the_whole_starvation() -> None:
    # Two sections of one process: the second starves it 2 ms after the first's starvation
    # ended, so the first one's timers could not run until 0.802 s.
    rec = Recorder("synthetic")
    _starved(rec, "v1", 0.0, 0.4, 0.81, signal=0.805)
    _starved(rec, "v0", 0.402, 0.4, 0.9, signal=0.806)
    assert check(rec, slack_ms=150).violations == []


def test_a_starved_signal_late_after_the_whole_starvation_is_caught() -> None:
    rec = Recorder("synthetic")
    _starved(rec, "v1", 0.0, 0.4, 1.2, signal=1.1)
    _starved(rec, "v0", 0.402, 0.4, 0.9, signal=0.806)
    violations = check(rec, slack_ms=150).violations
    assert len(violations) == 1 and "after the starvation ended" in violations[0]


def _wait(
    rec: Recorder,
    asked: float,
    ended: float,
    outcome: str,
    *,
    wait_ms: int = 400,
    granted: bool = False,
) -> Section:
    """A waiter's section: asked at ``asked``; its body started at ``ended`` (``granted``)
    or ``run`` returned then without it."""
    o = rec.origin
    if granted:
        s = _section(rec, "waiter0", ended, ended + 0.05, outcome)
    else:
        s = rec.new_section("waiter0", "k", TTL_MS)
        s.outcome = outcome  # type: ignore[assignment]
        s.finished = o + ended
    s.attempt_started = o + asked
    s.wait_ms = wait_ms
    return s


def test_waits_that_end_within_their_bound_pass_and_are_counted() -> None:
    rec = Recorder("synthetic")
    _wait(rec, 0.0, 0.3, "ok", granted=True)
    _wait(rec, 0.0, 0.45, "not_acquired")
    _wait(rec, 0.0, 0.1, "error")
    verdict = check(rec, slack_ms=50, wait_allowance_ms=100)
    assert verdict.violations == []
    assert (verdict.waits, verdict.waits_granted, verdict.waits_timed_out) == (3, 1, 1)
    assert verdict.waits_failed == 1
    assert verdict.worst_wait_overrun_ms == pytest.approx(50, abs=1)


@pytest.mark.parametrize(("outcome", "granted"), [("not_acquired", False), ("ok", True)])
def test_a_wait_that_ends_past_its_bound_is_caught(outcome: str, granted: bool) -> None:
    rec = Recorder("synthetic")
    _wait(rec, 0.0, 0.7, outcome, granted=granted)
    verdict = check(rec, slack_ms=50, wait_allowance_ms=100)
    assert any("a wait of 400 ms ended 700 ms after" in v for v in verdict.violations)


def test_a_wait_that_never_ended_is_caught() -> None:
    rec = Recorder("synthetic")
    rec.new_section("waiter0", "k", TTL_MS, wait_ms=400)
    verdict = check(rec, slack_ms=50, wait_allowance_ms=100)
    assert any("never ended" in v for v in verdict.violations)


def test_a_waiter_holding_beside_a_success_is_caught() -> None:
    """A waiter whose body ran while another section held the key, both reporting success:
    a waiter that held without the lock."""
    rec = Recorder("synthetic")
    _section(rec, "victim0", 0.0, 0.2, "ok")
    _wait(rec, 0.0, 0.1, "ok", granted=True)
    verdict = check(rec, slack_ms=50, wait_allowance_ms=100)
    assert any("NoOverlappingSuccess" in v for v in verdict.violations)


def test_a_waiting_acquires_grant_is_a_successful_send_and_its_refusal_is_not() -> None:
    from distlock.tools.chaos.recorder import _positive

    assert _positive([7, 0]) and _positive(1)
    assert not _positive([0, 150]) and not _positive([0, 0]) and not _positive(0)
    assert not _positive(True) and not _positive(b"1")


def test_a_withdrawal_from_the_queue_confirms_no_lease() -> None:
    from distlock._protocol import R_WITHDRAW, WITHDRAW

    for script in (WITHDRAW, R_WITHDRAW):
        for first in (script.sha, script.source):
            sent = Command("EVALSHA", (first, "3", "k", "q", "p", "tok"), 0.0, 0.001, True)
            assert not sent.lease_write
    assert Command("EVALSHA", ("sha", "1", "k", "tok"), 0.0, 0.001, True).lease_write


def _waiting_attempt(rec: Recorder, token: str, at: float, *, granted: bool) -> None:
    from distlock._protocol import W_ACQUIRE

    keys = ("k", "fence", "queue", "queued")
    args = (W_ACQUIRE.sha, "4", *keys, token, "200", "400", "2000", "wake:")
    rec.command(Command("EVALSHA", args, rec.origin + at, rec.origin + at + 0.001, granted))


def test_a_waiting_grant_that_nobody_used_or_gave_back_is_caught() -> None:
    """Redis granted a waiter the key, yet no body ran on that token and no release gave
    it back: the key is held without anybody holding the lock."""
    rec = Recorder("synthetic")
    _waiting_attempt(rec, "orphan", 0.0, granted=True)
    _waiting_attempt(rec, "refused", 0.0, granted=False)
    verdict = check(rec, slack_ms=50)
    assert [v for v in verdict.violations if "no release gave it back" in v] == [
        "a waiting attempt was granted (sent 0.0 ms, token orphan) but no body ran on it "
        "and no release gave it back"
    ]


def test_a_waiting_grant_used_by_a_body_or_given_back_passes() -> None:
    from distlock._protocol import RELEASE

    rec = Recorder("synthetic")
    used = _section(rec, "waiter0", 0.01, 0.05, "ok")
    assert used.token is not None
    _waiting_attempt(rec, used.token, 0.0, granted=True)
    _waiting_attempt(rec, "late", 0.1, granted=True)
    release = (RELEASE.sha, "4", "k", "released", "queue", "queued", "late", "30000", "wake:")
    rec.command(Command("EVALSHA", release, rec.origin + 0.2, rec.origin + 0.201, True))
    assert check(rec, slack_ms=50).violations == []


def _handed(rec: Recorder, end: float, outcome: str, ttl_ms: int = TTL_MS) -> Section:
    """A waiter refused at 0 s, then handed the key by a release (its BLPOP read it), its
    body on it from 50 ms to ``end``."""
    from distlock.tools.chaos.recorder import _record_handover

    o = rec.origin
    s = rec.new_section("waiter0", "k", ttl_ms)
    s.token, s.fence = "handed", 9
    _waiting_attempt(rec, "handed", 0.0, granted=False)
    _record_handover(rec, [b"distlock:wake:{x}:k:handed", b"=9"])
    s.start, s.end, s.finished = o + 0.05, o + end, o + end
    s.outcome = outcome  # type: ignore[assignment]
    return s


def test_a_key_handed_over_counts_as_a_grant_sent_with_the_last_attempt() -> None:
    rec = Recorder("synthetic")
    _handed(rec, 0.15, "ok")  # within the 200 ms TTL of the refused attempt at 0 s
    assert check(rec, slack_ms=0).violations == []
    rec = Recorder("synthetic")
    _handed(rec, 0.3, "ok")  # past it: the lease did not start at the BLPOP reply
    assert any("outlived its lease" in v for v in check(rec, slack_ms=0).violations)


def test_a_key_handed_over_lives_the_short_handed_ttl_until_renewed() -> None:
    """A waiter with a long TTL is handed the key with the short handed TTL: a body that
    outlives that with no renewal answered outlived its lease, whatever its own TTL."""
    from distlock._core.waiting import HANDED_TTL_MS

    rec = Recorder("synthetic")
    _handed(rec, HANDED_TTL_MS / 1000 - 0.5, "ok", ttl_ms=30_000)
    assert check(rec, slack_ms=0).violations == []
    rec = Recorder("synthetic")
    _handed(rec, HANDED_TTL_MS / 1000 + 0.5, "ok", ttl_ms=30_000)
    assert any("outlived its lease" in v for v in check(rec, slack_ms=0).violations)


def test_a_key_handed_over_that_nobody_used_or_gave_back_is_caught() -> None:
    from distlock.tools.chaos.recorder import _record_handover

    rec = Recorder("synthetic")
    _waiting_attempt(rec, "orphan", 0.0, granted=False)
    _record_handover(rec, [b"distlock:wake:{x}:k:orphan", b"=4"])
    _record_handover(rec, [b"distlock:wake:{x}:k:woken", b"1"])  # a wake-up grants nothing
    violations = [v for v in check(rec, slack_ms=50).violations if "no release" in v]
    assert len(violations) == 1 and "token orphan" in violations[0]


@pytest.mark.parametrize(
    "kind", [{"limit": 2}, {"reentrant": True}], ids=["semaphore", "reentrant"]
)
def test_the_traced_trials_semaphores_and_reentrant_locks_record_into_its_trace(
    chaos_target: RedisTarget, tmp_path: Path, kind: dict[str, Any]
) -> None:
    """Every primitive of the traced trial, in both drivers, records into the trial's
    trace, as its locks do: one left out would leave TLC without the sections that hold
    the permits or the key the others are refused."""
    admin = redis.Redis.from_url(chaos_target.url)
    settings = Settings(None, None, None, None, None, None, trace_dir=str(tmp_path))
    settings = dataclasses.replace(settings, validate_traces=False)
    sc = Scenario(
        name="traced",
        ttl_ms=2_000,
        target=chaos_target,
        proxy=None,
        settings=settings,
        report=ChaosReport(),
        admin=admin,
        **kind,
    )
    try:
        sc.trace.start(TRACED_TRIAL)
        sync_lock = sc.clients.sync_lock(sc.clients.sync_client("sync", via_proxy=False))
        sync_lock.run(sc.params.key_id, lambda handle: None)

        async def in_asyncio() -> None:
            client = sc.clients.async_client("asyncio", via_proxy=False)
            lock = sc.clients.async_lock(client)
            try:
                await lock.run(sc.params.key_id, _nothing)
            finally:
                await lock.aclose()
                await client.aclose()

        asyncio.run(in_asyncio())
        sc.clients.close_sync()
        sc.trace.stop()
    finally:
        sc.clients.close_sync()
        sc.target.cleanup(sc.params.prefix)
        admin.close()
    events = list(read_events(tmp_path / "traced.ndjson"))
    acquires = [e for e in events if e["action"] == "Acquire"]
    assert len({e["client"] for e in acquires}) == 2, events
    assert {e["key"] for e in acquires} == {sc.params.key}
    assert tracecheck.is_semaphore(events) == ("limit" in kind)
    assert [e["action"] for e in events].count("ReleaseReply") == 2, events
    assert sc.trace.note == NO_TLC


async def _nothing(handle: object) -> None:
    return None


def test_a_trace_check_left_for_later_gives_the_same_verdict_and_row(
    chaos_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Scenario(defer_trace=True)``: TLC checks the same traced trial after the scenario's
    end; its row gets TLC's columns then, its thread is no leak meanwhile, and a rejection
    reads as ``finish`` would have raised it, timeline included."""
    admin = redis.Redis.from_url(chaos_target.url)
    settings = Settings(None, None, None, None, None, None)
    sc = Scenario(
        name="deferred",
        ttl_ms=2_000,
        target=chaos_target,
        proxy=None,
        settings=settings,
        report=ChaosReport(),
        admin=admin,
        defer_trace=True,
    )
    try:
        sc.trace.start(TRACED_TRIAL)
        lock = sc.clients.sync_lock(sc.clients.sync_client("sync", via_proxy=False))
        lock.run(sc.params.key_id, lambda handle: None)
        sc.clients.close_sync()
        sc.trace.stop()
        checking = sc.trace.checking
        assert checking is not None, "no check under way once the traced trial stopped"
        left = check_no_leaks(
            sc.baseline, admin=None, name_prefix="x", timeout=0.05, ignore_threads=(checking,)
        )
        assert left == [], left
        row = judging.row(sc.params, sc.recorder, check(sc.recorder, slack_ms=50), sc.trace)
        deferred = DeferredTrace(sc.name, sc.params, sc.recorder, sc.trace, row)
        assert deferred.problems() is None
        assert (row.traces_validated, row.trace_note) == (1, None)
        assert row.trace_seconds > 0
        monkeypatch.setattr(TrialTrace, "verdict", lambda self: ["no behaviour of the spec"])
        message = deferred.problems()
        assert message is not None
        assert message.startswith("deferred:\n  no behaviour of the spec\n--- timeline ---")
    finally:
        sc.clients.close_sync()
        sc.target.cleanup(sc.params.prefix)
        admin.close()
