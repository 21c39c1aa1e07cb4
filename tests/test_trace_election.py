"""Recorded traces of an election, validated against ``spec/Election.tla``.

A campaign is the lock's waiting section with the handoff, action for action, and records
the lock's events (its ``Acquire`` also the candidate's identity); an observer's
``leader()`` reads are recorded beside them by :func:`distlock.trace.traced_leader`.  The
campaigns are checked by the lock's trace model, which ``spec/ElectionTrace.tla``
EXTENDS with the leader record and the reads (see :mod:`distlock.tools.tracecheck`).

Real runs of both drivers against a real Redis must be accepted: a leader resigning
while a campaigner waits, the lease handed to that campaigner; a campaign whose wait ran
out; reads before anyone led, under each leader and after the last resigned.  Corrupted
reads must be rejected at the read they corrupt: an identity never granted, a fence not
the holder's last, a leader reported after its lease ended.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import distlock
import distlock.asyncio
from distlock.tools import tracecheck
from distlock.trace import (
    LEADER_READ,
    NdjsonRecorder,
    atraced_leader,
    read_events,
    traced_leader,
)
from tests.redis_server import RedisServer
from tests.test_trace_wait import Watch

needs_tlc = pytest.mark.skipif(
    not (tracecheck.spec_dir() / "ElectionTrace.tla").is_file() or shutil.which("java") is None,
    reason="needs spec/DistLock.tla, spec/ElectionTrace.tla and java",
)

Event = dict[str, Any]

#: The waiting campaigner's wait: long enough never to run out in these runs.
WAITS_MS = 10_000
#: The campaign that gives up: its wait runs out while the first leader leads.
GIVES_UP_MS = 150


def _sync_run(server: RedisServer, path: Path) -> list[Event]:
    """Reads before anyone leads, under each leader and after the last resigned; a
    campaign whose wait runs out; a leader resigning while a campaigner waits, handed the
    lease (sync driver, threads)."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)
        options: dict[str, Any] = {"prefix": "tre-sync", "ttl_ms": 400, "trace": watch}
        with (
            distlock.Election(server.url, "e", identity="alpha", **options) as alpha,
            distlock.Election(server.url, "e", identity="beta", **options) as beta,
            distlock.Election(server.url, "e", identity="gamma", **options) as gamma,
        ):
            assert traced_leader(alpha, watch) is None
            first = alpha.campaign()
            assert first is not None
            seen = traced_leader(gamma, watch)
            assert seen is not None and (seen.identity, seen.fence) == ("alpha", first.fence)
            assert gamma.campaign(wait_ms=GIVES_UP_MS) is None
            handed: list[distlock.Leadership | None] = []
            waiter = threading.Thread(
                target=lambda: handed.append(beta.campaign(wait_ms=WAITS_MS))
            )
            waiter.start()
            watch.wait_for(watch.blocked(WAITS_MS))
            assert first.resign()
            waiter.join(30)
            (second,) = handed
            assert second is not None and second.fence > first.fence
            seen = traced_leader(alpha, watch)
            assert seen is not None and (seen.identity, seen.fence) == ("beta", second.fence)
            assert second.resign()
            assert traced_leader(alpha, watch) is None
    return read_events(path)


def _async_run(server: RedisServer, path: Path) -> list[Event]:
    """The same with the asyncio driver (tasks), the reads made by a second observer too."""
    with NdjsonRecorder(path, append=False) as rec:
        watch = Watch(rec)

        async def main() -> None:
            until = watch.on_loop()
            options: dict[str, Any] = {"prefix": "tre-aio", "ttl_ms": 400, "trace": watch}
            async with (
                distlock.asyncio.Election(server.url, "e", identity="alpha", **options) as alpha,
                distlock.asyncio.Election(server.url, "e", identity="beta", **options) as beta,
                distlock.asyncio.Election(server.url, "e", identity="gamma", **options) as gamma,
            ):
                assert await atraced_leader(alpha, watch) is None
                first = await alpha.campaign()
                assert first is not None
                seen = await atraced_leader(gamma, watch, "other")
                assert seen is not None and (seen.identity, seen.fence) == ("alpha", first.fence)
                assert await gamma.campaign(wait_ms=GIVES_UP_MS) is None
                waiting = asyncio.create_task(beta.campaign(wait_ms=WAITS_MS))
                await until(watch.blocked(WAITS_MS))
                assert await first.resign()
                second = await waiting
                assert second is not None and second.fence > first.fence
                seen = await atraced_leader(alpha, watch)
                assert seen is not None and (seen.identity, seen.fence) == ("beta", second.fence)
                assert await second.resign()
                assert await atraced_leader(alpha, watch, "other") is None
            watch.notify = lambda: None  # the loop is about to close

        asyncio.run(main())
    return read_events(path)


def _reads(events: list[Event]) -> list[int]:
    """The replies of the reads, in order."""
    return [n for n, e in enumerate(events) if e["action"] == LEADER_READ]


def _granted(events: list[Event], identity: str) -> int:
    """The fence granted to ``identity``'s campaign (granted or handed)."""
    clients = {
        e["client"] for e in events if e["action"] == "Acquire" and e.get("identity") == identity
    }
    return next(
        int(e["fence"])
        for e in events
        if e["client"] in clients
        and e["action"] in ("AcquireReply", "Wake")
        and e.get("fence")
        and e["phase"] == "held"
    )


def _shape(events: list[Event]) -> None:
    """What a run must show for its check to mean anything: a campaign that gave up, a
    lease handed over at a resignation, reads of nobody and of each leader."""
    assert any(
        e["action"] == "AcquireReply" and e["outcome"] == "not_acquired" for e in events
    ), "no campaign gave up"
    handed = [e for e in events if e["action"] == "Wake" and e.get("fence")]
    assert handed, "no lease handed over"
    release = next(n for n, e in enumerate(events) if e["action"] == "Release")
    assert release < events.index(handed[0])
    reported = [events[n]["identity"] for n in _reads(events)]
    assert reported == [None, "alpha", "beta", None]


def _check_each(cases: list[tuple[list[Event], dict[str, Any]]]) -> list[tracecheck.Verdict]:
    """One verdict per single-key trace, two TLC runs at a time (TLC uses one core)."""

    def one(case: tuple[list[Event], dict[str, Any]]) -> tracecheck.Verdict:
        events, options = case
        (key,) = tracecheck.split_by_key(events)
        return tracecheck.check_key(key, events, **options)

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, cases))


@needs_tlc
@pytest.mark.tlc
def test_election_traces_are_behaviours_and_corrupted_reads_are_rejected(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    sync = _sync_run(redis_server, tmp_path / "sync.ndjson")
    aio = _async_run(redis_server, tmp_path / "aio.ndjson")
    _shape(sync)
    _shape(aio)
    model = tracecheck.build_election_model(sync)
    assert model.module == "ElectionTrace" and "DistLockTrace" in model.modules
    assert 'Identity == <<<<"alpha"' in model.data

    reads = _reads(sync)
    under_alpha, under_beta, after = reads[1], reads[2], reads[3]
    alpha, beta = _granted(sync, "alpha"), _granted(sync, "beta")
    # A read naming the campaigner whose wait ran out: never granted.
    never = [{**e, "identity": "gamma"} if n == under_beta else e for n, e in enumerate(sync)]
    # The leader's identity with the fence of the leader before it.
    stale = [{**e, "fence": alpha} if n == under_beta else e for n, e in enumerate(sync)]
    # The first leader reported while the second leads, with its own fence.
    deposed = [
        {**e, "identity": "alpha", "fence": alpha} if n == under_beta else e
        for n, e in enumerate(sync)
    ]
    # The last leader reported after its resignation freed the key (the record outliving
    # its lease).
    ended = [
        {**e, "identity": "beta", "fence": beta, "ttl_ms": 300} if n == after else e
        for n, e in enumerate(sync)
    ]
    # Nobody reported while the first leader leads.
    missed = [
        {**e, "identity": None, "fence": None, "ttl_ms": None} if n == under_alpha else e
        for n, e in enumerate(sync)
    ]
    # The campaigns alone, checked by the lock's trace model (no record, no reads).
    sections = [e for e in sync if e["client"] != "observer"]

    cases: list[tuple[str, list[Event], dict[str, Any], int | None]] = [
        ("genuine sync: gave up, handed at the resignation, read", sync, {}, None),
        ("genuine asyncio: gave up, handed at the resignation, read", aio, {}, None),
        ("the campaigns alone, the lock's trace model", sections, {"election": False}, None),
        ("a read naming a candidate never granted", never, {}, under_beta),
        ("a read with the previous leader's fence", stale, {}, under_beta),
        ("a read naming the deposed leader", deposed, {}, under_beta),
        ("a read naming a leader after its resignation", ended, {}, after),
        ("a read of nobody while a leader leads", missed, {}, under_alpha),
    ]
    verdicts = _check_each([(trace, options) for _, trace, options, _ in cases])
    for (name, _, _, index), v in zip(cases, verdicts, strict=True):
        if index is None:
            assert v.accepted, f"{name}: {v.describe()}\n{v.output[-2000:]}"
        else:
            assert not v.accepted, f"{name}: accepted"
            assert (v.first_unexplained, v.by) == (index, "TLC"), f"{name}: {v.describe()}"


def test_an_election_trace_is_split_by_its_key_and_its_reads_pass_the_prepass(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Reads carry their election's key; the pre-pass checks their clocks only (their
    fences are the model's to judge)."""
    sync = _sync_run(redis_server, tmp_path / "sync.ndjson")
    (key,) = tracecheck.split_by_key(sync)
    assert key == "tre-sync:e"
    assert tracecheck.is_election(sync)
    assert tracecheck.prepass(sync) is None
    reads = _reads(sync)
    backwards = [*sync]
    backwards[reads[2]] = {**sync[reads[2]], "t": sync[reads[1]]["t"] - 1}
    problem = tracecheck.prepass(backwards)
    assert problem is not None and problem.index == reads[2]
    assert "time runs backwards" in problem.reason
