"""The sync ReentrantLock only: a KeyboardInterrupt in a body and in a re-entry (asyncio
turns one raised inside the loop into the loop's own shutdown, and has cancellation
instead: ``tests/drivers/test_reentrant_asyncio.py``)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock import ReentrantLock
from distlock._protocol import R_ENTER

TTL = 30_000


def test_interrupt_in_body_and_in_reentry_leaves_no_key(r: redis.Redis) -> None:
    class Interrupting(redis.Redis):
        """Raises KeyboardInterrupt instead of sending the first re-entry (the request
        may or may not have run: the flow must cope either way)."""

        armed = True

        def execute_command(self, *args: Any, **options: Any) -> Any:
            if args[:2] == ("EVALSHA", R_ENTER.sha) and self.armed:
                self.armed = False
                raise KeyboardInterrupt
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    client = Interrupting(port=r.connection_pool.connection_kwargs["port"])
    locks = ReentrantLock(client, prefix="i", ttl_ms=TTL)
    with pytest.raises(KeyboardInterrupt), locks.hold("k") as outer, locks.hold("k"):
        pass
    assert outer.depth == 1
    assert r.exists("i:k") == 0
    with pytest.raises(KeyboardInterrupt), locks.hold("k"), locks.hold("k"):
        raise KeyboardInterrupt
    assert r.exists("i:k") == 0
    assert len(locks._holders) == 0
    locks.close()
    client.close()
