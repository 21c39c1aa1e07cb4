"""What the direct-send tests of both drivers count: the commands that went through
redis-py's ``execute_command`` (wrapped in place, so that a plain client still counts as
plain), and the scripts among them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
import redis.asyncio as aredis


@contextmanager
def through_execute_command() -> Iterator[list[str]]:
    """The names of the commands sent through ``execute_command``, sync and asyncio, while
    the block runs."""
    names: list[str] = []
    sync_send: Callable[..., Any] = redis.Redis._execute_command
    async_send: Callable[..., Awaitable[Any]] = aredis.Redis.execute_command

    def counted(self: Any, *args: Any, **options: Any) -> Any:
        names.append(str(args[0]))
        return sync_send(self, *args, **options)

    async def acounted(self: Any, *args: Any, **options: Any) -> Any:
        names.append(str(args[0]))
        return await async_send(self, *args, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redis.Redis, "_execute_command", counted)
        patch.setattr(aredis.Redis, "execute_command", acounted)
        yield names


def scripts(names: list[str]) -> list[str]:
    """The scripts among ``names``."""
    return [n for n in names if n in ("EVALSHA", "EVAL")]
