"""Waiters: clients that wait for the key with ``wait_ms`` while the faults happen.

Every trial runs them beside its victims and intruder (:mod:`~distlock.tools.chaos.trials`):
one on the trial's faulted path (through the proxy, or on the Redis that is paused or
killed), one on a direct connection (the traced trial: the first only).
Each loops until the trial's victims are done: ``run`` with ``wait_ms`` (twice the TTL: a
victim's long body outlasts it, so some waits run out and some end in a grant), a short
cooperative body when granted, and a pause before the next wait so that the victims, who
retry rather than wait, still get their turn (waiters are served first on a release).

Their sections are recorded like everyone's, so the checks every scenario ends with cover
them: a waiter that held the key without the lock overlaps a successful section, or its
grant is not on the wire.  What is theirs alone (``invariants._check_waits``): every wait
ended (granted, timed out or failed) within its ``wait_ms`` plus :data:`WAIT_ALLOWANCE_MS`.
"""

from __future__ import annotations

import asyncio
import threading

from distlock.tools.chaos.clients import AnyAsyncLock, AnyLock, Clients
from distlock.tools.chaos.params import SOCKET_TIMEOUT
from distlock.tools.chaos.recorder import Section, now
from distlock.tools.chaos.sections import Body, Sections

#: Waiters per trial: one on the faulted path, one direct.
WAITERS = 2
#: Waiters of the trial whose trace TLC checks: the one on the faulted path (direct when
#: the trial has no proxy).  Each waiting section is one section more in TLC's model, and
#: a semaphore's traced trial with both waiters costs TLC more than its CPU budget
#: (``tracing.TRACE_CPU_S``).
TRACED_WAITERS = 1
#: A waiter's ``wait_ms``, in TTLs.
WAIT_TTLS = 2
#: How far past its ``wait_ms`` a wait may end on a loaded machine under faults: the
#: attempt in flight at the deadline can hang until the socket timeout, and the client
#: retries a failed command once (two socket timeouts); a grant that arrives after its own
#: lease is given back by a release across the same faulted link, and a connection made
#: anew sends its handshake across it too (a third: under 300 ms of reply latency a wait
#: of 400 ms was seen to end 2.1 s late); and two seconds more for a starved process (a
#: body that holds the GIL or blocks the event loop freezes the waiters beside it) on a
#: loaded machine.
WAIT_ALLOWANCE_MS = 3 * SOCKET_TIMEOUT * 1000 + 2000
#: A granted waiter's body, in TTLs, and its pause before waiting again.
BODY_TTLS = 0.25
PAUSE_TTLS = 1.0
#: After a wait that failed (a connection refused by a disabled proxy fails at once).
ERROR_PAUSE_TTLS = 0.5
#: Bound on one waiter's loop, whatever happens to ``stop``.
MAX_WAITS = 200


def wait_ms(sections: Sections) -> int:
    return WAIT_TTLS * sections.params.ttl_ms


def paths(via_proxy: bool, traced: bool = False) -> list[bool]:
    """Which waiters go through the proxy: the first, when the trial's victims do.  The
    trial whose trace TLC checks has the first only (:data:`TRACED_WAITERS`)."""
    return [via_proxy and i == 0 for i in range(TRACED_WAITERS if traced else WAITERS)]


def sync_threads(
    clients: Clients,
    sections: Sections,
    trial: int,
    stop: threading.Event,
    *,
    via_proxy: bool,
    traced: bool,
) -> list[threading.Thread]:
    """The waiters of ``trial`` as threads, until ``stop`` is set (``traced``: the trial
    whose trace TLC checks)."""
    threads = []
    for i, proxied in enumerate(paths(via_proxy, traced)):
        role = f"waiter{i}"
        lock = clients.sync_lock(clients.sync_client(f"{role}-t{trial}", via_proxy=proxied))
        threads.append(
            threading.Thread(
                target=sync_waiter,
                args=(sections, lock, role, stop),
                name=f"chaos-{role}",
                daemon=True,
            )
        )
    return threads


def sync_waiter(
    sections: Sections, lock: AnyLock, role: str, stop: threading.Event
) -> None:
    """One waiter's loop (a thread's target), until ``stop`` is set."""
    for _ in range(MAX_WAITS):
        if stop.is_set():
            return
        section = sections.run_sync(
            lock,
            role,
            Body(sections.params.ttl_ms * BODY_TTLS, cooperative=True),
            retries=0,
            retry_delay_ms=0,
            wait_ms=wait_ms(sections),
            nest=False,
        )
        if section.entered:
            pause = PAUSE_TTLS
        elif section.outcome == "error":
            pause = ERROR_PAUSE_TTLS
        else:
            continue
        if stop.wait(sections.params.ttl * pause):
            return


async def async_waiters(
    clients: Clients,
    sections: Sections,
    trial: int,
    victims_done: asyncio.Event,
    *,
    via_proxy: bool,
    traced: bool,
) -> None:
    """The waiters as tasks of the victims' event loop, until ``victims_done`` is set."""
    made = []
    locks: list[AnyAsyncLock] = []
    for i, proxied in enumerate(paths(via_proxy, traced)):
        client = clients.async_client(f"waiter{i}-t{trial}", via_proxy=proxied)
        made.append(client)
        locks.append(clients.async_lock(client))
    try:
        await asyncio.gather(
            *(
                _async_waiter(sections, lock, f"waiter{i}", victims_done)
                for i, lock in enumerate(locks)
            )
        )
    finally:
        for lock in locks:
            await lock.aclose()
        for client in made:
            await client.aclose()


async def _async_waiter(
    sections: Sections, lock: AnyAsyncLock, role: str, victims_done: asyncio.Event
) -> None:
    for _ in range(MAX_WAITS):
        if victims_done.is_set():
            return
        section = await sections.run_async(
            lock,
            role,
            Body(sections.params.ttl_ms * BODY_TTLS, cooperative=True),
            retries=0,
            retry_delay_ms=0,
            wait_ms=wait_ms(sections),
        )
        if section.entered:
            pause = PAUSE_TTLS
        elif section.outcome == "error":
            pause = ERROR_PAUSE_TTLS
        else:
            continue
        try:
            await asyncio.wait_for(victims_done.wait(), sections.params.ttl * pause)
        except TimeoutError:
            continue
        return


def until_granted(
    sections: Sections,
    lock: AnyLock, role: str, done: threading.Event, attempts: list[Section]
) -> None:
    """Wait (``wait_ms``, twice the TTL) until someone got the key and let it go; for the
    scenarios whose holder dies, so nobody wakes the waiter: it must find the key freed
    at its re-check."""
    give_up = now() + sections.params.ttl + 10
    while not done.is_set() and now() < give_up:
        section = sections.run_sync(
            lock,
            role,
            Body(sections.params.ttl_ms * 0.5, cooperative=True),
            retries=0,
            retry_delay_ms=0,
            wait_ms=wait_ms(sections),
        )
        attempts.append(section)
        if section.entered:
            done.set()
            return
        if section.outcome == "error":
            done.wait(0.005)


def poll_until_granted(
    sections: Sections,
    lock: AnyLock, role: str, done: threading.Event, attempts: list[Section]
) -> None:
    """Try (fail fast) every 5 ms until someone got the key and let it go."""
    give_up = now() + sections.params.ttl + 10
    while not done.is_set() and now() < give_up:
        body = Body(sections.params.ttl_ms * 0.5, cooperative=True)
        section = sections.run_sync(lock, role, body, retries=0, retry_delay_ms=5)
        attempts.append(section)
        if section.entered:
            done.set()
            return
        done.wait(0.005)


def beside_a_dead_holder(
    clients: Clients,
    sections: Sections,
    trial: int, done: threading.Event, attempts: list[Section], pollers: int
) -> list[threading.Thread]:
    """The contenders of a scenario whose holder is killed: ``pollers`` fail-fast callers
    and :data:`WAITERS` waiters, each on a direct connection of its own, recording their
    sections in ``attempts``; the first to get the key sets ``done``.  Nobody wakes the
    waiters (the dead holder never releases): each must find the key freed at its
    re-check."""
    roles = [(f"poller{i}", poll_until_granted) for i in range(pollers)]
    roles += [(f"waiter{i}", until_granted) for i in range(WAITERS)]
    return [
        threading.Thread(
            target=target,
            args=(
                sections,
                clients.sync_lock(clients.sync_client(f"{role}-t{trial}", via_proxy=False)),
                role,
                done,
                attempts,
            ),
            name=f"chaos-{role}",
            daemon=True,
        )
        for role, target in roles
    ]
