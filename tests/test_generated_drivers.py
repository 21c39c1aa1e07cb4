"""The sync driver is generated from the asyncio one (``tools/unasync.py``), and so are the
sync driver tests (``tests/drivers/_sync`` from ``tests/drivers/_async``): the checked-in
modules must be exactly what the transform writes, and the public modules must show only
their public names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_ASYNCIO = {
    "Election",
    "Leadership",
    "Lock",
    "LockGroup",
    "LockHandle",
    "PermitHandle",
    "ReadLock",
    "ReadWriteLock",
    "ReentrantHandle",
    "ReentrantLock",
    "RoleHandle",
    "Semaphore",
    "WriteLock",
}


def test_the_sync_driver_and_its_tests_are_what_the_transform_writes() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_each_generated_module_names_its_source() -> None:
    generated = sorted((ROOT / "distlock" / "_sync").glob("*.py"))
    hand_written = {"backend.py", "cancellation.py"}
    for path in generated:
        first = path.read_text().splitlines()[0]
        if path.name in hand_written:
            assert not first.startswith("# Generated"), path
            continue
        assert first == (
            f"# Generated from distlock/_async/{path.name} by tools/unasync.py: do not edit."
        ), path
        assert (ROOT / "distlock" / "_async" / path.name).exists()


def test_each_generated_driver_test_names_its_source() -> None:
    """Every driver test is written once, in ``tests/drivers/_async``: each sync module but
    the hand-written ``concurrency.py`` is generated, and each asyncio test module has its
    sync twin (so both drivers run the same tests)."""
    sources = ROOT / "tests" / "drivers" / "_async"
    targets = ROOT / "tests" / "drivers" / "_sync"
    tests = sorted(path.name for path in sources.glob("test_*.py"))
    assert tests and tests == sorted(path.name for path in targets.glob("test_*.py"))
    for name in tests:
        first = (targets / name).read_text().splitlines()[0]
        assert first == (
            f"# Generated from tests/drivers/_async/{name} by tools/unasync.py: do not edit."
        ), name
    for package in (sources, targets):
        first = (package / "concurrency.py").read_text().splitlines()[0]
        assert not first.startswith("# Generated"), package


def test_the_asyncio_module_shows_its_public_names_only() -> None:
    assert set(distlock.asyncio.__all__) == PUBLIC_ASYNCIO
    shown = {name for name in dir(distlock.asyncio) if not name.startswith("__")}
    assert shown == PUBLIC_ASYNCIO


def test_both_drivers_offer_the_same_primitives() -> None:
    for name in PUBLIC_ASYNCIO:
        sync, aio = getattr(distlock, name), getattr(distlock.asyncio, name)
        assert sync is not aio
        assert sync.__module__.startswith("distlock._sync.")
        assert aio.__module__.startswith("distlock._async.")


def test_only_the_backends_reach_asyncio_threads_and_redis_clients() -> None:
    """The driver modules go through ``backend``/``cancellation`` for everything asyncio and
    threads do differently: none of them imports an event loop, a thread or a client
    module of its own (redis-py's exceptions are the same in both)."""
    import ast

    runtime = {"asyncio", "threading", "time", "concurrent", "redis", "redis.asyncio"}
    for package in ("_async", "_sync"):
        for path in sorted((ROOT / "distlock" / package).glob("*.py")):
            if path.name in {"backend.py", "cancellation.py"}:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                else:
                    continue
                assert not runtime & set(names), f"{path.name} imports {names}"


def _types_accept_cluster_clients(
    sync: redis.RedisCluster, asyn: aredis.RedisCluster
) -> tuple[distlock.Lock, distlock.asyncio.Lock]:
    # Never called: mypy --strict checks that both drivers take RedisCluster clients.
    return distlock.Lock(sync), distlock.asyncio.Lock(asyn)


def _types_tell_the_primitives_apart(
    sem: distlock.Semaphore,
    rlocks: distlock.ReentrantLock,
    asem: distlock.asyncio.Semaphore,
    permit: distlock.PermitHandle,
) -> None:
    # Never called: mypy --strict (whose unused-ignore warning fails the run) checks that
    # each line is an error, so a Semaphore or ReentrantLock is no Lock to a type checker,
    # and what they do not offer is absent.
    def wants_lock(locks: distlock.Lock) -> None: ...

    def wants_async_lock(locks: distlock.asyncio.Lock) -> None: ...

    wants_lock(sem)  # type: ignore[arg-type]
    wants_lock(rlocks)  # type: ignore[arg-type]
    wants_async_lock(asem)  # type: ignore[arg-type]
    sem.hold_many(["a", "b"])  # type: ignore[attr-defined]
    rlocks.run_many(["a", "b"], lambda g: None)  # type: ignore[attr-defined]
    sem.owner("k")  # type: ignore[attr-defined]
    _ = permit.fence  # type: ignore[attr-defined]
