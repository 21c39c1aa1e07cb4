"""The build users install: setup.py compiles the core with mypyc wherever it can, builds the
pure package with a one-line notice where it cannot (no C compiler, no mypyc), never fails
for want of them unless ``DISTLOCK_BUILD=compiled`` asks, and never puts ``.so`` files next
to the sources for an in-place build unless asked; and the wheels CI would publish
(``[tool.cibuildwheel]``) are compiled ones.

Each build runs in a copy of what the package is built from, so the checkout keeps no
build directory and the builds do not share one.  The compiled wheel itself is built once
per ``make test`` by ``.ci/test-compiled`` (``DISTLOCK_WHEEL`` names it), which runs the
suite on its extension modules; :func:`test_the_compiled_wheel_holds_every_compiled_module`
checks it.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import distlock
from distlock._build import COMPILED_MODULES

ROOT = Path(__file__).resolve().parent.parent
NOTICE = "distlock: building the pure-Python package: "


def _source(tmp_path: Path) -> Path:
    """What a build reads, copied: the project files, the package and the spec."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    debris = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    shutil.copytree(ROOT / "distlock", src / "distlock", ignore=debris)
    (src / "spec").mkdir()
    for path in (ROOT / "spec").iterdir():
        if path.is_file():
            shutil.copy2(path, src / "spec" / path.name)
    return src


def _build(src: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``pip wheel`` of ``src`` with the installed setuptools (no download), verbose so the
    build's own lines are in the output."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", str(out), str(src)],
        cwd=src, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, **env},
    )


def _notices(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.strip() for line in (done.stdout + done.stderr).splitlines()
            if line.strip().startswith("distlock: ")]


def _extensions(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith((".so", ".pyd"))]


def _check_pure_wheel(done: subprocess.CompletedProcess[str], out: Path, tmp_path: Path) -> str:
    """The build succeeded with one notice, and its wheel is pure and works: imported from
    the wheel's files alone, it says it is the pure build.  Returns the notice."""
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("distlock-*.whl")
    assert wheel.name == f"distlock-{distlock.__version__}-py3-none-any.whl", wheel.name
    with zipfile.ZipFile(wheel) as zf:
        assert _extensions(zf.namelist()) == []
        zf.extractall(tmp_path / "site")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = subprocess.run(
        [sys.executable, "-c",
         "import distlock; i = distlock.build_info(); print(distlock.__file__, i.build)"],
        cwd=elsewhere, capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    where, build = ran.stdout.split()
    assert Path(where).is_relative_to(tmp_path / "site"), where
    assert build == "pure", ran.stdout
    (notice,) = _notices(done)
    return notice


@pytest.mark.build
def test_a_failing_compiler_gives_a_working_pure_wheel(tmp_path: Path) -> None:
    done = _build(_source(tmp_path), tmp_path / "out", CC="false", DISTLOCK_BUILD="")
    notice = _check_pure_wheel(done, tmp_path / "out", tmp_path)
    assert notice.startswith(NOTICE + "no working C compiler"), notice


@pytest.mark.build
def test_without_mypyc_the_build_is_a_working_pure_wheel(tmp_path: Path) -> None:
    # A mypyc that cannot be imported, ahead of the installed one.
    blocker = tmp_path / "blocker" / "mypyc"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no mypyc here')\n")
    path = os.pathsep.join(p for p in (str(blocker.parent), os.environ.get("PYTHONPATH")) if p)
    done = _build(_source(tmp_path), tmp_path / "out", PYTHONPATH=path, DISTLOCK_BUILD="auto")
    notice = _check_pure_wheel(done, tmp_path / "out", tmp_path)
    assert notice.startswith(NOTICE + "mypyc is not importable"), notice


@pytest.mark.build
def test_forcing_the_compiled_build_without_a_compiler_fails_loudly(tmp_path: Path) -> None:
    done = _build(_source(tmp_path), tmp_path / "out", CC="false", DISTLOCK_BUILD="compiled")
    assert done.returncode != 0
    assert "DISTLOCK_BUILD=compiled, but no working C compiler" in done.stdout + done.stderr
    assert not list((tmp_path / "out").glob("*.whl"))


@pytest.mark.build
def test_forcing_the_pure_build_compiles_nothing(tmp_path: Path) -> None:
    done = _build(_source(tmp_path), tmp_path / "out", DISTLOCK_BUILD="pure")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _notices(done) == []
    (wheel,) = (tmp_path / "out").glob("distlock-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = zf.read(f"distlock-{distlock.__version__}.dist-info/METADATA").decode()
    assert _extensions(names) == []
    assert f"\nVersion: {distlock.__version__}\n" in metadata


@pytest.mark.build
@pytest.mark.parametrize("command", [["build_ext", "--inplace"], ["editable_wheel"]])
def test_an_in_place_build_stays_pure(tmp_path: Path, command: list[str]) -> None:
    """What ``pip install -e .`` runs (editable_wheel) and an explicit in-place build: no
    .so beside the sources, which every later run would import in their place."""
    src = _source(tmp_path)
    extra = ["--dist-dir", str(tmp_path / "out")] if command == ["editable_wheel"] else []
    done = subprocess.run(
        [sys.executable, "setup.py", *command, *extra],
        cwd=src, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "DISTLOCK_BUILD": ""},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _notices(done) == [
        "distlock: an in-place (editable) build stays pure; "
        "DISTLOCK_BUILD=compiled compiles in place"
    ]
    assert _extensions([p.name for p in src.rglob("*")]) == []


def test_the_compiled_wheel_holds_every_compiled_module() -> None:
    """The wheel ``.ci/test-compiled`` built (the suite then ran on its modules)."""
    if not os.environ.get("DISTLOCK_WHEEL"):
        pytest.skip("checked by the compiled run (make test-compiled), which builds the wheel")
    wheel = Path(os.environ["DISTLOCK_WHEEL"])
    major, minor = sys.version_info[:2]
    assert wheel.name.startswith(
        f"distlock-{distlock.__version__}-cp{major}{minor}-cp{major}{minor}-"
    ), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = _extensions(zf.namelist())
    stems = {name.split(".")[0] for name in names}
    assert stems == {m.replace(".", "/") for m in COMPILED_MODULES} | {"distlock__mypyc"}, names


def _cibuildwheel() -> dict[str, object]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    config: dict[str, object] = project["tool"]["cibuildwheel"]
    return config


def _selected(config: dict[str, object], identifier: str) -> bool:
    def matches(key: str) -> bool:
        patterns = config.get(key, [])
        assert isinstance(patterns, list)
        return any(fnmatch.fnmatch(identifier, p) for p in patterns)

    return matches("build") and not matches("skip")


def test_cibuildwheel_builds_compiled_wheels_for_cpython_on_linux_and_macos() -> None:
    config = _cibuildwheel()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    # The CPythons requires-python allows, of 3.10 to 3.13 (3.10 lacks typing.Self,
    # asyncio.timeout and Task.uncancel, which the drivers use).
    floor = int(project["requires-python"].removeprefix(">=3."))
    platforms = ("manylinux_x86_64", "manylinux_aarch64", "musllinux_x86_64",
                 "musllinux_aarch64", "macosx_x86_64", "macosx_arm64")
    for minor in range(10, 14):
        for platform in platforms:
            identifier = f"cp3{minor}-{platform}"
            assert _selected(config, identifier) == (minor >= floor), identifier
    for identifier in ("cp312-win_amd64", "cp312-manylinux_i686", "pp310-manylinux_x86_64",
                       "cp313t-manylinux_x86_64", "cp312-pyodide_wasm32"):
        assert not _selected(config, identifier), identifier
    assert config["linux"] == {"archs": ["x86_64", "aarch64"]}
    assert config["macos"] == {"archs": ["x86_64", "arm64"]}
    # A wheel that cannot compile fails the job rather than shipping pure.
    assert config["environment"] == {"DISTLOCK_BUILD": "compiled"}


def test_the_cibuildwheel_test_command_asserts_the_compiled_build(tmp_path: Path) -> None:
    """Run here on the build under test (PYTHONPATH: this tree): it passes on the compiled
    build and fails on the pure one."""
    command = _cibuildwheel()["test-command"]
    assert isinstance(command, str)
    argv = shlex.split(command)
    assert argv[0] == "python", argv
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if os.environ.get("DISTLOCK_EXPECT_CORE") == "compiled":
        assert done.returncode == 0, done.stderr
        assert "build='compiled'" in done.stdout, done.stdout
    else:
        assert done.returncode != 0
        assert "AssertionError" in done.stderr, done.stderr


def _names(specs: list[str]) -> set[str]:
    """The distributions named by requirement ``specs`` (``redis>=5.3``: ``redis``)."""
    return {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower() for spec in specs}


def test_the_isolated_build_has_every_runtime_dependency() -> None:
    # mypyc type-checks what the compiled modules import (redis-py's modules among them);
    # pip's isolated build, the way a user's `pip install` builds, has only what
    # [build-system] requires, and without them mypyc stops and the build falls back to
    # the pure package.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = _names(project["project"]["dependencies"])
    missing = needed - _names(project["build-system"]["requires"])
    assert not missing, f"[build-system] requires lacks {sorted(missing)}"
