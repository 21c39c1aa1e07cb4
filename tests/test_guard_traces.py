"""Every step the core accepts is a step of the spec: seeded core runs, checked by TLC.

A seeded generator drives two sections on one key (a run/hold section and a manual
handle) against a small simulated Redis, and keeps attempting calls at the edges of the
guards: an action right at a deadline (time moves one tick at a time, and a renewal that
hangs or fails lets the deadline come), a release while a renewal is in flight, an
extend on a manual handle after its release, an acquire again while held, a tick while
backing off.  Whatever the core accepts is recorded; calls it refuses leave no trace.
The recorded run must be a behaviour of ``spec/DistLock.tla`` (``distlock.tools
.tracecheck``).  The driver's timer discipline is kept (a due heartbeat and the release
after a finished body happen before time moves), since the spec makes it an assumption;
replies and failures follow the simulated Redis, so a trace the spec rejects points at a
guard or an effect, not at an impossible world.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import pytest

from distlock._core.commands import Command, Op, Step
from distlock._core.section import Phase, Section, SectionConfig
from distlock.errors import ProtocolError, UsageError
from distlock.events import Transition
from distlock.tools import tracecheck

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not (tracecheck.spec_dir() / "DistLock.tla").is_file(),
    reason="needs java and spec/DistLock.tla",
)

#: One tick of the trace checker's model (``ttl_ms / TTL_TICKS``).
UNIT: Final = 1000.0
TTL_MS: Final = int(tracecheck.TTL_TICKS * UNIT)


def config(watch: bool) -> SectionConfig:
    return SectionConfig(
        ttl_ms=TTL_MS,
        retries=1,
        retry_delay_ms=UNIT,
        renew_every_ms=int(2 * UNIT),
        watch=watch,
        # A drift allowance of one tick: the core's lease ends a tick before the key's
        # TTL, and before the checker's model's (which has no margin, tracecheck.TRACE_MARGIN).
        drift_factor=1 / tracecheck.TTL_TICKS,
    )


@dataclass
class Redis:
    """One key with a TTL and the fence counter, run at the instant a reply arrives."""

    holder: str | None = None
    expires_at: float = 0.0
    fence: int = 0

    def run(self, cmd: Command, now: float) -> int:
        if self.holder is not None and now >= self.expires_at:
            self.holder = None
        mine = self.holder == cmd.token
        if cmd.op is Op.ACQUIRE:
            if self.holder is not None:
                return 0
            self.holder, self.expires_at = cmd.token, now + cmd.ttl_ms
            self.fence += 1
            return self.fence
        if cmd.op is Op.RELEASE:
            if mine:
                self.holder = None
            return int(mine)
        if mine:
            self.expires_at = now + cmd.ttl_ms
        return int(mine)


@dataclass
class Run:
    """Two sections on one key, a simulated Redis, and the recorded trace."""

    rnd: random.Random
    now: float = 0.0
    redis: Redis = field(default_factory=Redis)
    sections: dict[str, Section] = field(default_factory=dict)
    pending: dict[str, list[Command]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    faults: int = 0
    #: Calls made, and how many the core refused (no transition).
    calls: int = 0
    refused: int = 0

    def add(self, name: str, watch: bool) -> None:
        self.sections[name] = Section("k", name, config(watch), client=name, record=True)
        self.pending[name] = []

    def do(self, name: str, act: Callable[[Section], Step]) -> Step | None:
        sec = self.sections[name]
        self.calls += 1
        try:
            step: Step | None = act(sec)
        except (ProtocolError, UsageError):
            step = None
        taken = [e.as_dict() for e in sec.take_events() if isinstance(e, Transition)]
        if not taken:
            self.refused += 1
        self.events += taken
        if step is not None and step.send is not None:
            self.pending[name].append(step.send)
        return step

    def timers(self) -> None:
        """What the driver does before time moves on: due heartbeats, pending releases."""
        for name, sec in self.sections.items():
            if sec.phase in (Phase.BODY_DONE, Phase.ABANDONED):
                self.do(name, lambda s: s.release(self.now))
            for _ in range(2):
                if sec.phase is Phase.HELD and sec.config.watch:
                    self.do(name, lambda s: s.tick(self.now))

    def tick(self) -> None:
        self.timers()
        self.now += UNIT

    def answer(self, name: str, *, fail: bool = False, hang: bool = False) -> None:
        cmds = self.pending[name]
        if not cmds:
            return
        cmd = cmds.pop(self.rnd.randrange(len(cmds)))
        if hang:
            # No reply and no error: a renewal stays in flight, anything else times out.
            if cmd.op is not Op.RENEW:
                self.do(name, lambda s: s.failed(self.now, cmd))
            return
        if fail:
            self.do(name, lambda s: s.failed(self.now, cmd))
            return
        value = self.redis.run(cmd, self.now)
        self.do(name, lambda s: s.reply(self.now, cmd, value))

    def move(self) -> None:
        """One random move of the world or of a caller."""
        name = self.rnd.choice(sorted(self.sections))
        sec = self.sections[name]
        weights = {"tick": 4.0, "answer": 4.0, "acquire": 1.0, "extend": 2.0, "release": 0.6,
                   "tick()": 1.0, "body_done": 0.6}
        if self.faults < 2:
            weights |= {"fail": 0.6, "hang": 0.6}
        move = self.rnd.choices(list(weights), list(weights.values()))[0]
        now = self.now
        if move == "tick":
            self.tick()
        elif move == "answer":
            self.answer(name)
        elif move in ("fail", "hang") and self.pending[name]:
            self.faults += 1
            self.answer(name, fail=move == "fail", hang=move == "hang")
        elif move == "acquire":
            self.do(name, lambda s: s.acquire(now))
        elif move == "extend":
            self.do(name, lambda s: s.extend(now, TTL_MS))
        elif move == "release":
            # A held run/hold section is released only once lost (the known disagreement
            # of tests/test_guards.py is not what these runs look for).
            if not (sec.config.watch and sec.phase is Phase.HELD and sec.lost is None):
                self.do(name, lambda s: s.release(now))
        elif move == "tick()":
            self.do(name, lambda s: s.tick(now))
        elif move == "body_done":
            self.do(name, lambda s: s.body_done(now))


def generate(seed: int, moves: int = 70) -> Run:
    run = Run(random.Random(seed))
    run.add("a", watch=True)
    run.add("b", watch=False)
    for name in ("a", "b"):
        run.do(name, lambda s: s.acquire(run.now))
    for _ in range(moves):
        run.move()
    return run


SEEDS: Final = (10, 11, 19)


@pytest.mark.parametrize("seed", SEEDS)
def test_core_runs_are_behaviours_of_the_spec(seed: int) -> None:
    run = generate(seed)
    actions = {e["action"] for e in run.events}
    assert run.refused > 5, "the run attempted no call the core refuses"
    assert len(actions) >= 6, f"a run too poor to check: {sorted(actions)}"
    (verdict,) = tracecheck.check(run.events, timeout_s=300)
    assert verdict.accepted, verdict.describe()


def _answer_all(run: Run, name: str) -> None:
    while run.pending[name]:
        run.answer(name)


def _taken(run: Run, name: str, act: Callable[[Section], Step]) -> bool:
    """Call ``act`` on section ``name`` now; True if the core took a step."""
    before = len(run.events)
    run.do(name, act)
    return len(run.events) > before


def test_guard_edges_are_behaviours_of_the_spec() -> None:
    run = Run(random.Random(0))
    run.add("a", watch=True)
    run.add("b", watch=False)
    assert _taken(run, "a", lambda s: s.acquire(run.now))
    _answer_all(run, "a")  # granted at 0: the lease runs to 7 ticks
    assert _taken(run, "b", lambda s: s.acquire(run.now))
    _answer_all(run, "b")  # denied: b backs off for one tick
    assert not _taken(run, "b", lambda s: s.tick(run.now)), "a tick while backing off"
    assert not _taken(run, "b", lambda s: s.acquire(run.now)), "a retry before its delay"
    run.tick()
    assert not _taken(run, "a", lambda s: s.acquire(run.now)), "acquire again while held"
    assert _taken(run, "b", lambda s: s.acquire(run.now))
    _answer_all(run, "b")  # denied for good: not_acquired
    run.tick()
    run.timers()  # the heartbeat at 2 ticks sends a renewal: it hangs
    assert run.sections["a"].renew_in_flight
    run.pending["a"].clear()
    while run.now < run.sections["a"].deadline:
        run.tick()
    # Right at the deadline the timer retires the lease.
    assert _taken(run, "a", lambda s: s.tick(run.now))
    assert run.sections["a"].lost is not None
    assert not _taken(run, "a", lambda s: s.tick(run.now)), "a second loss"
    assert _taken(run, "a", lambda s: s.body_done(run.now))
    run.timers()  # the release goes out while the hung renewal is still in flight
    assert run.sections["a"].renew_in_flight
    _answer_all(run, "a")
    assert run.sections["a"].outcome.value == "lost"

    run.add("c", watch=False)
    assert _taken(run, "c", lambda s: s.acquire(run.now))
    _answer_all(run, "c")
    assert _taken(run, "c", lambda s: s.extend(run.now, TTL_MS))
    assert not _taken(run, "c", lambda s: s.extend(run.now, TTL_MS)), "extend in flight"
    run.tick()
    assert _taken(run, "c", lambda s: s.release(run.now))  # the extend still in flight
    _answer_all(run, "c")
    assert not _taken(run, "c", lambda s: s.extend(run.now, TTL_MS)), "extend after release"
    assert not _taken(run, "c", lambda s: s.release(run.now)), "release twice"

    (verdict,) = tracecheck.check(run.events, timeout_s=300)
    assert verdict.accepted, verdict.describe()

