"""The verify command line: exact names, and clear errors instead of tracebacks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distlock.tools import cli, verify

ROOT = Path(__file__).resolve().parent.parent


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


def test_the_auditors_page_shows_what_one_run_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/auditors.md shows the lines of one run (``...`` for what it leaves out): each of
    them is printed, but for the seconds, which are the machine's."""
    page = (ROOT / "docs" / "auditors.md").read_text(encoding="utf-8")
    block = page.split("```console\n", 1)[1].split("```", 1)[0]
    command, *shown = block.strip().splitlines()
    argv = command.removeprefix("$ python -m distlock ").split()
    assert argv[:3] == ["verify", "--only", "mutant-release-plain-del"]
    assert cli.main(argv) == 0
    seconds = re.compile(r"\b\d+(\.\d+)? s\b|\s\d+\.\d+\s")
    printed = {seconds.sub(" <s> ", " ".join(line.split())) for line in
               capsys.readouterr().out.splitlines()}
    for line in shown:
        if line != "...":
            assert seconds.sub(" <s> ", " ".join(line.split())) in printed, line
