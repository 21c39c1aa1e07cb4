"""The complete state graph of a small model of a spec (``spec/DistLock.tla``,
``Reentrant.tla``, ``Semaphore.tla``, ``Wait.tla``), as TLC dumps it.

Random simulation in this TLC build runs until killed and prints no behaviour unless an
invariant breaks, so it cannot hand over many behaviours per JVM start.  An exhaustive
search of a small model can: ``-dump dot,actionlabels`` writes every reachable state and
every transition, each labelled with the action that took it.  That is every behaviour
of the model at once, and it also tells which actions the spec does NOT take in a state,
which is what a guard comparison needs.

The model is generated at test time (a config beside a one-line module extending the
real spec), so edits to the spec are checked as they land.  Constants this module does not
set are taken from the spec's default cfg (``spec/<Module>.cfg``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distlock.tools import specfiles

#: A TLA+ value as parsed here: int, bool, str (strings and model values alike), tuple
#: (sequences), list (sets), dict (records and functions).
Value = Any


@dataclass(frozen=True)
class Model:
    """A small model: the constants that matter for guards.

    The fields are the lock's constants (the semaphore shares them); ``module`` names the
    spec, and ``extra`` sets any other constant or overridable definition by name (for a
    spec whose constants are not the lock's, ``lock_constants=False`` keeps only the lease's
    terms, ``TTL``, ``Heartbeat``, ``Margin``, ``MaxFaults``, and ``extra`` says the rest)."""

    name: str
    module: str = "DistLock"
    clients: int = 1
    rounds: int = 1
    retries: int = 0
    ttl: int = 4
    heartbeat: int = 1
    margin: int = 1
    max_drift: int = 0
    max_faults: int = 0
    manual: bool = False
    extra: tuple[tuple[str, str], ...] = ()
    lock_constants: bool = True
    #: The spec's client actions (operators of one client), when its ``Next`` does not
    #: let TLC label each client step with its action (a client set that changes, such
    #: as the semaphore's ``Clients \\ dead``): the model then steps by a ``Next`` of its
    #: own, each client action on its own under ``client_guard``, then ``EnvStep``.
    client_actions: tuple[str, ...] = ()
    client_set: str = "Clients"
    client_guard: str = "TRUE"
    #: What tells two states apart (TLC's VIEW), when the spec keeps variables no guard
    #: reads (ghosts for its properties): states that differ only there have the same
    #: steps, so one of them is enough, and a model with many such is much smaller.
    view: str = ""
    #: The spec's initial predicate, and (with ``client_actions``) the disjuncts of the
    #: model's ``Next`` after the client actions: a spec that extends another names its
    #: own (``spec/Election.tla``: ``EInit``, and its ``ENext`` without the candidates).
    init: str = "Init"
    env: tuple[str, ...] = ("EnvStep",)
    #: Actions the replay knows by another name: (its name, the spec's), ``("Tick",
    #: "ETick")``: the graph's labels say the former.
    aliases: tuple[tuple[str, str], ...] = ()

    def constants(self) -> dict[str, str]:
        if not self.lock_constants:
            # The lease's terms are named alike in every spec; the rest is the spec's own.
            return {"TTL": str(self.ttl), "Heartbeat": str(self.heartbeat),
                    "Margin": str(self.margin), "MaxFaults": str(self.max_faults),
                    "Mutant": '"none"', **dict(self.extra)}
        names = [f"c{i}" for i in range(1, self.clients + 1)]
        return {
            "Clients": "{" + ", ".join(names) + "}",
            "MaxRounds": str(self.rounds),
            "Retries": str(self.retries),
            "TTL": str(self.ttl),
            "Heartbeat": str(self.heartbeat),
            "Margin": str(self.margin),
            "Timely": "FALSE",
            "MaxDrift": str(self.max_drift),
            "MaxFaults": str(self.max_faults),
            "CounterSurvives": "TRUE",
            "Manual": "TRUE" if self.manual else "FALSE",
            "Mutant": '"none"',
            **{n: n for n in names},
            **dict(self.extra),
        }


@dataclass
class Graph:
    """Every reachable state of a model and every transition between them."""

    model: Model
    states: dict[str, dict[str, Value]]
    init: list[str]
    #: (source, target, action label)
    edges: list[tuple[str, str, str]]
    seconds: float = 0.0
    out: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for src, dst, label in self.edges:
            self.out.setdefault(src, []).append((dst, label))


class TLCError(RuntimeError):
    pass


_CONST_LINE = re.compile(r"^\s*(\w+)\s*=\s*(.+?)\s*$")


def _default_constants(spec: Path, module: str) -> dict[str, str]:
    """The CONSTANTS block of the default model: values for constants added later."""
    out: dict[str, str] = {}
    inside = False
    for raw in (spec / f"{module}.cfg").read_text().splitlines():
        line = raw.split("\\*")[0].rstrip()
        if not line.strip():
            continue
        if re.match(r"^[A-Z_]+\b", line):
            inside = line.strip() in ("CONSTANTS", "CONSTANT")
            continue
        if inside and (found := _CONST_LINE.match(line)):
            out[found.group(1)] = found.group(2)
    return out


def _cfg(model: Model, spec: Path) -> str:
    constants = _default_constants(spec, model.module)
    # Model values of the default model (c1 = c1, ...) name clients this model may lack.
    constants = {k: v for k, v in constants.items() if k != v}
    if model.lock_constants:
        # The core lets a run/hold body release its own key: the spec's option for it.
        constants["EarlyRelease"] = "TRUE"
    constants.update(model.constants())
    lines = ["CONSTANTS", *(f"    {k} = {v}" for k, v in constants.items())]
    nxt = "GuardNext" if model.client_actions else "Next"
    view = [f"VIEW {_PREFIX}View"] if model.view else []
    return "\n".join([*lines, f"INIT {model.init}", f"NEXT {nxt}", *view, ""])


#: Prefix of the generated per-action operators; the graph's labels lose it.
_PREFIX = "G_"


def _module(model: Model) -> str:
    """A module extending the spec; with ``client_actions``, a ``Next`` labelled by them."""
    lines = ["---- MODULE GuardModel ----", f"EXTENDS {model.module}"]
    if model.client_actions:
        for a in model.client_actions:
            lines.append(f"{_PREFIX}{a}(c) == {model.client_guard} /\\ {a}(c)")
        lines.append("GuardNext ==")
        lines += [f"    \\/ \\E c \\in {model.client_set} : {_PREFIX}{a}(c)"
                  for a in model.client_actions]
        lines += [f"    \\/ {step}" for step in model.env]
    if model.view:
        lines.append(f"{_PREFIX}View == {model.view}")
    return "\n".join([*lines, "====", ""])


def build(model: Model, *, timeout_s: float = 300.0) -> Graph:
    """Run TLC on ``model`` and read back its state graph."""
    spec = specfiles.spec_dir()
    java = shutil.which("java")
    if java is None:
        raise TLCError("java is not installed")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="distlock-guards-") as tmp:
        work = Path(tmp)
        (work / "GuardModel.tla").write_text(_module(model), encoding="ascii")
        (work / "GuardModel.cfg").write_text(_cfg(model, spec), encoding="ascii")
        (work / "tmp").mkdir()
        cmd = [
            java,
            "-XX:+UseParallelGC",
            f"-Djava.io.tmpdir={work / 'tmp'}",
            f"-DTLA-Library={spec.resolve()}",
            "-cp",
            str(specfiles.tla2tools()),
            "tlc2.TLC",
            "-workers",
            "1",
            # Sections end; a final state is not an error here.
            "-deadlock",
            "-metadir",
            str(work / "meta"),
            "-config",
            "GuardModel.cfg",
            "-dump",
            "dot,actionlabels",
            str(work / "graph"),
            "GuardModel.tla",
        ]
        proc = subprocess.run(
            cmd, cwd=work, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if proc.returncode != 0:
            raise TLCError(f"TLC exit {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
        dot = work / "graph.dot"
        if not dot.is_file():
            dot = work / "graph"
        graph = parse_dot(model, dot.read_text())
    graph.seconds = time.monotonic() - started
    return graph


_NODE = re.compile(r'^(-?\d+) \[label="(.*)"(,style = filled)?\]?;?$')
_EDGE = re.compile(r'^(-?\d+) -> (-?\d+) \[label="(\w+)"')


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def parse_dot(model: Model, text: str) -> Graph:
    states: dict[str, dict[str, Value]] = {}
    init: list[str] = []
    edges: list[tuple[str, str, str]] = []
    renamed = {spec: ours for ours, spec in model.aliases}
    for line in text.splitlines():
        if found := _EDGE.match(line):
            label = found.group(3).removeprefix(_PREFIX)
            label = renamed.get(label, label)
            edges.append((found.group(1), found.group(2), label))
        elif (found := _NODE.match(line)) and found.group(1) not in states:
            states[found.group(1)] = parse_state(_unescape(found.group(2)))
            if found.group(3):
                init.append(found.group(1))
    if not init or not edges:
        raise TLCError(f"no states or no transitions in the dump ({len(states)} states)")
    return Graph(model, states, init, edges)


def parse_state(text: str) -> dict[str, Value]:
    out: dict[str, Value] = {}
    for part in text.split("/\\ "):
        part = part.strip()
        if part:
            name, _, value = part.partition(" = ")
            out[name.strip()] = parse_value(value)
    return out


_TOKEN = re.compile(
    r'\s*(?:(<<|>>|\|->|:>|@@|[\[\]{}(),])|("(?:[^"\\]|\\.)*")|(-?\d+)|([A-Za-z_]\w*))'
)


def parse_value(text: str) -> Value:
    tokens: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if not found or found.end() == pos:
            raise ValueError(f"cannot read TLA+ value at {text[pos:pos + 40]!r}")
        tokens.append(found.group(0).strip())
        pos = found.end()
    value, end = _parse(tokens, 0)
    if end != len(tokens):
        raise ValueError(f"trailing tokens in {text!r}")
    return value


def _parse(tokens: list[str], i: int) -> tuple[Value, int]:
    tok = tokens[i]
    if tok == "<<":
        items, i = _items(tokens, i + 1, ">>")
        return tuple(items), i
    if tok == "{":
        items, i = _items(tokens, i + 1, "}")
        return items, i
    if tok == "[":
        rec: dict[str, Value] = {}
        i += 1
        while tokens[i] != "]":
            name = tokens[i]
            assert tokens[i + 1] == "|->", tokens[i : i + 3]
            rec[name], i = _parse(tokens, i + 2)
            if tokens[i] == ",":
                i += 1
        return rec, i + 1
    if tok == "(":
        fun: dict[Value, Value] = {}
        i += 1
        while tokens[i] != ")":
            key, i = _parse(tokens, i)
            assert tokens[i] == ":>", tokens[i : i + 3]
            fun[key], i = _parse(tokens, i + 1)
            if tokens[i] == "@@":
                i += 1
        return fun, i + 1
    if tok.startswith('"'):
        return tok[1:-1], i + 1
    if tok in ("TRUE", "FALSE"):
        return tok == "TRUE", i + 1
    if tok.lstrip("-").isdigit():
        return int(tok), i + 1
    return tok, i + 1


def _items(tokens: list[str], i: int, close: str) -> tuple[list[Value], int]:
    items: list[Value] = []
    while tokens[i] != close:
        item, i = _parse(tokens, i)
        items.append(item)
        if tokens[i] == ",":
            i += 1
    return items, i + 1
