"""The documentation under docs/ does what it says: every Python example runs against a
real redis-server (and a real PostgreSQL server for the examples that connect to one) and
prints what its comments say it prints; every restricted user docs/acl.md documents is
enough for its primitive in its mode, and no more; the errors page names every error and
every loss reason there is."""

from __future__ import annotations

import contextlib
import io
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis

import distlock
import distlock.errors
from distlock import Election, Lock, ReadWriteLock, ReentrantLock, Semaphore
from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from distlock.errors import LossReason
from distlock.tools.inspect import inspect, read_only_acl
from distlock.tools.verify import RUNS
from tests.docs_acl import documented_acls
from tests.redis_server import RedisServer

if TYPE_CHECKING:
    from tests.postgres_server import PostgresServer

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
POSTGRES_DSN = "postgresql://postgres@localhost:5432/postgres"
#: A line that prints, and the output its comment promises: ``print(x)  # expected``.
PRINTS = re.compile(r"^\s*print\(.*\)\s*#\s*(\S.*?)\s*$")


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def run_example(
    source: str, path: Path, redis_server: RedisServer, request: pytest.FixtureRequest
) -> None:
    """Runs one example against the test's servers, and checks that it prints, line by
    line, what its ``print(...)  # expected`` comments say."""
    code = source.replace("redis://localhost:6379/0", redis_server.url)
    if POSTGRES_DSN in code:  # the PostgreSQL server starts only for the examples that use it
        server: PostgresServer = request.getfixturevalue("postgres_server")
        code = code.replace(POSTGRES_DSN, server.dsn)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(path), "exec"), {"__name__": "docs"})
    expected = [m.group(1) for m in map(PRINTS.match, source.splitlines()) if m is not None]
    assert printed.getvalue().splitlines() == expected


EXAMPLES = [
    (path, i, source)
    for path in sorted(DOCS.rglob("*.md"))
    for i, source in enumerate(python_blocks(path))
]


def test_the_docs_have_examples() -> None:
    assert len(EXAMPLES) >= 18


@pytest.mark.parametrize(
    ("path", "source"),
    [(path, source) for path, _, source in EXAMPLES],
    ids=[f"{path.relative_to(DOCS)}:{i}" for path, i, _ in EXAMPLES],
)
def test_docs_example_runs(
    path: Path, source: str, redis_server: RedisServer, request: pytest.FixtureRequest
) -> None:
    run_example(source, path, redis_server, request)


# The errors page.


def test_the_errors_page_names_every_error_and_every_loss_reason() -> None:
    page = (DOCS / "errors.md").read_text(encoding="utf-8")
    errors = [
        name for name, value in vars(distlock.errors).items()
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert [name for name in errors if f"`{name}`" not in page] == []
    assert [r.name for r in LossReason if f"| `{r.name}` |" not in page] == []


# The guarantees page: each claim's property, and the broken variants that refute it.


def test_every_claim_names_runs_that_refute_its_property() -> None:
    runs = {run.name: run for run in RUNS}
    page = (DOCS / "guarantees.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) >= 15
    for row in rows:
        _, prop, variants, reproduce = (c.strip() for c in row.strip("|").split("|"))
        [prop_name] = re.findall(r"`(\w+)`", prop)
        for variant in re.findall(r"`([\w-]+)`", variants):
            assert variant in runs, variant
            assert runs[variant].expected == "violates" and runs[variant].refutes == prop_name, row
        for only in re.findall(r"--only ([\w-]+)", reproduce):
            assert any(name.startswith(only) for name in runs), only


def test_the_readme_claims_name_runs_that_refute_their_property() -> None:
    runs = {run.name: run for run in RUNS}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pairs = re.findall(r"^\|.*?\| (`\w+`(?:, `\w+`)*) \(([^)]*)\) \|$", readme, flags=re.M)
    assert len(pairs) >= 8
    for props, variants in pairs:
        named = re.findall(r"`(\w+)`", props)
        for variant in re.findall(r"`([\w-]+)`", variants):
            assert runs[variant].expected == "violates" and runs[variant].refutes in named, variant


# The restricted users of docs/acl.md, each run in its mode.


def lock_fail_fast(client: redis.Redis, admin: redis.Redis) -> None:
    with Lock(client, prefix="orders", ttl_ms=10_000) as locks:
        assert locks.run("1", lambda h: h.fence) >= 1
        assert locks.run_many(["2", "3"], lambda group: group.keys) == ["orders:2", "orders:3"]
        handle = locks.acquire("4")
        assert handle is not None and handle.extend(20_000)
        assert locks.acquire("4") is None
        admin.script_flush()  # EVALSHA fails, EVAL takes over
        assert handle.release() is True


def reentrant_fail_fast(client: redis.Redis, admin: redis.Redis) -> None:
    with ReentrantLock(client, prefix="orders", ttl_ms=10_000) as locks:
        with locks.hold("5") as outer, locks.hold("5") as inner:
            assert (outer.depth, inner.depth) == (1, 2)
        handle = locks.acquire("6")
        assert handle is not None and handle.extend(20_000)
        admin.script_flush()
        assert handle.release() is True


def handed_over(
    admin: redis.Redis, queue: str, acquire: Callable[[], object], release: Callable[[], bool]
) -> object:
    """A waiter queues in a thread; ``release`` then hands it the key (or wakes it)."""
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(acquire()))
    waiter.start()
    while not admin.exists(queue):
        waiter.join(0.01)
    assert release() is True
    waiter.join()
    return got[0]


def locks_waiting(client: redis.Redis, admin: redis.Redis) -> None:
    with Lock(client, prefix="orders", ttl_ms=10_000) as locks:
        held = locks.acquire("7")
        assert held is not None
        assert locks.acquire("7", wait_ms=50) is None  # queued, blocked, timed out
        got = handed_over(
            admin, queue_keys("orders:7")[0], lambda: locks.acquire("7", wait_ms=60_000),
            held.release,
        )
        assert isinstance(got, distlock.LockHandle) and got.release()
    with ReentrantLock(client, prefix="orders", ttl_ms=10_000) as rlocks:
        rheld = rlocks.acquire("8")
        assert rheld is not None
        got = handed_over(
            admin, queue_keys("orders:8", Kind.REENTRANT)[0],
            lambda: rlocks.acquire("8", wait_ms=60_000), rheld.release,
        )
        assert isinstance(got, distlock.ReentrantHandle) and got.release()
    assert not admin.exists(*queue_keys("orders:7")[:2])


def semaphore_fail_fast(client: redis.Redis, admin: redis.Redis) -> None:
    with Semaphore(client, prefix="workers", limit=2, ttl_ms=10_000) as sem:
        assert sem.run("1", lambda p: p.held) is True
        a, b = sem.acquire("2"), sem.acquire("2")
        assert a is not None and b is not None and sem.acquire("2") is None
        assert a.extend(20_000)
        admin.script_flush()
        assert a.release() and b.release()


def semaphore_waiting(client: redis.Redis, admin: redis.Redis) -> None:
    with Semaphore(client, prefix="workers", limit=1, ttl_ms=10_000) as sem:
        held = sem.acquire("3")
        assert held is not None
        assert sem.acquire("3", wait_ms=50) is None
        got = handed_over(
            admin, queue_keys("workers:3", Kind.SEMAPHORE)[0],
            lambda: sem.acquire("3", wait_ms=60_000), held.release,
        )
        assert isinstance(got, distlock.PermitHandle) and got.release()


def readwrite_calls(client: redis.Redis, admin: redis.Redis) -> None:
    with ReadWriteLock(client, prefix="docs", ttl_ms=10_000) as rw:
        assert rw.read.run("1", lambda h: h.held) is True
        reader = rw.read.acquire("2")
        assert reader is not None and reader.extend(20_000)
        writer = ReadWriteLock(client, prefix="docs", ttl_ms=10_000)
        got = handed_over(
            admin, queue_keys("docs:2", Kind.WRITE)[0],
            lambda: writer.write.acquire("2", wait_ms=60_000), reader.release,
        )
        assert isinstance(got, distlock.RoleHandle) and got.fence > reader.fence
        assert writer.write.acquire("3") is not None
        assert rw.read.acquire("3", wait_ms=50) is None  # queued behind the writer, gave up
        assert writer.write.force_unlock("3")
        assert got.release()
        writer.close()


def operator_calls(client: redis.Redis, admin: redis.Redis) -> None:
    with Lock(client, prefix="orders", ttl_ms=10_000) as locks:
        handle = locks.acquire("9")
        assert handle is not None and locks.locked("9")
        owner = locks.owner("9")
        assert owner is not None and owner.token_prefix == handle.token[:8]
        assert locks.force_unlock("9") and not locks.locked("9")
        assert handle.release() is False
    with ReentrantLock(client, prefix="orders", ttl_ms=10_000) as rlocks, rlocks.hold("10") as h:
        owner = rlocks.owner("10")
        assert owner is not None and owner.fence == h.fence


def election_calls(client: redis.Redis, admin: redis.Redis) -> None:
    """A campaign, one that waits and gives up, a handoff and leader() (observe() under
    this user, and each of its rights taken away: tests/drivers/_async/test_acl.py)."""
    with (
        Election(client, "2", identity="a", ttl_ms=10_000) as a,
        Election(client, "2", identity="b", ttl_ms=10_000) as b,
    ):
        first = a.campaign(wait_ms=0)
        assert first is not None
        assert b.campaign(wait_ms=50) is None  # queued, blocked, gave up
        got = handed_over(
            admin, queue_keys("election:2", Kind.CAMPAIGN)[0],
            lambda: b.campaign(wait_ms=60_000), first.resign,
        )
        assert isinstance(got, distlock.Leadership) and got.fence > first.fence
        now = a.leader()
        assert now is not None and (now.identity, now.fence) == ("b", got.fence)
        assert got.resign() and a.leader() is None


def inspector(client: redis.Redis, admin: redis.Redis) -> None:
    assert documented_acls()["inspector"] == ["on", ">s3cret", *read_only_acl("order")]
    with Lock(admin, prefix="order") as locks, locks.hold("1") as handle:
        [held] = inspect(client, prefix="order").held
        assert held.token_prefix == handle.token[:8]


#: Each documented user, and what it must be able to do.
EXERCISES: dict[str, Callable[[redis.Redis, redis.Redis], None]] = {
    "locker-fast": lock_fail_fast,
    "reentrant-fast": reentrant_fail_fast,
    "locker": locks_waiting,
    "worker": semaphore_fail_fast,
    "worker-waits": semaphore_waiting,
    "operator": operator_calls,
    "inspector": inspector,
    "docs-rw": readwrite_calls,
    "elector": election_calls,
}


def test_every_documented_user_is_exercised() -> None:
    assert set(documented_acls()) == set(EXERCISES)


@pytest.mark.parametrize("user", sorted(EXERCISES))
def test_the_documented_user_is_enough_and_restrictive(
    user: str, fresh_redis: RedisServer
) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    admin.execute_command("ACL", "SETUSER", user, *documented_acls()[user])  # type: ignore[no-untyped-call]
    client = redis.Redis(port=fresh_redis.port, username=user, password="s3cret")
    try:
        EXERCISES[user](client, admin)
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.get("elsewhere:1")
    finally:
        client.close()
        admin.close()
