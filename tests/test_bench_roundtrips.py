"""``benchmarks/roundtrips.py`` runs, against a server of its own, and counts what it says:
two round trips per distlock cycle, armed or not, and two for the rows it measures beside
it.  (It once failed at its first by-hand cycle: the scripts that row sends by ``EVALSHA``
were never loaded.)  Nothing here times anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.benchmark_module import BENCHMARKS


def test_every_row_is_counted_and_a_distlock_cycle_is_two_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "roundtrips.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "roundtrips.py"), "--cycles", "20", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["cycle"]
    for name in ("floor", "floor, distlock's scripts", "distlock", "distlock (armed)"):
        assert rows[name]["round_trips"] == 2, (name, rows[name])
    assert rows["distlock"]["commands"] == {"EVALSHA": 2}
    assert json.loads(out.read_text())["conditions"]["build"] in ("compiled", "pure")
