"""Replay a small model's state graph on the pure core, and compare the guards.

Each spec client is a :class:`~distlock._core.section.Section` (a fresh one per
``NewSection``) with a clock of its own: ``Tick`` moves it by one tick unless the spec
let that client's clock lag (its ``drift`` grew).  A tick is :data:`UNIT_MS` ms, and
the spec's margin becomes the drift factor ``Margin / TTL`` (exact in binary for the
models used: a power of two), so deadlines fall on whole ticks on both sides.

Two directions:

* every client step of the graph is taken by the core with the same method: it must
  accept it, send what the spec sends, fire the loss signal exactly when the spec's
  ``lost`` turns TRUE, and reach the same observable state (phase, outcome, loss,
  fence granted or not, renewal/extend in flight, retries left, and while held the
  lease and heartbeat countdowns); a step the core takes without its section (an
  adapter's ``silent`` actions: the read-write lock's refused upgrade) must send nothing
  and leave the section as it was;
* in every state, every call the core accepts (each action method with each reply value,
  and ``tick``) must be a step the spec takes from some state with the same client
  variables, to the same observable state.  Where the environment alone disables an
  action (no reply has come, a starved loop runs no callback), the core cannot know it:
  the comparison is over every state that shares the client's variables.

The rules above live in :class:`Replay`, once.  What differs per spec is an
:class:`Adapter`: the lock's (``DistLock.tla``, described above) is the base class, and
:class:`SemaphoreAdapter`, :class:`ReentrantAdapter` (one section per holder),
:class:`WaitAdapter` (``Wait.tla``'s clients on the waiting path) and
:class:`ReadWriteAdapter` (a reader's or a writer's section) change the few names
that differ: the client actions, the spec's per-client variables, how replies and
requests are read off ``net``, what is observed, and the model's bounds that are not
guards.  :class:`Replays` holds the checks every test file makes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from distlock._core.actions import CLIENT_ACTIONS, REENTRANT_ACTIONS, WAIT_ACTIONS, method_name
from distlock._core.commands import Kind, Op, Step
from distlock._core.election import CampaignSection, leading
from distlock._core.lease import Write
from distlock._core.readwrite import ReadSection, WriteSection, reentry_refused
from distlock._core.reentrant import ReentrantSection
from distlock._core.section import Phase, Section, SectionConfig
from distlock._core.semaphore import SemaphoreSection
from distlock._core.waiting import Waiting
from distlock.errors import ProtocolError, UpgradeError, UsageError
from distlock.events import Transition
from tests.spec_graph import Graph, Model, Value, parse_value

UNIT_MS: Final = 1000

#: The reply value a step carries: None (no reply), True/False (1/0), or for an acquire
#: reply "granted"/"denied".
Arg = bool | str | None

#: Actions the heartbeat timer takes: the driver reaches them through ``Section.tick``.
TIMER_ACTIONS: Final = frozenset({"RenewSend", "LeaseTimeout"})

#: Actions a starved event loop does not run (the spec's ``~starved[c]``): the driver's
#: doing, not the core's.
STARVED_OUT: Final = frozenset({"RenewSend", "LeaseTimeout", "RenewReply", "RenewFail"})

#: The request each sending action puts on the wire.
SENDS: Final = {"Acquire": Op.ACQUIRE, "RenewSend": Op.RENEW, "Extend": Op.EXTEND,
                "Release": Op.RELEASE}

#: Replies and failures of one round trip: the spec's guards on the client side are the
#: same for all of them (the round trip is outstanding); which one happens is the
#: environment's choice.
FAMILY: Final = {"AcquireReply": "Acquire*", "AcquireFail": "Acquire*",
                 "RenewReply": "Renew*", "RenewFail": "Renew*",
                 "ExtendReply": "Extend*", "ExtendFail": "Extend*",
                 "ReleaseReply": "Release*", "ReleaseFail": "Release*"}

REPLY_KIND: Final = {"AcquireReply": "acquire", "RenewReply": "renew",
                     "ExtendReply": "extend", "ReleaseReply": "release"}


def section_config(model: Model, watch: bool) -> SectionConfig:
    return SectionConfig(
        ttl_ms=model.ttl * UNIT_MS,
        retries=model.retries,
        # The spec does not model the retry delay: a backoff may retry at once.
        retry_delay_ms=0.0,
        renew_every_ms=model.heartbeat * UNIT_MS,
        watch=watch,
        drift_factor=model.margin / model.ttl,
    )


@dataclass
class Client:
    """The core side of one spec client: its current section and its clock."""

    section: Section
    now: float
    #: Where the driver is in a sequence the core does not tell apart (a waiter's block:
    #: refused, blocked, woken), kept by the adapter; empty for the other specs.
    mark: str = ""

    def clone(self) -> Client:
        return Client(_clone(self.section), self.now, self.mark)


def _slots(cls: type) -> list[str]:
    # A class of the core compiled by mypyc lists its attributes in __mypyc_attrs__.
    names: list[str] = []
    for k in cls.__mro__:
        attrs: tuple[str, ...] = getattr(k, "__slots__", ()) or getattr(k, "__mypyc_attrs__", ())
        names.extend(attrs)
    return [s for s in dict.fromkeys(names) if not s.startswith("__")]


#: Attributes of the core that hold instants on the client clock.
_INSTANTS: Final = frozenset(
    {"retry_at", "sent_at", "first_sent_at", "deadline", "confirmed_at", "renewed_at",
     "until", "block_until"}
)


def fingerprint(obj: Any, now: float) -> Any:
    """The core state that decides what a call does, with instants relative to ``now``
    (an instant the core does not name above stays absolute: fewer matches, never a
    wrong one).  Two sections with equal fingerprints answer every call alike."""
    if isinstance(obj, list):
        return tuple(fingerprint(x, now) for x in obj)
    if isinstance(obj, SectionConfig):
        return obj.watch
    if isinstance(obj, BaseException):
        return type(obj).__name__
    if isinstance(obj, Section | Write | Waiting):
        out = []
        for name in _slots(type(obj)):
            if not hasattr(obj, name) or name in ("events", "key", "_token", "client"):
                continue
            value = getattr(obj, name)
            if name in _INSTANTS and isinstance(value, float) and math.isfinite(value):
                value = value - now
            out.append((name, fingerprint(value, now)))
        return tuple(out)
    return obj


def _blank(obj: Any) -> Any:
    """An instance of ``obj``'s class for :func:`_clone` to fill.  Not ``object.__new__``:
    the compiled core's classes refuse that.  Compiled, a class that allows no interpreted
    subclass (all but Section) runs its ``__init__`` from ``__new__``, so those are made by
    their constructors (which touch nothing but the new object), and every slot is then
    overwritten."""
    cls: Any = type(obj)
    if cls is Waiting:
        return Waiting(0, 0)
    if cls is SemaphoreSection:
        return SemaphoreSection(obj.key, obj._token, obj.config, limit=obj.limit)
    if cls is ReentrantSection:
        return ReentrantSection(obj.key, obj._token, obj.config)
    return cls.__new__(cls)


def _clone(obj: Any) -> Any:
    """A copy of a core object that shares what the core never mutates in place (the
    config, requests on the wire, the loss error) and copies its lists (the lease clock's
    state is slots of the section's own, so copying those copies it)."""
    new = _blank(obj)
    for name in _slots(type(obj)):
        if not hasattr(obj, name):
            continue
        value = getattr(obj, name)
        if isinstance(value, list):
            value = list(value)
        elif isinstance(value, Waiting):
            value = _clone(value)  # mutated in place by the section
        setattr(new, name, value)
    return new


World = dict[str, Client]


def ticks(ms: float) -> float:
    """A countdown in ticks, floored at 0 as the spec's are.  Not rounded: an instant
    off the tick grid is a difference in the arithmetic and must show."""
    value = ms / UNIT_MS
    if value <= 0:
        return 0
    return int(value) if value.is_integer() else value


def _freeze(view: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(view.items()))


@dataclass
class Call:
    """One call of a core method, and what came of it."""

    action: str
    arg: Arg
    via_tick: bool = False
    taken: list[str] = field(default_factory=list)
    step: Step | None = None
    refused: BaseException | None = None

    def describe(self) -> str:
        return "tick()" if self.via_tick else f"{method_name(self.action)}({self.arg!r})"


class Adapter:
    """What a replay needs to know of one spec and its core: the lock's (``DistLock.tla``
    and :class:`Section`).  A spec whose client is another core object subclasses this and
    changes the few names that differ: which actions the client takes, which of the
    spec's per-client variables the core mirrors, how a reply and a sent request are read
    off ``net``, what the spec observes.  Every rule of the comparison itself lives in
    :class:`Replay`, once for all of them."""

    #: The spec's client-side actions, and the actions the core has a method for.
    actions: ClassVar[Mapping[str, str]] = CLIENT_ACTIONS
    #: Reply actions, and the kind of the message whose answer they consume.
    reply_kind: ClassVar[Mapping[str, str]] = REPLY_KIND
    family: ClassVar[Mapping[str, str]] = FAMILY
    timer_actions: ClassVar[frozenset[str]] = TIMER_ACTIONS
    starved_out: ClassVar[frozenset[str]] = STARVED_OUT
    #: The spec's per-client variables that a client step may change (those present).
    client_vars: ClassVar[tuple[str, ...]] = (
        "phase", "outcome", "retries_left", "token", "fence", "deadline_in", "sent_ago",
        "renew_in_flight", "renew_sent_ago", "next_renew_in", "extend_in_flight",
        "extend_sent_ago", "lost", "auto_renew")
    #: Core ops as the spec names the kind of their request.
    op_kind: ClassVar[Mapping[str, str]] = {}
    #: Real time of one spec tick on the core's clock.
    unit_ms: ClassVar[int] = UNIT_MS
    #: Client actions of the spec that the driver takes without the section (no method):
    #: the section must be left as it was, and nothing sent (see :meth:`silent_refusal`).
    silent: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, model: Model) -> None:
        self.model = model

    # -- the core side ----------------------------------------------------------------------

    def auto_renew(self, state: dict[str, Value], c: str) -> bool:
        return bool(state["auto_renew"][c]) if "auto_renew" in state else True

    def new_section(self, state: dict[str, Value], c: str) -> Section:
        tok = state["token"][c]
        cfg = section_config(self.model, self.auto_renew(state, c))
        return Section("k", f"{tok[0]}-{tok[1]}", cfg, client=c, record=True)

    def granted(self, sec: Section) -> bool:
        return sec.fence is not None

    def core_view(self, client: Client) -> dict[str, Any]:
        """What the spec observes of a section, in the spec's terms."""
        model, sec = self.model, client.section
        held = sec.phase is Phase.HELD
        retries_left = model.retries - (
            sec.attempts if sec.phase is Phase.BACKOFF else max(sec.attempts - 1, 0)
        )
        return {
            "phase": sec.phase.value,
            "outcome": sec.outcome.value,
            "lost": sec.lost is not None,
            "granted": self.granted(sec),
            "retries_left": retries_left,
            "renew_in_flight": sec.renew_in_flight,
            "extend_in_flight": sec.extend_in_flight,
            "deadline_in": ticks(sec.deadline - client.now) if held else None,
            "next_renew_in": (
                ticks(sec.next_renew_at - client.now) if held and sec.config.watch else None
            ),
        }

    # -- the spec side ----------------------------------------------------------------------

    def spec_granted(self, state: dict[str, Value], c: str) -> bool:
        return bool(state["fence"][c] > 0)

    def lease_view(self, state: dict[str, Value], c: str) -> dict[str, Any]:
        """What every spec with a lease clock shows of client ``c``."""
        held = state["phase"][c] == "held"
        return {
            "phase": state["phase"][c],
            "outcome": state["outcome"][c],
            "lost": state["lost"][c],
            "granted": self.spec_granted(state, c),
            "renew_in_flight": state["renew_in_flight"][c],
            "deadline_in": state["deadline_in"][c] if held else None,
            "next_renew_in": (
                state["next_renew_in"][c] if held and self.auto_renew(state, c) else None
            ),
        }

    def spec_view(self, state: dict[str, Value], c: str) -> dict[str, Any]:
        return {
            **self.lease_view(state, c),
            "retries_left": state["retries_left"][c],
            "extend_in_flight": state["extend_in_flight"][c],
        }

    def client_key(self, state: dict[str, Value], c: str) -> tuple[Any, ...]:
        """The client's variables as far as a guard or an effect reads them: countdowns and
        ages only in the phase where they count (elsewhere the spec zeroes them on the next
        tick), the fence only as granted or not, the token not at all."""
        phase = state["phase"][c]
        held = phase == "held"
        return (
            phase,
            state["outcome"][c],
            state["retries_left"][c],
            self.spec_granted(state, c),
            state["lost"][c],
            self.auto_renew(state, c),
            state["renew_in_flight"][c],
            state["extend_in_flight"][c],
            state["deadline_in"][c] if held else None,
            state["next_renew_in"][c] if held and self.auto_renew(state, c) else None,
            state["sent_ago"][c] if phase == "acquiring" else None,
            state["renew_sent_ago"][c] if held and state["renew_in_flight"][c] else None,
            state["extend_sent_ago"][c] if held and state["extend_in_flight"][c] else None,
        )

    def mine(self, m: dict[str, Value], c: str, state: dict[str, Value]) -> bool:
        """A message of client ``c``'s current section."""
        return bool(m["tok"] == state["token"][c])

    def acquire_arg(self, c: str, dst: dict[str, Value]) -> Arg:
        return "granted" if dst["phase"][c] == "held" else "denied"

    def reply_value(self, action: str, c: str, src: dict[str, Value],
                    dst: dict[str, Value]) -> Arg:
        kind = self.reply_kind.get(action)
        if kind is None:
            return None
        if action == "AcquireReply":
            return self.acquire_arg(c, dst)
        gone = [m for m in src["net"]
                if self.mine(m, c, src) and m["kind"] == kind and m["st"] == "done"
                and m not in dst["net"]]
        assert len(gone) == 1, (action, gone)
        return bool(gone[0]["val"] == 1)

    def core_sent(self, step: Step) -> str | None:
        """What the core's ``step`` sends, as :meth:`sent_kind` names it."""
        if step.send is None:
            return None
        op: str = step.send.op.value
        return self.op_kind.get(op, op)

    def sent_kind(self, c: str, src: dict[str, Value], dst: dict[str, Value]) -> str | None:
        new = [m["kind"] for m in dst["net"]
               if self.mine(m, c, dst) and m["st"] == "sent" and m not in src["net"]]
        return new[0] if new else None

    def fence(self, c: str, arg: Arg, dst: dict[str, Value]) -> int:
        """The acquire reply's value for the core: the fence the spec granted, or 0."""
        return int(dst["fence"][c]) if arg == "granted" else 0

    def spec_fires(self, label: str, c: str, src: dict[str, Value],
                   dst: dict[str, Value]) -> bool | None:
        """Whether the spec fires the loss signal on this step (None: not modelled)."""
        fired = bool(dst["lost"][c] and not src["lost"][c])
        if label in ("ReleaseReply", "ReleaseFail") and not self.auto_renew(src, c):
            # A manual handle's release answers with a bool: its signal is not fired
            # by the release, only marked (spec: lost turns TRUE with the outcome).
            fired = False
        return fired

    def lags(self, c: str, src: dict[str, Value], dst: dict[str, Value]) -> bool:
        """The spec let client ``c``'s clock lag on this tick."""
        return "drift" in dst and dst["drift"][c] != src["drift"][c]

    def beyond_model(self, state: dict[str, Value], c: str, action: str) -> bool:
        """The spec refuses ``action`` here only because the model is bounded."""
        return False

    def possible(self, client: Client, action: str, arg: Arg) -> bool:
        """Redis could answer the core's request in flight with ``arg``."""
        return True

    def starved(self, state: dict[str, Value], c: str) -> bool:
        return bool(state["starved"][c]) if "starved" in state else False

    def after(self, client: Client, action: str, arg: Arg) -> None:
        """Keep the driver's place (``Client.mark``) after a call the core took or not."""

    def active(self, state: dict[str, Value], c: str) -> bool:
        """The client still takes steps (the semaphore's clients may be killed)."""
        return c not in state.get("dead", ())

    def observed(self, state: dict[str, Value], c: str) -> bool:
        """The spec's view of client ``c`` is the core's to match (a client killed where
        the spec ends its section is no longer run by any core)."""
        return True

    def silent_refusal(self, action: str) -> str | None:
        """Why the core does not take the ``silent`` step ``action`` as the spec does (None:
        it does)."""
        return None

    # -- calls ------------------------------------------------------------------------------

    def invoke(self, sec: Section, now: float, action: str, arg: Arg, fence: int) -> Step:
        """Call the core method of ``action`` with the reply value ``arg``."""
        method: Callable[..., Step] = getattr(sec, method_name(action))
        if action == "AcquireReply":
            return method(now, fence if arg == "granted" else 0)
        if action in self.reply_kind:
            return method(now, bool(arg))
        if action == "Extend":
            return method(now, sec.config.ttl_ms)
        return method(now)

    def candidates(self) -> list[tuple[str, Arg, bool]]:
        """Every call a driver could make: each action with each reply value, and tick()."""
        return self.candidates_of(self.actions)

    @classmethod
    def candidates_of(cls, actions: Iterable[str]) -> list[tuple[str, Arg, bool]]:
        out: list[tuple[str, Arg, bool]] = [("", None, True)]
        for action in actions:
            if action == "AcquireReply":
                out += [(action, "granted", False), (action, "denied", False)]
            elif action in cls.reply_kind:
                out += [(action, True, False), (action, False, False)]
            else:
                out.append((action, None, False))
        return out


def call(adapter: Adapter, client: Client, action: str, arg: Arg, *, via_tick: bool = False,
         fence: int = 1) -> Call:
    """Call the core method of ``action`` (or ``tick``) on ``client`` in place."""
    sec, now = client.section, client.now
    result = Call(action, arg, via_tick)
    try:
        if via_tick:
            result.step = sec.tick(now)
        else:
            result.step = adapter.invoke(sec, now, action, arg, fence)
    except (ProtocolError, UsageError) as exc:
        result.refused = exc
    result.taken = [e.action for e in sec.take_events() if isinstance(e, Transition)]
    return result


@dataclass
class Finding:
    """A place where the core and the spec disagree."""

    kind: str
    action: str
    arg: Arg
    detail: str
    #: The spec's view of the client where it happened, and its mode.
    state: dict[str, Any]
    via_tick: bool = False

    def key(self) -> tuple[str, str, str, bool, bool]:
        return (self.kind, self.action, str(self.arg), self.via_tick,
                bool(self.state.get("auto_renew")))

    def describe(self) -> str:
        return f"{self.kind}: {self.action}({self.arg!r}): {self.detail}; spec state {self.state}"


@dataclass
class Report:
    model: Model
    states: int = 0
    edges: int = 0
    client_steps: int = 0
    probes: int = 0
    #: How many times each (action, reply value) was replayed.
    covered: dict[tuple[str, Arg], int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def distinct(self) -> dict[tuple[str, str, str, bool, bool], Finding]:
        """The first finding of each kind, action and reply value."""
        out: dict[tuple[str, str, str, bool, bool], Finding] = {}
        for f in self.findings:
            out.setdefault(f.key(), f)
        return out


class Replay:
    """Walks a model's graph, keeping one core world per state (the first path found)."""

    def __init__(self, graph: Graph, adapter: Adapter | None = None):
        self.graph = graph
        self.model = graph.model
        self.spec = adapter if adapter is not None else Adapter(graph.model)
        first = graph.states[graph.init[0]]
        self.clients = sorted(first["phase"])
        # Client variables: the spec's functions over clients that the core mirrors.
        self.client_vars = [v for v in self.spec.client_vars if v in first]
        self.report = Report(graph.model, states=len(graph.states), edges=len(graph.edges))
        self._probed: set[Any] = set()
        self._allowed: dict[tuple[Any, ...], dict[tuple[str, Arg], set[Any]]] = {}

    # -- reading spec steps ---------------------------------------------------------------

    def actor(self, src: dict[str, Value], dst: dict[str, Value]) -> str | None:
        """The client whose variables a client step changed."""
        moved = [c for c in self.clients
                 if any(src[v][c] != dst[v][c] for v in self.client_vars)]
        return moved[0] if len(moved) == 1 else None

    def _index(self) -> None:
        """Which steps (action, reply value) the spec takes from states with each key."""
        g = self.graph
        for src_id, dst_id, label in g.edges:
            if label not in self.spec.actions:
                continue
            src, dst = g.states[src_id], g.states[dst_id]
            c = self.actor(src, dst)
            assert c is not None, (label, src_id, dst_id)
            arg = self.spec.reply_value(label, c, src, dst)
            key = self.spec.client_key(src, c)
            self._allowed.setdefault(key, {}).setdefault((label, arg), set()).add(
                _freeze(self.spec.spec_view(dst, c)))

    # -- the walk -------------------------------------------------------------------------

    def new_client(self, state: dict[str, Value], c: str, now: float) -> Client:
        return Client(self.spec.new_section(state, c), now)

    def run(self, *, probe: bool = True) -> Report:
        self._index()
        g = self.graph
        worlds: dict[str, World] = {}
        queue: list[str] = []
        for sid in g.init:
            worlds[sid] = {c: self.new_client(g.states[sid], c, 0.0) for c in self.clients}
            queue.append(sid)
        head = 0
        while head < len(queue):
            sid = queue[head]
            head += 1
            world = worlds[sid]
            src = g.states[sid]
            for c in self.clients:
                self.check_view(world[c], src, c, "state")
            if probe:
                self.probe(world, src)
            for dst_id, label in g.out.get(sid, []):
                dst = g.states[dst_id]
                after = self.step(world, src, dst, label)
                if after is not None and dst_id not in worlds:
                    worlds[dst_id] = after
                    queue.append(dst_id)
        return self.report

    def step(self, world: World, src: dict[str, Value], dst: dict[str, Value],
             label: str) -> World | None:
        """The core's counterpart of one spec step; None when the core cannot follow."""
        if label == "Tick":
            after = {c: cl.clone() for c, cl in world.items()}
            for c, cl in after.items():
                if not self.spec.lags(c, src, dst):
                    cl.now += self.spec.unit_ms
            for c in self.clients:
                self.check_view(after[c], dst, c, "Tick")
            return after
        if label == "NewSection":
            after = dict(world)
            for c in self.clients:
                if src["token"][c] != dst["token"][c]:
                    after[c] = self.new_client(dst, c, world[c].now)
            return after
        if label in self.spec.silent:
            return self.silent_step(world, src, dst, label)
        if label not in self.spec.actions:
            return world  # Redis, the network, starvation: nothing the core sees
        actor = self.actor(src, dst)
        assert actor is not None
        c = actor
        self.report.client_steps += 1
        arg = self.spec.reply_value(label, c, src, dst)
        covered = self.report.covered
        covered[(label, arg)] = covered.get((label, arg), 0) + 1
        after = dict(world)
        client = after[c] = world[c].clone()
        fence = self.spec.fence(c, arg, dst)
        if label in self.spec.timer_actions:
            # The method itself must accept too, not only the scheduler's tick().
            direct = call(self.spec, client.clone(), label, arg)
            if direct.taken != [label]:
                self.fail("core refuses", label, arg, src, c, direct)
            res = call(self.spec, client, label, arg, via_tick=True)
        else:
            res = call(self.spec, client, label, arg, fence=fence)
        if res.taken != [label]:
            self.fail("core refuses", label, arg, src, c, res)
            return None
        self.spec.after(client, label, arg)
        assert res.step is not None
        sent = self.spec.core_sent(res.step)
        if sent != self.spec.sent_kind(c, src, dst):
            self.fail("sends otherwise", label, arg, src, c, res,
                      f"core sends {sent}, spec {self.spec.sent_kind(c, src, dst)}")
        fired = res.step.loss is not None
        spec_fired = self.spec.spec_fires(label, c, src, dst)
        if spec_fired is not None and fired != spec_fired:
            self.fail("signal differs", label, arg, src, c, res,
                      f"core fires the loss: {fired}, spec: {spec_fired}")
        self.check_view(client, dst, c, label, arg)
        return after

    def silent_step(self, world: World, src: dict[str, Value], dst: dict[str, Value],
                    label: str) -> World:
        """A client step the driver takes without the section: the section stays as it
        is, so the spec must change nothing of it, and send nothing."""
        c = self.actor(src, dst)
        assert c is not None, label
        self.report.client_steps += 1
        covered = self.report.covered
        covered[(label, None)] = covered.get((label, None), 0) + 1
        spec = self.spec.spec_view(src, c)
        problem = self.spec.silent_refusal(label)
        if problem is not None:
            self.report.add(Finding("core refuses", label, None, problem, spec))
        sent = self.spec.sent_kind(c, src, dst)
        if sent is not None:
            self.report.add(Finding("sends otherwise", label, None,
                                    f"core sends nothing, spec {sent}", spec))
        self.check_view(world[c], dst, c, label)
        return world

    def check_view(self, client: Client, state: dict[str, Value], c: str, after: str,
                   arg: Arg = None) -> None:
        if not self.spec.observed(state, c):
            return
        core, spec = self.spec.core_view(client), self.spec.spec_view(state, c)
        if core != spec:
            diff = {k: (core[k], spec[k]) for k in core if core[k] != spec[k]}
            self.report.add(Finding("state differs", after, arg,
                                    f"after it (core, spec): {diff}", spec))

    def probe(self, world: World, src: dict[str, Value]) -> None:
        """Every call the core accepts here must be a step the spec takes."""
        for c in self.clients:
            if not self.spec.active(src, c):
                continue
            key = self.spec.client_key(src, c)
            seen = (key, world[c].mark, fingerprint(world[c].section, world[c].now))
            if seen in self._probed:
                continue
            self._probed.add(seen)
            allowed = self._allowed.get(key, {})
            for action, arg, via_tick in self.spec.candidates():
                if self.spec.starved(src, c) and (via_tick or action in self.spec.starved_out):
                    continue
                if self.spec.beyond_model(src, c, action):
                    continue
                if not self.spec.possible(world[c], action, arg):
                    continue
                client = world[c].clone()
                res = call(self.spec, client, action, arg, via_tick=via_tick)
                self.report.probes += 1
                if not res.taken:
                    continue
                self.spec.after(client, res.taken[0], arg)
                name = res.taken[0]
                if via_tick:
                    arg = None
                if len(res.taken) != 1 or (name != action and not via_tick):
                    self.fail("core takes another action", action, arg, src, c, res,
                              f"recorded {res.taken}")
                    continue
                family = self.spec.family.get(name, name)
                if not any(self.spec.family.get(a, a) == family for a, _ in allowed):
                    self.fail("core accepts what the spec refuses", name, arg, src, c, res)
                    continue
                if (name, arg) not in allowed:
                    # Which reply comes, or whether the round trip fails, is the
                    # environment's choice, and this model's may never make that one
                    # from here (its fault budget spent, the key gone for good).
                    continue
                view = _freeze(self.spec.core_view(client))
                if view not in allowed[(name, arg)]:
                    spec_views = [dict(v) for v in allowed[(name, arg)]]
                    self.fail("core accepts to another state", name, arg, src, c, res,
                              f"core reaches {dict(view)}, spec {spec_views}")

    def fail(self, kind: str, action: str, arg: Arg, state: dict[str, Value], c: str,
             res: Call, detail: str = "") -> None:
        what = detail or (
            f"{res.describe()} raised {res.refused!r}" if res.refused is not None
            else f"{res.describe()} recorded {res.taken}"
        )
        where = {**self.spec.spec_view(state, c), "auto_renew": self.spec.auto_renew(state, c)}
        self.report.add(Finding(kind, action, arg, what, where, res.via_tick))


def replay(graph: Graph, adapter: Adapter | None = None, *, probe: bool = True) -> Report:
    return Replay(graph, adapter).run(probe=probe)


def summary(report: Report) -> str:
    lines = [f"{report.model.name}: {report.states} states, {report.edges} transitions, "
             f"{report.client_steps} client steps replayed, {report.probes} calls probed, "
             f"{len(report.findings)} disagreements"]
    lines += [f"  {f.describe()}" for f in report.distinct().values()]
    return "\n".join(lines)


class SemaphoreAdapter(Adapter):
    """``spec/Semaphore.tla`` and :class:`SemaphoreSection`: the lock's actions on a permit,
    granted or not instead of a fence."""

    client_vars: ClassVar[tuple[str, ...]] = (*Adapter.client_vars, "granted")

    def new_section(self, state: dict[str, Value], c: str) -> Section:
        tok = state["token"][c]
        cfg = section_config(self.model, self.auto_renew(state, c))
        limit = int(dict(self.model.extra).get("Limit", "1"))
        return SemaphoreSection("k", f"{tok[0]}-{tok[1]}", cfg, limit=limit, client=c,
                                record=True)

    def granted(self, sec: Section) -> bool:
        return bool(getattr(sec, "granted", False))

    def spec_granted(self, state: dict[str, Value], c: str) -> bool:
        return bool(state["granted"][c])

    def fence(self, c: str, arg: Arg, dst: dict[str, Value]) -> int:
        return 1 if arg == "granted" else 0


# -- what the test files share --------------------------------------------------------------

#: Findings of the first direction (a spec step the core does not follow).
FORWARD: Final = frozenset({"core refuses", "sends otherwise", "signal differs", "state differs"})


@dataclass(frozen=True)
class Known:
    """A disagreement between the core and the spec, found by these tests."""

    action: str
    via_tick: bool
    where: tuple[tuple[str, Any], ...]
    why: str
    #: Countdowns that are above 0 where it happens.
    positive: tuple[str, ...] = ()
    kind: str = "core accepts what the spec refuses"
    #: Other actions and kinds of finding it covers, values the spec's view does not have
    #: where it happens, and values one of which it has.
    also: tuple[str, ...] = ()
    where_not: tuple[tuple[str, Any], ...] = ()
    kinds: tuple[str, ...] = ()
    where_in: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def matches(self, finding: Finding) -> bool:
        return (
            finding.kind in (self.kind, *self.kinds)
            and finding.action in (self.action, *self.also)
            and finding.via_tick == self.via_tick
            and all(finding.state.get(k) == v for k, v in self.where)
            and all(finding.state.get(k) != v for k, v in self.where_not)
            and all(finding.state.get(k) in vs for k, vs in self.where_in)
            and all((finding.state.get(k) or 0) > 0 for k in self.positive)
        )


def listing(findings: list[Finding]) -> str:
    distinct: dict[tuple[str, str, str, bool, bool], Finding] = {}
    for f in findings:
        distinct.setdefault(f.key(), f)
    return "\n".join(f.describe() for f in distinct.values())


class Replays:
    """The replays of one spec's models, each made once per test session (TLC runs for
    seconds), and the checks every spec's test file makes of them."""

    def __init__(self, models: Mapping[str, Model], adapter: type[Adapter],
                 known: Mapping[str, Known] | None = None) -> None:
        self.models = models
        self.adapter = adapter
        self.known = dict(known or {})
        self._reports: dict[str, Report] = {}

    def report(self, name: str) -> Report:
        if name not in self._reports:
            from tests import spec_graph

            graph = spec_graph.build(self.models[name])
            self._reports[name] = replay(graph, self.adapter(graph.model))
        return self._reports[name]

    def check_forward(self, name: str, *, min_steps: int = 1000) -> None:
        """Every spec step is taken by the core, alike."""
        rep = self.report(name)
        found = [f for f in rep.findings if f.kind in FORWARD
                 and not any(k.matches(f) for k in self.known.values())]
        assert rep.client_steps > min_steps, rep.client_steps
        assert not found, f"{len(found)} spec steps the core does not follow:\n{listing(found)}"

    def check_backward(self, name: str, *, min_probes: int = 1000) -> None:
        """Every call the core accepts is a spec step, alike."""
        rep = self.report(name)
        found = [f for f in rep.findings if f.kind not in FORWARD
                 and not any(k.matches(f) for k in self.known.values())]
        assert rep.probes > min_probes, rep.probes
        assert not found, (
            f"{len(found)} calls the core accepts and the spec does not take:\n"
            + listing(found))

    def check_known(self, key: str) -> None:
        """A known disagreement is still there (else its entry is stale)."""
        k = self.known[key]
        hits = [f for name in self.models for f in self.report(name).findings if k.matches(f)]
        assert hits, f"{key} is gone: remove it from the known disagreements ({k.why})"

    def covered(self) -> set[tuple[str, Arg]]:
        out: set[tuple[str, Arg]] = set()
        for name in self.models:
            out |= {k for k, n in self.report(name).covered.items() if n}
        return out

    def check_coverage(self, wanted: set[tuple[str, Arg]]) -> None:
        missing = wanted - self.covered()
        assert not missing, f"never replayed: {sorted(map(str, missing))}"

    def every_step(self, actions: Mapping[str, str]) -> set[tuple[str, Arg]]:
        """Each of ``actions`` with each reply value its adapter knows."""
        return {(a, arg) for a, arg, tick in self.adapter.candidates_of(actions) if not tick}


class ReentrantAdapter(Adapter):
    """``spec/Reentrant.tla`` and :class:`ReentrantSection`: one section per holder (its
    token is the holder's name), run/hold only, no retry, no drift; the lock's actions at
    the outermost level and the depth writes inside it."""

    actions: ClassVar[Mapping[str, str]] = {**CLIENT_ACTIONS, **REENTRANT_ACTIONS}
    reply_kind: ClassVar[Mapping[str, str]] = {
        **REPLY_KIND, "ReenterReply": "enter", "LeaveReply": "leave"}
    family: ClassVar[Mapping[str, str]] = {
        **FAMILY, "ReenterReply": "Reenter*", "ReenterFail": "Reenter*",
        "LeaveReply": "Leave*", "LeaveFail": "Leave*"}
    client_vars: ClassVar[tuple[str, ...]] = (
        "phase", "outcome", "fence", "depth", "deadline_in", "sent_ago", "renew_in_flight",
        "renew_sent_ago", "next_renew_in", "op", "op_sent_ago", "lost")
    op_kind: ClassVar[Mapping[str, str]] = {Op.REENTER.value: "enter"}
    #: The spec's ``op`` for the core's ``depth_op``.
    depth_op: ClassVar[Mapping[Op | None, str]] = {
        None: "none", Op.REENTER: "enter", Op.LEAVE: "leave"}
    #: Every exit of the outermost level passes the core's check first (both drivers).
    outermost_exits: ClassVar[frozenset[str]] = frozenset({"BodyDone", "Release"})

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        extra = dict(model.extra)
        self.max_depth = int(extra.get("MaxDepth", "1"))
        self.deep = set(parse_value(extra.get("Deep", "{}")))

    def beyond_model(self, state: dict[str, Value], c: str, action: str) -> bool:
        # The model's bounds, not guards: how deep a holder goes, and which holders re-enter.
        return action == "Reenter" and (
            state["depth"][c] >= self.max_depth or c not in self.deep)

    def invoke(self, sec: Section, now: float, action: str, arg: Arg, fence: int) -> Step:
        if action in self.outermost_exits:
            assert isinstance(sec, ReentrantSection)
            sec.check_outermost_exit()
        return super().invoke(sec, now, action, arg, fence)

    def new_section(self, state: dict[str, Value], c: str) -> Section:
        return ReentrantSection("k", c, section_config(self.model, True), client=c,
                                record=True)

    def core_view(self, client: Client) -> dict[str, Any]:
        sec = client.section
        assert isinstance(sec, ReentrantSection)
        view = super().core_view(client)
        del view["retries_left"], view["extend_in_flight"]
        # The spec's depth counts the levels still open: the outermost one closes with the
        # body (or its release); the core keeps counting it, and reads it only while held.
        depth = sec.depth if sec.phase is Phase.HELD else 0
        return {**view, "depth": depth, "op": self.depth_op[sec.depth_op]}

    def spec_view(self, state: dict[str, Value], c: str) -> dict[str, Any]:
        return {**self.lease_view(state, c), "depth": state["depth"][c], "op": state["op"][c]}

    def client_key(self, state: dict[str, Value], c: str) -> tuple[Any, ...]:
        phase = state["phase"][c]
        held = phase == "held"
        return (
            *self.spec_view(state, c).values(),
            state["sent_ago"][c] if phase == "acquiring" else None,
            state["renew_sent_ago"][c] if held and state["renew_in_flight"][c] else None,
            state["op_sent_ago"][c] if state["op"][c] == "enter" else None,
        )

    def mine(self, m: dict[str, Value], c: str, state: dict[str, Value]) -> bool:
        return bool(m["h"] == c)


class WaitAdapter(Adapter):
    """``spec/Wait.tla``'s clients and :class:`Section`'s waiting path: attempts with a
    place in the key's queue, blocks, wake-ups, handoffs and withdrawals.  The spec has no
    lease clock, fence or renewal: only what it has is compared (phase, outcome, the wait
    and the block left).  The core keeps one phase, ``waiting``, for the spec's
    ``refused``, ``blocked`` and ``woken`` (the driver's sequence: block, then wake), and
    none for ``withdrawing``: the replay keeps that place as ``Client.mark``."""

    actions: ClassVar[Mapping[str, str]] = {
        a: d for a, d in {**CLIENT_ACTIONS, **WAIT_ACTIONS}.items()
        if a in ("Acquire", "AcquireReply", "AcquireFail", "BodyDone", "Release",
                 "ReleaseReply", "ReleaseFail", *WAIT_ACTIONS)}
    reply_kind: ClassVar[Mapping[str, str]] = {
        "AcquireReply": "refused", "ReleaseReply": "released", "Wake": "element"}
    family: ClassVar[Mapping[str, str]] = {
        "AcquireReply": "Acquire*", "AcquireFail": "Acquire*",
        "ReleaseReply": "Release*", "ReleaseFail": "Release*",
        "WithdrawReply": "Withdraw*", "WithdrawFail": "Withdraw*"}
    timer_actions: ClassVar[frozenset[str]] = frozenset()
    starved_out: ClassVar[frozenset[str]] = frozenset()
    client_vars: ClassVar[tuple[str, ...]] = ("phase", "outcome", "wait_left", "block_left")
    op_kind: ClassVar[Mapping[str, str]] = {
        Op.ACQUIRE.value: "attempt", Op.WITHDRAW.value: "leave"}
    unit_ms: ClassVar[int] = 250

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        extra = dict(model.extra)
        self.waiting = set(parse_value(extra.get("Waiting", "{}")))
        self.max_wait = int(extra.get("MaxWait", "1"))
        self.rechecks = max(model.ttl, self.max_wait)
        self.cancels = "cancel" in extra.get("FaultKinds", '{"cancel"}')

    def new_section(self, state: dict[str, Value], c: str) -> Section:
        u = self.unit_ms
        cfg = SectionConfig(
            ttl_ms=self.model.ttl * u, retries=0, retry_delay_ms=0.0, renew_every_ms=u,
            watch=True, drift_factor=0.0,
            wait_ms=self.max_wait * u if c in self.waiting else 0)
        return Section("k", c, cfg, client=c, record=True)

    def after(self, client: Client, action: str, arg: Arg) -> None:
        phase = client.section.phase
        if action == "Withdraw":
            client.mark = "withdrawing"
        elif action in ("WithdrawReply", "WithdrawFail"):
            client.mark = ""
        elif client.mark == "withdrawing":
            pass
        elif phase is not Phase.WAITING:
            client.mark = ""
        elif action == "AcquireReply":
            client.mark = "refused"
        elif action == "Block":
            client.mark = "blocked"
        elif action == "Wake":
            client.mark = "woken"

    def core_view(self, client: Client) -> dict[str, Any]:
        sec, u = client.section, self.unit_ms
        phase = client.mark or sec.phase.value
        waiting = sec.waiting
        still = phase in ("acquiring", "refused", "blocked", "woken") and waiting is not None
        wait_left = None
        if still and waiting is not None and waiting.until is not None:
            wait_left = ticks((waiting.until - client.now) * UNIT_MS / u)
        block_left = None
        if phase in ("refused", "blocked") and waiting is not None:
            block_left = ticks((waiting.block_until - client.now) * UNIT_MS / u)
        return {"phase": phase, "outcome": sec.outcome.value, "wait_left": wait_left,
                "block_left": block_left}

    def spec_view(self, state: dict[str, Value], c: str) -> dict[str, Any]:
        phase = state["phase"][c]
        still = phase in ("acquiring", "refused", "blocked", "woken") and c in self.waiting
        return {"phase": phase, "outcome": state["outcome"][c],
                "wait_left": state["wait_left"][c] if still else None,
                "block_left": state["block_left"][c] if phase in ("refused", "blocked")
                else None}

    def client_key(self, state: dict[str, Value], c: str) -> tuple[Any, ...]:
        return (*self.spec_view(state, c).values(), c in self.waiting,
                state["faults"] < self.model.max_faults)

    def mine(self, m: dict[str, Value], c: str, state: dict[str, Value]) -> bool:
        return bool(m["c"] == c)

    def reply_value(self, action: str, c: str, src: dict[str, Value],
                    dst: dict[str, Value]) -> Arg:
        if action == "AcquireReply":
            if dst["phase"][c] == "held":
                return "granted"
            gone = [m for m in src["net"] if m["c"] == c and m["kind"] == "refused"
                    and m not in dst["net"]]
            return f"refused {gone[0]['n']}"
        if action == "Wake":
            return "handed" if dst["phase"][c] == "held" else None
        if action == "ReleaseReply":
            gone = [m for m in src["net"] if m["c"] == c and m["kind"] == "released"
                    and m not in dst["net"]]
            return bool(gone[0]["n"] == 1)
        return None

    def sent_kind(self, c: str, src: dict[str, Value], dst: dict[str, Value]) -> str | None:
        # The BLPOP of a block is the driver's command, not the core's.
        new = [m["kind"] for m in dst["net"]
               if m["c"] == c and m["kind"] in ("attempt", "release", "leave")
               and m not in src["net"]]
        return new[0] if new else None

    def fence(self, c: str, arg: Arg, dst: dict[str, Value]) -> int:
        return 1 if arg in ("granted", "handed") else 0

    def spec_fires(self, label: str, c: str, src: dict[str, Value],
                   dst: dict[str, Value]) -> bool | None:
        return None  # no loss signal in Wait.tla

    def beyond_model(self, state: dict[str, Value], c: str, action: str) -> bool:
        # A withdrawal is a cancellation (a fault of the model) or a broken block.
        return action == "Withdraw" and not (
            self.cancels and state["faults"] < self.model.max_faults)

    def active(self, state: dict[str, Value], c: str) -> bool:
        return bool(state["phase"][c] != "dead")

    def possible(self, client: Client, action: str, arg: Arg) -> bool:
        # A waiter's attempt that carried no wait (the last) is refused with 0, any other
        # with the re-check time, at least 1.
        waiting = client.section.waiting
        if action != "AcquireReply" or waiting is None or arg == "granted":
            return True
        return (arg == "refused 0") == (waiting.sent_ms == 0)

    def invoke(self, sec: Section, now: float, action: str, arg: Arg, fence: int) -> Step:
        if action == "AcquireReply":
            if arg == "granted":
                return sec.acquire_reply(now, 1)
            assert isinstance(arg, str)
            return sec.acquire_reply(now, -int(arg.split()[1]) * self.unit_ms)
        if action == "Wake":
            return sec.wake(now, arg == "handed", 1 if arg == "handed" else 0)
        return super().invoke(sec, now, action, arg, fence)

    def candidates(self) -> list[tuple[str, Arg, bool]]:
        out: list[tuple[str, Arg, bool]] = []
        for action in self.actions:
            if action == "AcquireReply":
                out += [(action, "granted", False)]
                out += [(action, f"refused {n}", False) for n in range(self.rechecks + 1)]
            elif action == "Wake":
                out += [(action, "handed", False), (action, None, False)]
            elif action == "ReleaseReply":
                out += [(action, True, False), (action, False, False)]
            else:
                out.append((action, None, False))
        return out


class ReadWriteAdapter(Adapter):
    """``spec/ReadWrite.tla`` and :class:`ReadSection` / :class:`WriteSection`: the lock's
    actions whatever the role, a waiter's ``Withdraw``, and the reader's ``Upgrade``,
    which the drivers refuse before any section exists (:func:`reentry_refused`), so it is
    ``silent``: the section goes on as it was.

    The spec's waiting is its queue and its places, not its wake-ups: a refused waiter
    (phase ``waiting``) attempts again, or withdraws, whenever it likes.  The core's
    ``block`` and ``wake`` (no key is handed over here: a release only wakes) change
    nothing the spec shows, and are not called; its waiting deadline is made longer than
    any behaviour, as the spec's waiters wait until they withdraw (the last attempt,
    refused and out of the queue in one script, is ``Wait.tla``'s, replayed by
    ``tests/test_guards_wait.py``)."""

    actions: ClassVar[Mapping[str, str]] = {
        **CLIENT_ACTIONS, "Withdraw": WAIT_ACTIONS["Withdraw"]}
    silent: ClassVar[frozenset[str]] = frozenset({"Upgrade", "UpgradeReply"})
    client_vars: ClassVar[tuple[str, ...]] = (*Adapter.client_vars, "granted", "asked")
    op_kind: ClassVar[Mapping[str, str]] = {Op.WITHDRAW.value: "leave"}
    #: A waiter's deadline: no model's behaviour comes near it.
    wait_ms: ClassVar[int] = 10**9

    def new_section(self, state: dict[str, Value], c: str) -> Section:
        tok = state["token"][c]
        base = section_config(self.model, self.auto_renew(state, c))
        cfg = SectionConfig(
            ttl_ms=base.ttl_ms, retries=base.retries, retry_delay_ms=base.retry_delay_ms,
            renew_every_ms=base.renew_every_ms, watch=base.watch,
            drift_factor=base.drift_factor,
            wait_ms=self.wait_ms if state["waits"][c] else 0)
        cls = ReadSection if state["role"][c] == "read" else WriteSection
        return cls("k", f"{tok[0]}-{tok[1]}", cfg, client=c, record=True)

    def granted(self, sec: Section) -> bool:
        return sec.granted

    def spec_granted(self, state: dict[str, Value], c: str) -> bool:
        return bool(state["granted"][c])

    def core_view(self, client: Client) -> dict[str, Any]:
        view = super().core_view(client)
        if client.section.waiting is not None:
            # A waiter's attempts are not retries: the spec's retries_left stays.
            view["retries_left"] = self.model.retries
        return view

    def client_key(self, state: dict[str, Value], c: str) -> tuple[Any, ...]:
        # A refusal's effect depends on whether the section waits; the role is in every
        # request.  Two clients of a model share keys only where both agree.
        return (*super().client_key(state, c), state["role"][c], state["waits"][c])

    def fence(self, c: str, arg: Arg, dst: dict[str, Value]) -> int:
        # A reader granted before any write gets the counter as it stands, 0 in the spec;
        # the script makes the counter first, so a grant's reply is never 0.
        return max(int(dst["fence"][c]), 1) if arg == "granted" else 0

    def invoke(self, sec: Section, now: float, action: str, arg: Arg, fence: int) -> Step:
        if action == "AcquireReply" and arg != "granted" and sec.waiting is not None:
            # A waiting attempt's refusal carries how long it may last (>= 1 ms).
            return sec.acquire_reply(now, -self.unit_ms)
        return super().invoke(sec, now, action, arg, fence)

    def core_sent(self, step: Step) -> str | None:
        # The role travels in every request: the scripts' rules are the role's.
        sent = super().core_sent(step)
        return None if sent is None or step.send is None else f"{sent} {step.send.kind.value}"

    def sent_kind(self, c: str, src: dict[str, Value], dst: dict[str, Value]) -> str | None:
        new = [f"{m['kind']} {m['role']}" for m in dst["net"]
               if self.mine(m, c, dst) and m["st"] == "sent" and m not in src["net"]]
        return new[0] if new else None

    def silent_refusal(self, action: str) -> str | None:
        if action != "Upgrade":
            return None
        refused = reentry_refused("k", Kind.READ, Kind.WRITE)
        if isinstance(refused, UpgradeError):
            return None
        return f"a read asking for the write is refused with {refused!r}, not UpgradeError"


class ElectionAdapter(Adapter):
    """``spec/Election.tla``'s candidates and :class:`CampaignSection`: the lock's actions
    and its handoff's ``Wake`` (a wake-up carrying the handed fence: held, the lease
    counted from the last attempt) and ``Withdraw``; every campaign waits (the drivers'
    ``wait_ms=None``, a deadline no model comes near) and is renewed.  A block ends
    without a wake-up in the next ``Acquire``: the core's ``block`` and a ``wake`` with
    no fence change nothing the spec shows, and are not called.

    ``Die`` is the environment's: the spec ends the killed candidate's section, which no
    core runs any more, so a dead candidate is neither observed nor probed.  What the spec
    observes adds the handle's check before its leader acts, ``leading()`` against the
    spec's ``Leading`` (``Acting``) in every state, a starved loop's among them."""

    actions: ClassVar[Mapping[str, str]] = {
        **CLIENT_ACTIONS, "Wake": WAIT_ACTIONS["Wake"], "Withdraw": WAIT_ACTIONS["Withdraw"]}
    #: A campaign's deadline (``campaign(wait_ms=None)``): no model's behaviour comes near.
    wait_ms: ClassVar[int] = 10**9

    def new_section(self, state: dict[str, Value], c: str) -> Section:
        tok = state["token"][c]
        base = section_config(self.model, True)
        cfg = SectionConfig(
            ttl_ms=base.ttl_ms, retries=base.retries, retry_delay_ms=base.retry_delay_ms,
            renew_every_ms=base.renew_every_ms, watch=True, drift_factor=base.drift_factor,
            wait_ms=self.wait_ms, cancel_on_loss=False)
        section = CampaignSection("k", f"{tok[0]}-{tok[1]}", cfg, client=c, record=True)
        section.identity = c
        return section

    def core_view(self, client: Client) -> dict[str, Any]:
        view = super().core_view(client)
        # A campaign's attempts are not retries: the spec's retries_left stays.
        view["retries_left"] = self.model.retries
        return {**view, "leading": leading(client.section, client.now)}

    def spec_view(self, state: dict[str, Value], c: str) -> dict[str, Any]:
        leads = (state["phase"][c] == "held" and not state["lost"][c]
                 and state["deadline_in"][c] > 0)
        return {**super().spec_view(state, c), "leading": leads}

    def client_key(self, state: dict[str, Value], c: str) -> tuple[Any, ...]:
        # A waiter's lease, if the key is handed to it, counts from its last attempt.
        waiting = state["phase"][c] == "waiting"
        return (*super().client_key(state, c), state["sent_ago"][c] if waiting else None)

    def observed(self, state: dict[str, Value], c: str) -> bool:
        return c not in state["dead"]

    def reply_value(self, action: str, c: str, src: dict[str, Value],
                    dst: dict[str, Value]) -> Arg:
        if action == "Wake":
            return "handed"
        return super().reply_value(action, c, src, dst)

    def fence(self, c: str, arg: Arg, dst: dict[str, Value]) -> int:
        return int(dst["fence"][c]) if arg in ("granted", "handed") else 0

    def invoke(self, sec: Section, now: float, action: str, arg: Arg, fence: int) -> Step:
        if action == "Wake":
            return sec.wake(now, True, fence)
        if action == "AcquireReply" and arg != "granted":
            # A waiting attempt's refusal carries how long it may last (>= 1 ms).
            return sec.acquire_reply(now, -self.unit_ms)
        return super().invoke(sec, now, action, arg, fence)

    def core_sent(self, step: Step) -> str | None:
        # A campaign's every request runs the election's scripts.
        sent = super().core_sent(step)
        if sent is None or step.send is None:
            return None
        kind = step.send.kind
        return sent if kind is Kind.CAMPAIGN else f"{sent} ({kind.value})"

    @classmethod
    def candidates_of(cls, actions: Iterable[str]) -> list[tuple[str, Arg, bool]]:
        return [(a, "handed" if a == "Wake" else arg, tick)
                for a, arg, tick in super().candidates_of(actions)]
