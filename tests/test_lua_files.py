"""The scripts' files (``distlock/lua``): every one loads from the installed package, every
include names a piece that exists, every script is a constant of ``distlock._protocol``
and that constant is the file as assembled, and every header says what it must: a
script's KEYS, ARGV, reply and spec action (an action the spec module defines), a piece's
what it defines or returns.  Nothing runs on Redis here (see ``tests/test_lua_scripts.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distlock import _lua, _protocol
from distlock._core.waiting import LONGEST_BLOCK_MS
from distlock._queue_names import QUEUE_PREFIX, WAKE_PREFIX

ROOT = Path(__file__).resolve().parent.parent
FILES = _lua.read_files()
SCRIPTS = _lua.script_names(FILES)
PIECES = sorted(name for name in FILES if name.startswith("lib/"))
#: A spec action a header names: ``DistLock.tla RedisStep``.
ACTION = re.compile(r"\b([A-Z][A-Za-z]*)\.tla ([A-Z][A-Za-z]*)\b")


def fields(text: str) -> dict[str, str]:
    """A header's fields (``KEYS: ...``), continuation lines joined."""
    found: dict[str, str] = {}
    last = ""
    for line in _lua.header(text):
        field = re.match(r"^([A-Za-z]+): ?(.*)$", line)
        if field and field[1] in {"KEYS", "ARGV", "Returns", "Spec", "Defines", "Needs",
                                  "Substitutes", "include"}:
            last = field[1]
            found[last] = (found.get(last, "") + " " + field[2]).strip()
        elif last and line:
            found[last] += " " + line
    return found


def test_the_files_are_read_from_the_package_beside_the_module() -> None:
    where = Path(str(_lua.lua_dir()))
    assert where == Path(_lua.__file__).parent / "lua"
    assert len(SCRIPTS) == 25
    assert {"lib/read", "lib/now", "lib/queue", "lib/wait", "lib/withdraw"} <= set(PIECES)


def test_each_script_is_its_constant_as_assembled() -> None:
    constants = {
        name for name, value in vars(_protocol).items() if isinstance(value, _protocol.Script)
    }
    assert constants == {name.upper() for name in SCRIPTS}
    for name in SCRIPTS:
        assert getattr(_protocol, name.upper()).source == _lua.assemble(name, FILES), name


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_include_names_a_piece(name: str) -> None:
    for piece in _lua.includes(FILES[name]):
        assert f"lib/{piece}" in FILES, f"{name}.lua includes {piece}, which is not a file"


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_header_names_keys_argv_reply_and_spec_actions(name: str) -> None:
    text = FILES[name]
    assert _lua.header(text)[0].startswith(f"{name.upper()}: "), "the header names the script"
    found = fields(text)
    for field in ("KEYS", "ARGV", "Returns", "Spec"):
        assert found.get(field), f"{name}.lua: no {field} in its header"
    spec = found["Spec"]
    actions = ACTION.findall(spec)
    assert actions or spec.startswith("none:"), f"{name}.lua: Spec names no action: {spec}"
    for module, action in actions:
        tla = (ROOT / "spec" / f"{module}.tla").read_text()
        assert re.search(rf"^{action}(\(.*\))? ==", tla, re.MULTILINE), f"{module}.{action}"


@pytest.mark.parametrize("name", PIECES)
def test_a_piece_header_says_what_it_gives(name: str) -> None:
    text = FILES[name]
    assert _lua.header(text)[0].startswith(f"Piece {name.removeprefix('lib/')}: ")
    found = fields(text)
    assert found.get("Defines") or found.get("Returns"), f"{name}.lua defines nothing"


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_placeholder_is_declared_in_its_header(name: str) -> None:
    for placeholder in re.findall(r"\$\{[A-Z_]+\}", FILES[name]):
        assert placeholder in fields(FILES[name]).get("Substitutes", ""), placeholder


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_text_redis_runs_has_no_comment_include_or_placeholder(name: str) -> None:
    lua = _lua.assemble(name, FILES)
    assert "${" not in lua
    for line in lua.splitlines():
        assert line.strip() and not line.strip().startswith("--"), line
    # Each piece once, however many includes name it.
    for piece in PIECES:
        first = next(
            line for line in FILES[piece].splitlines() if line and not line.startswith("--")
        )
        assert lua.count(first + "\n") <= 1, (name, piece)


def test_the_waiting_scripts_get_the_longest_block() -> None:
    for script in (_protocol.W_ACQUIRE, _protocol.RW_ACQUIRE, _protocol.SW_ACQUIRE):
        assert f"local LONGEST_BLOCK = {LONGEST_BLOCK_MS}\n" in script.source


def test_the_semaphore_scripts_that_need_only_the_clock_get_only_the_clock() -> None:
    for script in (_protocol.S_ACQUIRE, _protocol.S_RENEW, _protocol.OWNER):
        assert "local function now_ms()" in script.source
        assert "hand_head" not in script.source


def test_an_include_inside_a_block_is_indented_there() -> None:
    release = _protocol.RELEASE.source
    assert "\n    local function hand_head(queue, places, wake, grant)\n" in release
    # The queue's functions are defined only after the key was found ours.
    assert release.index("local function hand_head") > release.index("redis.call('DEL'")


def test_a_piece_that_does_not_exist_is_an_error() -> None:
    files = {**FILES, "probe": "-- include: read nosuch\nreturn 1\n"}
    with pytest.raises(_lua.ScriptFileError, match="lib/nosuch"):
        _lua.assemble("probe", files)


def test_a_piece_that_includes_itself_is_an_error() -> None:
    files = {**FILES, "lib/loop": "-- include: loop\n", "probe": "-- include: loop\n"}
    with pytest.raises(_lua.ScriptFileError, match="includes itself"):
        _lua.assemble("probe", files)


def test_a_placeholder_without_a_value_or_a_value_nobody_uses_is_an_error() -> None:
    files = {**FILES, "probe": "return ${NOSUCH}\n"}
    with pytest.raises(_lua.ScriptFileError, match="NOSUCH"):
        _lua.assemble("probe", files)
    with pytest.raises(_lua.ScriptFileError, match="UNUSED"):
        _lua.assemble_all(FILES, {**_lua.PARAMS, "UNUSED": 1})


@pytest.mark.parametrize("key", ["k", "orders:{tag}:1", "a:b:c", "ключ"])
def test_the_lock_release_names_the_wake_lists_as_queue_keys_does(key: str) -> None:
    """The lock's release makes its wake lists' prefix from its queue's name (KEYS[3]),
    rather than taking it as an argument: the same name queue_keys gives the waiters."""
    queue, _, wake = _protocol.queue_keys(key)
    made = f"'{WAKE_PREFIX}' .. string.sub(KEYS[3], {len(QUEUE_PREFIX)} + 1) .. ':'"
    assert made in _protocol.RELEASE.source
    assert queue.startswith(QUEUE_PREFIX)
    assert WAKE_PREFIX + queue[len(QUEUE_PREFIX):] + ":" == wake
