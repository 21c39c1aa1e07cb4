"""Every option is declared once, in ``distlock.options.OPTIONS``: its name, type, default,
validator and doc.  These tests fail when a place that consumes an option disagrees with
that declaration on its name, its type or its default: the typed dicts callers see, the
validated ``Options`` a Lock keeps, the core's ``SectionConfig`` and the driver code that
fills it, and the table of options in the documentation (docs/options.md)."""

from __future__ import annotations

import asyncio
import re
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from distlock import Lock
from distlock._core.config import SectionConfig
from distlock.asyncio import Lock as AsyncLock
from distlock.options import (
    _CHECKS,
    _WAITING_DEFAULTS,
    DEFAULTS,
    OPTIONS,
    WAITING_KEYS,
    AcquireOptions,
    AsyncHoldOptions,
    AsyncLockOptions,
    HoldOptions,
    LockOptions,
    Options,
)
from tests.redis_server import RedisServer

TYPED_DICTS = (AcquireOptions, HoldOptions, AsyncHoldOptions, LockOptions, AsyncLockOptions)
OPTIONS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "options.md"

#: Non-default values for every option the core's config takes.  ``wait_ms`` and
#: ``retries`` may not both be non-zero on one Lock, so each goes to a Lock of its own.
CORE_VALUES: list[dict[str, Any]] = [
    {
        "ttl_ms": 4_000,
        "retries": 2,
        "retry_delay_ms": 7.0,
        "drift_factor": 0.02,
        "replicas": 1,
        "replica_timeout_ms": 300,
        "observers": (print,),
    },
    {"wait_ms": 1_500},
]


@pytest.mark.parametrize("typed", TYPED_DICTS, ids=lambda t: t.__name__)
def test_each_typed_dict_key_is_a_declared_option_of_the_declared_type(typed: type) -> None:
    hints = typing.get_type_hints(typed)
    assert set(hints) <= set(OPTIONS), sorted(set(hints) - set(OPTIONS))
    for name, hint in hints.items():
        assert hint == OPTIONS[name].type, name
        assert f"- ``{name}``: {OPTIONS[name].doc}" in (typed.__doc__ or ""), name


def test_every_declared_option_is_taken_somewhere() -> None:
    taken = set().union(*(typing.get_type_hints(t) for t in TYPED_DICTS))
    assert taken == set(OPTIONS)


def test_options_has_one_field_per_declared_option_kept_as_declared() -> None:
    hints = typing.get_type_hints(Options)
    assert {f.name for f in fields(Options)} == set(OPTIONS)
    for name, option in OPTIONS.items():
        kept_as = option.type if option.kept_as is None else option.kept_as
        assert hints[name] == kept_as, name
        assert getattr(DEFAULTS, name) == option.default, name
        assert type(getattr(DEFAULTS, name)) is type(option.default), name


def test_validators_and_waiting_defaults_are_the_declared_ones() -> None:
    assert {name: option.check for name, option in OPTIONS.items()} == _CHECKS
    assert {name: OPTIONS[name].default for name in WAITING_KEYS} == _WAITING_DEFAULTS
    for name, option in OPTIONS.items():
        # A default is a value its own validator keeps as it is.
        assert option.check(option.default) == option.default, name


def test_the_core_config_takes_the_declared_defaults() -> None:
    # Read from an instance, not the signature: the compiled core's has none to read.
    config = SectionConfig(ttl_ms=1_000, watch=True)
    shared = {name for name in OPTIONS if hasattr(config, name)}
    assert shared == {name for name, option in OPTIONS.items() if option.section}
    for name in shared - {"ttl_ms"}:  # every driver gives the TTL: it has no default
        value = getattr(config, name)
        assert value == OPTIONS[name].default, name
        assert type(value) is type(OPTIONS[name].default), name
    with pytest.raises(TypeError):
        SectionConfig()  # type: ignore[call-arg]


def test_only_a_watched_body_is_cancelled_on_a_loss() -> None:
    # The public default (True) is the core's; a manual handle has no body to cancel.
    assert SectionConfig(ttl_ms=1_000, watch=True).cancel_on_loss is True
    assert SectionConfig(ttl_ms=1_000, watch=False).cancel_on_loss is False
    assert SectionConfig(ttl_ms=1_000, watch=True, cancel_on_loss=False).cancel_on_loss is False


@pytest.mark.parametrize("values", CORE_VALUES, ids=lambda v: ",".join(v))
def test_a_lock_gives_the_core_every_option_it_takes(
    values: dict[str, Any], r: redis.Redis
) -> None:
    section_options = [name for name, option in OPTIONS.items() if option.section]
    assert set().union(*CORE_VALUES) == set(section_options) - {"cancel_on_loss"}
    for name, value in values.items():
        assert value != OPTIONS[name].default, name
    with Lock(r, prefix="options-declared", **values) as locks:
        for watch in (False, True):
            config = locks._config(locks.defaults, watch=watch, cancel_on_loss=False)
            for name, value in values.items():
                assert getattr(config, name) == value, name


def test_cancel_on_loss_reaches_the_core_as_each_driver_can_honour_it(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    def config_of(handle: Any) -> SectionConfig:
        # A deferred run()'s handle makes its section when asked (distlock._async.deferred).
        settle = getattr(handle, "_settle", None)
        if settle is not None:
            settle()
        config = handle._section.config
        assert isinstance(config, SectionConfig)
        return config

    # A thread cannot be cancelled: the sync driver never asks for it.
    with Lock(r, prefix="options-declared-sync") as locks:
        assert not locks.run("a", lambda h: config_of(h).cancel_on_loss)

    async def scenario() -> list[bool]:
        client = aredis.Redis(host=redis_server.host, port=redis_server.port)
        seen: list[bool] = []

        async def body(handle: Any) -> None:
            seen.append(config_of(handle).cancel_on_loss)

        async with AsyncLock(client, prefix="options-declared-async") as locks:
            await locks.run("a", body)  # the declared default: cancelled on a loss
            await locks.run("a", body, cancel_on_loss=False)
            handle = await locks.acquire("a")  # a manual handle: no body
            assert handle is not None
            seen.append(config_of(handle).cancel_on_loss)
            assert await handle.release()
        async with AsyncLock(client, prefix="options-declared-async", cancel_on_loss=False) as off:
            await off.run("a", body)
        await client.aclose()
        return seen

    assert OPTIONS["cancel_on_loss"].default is True
    assert asyncio.run(scenario()) == [True, False, False, False]


def docs_table() -> dict[str, str]:
    """The table of options in the documentation (docs/options.md): name -> its Default cell."""
    text = OPTIONS_PAGE.read_text(encoding="utf-8")
    section = ("| Option |" + text.split("\n| Option |", 1)[1]).split("\n\n", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = re.fullmatch(r"`(\w+)`", cells[0])
        assert name is not None, line
        rows[name.group(1)] = cells[2]
    return rows


#: How the documentation writes a default of None, where it is not "none".
DOCS_NONE: dict[str, str] = {"heartbeat_ms": "ttl_ms // 4"}


def shown(name: str, value: object) -> str:
    if value is None or value == ():
        return DOCS_NONE.get(name, "none")
    if isinstance(value, bool | int | str):
        return f'"{value}"' if isinstance(value, str) else str(value)
    assert isinstance(value, float)
    return str(int(value)) if value.is_integer() else str(value)


def first_code(cell: str) -> str:
    """A cell's first code span (``"lock"`` of ```"lock"` (`"sem"` for ...)``), or the cell."""
    m = re.match(r"`([^`]*)`", cell)
    return cell if m is None else m.group(1)


def test_the_docs_table_lists_each_option_with_its_declared_default() -> None:
    table = docs_table()
    assert set(table) - {"limit"} == set(OPTIONS)  # limit: a Semaphore's, required
    for name, option in OPTIONS.items():
        assert first_code(table[name]) == shown(name, option.default), name
