"""The Lua scripts' files, and how each becomes the text Redis runs.

Every script the package sends is a file in ``distlock/lua/`` (``acquire.lua`` is
``ACQUIRE`` of :mod:`distlock._protocol`, ``sw_acquire.lua`` is ``SW_ACQUIRE``, and so on);
the pieces several scripts share are in ``distlock/lua/lib/``.  Each file starts with a
header of comments: a script's names its KEYS, its ARGV, what it returns and the spec
action(s) it implements; a piece's what it defines and what it needs from the script
that includes it.

A line ``-- include: read queue`` is replaced, where it stands, by those pieces
(``lib/read.lua``, ``lib/queue.lua``), each preceded by the pieces its own ``include``
lines name.  A piece goes into a script once, where it is first named: a later include of
it (a piece's own, or the script's) adds nothing.  A piece's text is indented as its
include line is (``release.lua`` includes the queue inside an ``if``: a release with no
waiter does not pay for defining its functions).

A ``${NAME}`` in a file is a number computed in Python, written in by :func:`assemble`
from the ``params`` it is given (for the shipped scripts, :data:`PARAMS`); the file's
header says which.  A placeholder with no value, or a value nobody uses, is an error.

Comment lines and blank lines are left out of the text Redis runs: they cost nothing at
run time (Redis compiles a script once), but every ``SCRIPT LOAD`` and ``EVAL`` would carry
them.  Files are read once, at import, from the installed package
(:mod:`importlib.resources`), so a wheel's scripts are the ones it was built with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Final

from distlock._core.waiting import LONGEST_BLOCK_MS
from distlock._fence_floor import FENCE_EPOCH_MS, FENCES_PER_MS
from distlock._queue_names import QUEUE_PREFIX, WAKE_PREFIX

#: The values the scripts take from Python, by placeholder (``${LONGEST_BLOCK_MS}``): numbers,
#: and names, written in as they are (the script quotes them).
PARAMS: Final[Mapping[str, int | str]] = {
    "LONGEST_BLOCK_MS": LONGEST_BLOCK_MS,
    "FENCE_EPOCH_MS": FENCE_EPOCH_MS,
    "FENCES_PER_MS": FENCES_PER_MS,
    "QUEUE_PREFIX_LEN": len(QUEUE_PREFIX),
    "WAKE_PREFIX": WAKE_PREFIX,
}

#: The folder of the pieces, inside the scripts' folder.
LIB: Final = "lib"

_INCLUDE: Final = re.compile(r"^([ \t]*)-- include:(.*)$")
_PLACEHOLDER: Final = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")
_NAME: Final = re.compile(r"^[a-z_][a-z0-9_]*$")


class ScriptFileError(Exception):
    """A script file names a piece that does not exist, includes itself, or leaves a
    placeholder without a value."""


def lua_dir() -> Traversable:
    """The installed scripts' folder (``distlock/lua``)."""
    return resources.files("distlock") / "lua"


def read_files(root: Traversable | None = None) -> dict[str, str]:
    """Every ``.lua`` file under ``root`` (the package's by default), by its name without
    ``.lua``: ``"acquire"`` for a script, ``"lib/read"`` for a piece."""
    base = lua_dir() if root is None else root
    files = {}
    for entry in base.iterdir():
        if entry.is_file() and entry.name.endswith(".lua"):
            files[entry.name[: -len(".lua")]] = entry.read_text(encoding="utf-8")
    lib = base / LIB
    if lib.is_dir():
        for entry in lib.iterdir():
            if entry.is_file() and entry.name.endswith(".lua"):
                files[f"{LIB}/{entry.name[: -len('.lua')]}"] = entry.read_text(encoding="utf-8")
    return files


def script_names(files: Mapping[str, str]) -> list[str]:
    """The scripts among ``files`` (not the pieces), sorted."""
    return sorted(name for name in files if "/" not in name)


def includes(text: str) -> list[str]:
    """The pieces ``text``'s include lines name, in order."""
    named: list[str] = []
    for line in text.splitlines():
        found = _INCLUDE.match(line)
        if found:
            named.extend(found[2].split())
    return named


def header(text: str) -> list[str]:
    """The leading comment lines of a file, without their ``--``."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return lines


def assemble(
    name: str, files: Mapping[str, str], params: Mapping[str, int | str] = PARAMS
) -> str:
    """The text Redis runs for script ``name`` (``"acquire"``): its file with each include
    line replaced by the pieces it names, placeholders written in, comments left out."""
    if name not in files:
        raise ScriptFileError(f"no script {name}.lua")
    done: set[str] = set()
    lines = list(_expand(files[name], "", files, done, (name,)))
    text = "\n".join(lines) + "\n"
    used = set(_PLACEHOLDER.findall(text))
    missing = used - set(params)
    if missing:
        raise ScriptFileError(f"{name}.lua: no value for {', '.join(sorted(missing))}")
    return _PLACEHOLDER.sub(lambda m: str(params[m[1]]), text)


def assemble_all(
    files: Mapping[str, str] | None = None, params: Mapping[str, int | str] = PARAMS
) -> dict[str, str]:
    """Every script of ``files`` (the package's by default), assembled, by file name.
    Every value in ``params`` must be used by some script."""
    source = read_files() if files is None else files
    scripts = {name: assemble(name, source, params) for name in script_names(source)}
    unused = {key for key in params if not any(f"${{{key}}}" in source[n] for n in source)}
    if unused:
        raise ScriptFileError(f"no file uses {', '.join(sorted(unused))}")
    return scripts


def _expand(
    text: str,
    indent: str,
    files: Mapping[str, str],
    done: set[str],
    chain: tuple[str, ...],
) -> Iterator[str]:
    for line in text.splitlines():
        found = _INCLUDE.match(line)
        if found:
            for piece in found[2].split():
                yield from _piece(piece, indent + found[1], files, done, chain)
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        yield indent + line.rstrip()


def _piece(
    piece: str, indent: str, files: Mapping[str, str], done: set[str], chain: tuple[str, ...]
) -> Iterator[str]:
    key = f"{LIB}/{piece}"
    if not _NAME.match(piece) or key not in files:
        raise ScriptFileError(f"{chain[0]}.lua: no piece {key}.lua (via {' > '.join(chain)})")
    if key in chain:
        raise ScriptFileError(f"{chain[0]}.lua: {key}.lua includes itself ({' > '.join(chain)})")
    if key in done:
        return
    done.add(key)
    yield from _expand(files[key], indent, files, done, (*chain, key))
