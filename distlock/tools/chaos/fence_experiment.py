"""Do fences protect the data end to end?  Two arms of one experiment on a real PostgreSQL.

Worker processes (:mod:`distlock.tools.chaos.fence_worker`), each with its own ``Lock``
(a short TTL, renewed) and its own database session, repeatedly take the lock, read a
balance row, write it back plus one, commit, and only then report the increment as
committed.  In the **fenced** arm the transaction first admits the holder's fence with a
:class:`~distlock.fencing.PostgresFence` (and again before the write); the **unfenced**
control arm runs the same workload without it.  Both arms get the same faults, in order,
each started at a point the workers report (events, not timers):

1. a holder stopped (SIGSTOP) between its read and its write, until its lease lapsed and
   another worker either committed or waits behind the stopped one's row lock; then
   resumed (SIGCONT), to write what it read;
2. a holder stopped right after its grant, before its transaction, until another worker
   committed; then resumed;
3. Redis stopped (SIGSTOP) for 2xTTL under a holder's body;
4. Redis restarted empty (no persistence: the lock keys and the fence counter go) under a
   holder's body;
5. fault 1 again, once increments are committed again.

The verdicts: in the fenced arm the final balance equals the increments reported
committed (no lost update, none applied twice) and the guard refused the paused holder of
fault 2; in the control arm updates were lost (final balance < committed increments),
which shows the experiment can catch what the fences prevent.  Fault 1 is what loses an
update without fences: the resumed holder writes its stale read plus one over the newer
holder's committed increment.  With the guard, the resumed holder's admission holds the
fence row's lock, so the newer holder waits for its commit and reads after it; a holder
paused before its admission (fault 2) is refused as stale.

Fences keep increasing when Redis restarts empty (each is at least a floor on Redis's
clock: see the README's fencing tokens), so the guard admits the first holder after the
restart; the row reports the largest fence before the restart and the first granted after
it, and how many stale fences were refused after the restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from distlock.tools.chaos.processes import ROOT
from distlock.tools.chaos.report import ChaosReport, Row, Status
from distlock.tools.servers.redis_server import RedisServer, ServerNotFound

Arm = Literal["fenced", "unfenced"]
ARMS: tuple[Arm, ...] = ("fenced", "unfenced")

#: ``--scenarios fencing`` runs the experiment.
NAME = "fencing"
SUMMARY = (
    "worker processes increment a PostgreSQL balance under a Lock while holders are "
    "paused past their TTL and Redis is paused and restarted empty: with fences the "
    "final balance equals the increments committed; without (the control arm) updates "
    "are lost"
)
#: Why the experiment does not run against ``--redis URL``.
NEEDS_OWN_REDIS = "pauses and restarts Redis: needs a redis-server this tool started"
NEEDS_PSYCOPG = "needs psycopg 3: pip install 'distlock[postgres]'"

#: The experiment's own tables (``--postgres URL`` refuses them non-empty).
BALANCE_TABLE = "distlock_chaos_balance"
FENCE_TABLE = "distlock_chaos_fences"

WORKERS = 4
TTL_MS = 300
#: Increments committed before the first fault, and after the restart before fault 5.
WARM_UP = 5
#: The longest any one expected event may take before the arm fails as stuck.
WAIT_SECONDS = 60.0

TITLES: dict[Arm, str] = {
    "fenced": "fencing: fenced arm",
    "unfenced": "fencing: unfenced control arm",
}


class TableInUse(RuntimeError):
    """A table the experiment would write holds rows, and reuse was not allowed."""


class ArmFailed(RuntimeError):
    """The arm could not finish (a worker died, an expected event never came)."""


@dataclass
class ArmResult:
    arm: Arm
    workers: int
    ttl_ms: int
    #: Increments the workers reported committed (each only after its COMMIT returned).
    committed: int = 0
    final_balance: int = 0
    #: Admissions the guard refused (StaleFenceError); None in the unfenced arm.
    stale_refused: int | None = None
    #: Sections whose lease was lost (LockLeaseLostError on leaving hold).
    leases_lost: int = 0
    #: Round trips that failed (Redis down or paused under the Lock), retried.
    errors: int = 0
    faults: list[str] = field(default_factory=list)
    #: The largest fence granted before Redis restarted empty, the first one after.
    fence_before_restart: int | None = None
    fence_after_restart: int | None = None
    #: Of ``stale_refused``, those after Redis restarted empty.
    stale_after_restart: int = 0
    seconds: float = 0.0

    @property
    def lost_updates(self) -> int:
        return max(0, self.committed - self.final_balance)

    @property
    def double_applied(self) -> int:
        return max(0, self.final_balance - self.committed)

    def failure(self) -> str | None:
        """Why the arm's verdict failed, or None."""
        if self.arm == "fenced":
            if self.final_balance != self.committed:
                return (
                    f"fenced arm: final balance {self.final_balance} != {self.committed} "
                    f"increments committed ({self.lost_updates} lost, {self.double_applied} "
                    "applied twice)"
                )
            if not self.stale_refused:
                return "fenced arm: the guard refused no stale fence (fault 2 should be)"
            return None
        if self.lost_updates == 0:
            return (
                f"unfenced control arm lost no update (final balance {self.final_balance}, "
                f"{self.committed} committed): the faults did not bite, so the fenced arm's "
                "equality shows nothing"
            )
        return None

    def line(self) -> str:
        stale = (
            "-"
            if self.stale_refused is None
            else f"{self.stale_refused} ({self.stale_after_restart} after the restart)"
        )
        return (
            f"{self.arm:<8} committed={self.committed} final={self.final_balance} "
            f"lost={self.lost_updates} double={self.double_applied} stale refused={stale} "
            f"leases lost={self.leases_lost} faults={len(self.faults)} fences across the "
            f"restart: {self.fence_before_restart} -> {self.fence_after_restart} "
            f"({self.seconds:.1f} s) {'PASS' if self.failure() is None else 'FAIL'}"
        )


# -- the database ----------------------------------------------------------------------


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ServerNotFound(NEEDS_PSYCOPG) from exc
    return psycopg


def _rows_in(conn: Any, table: str) -> int | None:
    """Rows in ``table`` (None: there is no such table)."""
    from psycopg import sql

    row = conn.execute("SELECT to_regclass(%s)", (sql.Identifier(table).as_string(conn),))
    if row.fetchone()[0] is None:
        return None
    found = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
    return int(found.fetchone()[0])


def check_tables(
    dsn: str, *, reuse: bool, tables: Iterable[str] = (BALANCE_TABLE, FENCE_TABLE)
) -> list[str]:
    """The experiment's tables that exist already; a :class:`TableInUse` if one holds
    rows and ``reuse`` is False."""
    psycopg = _psycopg()
    existing: list[str] = []
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        for table in tables:
            rows = _rows_in(conn, table)
            if rows is None:
                continue
            existing.append(table)
            if rows and not reuse:
                raise TableInUse(
                    f"refusing to run the fencing experiment: the table {table!r} at "
                    f"{_without_password(dsn)} holds {rows} row(s); drop it, point "
                    "--postgres at a scratch database, or pass --postgres-reuse to let the "
                    "experiment overwrite its rows"
                )
    return existing


def _without_password(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "the given PostgreSQL"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


class Database:
    """The experiment's two tables: made (or reused) once, reset before each arm, dropped
    at the end if the experiment made them."""

    def __init__(
        self, dsn: str, *, reuse: bool, balance: str = BALANCE_TABLE, fences: str = FENCE_TABLE
    ) -> None:
        from psycopg import sql

        from distlock.fencing import PostgresFence

        self.dsn = dsn
        self.balance = balance
        self.fences = fences
        self.guard = PostgresFence(table=fences)
        self.existed = check_tables(dsn, reuse=reuse, tables=(balance, fences))
        self.conn = _psycopg().connect(dsn, autocommit=True)
        self._balance = sql.Identifier(balance)
        self.conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (id int PRIMARY KEY, value bigint NOT NULL)")
            .format(self._balance)
        )
        self.guard.create_table(self.conn)

    def reset(self) -> None:
        from psycopg import sql

        with self.conn.transaction():
            self.conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, value) VALUES (1, 0)"
                    " ON CONFLICT (id) DO UPDATE SET value = 0"
                ).format(self._balance)
            )
            self.conn.execute(
                sql.SQL("DELETE FROM {} WHERE resource = %s").format(sql.Identifier(self.fences)),
                ("balance",),
            )

    def balance_now(self) -> int:
        from psycopg import sql

        row = self.conn.execute(
            sql.SQL("SELECT value FROM {} WHERE id = 1").format(self._balance)
        ).fetchone()
        return int(row[0])

    def blocked_behind(self, backend: int) -> bool:
        """Another session waits for a lock that session ``backend`` holds."""
        row = self.conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity"
            " WHERE pid <> %s AND %s = ANY(pg_blocking_pids(pid)))",
            (backend, backend),
        ).fetchone()
        return bool(row[0])

    def close(self) -> None:
        from psycopg import sql

        try:
            for table in (self.balance, self.fences):
                if table not in self.existed:
                    drop = sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table))
                    self.conn.execute(drop)
        finally:
            self.conn.close()


# -- the workers -----------------------------------------------------------------------


class _Worker:
    """One :mod:`fence_worker` process: its reports go to the shared queue, tagged."""

    def __init__(
        self, n: int, arm: Arm, redis_url: str, db: Database, ttl_ms: int,
        events: queue.Queue[tuple[int, dict[str, Any]]],
    ) -> None:  # fmt: skip
        from distlock.tools.chaos.fence_worker import POSTGRES_ENV

        self.n = n
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        env[POSTGRES_ENV] = db.dsn
        fd, self._stderr_path = tempfile.mkstemp(prefix="chaos-fence-worker-", suffix=".log")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "distlock.tools.chaos.fence_worker",
                 arm, redis_url, "chaos-fencing", str(n), str(ttl_ms), db.balance, db.fences],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd, cwd=ROOT, env=env,
            )  # fmt: skip
        finally:
            os.close(fd)
        self.backend: int | None = None
        self.stopped = False
        self.done = False
        self._events = events
        self._reader = threading.Thread(target=self._read, name=f"fence-worker-{n}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self._events.put((self.n, json.loads(raw)))
            except ValueError:
                line = raw.decode(errors="replace")
                self._events.put((self.n, {"kind": "garbage", "line": line}))
        self._events.put((self.n, {"kind": "eof"}))

    def answer(self, word: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(word.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: its eof says so

    def sigstop(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.stopped = True

    def sigcont(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def stderr(self) -> str:
        try:
            return Path(self._stderr_path).read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.stopped:
            self.sigcont()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        Path(self._stderr_path).unlink(missing_ok=True)


# -- one arm ---------------------------------------------------------------------------


Event = tuple[int, dict[str, Any]]


class _ArmRun:
    """Runs one arm: the workers, the nemesis's schedule, the tally."""

    def __init__(self, arm: Arm, db: Database, redis: RedisServer, workers: int, ttl_ms: int):
        self.arm = arm
        self.db = db
        self.redis = redis
        self.ttl_ms = ttl_ms
        self.result = ArmResult(arm, workers, ttl_ms, stale_refused=0 if arm == "fenced" else None)
        self.events: queue.Queue[Event] = queue.Queue()
        self.workers: dict[int, _Worker] = {}
        self.started = time.monotonic()
        self.timeline: list[str] = []
        #: Who committed, in order.
        self.commits: list[int] = []
        self.stopping = False
        self.max_fence = 0
        self.restarted = False

    # The event pump: every report is tallied; every question (acquired, read) is
    # answered "go" unless the step waiting for it takes it.

    def _note(self, text: str) -> None:
        self.timeline.append(f"+{time.monotonic() - self.started:7.3f}s {text}")

    def _next(self, timeout: float) -> Event | None:
        """The next report, tallied (None: none within ``timeout``)."""
        try:
            n, msg = self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        kind = msg["kind"]
        fields = " ".join(f"{k}={v}" for k, v in msg.items() if k not in ("kind", "at"))
        self._note(f"worker {n} {kind} {fields}".rstrip())
        r = self.result
        if kind == "ready":
            self.workers[n].backend = int(msg["backend"])
        elif kind == "acquired":
            fence = int(msg["fence"])
            if self.restarted and r.fence_after_restart is None:
                r.fence_after_restart = fence
            self.max_fence = max(self.max_fence, fence)
        elif kind == "committed":
            r.committed += 1
            self.commits.append(n)
        elif kind == "stale":
            assert r.stale_refused is not None
            r.stale_refused += 1
            if self.restarted:
                r.stale_after_restart += 1
        elif kind == "lost":
            r.leases_lost += 1
        elif kind == "error":
            r.errors += 1
        elif kind == "done":
            self.workers[n].done = True
        elif kind in ("eof", "garbage") and not (kind == "eof" and self.workers[n].done):
            raise ArmFailed(
                f"{self.arm} arm: worker {n} said {msg} (exit={self.workers[n].proc.poll()}): "
                f"{self.workers[n].stderr()}"
            )
        return n, msg

    def _answer(self, n: int, msg: dict[str, Any]) -> None:
        if msg["kind"] in ("acquired", "read"):
            self.workers[n].answer("stop" if self.stopping else "go")

    def _pump(
        self,
        what: str,
        *,
        take: Callable[[int, dict[str, Any]], bool] | None = None,
        until: Callable[[], bool] | None = None,
        poll: bool = False,
        seconds: float | None = None,
    ) -> Event | None:
        """Tally and answer reports until one that ``take`` accepts (returned unanswered),
        or until ``until()`` holds (checked after each report; with ``poll``, also every
        20 ms: a database state has no event to block on), or for ``seconds``."""
        give_up = time.monotonic() + (WAIT_SECONDS if seconds is None else seconds)
        while True:
            if until is not None and until():
                return None
            left = give_up - time.monotonic()
            if left <= 0:
                if seconds is not None:
                    return None
                raise ArmFailed(f"{self.arm} arm: no {what} within {WAIT_SECONDS:.0f}s")
            got = self._next(min(left, 0.02) if poll else left)
            if got is None:
                continue
            n, msg = got
            if take is not None and take(n, msg):
                return n, msg
            self._answer(n, msg)

    def _take(self, what: str, take: Callable[[int, dict[str, Any]], bool]) -> Event:
        got = self._pump(what, take=take)
        assert got is not None
        return got

    def _fault(self, text: str) -> None:
        self.result.faults.append(text)
        self._note(f"FAULT {text}")

    def _committed(self, count: int) -> None:
        target = self.result.committed + count
        self._pump(f"{count} increments committed", until=lambda: self.result.committed >= target)

    def _outcome(self, n: int) -> None:
        """Until worker ``n`` reports how its increment ended."""
        self._take(
            f"outcome of worker {n}'s increment",
            lambda m, msg: m == n and msg["kind"] in ("committed", "stale", "error"),
        )

    # The faults.

    def pause_between_read_and_write(self) -> None:
        n, msg = self._take("holder's read", lambda _, msg: msg["kind"] == "read")
        victim = self.workers[n]
        victim.sigstop()
        self._fault(
            f"worker {n} (fence {msg['fence']}) stopped between its read ({msg['value']}) "
            "and its write"
        )
        victim.answer("go")  # read when it resumes
        since = len(self.commits)
        backend = victim.backend
        assert backend is not None

        def overtaken() -> bool:
            # Its lease lapsed (Redis granted the key to no one before) and another
            # worker committed, or waits behind the stopped one's fence row.
            return any(w != n for w in self.commits[since:]) or self.db.blocked_behind(backend)

        self._pump("other worker committing or waiting behind the stopped one", until=overtaken,
                   poll=True)  # fmt: skip
        victim.sigcont()
        self._note(f"worker {n} resumed")
        self._outcome(n)

    def pause_after_grant(self) -> None:
        n, msg = self._take("grant", lambda _, msg: msg["kind"] == "acquired")
        victim = self.workers[n]
        victim.sigstop()
        self._fault(f"worker {n} (fence {msg['fence']}) stopped after its grant, before its "
                    "transaction")  # fmt: skip
        victim.answer("go")
        since = len(self.commits)
        self._pump(
            "other worker committing",
            until=lambda: any(w != n for w in self.commits[since:]),
        )
        victim.sigcont()
        self._note(f"worker {n} resumed")
        self._outcome(n)

    def pause_redis(self) -> None:
        n, _ = self._take("holder's read", lambda _, msg: msg["kind"] == "read")
        self.redis.pause()
        self._fault(f"Redis stopped for {2 * self.ttl_ms} ms under worker {n}'s body")
        self.workers[n].answer("go")
        # The fault's length, not a wait for anything: the workers are answered meanwhile.
        self._pump("", seconds=2 * self.ttl_ms / 1000)
        self.redis.resume()
        self._note("Redis resumed")

    def restart_redis(self) -> None:
        n, _ = self._take("holder's read", lambda _, msg: msg["kind"] == "read")
        self.result.fence_before_restart = self.max_fence
        self.redis.restart()
        self._fault(f"Redis restarted empty under worker {n}'s body")
        self.restarted = True
        self.workers[n].answer("go")

    # The arm.

    def run(self) -> ArmResult:
        self.db.reset()
        try:
            for n in range(1, self.result.workers + 1):
                self.workers[n] = _Worker(
                    n, self.arm, self.redis.url, self.db, self.ttl_ms, self.events
                )
            self._pump(
                "worker ready",
                until=lambda: all(w.backend is not None for w in self.workers.values()),
            )
            self._committed(WARM_UP)
            self.pause_between_read_and_write()
            self.pause_after_grant()
            self.pause_redis()
            self.restart_redis()
            self._committed(WARM_UP)
            self.pause_between_read_and_write()
            self._committed(1)
            self.stopping = True
            self._pump(
                "worker done", until=lambda: all(w.done for w in self.workers.values())
            )
        except ArmFailed as exc:
            raise ArmFailed(f"{exc}\n{self.story()}") from None
        finally:
            if self.redis.paused:
                self.redis.resume()
            for worker in self.workers.values():
                worker.close()
        self.result.final_balance = self.db.balance_now()
        self.result.seconds = time.monotonic() - self.started
        return self.result

    def story(self, last: int = 80) -> str:
        return "timeline (last events):\n" + "\n".join(self.timeline[-last:])


def run_arm(arm: Arm, db: Database, *, workers: int = WORKERS, ttl_ms: int = TTL_MS) -> ArmResult:
    """One arm against a redis-server of its own (a fresh fence counter)."""
    with RedisServer() as redis:
        return _ArmRun(arm, db, redis, workers, ttl_ms).run()


def run_experiment(
    dsn: str, *, reuse: bool = False, arms: Iterable[Arm] = ARMS, workers: int = WORKERS,
    ttl_ms: int = TTL_MS,
) -> list[ArmResult]:  # fmt: skip
    """Both arms, one after the other, against the PostgreSQL at ``dsn``."""
    db = Database(dsn, reuse=reuse)
    try:
        return [run_arm(arm, db, workers=workers, ttl_ms=ttl_ms) for arm in arms]
    finally:
        db.close()


# -- the command's rows ----------------------------------------------------------------


def select(names: Iterable[str] | None) -> tuple[bool, list[str] | None]:
    """Whether ``names`` (None: every scenario) pick the experiment, and the other names
    (None when ``names`` is)."""
    if names is None:
        return True, None
    wanted = list(names)
    return NAME in wanted, [n for n in wanted if n != NAME]



def record(report: ChaosReport, results: Iterable[ArmResult]) -> None:
    """Add each arm's row: passed, or failed with its verdict's reason."""
    for r in results:
        reason = r.failure()
        report.add(
            Row(
                TITLES[r.arm],
                trials=1,
                faults=len(r.faults),
                ok=r.committed,
                lost=r.leases_lost,
                overlaps=0,
                worst_detection_ms=None,
                kind="fencing",
                status="passed" if reason is None else "failed",
                reason=reason,
                committed=r.committed,
                final_balance=r.final_balance,
                lost_updates=r.lost_updates,
                double_applied=r.double_applied,
                stale_refused=r.stale_refused,
                stale_after_restart=None if r.stale_refused is None else r.stale_after_restart,
                fence_before_restart=r.fence_before_restart,
                fence_after_restart=r.fence_after_restart,
            )
        )


def run(
    report: ChaosReport, *, postgres_url: str | None, reuse: bool, external: bool
) -> Status:
    """Run the experiment into ``report`` (starting a PostgreSQL of its own without
    ``postgres_url``), or list its rows as not run, saying why."""
    if external:
        return _not_run(report, NEEDS_OWN_REDIS)
    from distlock.tools.servers.postgres import PostgresServer

    try:
        _psycopg()
        server = None if postgres_url is not None else PostgresServer()
    except ServerNotFound as exc:
        return _not_run(report, str(exc))
    try:
        if server is not None:
            with server:
                results = run_experiment(server.dsn, reuse=reuse)
        else:
            assert postgres_url is not None
            results = run_experiment(postgres_url, reuse=reuse)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        for arm in ARMS:
            row = Row(TITLES[arm], 0, 0, 0, 0, 0, None, status="failed", reason=message)
            row.kind = "fencing"
            report.add(row)
        return "failed"
    record(report, results)
    return "passed" if all(r.failure() is None for r in results) else "failed"


def _not_run(report: ChaosReport, reason: str) -> Status:
    for arm in ARMS:
        report.not_run(TITLES[arm], reason, kind="fencing")
    return "not run"
