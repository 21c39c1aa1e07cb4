"""Write the sync driver (``distlock/_sync/``) from the asyncio one (``distlock/_async/``),
and the sync driver tests (``tests/drivers/_sync/``) from the asyncio ones
(``tests/drivers/_async/``).

The asyncio driver is the one hand-written driver source.  Each of its modules but the
hand-written ones (the backend and the cancellation accounting, which each package has its
own of: :data:`PAIRS`) is rewritten by a table of token replacements
(``async def`` to ``def``, ``await`` dropped, ``__aenter__`` to ``__enter__``, the asyncio
names of options and signals to the sync ones, ...) into the module of the same name in
``distlock/_sync/``, under a first line saying where it came from.  Lines between
``# unasync: begin async only`` and ``# unasync: end``, and each line ending in
``# unasync: async only``, are left out of the sync module (asyncio's bookkeeping, which
would be calls of no-ops in the sync driver's hot path).

    python tools/unasync.py           # write distlock/_sync/*.py, tests/drivers/_sync/test_*.py
    python tools/unasync.py --check   # exit 1 if any of them differs from what it would write

A development tool: not shipped in the package.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "distlock" / "_async"
TARGET = ROOT / "distlock" / "_sync"
#: Written by hand in both packages: everything asyncio and threads truly do differently.
HAND_WRITTEN = frozenset({"backend.py", "cancellation.py"})
#: Asyncio's alone: the deferred run() (its timers and the body share one thread).
ASYNC_ONLY = frozenset({"deferred.py"})
TESTS_SOURCE = ROOT / "tests" / "drivers" / "_async"
TESTS_TARGET = ROOT / "tests" / "drivers" / "_sync"


@dataclass(frozen=True)
class Pair:
    """A hand-written asyncio package and the sync one written from it: the modules named
    by ``pattern`` but the ``hand_written`` ones (which each package has its own of)."""

    source: Path
    target: Path
    pattern: str
    hand_written: frozenset[str]


PAIRS = (
    Pair(SOURCE, TARGET, "*.py", HAND_WRITTEN),
    Pair(TESTS_SOURCE, TESTS_TARGET, "test_*.py", frozenset({"concurrency.py"})),
)

#: (pattern, replacement), applied in order to every line.
RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(pattern), replacement)
    for pattern, replacement in [
        # The client is a property of a sync Lock, an awaited method of an asyncio one.
        (r"^(\s*)async def client\(self\)", r"\1@property\n\1def client(self)"),
        (r"await (\w+)\.client\(\)", r"\1.client"),
        (r"\ban ``async with``", "a ``with``"),
        (r"\basync def\b", "def"),
        (r"\basync with\b", "with"),
        (r"\basync for\b", "for"),
        (r"\bawait ", ""),
        (r"\b__aenter__\b", "__enter__"),
        (r"\b__aexit__\b", "__exit__"),
        (r"\baclose\b", "close"),
        (r"\bAsyncLeaseSignal\b", "LeaseSignal"),
        (r"\bAsyncIterator\b", "Iterator"),
        (r"\bAsyncHoldOptions\b", "HoldOptions"),
        (r"\bAsyncLockOptions\b", "LockOptions"),
        (r"\bASYNC_HOLD_KEYS\b", "HOLD_KEYS"),
        (r"\bASYNC_LOCK_KEYS\b", "LOCK_KEYS"),
        (r"\bcall_async\b", "call_sync"),
        (r"\bdistlock\._async\b", "distlock._sync"),
        (r"^from distlock\.asyncio import\b", "from distlock import"),
        (r"\bAwaitable\[(\w+)\]", r"\1"),
        # The sync cancellation accounting's constant answers, written in place: a call
        # of a no-op is a Python call on every lock cycle.
        (r"\bcancellation\.current_task\(\)", "None"),
        (r"\bwatch and cancellation\.cancels_body\(\w+\)", "False"),
        # A sync hold links no handle to itself (that link is asyncio's, for a loss's
        # cancel), so there is nothing to let go.
        (r"^(\s*)_let_go\(handles\)$", r"\1pass  # a sync hold links no handle to itself"),
    ]
]

_BEGIN = "# unasync: begin async only"
_END = "# unasync: end"
_ONLY = "# unasync: async only"
#: An import of names from the standard library's typing modules, on one line.
#: One-line imports whose names the replacements may leave unused: typing names
#: (``Awaitable``, ``CoroutineType``) and sibling modules (``cancellation``, once every
#: call of it became a constant).
_PRUNED_IMPORT = re.compile(r"^from (collections\.abc|types|typing|\.) import (.+)$")


def header(source: Path) -> str:
    name = source.relative_to(ROOT).as_posix()
    return f"# Generated from {name} by tools/unasync.py: do not edit.\n"


def unasync(text: str) -> str:
    """The sync module for the asyncio module ``text``."""
    lines: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped == _BEGIN:
            skipping = True
            continue
        if stripped == _END:
            skipping = False
            continue
        if skipping or stripped.endswith(_ONLY):
            continue
        for pattern, replacement in RULES:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return _prune_imports("".join(lines))


def _prune_imports(text: str) -> str:
    """Drop the imported names the replacements left unused."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        match = _PRUNED_IMPORT.match(line.rstrip("\n"))
        if match is not None:
            names = [n.strip() for n in match.group(2).split(",")]
            if match.group(1) == ".":  # a module: used as ``name.attribute``, not in prose
                kept = [n for n in names if re.search(rf"\b{re.escape(n)}\.\w", text)]
            else:
                kept = [n for n in names if len(re.findall(rf"\b{re.escape(n)}\b", text)) > 1]
            if not kept:
                continue
            if match.group(1) == "collections.abc":
                kept.sort()  # classes only, which a rename (AsyncIterator) may unsort
            line = f"from {match.group(1)} import {', '.join(kept)}\n"
        out.append(line)
    return "".join(out)


def expected() -> dict[Path, str]:
    """Every generated module's path and text."""
    return {
        pair.target / source.name: header(source) + unasync(source.read_text())
        for pair in PAIRS
        for source in sorted(pair.source.glob(pair.pattern))
        if source.name not in pair.hand_written and source.name not in ASYNC_ONLY
    }


def stale(wanted: dict[Path, str]) -> list[Path]:
    """Generated modules whose source is gone."""
    return [
        path
        for pair in PAIRS
        for path in sorted(pair.target.glob("*.py"))
        if path not in wanted and path.read_text().startswith("# Generated from ")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a generated module is out of date"
    )
    args = parser.parse_args(argv)
    wanted = expected()
    missing = [
        pair.target / name
        for pair in PAIRS
        for name in sorted(pair.hand_written)
        if not (pair.target / name).exists()
    ]
    if missing:
        for path in missing:
            print(f"{path.relative_to(ROOT)}: the hand-written sync module is missing")
        return 1
    if args.check:
        differ = [p for p, text in wanted.items() if not p.exists() or p.read_text() != text]
        for path in differ + stale(wanted):
            print(f"{path.relative_to(ROOT)}: out of date; run python tools/unasync.py")
        return 1 if differ or stale(wanted) else 0
    for path in stale(wanted):
        path.unlink()
    for path, text in wanted.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
