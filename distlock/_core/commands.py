"""What a machine asks of its driver: commands to send, and the step that carries them.

A :class:`Command` is self-describing: it says which operation, on which key, with which
token and TTL.  The protocol module turns it into a script call; its reply comes back to
the machine routed by the same object, so no driver or flow re-interprets an opcode.
"""

from __future__ import annotations

import enum
from typing import Final

from distlock._core.lease import Write
from distlock.errors import LockLeaseLostError, NotReplicatedError


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


class Kind(enum.Enum):
    """What a key holds, which picks the scripts that carry out a command on it."""

    #: A :class:`distlock.Lock`'s string (the token).
    LOCK = "lock"
    #: A :class:`distlock.ReentrantLock`'s hash (``<token>`` -> depth, ``fence``).
    REENTRANT = "reentrant"
    #: A :class:`distlock.Semaphore`'s sorted set (``<token>`` -> expiry instant).
    SEMAPHORE = "semaphore"
    #: A :class:`distlock.ReadWriteLock`'s reader: its token in the readers' sorted set
    #: (token -> expiry instant), beside the key's hash.
    READ = "read"
    #: A :class:`distlock.ReadWriteLock`'s writer: the key's hash (``w``, ``f``, ``x``).
    WRITE = "write"
    #: A :class:`distlock.Election`'s candidate: the lock's string (the token) under the
    #: key, and the leader record (token, identity, fence) its grants write beside it.
    CAMPAIGN = "campaign"


class Command:
    """One request for Redis: ``op`` on ``key`` with ``token``, setting ``ttl_ms``.

    ``write`` is the lease clock's record of a TTL-setting request (None for a release).
    ``best_effort``: a cleanup whose failure changes nothing for the caller (the release
    after an acquire whose reply never came): one attempt, without the client library's
    retries, so a Redis that is down is not waited for twice.
    ``kind``: what the key holds (the scripts for it carry the command out);
    ``reentrant=True`` is ``kind=Kind.REENTRANT``.  ``depth``: the depth a re-entry or an
    inner exit writes.  ``limit``: a semaphore's acquire grants a permit only while fewer
    than ``limit`` are live.
    ``identity``: a campaign's candidate, as the leader record names it once granted.
    ``replicas``: wait (``WAIT``, on the connection that wrote) until this many replicas
    acknowledged the write, for at most ``replica_timeout_ms``; 0 sends the script alone.
    ``queue_ms``: for an acquire, None fails fast (the key is taken if free, whoever
    waits); a number makes it a waiting attempt, which joins or keeps its place in the
    key's queue for up to that many ms if refused, and 0 makes it the last attempt, which
    leaves the queue if refused.
    """

    __slots__ = (
        "best_effort",
        "depth",
        "hand_ms",
        "identity",
        "key",
        "kind",
        "limit",
        "op",
        "queue_ms",
        "replica_timeout_ms",
        "replicas",
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
        kind: Kind = Kind.LOCK,
        limit: int = 0,
        queue_ms: int | None = None,
        identity: str = "",
    ) -> None:
        self.op = op
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self.write = write
        self.best_effort = best_effort
        self.kind = Kind.REENTRANT if reentrant else kind
        self.depth = depth
        self.limit = limit
        self.queue_ms = queue_ms
        self.identity = identity
        #: A waiting attempt: the TTL a release may hand the key over with, or 0 to be
        #: woken instead (see :mod:`distlock._core.waiting`).
        self.hand_ms = 0
        self.replicas = 0
        self.replica_timeout_ms = 0

    @property
    def reentrant(self) -> bool:
        return self.kind is Kind.REENTRANT

    def __repr__(self) -> str:
        return f"Command({self.op.name}, {self.key!r}, ttl_ms={self.ttl_ms})"


#: The writes whose acknowledgement by replicas is waited for: what a failover must not lose
#: for the lease to hold (a grant and each TTL refresh).  Releases are not waited for: a
#: release lost in a failover leaves a key that expires on its own.
ACKNOWLEDGED_OPS: Final = frozenset({Op.ACQUIRE, Op.RENEW, Op.EXTEND})


def replicated(command: Command, value: int, acknowledged: int) -> int:
    """The reply of ``command`` once ``acknowledged`` replicas confirmed it.

    A write too few replicas confirmed is the round trip's failure
    (:class:`NotReplicatedError`): the acquire flow releases the grant and reports it not
    acquired, and a renewal counts as failed.  A reply that wrote nothing (0: refused)
    needs no replica and goes through.
    """
    if value > 0 and acknowledged < command.replicas:
        raise NotReplicatedError(command.key, command.replicas, acknowledged)
    return value


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
