"""Leak checks: threads, sockets and server-side connections left behind by a scenario.

Taken before the scenario and checked after every Lock and client was closed.  Closing is
allowed to take a moment (a renewal stuck on a hung connection ends at its socket
timeout), so the check polls up to a bound instead of demanding it instantly.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass

import redis


def _socket_fds() -> set[str]:
    fds: set[str] = set()
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return fds
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:"):
            fds.add(f"{name}->{target}")
    return fds


def server_connections(admin: redis.Redis, name_prefix: str) -> list[str]:
    """Connections Redis sees from clients whose CLIENT SETNAME starts with ``name_prefix``."""
    clients = admin.client_list()
    return [
        f"{c.get('name')}@{c.get('addr')}"
        for c in clients
        if str(c.get("name", "")).startswith(name_prefix)
    ]


@dataclass
class Baseline:
    threads: set[int]
    sockets: set[str]

    @classmethod
    def take(cls) -> Baseline:
        return cls({t.ident or 0 for t in threading.enumerate()}, _socket_fds())


#: The sync driver's process-wide threads (one timer, a bounded pool of workers), shared by
#: every Lock of the process and ended when idle: not any scenario's to leak.
PROCESS_THREADS = ("distlock-timer", "distlock-worker")


def leaked_threads(
    baseline: Baseline, ignore: Collection[threading.Thread] = ()
) -> list[str]:
    """Threads started since ``baseline`` and still running, but for ``ignore``."""
    return [
        f"{t.name} (daemon={t.daemon})"
        for t in threading.enumerate()
        if t.is_alive()
        and (t.ident or 0) not in baseline.threads
        and not t.name.startswith(PROCESS_THREADS)
        and t not in ignore
    ]


def leaked_sockets(baseline: Baseline) -> list[str]:
    """New sockets beyond the baseline's count (a reconnected admin client swaps one for one)."""
    current = _socket_fds()
    if len(current) <= len(baseline.sockets):
        return []
    return sorted(current - baseline.sockets)


def check_no_leaks(
    baseline: Baseline,
    *,
    admin: redis.Redis | None,
    name_prefix: str,
    timeout: float = 10.0,
    ignore_threads: Collection[threading.Thread] = (),
) -> list[str]:
    """Poll until nothing is left over, or return what still is after ``timeout``
    (``ignore_threads``: threads meant to outlive the scenario)."""
    give_up = time.monotonic() + timeout
    problems: list[str] = []
    while True:
        problems = [
            f"thread left running: {t}" for t in leaked_threads(baseline, ignore_threads)
        ]
        problems += [f"socket left open: {s}" for s in leaked_sockets(baseline)]
        if admin is not None:
            try:
                problems += [
                    f"server still sees connection {c}"
                    for c in server_connections(admin, name_prefix)
                ]
            except redis.RedisError as exc:
                problems.append(f"could not list server connections: {exc!r}")
        if not problems or time.monotonic() >= give_up:
            return problems
        time.sleep(0.05)


async def leaked_tasks(within: float = 5.0) -> list[str]:
    """Tasks of the running loop other than the caller, after letting them finish."""
    current = asyncio.current_task()
    give_up = time.monotonic() + within
    while True:
        others = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        if not others or time.monotonic() >= give_up:
            return [repr(t) for t in others]
        await asyncio.sleep(0.02)
