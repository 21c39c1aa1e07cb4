"""The benchmarks' interleaving takes each ratio against the floor turn run beside it.

No Redis and no clock: each turn "takes" its own place in the run (1, 2, 3, ...), so a
drift of the machine is a time that grows from turn to turn, and the pairing can be read
off the figures."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from tests.benchmark_module import load_benchmark

ROUNDS = 6


@pytest.fixture(scope="module")
def harness() -> ModuleType:
    load_benchmark("cycles")  # puts benchmarks/ on the path
    import harness as module

    return module


def _contenders(harness: ModuleType) -> tuple[list[str], dict[str, Callable[[], float]]]:
    calls: list[str] = []

    def turn(name: str) -> Callable[[], float]:
        def run() -> float:
            calls.append(name)
            return float(len(calls))

        return run

    names = [harness.FLOOR, "a", "b", "c"]
    return calls, {name: turn(name) for name in names}


def test_each_turn_has_a_floor_turn_beside_it_first_and_second_in_turn(
    harness: ModuleType,
) -> None:
    calls, contenders = _contenders(harness)
    turns = harness.interleave(contenders, ROUNDS)
    floor = harness.FLOOR
    # Every turn of a contender is one of a pair with a floor turn.
    pairs = [calls[i : i + 2] for i in range(0, len(calls), 2)]
    assert len(pairs) == ROUNDS * 3
    for k, pair in enumerate(pairs):
        floor_at = 0 if (k // 3) % 2 == 0 else 1
        assert pair[floor_at] == floor and pair[1 - floor_at] != floor, (k, pair)
    # Each round, every contender once, in an order that rotates.
    assert pairs[:3] == [[floor, "a"], [floor, "b"], [floor, "c"]]
    assert [pair[0] for pair in pairs[3:6]] == ["b", "c", "a"]
    for name in ("a", "b", "c"):
        own, beside = turns.wall[name], turns.paired_wall[name]
        assert len(own) == len(beside) == ROUNDS
        # The floor turn right before it in even rounds, right after it in odd ones.
        assert [b - o for o, b in zip(own, beside, strict=True)] == [-1.0, 1.0] * (ROUNDS // 2)
    assert len(turns.wall[floor]) == ROUNDS * 3


def test_a_drift_between_turns_stays_out_of_the_ratio(harness: ModuleType) -> None:
    """A contender that takes exactly twice the floor's time, on a machine that slows down
    by a tenth every turn: taken against the floor turn of the same round several turns
    away, its ratio moves with its place in the round; against the turn beside it, it is
    2 give or take one turn's drift."""
    slowdown = [1.0]

    def timed(factor: float) -> Callable[[], float]:
        def run() -> float:
            slowdown[0] *= 1.1
            return factor * slowdown[0]

        return run

    contenders = {harness.FLOOR: timed(1.0), "x": timed(2.0), "y": timed(1.0), "z": timed(1.0)}
    turns = harness.interleave(contenders, 8)
    summary = harness.summarize_turns(turns, per=1)
    assert summary[harness.FLOOR]["ratio"] == 1.0
    # Beside the floor, within one turn's drift (a tenth either way) of the true 2.
    assert summary["x"]["ratio_min"] >= 2 / 1.1 - 1e-9
    assert summary["x"]["ratio_max"] <= 2 * 1.1 + 1e-9
    # The same turns, taken against the floor's first turn of each round instead.
    firsts = turns.wall[harness.FLOOR][::3]
    unpaired = [o / f for o, f in zip(turns.wall["x"], firsts, strict=True)]
    assert max(unpaired) > 2 * 1.1**2
