"""Nested enter/exit sequences of several holders of one reentrant key, on a real Redis,
checked step by step against a simple model: who holds the key, and each holder's depth.

Holders: two threads sharing one sync ``ReentrantLock``, the first of them again through a
second ``ReentrantLock`` object (another holder on the same thread), a task on an event loop
thread with an asyncio ``ReentrantLock``, and a child task that task created (another
holder: identity is never inherited).  Every call runs on its holder's own thread or task.
A rule deletes the key behind its holder's back (Redis losing it): from then on that holder
is refused every re-entry with ``LockLeaseLostError`` and its exits answer False, while the
key is free for the others.

Checked after every step: the key exists in Redis exactly when the model has an owner, and
the hash holds the owner's token at the owner's depth (``DepthMirrored``; nothing is in
flight between steps), with the fence issued at the outermost grant.  No TTL is short
enough to run out during a run, so no timing is involved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
import redis
import redis.asyncio as aredis
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError
from tests.properties import profiles
from tests.properties.seen import Seen
from tests.properties.workers import LoopThread, TaskWorker, ThreadWorker
from tests.redis_server import RedisServer

TTL: Final = 600_000
KEY: Final = "rs:k"
HOLDERS: Final = ("t1", "t2", "t1-other-object", "task", "child-task")
#: What the runs did, for the summary line: examples, and steps by what they found.
SEEN: Final = Seen()


class Holder:
    """One holder in the model and in reality: its open levels' handles, innermost last."""

    def __init__(self, name: str, enter: Callable[[], Any], leave: Callable[[Any], Any]) -> None:
        self.name = name
        self.enter = enter
        self.leave = leave
        self.handles: list[Any] = []
        #: The model: this holder's section was lost (its key deleted behind its back).
        self.lost = False


class ReentrantMachine(RuleBasedStateMachine):
    server: RedisServer
    loop: LoopThread

    @initialize()
    def start(self) -> None:
        port = self.server.port
        SEEN.saw("examples")
        self.admin = redis.Redis(port=port)
        self.admin.delete(KEY)
        self.sync_a = distlock.ReentrantLock(redis.Redis(port=port), prefix="rs", ttl_ms=TTL)
        self.sync_b = distlock.ReentrantLock(redis.Redis(port=port), prefix="rs", ttl_ms=TTL)
        self.aio = distlock.asyncio.ReentrantLock(
            aredis.Redis(port=port), prefix="rs", ttl_ms=TTL
        )
        self.t1, self.t2 = ThreadWorker(), ThreadWorker()
        self.task = TaskWorker(self.loop.loop)
        self.loop.run(self.task.start())
        self.child = TaskWorker(self.loop.loop)
        self.task.call(self.child.start)  # created inside the holder task: its child

        def on_thread(worker: ThreadWorker, lock: distlock.ReentrantLock) -> Holder:
            return Holder(
                "",
                lambda: worker.call(lambda: lock.acquire("k")),
                lambda h: worker.call(h.release),
            )

        def on_task(worker: TaskWorker) -> Holder:
            return Holder(
                "",
                lambda: worker.call(lambda: self.aio.acquire("k")),
                lambda h: worker.call(h.release),
            )

        made = [
            on_thread(self.t1, self.sync_a),
            on_thread(self.t2, self.sync_a),
            on_thread(self.t1, self.sync_b),
            on_task(self.task),
            on_task(self.child),
        ]
        self.holders: dict[str, Holder] = {}
        for name, holder in zip(HOLDERS, made, strict=True):
            holder.name = name
            self.holders[name] = holder
        #: The model: who holds the key in Redis (None: nobody).
        self.owner: Holder | None = None

    @rule(name=st.sampled_from(HOLDERS))
    def enter(self, name: str) -> None:
        holder = self.holders[name]
        if holder.lost and holder.handles:
            with pytest.raises(LockLeaseLostError):  # NoReentryAfterLoss
                holder.enter()
            SEEN.saw("re-entry after loss refused")
            return
        handle = holder.enter()
        if self.owner is None or self.owner is holder:
            assert handle is not None, f"{name} refused a free key or its own re-entry"
            assert handle.depth == len(holder.handles) + 1
            if holder.handles:
                assert handle.fence == holder.handles[0].fence
            holder.handles.append(handle)
            self.owner = holder
            SEEN.saw(f"entered at depth {min(handle.depth, 3)}{'+' if handle.depth >= 3 else ''}")
        else:
            SEEN.saw("refused")
            assert handle is None, f"{name} entered while {self.owner.name} holds the key"

    @rule(name=st.sampled_from(HOLDERS))
    def exit(self, name: str) -> None:
        holder = self.holders[name]
        if not holder.handles:
            return
        handle = holder.handles.pop()
        answered = holder.leave(handle)
        assert answered is not holder.lost, f"{name}'s exit answered {answered}"
        if not holder.handles:
            holder.lost = False
            if self.owner is holder:
                self.owner = None

    @rule()
    def delete_key(self) -> None:
        """Redis loses the key: its owner's section is lost; the key is free."""
        owner = self.owner
        if owner is None:
            return
        self.admin.delete(KEY)
        SEEN.saw("key lost")
        owner.lost = True
        self.owner = None

    @invariant()
    def redis_mirrors_the_model(self) -> None:
        if not hasattr(self, "owner"):
            return
        owner = self.owner
        if owner is None:
            assert self.admin.exists(KEY) == 0
            return
        outer = owner.handles[0]
        stored = self.admin.hgetall(KEY)
        assert stored == {
            outer.token.encode(): str(len(owner.handles)).encode(),
            b"fence": str(outer.fence).encode(),
        }

    def teardown(self) -> None:
        if not hasattr(self, "holders"):
            return
        for holder in self.holders.values():
            while holder.handles:
                holder.leave(holder.handles.pop())
        assert self.admin.exists(KEY) == 0
        self.t1.close()
        self.t2.close()
        self.child.close()
        self.task.close()
        for lock in (self.sync_a, self.sync_b):
            lock.close()
            lock.client.close()
        self.loop.run(self.aio.aclose())
        self.loop.run(self.aio._client.aclose())  # type: ignore[union-attr]
        self.admin.close()


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


def test_nested_holders_mirror_the_model(
    redis_server: RedisServer, loop_thread: LoopThread
) -> None:
    ReentrantMachine.server = redis_server
    ReentrantMachine.loop = loop_thread
    # Examples are cheap (about 50 ms): the compiled build's run, which scales the count
    # down, still gets 50.
    run_state_machine_as_test(ReentrantMachine, settings=profiles.scaled(20, floor=50, steps=30))
    print(f"reentrant stateful: {dict(sorted(SEEN.items()))}")
    # What each run meets varies (Hypothesis leaves rules out of some examples, and a run
    # of a dozen examples met no key loss): a re-entry after a loss is told for certain by
    # tests/drivers/_async/test_reentrant.py (test_reenter_rejected_is_the_loss and
    # test_loss_at_depth_two_surfaces_at_every_level), on both drivers.
    assert SEEN.get("refused")
