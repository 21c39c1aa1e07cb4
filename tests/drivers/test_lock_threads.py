"""The sync Lock only: a body that holds the GIL past its lease starves the renewal
thread (asyncio has no timer thread to starve; its blocked event loop is in
``tests/drivers/test_lock_asyncio.py``)."""

from __future__ import annotations

import ctypes
import time
from typing import Any

import pytest
import redis

from distlock import Lock, LockHandle, LockLeaseLostError, LossReason


def test_gil_held_past_the_ttl_is_caught(r: redis.Redis) -> None:
    ttl_ms = 500
    # PyDLL calls keep the GIL, so the timer thread cannot run while usleep blocks.
    libc = ctypes.PyDLL(None)
    sent_at: list[float] = []
    ran: list[int] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            sent_at.append(event["t"])

    def body(h: LockHandle) -> None:
        ran.append(1)
        # Hold the GIL until the lease, counted from the acquire's send, is over on the
        # client's own clock: the section is certainly past its deadline when it ends.
        left_ms = sent_at[0] + ttl_ms - time.monotonic() * 1000
        libc.usleep(int(max(0.0, left_ms) * 1000) + 1_000)

    with (
        Lock(r, prefix="gil", ttl_ms=ttl_ms, heartbeat_ms=ttl_ms // 2, trace=trace) as locks,
        pytest.raises(LockLeaseLostError) as info,
    ):
        locks.run("k", body)
    assert ran == [1]
    # Whichever of the starved timer or the completion check sees the deadline first; a
    # renewal the timer sent just before the GIL was taken finds the key expired.  Not a
    # release rejection: the loss must be known before the release reply says so.
    assert info.value.reason in (
        LossReason.DEADLINE_AT_COMPLETION,
        LossReason.DEADLINE_PASSED,
        LossReason.RENEW_REJECTED,
    )
