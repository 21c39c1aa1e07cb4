"""The client CPU a lock cycle costs, apart from Redis and the network.

The client is a ``redis.Redis`` whose ``execute_command`` answers at once and sends
nothing: the acquire script gets an increasing fence, every other command 1.  So all that
is timed is distlock's own Python (and redis-py's ``execute_command`` no longer), which is
what compiling the core with mypyc changes; load from other processes moves CPU time far
less than it moves a loopback round trip.  Each figure is the fastest of ``--repeats``
runs of ``--cycles`` cycles, in CPU time of this process.

    python benchmarks/client_cpu.py [--cycles N] [--repeats R] [--json FILE]

Run it in a checkout with ``DISTLOCK_BUILD=compiled python setup.py build_ext --inplace``
done to measure the compiled build (it prints which core it imported; ``git clean -fX
distlock`` takes the .so files away again, which would otherwise stand in for the sources).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from harness import table, write_json

import distlock._core.section
from distlock import Lock, LockHandle
from distlock._protocol import ACQUIRE


class ZeroCostRedis(redis.Redis):
    """Replies without a server: increasing fences for the acquire script, 1 otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.fence = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[0] == "EVALSHA" and args[1] == ACQUIRE.sha:
            self.fence += 1
            return self.fence
        return 1


def _body(handle: LockHandle) -> int:
    return handle.fence


def best_us(cycle: Callable[[], object], cycles: int, repeats: int) -> float:
    """The fastest of ``repeats`` runs, in µs of this process's CPU per cycle."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(cycles):
            cycle()
        best = min(best, time.process_time() - start)
    return best / cycles * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    origin = str(distlock._core.section.__file__)
    build = "compiled" if origin.endswith(".so") else "python"
    lock = Lock(ZeroCostRedis(), prefix="cpu", ttl_ms=30_000)

    def manual() -> None:
        handle = lock.acquire("k")
        assert handle is not None
        handle.release()

    def armed() -> None:
        lock.run("k", _body)

    results = {
        "acquire/release": best_us(manual, args.cycles, args.repeats),
        "run()": best_us(armed, args.cycles, args.repeats),
    }
    lock.close()
    print(f"core: {build} ({origin})")
    print(table(["cycle", "client CPU µs"], [[k, f"{v:.1f}"] for k, v in results.items()]))
    write_json(args.json, {"build": build, "cycles": args.cycles, "repeats": args.repeats,
                           "cpu_us": results})


if __name__ == "__main__":
    main()
