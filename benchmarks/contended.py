"""Waiting for a held lock: 8 threads, then 8 asyncio tasks, on one key, measured in one run.

Every worker loops: ask for the key (waiting up to ``--wait-ms``), hold it 1 ms, release.
The contenders, run in the same rounds on the same redis-server:

- ``floor+signal``: what a careful user writes by hand.  ``SET NX PX`` to acquire; the
  release is one script that deletes the key (token-checked) and pushes a wake-up to a list
  the waiters ``BLPOP`` (at most one pending element, so a release nobody waited for
  cannot pile wake-ups up).  A refused worker blocks on the list no longer than the key's
  TTL, so a holder that died still frees it.
- ``distlock wait``: ``with Lock.hold(key, wait_ms=...)``, handed the key by the holder's
  release (a manual ``acquire(key, wait_ms=...)`` handle, never renewed, is woken instead
  and sends one more attempt).
- ``distlock retries``: ``Lock.acquire(key, retries=..., retry_delay_ms=...)``, the bounded
  spin that was the only way to wait before ``wait_ms``.
- ``redis-py Lock``: ``redis.lock.Lock`` at its defaults, which polls every 100 ms.

What the table reports, per contender and driver, over the timed rounds:

- handoff p50: from the instant a holder's body ended (its release begins) to the instant
  the next holder's body began, counted only where that next holder was already waiting;
  the time the key sits idle between two owners.
- wait p50/p99: from asking to holding, every acquisition.
- fairness: most / fewest acquisitions per worker (``inf`` when a worker starved).
- round trips per contended acquisition: commands a worker sent during one acquisition
  that was not granted at once (counted on its connections, so that a command sent on a
  connection of the lock's own counts too), mean and max.  The first round of each run
  is a counting round under ``MONITOR`` (not timed): the server's count of top-level
  commands (not those scripts run inside) per acquire-and-release cycle checks the
  clients' count.

Ratios are to floor+signal of the same driver.  Rounds alternate the contenders' order
so drift on a shared machine hits them alike.

    python benchmarks/contended.py [--seconds S] [--rounds R] [--json FILE] [--url redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import itertools
import json
import math
import secrets
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import redis
import redis.asyncio as aredis
from redis.asyncio.lock import Lock as AsyncRedisPyLock
from redis.lock import Lock as RedisPyLock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distlock import Lock, LockNotAcquiredError
from distlock.asyncio import Lock as AsyncLock

KEY = "contended"
WORKERS = 8
HOLD_S = 0.001
#: Other work a worker does between releasing and asking again.  A worker that asks again
#: at once is a barging fresh caller: it takes the key back (one round trip) before the
#: waiter its own release woke can (a wake-up and a round trip), in every contender that lets
#: a fresh caller take a free key; that measures the race, not the waiting (``--think-ms 0``
#: shows it).
THINK_S = 0.001
#: Long against the 1 ms hold: nothing expires during a run.
TTL_MS = 10_000
#: How long a worker may wait: long enough that nobody gives up (a starved redis-py worker
#: still gets the key once the others stop).
WAIT_MS = 10_000
#: The spinning distlock caller: attempts 10 ms apart (the default delay), enough of them
#: to outlast WAIT_MS.
SPIN_DELAY_MS = 10
SPIN_RETRIES = WAIT_MS // SPIN_DELAY_MS

#: floor+signal's release: token-checked delete, then one pending wake-up on the list.
SIGNAL_RELEASE = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[2])
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
return 0
"""

#: Commands a client sends to set up a connection or that the benchmark itself sends.
NOT_ROUND_TRIPS = frozenset(
    {"CLIENT", "HELLO", "INFO", "PING", "SELECT", "SCRIPT", "ECHO", "MONITOR", "FLUSHALL"}
)


# -- counting round trips on the client ---------------------------------------------------

#: The worker the current thread or task is (one counter per worker).
_worker: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "bench_worker", default=None
)


#: What a connection sends when it is set up (not a round trip of the lock's).
SETUP_COMMANDS = frozenset({"CLIENT", "HELLO", "AUTH", "SELECT"})


def _count(args: tuple[Any, ...]) -> None:
    counter = _worker.get()
    name = args[0] if args else b""
    name = name.decode() if isinstance(name, bytes) else str(name)
    if counter is not None and name.upper() not in SETUP_COMMANDS:
        counter[0] += 1


class CountingConnection(redis.Connection):
    """redis-py's connection, counting each command against the worker that sent it.

    Counted on the connection, not the client: a lock may send on a connection of its own
    (distlock blocks in BLPOP on one it can drop if the wait is interrupted)."""

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        _count(args)
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)


class CountingAsyncConnection(aredis.Connection):
    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        _count(args)
        send: Callable[..., Awaitable[None]] = super().send_command
        await send(*args, **kwargs)


def counting_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, connection_class=CountingConnection)


def counting_async_client(url: str) -> aredis.Redis:
    return aredis.Redis.from_url(url, connection_class=CountingAsyncConnection)


# -- what is measured ---------------------------------------------------------------------


@dataclass
class Acquisition:
    worker: int
    asked: float
    got: float
    #: When the body ended and the release began.
    released: float
    #: Commands the worker's client sent while acquiring.
    round_trips: int


@dataclass
class Stats:
    contender: str
    driver: str
    acquisitions: int
    handoff_p50_ms: float
    wait_p50_ms: float
    wait_p99_ms: float
    fairness: float
    per_worker: list[int]
    contended: int
    round_trips_mean: float
    round_trips_max: int
    #: The server's top-level commands per acquire-and-release cycle (the counting round).
    server_commands_per_cycle: float | None = None
    ratios: dict[str, float] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (no interpolation: a p99 is a wait that happened)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def overlapping(acquisitions: Sequence[Acquisition]) -> list[tuple[Acquisition, Acquisition]]:
    """Pairs of sections that held the key at once: none, or the contender is no lock."""
    ordered = sorted(acquisitions, key=lambda a: a.got)
    return [(a, b) for a, b in itertools.pairwise(ordered) if b.got < a.released]


def handoffs(acquisitions: Sequence[Acquisition]) -> list[float]:
    """Idle time of the key between an owner and a next owner that was already waiting."""
    ordered = sorted(acquisitions, key=lambda a: a.got)
    return [b.got - a.released for a, b in itertools.pairwise(ordered) if b.asked < a.released]


def summarise(
    contender: str, driver: str, rounds: Sequence[Sequence[Acquisition]], workers: int
) -> Stats:
    every = [a for r in rounds for a in r]
    per_worker = Counter(a.worker for a in every)
    counts = [per_worker.get(w, 0) for w in range(workers)]
    contended = [a.round_trips for a in every if a.round_trips > 1]
    return Stats(
        contender=contender,
        driver=driver,
        acquisitions=len(every),
        handoff_p50_ms=percentile([h for r in rounds for h in handoffs(r)], 50) * 1000,
        wait_p50_ms=percentile([a.got - a.asked for a in every], 50) * 1000,
        wait_p99_ms=percentile([a.got - a.asked for a in every], 99) * 1000,
        fairness=max(counts) / min(counts) if min(counts) else math.inf,
        per_worker=counts,
        contended=len(contended),
        round_trips_mean=statistics.fmean(contended) if contended else math.nan,
        round_trips_max=max(contended, default=0),
    )


# -- the contenders -----------------------------------------------------------------------


class SyncContender(Protocol):
    name: str

    def acquire(self) -> Callable[[], object] | None:
        """Wait for the key; return its release, or None when the wait ran out."""

    def close(self) -> None: ...


class AsyncContender(Protocol):
    name: str

    async def acquire(self) -> Callable[[], Awaitable[object]] | None: ...

    async def aclose(self) -> None: ...


def _signal_key(key: str) -> str:
    # Same Cluster slot as the key it signals for.
    return f"{{{key}}}:signal"


class FloorSignal:
    name = "floor+signal"

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.client = client
        self.keys = (key, _signal_key(key))
        self.release_script = client.register_script(SIGNAL_RELEASE)

    def acquire(self) -> Callable[[], object] | None:
        token = secrets.token_hex(16)
        deadline = time.monotonic() + WAIT_MS / 1000
        while not self.client.set(self.keys[0], token, nx=True, px=TTL_MS):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            # Never 0: BLPOP's 0 is "forever".
            self.client.blpop([self.keys[1]], timeout=max(0.001, min(left, TTL_MS / 1000)))
        return lambda: self.release_script(keys=self.keys, args=[token, TTL_MS])

    def close(self) -> None:
        pass


class AsyncFloorSignal:
    name = "floor+signal"

    def __init__(self, client: aredis.Redis, key: str) -> None:
        self.client = client
        self.keys = (key, _signal_key(key))
        self.release_script = client.register_script(SIGNAL_RELEASE)

    async def acquire(self) -> Callable[[], Awaitable[object]] | None:
        token = secrets.token_hex(16)
        deadline = time.monotonic() + WAIT_MS / 1000
        while not await self.client.set(self.keys[0], token, nx=True, px=TTL_MS):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            await self.client.blpop([self.keys[1]], timeout=max(0.001, min(left, TTL_MS / 1000)))
        return lambda: self.release_script(keys=self.keys, args=[token, TTL_MS])

    async def aclose(self) -> None:
        pass


class DistlockWait:
    name = "distlock wait"

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.locks = Lock(client, prefix="bench-wait", ttl_ms=TTL_MS)
        self.key = key

    def acquire(self) -> Callable[[], object] | None:
        hold = self.locks.hold(self.key, wait_ms=WAIT_MS)
        try:
            hold.__enter__()
        except LockNotAcquiredError:
            return None
        return lambda: hold.__exit__(None, None, None)

    def close(self) -> None:
        self.locks.close()


class AsyncDistlockWait:
    name = "distlock wait"

    def __init__(self, client: aredis.Redis, key: str) -> None:
        self.locks = AsyncLock(client, prefix="bench-wait", ttl_ms=TTL_MS)
        self.key = key

    async def acquire(self) -> Callable[[], Awaitable[object]] | None:
        hold = self.locks.hold(self.key, wait_ms=WAIT_MS)
        try:
            await hold.__aenter__()
        except LockNotAcquiredError:
            return None
        return lambda: hold.__aexit__(None, None, None)

    async def aclose(self) -> None:
        await self.locks.aclose()


class DistlockRetries:
    name = "distlock retries"

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.locks = Lock(client, prefix="bench-spin", ttl_ms=TTL_MS)
        self.key = key

    def acquire(self) -> Callable[[], object] | None:
        handle = self.locks.acquire(self.key, retries=SPIN_RETRIES, retry_delay_ms=SPIN_DELAY_MS)
        return None if handle is None else handle.release

    def close(self) -> None:
        self.locks.close()


class AsyncDistlockRetries:
    name = "distlock retries"

    def __init__(self, client: aredis.Redis, key: str) -> None:
        self.locks = AsyncLock(client, prefix="bench-spin", ttl_ms=TTL_MS)
        self.key = key

    async def acquire(self) -> Callable[[], Awaitable[object]] | None:
        handle = await self.locks.acquire(
            self.key, retries=SPIN_RETRIES, retry_delay_ms=SPIN_DELAY_MS
        )
        return None if handle is None else handle.release

    async def aclose(self) -> None:
        await self.locks.aclose()


class RedisPy:
    name = "redis-py Lock"

    def __init__(self, client: redis.Redis, key: str) -> None:
        self.client = client
        self.key = f"redispy:{key}"

    def acquire(self) -> Callable[[], object] | None:
        # One Lock object per acquisition: it keeps its token in a thread-local anyway.
        lock = RedisPyLock(
            self.client, self.key, timeout=TTL_MS / 1000, blocking_timeout=WAIT_MS / 1000
        )
        return lock.release if lock.acquire() else None

    def close(self) -> None:
        pass


class AsyncRedisPy:
    name = "redis-py Lock"

    def __init__(self, client: aredis.Redis, key: str) -> None:
        self.client = client
        self.key = f"redispy:{key}"

    async def acquire(self) -> Callable[[], Awaitable[object]] | None:
        lock = AsyncRedisPyLock(
            self.client, self.key, timeout=TTL_MS / 1000, blocking_timeout=WAIT_MS / 1000
        )
        return lock.release if await lock.acquire() else None

    async def aclose(self) -> None:
        pass


SYNC_CONTENDERS: dict[str, Callable[[redis.Redis, str], SyncContender]] = {
    "floor+signal": FloorSignal,
    "distlock wait": DistlockWait,
    "distlock retries": DistlockRetries,
    "redis-py Lock": RedisPy,
}
ASYNC_CONTENDERS: dict[str, Callable[[aredis.Redis, str], AsyncContender]] = {
    "floor+signal": AsyncFloorSignal,
    "distlock wait": AsyncDistlockWait,
    "distlock retries": AsyncDistlockRetries,
    "redis-py Lock": AsyncRedisPy,
}
FLOOR = "floor+signal"


# -- running one contender ----------------------------------------------------------------


def sync_round(
    contender: SyncContender,
    seconds: float,
    workers: int,
    hold_s: float = HOLD_S,
    think_s: float = THINK_S,
) -> list[Acquisition]:
    """``workers`` threads loop acquire / hold / release until ``seconds`` are up."""
    done: list[Acquisition] = []
    errors: list[BaseException] = []
    start = threading.Barrier(workers)
    stop_at = [math.inf]

    def worker(index: int) -> None:
        counter = [0]
        _worker.set(counter)
        start.wait()
        if index == 0:
            stop_at[0] = time.monotonic() + seconds
        try:
            while time.monotonic() < stop_at[0]:
                before = counter[0]
                asked = time.monotonic()
                release = contender.acquire()
                got = time.monotonic()
                if release is None:
                    raise RuntimeError(f"{contender.name}: no lock after {WAIT_MS} ms")
                trips = counter[0] - before
                time.sleep(hold_s)
                released = time.monotonic()
                release()
                done.append(Acquisition(index, asked, got, released, trips))
                time.sleep(think_s)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"bench-{i}") for i in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return done


async def async_round(
    contender: AsyncContender,
    seconds: float,
    workers: int,
    hold_s: float = HOLD_S,
    think_s: float = THINK_S,
) -> list[Acquisition]:
    """``workers`` tasks of one event loop loop acquire / hold / release."""
    done: list[Acquisition] = []
    stop_at = time.monotonic() + seconds

    async def worker(index: int) -> None:
        counter = [0]
        _worker.set(counter)  # each task runs in a copy of the context
        while time.monotonic() < stop_at:
            before = counter[0]
            asked = time.monotonic()
            release = await contender.acquire()
            got = time.monotonic()
            if release is None:
                raise RuntimeError(f"{contender.name}: no lock after {WAIT_MS} ms")
            trips = counter[0] - before
            await asyncio.sleep(hold_s)
            released = time.monotonic()
            await release()
            done.append(Acquisition(index, asked, got, released, trips))
            await asyncio.sleep(think_s)

    await asyncio.gather(*(worker(i) for i in range(workers)))
    return done


@contextmanager
def monitored(url: str) -> Iterator[Counter[str]]:
    """Count the top-level commands Redis runs meanwhile (``MONITOR``; not the ones a script
    runs inside, and not connection setup)."""
    seen: Counter[str] = Counter()
    client = redis.Redis.from_url(url)
    end = f"bench-monitor-end-{secrets.token_hex(4)}"
    ready = threading.Event()

    def watch() -> None:
        monitor: Callable[[], Any] = client.monitor
        with monitor() as m:
            ready.set()
            for info in m.listen():
                command = str(info.get("command", ""))
                if command == f"ECHO {end}":
                    return
                if info.get("client_type") == "lua":
                    continue
                name = command.split(" ", 1)[0].upper()
                if name not in NOT_ROUND_TRIPS:
                    seen[name] += 1

    watcher = threading.Thread(target=watch, name="bench-monitor", daemon=True)
    watcher.start()
    # Set once MONITOR has answered OK (the monitor's __enter__ reads that reply).
    if not ready.wait(10):
        raise RuntimeError("MONITOR did not start")
    try:
        yield seen
    finally:
        client.echo(end)
        watcher.join(10)
        client.close()


# -- the runs -----------------------------------------------------------------------------


def run_sync(
    url: str,
    names: Sequence[str],
    seconds: float,
    rounds: int,
    workers: int,
    think_s: float = THINK_S,
) -> list[Stats]:
    client = counting_client(url)
    made = {name: SYNC_CONTENDERS[name](client, KEY) for name in names}
    timed: dict[str, list[list[Acquisition]]] = {name: [] for name in names}
    server: dict[str, float] = {}
    try:
        for name, contender in made.items():
            with monitored(url) as seen:
                counted = sync_round(contender, min(seconds, 1.0), workers, think_s=think_s)
            server[name] = sum(seen.values()) / max(1, len(counted))
            _check(name, counted)
        for i in range(rounds):
            order = list(made.items()) if i % 2 == 0 else list(made.items())[::-1]
            for name, contender in order:
                acquisitions = sync_round(contender, seconds, workers, think_s=think_s)
                _check(name, acquisitions)
                timed[name].append(acquisitions)
    finally:
        for contender in made.values():
            contender.close()
        client.close()
    return [_stats(name, "threads", timed[name], workers, server[name]) for name in names]


async def run_async(
    url: str,
    names: Sequence[str],
    seconds: float,
    rounds: int,
    workers: int,
    think_s: float = THINK_S,
) -> list[Stats]:
    client = counting_async_client(url)
    made = {name: ASYNC_CONTENDERS[name](client, KEY) for name in names}
    timed: dict[str, list[list[Acquisition]]] = {name: [] for name in names}
    server: dict[str, float] = {}
    try:
        for name, contender in made.items():
            with monitored(url) as seen:
                counted = await async_round(contender, min(seconds, 1.0), workers, think_s=think_s)
            server[name] = sum(seen.values()) / max(1, len(counted))
            _check(name, counted)
        for i in range(rounds):
            order = list(made.items()) if i % 2 == 0 else list(made.items())[::-1]
            for name, contender in order:
                acquisitions = await async_round(contender, seconds, workers, think_s=think_s)
                _check(name, acquisitions)
                timed[name].append(acquisitions)
    finally:
        for contender in made.values():
            await contender.aclose()
        await client.aclose()
    return [_stats(name, "asyncio", timed[name], workers, server[name]) for name in names]


def _check(name: str, acquisitions: Sequence[Acquisition]) -> None:
    clash = overlapping(acquisitions)
    if clash:
        raise AssertionError(f"{name}: two workers held the key at once: {clash[0]}")


def _stats(
    name: str, driver: str, rounds: list[list[Acquisition]], workers: int, server: float
) -> Stats:
    stats = summarise(name, driver, rounds, workers)
    stats.server_commands_per_cycle = server
    return stats


def add_ratios(rows: Sequence[Stats]) -> None:
    """Each row's handoff p50 and wait p99 as multiples of floor+signal's (same driver)."""
    floors = {r.driver: r for r in rows if r.contender == FLOOR}
    for row in rows:
        floor = floors.get(row.driver)
        if floor is None:
            continue
        row.ratios = {
            "handoff_p50": row.handoff_p50_ms / floor.handoff_p50_ms,
            "wait_p99": row.wait_p99_ms / floor.wait_p99_ms,
        }


#: The targets distlock's waiting is held to (benchmarks/README.md, "Waiting, measured").
TARGETS = {"handoff_p50": 1.1, "fairness": 1.2, "wait_p99": 1.2, "round_trips_max": 4}


def verdicts(row: Stats) -> dict[str, bool]:
    return {
        "handoff_p50": row.ratios.get("handoff_p50", math.inf) <= TARGETS["handoff_p50"],
        "fairness": row.fairness <= TARGETS["fairness"],
        "wait_p99": row.ratios.get("wait_p99", math.inf) <= TARGETS["wait_p99"],
        "round_trips_max": row.round_trips_max <= TARGETS["round_trips_max"],
    }


def table(rows: Sequence[Stats]) -> list[str]:
    headers = (
        "driver",
        "contender",
        "acq",
        "handoff p50 ms",
        "x floor",
        "wait p50 ms",
        "wait p99 ms",
        "x floor",
        "fairness",
        "rt/contended (max)",
        "server cmds/cycle",
    )

    def ratio(row: Stats, what: str) -> str:
        value = row.ratios.get(what)
        return "-" if value is None else f"{value:.2f}"

    cells = [
        (
            r.driver,
            r.contender,
            str(r.acquisitions),
            f"{r.handoff_p50_ms:.3f}",
            ratio(r, "handoff_p50"),
            f"{r.wait_p50_ms:.2f}",
            f"{r.wait_p99_ms:.2f}",
            ratio(r, "wait_p99"),
            f"{r.fairness:.2f}",
            f"{r.round_trips_mean:.2f} ({r.round_trips_max})",
            "-" if r.server_commands_per_cycle is None else f"{r.server_commands_per_cycle:.2f}",
        )
        for r in rows
    ]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        head = [v.ljust(w) for v, w in zip(values[:2], widths[:2], strict=True)]
        rest = [v.rjust(w) for v, w in zip(values[2:], widths[2:], strict=True)]
        return "  ".join(head + rest)

    out = [line(headers), "  ".join("-" * w for w in widths), *(line(c) for c in cells)]
    for r in rows:
        if r.contender == "distlock wait":
            marks = ", ".join(f"{k} {'ok' if v else 'MISSED'}" for k, v in verdicts(r).items())
            out.append(f"targets ({r.driver}): {marks}")
    return out


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """JSON has no infinity or NaN: a starved worker's fairness is written as null."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


def main(argv: Sequence[str] | None = None) -> list[Stats]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", help="a Redis to use (default: start a private redis-server)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one timed round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument(
        "--contenders", nargs="+", default=list(SYNC_CONTENDERS), choices=list(SYNC_CONTENDERS)
    )
    parser.add_argument(
        "--think-ms", type=float, default=THINK_S * 1000, help="work between release and next ask"
    )
    parser.add_argument("--drivers", nargs="+", default=["threads", "asyncio"])
    parser.add_argument("--json", type=Path, default=Path("contended-report.json"))
    args = parser.parse_args(argv)
    names = [FLOOR, *(n for n in args.contenders if n != FLOOR)]
    think = args.think_ms / 1000
    with ExitStack() as stack:
        url = args.url
        if url is None:
            from tests.redis_server import RedisServer

            url = stack.enter_context(RedisServer()).url
        rows: list[Stats] = []
        if "threads" in args.drivers:
            rows += run_sync(url, names, args.seconds, args.rounds, args.workers, think)
        if "asyncio" in args.drivers:
            rows += asyncio.run(
                run_async(url, names, args.seconds, args.rounds, args.workers, think)
            )
    add_ratios(rows)
    print(
        f"{args.workers} workers on one key, {HOLD_S * 1000:g} ms hold, {args.think_ms:g} ms "
        "between release and the next ask, "
        f"{args.rounds} rounds of {args.seconds:g} s"
    )
    for line in table(rows):
        print(line)
    args.json.write_text(json.dumps([_finite(asdict(r)) for r in rows], indent=2) + "\n")
    print(f"(written to {args.json})")
    return rows


if __name__ == "__main__":
    main()
