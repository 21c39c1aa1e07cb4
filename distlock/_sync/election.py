# Generated from distlock/_async/election.py by tools/unasync.py: do not edit.
"""Leader election: candidates campaign for one key; the one its lease is granted to leads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

from redis.exceptions import RedisError

from distlock._clock import now_ms
from distlock._core.election import CampaignSection, leading
from distlock._holding import conclude
from distlock._leader import (
    Leader,
    check_identity,
    check_poll,
    default_identity,
    keyspace_channel,
    leader_call,
    read_leader,
)
from distlock._protocol import leader_key
from distlock.errors import (
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    NotReplicatedError,
    UsageError,
)
from distlock.options import MAX_MS, LockOptions, check_id, check_wait

from . import backend, wire
from .handles import LockHandle, _Hold
from .primitive import Primitive

T = TypeVar("T")

#: An election's key is ``election:<name>`` unless a prefix is given.
ELECTION_PREFIX = "election"

#: How often ``observe()`` reads who leads when no keyspace notification comes, ms.
OBSERVE_POLL_MS = 1_000
#: The longest ``observe()`` waits at a time, ms: how soon it ends once the Election is
#: closed, whatever its ``poll_ms``.
OBSERVE_CLOSE_CHECK_MS = 100


class Leadership(LockHandle):
    """A candidate's leadership, from :meth:`Election.campaign`: renewed in the background
    until :meth:`resign` (or ``with``'s exit, or the Election's ``close``).

    ``fence`` is larger than every earlier leader's: hand it to the resources the leader
    writes, so that they refuse a deposed leader's writes.  ``signal`` fires the moment the
    lease is known lost (a renewal refused, or not confirmed in time); :attr:`is_leader`
    is the check to make before acting as leader: it reads the clock itself, so it turns
    False at the lease's deadline even if the event loop was too busy to run the timer
    that fires the signal."""

    __slots__ = ("_hold", "_resigned", "_resigning")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: The hold that campaigned; its exit resigns.
        self._hold: _Hold[Leadership] | None = None
        #: What resign() returned (None: not resigned yet).
        self._resigned: bool | None = None
        #: Held by the resign() under way: a second caller waits for its answer.
        self._resigning = backend.new_resolving_lock()

    @property
    def identity(self) -> str:
        """The identity this candidate campaigned under (what ``leader()`` reports)."""
        section: Any = self._section
        return str(section.identity)

    @property
    def is_leader(self) -> bool:
        """Held, no loss known, and the lease valid on this client's clock: whether the
        candidate may still act as leader now."""
        return leading(self._section, now_ms())

    def resign(self) -> bool:
        """Stop leading: the lease is given back and handed, with a new fence, to the
        candidate first in line, if any.  Returns True if this candidate led without a
        break until now, False if its lease had been lost (its ``signal`` said so).
        Calling it again, even while the first call is under way, returns what the first
        call returned.  Cancellation-safe, as a lock's release."""
        try:
            return self._end(None)
        except LockLeaseLostError:
            return False

    def _end(self, ev: BaseException | None) -> bool:
        """Resign once, the hold's exit seeing ``ev`` (a block's exception): it raises
        what a hold's exit raises, the loss if the leadership was lost.  A later call
        returns what the first one's resignation came to."""
        with self._resigning:
            hold = self._hold
            if hold is None:
                return bool(self._resigned)
            self._hold = None
            self._resigned = False
            hold.__exit__(None if ev is None else type(ev), ev, None)
            self._resigned = self._machine.first_loss is None
            return self._resigned

    def release(self) -> bool:
        """:meth:`resign`, by the name every handle has."""
        return self.resign()

    def extend(self, ttl_ms: int | None = None) -> bool:
        """Refused: a leadership is renewed for you every heartbeat, as long as it lasts."""
        raise UsageError(
            f"a leadership of {self.key!r} is renewed for you every heartbeat: there is "
            "nothing to extend (the Election's ttl_ms and heartbeat_ms set its lease)",
            self.key,
        )

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        """``with leadership:`` resigns on exit, and raises
        :class:`LockLeaseLostError` if the leadership was lost meanwhile, as a ``hold``'s
        exit does."""
        if not self._end(ev):
            conclude(self._machine, ev)


class _Candidates(Primitive[Leadership]):
    """An Election's campaigns: a primitive whose sections are :class:`CampaignSection`."""

    _PRIMITIVE = "Election"  # what LockClosedError calls it

    _section_type = CampaignSection
    _handle_type = Leadership


class Election:
    """Leader election among the candidates of ``name`` (key ``<prefix>:<name>``, prefix
    ``"election"`` by default): at most one leads at a time, holding a renewed lease with
    a fence larger than every earlier leader's.

    A campaign waits in the election's queue, in arrival order; when the leader resigns,
    the lease is handed straight to the first candidate in line (with a new fence); when
    it dies, its lease ends at its TTL and the first candidate takes it.  ``identity`` is
    what :meth:`leader` reports for this candidate (``"<host>:<pid>"`` unless given).
    ``client`` and the options are a :class:`Lock`'s (``ttl_ms``, ``heartbeat_ms``, ...).

    >>> election = Election("redis://127.0.0.1:6379/0", "scheduler")  # doctest: +SKIP
    """

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        name: str,
        *,
        identity: str | None = None,
        **options: Unpack[LockOptions],
    ) -> None:
        check_id(name, "election name")
        self.identity = default_identity() if identity is None else check_identity(identity)
        merged: LockOptions = {"prefix": ELECTION_PREFIX, **options}
        self._candidates = _Candidates(client, **merged)
        #: The election's name: its id under the prefix.
        self.name = name
        #: The election's Redis key, ``<prefix>:<name>``.
        self.key = self._candidates.key(name)

    @property
    def client(self) -> backend.Client:
        """The Redis client, created on first use when a URL or a factory was given."""
        candidates = self._candidates
        return candidates.client

    # -- taking part -------------------------------------------------------------------------

    def campaign(self, *, wait_ms: int | None = None) -> Leadership | None:
        """Wait to lead, in the election's queue, for at most ``wait_ms`` (None: until this
        candidate leads, or is cancelled, or the Election is closed; 0: one attempt).
        Returns the leadership, renewed in the background until :meth:`Leadership.resign`,
        or None if ``wait_ms`` passed first.  With ``replicas``, a grant too few replicas
        acknowledged is given back and raises :class:`~distlock.NotReplicatedError`, as a
        Lock's acquire does, whatever the wait.  Interrupted while it waits (cancelled,
        ``KeyboardInterrupt``), the candidate withdraws its place before the interruption
        propagates.  A lost lease cancels nothing: the leadership's ``signal`` fires and
        its ``is_leader`` turns False (:meth:`run_as_leader` cancels its body)."""
        limit = None if wait_ms is None else check_wait(wait_ms)
        while True:
            hold = self._hold(MAX_MS if limit is None else limit, keep_body=True)
            try:
                leadership = hold.__enter__()
            except NotReplicatedError:
                raise  # granted, but not by enough replicas: no other candidate's doing
            except LockNotAcquiredError:
                if limit is None:
                    continue  # a wait of MAX_MS (24 days) ended: campaign on
                return None
            leadership._hold = hold
            return leadership

    def run_as_leader(self, fn: Callable[[Leadership], T]) -> T:
        """Campaign until this candidate leads, then run ``fn(leadership)`` while it leads,
        and resign when ``fn`` returns; returns what ``fn`` returned.  If the lease is lost
        while ``fn`` runs, ``fn`` is cancelled (under asyncio, unless
        ``cancel_on_loss=False``; a sync ``fn`` must watch ``leadership.signal`` or check
        ``leadership.is_leader``) and the candidate campaigns again, then runs ``fn``
        again.  Hand ``leadership.fence`` to what ``fn`` writes.  An exception of ``fn``
        resigns and propagates; so does :class:`~distlock.NotReplicatedError`, as from
        :meth:`campaign`.  A loss learnt only once ``fn`` has returned (its resignation
        found the lease gone, or ``fn`` ended past the deadline) is raised, as ``hold``
        raises it: ``fn`` did its work, which was not known to be the leader's alone to
        the end, and is not run again."""
        backend.check_body(fn)
        while True:
            hold = self._hold(MAX_MS, keep_body=False)
            deposed = False
            try:
                with hold as leadership:
                    try:
                        result = backend.awaitable(fn, fn(leadership))
                    finally:
                        deposed = leadership._section.lost is not None
            except NotReplicatedError:
                raise  # as campaign()
            except LockNotAcquiredError:
                continue  # a wait of MAX_MS ended: campaign on
            except LockLeaseLostError as loss:
                if not deposed or loss.key != self.key or loss.reason is LossReason.LOCK_CLOSED:
                    raise
                continue  # deposed while fn ran: campaign again
            return backend.returned(fn, result)

    def _hold(self, wait_ms: int, *, keep_body: bool) -> _Hold[Leadership]:
        """A campaign for this candidate: ``keep_body``, a loss cancels no task (a
        campaign's caller has no body; run_as_leader's has, as the options say)."""
        options: Any = {"wait_ms": wait_ms}
        hold: _Hold[Leadership] = _Hold(self._candidates, self.name, options)
        section: Any = hold._handle._section
        section.identity = self.identity
        return hold

    # -- watching ------------------------------------------------------------------------------

    def leader(self) -> Leader | None:
        """Who leads now, or None: one read-only script reading the key and the leader
        record together, which names only a candidate whose lease the key holds (never one
        that was not granted, nor one whose lease has ended)."""
        client = self.client
        return read_leader(wire.eval_script(client, *leader_call(self.key)))

    def observe(self, *, poll_ms: int = OBSERVE_POLL_MS) -> Iterator[Leader | None]:
        """Yield who leads now, then each change of leader (a new fence, or None once
        nobody leads), until the Election is closed or the caller stops iterating.

        With keyspace notifications on (``notify-keyspace-events`` with ``K`` and the
        classes ``g``, ``h`` and ``x``, e.g. ``Kghx``), a change is read as soon as Redis
        announces it (on the channels of the election's key and of its leader record);
        otherwise (or on a Cluster, or for a user not allowed those channels) within
        ``poll_ms`` of it, by reading again.  Every value yielded is a read of
        :meth:`leader`, never the notification's word."""
        period_ms = check_poll(poll_ms)
        candidates = self._candidates
        client = self.client
        pubsub = _subscribe(client, self.key)
        last: Leader | None = None
        first = True
        try:
            while not candidates._closed:
                try:
                    now = self.leader()
                except RedisError:
                    if candidates._closed:
                        break  # the close took the read's connection away: observe no more
                    raise
                if first or _changed(last, now):
                    first = False
                    last = now
                    yield now
                pubsub = _wait_for_news(pubsub, period_ms, candidates)
        finally:
            if pubsub is not None:
                _unsubscribe(pubsub)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the Election: a leadership held now is lost (its ``signal`` fires) and
        resigned, a campaign waiting now withdraws and raises
        :class:`~distlock.LockClosedError`, observers stop, and a client made from a URL
        is closed."""
        self._candidates.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _changed(last: Leader | None, now: Leader | None) -> bool:
    if last is None or now is None:
        return last is not now
    return (last.identity, last.fence) != (now.identity, now.fence)


def _subscribe(client: backend.Client, key: str) -> Any:
    """A pub/sub of the keyspace notifications of ``key`` and of its leader record, or
    None where there are none to have (a Cluster client, or a subscription refused).

    Both: a grant writes the record (``hset``), but a resignation with nobody in line, an
    expiry and an operator's deletion end the key's lease without touching the record,
    which lives on until its own TTL (only the key's ``del`` or ``expired`` says so)."""
    if isinstance(client, backend.RedisCluster):
        return None
    # A subscription holds its connection for good: taken from the client's pool, it would
    # leave a bounded pool a connection short (or empty) for the election's own calls.
    # So it is made from the pool's settings on a pool of its own, as a waiter's block is.
    shared = client.connection_pool
    kwargs = shared.connection_kwargs
    own = backend.ConnectionPool(
        connection_class=shared.connection_class, max_connections=1, **kwargs
    )
    pubsub = backend.Redis(connection_pool=own).pubsub(ignore_subscribe_messages=True)
    db = kwargs.get("db", 0)
    try:
        pubsub.subscribe(keyspace_channel(db, key), keyspace_channel(db, leader_key(key)))
    except RedisError:
        _unsubscribe(pubsub)
        return None
    return pubsub


def _unsubscribe(pubsub: Any) -> None:
    """Close a pub/sub of :func:`_subscribe`'s, and its own pool's connection."""
    try:
        pubsub.close()
    finally:
        pubsub.connection_pool.disconnect()


def _wait_for_news(pubsub: Any, period_ms: int, candidates: _Candidates) -> Any:
    """Wait for a notification, or ``period_ms``, or the Election's close (looked at every
    :data:`OBSERVE_CLOSE_CHECK_MS`); the pub/sub to wait on next time (None once it
    failed: the observer polls from then on)."""
    deadline = now_ms() + period_ms
    while not candidates._closed:
        left = deadline - now_ms()
        if left <= 0:
            break
        step = min(left, OBSERVE_CLOSE_CHECK_MS) / 1000.0
        if pubsub is None:
            backend.sleep(step)
            continue
        try:
            if pubsub.get_message(timeout=step) is not None:
                break
        except RedisError:
            _unsubscribe(pubsub)
            pubsub = None
    return pubsub
