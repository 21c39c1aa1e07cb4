"""Scripts go straight onto a pooled connection when the client's ``execute_command`` has
nothing to do for them (distlock/_direct.py), against a real redis-server, sync and
asyncio.

Which path a command took is observed from outside: redis-py's own ``execute_command``
(sync: ``_execute_command``) is wrapped on its class with a counter, which the direct send
never calls and which every client that must keep ``execute_command`` still goes through.
What must not change on the direct path: NOSCRIPT falls back to EVAL, the client's
``Retry`` retries a killed connection as it says, decoded replies, and a connection
interrupted mid-command goes back to the pool disconnected.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ClassVar

import pytest
import redis
import redis.asyncio as aredis
from redis._parsers import Encoder
from redis.backoff import NoBackoff
from redis.retry import Retry

from distlock import Lock
from distlock._direct import plain_client
from distlock.asyncio import Lock as AsyncLock
from tests.redis_server import RedisServer
from tests.waiting import arun

TTL_MS = 30_000


@pytest.fixture
def through_execute() -> Iterator[list[str]]:
    """The names of the commands sent through redis-py's ``execute_command``, sync and
    asyncio (the class's own method, wrapped in place, so that a plain client still counts
    as plain)."""
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


def _scripts(names: list[str]) -> list[str]:
    return [n for n in names if n in ("EVALSHA", "EVAL")]


def _cycle(locks: Lock) -> int:
    handle = locks.acquire("k")
    assert handle is not None
    fence = handle.fence
    assert handle.release() is True
    return fence


async def _acycle(locks: AsyncLock) -> int:
    handle = await locks.acquire("k")
    assert handle is not None
    fence = handle.fence
    assert await handle.release() is True
    return fence


def _connections(pool: Any) -> int:
    return len(pool._available_connections) + len(pool._in_use_connections)


# -- which clients take the direct path ----------------------------------------------------


def test_a_plain_client_sends_its_scripts_directly(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    for decode in (False, True):
        client = redis.Redis(port=redis_server.port, decode_responses=decode)
        with Lock(client, prefix=f"plain{decode}", ttl_ms=TTL_MS) as locks:
            first = _cycle(locks)
            assert _cycle(locks) > first  # fences decoded to ints, whatever the client decodes
        assert _scripts(through_execute) == []
        assert not client.connection_pool._in_use_connections
        client.close()


def test_a_client_that_wraps_execute_command_sees_every_command(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    seen: list[str] = []

    class Wrapped(redis.Redis):
        def execute_command(self, *args: Any, **options: Any) -> Any:
            seen.append(str(args[0]))
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    with Lock(Wrapped(port=redis_server.port), prefix="wrapped", ttl_ms=TTL_MS) as locks:
        _cycle(locks)
    assert _scripts(seen) == ["EVALSHA", "EVALSHA"]

    # Wrapped on the instance, not the class: the same.
    instance = redis.Redis(port=redis_server.port)
    plain_send: Callable[..., Any] = instance.execute_command

    def wrapper(*args: Any, **options: Any) -> Any:
        seen.append(f"instance {args[0]}")
        return plain_send(*args, **options)

    instance.execute_command = wrapper  # type: ignore[method-assign]
    with Lock(instance, prefix="wrapped", ttl_ms=TTL_MS) as locks:
        _cycle(locks)
    assert seen.count("instance EVALSHA") == 2
    instance.close()


def test_a_single_connection_client_keeps_to_its_one_connection(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    client = redis.Redis(port=redis_server.port, single_connection_client=True)
    with Lock(client, prefix="single", ttl_ms=TTL_MS) as locks:
        _cycle(locks)
    assert _scripts(through_execute) == ["EVALSHA", "EVALSHA"]
    assert _connections(client.connection_pool) == 1  # the pool never lent a second one
    client.close()


def test_a_cluster_client_is_never_sent_to_directly(redis_cluster: Any) -> None:
    seen: list[str] = []

    class Wrapped(redis.RedisCluster):
        def execute_command(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(str(args[0]))
            send: Callable[..., Any] = super().execute_command
            return send(*args, **kwargs)

    client = Wrapped.from_url(redis_cluster.url)
    assert plain_client(client, redis.Redis) is False
    with Lock(client, prefix="{cl}", ttl_ms=TTL_MS) as locks:
        _cycle(locks)
    # Both scripts went through it (each after an EVAL too if the node had not seen it).
    assert _scripts(seen).count("EVALSHA") == 2
    client.close()


def test_redis_py_observability_once_on_sends_through_execute_command(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    """redis-py's metrics are process-wide and may be switched on at any time: each
    command asks."""
    from redis.observability import providers

    instance = providers.get_observability_instance()
    client = redis.Redis(port=redis_server.port)
    with Lock(client, prefix="otel", ttl_ms=TTL_MS) as locks:
        _cycle(locks)
        assert _scripts(through_execute) == []
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(instance, "_provider_manager", object())
            _cycle(locks)
        assert _scripts(through_execute) == ["EVALSHA", "EVALSHA"]
    client.close()


# -- what the direct path keeps ----------------------------------------------------------------


def test_noscript_after_script_flush_falls_back_to_eval(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    client = redis.Redis(port=redis_server.port)
    with Lock(client, prefix="flush", ttl_ms=TTL_MS) as locks:
        first = _cycle(locks)
        evals = r.info("commandstats").get("cmdstat_eval", {}).get("calls", 0)
        r.script_flush()
        assert _cycle(locks) > first
    assert r.info("commandstats")["cmdstat_eval"]["calls"] == evals + 2  # acquire, release
    assert _scripts(through_execute) == []
    client.close()


class _PausedThenKilled(redis.Connection):
    """The first script sent is held by CLIENT PAUSE WRITE, and the connection killed by
    the server while it waits: the command was sent and never answered."""

    admin: ClassVar[redis.Redis]
    killed: ClassVar[threading.Event]

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        first = args[0] == "EVALSHA" and not self.killed.is_set()
        if first:
            self.admin.client_pause(30_000, all=False)
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)
        if first:
            sock: Any = self._sock
            host, port = sock.getsockname()[:2]
            self.admin.client_kill_filter(addr=f"{host}:{port}")
            self.killed.set()
            self.admin.client_unpause()


class _NotingRelease(redis.ConnectionPool):
    """Notes whether each connection was still connected when it came back."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.returned: list[tuple[Any, bool]] = []

    def release(self, connection: Any) -> None:
        self.returned.append((connection, connection._sock is not None))
        super().release(connection)


def _killing_client(server: RedisServer, r: redis.Redis, retries: int) -> redis.Redis:
    connection: Any = type(
        "Killed", (_PausedThenKilled,), {"admin": r, "killed": threading.Event()}
    )
    return redis.Redis(
        connection_pool=_NotingRelease(
            port=server.port, connection_class=connection, retry=Retry(NoBackoff(), retries)
        )
    )


def _clean(pool: Any) -> bool:
    """No connection lent out, and none with anything unread on it."""
    return not pool._in_use_connections and all(
        c._sock is None or not c.can_read() for c in pool._available_connections
    )


def test_a_connection_killed_mid_command_is_retried_as_the_client_s_retry_says(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    client = _killing_client(redis_server, r, retries=1)
    pool: Any = client.connection_pool
    with Lock(client, prefix="killed", ttl_ms=TTL_MS) as locks:
        handle = locks.acquire("k")
        assert handle is not None
        # The one retry reconnected the same connection and sent the script again, within
        # the one send: the flow never saw the error.
        assert [connected for _, connected in pool.returned] == [True]
        assert r.get("killed:k") == handle.token.encode()
        assert handle.release() is True
    assert _clean(pool)
    assert _scripts(through_execute) == []
    client.close()

    client = _killing_client(redis_server, r, retries=0)
    pool = client.connection_pool
    with Lock(client, prefix="killed0", ttl_ms=TTL_MS) as locks:
        with pytest.raises(redis.ConnectionError):
            locks.acquire("k")
        assert [connected for _, connected in pool.returned] == [False]
        assert r.exists("killed0:k") == 0
    assert _clean(pool)
    client.close()


class _InterruptedReply(redis.Connection):
    """``KeyboardInterrupt`` arrives after the first script went out, before its reply
    is read."""

    interrupted: ClassVar[list[Any]]
    last: object = None

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.last = args[0]
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.last == "EVALSHA" and not self.interrupted:
            self.interrupted.append(self)
            raise KeyboardInterrupt
        return super().read_response(*args, **kwargs)


def test_a_connection_interrupted_mid_command_is_disconnected_before_it_goes_back(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    connection: Any = type("Interrupted", (_InterruptedReply,), {"interrupted": []})
    pool = _NotingRelease(port=redis_server.port, connection_class=connection)
    client = redis.Redis(connection_pool=pool)
    with Lock(client, prefix="kbd", ttl_ms=TTL_MS) as locks:
        with pytest.raises(KeyboardInterrupt):
            locks.acquire("k")
        interrupted = connection.interrupted[0]
        assert (interrupted, False) in pool.returned
        assert _clean(pool)
        _cycle(locks)  # the pool's connections still serve
    client.close()


# -- asyncio -------------------------------------------------------------------------------------


def test_asyncio_a_plain_client_sends_directly_and_a_wrapped_one_does_not(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    seen: list[str] = []

    class Wrapped(aredis.Redis):
        async def execute_command(self, *args: Any, **options: Any) -> Any:
            seen.append(str(args[0]))
            send: Callable[..., Awaitable[Any]] = super().execute_command
            return await send(*args, **options)

    async def main() -> None:
        for decode in (False, True):
            client = aredis.Redis(port=redis_server.port, decode_responses=decode)
            async with AsyncLock(client, prefix=f"aplain{decode}", ttl_ms=TTL_MS) as locks:
                first = await _acycle(locks)
                assert await _acycle(locks) > first
            await client.aclose()
        assert _scripts(through_execute) == []

        wrapped = Wrapped(port=redis_server.port)
        async with AsyncLock(wrapped, prefix="awrapped", ttl_ms=TTL_MS) as locks:
            await _acycle(locks)
        assert _scripts(seen) == ["EVALSHA", "EVALSHA"]
        await wrapped.aclose()
        through_execute.clear()  # the wrapper's calls of redis-py's own

        single = aredis.Redis(port=redis_server.port, single_connection_client=True)
        async with AsyncLock(single, prefix="asingle", ttl_ms=TTL_MS) as locks:
            await _acycle(locks)
        assert _scripts(through_execute) == ["EVALSHA", "EVALSHA"]
        assert _connections(single.connection_pool) == 1
        await single.aclose()

    arun(main)


def test_asyncio_noscript_after_script_flush_falls_back_to_eval(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    async def main() -> None:
        client = aredis.Redis(port=redis_server.port)
        async with AsyncLock(client, prefix="aflush", ttl_ms=TTL_MS) as locks:
            first = await _acycle(locks)
            evals = r.info("commandstats").get("cmdstat_eval", {}).get("calls", 0)
            r.script_flush()
            assert await _acycle(locks) > first
        assert r.info("commandstats")["cmdstat_eval"]["calls"] == evals + 2
        assert _scripts(through_execute) == []
        await client.aclose()

    arun(main)


class _HeldReply(aredis.Connection):
    """The first script's reply is not read until ``late``: the command is out, its reply
    pending, when the caller is cancelled."""

    sent: ClassVar[asyncio.Event]
    late: ClassVar[asyncio.Event]
    held: ClassVar[list[Any]]
    last: object = None

    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.last = args[0]
        await super().send_command(*args, **kwargs)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.last == "EVALSHA" and not self.held:
            self.held.append(self)
            self.sent.set()
            await self.late.wait()
        return await super().read_response(*args, **kwargs)


class _AsyncNotingRelease(aredis.ConnectionPool):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.returned: list[tuple[Any, bool]] = []

    async def release(self, connection: Any) -> None:
        self.returned.append((connection, connection.is_connected))
        await super().release(connection)


def test_asyncio_cancelled_mid_command_disconnects_the_connection(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    async def main() -> None:
        connection: Any = type(
            "Held",
            (_HeldReply,),
            {"sent": asyncio.Event(), "late": asyncio.Event(), "held": []},
        )
        pool = _AsyncNotingRelease(port=redis_server.port, connection_class=connection)
        client = aredis.Redis(connection_pool=pool)
        async with AsyncLock(client, prefix="acancel", ttl_ms=TTL_MS) as locks:
            task = asyncio.create_task(locks.acquire("k"))
            await connection.sent.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            held = connection.held[0]
            assert (held, False) in pool.returned  # disconnected before it went back
            assert not pool._in_use_connections
            # The acquire ran in Redis; its reply never reached us: the cleanup gave the
            # key back, and the pool's connections still serve.
            assert r.exists("acancel:k") == 0
            await _acycle(locks)
        assert _scripts(through_execute) == []
        await client.aclose()

    arun(main)


# -- the asyncio direct send packs its EVALSHA itself ------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_packed_evalsha_is_byte_for_byte_what_the_connections_pack(encoding: str) -> None:
    from distlock._direct import packed_evalsha
    from distlock._protocol import ACQUIRE, RELEASE

    make: Any = redis.Connection
    conns: list[Any] = [
        aredis.Connection(encoding=encoding, encoding_errors="replace"),
        make(encoding=encoding, encoding_errors="replace"),  # hiredis's packer
        make(
            encoding=encoding,
            encoding_errors="replace",
            command_packer=redis.connection.PythonRespSerializer(
                6000, Encoder(encoding, "replace", False).encode  # type: ignore[no-untyped-call]
            ),
        ),
    ]
    cases: list[tuple[Any, list[str], list[str | int]]] = [
        (RELEASE, ["p:k", "p:k:released", "q", "places", "fences"], ["0" * 32, 30_000, "w:"]),
        (ACQUIRE, ["pr\u00e9fixe:cl\u00e9", "{\u043a\u043b\u044e\u0447}:fences"], ["tok", 0]),
        (ACQUIRE, ["e\u20ac", "x" * 10_000], ["tok", -5]),
        (ACQUIRE, [], []),
    ]
    for conn in conns:
        base = type(conn).__mro__[1]  # redis-py's AbstractConnection, of either kind
        for script, keys, args in cases:
            expected = b"".join(conn.pack_command("EVALSHA", script.sha, len(keys), *keys, *args))
            assert packed_evalsha(conn, base, script, keys, args) == [expected]

    class OwnPacker(redis.connection.PythonRespSerializer):
        pass

    encoder: Any = Encoder("utf-8", "strict", False)  # type: ignore[no-untyped-call]
    own = make(command_packer=OwnPacker(6000, encoder.encode))
    assert packed_evalsha(own, redis.connection.AbstractConnection, ACQUIRE, ["k"], ["t"]) is None


def test_asyncio_a_connection_class_that_sends_its_own_way_sees_every_script(
    redis_server: RedisServer,
) -> None:
    sent: list[str] = []

    class Counting(aredis.Connection):
        async def send_command(self, *args: Any, **kwargs: Any) -> None:
            sent.append(str(args[0]))
            await super().send_command(*args, **kwargs)

    class Packing(aredis.Connection):
        def pack_command(self, *args: Any) -> list[bytes]:
            sent.append(str(args[0]))
            return super().pack_command(*args)

    async def main() -> None:
        for cls in (Counting, Packing):
            pool = aredis.ConnectionPool(connection_class=cls, port=redis_server.port)
            client = aredis.Redis(connection_pool=pool)
            async with AsyncLock(client, prefix=cls.__name__, ttl_ms=TTL_MS) as locks:
                await _acycle(locks)  # the scripts loaded: no NOSCRIPT fallback below
                sent.clear()
                first = await _acycle(locks)
                assert await _acycle(locks) > first
                assert _scripts(sent) == ["EVALSHA"] * 4
            await client.aclose()

    arun(main)


def test_a_connection_that_sends_or_packs_its_own_way_sees_every_script(
    redis_server: RedisServer,
) -> None:
    sent: list[str] = []

    class Counting(redis.Connection):
        def send_command(self, *args: Any, **kwargs: Any) -> None:
            sent.append(str(args[0]))
            super().send_command(*args, **kwargs)  # type: ignore[no-untyped-call]

    class Recording(redis.connection.PythonRespSerializer):
        def pack(self, *args: Any) -> list[bytes]:
            sent.append(str(args[0]))
            packed: list[bytes] = super().pack(*args)  # type: ignore[no-untyped-call]
            return packed

    encoder: Any = Encoder("utf-8", "strict", False)  # type: ignore[no-untyped-call]
    pools = {
        "counting": redis.ConnectionPool(connection_class=Counting, port=redis_server.port),
        "recording": redis.ConnectionPool(
            port=redis_server.port, command_packer=Recording(6000, encoder.encode)
        ),
    }
    for name, pool in pools.items():
        client = redis.Redis(connection_pool=pool)
        with Lock(client, prefix=name, ttl_ms=TTL_MS) as locks:
            _cycle(locks)  # the scripts loaded: no NOSCRIPT fallback below
            sent.clear()
            first = _cycle(locks)
            assert _cycle(locks) > first
            assert _scripts(sent) == ["EVALSHA"] * 4
        client.close()
