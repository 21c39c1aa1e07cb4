"""What a machine asks of its driver: commands to send, and the step that carries them.

A :class:`Command` is self-describing: it says which operation, on which key, with which
token and TTL.  The protocol module turns it into a script call; its reply comes back to
the machine routed by the same object, so no driver or flow re-interprets an opcode.
"""

from __future__ import annotations

import enum
from typing import Final

from distlock._core.lease import Write
from distlock.errors import LockLeaseLostError


class Op(enum.Enum):
    """An operation on a section's key."""

    ACQUIRE = "acquire"
    #: A background renewal (the heartbeat).
    RENEW = "renew"
    #: A manual extend from a handle.
    EXTEND = "extend"
    RELEASE = "release"
    #: A reentrant lock's re-entry: set the holder's depth and refresh the TTL.
    REENTER = "reenter"
    #: A reentrant lock's inner exit: set the holder's depth (never frees the key).
    LEAVE = "leave"
    #: A waiter that stops waiting gives up its place in the key's queue.
    WITHDRAW = "withdraw"


class Command:
    """One request for Redis: ``op`` on ``key`` with ``token``, setting ``ttl_ms``.

    ``write`` is the lease clock's record of a TTL-setting request (None for a release).
    ``best_effort``: a cleanup whose failure changes nothing for the caller (the release
    after an acquire whose reply never came): one attempt, without the client library's
    retries, so a Redis that is down is not waited for twice.
    ``reentrant``: the key is a reentrant lock's hash (the ``R_*`` scripts carry it out);
    ``depth``: the depth a re-entry or an inner exit writes.
    ``queue_ms``: for an acquire, None fails fast (the key is taken if free, whoever
    waits); a number makes it a waiting attempt, which joins or keeps its place in the
    key's queue for up to that many ms if refused, and 0 makes it the last attempt, which
    leaves the queue if refused.
    """

    __slots__ = (
        "best_effort",
        "depth",
        "key",
        "op",
        "queue_ms",
        "reentrant",
        "token",
        "ttl_ms",
        "write",
    )

    def __init__(
        self,
        op: Op,
        key: str,
        token: str,
        ttl_ms: int,
        write: Write | None = None,
        best_effort: bool = False,
        *,
        reentrant: bool = False,
        depth: int = 0,
        queue_ms: int | None = None,
    ) -> None:
        self.op = op
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self.write = write
        self.best_effort = best_effort
        self.reentrant = reentrant
        self.depth = depth
        self.queue_ms = queue_ms

    def __repr__(self) -> str:
        return f"Command({self.op.name}, {self.key!r}, ttl_ms={self.ttl_ms})"


class Step:
    """What a transition asks of the driver.

    ``send``: run this command now.  ``loss``: the lease just became known lost; fire the
    signal with it (and, when ``cancel_body``, cancel the body).
    """

    # Slotted and immutable by convention: most transitions return the shared NOTHING.
    __slots__ = ("cancel_body", "loss", "send")

    def __init__(
        self,
        send: Command | None = None,
        loss: LockLeaseLostError | None = None,
        cancel_body: bool = False,
    ) -> None:
        self.send = send
        self.loss = loss
        self.cancel_body = cancel_body

    def __repr__(self) -> str:
        return f"Step(send={self.send}, loss={self.loss!r}, cancel_body={self.cancel_body})"


NOTHING: Final = Step()
