"""What every benchmark here shares: a private redis-server, CPU pinning, interleaved rounds,
medians, ratios to the hand-written floor, tables and JSON.

A shared machine drifts: another process takes a core for a second, the CPU clocks down.
So contenders are never timed one after the other for a whole run; each round times every
contender once, in an order that rotates from round to round, each turn paired with a turn
of the floor run right beside it, and a contender's ratio is the median over rounds of its
time divided by the floor's *in its pair*.
Pinning (``--pin``) puts redis-server on one CPU and the client on another, so the two
do not take turns on one core; without it the scheduler decides.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import distlock  # noqa: E402  (after the checkout is on the path)

if not Path(distlock.__file__).resolve().is_relative_to(ROOT):
    # An installed distlock (an editable install of another checkout) would be measured
    # instead of this one, and nothing else would tell.
    raise SystemExit(f"benchmarks import {distlock.__file__}, not the checkout at {ROOT}")

#: The name of the hand-written contender every ratio is taken against.
FLOOR = "floor"


def arguments(description: str, *, rounds: int = 11) -> argparse.ArgumentParser:
    """The options every benchmark takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", help="a Redis to use (default: start a private redis-server)")
    parser.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="pin redis-server to the first allowed CPU and this process to the second",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="few rounds, small batches")
    return parser


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@contextmanager
def redis_url(args: argparse.Namespace) -> Iterator[str]:
    """The Redis to measure against: ``--url``, or a private redis-server started here
    (on a free loopback port, never 6379) and stopped at the end."""
    if args.url:
        if args.pin:
            pin_client()
        yield args.url
        return
    from distlock.tools.servers.redis_server import RedisServer

    server = RedisServer().start()
    try:
        if args.pin:
            cpus = allowed_cpus()
            if len(cpus) >= 2:
                os.sched_setaffinity(server.pid, {cpus[0]})
            pin_client()
        yield server.url
    finally:
        server.stop()


def pin_client() -> None:
    """This process (and the threads it starts later) on the second allowed CPU."""
    cpus = allowed_cpus()
    if len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[1]})


def conditions(args: argparse.Namespace) -> dict[str, Any]:
    """What a reader needs to judge the numbers: load, CPUs, pinning, which build."""
    load = os.getloadavg()
    build = distlock.build_info()
    return {
        "cpus": os.cpu_count(),
        "pinned": bool(args.pin),
        "loadavg_1m": round(load[0], 2),
        "python": sys.version.split()[0],
        "distlock": build.version,
        "build": build.build,
    }


def build_label() -> str:
    """Which distlock is measured, for a table's title: its version and its build (the
    compiled one is what ``pip install`` builds; ``make bench`` measures it)."""
    build = distlock.build_info()
    return f"distlock {build.version}, {build.build} build"


def peer(name: str) -> ModuleType | None:
    """A benchmark-only library (``pip install -e .[bench]``), or None when absent:
    peers are never dependencies of distlock itself."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class Turns:
    """Each contender's turns: the wall-clock seconds each took (the contender's own
    figure, set-up left out) and the CPU seconds this process spent in it, all threads
    (a sync ``run()``'s timer thread included).  A wall-clock gap that the CPU does not
    show is the server's or the wire's.  Each contender's turns are recorded with the floor
    turns run beside them (:meth:`pair`), which its ratios are taken against."""

    def __init__(self, names: Sequence[str]) -> None:
        self.wall: dict[str, list[float]] = {name: [] for name in names}
        self.cpu: dict[str, list[float]] = {name: [] for name in names}
        #: Per contender, the floor's turn beside each of its own: (wall, CPU) lists.
        self.paired_wall: dict[str, list[float]] = {name: [] for name in names}
        self.paired_cpu: dict[str, list[float]] = {name: [] for name in names}

    def pair(
        self,
        name: str,
        turn: Callable[[], float],
        floor_turn: Callable[[], float],
        *,
        floor_first: bool,
        floor: str = FLOOR,
    ) -> None:
        """One turn of ``name`` and one of the floor, right after one another."""
        c0 = time.process_time()
        first = floor_turn() if floor_first else turn()
        c1 = time.process_time()
        second = turn() if floor_first else floor_turn()
        c2 = time.process_time()
        earlier, later = (first, c1 - c0), (second, c2 - c1)
        own, beside = (later, earlier) if floor_first else (earlier, later)
        self.record_pair(name, own, beside, floor=floor)

    def record_pair(
        self,
        name: str,
        own: tuple[float, float],
        beside: tuple[float, float],
        floor: str = FLOOR,
    ) -> None:
        """A turn of ``name`` and the floor's beside it, each (wall, CPU) seconds."""
        self.record(name, *own)
        self.record(floor, *beside)
        self.paired_wall[name].append(beside[0])
        self.paired_cpu[name].append(beside[1])

    def record(self, name: str, wall: float, cpu: float) -> None:
        """One turn of ``name`` that the caller timed (an asyncio one, awaited)."""
        self.wall[name].append(wall)
        self.cpu[name].append(cpu)


def rotations(names: Sequence[str], rounds: int) -> Iterator[list[str]]:
    """The order of each round: one contender later than the last, so none is always
    first or last."""
    for r in range(rounds):
        shift = r % len(names)
        yield [*names[shift:], *names[:shift]]


def paired_turns(
    names: Sequence[str], rounds: int, floor: str = FLOOR
) -> Iterator[tuple[str, bool]]:
    """Every contender but the floor once per round, in :func:`rotations` order, and
    whether the floor's turn beside it comes first: in even rounds it does, in odd ones
    it follows, so that neither always comes second (the one that comes second finds its
    code in the caches the other left behind)."""
    others = [name for name in names if name != floor]
    for r, order in enumerate(rotations(others, rounds)):
        for name in order:
            yield name, r % 2 == 0


def interleave(
    contenders: Mapping[str, Callable[[], float]], rounds: int, floor: str = FLOOR
) -> Turns:
    """Every contender's turns (each call returns its own seconds), each beside a turn of
    the floor, in :func:`paired_turns` order."""
    turns = Turns(list(contenders))
    for name, floor_first in paired_turns(list(contenders), rounds, floor):
        turns.pair(name, contenders[name], contenders[floor],
                   floor_first=floor_first, floor=floor)
    return turns


def summarize_turns(turns: Turns, per: int, floor: str = FLOOR) -> dict[str, dict[str, float]]:
    """:func:`summarize` of the wall-clock times, with the CPU's beside them (``cpu_us``,
    ``cpu_ratio``: the same medians of the CPU seconds)."""
    out = summarize(turns.wall, turns.paired_wall, per, floor)
    cpu = summarize(turns.cpu, turns.paired_cpu, per, floor)
    for name, row in cpu.items():
        out[name]["cpu_us"] = row["us"]
        out[name]["cpu_ratio"] = row["ratio"]
    return out


def summarize(
    times: Mapping[str, Sequence[float]],
    beside: Mapping[str, Sequence[float]],
    per: int,
    floor: str = FLOOR,
) -> dict[str, dict[str, float]]:
    """Per contender: median microseconds per operation, and the median, least and most of
    its turns' ratios to the floor turns ``beside`` them (the floor's row: every floor
    turn, at 1.00×)."""
    out: dict[str, dict[str, float]] = {}
    for name, ts in times.items():
        floors = ts if name == floor else beside[name]
        ratios = [o / f for o, f in zip(ts, floors, strict=True)]
        out[name] = {
            "us": statistics.median(ts) / per * 1e6,
            "ratio": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
        }
    return out


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table, as the documentation shows it."""
    cells = [[str(c) for c in headers], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
             for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def times_x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}×"


def write_json(path: Path | None, data: Mapping[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"(written to {path})")


def rss_bytes() -> int:
    """This process's resident set size, from /proc (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")
