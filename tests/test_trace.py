"""Recorded traces: the NDJSON recorder, and TLC validating traces against the spec.

Traces of integration-style runs of both drivers and of a sample of the multi-client
property test must be accepted; corrupted traces (a reordered reply, a success after a
lost renewal) must be rejected, naming the first event no behaviour explains.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import distlock
import distlock.asyncio
from distlock.tools import tracecheck
from distlock.trace import NdjsonRecorder, read_events, write_events
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
                continue  # heartbeat_ms=False sections: not a mode of the spec
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


def test_zz_report() -> None:
    """Prints how many traces TLC checked in this module and how long it took."""
    print(
        f"trace validation: {int(STATS['accepted'])} accepted, {int(STATS['rejected'])} "
        f"rejected, {STATS['seconds']:.1f}s of TLC"
    )
