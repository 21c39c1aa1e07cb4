"""Threads do not grow with the number of Lock objects.

redis-py's habit is a lock object per use.  Each sync Lock used to start a timer thread
and a worker thread of its own, alive for about ten seconds after its last use: thirty
Lock objects used once left sixty threads behind.  Every sync Lock of a process shares
one timer thread and one small worker pool, so the count after thirty objects is the
count after five.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import redis

from distlock import Lock, ReentrantLock, Semaphore
from distlock.events import Event, Renewed
from tests.redis_server import RedisServer

WAIT = 30.0


def use_once(
    make: Callable[..., Any], client: redis.Redis, id: str, wait: float = WAIT
) -> None:
    """Make a lock object, hold one section until it has renewed once, drop the object."""
    renewed = threading.Event()

    def observe(event: Event) -> None:
        if isinstance(event, Renewed):
            renewed.set()

    locks = make(client, prefix="threads", ttl_ms=2_000, heartbeat_ms=25, observers=[observe])

    def body(handle: object) -> None:
        assert renewed.wait(wait), "the section never renewed"

    locks.run(id, body)


MAKERS: list[Callable[..., Any]] = [
    Lock,
    ReentrantLock,
    lambda client, **options: Semaphore(client, limit=2, **options),
]


def test_threads_do_not_grow_with_lock_objects(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    try:
        before = threading.active_count()
        counts = []
        made = 0
        for upto in (5, 30):
            while made < upto:
                for n, make in enumerate(MAKERS):
                    use_once(make, client, f"{n}-{made}")
                made += 1
            counts.append(threading.active_count())
        after_five, after_thirty = counts
        assert after_thirty == after_five, (
            f"{after_thirty - after_five} more threads after 30 lock objects than after 5"
        )
        # One timer thread and a few workers for the whole process, whatever the objects.
        assert after_thirty - before <= 1 + 8
    finally:
        client.close()


def test_a_forked_child_gets_its_own_timer_thread(redis_server: RedisServer) -> None:
    """The parent's timer thread does not exist in a child made by os.fork: the child's
    sections must still renew, on a thread of its own."""
    client = redis.Redis.from_url(redis_server.url)
    try:
        use_once(Lock, client, "parent")  # the parent's timer thread is running now
        pid = os.fork()
        if pid == 0:  # the child: report by exit status only
            code = 1
            try:
                child = redis.Redis.from_url(redis_server.url)
                use_once(Lock, child, "child", wait=10.0)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child's section never renewed"
    finally:
        client.close()
