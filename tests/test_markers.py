"""The markers tests/conftest.py sets: ``make quick`` must run the pure tests and nothing
that starts a server or TLC (it runs where neither is installed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICK = "not redis and not tlc and not properties and not chaos"


def _collected(*paths: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", QUICK, *paths],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}


def test_the_quick_selection_keeps_the_pure_tests_and_drops_the_rest() -> None:
    files = _collected(
        "tests/test_core.py",
        "tests/test_flows.py",
        "tests/drivers/_sync/test_lock.py",  # the `r` and `redis_server` fixtures
        "tests/test_memory_budget.py",  # starts a RedisServer of its own
        "tests/test_guards.py",  # TLC's state graphs
        "tests/properties/test_core_stateful.py",  # a long Hypothesis machine
        "tests/test_fencing_postgres.py",  # PostgreSQL
    )
    assert files == {"tests/test_core.py", "tests/test_flows.py"}
