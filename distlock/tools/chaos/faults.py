"""The fault: injected once a victim is inside its body, held until its signal fires.

A scenario's fault function runs in the trial's injector thread
(:class:`~distlock.tools.chaos.trials.Injector`); :meth:`Faults.inject` waits for its
victim, and the victims a fault is meant to lapse are the ones the end of the scenario
requires to have surfaced their loss (:attr:`Faults.targets`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from distlock.tools.chaos.clients import Clients
from distlock.tools.chaos.failures import ScenarioFailed
from distlock.tools.chaos.params import TRIAL_TIMEOUT, Params
from distlock.tools.chaos.recorder import Recorder, Section
from distlock.tools.chaos.sections import Body, Sections

#: How long the injector waits for a victim to renew inside its body.
ARM_TIMEOUT = 10.0

Fault = Callable[[Section], None]


class Faults:
    """Where and for how long a scenario's fault lands."""

    def __init__(
        self, params: Params, recorder: Recorder, clients: Clients, sections: Sections
    ) -> None:
        self.params = params
        self.recorder = recorder
        self.clients = clients
        self.sections = sections
        #: The victims whose lease the fault is meant to lapse: each must surface it.
        self.targets: list[Section] = []

    def wait_for_victim(self, *, renewed: bool = True, who: str = "victim") -> Section | None:
        """A victim inside its body (with a successful renewal on the wire, by default);
        ``who``: the start of the names of the victims it may be."""
        found: list[Section] = []

        def ready() -> bool:
            for s in self.recorder.in_body():
                if s.client.startswith(who) and (
                    not renewed or self.recorder.renewed_in_body(s)
                ):
                    found.append(s)
                    return True
            return False

        self.recorder.wait_until(ready, ARM_TIMEOUT)
        return found[0] if found else None

    def inject(
        self, fault: Fault, *, expect_lapse: bool, renewed: bool = True, who: str = "victim"
    ) -> None:
        victim = self.wait_for_victim(renewed=renewed, who=who)
        if victim is None:
            raise ScenarioFailed(
                f"{self.params.name}: no victim renewed inside its body within {ARM_TIMEOUT}s"
            )
        if expect_lapse:
            self.targets.append(victim)
        fault(victim)

    def crowd(self, victim: Section) -> Callable[[], None]:
        """Take every permit of the key on direct connections while ``victim``'s lapsed,
        oblivious body still runs.  Call it with the fault still in place; it returns once
        every crowder holds a permit (or the victim's body is over), and what it returns
        waits for the crowders to leave.

        For a key of several permits, a fault that lapses one holder lets in only as many
        others as ask at the right moment: the intruder may be between two of its turns,
        and once the fault is gone the other victims race it.  So "more bodies than
        permits" would rest on scheduling.  Here ``capacity`` crowders poll (5 ms apart),
        with only the intruder to race while the fault holds the victims back, and each
        stays until the victim's body is over: with the victim, one body more than the
        key allows, whatever the timing."""
        stop = threading.Event()

        def stay(_section: Section) -> None:
            self.recorder.wait_until(lambda: victim.end is not None, TRIAL_TIMEOUT / 3)

        crowders = [
            threading.Thread(
                target=self.sections.poll_until_entered,
                args=(
                    self.clients.sync_lock(
                        self.clients.sync_client(f"crowder{i}", via_proxy=False)
                    ),
                    stop,
                    f"crowder{i}",
                    Body(0.0, at_start=stay),
                ),
                name=f"chaos-crowder{i}",
                daemon=True,
            )
            for i in range(self.params.capacity)
        ]
        for t in crowders:
            t.start()

        def settled() -> bool:
            inside = [
                s for s in self.recorder.in_body() if s.client.startswith("crowder")
            ]
            return victim.end is not None or len(inside) >= len(crowders)

        self.recorder.wait_until(settled, TRIAL_TIMEOUT / 3)
        stop.set()

        def leave() -> None:
            for t in crowders:
                t.join(TRIAL_TIMEOUT / 2)

        return leave

    def wait_signal(self, victim: Section, timeout: float | None = None) -> bool:
        """Keep a fault in place until the victim's signal fires or its body ends."""
        return self.recorder.wait_until(
            lambda: victim.signal_at is not None or victim.end is not None,
            self.params.detection_window() if timeout is None else timeout,
        )
