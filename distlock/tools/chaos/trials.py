"""Trials: several clients contend for one key while a fault is injected, and all is recorded.

A trial has *victims* (clients whose traffic goes through the Toxiproxy proxy, or that
share the faulted Redis), an *intruder* (a client on a direct connection that keeps trying
to take the key, so that whenever a victim's lease lapses someone really does take it),
*waiters* (:mod:`distlock.tools.chaos.waiters`), and an *injector* that runs the
scenario's fault (:mod:`distlock.tools.chaos.faults` waits for a victim to be inside its
body with at least one successful renewal on the wire, then injects it and heals it).

On a semaphore (``Params.limit``) the same roles take permits of one key, and the
checks allow ``limit`` bodies at once where a lock allows one (``invariants.check``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio

from distlock.tools.chaos import waiters
from distlock.tools.chaos.clients import AnyAsyncLock, AnyLock, Clients
from distlock.tools.chaos.failures import ScenarioFailed, timeline
from distlock.tools.chaos.leaks import leaked_tasks
from distlock.tools.chaos.params import RETRIES, TRIAL_TIMEOUT, Params
from distlock.tools.chaos.recorder import Recorder, now
from distlock.tools.chaos.sections import Body, Sections
from distlock.tools.chaos.tracing import TrialTrace

#: Attempts per planned body when the acquire itself fails with a connection error.
VICTIM_ATTEMPTS = 20
#: Victims of a scenario's traced trial (the others have three): the fault lands on the
#: first body, and each section at once is a section more in TLC's model.  With the
#: intruder and the trial's waiter, three sections at once at most: a lock's trace with
#: three victims cost TLC 45-90 s of CPU, past its bound on a loaded machine; and
#: ``spec/Reentrant.tla`` has three holders (its ASSUME allows no more), so a reentrant
#: trial with more would be skipped.  The other trials keep their three victims, for the
#: invariants checked on every trial; so does a semaphore's traced trial, whose victims
#: are what takes it over its limit, and whose check is shorter (``SEMAPHORE_TRACE_TTLS``).
TRACED_VICTIMS = 1

class Injector(threading.Thread):
    """Runs the scenario's fault function; its exception fails the trial."""

    def __init__(self, fault: Callable[[], None]) -> None:
        super().__init__(name="chaos-injector", daemon=True)
        self.fault = fault
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            self.fault()
        except BaseException as exc:
            self.errors.append(exc)


class Trials:
    """Runs a scenario's trials: its victims, intruder, waiters and injector, in threads
    (:meth:`run_sync`) or as tasks of one event loop (:meth:`run_async`).  Waiters join
    every trial, the one whose trace TLC checks too: the trace check takes a waiting
    section's blocks, wake-ups, withdrawals and handed keys (see
    :mod:`distlock.tools.tracecheck`); that trial has fewer of them
    (``waiters.TRACED_WAITERS``)."""

    def __init__(
        self,
        params: Params,
        recorder: Recorder,
        trace: TrialTrace,
        clients: Clients,
        sections: Sections,
    ) -> None:
        self.params = params
        self.recorder = recorder
        self.trace = trace
        self.clients = clients
        self.sections = sections

    def victim_bodies(self, trial: int, index: int) -> list[Body]:
        """A long first body (so faults land inside it) and a short second one.

        Long bodies are oblivious in most trials, so a lapsed lease leaves a body running
        while someone else takes the key; cooperative in one of ``cooperative_every``.
        """
        cooperative = self.params.cooperative(trial)
        return [
            Body(self.params.ttl_ms * 3.0, cooperative=cooperative),
            Body(self.params.ttl_ms * 0.5, cooperative=True),
        ]

    def _victims(self, trial: int, victims: int) -> int:
        """The victims of ``trial``: fewer in a lock's traced trial (:data:`TRACED_VICTIMS`)."""
        if self.trace.traced(trial) and self.params.limit is None:
            return min(victims, TRACED_VICTIMS)
        return victims

    def run_sync(
        self,
        trial: int,
        fault: Callable[[], None] | None,
        *,
        victims: int = 3,
        bodies: Callable[[int, int], list[Body]] | None = None,
        intruder: bool = True,
        victim_client: dict[str, Any] | None = None,
        via_proxy: bool = True,
        on_client: Callable[[str, redis.Redis], None] | None = None,
    ) -> None:
        """Victims on Locks over the faulted path (two share one Lock), an intruder on a
        direct connection, and the injector, all as threads of this process."""
        self.recorder.trials += 1
        self.trace.start(trial)
        victims = self._victims(trial, victims)
        make_bodies = bodies or self.victim_bodies
        options = victim_client or {}
        # Two victims share a Lock (and its client) unless each needs its own connection.
        share = not options.get("single_connection_client")
        shared: tuple[AnyLock, redis.Redis] | None = None
        threads: list[threading.Thread] = []
        for i in range(victims):
            role = f"victim{i}"
            if share and i < 2 and shared is not None:
                lock, client = shared
            else:
                client = self.clients.sync_client(
                    f"{role}-t{trial}", via_proxy=via_proxy, **options
                )
                lock = self.clients.sync_lock(client)
                if share and i == 0:
                    shared = (lock, client)
            if on_client is not None:
                on_client(role, client)
            threads.append(
                threading.Thread(
                    target=self._sync_victim,
                    args=(lock, role, make_bodies(trial, i)),
                    name=f"chaos-{role}",
                    daemon=True,
                )
            )
        stop = threading.Event()
        intruder_thread = self._intruder_thread(trial, stop) if intruder else None
        injector = None if fault is None else Injector(fault)
        waiting = waiters.sync_threads(
            self.clients, self.sections, trial, stop,
            via_proxy=via_proxy, traced=self.trace.traced(trial),
        )
        self.run_threads(threads, injector, intruder_thread, stop, waiting)
        self.clients.close_sync()
        self.trace.stop()

    def _intruder_thread(self, trial: int, stop: threading.Event) -> threading.Thread:
        """The intruder: a sync client straight to Redis, never through the proxy."""
        client = self.clients.sync_client(f"intruder-t{trial}", via_proxy=False)
        lock = self.clients.sync_lock(client)
        return threading.Thread(
            target=self._sync_intruder, args=(lock, stop), name="chaos-intruder", daemon=True
        )

    def run_threads(
        self,
        victims: list[threading.Thread],
        injector: Injector | None,
        intruder: threading.Thread | None,
        stop: threading.Event,
        waiting: Sequence[threading.Thread] = (),
    ) -> None:
        helpers: list[threading.Thread] = [x for x in (injector, intruder) if x is not None]
        helpers.extend(waiting)
        for t in [*victims, *helpers]:
            t.start()
        give_up = now() + TRIAL_TIMEOUT
        for t in victims:
            t.join(timeout=max(0.0, give_up - now()))
        stop.set()
        for t in helpers:
            t.join(timeout=max(0.0, give_up - now()))
        hung = [t.name for t in [*victims, *helpers] if t.is_alive()]
        if hung:
            raise ScenarioFailed(
                f"{self.params.name}: still running after {TRIAL_TIMEOUT}s: {hung}\n"
                + timeline(self.recorder)
            )
        if injector is not None and injector.errors:
            raise injector.errors[0]

    def _sync_victim(self, lock: AnyLock, role: str, plan: list[Body]) -> None:
        for body in plan:
            # A fault can fail the acquire itself (a connection error, never contention):
            # try again so that every planned body runs.
            for _ in range(VICTIM_ATTEMPTS):
                section = self.sections.run_sync(
                    lock, role, body, retries=RETRIES, retry_delay_ms=10, nest=self.params.reentrant
                )
                if section.entered or section.outcome != "error":
                    break
                time.sleep(0.01)

    def _sync_intruder(self, lock: AnyLock, stop: threading.Event) -> None:
        for _ in range(200):
            section = self.sections.poll_until_entered(lock, stop)
            if section is None:
                return
            # Let the victims have the key between two intrusions.
            if stop.wait(self.params.ttl * 1.5):
                return

    def run_async(
        self,
        trial: int,
        fault: Callable[[], None] | None,
        *,
        victims: int = 3,
        bodies: Callable[[int, int], list[Body]] | None = None,
        intruder: bool = True,
        cancel_on_loss: bool = True,
        via_proxy: bool = True,
    ) -> None:
        """Victims as tasks of one event loop (two share one AsyncLock); the intruder and
        the injector are threads, so they keep going when the loop is blocked."""
        self.recorder.trials += 1
        self.trace.start(trial)
        victims = self._victims(trial, victims)
        make_bodies = bodies or self.victim_bodies
        stop = threading.Event()
        intruder_thread = self._intruder_thread(trial, stop) if intruder else None
        injector = None if fault is None else Injector(fault)
        for t in (injector, intruder_thread):
            if t is not None:
                t.start()
        problems: list[str] = []
        try:
            asyncio.run(
                self._async_main(trial, victims, make_bodies, cancel_on_loss, via_proxy, problems)
            )
        finally:
            stop.set()
            give_up = now() + TRIAL_TIMEOUT
            for t in (injector, intruder_thread):
                if t is not None:
                    t.join(timeout=max(0.0, give_up - now()))
        hung = [t.name for t in (injector, intruder_thread) if t is not None and t.is_alive()]
        if hung:
            problems.append(f"still running: {hung}")
        if problems:
            raise ScenarioFailed(
                f"{self.params.name}: " + "; ".join(problems) + "\n" + timeline(self.recorder)
            )
        if injector is not None and injector.errors:
            raise injector.errors[0]
        self.clients.close_sync()
        self.trace.stop()

    async def _async_main(
        self,
        trial: int,
        victims: int,
        make_bodies: Callable[[int, int], list[Body]],
        cancel_on_loss: bool,
        via_proxy: bool,
        problems: list[str],
    ) -> None:
        try:
            await asyncio.wait_for(
                self._async_victims(trial, victims, make_bodies, cancel_on_loss, via_proxy),
                TRIAL_TIMEOUT,
            )
        except TimeoutError:
            problems.append(f"asyncio victims still running after {TRIAL_TIMEOUT}s")
        left = await leaked_tasks()
        if left:
            problems.append(f"asyncio tasks left after aclose(): {left}")

    async def _async_victims(
        self,
        trial: int,
        victims: int,
        make_bodies: Callable[[int, int], list[Body]],
        cancel_on_loss: bool,
        via_proxy: bool,
    ) -> None:
        clients: list[redis.asyncio.Redis] = []
        locks: list[AnyAsyncLock] = []

        def new_lock(role: str) -> AnyAsyncLock:
            client = self.clients.async_client(role, via_proxy=via_proxy)
            clients.append(client)
            lock = self.clients.async_lock(client)
            locks.append(lock)
            return lock

        shared = new_lock(f"victim-shared-t{trial}")

        async def victim(lock: AnyAsyncLock, role: str, plan: list[Body]) -> None:
            for body in plan:
                for _ in range(VICTIM_ATTEMPTS):
                    section = await self.sections.run_async(
                        lock,
                        role,
                        body,
                        retries=RETRIES,
                        retry_delay_ms=10,
                        cancel_on_loss=cancel_on_loss,
                        nest=self.params.reentrant,
                    )
                    if section.entered or section.outcome != "error":
                        break
                    await asyncio.sleep(0.01)

        victims_done = asyncio.Event()
        waiting = asyncio.create_task(
            waiters.async_waiters(
                self.clients, self.sections, trial, victims_done,
                via_proxy=via_proxy, traced=self.trace.traced(trial),
            )
        )
        tasks = []
        for i in range(victims):
            lock = shared if i < 2 else new_lock(f"victim{i}-t{trial}")
            tasks.append(asyncio.create_task(victim(lock, f"victim{i}", make_bodies(trial, i))))
        try:
            await asyncio.gather(*tasks)
        finally:
            victims_done.set()
            try:
                # The waiters end their current wait (bounded by its wait_ms) and stop.
                await waiting
            finally:
                for lock in locks:
                    await lock.aclose()
                for client in clients:
                    await client.aclose()
