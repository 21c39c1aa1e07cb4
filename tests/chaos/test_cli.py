"""``python -m distlock chaos`` as a team runs it: a subprocess, against a redis-server this
test starts (as "their" Redis) and the session's Toxiproxy."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from distlock.tools.chaos.report import ChaosReport, Row
from distlock.tools.chaos.toxiproxy import ToxiproxyClient
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

ROOT = Path(__file__).resolve().parents[2]
NOT_RUN = "needs a Redis this tool started"
#: A quick scenario that needs only the proxy.
FAST = "bandwidth-limit-alone-is-ridden-out"


def _chaos(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    # This checkout's distlock, whatever the installed one is.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "distlock", "chaos", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = json.loads(path.read_text())
    assert isinstance(rows, list)
    return rows


def _chaos_keys(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter(match="*chaos-*"))


def test_one_scenario_end_to_end_beside_a_teams_keys(
    toxiproxy: ToxiproxyClient, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        try:
            admin.set("team:config", "keep")
            proc = _chaos(
                "--redis", server.url,
                "--toxiproxy", toxiproxy.url,
                "--scenarios", FAST, "redis-paused-past-the-ttl",
                "--allow-nonempty",
                "--json", str(out),
            )  # fmt: skip
            assert proc.returncode == 0, proc.stdout + proc.stderr
            # The team's key is untouched, and the scenario's own keys are gone.
            assert admin.get("team:config") == b"keep"
            assert _chaos_keys(admin) == []
        finally:
            admin.close()
    rows = _rows(out)
    ran = [r for r in rows if r["status"] != "not run"]
    assert len(ran) == 1, rows
    (row,) = ran
    assert row["scenario"] == "bandwidth 4 KB/s each way [sync]"
    assert row["status"] == "passed"
    assert row["trials"] == 3 and row["faults"] >= 3 and row["ok"] > 0
    assert row["overlaps"] == 0
    # Waiters waited beside the fault, and the report says how their waits ended.
    assert row["waits_granted"] + row["waits_timed_out"] + row["waits_failed"] > 0, row
    assert row["worst_wait_overrun_ms"] is not None
    assert row["traces_validated"] is not None and row["traces_validated"] >= 1, row
    skipped = [r for r in rows if r["status"] == "not run"]
    assert {r["scenario"] for r in skipped} == {
        "Redis paused (SIGSTOP) 2.5xTTL [sync]",
        "Redis paused (SIGSTOP) 2.5xTTL [asyncio]",
    }
    assert all(r["reason"] == NOT_RUN for r in skipped)
    # The table, as `make chaos` prints it.
    assert re.search(r"^scenario\s+trials\s+faults injected", proc.stdout, re.M), proc.stdout
    assert "waits granted/timed out/failed" in proc.stdout
    assert "bandwidth 4 KB/s each way [sync]" in proc.stdout
    assert f"not run: Redis paused (SIGSTOP) 2.5xTTL [sync]: {NOT_RUN}" in proc.stdout


def test_a_redis_holding_others_keys_is_refused(
    toxiproxy: ToxiproxyClient, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        try:
            admin.set("team:a", "1")
            admin.set("team:b", "2")
            # The tool's own leftovers (a fence counter) do not count.
            admin.set("distlock:fence:{x}", "7")
            proc = _chaos(
                "--redis", server.url,
                "--toxiproxy", toxiproxy.url,
                "--scenarios", FAST,
                "--json", str(out),
            )  # fmt: skip
            assert proc.returncode == 2, proc.stdout + proc.stderr
            message = proc.stderr.strip()
            assert "\n" not in message, message
            assert "refusing to run" in message and "holds 2 key(s)" in message, message
            assert "--allow-nonempty" in message, message
            assert not out.exists()
            assert _chaos_keys(admin) == []
            assert admin.dbsize() == 3
        finally:
            admin.close()


def test_an_external_redis_is_never_paused_or_killed(
    toxiproxy: ToxiproxyClient, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    with RedisServer() as server:
        proc = _chaos(
            "--redis", server.url,
            "--toxiproxy", toxiproxy.url,
            "--scenarios", "redis-paused-past-the-ttl", "redis-killed-and-restarted-empty",
            "--json", str(out),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert server.proc is not None and server.proc.poll() is None
    rows = _rows(out)
    assert len(rows) == 4
    assert all(r["status"] == "not run" and r["reason"] == NOT_RUN for r in rows), rows
    listed = [line for line in proc.stdout.splitlines() if line.startswith("not run: ")]
    assert len(listed) == 4 and all(line.endswith(NOT_RUN) for line in listed), proc.stdout


def test_process_faults_run_against_the_redis_the_tool_starts_and_no_tlc_is_said(
    toxiproxy: ToxiproxyClient, tmp_path: Path
) -> None:
    """No ``--redis``: a redis-server from PATH, which the tool may pause.  And a PATH with
    nothing but that redis-server on it (no ``java``): the traces go unchecked, saying so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    redis_server = shutil.which("redis-server")
    assert redis_server is not None
    (bin_dir / "redis-server").symlink_to(redis_server)
    out = tmp_path / "report.json"
    proc = _chaos(
        "--toxiproxy", toxiproxy.url,
        "--scenarios", "redis-paused-past-the-ttl-sync",
        "--json", str(out),
        path=str(bin_dir),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = _rows(out)
    assert row["scenario"] == "Redis paused (SIGSTOP) 2.5xTTL [sync]"
    assert row["status"] == "passed" and row["trials"] == 3 and row["lost"] >= 3, row
    assert row["traces_validated"] is None and row["trace_note"] == "not checked: no TLC", row
    assert "not checked: no TLC" in proc.stdout
    assert "traces not checked against the spec (no TLC" in proc.stderr


def test_an_unknown_scenario_is_named() -> None:
    proc = _chaos("--scenarios", "no-such-fault")
    assert proc.returncode == 2
    assert "unknown chaos scenario(s) no-such-fault" in proc.stderr
    assert "--list" in proc.stderr


def test_failures_decide_the_exit_status_and_not_run_does_not() -> None:
    report = ChaosReport()
    report.add(Row("a", 3, 3, 10, 0, 0, None))
    report.not_run("b", NOT_RUN)
    assert report.passed
    report.failed("a", "NoOverlappingSuccess violated: ...", since=0)
    assert not report.passed
    table = "\n".join(report.table())
    assert "a FAILED" in table and "FAILED: a: NoOverlappingSuccess violated" in table
    assert f"not run: b: {NOT_RUN}" in table


def test_the_package_needs_neither_pytest_nor_the_tests() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in (ROOT / "distlock").rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.match(r"\s*(import (pytest|tests)\b|from (pytest|tests)\b)", line)
    ]
    assert offenders == []
