"""One worker of the fencing experiment (:mod:`distlock.tools.chaos.fence_experiment`), in a
process of its own so that the experiment can stop it with SIGSTOP, Lock, renewal thread,
database session and all.

``python -m distlock.tools.chaos.fence_worker ARM REDIS_URL PREFIX WORKER TTL_MS BALANCE
FENCES`` with the database's URL in ``DISTLOCK_CHAOS_POSTGRES`` (not on the command line,
where ``ps`` shows it).  ARM is ``fenced`` or ``unfenced``; BALANCE and FENCES are the
tables.  Until told to stop, the worker repeats one increment of the balance row::

    with lock.hold("balance"):              # a Lock of TTL_MS, renewed
        with conn.transaction():
            guard.admit(conn, "balance", handle)     # fenced arm only
            value = SELECT value FROM balance
            (a body: short, one time in LONG_EVERY as long as the TTL)
            guard.admit(conn, "balance", handle)     # fenced arm only: again, same fence
            UPDATE balance SET value = value_read + 1
        report "committed"                   # only once COMMIT has returned

It reports on stdout, one JSON object per line, and after ``acquired`` and after ``read``
it waits for the experiment's answer on stdin (``go``, or ``stop``: roll back, release and
exit), so the experiment can stop it at exactly those two points.  It does not look at
its lease's signal before writing: that check would race with the pause anyway (a holder
can be stopped right after it), which is why the resource has to check the fence.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import psycopg
import redis
from psycopg import sql

from distlock import Lock, LockError, LockLeaseLostError, LockNotAcquiredError, StaleFenceError
from distlock.fencing import PostgresFence

#: The environment variable carrying the database's URL.
POSTGRES_ENV = "DISTLOCK_CHAOS_POSTGRES"
#: The one protected resource: the lock's id and the guard's resource name.
RESOURCE = "balance"
#: One body in this many is as long as the TTL (the lease is renewed through it).
LONG_EVERY = 8
#: However the experiment fares, this process gives up after this long.
MAX_SECONDS = 300.0


class Stop(Exception):
    """The experiment said ``stop`` (or closed stdin)."""


#: Set once the experiment said ``stop``: whatever leaving ``hold`` then raises, the
#: worker ends.
_stopped = False


def _emit(kind: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"kind": kind, "at": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def _ask(kind: str, **fields: Any) -> None:
    """Report ``kind`` and wait for the answer: return on ``go``, raise :class:`Stop`."""
    global _stopped
    _emit(kind, **fields)
    if sys.stdin.readline().strip() != "go":
        _stopped = True
        raise Stop


def run(
    arm: str, url: str, prefix: str, worker: int, ttl_ms: int, balance: str, fences: str
) -> None:
    fenced = arm == "fenced"
    guard = PostgresFence(table=fences)
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    lock = Lock(client, prefix=prefix, ttl_ms=ttl_ms)
    conn = psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True)
    table = sql.Identifier(balance)
    select = sql.SQL("SELECT value FROM {} WHERE id = 1").format(table)
    update = sql.SQL("UPDATE {} SET value = %s WHERE id = 1").format(table)
    _emit("ready", worker=worker, pid=os.getpid(), backend=conn.info.backend_pid)
    give_up = time.monotonic() + MAX_SECONDS
    iteration = 0
    while not _stopped and time.monotonic() < give_up:
        iteration += 1
        fence: int | None = None
        try:
            with lock.hold(RESOURCE, wait_ms=2 * ttl_ms) as handle:
                fence = handle.fence
                _ask("acquired", fence=fence)
                try:
                    with conn.transaction():
                        if fenced:
                            guard.admit(conn, RESOURCE, handle)
                        row = conn.execute(select).fetchone()
                        assert row is not None, f"no row 1 in {balance}"
                        value = int(row[0])
                        _ask("read", fence=fence, value=value)
                        if (iteration + worker) % LONG_EVERY == 0:
                            time.sleep(ttl_ms / 1000)  # the body's own work, renewed
                        if fenced:
                            guard.admit(conn, RESOURCE, handle)
                        conn.execute(update, (value + 1,))
                    _emit("committed", fence=fence, value=value + 1)
                except StaleFenceError as exc:
                    _emit("stale", fence=fence, newest=exc.newest)
        except Stop:
            pass
        except LockLeaseLostError:
            # Raised on leaving hold(), after whatever the body did (already reported).
            _emit("lost", fence=fence)
        except LockNotAcquiredError:
            _emit("not_acquired")
        except (LockError, redis.RedisError, OSError, psycopg.Error) as exc:
            # Redis restarted or paused under the Lock: try again (briefly apart, so a
            # restarting Redis is not met with a busy loop).
            _emit("error", fence=fence, error=f"{type(exc).__name__}: {exc}")
            time.sleep(0.01)
    lock.close()
    client.close()
    conn.close()
    _emit("done", worker=worker, iterations=iteration)


def main(argv: list[str]) -> None:
    arm, url, prefix, worker, ttl_ms, balance, fences = argv
    if arm not in ("fenced", "unfenced"):
        raise SystemExit(f"arm must be fenced or unfenced, not {arm!r}")
    run(arm, url, prefix, int(worker), int(ttl_ms), balance, fences)


if __name__ == "__main__":
    main(sys.argv[1:])
