"""Instructions per lock cycle, counted by valgrind: a ruler that load cannot bend.

On a shared machine a loopback round trip moves by more than the gap between distlock and
the hand-written floor, so wall-clock ratios (``cycles.py``) need many rounds and still
wander.  This counts the instructions the client executes per cycle instead, against
connections whose replies cost nothing (no server, no socket: the connection classes
below answer at once), so the count is the same from run to run.  Each figure is the
difference between a run of ``--cycles`` cycles and one of a fifth of that, over the
difference in cycles: start-up and warm-up cancel out.

Contenders (``sync`` and ``asyncio`` have one floor each):

- floor: ``SET key token NX PX ttl`` and the compare-and-delete ``EVALSHA``, through
  redis-py, with a token from ``secrets.token_hex``: what every ratio is taken against;
- floor, distlock's scripts: distlock's acquire and release scripts sent the same way
  (``cycles.SCRIPTS_BY_HAND``): what redis-py's own path costs for the commands distlock
  sends;
- distlock ``acquire()`` + ``release()`` (sync), and ``run()`` (sync and asyncio, the
  heartbeat and the deadline watch armed for an empty body);
- ``... logic only``: the same distlock cycle with the driver's round trip replaced by
  an immediate reply, so what remains is distlock's own Python (the core, the flows, the
  driver's loop, the section's making): the part a faster structure must shrink.

The cycles are ``cycles.py``'s own (``sync_contenders``, ``async_contenders``).  Needs
``valgrind`` (Debian: ``apt-get install valgrind``); about two minutes.

With ``--redis`` the same cycles (not the logic-only ones, which send nothing) are counted
again against a private ``redis-server``: the client's whole part of a real cycle, with
redis-py's socket path and reply parsing, which the instant connections leave out.  Only
the client's user-space instructions are counted, not the kernel's or the server's; the
count moves by about 1% between runs (the replies arrive in pieces that vary).

With ``--cache`` valgrind also simulates the first-level caches (of this machine's sizes)
and the tables add the misses per cycle, instruction (I1) and data (D1): how much code and
memory a cycle touches, which on a core that sleeps between round trips is what a cycle
pays for, more than for its instructions.  About three times as long.

    python benchmarks/instructions.py [--cycles N] [--redis] [--cache] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aredis
from cycles import SCRIPTS_BY_HAND, TTL_MS, async_contenders, load_scripts, sync_contenders
from harness import FLOOR, table, write_json
from redis.asyncio.connection import Connection as AsyncConnection
from redis.asyncio.connection import ConnectionPool as AsyncPool
from redis.connection import Connection, ConnectionPool

from distlock import Lock
from distlock._core.commands import Command, Op
from distlock._protocol import ACQUIRE
from distlock.asyncio import Lock as AsyncLock


class _Replies:
    """The reply a real Redis would give to each command a cycle sends."""

    fence = 0

    @classmethod
    def next_fence(cls) -> int:
        cls.fence += 1
        return cls.fence

    @classmethod
    def to(cls, args: tuple[Any, ...]) -> object:
        if args[0] == "SET":
            return b"OK"
        if args[0] == "EVALSHA" and args[1] == ACQUIRE.sha:
            return cls.next_fence()
        return 1


class InstantConnection(Connection):
    """A connection that sends nothing and answers at once."""

    _last: tuple[Any, ...] = ()

    def connect(self, *args: Any, **kwargs: Any) -> None:
        pass

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        pass

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self._last = args

    def can_read(self, timeout: float | None = 0) -> bool:
        return False

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        return _Replies.to(self._last)

    def should_reconnect(self) -> bool:
        return False


class AsyncInstantConnection(AsyncConnection):
    """The asyncio twin, which still yields to the loop once per reply, as a read does."""

    _last: tuple[Any, ...] = ()

    async def connect(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def disconnect(self, *args: Any, **kwargs: Any) -> None:
        pass

    def is_connected(self) -> bool:
        return True

    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        self._last = args

    async def can_read(self) -> bool:
        return False

    async def can_read_destructive(self) -> bool:
        return False

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return _Replies.to(self._last)

    def should_reconnect(self) -> bool:
        return False


def _instant(command: Command) -> int:
    return _Replies.next_fence() if command.op is Op.ACQUIRE else 1


async def _instant_async(command: Command) -> int:
    return _instant(command)


def sync_cycles(name: str, url: str | None = None) -> Callable[[int], object]:
    """``name``'s cycles as ``cycles.py`` times them, over instant connections (or to the
    Redis at ``url``)."""
    if url is None:
        r = redis.Redis(connection_pool=ConnectionPool(connection_class=InstantConnection))
    else:
        r = redis.Redis.from_url(url)
    locks = Lock(r, prefix="bench", ttl_ms=TTL_MS)
    if name.endswith("logic only"):
        locks._call = _instant  # type: ignore[method-assign]
    plain, armed = sync_contenders(r, locks)
    if name in (FLOOR, SCRIPTS_BY_HAND):
        return plain[name]
    return plain["distlock"] if name.startswith("acquire") else armed["distlock"]


def async_cycle(name: str, url: str | None = None) -> Callable[[str], Awaitable[None]]:
    """``name``'s cycle as ``cycles.py`` runs it, over instant connections (or to the Redis
    at ``url``)."""
    if url is None:
        r = aredis.Redis(connection_pool=AsyncPool(connection_class=AsyncInstantConnection))
    else:
        r = aredis.Redis.from_url(url)
    locks = AsyncLock(r, prefix="bench", ttl_ms=TTL_MS)
    if name.endswith("logic only"):
        locks._call = _instant_async  # type: ignore[method-assign]
    return async_contenders(r, locks)[name if name in (FLOOR, SCRIPTS_BY_HAND) else "distlock"]


SYNC = (
    FLOOR,
    SCRIPTS_BY_HAND,
    "acquire + release",
    "acquire + release, logic only",
    "run()",
    "run(), logic only",
)
ASYNC = (FLOOR, SCRIPTS_BY_HAND, "run()", "run(), logic only")
#: What valgrind reports, by the name it prints: instructions, and with ``--cache`` the
#: first-level caches' misses.
COUNTERS = {"instructions": "I   refs", "I1 misses": "I1  misses", "D1 misses": "D1  misses"}


def _child(driver: str, name: str, cycles: int, url: str | None = None) -> None:
    """Run ``cycles`` cycles of one contender (under valgrind, from :func:`count`)."""
    if driver == "sync":
        sync_cycles(name, url)(cycles)
        return
    cycle = async_cycle(name, url)

    async def loop() -> None:
        for _ in range(cycles):
            await cycle("bench:cycle")

    asyncio.run(loop())


def _counters(
    driver: str, name: str, cycles: int, url: str | None, cache: bool
) -> dict[str, int]:
    """What valgrind counts over a whole run of ``cycles`` cycles (start-up included)."""
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", f"--cache-sim={'yes' if cache else 'no'}",
         "--cachegrind-out-file=/dev/null",
         sys.executable, __file__, "--child", driver, name, str(cycles), *([url] if url else [])],
        capture_output=True, text=True, check=True,
    )
    found = {}
    for counter, label in COUNTERS.items():
        if counter != "instructions" and not cache:
            continue
        match = re.search(label + r":\s+([\d,]+)", done.stderr)
        if match is None:
            raise SystemExit(f"no {counter} from valgrind:\n{done.stderr}")
        found[counter] = int(match.group(1).replace(",", ""))
    return found


def count(
    driver: str, name: str, cycles: int, url: str | None = None, *, cache: bool = False
) -> dict[str, int]:
    """Each counter per cycle: the difference of two runs over the difference in cycles."""
    few = cycles // 5
    many = _counters(driver, name, cycles, url, cache)
    some = _counters(driver, name, few, url, cache)
    return {k: round((many[k] - some[k]) / (cycles - few)) for k in many}


def _measure(
    cycles: int, url: str | None, cache: bool
) -> tuple[dict[str, dict[str, dict[str, int]]], list[list[str]]]:
    results: dict[str, dict[str, dict[str, int]]] = {}
    rows = []
    for driver, names in (("sync", SYNC), ("asyncio", ASYNC)):
        # Against a real server the logic-only cycles would count the same: they send nothing.
        counts = {
            name: count(driver, name, cycles, url, cache=cache)
            for name in names
            if url is None or not name.endswith("logic only")
        }
        results[driver] = counts
        floor = counts[FLOOR]
        rows += [
            [driver, name]
            + [f"{n[k]:,} ({n[k] / floor[k]:.2f}×)" for k in n]
            for name, n in counts.items()
        ]
    return results, rows


def main() -> None:
    if len(sys.argv) in (5, 6) and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1_000)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--redis", action="store_true",
        help="also count the client's instructions against a private redis-server",
    )
    parser.add_argument(
        "--cache", action="store_true",
        help="also simulate the first-level caches and count their misses per cycle",
    )
    args = parser.parse_args()
    headers = ["driver", "cycle", "instructions (ratio to the floor)"]
    if args.cache:
        headers += ["I1 misses", "D1 misses"]
    results, rows = _measure(args.cycles, None, args.cache)
    print(f"Per cycle (valgrind, {args.cycles:,} cycles, replies that cost nothing)")
    print(table(headers, rows))
    out: dict[str, Any] = {"cycles": args.cycles, "per_cycle": results}
    if args.redis:
        from distlock.tools.servers.redis_server import RedisServer

        server = RedisServer().start()
        try:
            load_scripts(redis.Redis.from_url(server.url))
            real, rows = _measure(args.cycles, server.url, args.cache)
        finally:
            server.stop()
        print(
            "\nThe client's part of a cycle against a private redis-server (the socket "
            "calls and replies included; the server's own work is not counted)"
        )
        print(table(headers, rows))
        out["per_cycle_against_redis"] = real
    write_json(args.json, out)


if __name__ == "__main__":
    main()
