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

import psycopg
import pytest
import redis

from distlock.tools.chaos import failover_rows, fence_experiment
from distlock.tools.chaos.failover import TopologyRow
from distlock.tools.chaos.report import ChaosReport, Row
from distlock.tools.servers import postgres
from distlock.tools.servers.toxiproxy import ToxiproxyClient
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer

pytestmark = pytest.mark.chaos

ROOT = Path(__file__).resolve().parents[2]
NOT_RUN = "needs a Redis this tool started"
#: A quick scenario that needs only the proxy: a 200 ms lease, its three trials a few
#: seconds each, its traced trial's check a few seconds of TLC.  (The no-loss scenarios
#: run at TTL 1 s, their trials over ten seconds each: what the command does with a
#: scenario is the same either way.)
FAST = "latency-beyond-the-ttl-surfaces-the-loss"
FAST_TITLE = "latency 2xTTL +- TTL/2 on replies [sync]"


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
    # Folders that do not exist yet: the tool makes them.
    out = tmp_path / "results" / "report.json"
    traces = tmp_path / "results" / "traces"
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
                "--trace-dir", str(traces),
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
    assert row["scenario"] == FAST_TITLE
    assert row["status"] == "passed"
    assert row["trials"] == 3 and row["faults"] >= 3 and row["ok"] > 0
    assert row["overlaps"] == 0
    # Waiters waited beside the fault, and the report says how their waits ended.
    assert row["waits_granted"] + row["waits_timed_out"] + row["waits_failed"] > 0, row
    assert row["worst_wait_overrun_ms"] is not None
    assert row["traces_validated"] is not None and row["traces_validated"] >= 1, row
    assert [p.name for p in traces.iterdir()] == ["latency-2xTTL-TTL-2-on-replies-sync.ndjson"]
    skipped = [r for r in rows if r["status"] == "not run"]
    assert {r["scenario"] for r in skipped} == {
        "Redis paused (SIGSTOP) 2.5xTTL [sync]",
        "Redis paused (SIGSTOP) 2.5xTTL [asyncio]",
    }
    assert all(r["reason"] == NOT_RUN for r in skipped)
    # The table, as `make chaos` prints it.
    assert re.search(r"^scenario\s+trials\s+faults injected", proc.stdout, re.M), proc.stdout
    assert "waits granted/timed out/failed" in proc.stdout
    assert FAST_TITLE in proc.stdout
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


def test_a_results_folder_that_cannot_be_made_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = _chaos("--scenarios", FAST, "--trace-dir", str(blocker / "traces"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot create the folder" in proc.stderr and "a-file" in proc.stderr
    assert "chaos:" not in proc.stdout  # no scenario started


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


# -- the failovers on a Redis Cluster and a Sentinel set-up ---------------------------------
# These pin what the command does about them without failing anything over: the failovers
# themselves run once in CI, in test_failover.py, through the same failover_rows.record.

CLUSTER_ROWS = [
    "Cluster failover: CLUSTER FAILOVER",
    "Cluster failover: primary killed",
    "Cluster failover: primary killed, replica behind",
]
SENTINEL_ROWS = ["Sentinel failover: primary killed"]


def _path_with(tmp_path: Path, **programs: str) -> str:
    """A PATH of one directory holding only ``programs`` (name: target or script)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, target in programs.items():
        if target.startswith("#!"):
            (bin_dir / name).write_text(target)
            (bin_dir / name).chmod(0o755)
        else:
            (bin_dir / name).symlink_to(target)
    return str(bin_dir)


def _which(name: str) -> str:
    found = shutil.which(name)
    assert found is not None, f"{name} is not on PATH"
    return found


def test_the_failovers_are_listed() -> None:
    proc = _chaos("--list")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names[-3:] == ["cluster-failover", "sentinel-failover", "fencing"], proc.stdout


def test_failovers_are_not_run_against_a_teams_redis(tmp_path: Path) -> None:
    """A ``--redis URL`` is one server, not a topology the tool may fail over: the four
    failover rows say so, the run passes, and no Toxiproxy is needed for them alone."""
    out = tmp_path / "report.json"
    with RedisServer() as server:
        proc = _chaos("--redis", server.url, "--scenarios", "failover", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(out)
    assert [r["scenario"] for r in rows] == CLUSTER_ROWS + SENTINEL_ROWS
    reason = failover_rows.NEEDS_OWN_TOPOLOGY
    assert all(
        r["status"] == "not run" and r["reason"] == reason and r["kind"] == "failover"
        for r in rows
    ), rows
    for name in CLUSTER_ROWS + SENTINEL_ROWS:
        assert f"not run: {name}: {reason}" in proc.stdout, proc.stdout


def test_a_cluster_without_redis_cli_is_not_run_saying_so(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    path = _path_with(tmp_path, **{"redis-server": _which("redis-server")})
    proc = _chaos("--scenarios", "cluster-failover", "--json", str(out), path=path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(out)
    assert [r["scenario"] for r in rows] == CLUSTER_ROWS
    assert all(r["status"] == "not run" for r in rows), rows
    assert all(r["reason"].startswith("redis-cli not found on PATH") for r in rows), rows


def test_a_redis_server_too_old_for_the_cluster_is_not_run_saying_so(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    old = "#!/bin/sh\necho 'Redis server v=6.2.14 sha=00000000:0 malloc=libc bits=64'\n"
    path = _path_with(tmp_path, **{"redis-server": old, "redis-cli": _which("redis-cli")})
    proc = _chaos("--scenarios", "cluster-failover", "--json", str(out), path=path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["not run"] * 3, rows
    assert all("is 6.2: the Cluster here needs Redis 7.0 or later" in r["reason"] for r in rows)


def test_failover_trials_must_be_positive() -> None:
    proc = _chaos("--scenarios", "failover", "--failover-trials", "0")
    assert proc.returncode == 2
    assert "--failover-trials" in proc.stderr and "not a positive whole number" in proc.stderr


def test_failover_rows_print_in_a_table_of_their_own_and_a_bad_one_fails() -> None:
    """What the command prints for a failover it ran, from rows as run_cluster returns
    them (the run itself is test_failover.py's)."""
    caught = TopologyRow("cluster", "primary killed, replica behind", trials=2, sections=4)
    caught.lost, caught.costly_trials, caught.detection_ms = 4, 2, [2964.2, 3014.0, 2990, 3001]
    kept = TopologyRow("sentinel", "primary killed", trials=2, sections=4)
    report = ChaosReport()
    report.add(Row("bandwidth 4 KB/s each way [sync]", 3, 3, 10, 0, 0, None))
    failover_rows.record(report, [caught, kept])
    assert report.passed
    table = report.table()
    header = next(i for i, line in enumerate(table) if line.startswith("failover "))
    assert header > 2 and table[0].startswith("scenario "), table
    assert re.match(
        r"failover\s+trials\s+lost a held lock\s+detection delay\s+overlaps among successes$",
        table[header],
    ), table[header]
    assert re.match(
        r"Cluster failover: primary killed, replica behind\s+2\s+2/2 trials\s+2964-3014 ms\s+0$",
        table[header + 2],
    ), table
    kept_line = r"Sentinel failover: primary killed\s+2\s+0/2 trials\s+-\s+0$"
    assert re.match(kept_line, table[header + 3]), table
    (row,) = [r for r in report.rows if r.scenario.startswith("Cluster")]
    assert (row.ok, row.lost, row.held_lock_lost_trials, row.worst_detection_ms) == (
        0, 4, 2, 3014.0
    )  # fmt: skip

    overlapped = TopologyRow("sentinel", "primary killed", trials=1, sections=2, overlaps=1)
    failover_rows.record(report, [overlapped])
    assert not report.passed
    assert any(
        line.startswith("FAILED: Sentinel failover: primary killed: sentinel")
        and "overlaps among successes=1" in line
        for line in report.table()
    ), report.table()


# -- the fencing experiment ------------------------------------------------------------------
# Its verdicts are test_fencing.py's; these pin what the command does with a database.

FENCING_ROWS = [fence_experiment.TITLES["fenced"], fence_experiment.TITLES["unfenced"]]


def test_fencing_refuses_a_database_whose_table_holds_rows_unless_told_to_reuse_it(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    table = fence_experiment.BALANCE_TABLE
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, value bigint NOT NULL)")
        try:
            conn.execute(f"INSERT INTO {table} VALUES (7, 700)")
            proc = _chaos(
                "--scenarios", "fencing", "--postgres", postgres_server.dsn, "--json", str(out)
            )  # fmt: skip
            assert proc.returncode == 2, proc.stdout + proc.stderr
            message = proc.stderr.strip()
            assert "\n" not in message, message
            assert f"the table {table!r}" in message and "holds 1 row(s)" in message, message
            assert "--postgres-reuse" in message, message
            assert not out.exists()

            proc = _chaos(
                "--scenarios", "fencing", "--postgres", postgres_server.dsn, "--postgres-reuse",
                "--json", str(out),
            )  # fmt: skip
            assert proc.returncode == 0, proc.stdout + proc.stderr
            rows = _rows(out)
            assert [r["scenario"] for r in rows] == FENCING_ROWS, rows
            assert all(r["status"] == "passed" and r["kind"] == "fencing" for r in rows), rows
            fenced, control = rows
            assert fenced["final_balance"] == fenced["committed"] > 0, fenced
            assert fenced["stale_refused"] >= 1, fenced
            assert control["lost_updates"] > 0 and control["stale_refused"] is None, control
            assert re.search(
                r"^fencing experiment\s+faults\s+increments committed\s+final balance\s+"
                r"lost updates\s+double-applied\s+stale fences refused",
                proc.stdout,
                re.M,
            ), proc.stdout
            # The table it was told to reuse stays (the team's row with it); the fence
            # table it made itself is gone.
            assert conn.execute(f"SELECT value FROM {table} WHERE id = 7").fetchone() == (700,)
            made = conn.execute("SELECT to_regclass(%s)", (fence_experiment.FENCE_TABLE,))
            assert made.fetchone() == (None,)
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def test_fencing_is_not_run_against_a_teams_redis(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    with RedisServer() as server:
        proc = _chaos("--redis", server.url, "--scenarios", "fencing", "--json", str(out))
        assert server.proc is not None and server.proc.poll() is None
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(out)
    assert [r["scenario"] for r in rows] == FENCING_ROWS
    reason = fence_experiment.NEEDS_OWN_REDIS
    assert all(r["status"] == "not run" and r["reason"] == reason for r in rows), rows
    for name in FENCING_ROWS:
        assert f"not run: {name}: {reason}" in proc.stdout, proc.stdout


def test_fencing_without_postgresql_installed_is_not_run_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --postgres, and no initdb on PATH nor under Debian's directory: the rows say
    what to install (the run itself would need nothing else first)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(postgres, "DEBIAN_PREFIX", tmp_path / "no-postgresql")
    report = ChaosReport()
    status = fence_experiment.run(report, postgres_url=None, reuse=False, external=False)
    assert status == "not run"
    assert [(r.scenario, r.status, r.reason) for r in report.rows] == [
        (name, "not run", postgres.INSTALL_POSTGRES) for name in FENCING_ROWS
    ]
    assert report.passed
    assert "apt-get install postgresql" in postgres.INSTALL_POSTGRES
    assert "--postgres URL" in postgres.INSTALL_POSTGRES
