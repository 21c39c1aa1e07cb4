"""The flows without Redis: every exception at every suspension point of every flow.

A fake runner plays Redis (one dict, the scripts' semantics) and the client clock.  For
each flow and each of its ``yield``s it throws each kind of exception there, once with
the request not run and once with it run and only its reply lost, then lets the flow go
on.  Whatever happens, a flow ends (returns or raises), never yields after
``GeneratorExit``, never swallows the exception it was given, and leaves no key of
ours behind when the exception leaves an acquisition.  Closing a flow at any ``yield``
(what the garbage collector does to an abandoned one) yields nothing more.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from distlock import _flows as flows
from distlock._base import HandleBase
from distlock._core.commands import Command, Op, Step
from distlock._core.group import Group
from distlock._core.section import Outcome, Phase, Section, SectionConfig
from distlock._flows import Block, Flow, Sleep
from distlock.errors import LockError
from distlock.events import Event, Transition

EXCEPTIONS: list[Callable[[], BaseException]] = [
    lambda: redis.ConnectionError("reset"),
    lambda: redis.TimeoutError("timed out"),
    lambda: asyncio.CancelledError(),
    KeyboardInterrupt,
    lambda: RuntimeError("a bug elsewhere"),
]


@dataclass
class FakeRedis:
    values: dict[str, str] = field(default_factory=dict)
    fence: int = 0

    def run(self, command: Command) -> int:
        cur = self.values.get(command.key)
        if command.op is Op.ACQUIRE:
            if cur == command.token:
                return self.fence
            if cur is not None:
                return 0
            self.values[command.key] = command.token
            self.fence += 1
            return self.fence
        if cur != command.token:
            return 0
        if command.op is Op.RELEASE:
            del self.values[command.key]
        return 1


class FakeEffects:
    def __init__(self) -> None:
        self.clock = 0.0
        self._core_guard: flows.Guard | None = threading.RLock()

    def _now(self) -> float:
        return self.clock

    def _arm(self, handle: HandleBase) -> None:
        handle._armed_at = handle._section.wake_at

    def _record(self, events: list[Transition | Event]) -> None:
        pass

    def _notify(self, handle: HandleBase, events: list[Transition | Event]) -> None:
        pass

    def _apply(self, handle: HandleBase, step: Step) -> None:
        pass


@dataclass
class Outcome_:
    value: Any = None
    error: BaseException | None = None
    yields: int = 0
    #: The request the exception was thrown at.
    hit: object = None


def drive(
    fx: FakeEffects,
    db: FakeRedis,
    flow: Flow[Any],
    at: int | None = None,
    exc: BaseException | None = None,
    ran: bool = False,
) -> Outcome_:
    """Run ``flow``; at yield number ``at`` throw ``exc`` (after running the request if
    ``ran``).  Every other request runs and is answered."""
    out = Outcome_()
    try:
        request = next(flow)
        for n in itertools.count():
            out.yields += 1
            assert n < 100, "a flow that never ends"
            fx.clock += 1.0
            if n == at:
                assert exc is not None
                out.hit = request
                if ran and isinstance(request, Command):
                    db.run(request)
                request = flow.throw(exc)
                continue
            if isinstance(request, Sleep | Block):
                fx.clock = max(fx.clock, request.until_ms)
                request = flow.send(0)
            else:
                request = flow.send(db.run(request))
    except StopIteration as stop:
        out.value = stop.value
    except BaseException as error:
        out.error = error
    return out


def handles(keys: list[str], *, watch: bool, retries: int = 0) -> list[HandleBase]:
    config = SectionConfig(
        ttl_ms=1000, retries=retries, retry_delay_ms=10.0, renew_every_ms=250 if watch else None,
        watch=watch,
    )
    sections = [Section(k, f"tok-{k}", config) for k in keys]
    group = Group(sections)
    return [HandleBase(s, group) for s in sections]


def ours(db: FakeRedis, hs: list[HandleBase]) -> list[str]:
    return [h.key for h in hs if db.values.get(h.key) == h.token]


Scenario = Callable[[FakeEffects, FakeRedis], tuple[Flow[Any], list[HandleBase], str]]


def acquire_contended(fx: FakeEffects, db: FakeRedis) -> tuple[Flow[Any], list[HandleBase], str]:
    # Held by someone else for the first attempts: the flow backs off (Sleep) and retries.
    hs = handles(["k"], watch=False, retries=3)
    db.values["k"] = "someone"
    refusals = iter(range(2))

    def free_later(command: Command, run: Callable[[Command], int] = db.run) -> int:
        if command.op is Op.ACQUIRE and next(refusals, None) is None:
            db.values.pop("k", None) if db.values.get("k") == "someone" else None
        return run(command)

    db.run = free_later  # type: ignore[method-assign]
    return flows.acquire(fx, hs[0]), hs, "acquire"


def acquire_group(fx: FakeEffects, db: FakeRedis) -> tuple[Flow[Any], list[HandleBase], str]:
    hs = handles(["a", "b", "c"], watch=True, retries=2)
    db.values["c"] = "someone"  # the last key stays held: backoff, then NotAcquired
    return flows.acquire_all(fx, hs), hs, "acquire"


def acquire_group_ok(fx: FakeEffects, db: FakeRedis) -> tuple[Flow[Any], list[HandleBase], str]:
    hs = handles(["a", "b"], watch=True)
    return flows.acquire_all(fx, hs), hs, "acquire"


def held(fx: FakeEffects, db: FakeRedis, hs: list[HandleBase]) -> None:
    assert drive(fx, db, flows.acquire_all(fx, hs)).error is None


def finish_group(fx: FakeEffects, db: FakeRedis) -> tuple[Flow[Any], list[HandleBase], str]:
    hs = handles(["a", "b"], watch=True)
    held(fx, db, hs)
    return flows.finish_all(fx, hs), hs, "finish"


def release_manual(fx: FakeEffects, db: FakeRedis) -> tuple[Flow[Any], list[HandleBase], str]:
    hs = handles(["k"], watch=False)
    held(fx, db, hs)
    return flows.release(fx, hs[0]), hs, "release"


def extend_manual(fx: FakeEffects, db: FakeRedis) -> tuple[Flow[Any], list[HandleBase], str]:
    hs = handles(["k"], watch=False)
    held(fx, db, hs)
    return flows.extend(fx, hs[0], 500), hs, "extend"


def renew_watched(fx: FakeEffects, db: FakeRedis) -> tuple[Flow[Any], list[HandleBase], str]:
    hs = handles(["k"], watch=True)
    held(fx, db, hs)
    fx.clock = 300.0
    step = hs[0]._section.tick(fx.clock)
    assert step.send is not None and step.send.op is Op.RENEW
    return flows.renew(fx, hs[0], step.send), hs, "renew"


SCENARIOS: dict[str, Scenario] = {
    "acquire with backoff": acquire_contended,
    "group refused after backoff": acquire_group,
    "group taken": acquire_group_ok,
    "group finished": finish_group,
    "manual release": release_manual,
    "manual extend": extend_manual,
    "renewal": renew_watched,
}


def cases() -> Iterator[tuple[str, int, int, bool]]:
    for name, scenario in SCENARIOS.items():
        fx, db = FakeEffects(), FakeRedis()
        flow, _hs, _kind = scenario(fx, db)
        length = drive(fx, db, flow).yields
        for at in range(length):
            for e in range(len(EXCEPTIONS)):
                for ran in (False, True):
                    yield name, at, e, ran


@pytest.mark.parametrize(("name", "at", "exc_index", "ran"), list(cases()))
def test_an_exception_at_any_yield(name: str, at: int, exc_index: int, ran: bool) -> None:
    fx, db = FakeEffects(), FakeRedis()
    flow, hs, kind = SCENARIOS[name](fx, db)
    exc = EXCEPTIONS[exc_index]()
    out = drive(fx, db, flow, at=at, exc=exc, ran=ran)
    assert not isinstance(out.error, RuntimeError) or out.error is exc, out.error
    if kind == "acquire":
        if out.error is not None:
            # Nothing taken stays taken once an exception leaves an acquisition, except a
            # key whose own cleanup release never reached Redis (it expires after its TTL).
            spared = (
                [out.hit.key]
                if isinstance(out.hit, Command) and out.hit.op is Op.RELEASE and not ran
                else []
            )
            assert ours(db, hs) in ([], spared), (out.error, out.hit, db.values)
            assert out.error is exc or isinstance(out.error, LockError)
    elif kind in ("renew",):
        # A failed renewal is not a loss, and an interrupt still leaves the flow.
        s = hs[0]._section
        assert not s.renew_in_flight
        assert s.lost is None
        if not isinstance(exc, Exception):
            assert out.error is exc
    else:
        for h in hs:
            s = h._section
            if s.outcome is Outcome.OK:
                assert db.values.get(s.key) != s.token  # success means released
        if isinstance(exc, Exception) and kind != "extend" and not hs[0]._section.config.watch:
            assert out.error is exc  # a manual release() reports its failed round trip
        if not isinstance(exc, Exception):
            assert out.error is exc  # an interrupt is never swallowed


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_closing_a_flow_at_any_yield_yields_nothing_more(name: str) -> None:
    fx, db = FakeEffects(), FakeRedis()
    flow, _hs, _kind = SCENARIOS[name](fx, db)
    length = drive(fx, db, flow).yields
    for at in range(length):
        fx, db = FakeEffects(), FakeRedis()
        flow, _hs, _kind = SCENARIOS[name](fx, db)
        request = next(flow)
        for _ in range(at):
            try:
                request = flow.send(0 if isinstance(request, Sleep | Block) else db.run(request))
            except (StopIteration, LockError):
                break
        flow.close()  # raises RuntimeError if the flow yields on GeneratorExit


def test_scenarios_reach_the_states_they_claim() -> None:
    # The fake world is not vacuous: backoff happens, groups are refused and taken.
    fx, db = FakeEffects(), FakeRedis()
    flow, hs, _ = acquire_contended(fx, db)
    assert any(isinstance(r, Sleep) for r in _requests(fx, db, flow))
    assert hs[0]._section.phase is Phase.HELD
    fx, db = FakeEffects(), FakeRedis()
    flow, hs, _ = acquire_group(fx, db)
    out = drive(fx, db, flow)
    assert isinstance(out.error, LockError) and ours(db, hs) == []


def _requests(fx: FakeEffects, db: FakeRedis, flow: Flow[Any]) -> list[object]:
    seen: list[object] = []
    try:
        request = next(flow)
        while True:
            seen.append(request)
            if isinstance(request, Sleep | Block):
                fx.clock = max(fx.clock, request.until_ms)
                request = flow.send(0)
            else:
                request = flow.send(db.run(request))
    except StopIteration:
        return seen


def test_no_handler_yields() -> None:
    # Compiled with mypyc, a generator has no exception state of its own: a handler that
    # yielded would leave its exception as the caller's exception being handled (every
    # later error chained onto it), and a bare ``raise`` after the yield would raise
    # nothing.  tests/drivers/*/test_exception_state.py catch the first on the compiled
    # build; this catches any such handler in the pure run, before anything is built.
    import ast
    from pathlib import Path

    # The source beside the module: compiled, the module itself is the built extension.
    source = Path(flows.__file__).with_name("_flows.py").read_text()
    offenders = sorted(
        node.lineno
        for handler in ast.walk(ast.parse(source))
        if isinstance(handler, ast.ExceptHandler)
        for node in ast.walk(handler)
        if isinstance(node, ast.Yield | ast.YieldFrom)
    )
    assert not offenders, f"a yield inside an except block, lines {offenders}"


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4])
def test_act_hands_an_action_every_argument_in_order(count: int) -> None:
    # act calls an action by its number of arguments (a star-call costs the compiled
    # build a list and a tuple per transition); each shape must pass them all, in order.
    fx = FakeEffects()
    fx.clock = 42.0
    (handle,) = handles(["k"], watch=False)
    seen: list[tuple[object, ...]] = []

    def action(section: Section, now: float, *args: object) -> Step:
        seen.append((section, now, *args))
        return Step()

    args = tuple(f"arg{i}" for i in range(count))
    flows.act(fx, handle, action, *args)
    assert seen == [(handle._section, 42.0, *args)]
