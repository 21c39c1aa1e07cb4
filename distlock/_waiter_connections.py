"""The connections waiters block on, kept outside the client's pool.

A waiter's ``BLPOP`` holds its connection for the whole block.  Taken from the client's
pool, a bounded pool (or a ``BlockingConnectionPool``) filled with waiters would leave the
holder no connection for its release or its renewals: the key would stay held until its
TTL ran out, and every waiter behind it would time out.  So a waiter blocks on a
connection of its own, made from the pool's settings (the same class, address,
credentials and timeouts) but never counted by it, and kept here between blocks: a
waiter that looks again every second does not reconnect every second.

Both drivers keep one of these per Lock object; each does its own IO (disconnecting is a
coroutine in asyncio), so this only decides which connection is used and which is let go.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Final

#: Idle connections kept between blocks; beyond them, a connection given back is closed.
#: A few: waiters of one Lock object that block at once each hold one anyway.
IDLE_KEPT: Final = 4


class WaiterConnections:
    """Connections for one Lock object's waiters (see the module's docstring)."""

    __slots__ = ("_closed", "_idle", "_mutex", "_pid")

    def __init__(self) -> None:
        self._idle: list[Any] = []
        self._mutex = threading.Lock()
        self._pid = os.getpid()
        self._closed = False

    def take(self, pool: Any) -> tuple[Any, bool]:
        """A connection to block on, and whether it was kept from an earlier block (its
        server side may have closed it meanwhile: the caller checks before use)."""
        with self._mutex:
            if self._pid != os.getpid():
                # A forked child must not use its parent's sockets.
                self._idle = []
                self._pid = os.getpid()
            if self._idle:
                return self._idle.pop(), True
        return pool.connection_class(**pool.connection_kwargs), False

    def give_back(self, conn: Any) -> bool:
        """Keep ``conn`` for the next block; False when it is not kept (the caller closes
        it): the Lock is closed, enough are kept, or it came from another process."""
        with self._mutex:
            if self._closed or len(self._idle) >= IDLE_KEPT or self._pid != os.getpid():
                return False
            self._idle.append(conn)
            return True

    def close(self) -> list[Any]:
        """Keep nothing more; the connections kept, for the caller to close."""
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
            return idle
