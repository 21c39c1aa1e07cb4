"""The asyncio direct send packs its ``EVALSHA`` itself (distlock/_direct.py): byte for
byte what redis-py's connections pack, of either driver and packer.  The direct sends
themselves, on both drivers against a real redis-server, are in
``tests/drivers/_async/test_direct_send.py``."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from redis._parsers import Encoder


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
