"""The verify command line: exact names, and clear errors instead of tracebacks."""

from __future__ import annotations

import pytest

from distlock.tools import cli, verify


def test_a_whole_run_name_selects_that_run_only() -> None:
    assert [r.name for r in verify.select(["liveness"])] == ["liveness"]
    assert {r.name for r in verify.select(["liveness-"])} == {
        r.name for r in verify.RUNS if r.name.startswith("liveness-")
    }
    assert len(verify.select(["mutant"])) > 1  # a prefix still selects several


def test_a_missing_java_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["verify", "--only", "liveness", "--java", "/nonexistent/java"])
    err = capsys.readouterr().err
    assert status == 2
    assert "java not found (/nonexistent/java)" in err and "Traceback" not in err


def test_an_unknown_run_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["verify", "--only", "no-such-model"]) == 2
    assert "unknown run(s): no-such-model" in capsys.readouterr().err
