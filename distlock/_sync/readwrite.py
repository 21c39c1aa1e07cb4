# Generated from distlock/_async/readwrite.py by tools/unasync.py: do not edit.
"""The read-write lock: many readers of a key at once, or one writer."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar, Unpack, cast

from distlock._core.commands import Kind
from distlock._core.readwrite import ReadSection, WriteSection, reentry_refused
from distlock._holding import Holders
from distlock._operator import LockOwner, force_unlock_call
from distlock._protocol import readers_key
from distlock.options import AcquireOptions, HoldOptions, LockOptions

from . import backend, wire
from .handles import LockHandle, _Hold
from .primitive import Primitive

T = TypeVar("T")

#: A read-write lock's keys are ``rw:<id>`` unless a prefix is given.
READWRITE_PREFIX = "rw"


class RoleHandle(LockHandle):
    """A section of a :class:`ReadWriteLock`: a reader's (from ``.read``) or a writer's
    (from ``.write``).  As a :class:`LockHandle`: ``key``, ``token``, ``held``,
    ``signal``, ``extend``, ``release``, and a ``fence``: a writer's is new, larger than
    every fence issued before it on the key; a reader's is the newest a writer of the key
    could have had (readers share it), which a resource may use to refuse reads older
    than a write it has seen."""

    __slots__ = ()

    def release(self) -> bool:
        """Give the lease back; True only if it was still ours until now.  Cancellation-
        safe under asyncio, as :meth:`LockHandle.release`."""
        try:
            return super().release()
        finally:
            cast(_Side, self._lock)._forget(self)


class _Side(Primitive[RoleHandle]):
    """One role of a :class:`ReadWriteLock`: what ``.read`` and ``.write`` are."""

    _PRIMITIVE = "ReadWriteLock"  # what LockClosedError calls it

    _handle_type = RoleHandle
    #: The role whose sections this side makes.
    _role: ClassVar[Kind]

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        held: Holders[RoleHandle],
        options: LockOptions,
    ) -> None:
        super().__init__(client, **options)
        #: Who holds which key through the read-write lock, either role (shared).
        self._held = held
        #: The read-write lock this side is one of (set by it).
        self._whole: ReadWriteLock | None = None

    def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> RoleHandle | None:
        """Take this role's lease of ``id``, or return None (after any retries, or once
        ``wait_ms`` has passed without it), as :meth:`Lock.acquire`.  Not renewed in the
        background: :meth:`RoleHandle.extend` it if the work can outlive the TTL, and
        :meth:`RoleHandle.release` it when done.  Raises :class:`UpgradeError` (or
        :class:`ReentryError`) if the caller holds ``id`` through this read-write lock
        already, before anything is sent."""
        who = self._refuse_reentry(self.key(id))
        handle = self._acquire(id, options)
        if handle is not None and who is not None:
            self._held.add(who, handle.key, handle)
        return handle

    def hold(self, id: str, **options: Unpack[HoldOptions]) -> _RoleHold:
        """Hold this role's lease of ``id`` for a ``with`` block, renewed while the
        block runs, as :meth:`Lock.hold`: :class:`LockNotAcquiredError` if it cannot be
        had, :class:`LockLeaseLostError` on exit if it was not ours for the whole block."""
        return _RoleHold(self, id, options)

    def run(
        self,
        id: str,
        fn: Callable[[RoleHandle], T],
        **options: Unpack[HoldOptions],
    ) -> T:
        """Run ``fn(handle)`` holding this role's lease of ``id``; see :meth:`hold`."""
        backend.check_body(fn)
        with self.hold(id, **options) as handle:
            result = backend.awaitable(fn, fn(handle))
        return backend.returned(fn, result)

    def close(self) -> None:
        """Close the :class:`ReadWriteLock` this side is one of, both sides (they share
        one client and one record of who holds what): see :meth:`ReadWriteLock.close`."""
        whole = self._whole
        if whole is None:
            Primitive.close(self)
        else:
            whole.close()

    def force_unlock(self, id: str) -> bool:
        """For operators: end every lease of ``id``, the writer's and each reader's, and
        bump its slot's fence counter in the same step (as :meth:`Lock.force_unlock`);
        the first waiter is woken.  Returns whether anything was deleted."""
        key = self.key(id)
        call = force_unlock_call(key, readers_key(key))
        return bool(wire.eval_script(self.client, *call))

    # -- who holds what ------------------------------------------------------------------

    def _refuse_reentry(self, key: str) -> backend.Holder | None:
        """The caller, after refusing a second acquisition of ``key`` if it holds it."""
        self._check_open(key)
        who = backend.caller()
        if who is not None:
            held = self._held.get(who, key)
            if held is not None:
                if held._section.holding:
                    raise reentry_refused(key, held._section.kind, self._role)
                self._held.remove(who, key, held)
        return who

    def _forget(self, handle: RoleHandle) -> None:
        who = backend.caller()
        if who is not None:
            self._held.remove(who, handle.key, handle)


class ReadLock(_Side):
    """The readers' side of a :class:`ReadWriteLock` (its ``.read``): ``acquire``,
    ``hold`` and ``run``, as a :class:`Lock`'s.  Readers of a key share it; none is let
    in while a writer holds it, or while a writer waits for it ahead of the reader."""

    _section_type = ReadSection
    _role = Kind.READ

    def locked(self, id: str) -> bool:
        """Whether a writer holds ``id`` now (or another primitive holds its key): what
        keeps a reader out, but for a writer waiting ahead of it.  A snapshot (one
        read-only script), as :meth:`Lock.locked` is."""
        owner = self._owner(id)
        return owner is not None and (owner.kind != "read-write" or owner.token_prefix is not None)


class WriteLock(_Side):
    """The writers' side of a :class:`ReadWriteLock` (its ``.write``): ``acquire``,
    ``hold`` and ``run``, as a :class:`Lock`'s.  A writer holds its key alone: no reader
    and no other writer beside it.  Its handle's ``fence`` is larger than any fence issued
    before on the key."""

    _section_type = WriteSection
    _role = Kind.WRITE

    def locked(self, id: str) -> bool:
        """Whether anyone holds ``id`` now, a writer or a reader (or another primitive
        its key): what keeps a writer out, but for a waiter ahead of it.  A snapshot (one
        ``EXISTS``), as :meth:`Lock.locked` is."""
        return super().locked(id)


class _RoleHold(_Hold[RoleHandle]):
    """A :meth:`_Side.hold`: the reentry check at entry, the holder forgotten at exit."""

    __slots__ = ("_who",)

    def __init__(self, side: _Side, id: str, options: HoldOptions) -> None:
        super().__init__(side, id, options)
        self._who: backend.Holder | None = None

    def __enter__(self) -> RoleHandle:
        handle = self._handle
        side: Any = handle._lock
        who = side._refuse_reentry(handle.key)
        handle = super().__enter__()
        if who is not None:
            side._held.add(who, handle.key, handle)
            self._who = who
        return handle

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        handle = self._handle
        try:
            super().__exit__(et, ev, tb)
        finally:
            who = self._who
            if who is not None:
                self._who = None
                side: Any = handle._lock
                side._held.remove(who, handle.key, handle)


class ReadWriteLock:
    """A namespace of Redis read-write locks (keys ``<prefix>:<id>``, prefix ``"rw"`` by
    default): for each id, any number of readers at once, or one writer alone.

    ``.read`` and ``.write`` are lock-like (:class:`ReadLock`, :class:`WriteLock`):
    ``acquire(id)``, ``hold(id)`` and ``run(id, fn)`` as a :class:`Lock`'s, fail-fast by
    default, waiting with ``wait_ms``, retrying with ``retries``.  Each reader's lease is
    its own, renewed on its own and ending at its own TTL if its holder dies, whoever else
    renews; a writer's handle has a fence larger than any issued before it on the key.

    The waiting policy: arrival order (FIFO) in one queue of readers and writers, except
    that readers share: a reader is let in while no writer holds the key and no writer
    waits ahead of it, so once a writer queues, readers that come after it wait for it (a
    stream of readers cannot starve a writer), and the readers queued behind a writer are
    all let in when it is done.

    A read-write lock is not reentrant: a holder (the thread, or the asyncio task) that
    asks the same ``ReadWriteLock`` for a key it holds through it is refused before
    anything is sent, with :class:`UpgradeError` for a read asking for the write (two
    readers doing so would wait for each other for ever: release the read, take the
    write, and read again under it) and :class:`ReentryError` otherwise.  A ``Lock``, a
    ``ReentrantLock`` or a ``Semaphore`` on the same key is refused, and refuses this
    lock's sections, never a ``WRONGTYPE`` error.

    ``client`` and the options are a :class:`Lock`'s, shared by both sides (one client).

    >>> docs = ReadWriteLock("redis://127.0.0.1:6379/0", prefix="doc")  # doctest: +SKIP
    """

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        **options: Unpack[LockOptions],
    ) -> None:
        merged: LockOptions = {"prefix": READWRITE_PREFIX, **options}
        held: Holders[RoleHandle] = Holders()
        #: The writers' side; it owns the client when it was given as a URL.
        self.write = WriteLock(client, held, merged)
        #: The readers' side, on the writers' side's client.
        self.read = ReadLock(self._shared_client, held, merged)
        self.write._whole = self.read._whole = self
        self.prefix = self.write.prefix

    def _shared_client(self) -> backend.Client:
        # The readers' factory: called on their first command, so that a client made
        # from a URL is made once, by the writers' side, and only when first needed (a
        # bound property would make it here, in the sync driver).
        writers = self.write
        return writers.client

    @property
    def client(self) -> backend.Client:
        """The Redis client both sides use, created on first use when a URL or a factory
        was given."""
        writers = self.write
        return writers.client

    def key(self, id: str) -> str:
        """The Redis key of read-write lock ``id``."""
        return self.write.key(id)

    def owner(self, id: str) -> LockOwner | None:
        """Who holds ``id`` now, or None if nobody does: a read-only snapshot (one script).
        For a read-write lock's key, ``kind`` is ``"read-write"``, ``token_prefix`` and
        ``fence`` are the live writer's (None while no writer holds it) and ``readers``
        counts the live readers by Redis's clock; any other primitive's key is reported as
        :meth:`Lock.owner` reports it."""
        return self.write._owner(id)

    def close(self) -> None:
        """Close both sides, as :meth:`Lock.close`: open sections lose their lease (and
        are released), waiters withdraw, and a client made from a URL is closed."""
        try:
            Primitive.close(self.read)
        finally:
            Primitive.close(self.write)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
