"""A spec's definitions as text: what the parity tests read off a ``.tla`` file (which
operators a definition's disjuncts name), comments left out."""

from __future__ import annotations

import re
from pathlib import Path

COMMENT = re.compile(r"\(\*.*?\*\)", re.S)
DEFINITION = re.compile(r"^(\w+)(?:\([^)]*\))?\s*==", re.M)
DISJUNCT = re.compile(r"\s*\\/\s*(?:\\E\s+\w+\s+\\in\s+\w+\s*:\s*)?([A-Z]\w*)")


def text(spec: Path) -> str:
    """``spec``'s text without its comments, block or line."""
    source = COMMENT.sub("", spec.read_text())
    return "\n".join(line.split("\\*")[0] for line in source.splitlines())


def defined(spec: Path) -> set[str]:
    """Every operator ``spec`` defines."""
    return {m.group(1) for m in DEFINITION.finditer(text(spec))}


def disjuncts(spec: Path, name: str) -> list[str]:
    """The operators named by the disjuncts of definition ``name`` of ``spec``."""
    source = text(spec)
    starts = [(m.group(1), m.start(), m.end()) for m in DEFINITION.finditer(source)]
    for i, (found, _, end) in enumerate(starts):
        if found == name:
            stop = starts[i + 1][1] if i + 1 < len(starts) else len(source)
            return [
                match.group(1)
                for line in source[end:stop].splitlines()
                if (match := DISJUNCT.match(line))
            ]
    raise AssertionError(f"{name} is not defined in {spec.name}")
