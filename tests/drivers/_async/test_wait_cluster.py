"""Waiting through a ``RedisCluster`` client, on both drivers: a one-node cluster owning
every slot.

A waiter blocks in ``BLPOP`` for as long as the holder may keep the key.  A client's
``socket_timeout`` bounds how long it waits for any reply, so a block longer than it reads
as a hung connection; the waiter must keep each block within it, whatever kind of client
it was given.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from distlock.asyncio import Lock
from tests.redis_server import REDIS_SERVER, RedisServer, free_port, stop_process

from .concurrency import RedisCluster, sleep, spawn, until

#: Long against every delay here: nothing expires while the test runs.
TTL_MS = 60_000
SOCKET_TIMEOUT = 0.5
#: How long the holder keeps the key after the waiter blocked: many socket timeouts, more
#: than the cluster client's own retries of a timed-out command cover.
HELD_S = 12 * SOCKET_TIMEOUT


@pytest.fixture(scope="module")
def cluster_port() -> Iterator[int]:
    with tempfile.TemporaryDirectory(prefix="distlock-cluster-") as d:
        port = free_port()
        proc = subprocess.Popen(
            [
                REDIS_SERVER,
                *("--port", str(port)),
                # The bus port defaults to port + 10000, past 65535 for a high free port.
                *("--cluster-port", str(free_port())),
                *("--bind", "127.0.0.1"),
                *("--save", ""),
                *("--appendonly", "no"),
                *("--dir", d),
                *("--cluster-enabled", "yes"),
                *("--cluster-config-file", str(Path(d) / "nodes.conf")),
                *("--daemonize", "no"),
                *("--protected-mode", "no"),
                *("--loglevel", "warning"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            probe = RedisServer(port)
            probe.proc = proc
            probe._wait_ready()
            node = redis.Redis(port=port)
            command: Callable[..., object] = node.execute_command
            command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            give_up = time.monotonic() + 30
            while "cluster_state:ok" not in str(command("CLUSTER", "INFO")):
                assert time.monotonic() < give_up, "the one-node cluster never came up"
                time.sleep(0.05)
            node.close()
            yield port
        finally:
            stop_process(proc)


async def test_a_waiter_on_a_cluster_client_outwaits_its_socket_timeout(cluster_port: int) -> None:
    """The holder keeps the key for several socket timeouts after the waiter blocked (that
    delay is the situation under test, not a synchronisation); the waiter, on a cluster
    client whose socket timeout is shorter than its wait, must get the key at the release,
    not fail with the client's TimeoutError."""
    holder_client = RedisCluster(host="127.0.0.1", port=cluster_port)
    waiter_client = RedisCluster(host="127.0.0.1", port=cluster_port, socket_timeout=SOCKET_TIMEOUT)
    node = redis.Redis(port=cluster_port)
    try:
        async with (
            Lock(holder_client, prefix="wc", ttl_ms=TTL_MS) as holders,
            Lock(waiter_client, prefix="wc", ttl_ms=TTL_MS) as waiters,
        ):
            held = await holders.acquire("k")
            assert held is not None

            async def wait() -> object:
                try:
                    return await waiters.acquire("k", wait_ms=30_000)
                except Exception as exc:
                    return exc

            waiter = spawn(wait)
            await until(
                lambda: int(node.info("clients")["blocked_clients"]), "the waiter blocked", 10
            )
            await sleep(HELD_S)
            assert await held.release()
            got: object = await waiter.result()
            assert not isinstance(got, BaseException), f"the wait failed: {got!r}"
            assert got is not None, "the wait timed out although the key was released"
            assert await got.release()  # type: ignore[attr-defined]
    finally:
        await holder_client.aclose()
        await waiter_client.aclose()
        node.close()
