"""100,000 locks held and renewed by one process: the renewals' pipelines, their CPU, and
how late each renewal went out.

A child process takes ``--locks`` keys with ``hold`` (each renewed in the background) and,
once all are held, watches them for ``--seconds``:

- **pipelines**: renewals due in one tick of the renewal grid go out together, one
  pipeline per connection (per node on a Redis Cluster).  The child counts the pipelines
  its client made, and the renewals it was answered; Redis counts the scripts it ran
  (``commandstats``, summed over the nodes);
- **CPU**: the process's CPU time (all threads) per renewal Redis ran, in microseconds:
  the cost of keeping one held lock alive for one heartbeat;
- **lateness**: each renewal's send time against the instant it was due.  The core puts a
  renewal on a grid of ``heartbeat / 64`` (``distlock._core.lease.RENEW_STEPS``): due at
  ``ceil((previous send + heartbeat) / step) * step``.  A renewal may leave up to one
  step after that and still keep every bound the model checks; the row reports the worst
  lateness and how many renewals were later than one step.  The send time is read from
  each ``Renewed`` event (its reply time minus its round trip); the observer that reads it
  runs in the child, so its own cost is inside the CPU figure (an upper bound).

    python benchmarks/scale.py [--locks N] [--seconds S] [--heartbeat-ms MS] [--cluster]
                               [--strict] [--pin] [--json FILE]

With ``--strict`` the run fails (exit 1) when a renewal was later than one step, or when
Redis ran fewer renewals than the locks held.  Lateness is a figure of the machine as much
as of the client: measure on a quiet one (``--pin``).
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import redis
import redis.asyncio as aredis
from harness import arguments, build_label, conditions, redis_url, table, write_json

import distlock.asyncio
from distlock import Lock
from distlock._core.lease import RENEW_STEPS
from distlock.events import Acquired, Event, Renewed

TTL_MS = 120_000
#: A tenth of the TTL: 100,000 locks renew 10,000 times a second on average, which one
#: CPython process keeps up with on a small machine with room left for its work.
HEARTBEAT_MS = 12_000
DRIVERS = ("sync", "asyncio")


class Lateness:
    """Each renewal's send time against its due instant on the grid (see the docstring)."""

    def __init__(self, heartbeat_ms: float) -> None:
        self.heartbeat = heartbeat_ms
        self.step = heartbeat_ms / RENEW_STEPS
        self.last: dict[str, float] = {}
        self.renewals = 0
        self.worst_ms = 0.0
        self.late = 0
        self.watching = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, Acquired):
            self.last[event.key] = event.t
        elif isinstance(event, Renewed):
            sent = event.t - event.rtt_ms
            due = math.ceil((self.last[event.key] + self.heartbeat) / self.step) * self.step
            self.last[event.key] = sent
            if self.watching:
                self.renewals += 1
                late = sent - due
                self.worst_ms = max(self.worst_ms, late)
                self.late += late > self.step


class Pipelines:
    """Counts the pipelines the driver asks its client for (each renewal batch is one, per
    connection or per node), in the window only: Redis itself cannot count them (a big
    pipeline arrives in several reads)."""

    def __init__(self) -> None:
        self.made = 0
        self.watching = False

    def client(self, base: type[Any], url: str) -> Any:
        counter = self

        class Counting(base):  # type: ignore[misc]
            def pipeline(self, *args: Any, **kwargs: Any) -> Any:
                counter.made += counter.watching
                return super().pipeline(*args, **kwargs)

        return Counting.from_url(url)


def _counts(nodes: list[redis.Redis]) -> tuple[int, int]:
    """(scripts Redis ran, reads it served), summed over ``nodes``, counted by the servers."""
    evals = reads = 0
    for node in nodes:
        stats: Any = node.info("commandstats")
        evals += sum(
            int(v["calls"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval")
        )
        reads += int(node.info("stats")["total_reads_processed"])
    return evals, reads


class Window:
    """What the servers and this process count between :meth:`start` and :meth:`finish`."""

    def __init__(self, nodes: list[redis.Redis], watch: Lateness, pipes: Pipelines) -> None:
        self.nodes, self.watch, self.pipes = nodes, watch, pipes

    def start(self) -> None:
        self.watch.watching = self.pipes.watching = True
        self.evals, self.reads = _counts(self.nodes)
        self.cpu, self.wall = time.process_time(), time.monotonic()

    def finish(self) -> dict[str, Any]:
        cpu, wall = time.process_time() - self.cpu, time.monotonic() - self.wall
        evals, reads = _counts(self.nodes)
        watch = self.watch
        watch.watching = self.pipes.watching = False
        return {
            "pipelines": self.pipes.made,
            "seconds": wall,
            "cpu_seconds": cpu,
            "renewals": evals - self.evals,
            "reads": reads - self.reads,
            "observed_renewals": watch.renewals,
            "worst_late_ms": watch.worst_ms,
            "late_beyond_step": watch.late,
            "step_ms": watch.step,
        }


def sync_child(
    urls: list[str], cluster: bool, n: int, heartbeat: int, seconds: float
) -> dict[str, Any]:
    nodes = [redis.Redis.from_url(u) for u in urls]
    pipes = Pipelines()
    client = pipes.client(redis.RedisCluster if cluster else redis.Redis, urls[0])
    watch = Lateness(heartbeat)
    with ExitStack() as stack:
        locks = stack.enter_context(
            Lock(client, prefix="scale", ttl_ms=TTL_MS, heartbeat_ms=heartbeat, observers=[watch])
        )
        holds = [locks.hold(f"k{i}") for i in range(n)]
        for held in holds:
            held.__enter__()
        window = Window(nodes, watch, pipes)
        window.start()
        try:
            time.sleep(seconds)
            return window.finish()
        finally:
            for held in reversed(holds):
                held.__exit__(None, None, None)


async def async_child(url: str, n: int, heartbeat: int, seconds: float) -> dict[str, Any]:
    nodes = [redis.Redis.from_url(url)]
    pipes = Pipelines()
    client = pipes.client(aredis.Redis, url)
    watch = Lateness(heartbeat)
    async with distlock.asyncio.Lock(
        client, prefix="scale", ttl_ms=TTL_MS, heartbeat_ms=heartbeat, observers=[watch]
    ) as locks:
        holds = [locks.hold(f"k{i}") for i in range(n)]
        for held in holds:
            await held.__aenter__()
        # The counters are read with a blocking client: a few ms of the loop, twice.
        window = Window(nodes, watch, pipes)
        window.start()
        try:
            await asyncio.sleep(seconds)
            return window.finish()
        finally:
            for held in reversed(holds):
                await held.__aexit__(None, None, None)
            await client.aclose()


def derive(row: dict[str, Any]) -> None:
    """The row's figures per renewal and per pipeline."""
    row["cpu_us_per_lock_per_tick"] = row["cpu_seconds"] / max(1, row["renewals"]) * 1e6
    row["renewals_per_pipeline"] = row["observed_renewals"] / max(1, row["pipelines"])


def _child(argv: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *argv], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


@contextmanager
def _cluster() -> Iterator[list[str]]:
    from distlock.tools.servers.topologies import Cluster

    with Cluster() as cluster:
        yield [f"redis://{n.host}:{n.port}" for n in cluster.primaries()]


def main() -> dict[str, Any]:
    parser = arguments((__doc__ or "").split("\n\n")[0], rounds=1)
    parser.add_argument("--locks", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=HEARTBEAT_MS * 2.5 / 1000)
    parser.add_argument("--heartbeat-ms", type=int, default=HEARTBEAT_MS)
    parser.add_argument("--cluster", action="store_true", help="also on a 3-primary Cluster")
    parser.add_argument("--strict", action="store_true", help="exit 1 on a late renewal")
    parser.add_argument("--child", nargs="+", help=argparse_hidden())
    args = parser.parse_args()
    if args.child:
        driver, cluster, *urls = args.child
        if driver == "asyncio":
            out = asyncio.run(async_child(urls[0], args.locks, args.heartbeat_ms, args.seconds))
        else:
            out = sync_child(
                urls, cluster == "cluster", args.locks, args.heartbeat_ms, args.seconds
            )
        print(json.dumps(out))
        return {}
    if args.quick:
        args.locks, args.heartbeat_ms, args.seconds = 5_000, 1_000, 2.5
    common = ["--locks", str(args.locks), "--heartbeat-ms", str(args.heartbeat_ms),
              "--seconds", str(args.seconds)]
    rows: dict[str, dict[str, Any]] = {}
    with redis_url(args) as url:
        for driver in DRIVERS:
            rows[f"Redis, {driver}"] = _child([*common, "--child", driver, "single", url])
            redis.Redis.from_url(url).flushall()
    if args.cluster:
        with _cluster() as urls:
            rows["Cluster (3 primaries), sync"] = _child(
                [*common, "--child", "sync", "cluster", *urls]
            )
    for row in rows.values():
        derive(row)
    print(f"\n{build_label()}")
    print(f"\n{args.locks:,} held locks, heartbeat {args.heartbeat_ms} ms "
          f"(grid step {args.heartbeat_ms / RENEW_STEPS:.0f} ms), {args.seconds:.0f} s window")
    print(table(
        ["where", "renewals Redis ran", "renewals per pipeline", "CPU µs per held lock per tick",
         "worst lateness ms", "later than a step"],
        [[name, r["renewals"], f"{r['renewals_per_pipeline']:.0f}",
          f"{r['cpu_us_per_lock_per_tick']:.1f}", f"{r['worst_late_ms']:.1f}",
          r["late_beyond_step"]] for name, r in rows.items()],
    ))
    result = {"benchmark": "scale", "conditions": conditions(args), "rows": rows}
    write_json(args.json, result)
    failed = [
        name for name, r in rows.items()
        if r["late_beyond_step"] or r["renewals"] < args.locks
    ]
    if failed and args.strict:
        print(f"\nFAILED: {', '.join(failed)}: a renewal later than one grid step, or "
              "fewer renewals than locks in the window")
        raise SystemExit(1)
    return result


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
