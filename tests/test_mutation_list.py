"""The mutants of ``tests/mutation.py`` still fit the scripts: each one's old text occurs
exactly once in the script files (``distlock/lua``) and changes the script it names, every
script has a mutant of its own, and each names tests that exist.  Cheap (no mutant is run), so
the list never goes stale unnoticed between runs of ``make mutation``."""

from __future__ import annotations

from pathlib import Path

import pytest

from distlock import _protocol
from tests.mutation import (
    MUTANTS,
    QUICK,
    ROOT,
    Mutant,
    StaleMutantError,
    apply,
    changed_scripts,
    locate,
    read_scripts,
    script_sources,
)

FILES = read_scripts()


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_changes_the_script_it_names(mutant: Mutant) -> None:
    name = locate(FILES, mutant)  # raises unless the old text is found exactly once
    assert FILES[name].count(mutant.old) == 1
    assert mutant.old != mutant.new
    assert mutant.script in changed_scripts(FILES, mutant)


def test_every_script_has_a_mutant() -> None:
    assert set(script_sources(FILES)) == {m.script for m in MUTANTS}


def test_the_scripts_mutated_are_the_ones_the_package_sends() -> None:
    for name, lua in script_sources(FILES).items():
        assert getattr(_protocol, name).source == lua, name


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
        apply(FILES, gone)


def test_a_mutant_whose_text_is_in_two_files_is_an_error() -> None:
    # ``read`` is included by most scripts, but written once: a text twice is ambiguous.
    twice = {**FILES, "copy": FILES["lib/read"]}
    mutant = Mutant("X", "EXTEND", "twice", "local function read(...)", "", ("tests",))
    assert locate(FILES, mutant) == "lib/read"
    with pytest.raises(StaleMutantError):
        apply(twice, mutant)
