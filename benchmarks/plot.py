"""The chart of docs/performance.md: each contender's ratio to the hand-written floor, from
the JSON that ``make bench`` wrote (matplotlib, installed with the ``bench`` extra).

    python benchmarks/plot.py [--results DIR] [--out docs/benchmarks.png]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness import FLOOR, ROOT, peer

TASKS = ("1", "10", "100")


def series(cycles: dict[str, Any]) -> tuple[list[str], dict[str, list[float | None]]]:
    """Columns (what was measured) and, per contender, its ratio in each (None: not offered)."""
    sync, asynchronous = cycles["sync"], cycles["asyncio"]
    columns = ["sync cycle", "sync, renewal armed", *(f"asyncio, {t} tasks" for t in TASKS)]
    names = [n for n in sync if not n.endswith("(armed)") and n != FLOOR]
    for n in asynchronous[TASKS[0]]:
        if n not in names and n != FLOOR:
            names.append(n)
    rows: dict[str, list[float | None]] = {}
    for n in names:
        armed = sync.get(f"{n} (armed)")
        rows[n] = [
            sync[n]["ratio"] if n in sync else None,
            armed["ratio"] if armed else None,
            *(asynchronous[t][n]["ratio"] if n in asynchronous[t] else None for t in TASKS),
        ]
    return columns, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench-results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.png")
    args = parser.parse_args()
    matplotlib: Any = peer("matplotlib")
    if matplotlib is None:
        raise SystemExit("matplotlib is not installed: pip install -e '.[bench]'")
    matplotlib.use("Agg")
    plt: Any = peer("matplotlib.pyplot")
    cycles = json.loads((args.results / "cycles.json").read_text())
    columns, rows = series(cycles)
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    width = 0.8 / max(1, len(rows))
    for i, (name, values) in enumerate(rows.items()):
        xs = [c + (i - (len(rows) - 1) / 2) * width for c in range(len(columns))]
        heights = [v if v is not None else 0.0 for v in values]
        bars = ax.bar(xs, heights, width, label=name)
        for bar, v in zip(bars, values, strict=True):
            if v is None:
                ax.annotate("n/a", (bar.get_x() + width / 2, 0.05), ha="center", fontsize=6,
                            rotation=90)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(columns)), columns)
    ax.set_ylabel("time per cycle ÷ hand-written floor")
    conditions = cycles.get("conditions", {})
    ax.set_title(
        f"Uncontended lock cycles, distlock {conditions.get('distlock', '?')} "
        f"({conditions.get('build', '?')} build), median of {cycles['rounds']} interleaved "
        f"rounds\n(lower is better; pinned={conditions.get('pinned')}, "
        f"load {conditions.get('loadavg_1m')})",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"(written to {args.out})")


if __name__ == "__main__":
    main()
