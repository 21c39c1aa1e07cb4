"""What both drivers share: validated defaults, key naming, the birth of sections and
groups, the closed check, and the delivery of events to observers."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar, cast

from distlock._clock import now_ms
from distlock._core.commands import Command, Op
from distlock._core.group import Group, acquisition_order
from distlock._core.reentrant import ReentrantSection
from distlock._core.section import Section, SectionConfig, lock_section
from distlock._core.semaphore import SemaphoreSection
from distlock._mypyc import mypyc_attr
from distlock._scheduler import Timers
from distlock.errors import LockClosedError, ValidationError
from distlock.events import Event, Lost, Observer, RenewFailed, Transition
from distlock.options import (
    DEFAULTS,
    SEMAPHORE_PREFIX,
    Options,
    RenewErrorHook,
    check_id,
    check_limit,
)

if TYPE_CHECKING:
    from distlock._direct import Route

log = logging.getLogger("distlock")

_labels = itertools.count(1)
#: How many sets of per-call options a Lock keeps validated (see ``LockBase._options``): a
#: service passes a few (a TTL here, a wait there); past this many, the kept ones are
#: dropped and kept afresh.
KEPT_OPTIONS: Final = 64
#: The types of per-call values kept by value: every option but ``on_renew_error``, whose
#: hook is validated on each call instead (a hook's equality is its own to define).
_PLAIN: Final = frozenset({int, float, bool, type(None)})

ClientT = TypeVar("ClientT")


_URL_SCHEMES: Final = ("redis://", "rediss://", "unix://")


def split_client(
    client: object,
    accepted: tuple[type[ClientT], ...],
    from_url: Callable[[str], ClientT],
    *,
    driver: str,
    other: tuple[type, ...],
    other_driver: str,
) -> tuple[ClientT | None, Callable[[], Any]]:
    """What a Lock was given: a ready client, a URL or a factory called on first use.

    Returns the client (None until it is made) and how to make it.  Anything else is a
    ValidationError now, naming what was expected, rather than a TypeError at first use.
    """
    names = " or ".join(f"{t.__module__}.{t.__name__}" for t in accepted)
    if isinstance(client, str):
        if not client.startswith(_URL_SCHEMES):
            raise ValidationError(
                f"a client URL must start with {', '.join(_URL_SCHEMES)}; got {client!r}"
            )
        url = client
        return None, lambda: from_url(url)
    if isinstance(client, accepted):
        ready = client
        return ready, lambda: ready
    if isinstance(client, other):
        raise ValidationError(
            f"{type(client).__module__}.{type(client).__name__} is a client for "
            f"{other_driver}: use it with {other_driver}'s Lock, or give {driver}'s Lock a "
            f"{names}"
        )
    if callable(client) and not isinstance(client, type):
        return None, client
    raise ValidationError(
        f"client must be a {names}, a redis:// URL, or a zero-argument function returning "
        f"one; got {type(client).__name__}: {client!r:.80}"
    )


def check_cluster_client(client: object, cluster: bool, cluster_type: type) -> None:
    """``cluster=True`` says what the URL is; a ready client already says what it is, and
    one that contradicts it is a mistake to report now, not a CROSSSLOT error later."""
    if cluster and client is not None and not isinstance(client, cluster_type):
        raise ValidationError(
            f"cluster=True needs a {cluster_type.__module__}.{cluster_type.__name__} (or a "
            f"URL, from which the Lock makes one); got {type(client).__name__}"
        )


#: The shortest BLPOP: its timeout 0 would mean "for ever".
_MIN_BLOCK_S: Final = 0.001


def socket_timeout_of(client: object, conn: object = None) -> object:
    """The read timeout ``client``'s connections use: the connection's own, when the block
    goes out on one we hold (redis-py 8 gives a client made ``from_url`` a timeout its
    pool's settings do not show); else a plain client's pool keeps it; a Cluster client
    keeps it for its nodes (``nodes_manager`` in sync redis-py, on the client itself in
    asyncio).  None when unknown: a block is then cut only by ``LONGEST_BLOCK_MS``."""
    timeout = getattr(conn, "socket_timeout", None)
    if isinstance(timeout, int | float):
        return timeout
    for owner in (
        getattr(client, "connection_pool", None),
        getattr(client, "nodes_manager", None),
        client,
    ):
        kwargs = getattr(owner, "connection_kwargs", None)
        if isinstance(kwargs, dict) and "socket_timeout" in kwargs:
            return kwargs["socket_timeout"]
    return None


def block_seconds(until_ms: float, socket_timeout: object) -> float:
    """BLPOP's timeout for a block until ``until_ms``: never 0 (which blocks for ever), and
    within half the client's socket timeout, so a block is not mistaken for a hung
    connection (a block cut short only costs one more attempt)."""
    seconds = max(_MIN_BLOCK_S, (until_ms - now_ms()) / 1000.0)
    if isinstance(socket_timeout, int | float) and socket_timeout > 0:
        seconds = min(seconds, max(_MIN_BLOCK_S, socket_timeout / 2))
    return round(seconds, 3)


def wake_value(reply: object) -> int:
    """What a ``BLPOP`` on a wake list answered, as a block's result: the fence of a key a
    release handed us (``=fence``: we hold it), -1 for a wake-up (look again), 0 when the
    block's time ran out (nil)."""
    if reply is None:
        return 0
    element: Any = reply[1]  # type: ignore[index]  # [list, element]
    if isinstance(element, str):
        element = element.encode()
    if element[:1] == b"=":
        return int(element[1:])
    return -1


def rides_on_waiter_connection(route: Route, client: object, request: object) -> bool:
    """Whether the attempt a wake-up leads to may go out on the connection its waiter
    blocked on, straight after the ``BLPOP`` reply, instead of through the pool and the
    client's command wrapper (the woken waiter's next round trip is the handoff's).

    Only a plain acquire: a replica wait has its own sending.  Only where any command may
    be sent directly (:mod:`distlock._direct`): a client that wraps ``execute_command`` (to
    record the scripts it sends, or to inject a fault) sees every attempt.
    """
    return (
        isinstance(request, Command)
        and request.op is Op.ACQUIRE
        and not request.replicas
        and route.direct(client)
    )


def _error_text(error: BaseException | None) -> str:
    """``Type: message``: the class says what kind of failure, the message which one (a
    repr hides neither, but puts the message in quotes and escapes)."""
    if error is None:
        return "no error given"
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _log_failure(handle: HandleBase, event: Lost | RenewFailed) -> None:
    """The happy path logs nothing; a failed renewal is a warning, a loss an error.  The
    message names the primitive: a lost permit is not a lost lock to whoever reads it."""
    extra = {"distlock_key": event.key, "distlock_token": handle.token[:8]}
    section = handle._section
    if isinstance(event, RenewFailed):
        what = "a permit of semaphore " if isinstance(section, SemaphoreSection) else ""
        log.warning(
            "distlock: renewal of %s%r failed (%d in a row): %s; the next heartbeat retries",
            what, event.key, event.failures, _error_text(event.error), extra=extra,
        )
    else:
        if isinstance(section, SemaphoreSection):
            what = "semaphore %r: permit lost"
        elif isinstance(section, ReentrantSection):
            what = "reentrant lock %r lost"
        else:
            what = "lock %r lost"
        log.error(
            "distlock: " + what + " (%s), %.0f ms after the last confirmed send",
            event.key, event.reason.name, event.detection_delay_ms, extra=extra,
        )


class RenewErrorObserver:
    """``on_renew_error`` as an observer: called with each failed renewal's exception."""

    __slots__ = ("hook",)

    def __init__(self, hook: RenewErrorHook) -> None:
        self.hook = hook

    def __call__(self, event: Event) -> None:
        if isinstance(event, RenewFailed) and isinstance(event.error, Exception):
            self.hook(event.error)


# Compiled, the base classes stay open to the drivers' classes, which are not compiled.
@mypyc_attr(allow_interpreted_subclasses=True)
class HandleBase:
    """What a sync and an asyncio handle of any primitive have in common: the section and
    its group.  No fence: a lock's handle adds it (a semaphore's permit has none)."""

    __slots__ = ("_armed_at", "_machine", "_section")

    def __init__(self, section: Section, machine: Group) -> None:
        self._section = section
        self._machine = machine
        #: The wake-up instant the handle's timer is armed for (None: not armed).
        self._armed_at: float | None = None

    @property
    def _observers(self) -> tuple[Observer, ...]:
        # Kept with the section's config (made together, by LockBase._config).
        return cast("tuple[Observer, ...]", self._section.config.observers)

    @property
    def key(self) -> str:
        """The Redis key, ``<prefix>:<id>``."""
        return self._section.key

    @property
    def token(self) -> str:
        """128 random bits as 32 hex digits: the value stored under the key while we hold it."""
        return self._section.token

    @property
    def held(self) -> bool:
        """Acquired, not yet released, and not known lost (as far as this client knows)."""
        return self._section.holding

    def _repr_fence(self) -> str:
        """What the repr says of the fence: nothing, for a handle that has none."""
        return ""

    def __repr__(self) -> str:
        section = self._section
        return (
            f"<{type(self).__name__} {section.key!r}{self._repr_fence()} "
            f"phase={section.phase.value} lost={section.lost is not None}>"
        )


HandleT = TypeVar("HandleT", bound=HandleBase)


def _token() -> int:
    """128 random bits (what secrets.token_hex(16) draws, as a number)."""
    return int.from_bytes(os.urandom(16), "big")


@mypyc_attr(allow_interpreted_subclasses=True)
class LockBase:
    """Defaults and naming for one lock namespace (``<prefix>:<id>`` keys)."""

    #: The machine of each acquisition: a lock's section, a reentrant one, or a permit's
    #: (:meth:`_new_section` makes it).
    #: A class variable, not an instance field: compiled, an instance field would keep this
    #: default whatever a subclass sets, and a ReentrantLock would make a plain Section.
    _section_type: ClassVar[type[Section]] = Section

    def __init__(self, allowed: frozenset[str], options: Mapping[str, object]) -> None:
        self.defaults: Options = DEFAULTS.override(allowed, options)
        self.prefix = self.defaults.prefix
        self._trace = self.defaults.trace
        self._label = f"L{next(_labels)}"
        self._sections = itertools.count(1)
        self._closed = False
        #: The config of the default options, by (watch, cancel_on_loss).
        self._made: dict[tuple[bool, bool], SectionConfig] = {}
        #: Per-call options, validated, by the call's keywords (see :meth:`_options`).
        self._kept: dict[tuple[object, ...], Options] = {}
        #: The configs of each kept Options, by its id, with the Options itself: while its
        #: entry lives, no other Options can have its id.
        self._kept_made: dict[int, tuple[Options, dict[tuple[bool, bool], SectionConfig]]] = {}

    #: The clock the flows read (see :class:`distlock._flows.Effects`).
    _now = staticmethod(now_ms)
    #: The driver's timers, where its handles' wake-ups are armed (see :meth:`_arm`).
    _timers: Timers

    def _arm(self, handle: HandleBase) -> None:
        """Arm ``handle``'s timer for its section's wake-up, or disarm it when there is
        none or the Lock is closed (see :class:`distlock._flows.Effects`)."""
        wake_at = handle._section.wake_at
        if wake_at is not None and not self._closed:
            # Arming again leaves the entry at the old instant dead where it is.  The
            # timers keep their own float of the new instant in _armed_at, one that the
            # handles due with this one share: the section's own (equal) one is dropped.
            self._timers.arm(wake_at, handle)
        else:
            self._timers.disarm(handle)

    def _key(self, id: object) -> str:
        """The Redis key of lock ``id``, which is checked here (the public ``key`` is the
        drivers': compiled, a parameter typed ``str`` would turn a wrong id into a
        TypeError before this check could say what is wrong with it)."""
        return f"{self.prefix}:{check_id(id)}"

    def _check_open(self, key: str | None = None) -> None:
        """The one place that refuses new work on a closed Lock."""
        if self._closed:
            raise self._closed_error(key)

    def _closed_error(self, key: str | None) -> LockClosedError:
        """What a caller of this closed Lock sees, naming the public class it used (an
        interpreted subclass says which in ``_PRIMITIVE``)."""
        return LockClosedError(key, getattr(type(self), "_PRIMITIVE", "Lock"))

    # -- sections and groups ----------------------------------------------------------------

    def _options(self, allowed: frozenset[str], options: Mapping[str, object]) -> Options:
        """The defaults with one call's ``options`` applied and validated.

        A call without options (the common case) gets the defaults.  A call whose values
        are all numbers, booleans or None gets the Options validated when the same
        keywords first came, and the configs made from them since: a service that passes
        ``ttl_ms=`` on every call would otherwise pay for a validation and a config on
        every lock cycle.  Values are told apart by type as well as by value (``retries=True``
        is refused, ``retries=1`` is not), and only options that passed are kept.
        """
        if not options:
            return self.defaults
        key: list[object] = [allowed]
        for name, value in options.items():
            if value.__class__ not in _PLAIN:
                return self.defaults.override(allowed, options)
            key += (name, value.__class__, value)
        kept_key = tuple(key)
        opts = self._kept.get(kept_key)
        if opts is None:
            opts = self.defaults.override(allowed, options)  # raises before anything is kept
            if len(self._kept) >= KEPT_OPTIONS:
                self._kept, self._kept_made = {}, {}
            self._kept_made[id(opts)] = (opts, {})
            self._kept[kept_key] = opts
        return opts

    def _config(
        self, opts: Options, *, watch: bool, cancel_on_loss: bool
    ) -> SectionConfig:
        cache_key = (watch, cancel_on_loss)
        if opts is self.defaults:
            made_for: dict[tuple[bool, bool], SectionConfig] | None = self._made
        else:
            kept = self._kept_made.get(id(opts))
            made_for = kept[1] if kept is not None and kept[0] is opts else None
        made = made_for.get(cache_key) if made_for is not None else None
        if made is None:
            observers = opts.observers
            if watch and opts.on_renew_error is not None:
                observers = (*observers, RenewErrorObserver(opts.on_renew_error))
            config = SectionConfig(
                ttl_ms=opts.ttl_ms,
                retries=opts.retries,
                retry_delay_ms=opts.retry_delay_ms,
                renew_every_ms=opts.renew_every_ms if watch else None,
                watch=watch,
                cancel_on_loss=cancel_on_loss,
                drift_factor=opts.drift_factor,
                observed=bool(observers),
                observers=observers,
                replicas=opts.replicas,
                replica_timeout_ms=opts.replica_timeout_ms,
                wait_ms=opts.wait_ms,
            )
            made = config
            # Keyed by identity: hashing Options would hash all its fields on every call.
            if made_for is not None:
                made_for[cache_key] = made
        return made

    def _sections_for(
        self, ids: Sequence[object], opts: Options, *, watch: bool, cancel_on_loss: bool
    ) -> tuple[Group, tuple[Section, ...]]:
        """Fresh sections for ``ids`` in acquisition order, and the group that holds them."""
        config = self._config(opts, watch=watch, cancel_on_loss=cancel_on_loss)
        record = self._trace is not None
        new_section, named = self._new_section, record or config.observed
        # A section's name (``client`` in its events) tells it apart in a trace and to
        # observers; when nobody records or observes, no event of it leaves the Lock, so
        # the Lock's own label serves and a held lock carries no string of its own.
        label = self._label
        # The token: 128 random bits, kept as an int; on the wire, 32 hex digits (Section.token).
        if len(ids) == 1:  # one hold(): no ordering, no list of keys
            key = self._key(ids[0])
            if self._closed:  # tested here first: every lock cycle passes
                self._check_open(key)
            if named:
                label = f"{label}.{next(self._sections)}"
            sections: tuple[Section, ...] = (
                new_section(key, _token(), config, label, record),
            )
        else:
            keys = acquisition_order([self._key(id) for id in ids])
            self._check_open(None)
            serial = self._sections
            sections = tuple(
                new_section(
                    key, _token(), config,
                    f"{label}.{next(serial)}" if named else label, record,
                )
                for key in keys
            )
        return Group(sections), sections

    def _new_section(
        self, key: str, token: int, config: SectionConfig, client: str, record: bool
    ) -> Section:
        section_type = self._section_type
        if section_type is Section:  # a Lock's: the compiled build makes it without a parse
            return lock_section(key, token, config, client, record)
        return section_type(key, token, config, client=client, record=record)

    @staticmethod
    def _group_ids(ids: Sequence[str]) -> Sequence[str]:
        if isinstance(ids, str):
            raise ValidationError("ids must be a sequence of lock ids, not one str")
        if not ids:
            raise ValidationError("a group needs at least one lock id")
        return ids

    # -- events ----------------------------------------------------------------------------

    def _record(self, events: list[Transition | Event]) -> None:
        """Transitions to ``trace``, in the order they happened (under the section's guard)."""
        trace = self._trace
        if trace is not None:
            for event in events:
                if isinstance(event, Transition):
                    trace(event.as_dict())

    def _notify(self, handle: HandleBase, events: list[Transition | Event]) -> None:
        """Lifecycle events to the log and the handle's observers (outside any guard)."""
        for event in events:
            if isinstance(event, Transition):
                continue
            if isinstance(event, Lost | RenewFailed):
                _log_failure(handle, event)
            for observer in handle._observers:
                try:
                    observer(event)
                except Exception:
                    # An observer's bug must not cost anyone a lease: log it and go on.
                    log.exception("distlock observer %r failed on %r", observer, event)


@mypyc_attr(allow_interpreted_subclasses=True)
class SemaphoreBase(LockBase):
    """What a sync and an asyncio ``Semaphore`` add to a lock namespace: the limit, given
    to every permit's section (the driver's ``Primitive`` does the rest)."""

    _section_type = SemaphoreSection
    #: How many permits of one id this semaphore's acquires allow to be live at once.
    limit: int

    def _new_section(
        self, key: str, token: int, config: SectionConfig, client: str, record: bool
    ) -> Section:
        return SemaphoreSection(key, token, config, limit=self.limit, client=client, record=record)


def semaphore_options(limit: object, options: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """A semaphore's limit, validated before anything else happens, and its constructor
    options with the semaphore's own default prefix."""
    return check_limit(limit), {"prefix": SEMAPHORE_PREFIX, **options}
