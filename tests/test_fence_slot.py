"""The fence counter must live in the lock key's Redis Cluster hash slot.

The acquire script touches both keys, and Cluster refuses (CROSSSLOT) a script whose keys
hash to different slots, so for every lock id ``slot(fence_key(key)) == slot(key)``.  The
slot function is written out here from the Cluster specification, checked against known
answers and against a real redis-server's ``CLUSTER KEYSLOT``, so the test does not trust
the code it checks.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distlock._protocol import fence_key
from tests.redis_server import REDIS_SERVER, RedisServer, free_port, stop_process

SLOTS = 16384


def crc16_xmodem(data: bytes) -> int:
    """CRC16-CCITT as XMODEM computes it: polynomial 0x1021, initial value 0, no reflection."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def hash_tag(key: bytes) -> bytes:
    """What Cluster hashes: the bytes between the first ``{`` and the first ``}`` after it,
    if there is at least one byte between them; otherwise the whole key."""
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def slot(key: str) -> int:
    return crc16_xmodem(hash_tag(key.encode())) % SLOTS


def test_crc16_and_slot_known_answers() -> None:
    assert crc16_xmodem(b"123456789") == 0x31C3  # the XMODEM check value
    assert slot("foo") == 12182
    assert slot("{user1000}.following") == slot("{user1000}.followers")
    assert slot("{user1000}.following") == slot("user1000")
    assert hash_tag(b"foo{}{bar}") == b"foo{}{bar}"  # an empty first tag: the whole key
    assert hash_tag(b"foo{{bar}}zap") == b"{bar"
    assert hash_tag(b"foo{bar}{zap}") == b"bar"


#: Lock ids around the hash-tag rules: braces unbalanced, empty, nested, reversed, at
#: either end, and non-ASCII text (the slot is computed over the UTF-8 bytes).
TRICKY_IDS = [
    "plain",
    "a}b",
    "{}",
    "{}x",
    "x{}",
    "{a}",
    "a{b}c",
    "}{",
    "{{a}}",
    "{}{a}",
    "a{",
    "}",
    "{",
    "{a",
    "a}",
    "}a{b}",
    "a{}b}",
    "{}}",
    "é{ü}",
    "名前}",
    "{🔒}",
    "🔒}{",
]

#: The table as full lock keys (``<prefix>:<id>``) and as bare keys, which a prefix with
#: braces of its own could produce.
TRICKY_KEYS = [f"lock:{id}" for id in TRICKY_IDS] + TRICKY_IDS + ["{tag}:a}b", "{}:x"]


@pytest.mark.parametrize("key", TRICKY_KEYS)
def test_fence_counter_shares_the_lock_keys_slot(key: str) -> None:
    fence = fence_key(key)
    assert fence != key
    assert slot(fence) == slot(key), (
        f"fence_key({key!r}) = {fence!r} hashes {hash_tag(fence.encode())!r} "
        f"(slot {slot(fence)}), the lock key hashes {hash_tag(key.encode())!r} (slot {slot(key)})"
    )


# Keys drawn mostly from the characters that matter to the hash-tag rules.
keys = st.text(alphabet=st.sampled_from("{}{}{}ab:é🔒"), min_size=1, max_size=12) | st.text(
    min_size=1, max_size=20
)


@settings(max_examples=500, deadline=None)
@given(key=keys)
@example(key="lock:a}b")
@example(key="lock:{}")
def test_fence_counter_shares_the_slot_for_any_key(key: str) -> None:
    assert slot(fence_key(key)) == slot(key)


@pytest.fixture(scope="module")
def cluster_node() -> Iterator[redis.Redis]:
    """A single cluster-enabled redis-server, only to ask it CLUSTER KEYSLOT (which a
    non-cluster server refuses); it owns no slots and stores nothing."""
    with tempfile.TemporaryDirectory(prefix="distlock-cluster-") as d:
        port = free_port()
        proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port", str(port),
                # The bus port defaults to port + 10000, past 65535 for a high free port.
                "--cluster-port", str(free_port()),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", d,
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(Path(d) / "nodes.conf"),
                "--daemonize", "no",
                "--protected-mode", "no",
                "--loglevel", "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            probe = RedisServer(port)
            probe.proc = proc
            probe._wait_ready()
            client = redis.Redis(port=port)
            yield client
            client.close()
        finally:
            stop_process(proc)


def keyslot(node: redis.Redis, key: str) -> int:
    command: Callable[..., object] = node.execute_command
    return int(str(command("CLUSTER", "KEYSLOT", key)))


def test_slot_function_agrees_with_redis(cluster_node: redis.Redis) -> None:
    samples = ["foo", "123456789", "{user1000}.following", "é", "🔒", *TRICKY_KEYS]
    samples += [fence_key(key) for key in TRICKY_KEYS]
    assert {key: slot(key) for key in samples} == {
        key: keyslot(cluster_node, key) for key in samples
    }


@pytest.mark.parametrize("key", TRICKY_KEYS)
def test_redis_puts_the_fence_counter_in_the_lock_keys_slot(
    cluster_node: redis.Redis, key: str
) -> None:
    assert keyslot(cluster_node, fence_key(key)) == keyslot(cluster_node, key)
