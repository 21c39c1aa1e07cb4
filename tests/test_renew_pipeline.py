"""The chaos tool's recorder sees renewals sent in a pipeline.  Only here, not among the
driver tests: the recorder wraps a sync client, as the chaos tool drives the sync driver.
How renewals are pipelined, on both drivers, is in
``tests/drivers/_async/test_renew_pipeline.py``."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from distlock import Lock
from distlock._clock import now_ms
from distlock._protocol import EXTEND
from tests.redis_server import RedisServer

TTL_MS = 60_000
HEARTBEAT_MS = 1_000
WAIT = 30.0  # bounds a failure only


def test_the_chaos_recorder_sees_pipelined_renewals(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The chaos checks judge detection from the last confirmed send: a renewal sent in a
    pipeline must be on record like one sent alone."""
    from distlock.tools.chaos.recorder import Recorder, RecordingRedis

    r.script_load(EXTEND.source)  # so that the renewals go out by EVALSHA at once

    recorder = Recorder("pipelined")
    renewed = threading.Condition()
    replies = 0

    def trace(event: dict[str, Any]) -> None:
        nonlocal replies
        if event["action"] == "RenewReply" and event["ok"]:
            with renewed:
                replies += 1
                renewed.notify_all()

    client = RecordingRedis(port=redis_server.port, recorder=recorder)
    with Lock(client, prefix="rec", ttl_ms=TTL_MS, heartbeat_ms=HEARTBEAT_MS,
              trace=trace) as locks, locks.hold_many(["a", "b", "c"]) as group:
        # The timer thread is kept busy until all three renewals are due, so they go out
        # in one tick, in one pipeline.
        release, busy = threading.Event(), threading.Event()

        def occupy(_: object) -> None:
            busy.set()
            release.wait(WAIT)

        locks._timers.call_at(0.0, occupy)
        assert busy.wait(WAIT)
        handles: Any = group.handles
        due = max(h._section.wake_at for h in handles)
        time.sleep(max(0.0, due - now_ms()) / 1000.0 + 0.01)  # nothing to wait for but time
        release.set()
        with renewed:
            assert renewed.wait_for(lambda: replies >= 3, WAIT)
        tokens = {h.token for h in group.handles}
        renewals = [c for c in recorder.commands if c.args[0] == EXTEND.sha and c.ok]
        assert {t for c in renewals for t in tokens if c.carries(t)} == tokens
    client.close()
