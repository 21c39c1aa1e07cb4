"""TLC's class-data archive: made once per jar and java, and never a reason for a wrong verdict."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from distlock.tools import specfiles, tlcjvm, verify
from distlock.tools.verify import Run

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")

MUTANT = Run("mutant-release-plain-del", "MutantPlainDel.cfg", "NoForeignWrite", "violates",
             refutes="NoForeignWrite")


@pytest.fixture
def jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of tla2tools.jar, so that its archive lands in tmp_path."""
    monkeypatch.setattr(tlcjvm, "_made", {})
    copy = tmp_path / "tlc" / "tla2tools.jar"
    copy.parent.mkdir()
    shutil.copy2(specfiles.tla2tools(), copy)
    return copy


def test_the_archive_is_named_after_the_jar_it_was_made_for(jar: Path) -> None:
    before = tlcjvm.archive_path("java", jar)
    assert before.parent == jar.parent
    stat = jar.stat()
    os.utime(jar, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert tlcjvm.archive_path("java", jar) != before  # a reinstalled jar gets a new one


def test_no_archive_without_the_training_model(jar: Path, tmp_path: Path) -> None:
    assert tlcjvm.class_archive("java", jar, tmp_path) is None
    assert not list(jar.parent.glob("*.jsa"))
    assert tlcjvm.archive_flags(None) == []


@pytest.mark.tlc
@needs_java
@pytest.mark.timeout(120)
def test_the_archive_is_made_on_first_use_and_then_reused(
    jar: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tlcjvm.class_archive("java", jar, specfiles.spec_dir())
    assert archive is not None and archive.is_file()
    assert archive == tlcjvm.archive_path("java", jar)
    assert [p.name for p in jar.parent.iterdir() if p.name.startswith(".")] == []
    made = archive.stat().st_mtime_ns
    monkeypatch.setattr(tlcjvm, "_made", {})
    assert tlcjvm.class_archive("java", jar, specfiles.spec_dir()) == archive
    assert archive.stat().st_mtime_ns == made


@pytest.mark.tlc
@needs_java
@pytest.mark.timeout(120)
def test_a_damaged_or_foreign_archive_does_not_change_a_verdict(
    jar: Path, tmp_path: Path
) -> None:
    damaged = tmp_path / "damaged.jsa"
    damaged.write_bytes(b"\x00not an archive" * 1000)
    # made for the copy, so the real jar's class path does not match it
    foreign = tlcjvm.class_archive("java", jar, specfiles.spec_dir())
    assert foreign is not None
    for archive in (damaged, foreign):
        row = verify.run_tlc(MUTANT, 1, tmp_path / archive.stem, archive=archive)
        assert (row.verdict, row.property) == ("violates", "NoForeignWrite"), row.detail
        assert row.ok()
