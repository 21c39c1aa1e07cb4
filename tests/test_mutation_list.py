"""The mutants of ``tests/mutation.py`` still fit the scripts: each one's old text occurs
exactly once in ``distlock/_protocol.py`` and changes the script it names, every script
has a mutant of its own, and each names tests that exist.  Cheap (no mutant is run), so
the list never goes stale unnoticed between runs of ``make mutation``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation import (
    MUTANTS,
    PROTOCOL,
    QUICK,
    ROOT,
    Mutant,
    StaleMutantError,
    apply,
    changed_scripts,
    script_sources,
)

SOURCE = (ROOT / PROTOCOL).read_text()


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_changes_the_script_it_names(mutant: Mutant) -> None:
    assert SOURCE.count(mutant.old) == 1, f"{mutant.name}'s old text is not found exactly once"
    assert mutant.old != mutant.new
    assert mutant.script in changed_scripts(SOURCE, mutant)


def test_every_script_has_a_mutant() -> None:
    assert set(script_sources(SOURCE)) == {m.script for m in MUTANTS}


def test_names_are_unique_and_the_tests_exist() -> None:
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    for mutant in MUTANTS:
        assert mutant.tests
        for test in mutant.tests:
            assert (ROOT / Path(test.split("::")[0])).is_file(), f"{mutant.name}: {test}"


def test_the_quick_list_is_short_and_holds_w11() -> None:
    assert "W11" in {m.name for m in QUICK}
    assert 3 <= len(QUICK) <= 6


def test_a_mutant_whose_text_is_gone_is_an_error_not_a_pass() -> None:
    gone = Mutant("X", "ACQUIRE", "stale", "no such text in the scripts", "", ("tests",))
    with pytest.raises(StaleMutantError):
        apply(SOURCE, gone)
