"""close() with a renewal in flight, then the client closed: no connection is left open.

A renewal whose reply hangs is still running on a worker thread when its section ends.
Before, ``Lock.close()`` returned at once; the caller's ``client.close()`` then disconnected
the renewal's connection under it, redis-py's ``Retry`` reconnected and sent it again, and
the new connection went back to the closed pool, open, and nobody ever closed it (the
process kept the socket and Redis kept the client).  Now close() lets the renewal finish
first, and no renewal of a closed Lock starts a round trip.  (The sync driver only: its
renewals run on worker threads, which a close on the caller's thread can race.)

The hang is the one thing made up here: the connection holds the first renewal reply it
is asked for until its socket timeout passes or its socket is closed under it, as a reply
lost on the network does.  Everything else is a real redis-server.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

import distlock
from distlock._protocol import EXTEND
from tests.redis_server import RedisServer

#: A failure guard only: every wait below ends as soon as what it waits for happens.
WAIT = 30.0
NAME = "renewal-in-flight"


class Hang:
    """Shared by the connections of one pool: whether a renewal reply was held yet."""

    def __init__(self) -> None:
        self.started = threading.Event()


def hangs_one_renewal_reply(hang: Hang) -> type[redis.Connection]:
    class HangsOneRenewalReply(redis.Connection):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)  # type: ignore[no-untyped-call]
            self._closed_under = threading.Event()
            self._renewal_sent = False

        def connect(self) -> None:
            self._closed_under.clear()
            super().connect()  # type: ignore[no-untyped-call]

        def disconnect(self, *args: Any) -> None:
            self._closed_under.set()
            super().disconnect(*args)  # type: ignore[no-untyped-call]

        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            parts = [command] if isinstance(command, bytes | str) else command
            sha = EXTEND.sha.encode()
            self._renewal_sent = any(
                sha in (p.encode() if isinstance(p, str) else bytes(p)) for p in parts
            )
            super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]

        def read_response(self, *args: Any, **kwargs: Any) -> Any:
            if self._renewal_sent and not hang.started.is_set():
                hang.started.set()
                if self._closed_under.wait(self.socket_timeout):
                    raise redis.ConnectionError("the connection was closed under the read")
                raise redis.TimeoutError("Timeout reading from socket")
            return super().read_response(*args, **kwargs)

    return HangsOneRenewalReply


def server_sees(admin: redis.Redis) -> list[str]:
    return [c["addr"] for c in admin.client_list() if c.get("name") == NAME]


def test_closing_the_lock_then_its_client_with_a_renewal_in_flight_leaves_no_connection(
    redis_server: RedisServer,
) -> None:
    hang = Hang()
    settled = threading.Event()

    def trace(event: dict[str, Any]) -> None:
        if event["action"] in ("RenewReply", "RenewFail") and hang.started.is_set():
            settled.set()

    pool = redis.ConnectionPool(
        host=redis_server.host,
        port=redis_server.port,
        client_name=NAME,
        socket_timeout=0.5,
        retry=Retry(ExponentialBackoff(cap=0.02, base=0.005), 1),
        connection_class=hangs_one_renewal_reply(hang),
    )
    client = redis.Redis.from_pool(pool)  # client.close() closes the pool
    admin = redis.Redis(host=redis_server.host, port=redis_server.port)
    locks = distlock.Lock(client, prefix="renewal-in-flight", ttl_ms=300, trace=trace)
    try:
        with locks.hold("k"):
            assert hang.started.wait(WAIT)  # a renewal is in flight, its reply held
        locks.close()
        client.close()
        assert settled.wait(WAIT)  # the renewal is over, however it ended
        connected = [
            c
            for c in [*pool._available_connections, *pool._in_use_connections]
            if c._sock is not None
        ]
        assert connected == [], "a connection of the closed client is still open"
        # Redis forgets a closed connection as soon as it reads its end.
        polled = threading.Event()
        for _ in range(int(WAIT / 0.01)):
            if not server_sees(admin):
                break
            polled.wait(0.01)
        assert server_sees(admin) == []
    finally:
        locks.close()
        client.close()
        admin.close()
