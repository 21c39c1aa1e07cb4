"""Waiting for a held lock, sync only: a KeyboardInterrupt (SIGINT) while blocked leaves
nothing behind (asyncio turns one into the loop's own shutdown, and has cancellation
instead: ``tests/drivers/test_wait_asyncio.py``)."""

from __future__ import annotations

import signal
import threading

import pytest
import redis

from distlock import Lock
from tests.waiting import FOREVER_MS, blocked_clients, queue, until, waiting_keys


def test_keyboard_interrupt_while_waiting_leaves_nothing_behind(r: redis.Redis) -> None:
    with Lock(r, prefix="w", ttl_ms=30_000) as locks:
        interrupted(locks, r)


def interrupted(locks: Lock, r: redis.Redis) -> None:
    holder = locks.acquire("k")
    assert holder is not None
    main = threading.main_thread().ident
    assert main == threading.get_ident()

    def interrupt() -> None:
        until(lambda: len(queue(r, "w:k")) == 1, "the waiter queued")
        until(lambda: blocked_clients(r), "the waiter's BLPOP")
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt, daemon=True)
    # SIGINT raises KeyboardInterrupt whatever handler the process was started with (a
    # runner may have started it with SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            locks.acquire("k", wait_ms=FOREVER_MS)
        interrupter.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    # No place, no wake list, no key of ours, and no connection left blocked in Redis.
    assert waiting_keys(r) == []
    assert r.get("w:k") == holder.token.encode()
    until(lambda: not blocked_clients(r), "the blocked connection closed")
    # The pool still works: nothing blocked was handed back to it.
    assert holder.release() is True
    assert locks.run("k", lambda h: h.fence, wait_ms=1_000) > holder.fence
