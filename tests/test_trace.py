"""Recorded traces: the NDJSON recorder, and TLC validating traces against the spec.

Traces of integration-style runs of both drivers and of a sample of the multi-client
property test must be accepted; corrupted traces (a reordered reply, a success after a
lost renewal, a fence that goes down, a forged reply, time running backwards, a body that
outlived its lease, a late grant kept, a refused renewal with no signal, a deadline
forged later than any reply allows) must be rejected, naming the first event no behaviour
explains.  Sections with the heartbeat off are checked too, and a body whose starvation
ends mid-body is accepted, but refused when forged ok after its lease ran out.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from redis.backoff import NoBackoff
from redis.retry import Retry

import distlock
import distlock.asyncio
from distlock._clock import now_ms
from distlock.tools import tracecheck
from distlock.trace import (
    REDIS_DOWN,
    NdjsonRecorder,
    data_loss_event,
    read_events,
    write_events,
)
from tests.redis_server import RedisServer

needs_tlc = pytest.mark.skipif(
    not (tracecheck.spec_dir() / "DistLock.tla").is_file() or shutil.which("java") is None,
    reason="needs spec/DistLock.tla and java",
)

#: Totals across this module, printed at the end: how many traces TLC checked, how long.
STATS: dict[str, float] = {"accepted": 0, "rejected": 0, "seconds": 0.0}


def _check(events: list[dict[str, Any]]) -> list[tracecheck.Verdict]:
    verdicts = tracecheck.check(events)
    for v in verdicts:
        STATS["accepted" if v.accepted else "rejected"] += 1
        STATS["seconds"] += v.seconds
    return verdicts


def _check_each(traces: list[list[dict[str, Any]]]) -> list[tracecheck.Verdict]:
    """One verdict per single-key trace, two TLC runs at a time (TLC uses one core)."""
    with ThreadPoolExecutor(2) as pool:
        verdicts = [v for (v,) in pool.map(tracecheck.check, traces)]
    for v in verdicts:
        STATS["accepted" if v.accepted else "rejected"] += 1
        STATS["seconds"] += v.seconds
    return verdicts


def _write_many(rec: NdjsonRecorder, n: int) -> None:
    for i in range(200):
        rec({"action": "Acquire", "client": f"c{n}", "i": i})


def test_recorder_writes_one_event_per_line_from_many_threads(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    with NdjsonRecorder(path) as rec:
        threads = [threading.Thread(target=_write_many, args=(rec, n)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    events = read_events(path)
    assert len(events) == rec.count == 1600
    for n in range(8):
        assert [e["i"] for e in events if e["client"] == f"c{n}"] == list(range(200))
    rec({"action": "late", "client": "x"})  # after close: dropped, not an error
    assert len(path.read_text().splitlines()) == 1600


class Renewals:
    """A trace callable that records, and counts successful renewals for a body to await."""

    def __init__(self, rec: NdjsonRecorder, wanted: int) -> None:
        self.rec = rec
        self.wanted = wanted
        self.seen = 0
        self.enough = threading.Event()

    def __call__(self, event: dict[str, Any]) -> None:
        self.rec(event)
        if event["action"] == "RenewReply" and event["ok"]:
            self.seen += 1
            if self.seen >= self.wanted:
                self.enough.set()


def _integration_runs(server: RedisServer, path: Path) -> None:
    """Both drivers: a renewed run, a manual handle, a contended acquire, a lost key, and
    a grant that arrived after its own lease."""
    with NdjsonRecorder(path, append=False) as rec:
        renewals = Renewals(rec, 2)
        with distlock.Lock(server.url, prefix="tr-sync", ttl_ms=400, trace=renewals) as locks:
            locks.run("renewed", lambda handle: renewals.enough.wait(30))
            h = locks.acquire("manual")
            assert h is not None
            h.extend()
            h.release()
            holder = locks.acquire("contended")
            assert holder is not None
            assert locks.acquire("contended") is None
            holder.release()
            # Writes paused for three TTLs: the acquire runs after the pause, and its
            # grant arrives after the lease the client counted from its send time.
            locks.client.client_pause(1_200, all=False)
            with pytest.raises(distlock.LockLeaseLostError):
                locks.run("late", lambda handle: None)

        async def aio() -> None:
            async with distlock.asyncio.Lock(
                server.url, prefix="tr-aio", ttl_ms=400, trace=rec
            ) as alocks:
                ah = await alocks.acquire("manual")
                assert ah is not None
                await ah.extend()
                await ah.release()
                with pytest.raises(distlock.LockLeaseLostError):  # noqa: PT012
                    async with alocks.hold("lost") as handle:
                        await (await alocks.client()).delete(handle.key)
                        await handle.signal.wait()

        asyncio.run(aio())


@needs_tlc
@pytest.mark.tlc
def test_integration_traces_are_behaviours_of_the_spec(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    path = tmp_path / "run.ndjson"
    _integration_runs(redis_server, path)
    verdicts = _check(read_events(path))
    assert len(verdicts) >= 5
    for v in verdicts:
        assert v.accepted, v.describe() + "\n" + v.output[-2000:]


@needs_tlc
@pytest.mark.tlc
def test_a_cpu_budget_stops_tlc_and_an_ample_one_changes_nothing(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The chaos suite bounds TLC by CPU seconds, which a loaded machine cannot eat up."""
    path = tmp_path / "run.ndjson"
    _integration_runs(redis_server, path)
    events = read_events(path)
    first = next(iter(tracecheck.split_by_key(events).values()))
    with pytest.raises(subprocess.TimeoutExpired):
        tracecheck.check(first, cpu_s=0)
    (verdict,) = tracecheck.check(first, cpu_s=120)
    assert verdict.accepted, verdict.describe()


@needs_tlc
@pytest.mark.tlc
def test_property_test_traces_are_behaviours_of_the_spec(redis_server: RedisServer) -> None:
    from tests.properties import test_redis_stateful as prop

    prop.RedisMachine.server = redis_server
    loop = prop.LoopThread()
    prop.RedisMachine.loop = loop
    before = len(prop.RECORDED)
    try:
        run_state_machine_as_test(
            prop.RedisMachine,
            settings=settings(max_examples=4, stateful_step_count=12, deadline=None),
        )
    finally:
        loop.close()
    checked = 0
    for events in prop.RECORDED[before:]:
        for key, evs in tracecheck.split_by_key(events).items():
            if len({e["client"] for e in evs}) > 3:
                continue  # keep TLC's search small: at most three sections on a key
            try:
                verdict = tracecheck.check_key(key, evs)
            except tracecheck.TraceError as exc:
                print(f"not checked: {exc}")
                continue  # a shape the trace check does not take
            STATS["accepted" if verdict.accepted else "rejected"] += 1
            STATS["seconds"] += verdict.seconds
            assert verdict.accepted, verdict.describe() + "\n" + json.dumps(evs)[:3000]
            checked += 1
    print(f"property traces validated: {checked}")


def _renewed_run(server: RedisServer, tmp_path: Path, delete: bool) -> list[dict[str, Any]]:
    path = tmp_path / f"renewed-{delete}.ndjson"
    prefix = f"tr-c{delete}"
    with NdjsonRecorder(path, append=False) as rec:
        renewals = Renewals(rec, 1)
        locks = distlock.Lock(server.url, prefix=prefix, ttl_ms=400, trace=renewals)
        try:
            with locks.hold("x") as handle:
                if delete:
                    locks.client.delete(handle.key)
                    assert handle.signal.wait(30)
                else:
                    assert renewals.enough.wait(30)
        except distlock.LockLeaseLostError:
            pass
        finally:
            locks.close()
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_corrupted_traces_are_rejected(redis_server: RedisServer, tmp_path: Path) -> None:
    good = _renewed_run(redis_server, tmp_path, delete=False)
    (verdict,) = _check(good)
    assert verdict.accepted, verdict.describe()

    # A reordered reply: the release reply before the release was sent.
    actions = [e["action"] for e in good]
    i = actions.index("Release")
    reordered = [*good[:i], good[i + 1], good[i], *good[i + 2 :]]
    (verdict,) = _check(reordered)
    assert not verdict.accepted
    assert verdict.first_unexplained == i
    assert verdict.event is not None and verdict.event["action"] == "ReleaseReply"

    # A success after a lost renewal: the renewal found the key gone, the trace says ok.
    lost = _renewed_run(redis_server, tmp_path, delete=True)
    (verdict,) = _check(lost)
    assert verdict.accepted, verdict.describe()
    assert lost[-1]["outcome"] == "lost"
    j = next(n for n, e in enumerate(lost) if e["action"] == "RenewReply" and not e["ok"])
    forged = [
        *lost[: j + 1],
        *(
            {**e, "outcome": "ok" if e["outcome"] == "lost" else e["outcome"]}
            for e in lost[j + 1 :]
        ),
    ]
    (verdict,) = _check(forged)
    assert not verdict.accepted
    assert verdict.first_unexplained == len(lost) - 1

    # The command line: 0 for an accepted trace, 1 for a rejected one.
    good_path, bad_path = tmp_path / "good.ndjson", tmp_path / "bad.ndjson"
    write_events(good_path, good)
    write_events(bad_path, reordered)
    for trace, status in ((good_path, 0), (bad_path, 1)):
        proc = subprocess.run(
            [sys.executable, "-m", "distlock", "validate-trace", str(trace)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == status, proc.stdout + proc.stderr
    assert "REJECTED" in proc.stdout
    assert "ReleaseReply" in proc.stdout  # it names the first event no behaviour explains


@needs_tlc
@pytest.mark.tlc
def test_a_chaos_report_of_a_rejected_trace_carries_the_trace_and_its_check(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    # A trace TLC rejects in a CI run is on a machine gone since: the report itself must
    # hold the events and the command that checks them again, with the suite's options.
    from distlock.tools.chaos.tracing import rejection_report

    good = _renewed_run(redis_server, tmp_path, delete=False)
    i = [e["action"] for e in good].index("Release")
    reordered = [*good[:i], good[i + 1], good[i], *good[i + 2 :]]
    first, *lines = rejection_report(reordered, 1600.0).splitlines()
    command = shlex.split(first.split(" and run ", 1)[1])
    assert command[:4] == ["python", "-m", "distlock", "validate-trace"], first
    assert "--hang-after-ms" in command and "--within-ms" in command
    assert [json.loads(line) for line in lines] == reordered
    trace = tmp_path / "TRACE.ndjson"
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = [sys.executable, *command[1:]]
    argv[argv.index("TRACE.ndjson")] = str(trace)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REJECTED" in proc.stdout and "ReleaseReply" in proc.stdout


#: The spec has one Retries for every section: the sections of one trace share it.
RETRIES = 200


def _starved_run(server: RedisServer, tmp_path: Path, *, taker: bool) -> list[dict[str, Any]]:
    """An asyncio section whose body blocks the event loop (no renewal, no deadline timer
    runs) until its lease is long gone in Redis: for three TTLs (the key expired in
    Redis), or (``taker``) until a section of a sync Lock on another thread took the key
    and holds it."""
    path = tmp_path / f"starved-{taker}.ndjson"
    prefix = f"tr-starved-{taker}"
    taken, a_done = threading.Event(), threading.Event()

    with NdjsonRecorder(path, append=False) as rec:

        def take(handle: distlock.LockHandle) -> None:
            taken.set()
            assert a_done.wait(30)

        def other() -> None:
            with distlock.Lock(
                server.url,
                prefix=prefix,
                ttl_ms=300,
                retries=RETRIES,
                retry_delay_ms=10,
                trace=rec,
            ) as locks:
                locks.run("x", take)

        thread = threading.Thread(target=other, name="trace-taker")

        async def section() -> None:
            async with distlock.asyncio.Lock(
                server.url, prefix=prefix, ttl_ms=300, retries=RETRIES, trace=rec
            ) as alocks:
                with pytest.raises(distlock.LockLeaseLostError):  # noqa: PT012
                    async with alocks.hold("x"):
                        # Blocking calls: the event loop stays blocked until then.
                        if taker:
                            thread.start()
                            assert taken.wait(30)
                        else:
                            time.sleep(0.9)  # noqa: ASYNC251 (the fault: a loop starved 3 TTLs)

        try:
            asyncio.run(section())
        finally:
            a_done.set()
            if thread.is_alive():
                thread.join(30)
    return read_events(path)


def _index(events: list[dict[str, Any]], action: str, **where: Any) -> int:
    return next(
        n
        for n, e in enumerate(events)
        if e["action"] == action and all(e.get(k) == v for k, v in where.items())
    )


def _retimed(events: list[dict[str, Any]], start: int, t: float) -> list[dict[str, Any]]:
    """``events`` with those from ``start`` on moved so the first is at ``t`` (gaps kept)."""
    shift = t - events[start]["t"]
    return [*events[:start], *({**e, "t": e["t"] + shift} for e in events[start:])]


@needs_tlc
@pytest.mark.tlc
def test_forged_values_and_times_are_rejected(redis_server: RedisServer, tmp_path: Path) -> None:
    """Each corruption of a genuine trace is rejected at the event it corrupts, by the
    pre-pass (fences, clocks) or by TLC (reply values, elapsed time)."""
    good = _renewed_run(redis_server, tmp_path, delete=False)
    alone = _starved_run(redis_server, tmp_path, taker=False)
    taken = _starved_run(redis_server, tmp_path, taker=True)
    ttl = float(good[0]["ttl_ms"])
    a, b = taken[0]["client"], next(e["client"] for e in taken if e["client"] != taken[0]["client"])
    b_grant = _index(taken, "AcquireReply", client=b, granted=True)
    a_release = _index(taken, "ReleaseReply", client=a)
    assert taken[a_release]["ok"] is False and taken[a_release]["outcome"] == "lost"
    assert alone[-1]["action"] == "ReleaseReply" and alone[-1]["ok"] is False
    renew_reply = _index(good, "RenewReply")
    grant = _index(good, "AcquireReply")
    assert good[renew_reply]["ok"] is True

    # 1. The fence goes down from one section to the next: A's raised above B's.
    a_fence = taken[b_grant]["fence"] + 1
    fence_down = [
        {**e, "fence": a_fence} if e["client"] == a and e["fence"] is not None else e for e in taken
    ]
    # 2. A release answered 1 when the key had long expired, and when another section
    # held it.
    expired_release = [*alone[:-1], {**alone[-1], "ok": True}]
    taken_release = [*taken]
    taken_release[a_release] = {**taken[a_release], "ok": True}
    # 3. Time runs backwards: the renewal answered before it was sent.
    backwards = [*good]
    backwards[renew_reply] = {**good[renew_reply], "t": good[renew_reply - 1]["t"] - 30}
    # 4. Success three TTLs after the grant, without a renewal (and the deadline the
    # grant gave, as the core would record it: a later one is the pre-pass's to reject).
    unrenewed = [
        {**e, "deadline": good[grant]["deadline"]} if n > grant else e
        for n, e in enumerate(good)
        if e["action"] not in ("RenewSend", "RenewReply")
    ]
    body_done = _index(unrenewed, "BodyDone")
    unrenewed = _retimed(unrenewed, body_done, unrenewed[grant]["t"] + 3 * ttl)
    # 5. The grant arrives 2.5 TTLs after the request and the section keeps it.
    late = _retimed(good, grant, good[grant - 1]["t"] + 2.5 * ttl)
    # 6. The renewal is refused and no loss is recorded.
    refused = [
        {**e, "deadline": good[grant]["deadline"]} if n >= renew_reply else e
        for n, e in enumerate(good)
    ]
    refused[renew_reply] = {**refused[renew_reply], "ok": False}

    cases: list[tuple[str, list[dict[str, Any]], int | None, str | None]] = [
        ("genuine: the key expired under a starved body", alone, None, None),
        ("genuine: another section took the key", taken, None, None),
        ("1. fence goes down", fence_down, b_grant, "pre-pass"),
        ("2. release 1 after the key expired", expired_release, len(alone) - 1, "TLC"),
        ("2. release 1 while another section held the key", taken_release, a_release, "TLC"),
        ("3. time runs backwards", backwards, renew_reply, "pre-pass"),
        ("4. ok three TTLs after the grant, not renewed", unrenewed, body_done, "TLC"),
        ("5. grant 2.5 TTLs late kept", late, grant, "TLC"),
        ("6. renewal refused, no loss", refused, renew_reply, "TLC"),
    ]
    verdicts = _check_each([trace for _, trace, _, _ in cases])
    for (name, _, index, by), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-2000:]}"
            continue
        assert not v.accepted, f"{name}: accepted"
        assert (v.first_unexplained, v.by) == (index, by), f"{name}: {v.describe()}"
        assert v.event is not None and v.describe().count("REJECTED") == 1
    assert "not above fence" in str(verdicts[2].reason)
    assert "time runs backwards" in str(verdicts[5].reason)


def _resumed_run(server: RedisServer, tmp_path: Path) -> list[dict[str, Any]]:
    """An asyncio section whose body blocks the event loop for three TTLs and then runs
    on: the starvation ends mid-body, the lease timer fires then, and the body waits for
    that signal before it ends."""
    path = tmp_path / "resumed.ndjson"
    with NdjsonRecorder(path, append=False) as rec:

        async def section() -> None:
            async with distlock.asyncio.Lock(
                server.url, prefix="tr-resumed", ttl_ms=300, retries=RETRIES, trace=rec
            ) as alocks:
                with pytest.raises(distlock.LockLeaseLostError):  # noqa: PT012
                    async with alocks.hold("x") as handle:
                        time.sleep(0.9)  # noqa: ASYNC251 (the fault: a loop starved 3 TTLs)
                        assert await handle.signal.wait()

        asyncio.run(section())
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_a_starvation_that_ends_mid_body(redis_server: RedisServer, tmp_path: Path) -> None:
    """A body that starves the timers and then runs on: the lease timer fires when the
    starvation ends, before the body does (the trace's Resume), and the run is accepted.
    The same run with that loss removed, the body reported ok after its lease ran out
    during the starvation, is rejected where the body ends."""
    good = _resumed_run(redis_server, tmp_path)
    timeout = _index(good, "LeaseTimeout")
    done = _index(good, "BodyDone")
    assert timeout < done and good[done]["lost"] is True
    forged = [
        {**e, "lost": False, "outcome": "ok" if e["action"] == "ReleaseReply" else e["outcome"]}
        if n > timeout
        else e
        for n, e in enumerate(good)
        if n != timeout
    ]
    forged[-1] = {**forged[-1], "ok": True}
    assert forged[-1]["action"] == "ReleaseReply"
    accepted, rejected = _check_each([good, forged])
    assert accepted.accepted, f"{accepted.describe()}\n{accepted.output[-2000:]}"
    assert not rejected.accepted, "a body ok after its lease ran out: accepted"
    assert rejected.first_unexplained == done - 1, rejected.describe()


@needs_tlc
@pytest.mark.tlc
def test_a_deadline_forged_later_is_rejected(redis_server: RedisServer, tmp_path: Path) -> None:
    """The recorded deadline is the spec's lease: the send time of the request a reply
    confirmed plus its TTL, at the latest.  One forged 4 s later is rejected there."""
    good = _renewed_run(redis_server, tmp_path, delete=False)
    renew_reply = _index(good, "RenewReply")
    client = good[renew_reply]["client"]
    forged = [
        {**e, "deadline": e["deadline"] + 4_000}
        if n >= renew_reply and e["client"] == client
        else e
        for n, e in enumerate(good)
    ]
    (verdict,) = _check(forged)
    assert not verdict.accepted
    assert (verdict.first_unexplained, verdict.by) == (renew_reply, "pre-pass"), verdict.describe()
    assert "deadline" in str(verdict.reason)


def _heartbeat_off_run(server: RedisServer, tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "heartbeat-off.ndjson"
    with (
        NdjsonRecorder(path, append=False) as rec,
        distlock.Lock(
            server.url, prefix="tr-hb-off", ttl_ms=400, heartbeat_ms=False, trace=rec
        ) as locks,
    ):
        locks.run("x", lambda handle: None)
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_heartbeat_off_sections_are_checked(redis_server: RedisServer, tmp_path: Path) -> None:
    """A run/hold section with heartbeat_ms=False (never renewed) is a mode of the spec:
    its trace is accepted, and the same body reported ok three TTLs after its grant is
    rejected at the end of the body."""
    good = _heartbeat_off_run(redis_server, tmp_path)
    assert good[0]["watch"] and good[0]["renew_every_ms"] is None
    assert not any(e["action"] == "RenewSend" for e in good)
    grant = _index(good, "AcquireReply")
    body_done = _index(good, "BodyDone")
    late = _retimed(good, body_done, good[grant]["t"] + 3 * float(good[0]["ttl_ms"]))
    genuine, bad = _check_each([good, late])
    assert genuine.accepted, genuine.describe() + "\n" + genuine.output[-2000:]
    assert not bad.accepted
    assert (bad.first_unexplained, bad.by) == (body_done, "TLC"), bad.describe()


@needs_tlc
@pytest.mark.tlc
def test_declared_data_loss_lets_fences_start_over(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    """Redis restarted empty between two sections: the second's fence is still larger (each
    fence is at least the floor of Redis's clock), and the trace is accepted as it is.  Had
    Redis's clock gone back too, the second could get the first one's fence again (written
    into the recorded trace here): rejected as it is, accepted once the trace declares the
    loss."""
    path = tmp_path / "restart.ndjson"
    with NdjsonRecorder(path, append=False) as rec:
        for n in range(2):
            with distlock.Lock(
                fresh_redis.url, prefix="tr-restart", ttl_ms=400, trace=rec
            ) as locks:
                locks.run("x", lambda handle: None)
            if n == 0:
                fresh_redis.restart()
    events = read_events(path)
    second = _index(events, "AcquireReply", granted=True, client=events[-1]["client"])
    first_fence = events[_index(events, "AcquireReply")]["fence"]
    later = events[second]["client"], events[second]["fence"]
    assert later[1] > first_fence
    repeated = [
        {**e, "fence": first_fence} if (e["client"], e.get("fence")) == later else e
        for e in events
    ]
    declared = [*repeated[:second], data_loss_event(events[second]["t"]), *repeated[second:]]
    kept, plain, with_loss = _check_each([events, repeated, declared])
    assert kept.accepted, kept.describe() + "\n" + kept.output[-2000:]
    assert not plain.accepted and plain.by == "pre-pass", plain.describe()
    assert plain.first_unexplained == second and "already granted" in str(plain.reason)
    assert with_loss.accepted, with_loss.describe() + "\n" + with_loss.output[-2000:]


def _rounds_run(server: RedisServer, tmp_path: Path) -> list[dict[str, Any]]:
    """Two Lock objects on one key, each running sections one after another: A holds,
    B is refused three times, A releases and takes the key again, B is refused twice
    more, A releases and B gets it.  Eight sections, never more than two at once."""
    path = tmp_path / "rounds.ndjson"
    with (
        NdjsonRecorder(path, append=False) as rec,
        distlock.Lock(server.url, prefix="tr-rounds", ttl_ms=400, retries=0, trace=rec) as a,
        distlock.Lock(server.url, prefix="tr-rounds", ttl_ms=400, retries=0, trace=rec) as b,
    ):
        for refusals in (3, 2):
            held = a.acquire("x")
            assert held is not None
            for _ in range(refusals):
                assert b.acquire("x") is None
            held.release()
        taken = b.acquire("x")
        assert taken is not None
        taken.release()
    return read_events(path)


@needs_tlc
@pytest.mark.tlc
def test_sequential_sections_run_as_rounds_of_fewer_clients(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A lock's sections that follow one another on a key run as rounds of one model
    client: the eight sections above are two clients' rounds.  A later round granted
    while another client's round still holds the key (A's second release moved after
    B's grant) is no behaviour, and is rejected at that grant."""
    events = _rounds_run(redis_server, tmp_path)
    model = tracecheck.build_model(events)
    assert (model.sections, model.clients) == (8, 2)
    assert "MaxRounds = 6" in model.cfg
    grant = _index(events, "AcquireReply", granted=True, client=events[-1]["client"])
    a = events[0]["client"].split(".")[0]
    released = max(
        n for n, e in enumerate(events) if e["action"] == "Release" and e["client"].startswith(a)
    )
    assert events[released + 1]["action"] == "ReleaseReply" and released + 2 < grant
    # A's second release, with its reply, after B's grant (times unchanged: per section
    # they still run forwards).
    moved = [
        *events[:released],
        *events[released + 2 : grant + 1],
        *events[released : released + 2],
        *events[grant + 1 :],
    ]
    genuine, corrupted = _check_each([events, moved])
    assert genuine.accepted, genuine.describe() + "\n" + genuine.output[-2000:]
    assert not corrupted.accepted
    assert (corrupted.first_unexplained, corrupted.by) == (grant - 2, "TLC"), (
        corrupted.describe()
    )


def test_zz_report() -> None:
    """Prints how many traces TLC checked in this module and how long it took."""
    print(
        f"trace validation: {int(STATS['accepted'])} accepted, {int(STATS['rejected'])} "
        f"rejected, {STATS['seconds']:.1f}s of TLC"
    )


@needs_tlc
@pytest.mark.tlc
def test_an_acquire_failed_while_redis_was_down_never_ran(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    """A holder renews while Redis is killed; another caller's acquire fails while no
    redis-server runs (declared: ``declare_redis_down``); Redis comes back empty, the
    holder finds its key gone, and a third caller is granted.  Accepted; with that grant
    forged into a refusal, rejected there (only the failed acquire, run late, could
    have held the key), and accepted once the stretch without Redis is not declared."""
    path = tmp_path / "restart.ndjson"
    once = Retry(NoBackoff(), 0)
    client = redis.Redis(
        host=fresh_redis.host, port=fresh_redis.port, socket_timeout=1.0, retry=once
    )
    with NdjsonRecorder(path, append=False) as rec:
        locks = distlock.Lock(client, prefix="tr-down", ttl_ms=1000, retries=0, trace=rec)
        holding, restarted = threading.Event(), threading.Event()
        lost: list[BaseException] = []

        def holder() -> None:
            try:
                with locks.hold("x") as handle:
                    holding.set()
                    assert restarted.wait(30)
                    assert handle.signal.wait(30)
            except distlock.LockLeaseLostError as exc:
                lost.append(exc)

        thread = threading.Thread(target=holder, name="tr-down-holder")
        thread.start()
        assert holding.wait(30)
        rec.declare_data_loss(now_ms())
        fresh_redis.kill()  # returns once the process has exited
        since = now_ms()
        with pytest.raises(redis.ConnectionError):
            locks.acquire("x")
        rec.declare_redis_down(since, now_ms())
        fresh_redis.start()
        restarted.set()
        thread.join(30)
        assert not thread.is_alive() and lost
        taken = locks.acquire("x")
        assert taken is not None
        taken.release()
        locks.close()
    client.close()
    events = read_events(path)
    assert tracecheck.never_ran_failures(events) >= 2
    (v,) = _check(events)
    assert v.accepted, v.describe() + "\n" + v.output[-2000:]

    last = [e for e in events if e["action"] == "AcquireReply"][-1]
    refused = events.index(last)
    forged = [
        *events[:refused],
        {
            **last,
            "granted": False,
            "fence": None,
            "deadline": None,
            "phase": "done",
            "outcome": "not_acquired",
        },
    ]
    undeclared = [e for e in forged if e["action"] != REDIS_DOWN]
    v, w = _check_each([forged, undeclared])
    assert not v.accepted
    assert (v.first_unexplained, v.by) == (refused, "TLC"), v.describe()
    assert w.accepted, w.describe() + "\n" + w.output[-2000:]
