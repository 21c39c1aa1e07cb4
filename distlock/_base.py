"""What both drivers share: validated defaults, key naming and the birth of a section."""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar, cast

from distlock._core.group import acquisition_order
from distlock._core.section import Section, SectionConfig, Trace
from distlock.errors import ValidationError
from distlock.options import (
    DEFAULT_DRIFT_FACTOR,
    DEFAULT_PREFIX,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_DELAY_MS,
    DEFAULT_TTL_MS,
    Heartbeat,
    Options,
    RenewErrorHook,
    check_id,
    check_prefix,
    lock_defaults,
)

_labels = itertools.count(1)


ClientT = TypeVar("ClientT")
FactoryT = TypeVar("FactoryT", bound=Callable[[], object])


def split_client(
    client: ClientT | str | FactoryT,
    client_type: type[ClientT],
    from_url: Callable[[str], ClientT],
) -> tuple[ClientT | None, Callable[[], ClientT] | FactoryT]:
    """What a Lock was given: a ready client, a URL or a factory called on first use.

    Returns the client (None until it is made) and how to make it.  Anything that is not
    callable, or is a ``client_type``, counts as a ready client, so a duck-typed client
    with a ``__call__`` must subclass ``client_type``.
    """
    if isinstance(client, str):
        url = client
        return None, lambda: from_url(url)
    if isinstance(client, client_type) or not callable(client):
        ready = client
        return ready, lambda: ready
    return None, cast(FactoryT, client)


def now_ms() -> float:
    """The client clock both drivers and their flows read: monotonic, in milliseconds."""
    return time.monotonic() * 1000.0


class LockBase:
    """Defaults and naming for one lock namespace (``<prefix>:<id>`` keys)."""

    def __init__(
        self,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_ms: int = DEFAULT_TTL_MS,
        retries: int = DEFAULT_RETRIES,
        retry_delay_ms: float = DEFAULT_RETRY_DELAY_MS,
        heartbeat_ms: Heartbeat = None,
        on_renew_error: RenewErrorHook | None = None,
        drift_factor: float = DEFAULT_DRIFT_FACTOR,
        trace: Trace | None = None,
    ) -> None:
        self.prefix = check_prefix(prefix)
        self.defaults: Options = lock_defaults(
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
            drift_factor=drift_factor,
        )
        self._trace = trace
        self._label = f"L{next(_labels)}"
        self._sections = itertools.count(1)
        #: SectionConfigs of the default options, by (watch, cancel_on_loss).
        self._configs: dict[tuple[bool, bool], SectionConfig] = {}

    #: The clock the flows read (see :class:`distlock._flows.Effects`).
    now = staticmethod(now_ms)

    def key(self, id: str) -> str:
        """The Redis key of lock ``id``."""
        return f"{self.prefix}:{check_id(id)}"

    def _group_sections(
        self, ids: Sequence[str], opts: Options, *, cancel_on_loss: bool
    ) -> list[Section]:
        """Watched sections for ``ids``, in the group's acquisition order (sorted keys)."""
        if isinstance(ids, str):
            raise ValidationError("ids must be a sequence of lock ids, not one str")
        by_key = {self.key(id): id for id in ids}
        order = acquisition_order([self.key(id) for id in ids])
        return [
            self._section(by_key[key], opts, watch=True, cancel_on_loss=cancel_on_loss)
            for key in order
        ]

    def _section(self, id: str, opts: Options, *, watch: bool, cancel_on_loss: bool) -> Section:
        key = self.key(id)
        # Keyed by identity: hashing Options would hash all its fields on every call.
        cache_key = (watch, cancel_on_loss)
        config = self._configs.get(cache_key) if opts is self.defaults else None
        if config is None:
            config = SectionConfig(
                ttl_ms=opts.ttl_ms,
                retries=opts.retries,
                retry_delay_ms=opts.retry_delay_ms,
                renew_every_ms=opts.renew_every_ms if watch else None,
                watch=watch,
                cancel_on_loss=cancel_on_loss,
                drift_factor=opts.drift_factor,
                on_renew_error=opts.on_renew_error,
            )
            if opts is self.defaults:  # per-call options are not worth keeping
                self._configs[cache_key] = config
        return Section(
            key,
            secrets.token_hex(16),
            config,
            client=f"{self._label}.{next(self._sections)}",
            trace=self._trace,
        )


class HandleBase:
    """What a sync and an asyncio handle have in common: the section's identity."""

    __slots__ = ("section",)

    def __init__(self, section: Section) -> None:
        self.section = section

    @property
    def key(self) -> str:
        """The Redis key, ``<prefix>:<id>``."""
        return self.section.key

    @property
    def token(self) -> str:
        """128 random bits as 32 hex digits: the value stored under the key while we hold it."""
        return self.section.token

    @property
    def fence(self) -> int:
        """The fencing token: strictly larger for each new owner while Redis keeps its data.

        Pass it to the resource you protect and have the resource reject writes carrying a
        smaller fence than one it has already seen.
        """
        fence = self.section.fence
        if fence is None:
            raise AttributeError("this handle was never granted the lock, so it has no fence")
        return fence

    @property
    def held(self) -> bool:
        """Acquired, not yet released, and not known lost (as far as this client knows)."""
        return self.section.holding

    def __repr__(self) -> str:
        section = self.section
        return (
            f"<{type(self).__name__} {section.key!r} fence={section.fence} "
            f"phase={section.phase.value} lost={section.lost is not None}>"
        )


HandleT = TypeVar("HandleT", bound=HandleBase)


class GroupBase(Generic[HandleT]):
    """Several locks held together. ``group[id]`` is the handle of one of them.

    ``handles`` lists them in the order they were taken (sorted keys); they share one
    ``signal``, which aborts with the first loss among them.
    """

    __slots__ = ("_by_key", "_prefix", "handles")

    def __init__(self, prefix: str, handles: Sequence[HandleT]) -> None:
        self._prefix = prefix
        self.handles: tuple[HandleT, ...] = tuple(handles)
        self._by_key = {h.key: h for h in handles}

    def __getitem__(self, id: str) -> HandleT:
        try:
            return self._by_key[f"{self._prefix}:{id}"]
        except KeyError:
            raise KeyError(f"{id!r} is not one of this group's ids") from None

    def __iter__(self) -> Iterator[HandleT]:
        return iter(self.handles)

    def __len__(self) -> int:
        return len(self.handles)

    @property
    def keys(self) -> list[str]:
        return [h.key for h in self.handles]

    @property
    def fences(self) -> dict[str, int]:
        """Each key's fencing token."""
        return {h.key: h.fence for h in self.handles}

    @property
    def held(self) -> bool:
        return all(h.held for h in self.handles)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.keys} held={self.held}>"
