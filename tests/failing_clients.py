"""Clients whose first renewal round trip fails with a connection error, whether it is
sent alone (``EVALSHA``) or in a pipeline of the renewals due in one tick; and asyncio
connections that lose one script on its way to Redis."""

from __future__ import annotations

import threading
from typing import Any

import redis
import redis.asyncio as aredis

from distlock._protocol import EXTEND, Script
from tests.properties.gates import extends_queued

FAILURE = "one renewal round trip fails"


class FailsOneRenewal(redis.Redis):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed = threading.Event()

    def fail_once(self) -> None:
        if not self.failed.is_set():
            self.failed.set()
            raise redis.ConnectionError(FAILURE)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[:2] == ("EVALSHA", EXTEND.sha):
            self.fail_once()
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        owner = self

        class Pipeline(redis.client.Pipeline):
            def execute(self, raise_on_error: bool = True) -> list[Any]:
                if extends_queued(self):
                    owner.fail_once()
                return super().execute(raise_on_error)

        return Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class AsyncFailsOneRenewal(aredis.Redis):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed = threading.Event()  # as the sync client's: set once, read by a test

    def fail_once(self) -> None:
        if not self.failed.is_set():
            self.failed.set()
            raise redis.ConnectionError(FAILURE)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[:2] == ("EVALSHA", EXTEND.sha):
            self.fail_once()
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        owner = self

        class Pipeline(aredis.client.Pipeline):
            async def execute(self, raise_on_error: bool = True) -> list[Any]:
                if extends_queued(self):
                    owner.fail_once()
                return await super().execute(raise_on_error)

        return Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def losing(script: Script) -> type[aredis.Connection]:
    """An asyncio connection class on which ``script`` never reaches Redis (the network
    lost it): the sender sees a connection error, and nothing of the script runs (a
    withdrawal lost so leaves the waiter's place queued)."""
    sha = script.sha.encode()

    class Loses(aredis.Connection):
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            packed = b"".join(command) if isinstance(command, list) else bytes(command)
            if sha in packed:
                raise redis.ConnectionError("the script was lost on its way to Redis")
            await super().send_packed_command(command, check_health)

    return Loses
