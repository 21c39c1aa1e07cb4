"""Option validation and defaults, shared by both drivers.

Everything here runs before a Redis command is sent, so a bad argument costs nothing and
loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypedDict

from distlock.errors import ValidationError
from distlock.events import Observer, TraceObserver

DEFAULT_PREFIX: Final = "lock"
#: A semaphore's keys are ``sem:<id>`` unless a prefix is given.
SEMAPHORE_PREFIX: Final = "sem"
DEFAULT_TTL_MS: Final = 30_000
DEFAULT_RETRIES: Final = 0
DEFAULT_RETRY_DELAY_MS: Final = 100
#: Fail fast: a caller that finds the lock held does not wait for it.
DEFAULT_WAIT_MS: Final = 0
#: Fraction of the TTL the client assumes its clock may run slow against Redis's.
DEFAULT_DRIFT_FACTOR: Final = 0.01
#: The longest TTL or retry delay accepted: 2**31 - 1 ms, about 24.8 days.  A TTL is how
#: long a crashed holder blocks everyone else, so anything near this is already a mistake;
#: the bound also keeps every timer the drivers arm within what the platform can wait.
MAX_MS: Final = 2**31 - 1
#: How long a grant or renewal waits for its replicas when ``replicas`` > 0.
DEFAULT_REPLICA_TIMEOUT_MS: Final = 100

RenewErrorHook = Callable[[BaseException], object]
Heartbeat = int | Literal[False] | None


def _positive_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def check_limit(limit: object) -> int:
    """A semaphore's limit: how many permits of one id may be held at once."""
    count = _positive_int(limit)
    if count is None:
        raise ValidationError(
            f"limit must be a positive int (how many permits of one id may be held at "
            f"once), got {type(limit).__name__}: {limit!r}"
        )
    if count > MAX_MS:
        raise ValidationError(f"limit must be at most {MAX_MS}, got {count}")
    return count


def _encodable(text: str, what: str) -> None:
    """A key is sent as UTF-8: a lone surrogate (``"a\\ud800"``, from a bad decode) would
    fail as the command is encoded, so it is refused before anything is sent."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            raise ValidationError(
                f"{what} must be encodable as UTF-8 (Redis keys are sent as UTF-8), got "
                f"{text!r}: {exc.reason} at position {exc.start}"
            ) from None


def check_id(id: object, what: str = "lock id") -> str:
    """``id`` if it can name a key under a prefix; ``what`` names it in the error."""
    if not isinstance(id, str):
        raise ValidationError(f"{what} must be a str, got {type(id).__name__}: {id!r}")
    if not id:
        raise ValidationError(f"{what} must be a non-empty str")
    _encodable(id, what)
    return id


#: The namespace of distlock's own keys (fence counters, release records, queues: see
#: :mod:`distlock._protocol`).
INTERNAL_PREFIX: Final = "distlock"


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise ValidationError(f"prefix must be a non-empty str, got {prefix!r}")
    _encodable(prefix, "prefix")
    return prefix


def check_lock_prefix(prefix: object) -> str:
    """A Lock's prefix: one whose keys cannot be distlock's own (``inspect`` may still
    read under ``distlock``: that is where it finds them)."""
    prefix = check_prefix(prefix)
    if prefix == INTERNAL_PREFIX or prefix.startswith(f"{INTERNAL_PREFIX}:"):
        raise ValidationError(
            f"prefix {prefix!r} would make lock keys under {INTERNAL_PREFIX}:, where distlock "
            "keeps its own keys (fence counters, release records, wait queues): a lock id "
            "such as 'fence:...' could then name one of them; use another prefix, such as "
            f"{DEFAULT_PREFIX!r} (the default) or your application's name"
        )
    return prefix


def check_ttl(ttl_ms: object, name: str = "ttl_ms") -> int:
    ttl = _positive_int(ttl_ms)
    if ttl is None:
        raise ValidationError(f"{name} must be a positive int of milliseconds, got {ttl_ms!r}")
    if ttl > MAX_MS:
        raise ValidationError(
            f"{name} must be at most {MAX_MS} ms (about 24.8 days), got {ttl}: a lock this "
            "long blocks everyone for that long if its holder dies; keep the TTL short and "
            "let the heartbeat renew it"
        )
    return ttl


def check_retries(retries: object) -> int:
    if retries == 0 and not isinstance(retries, bool | float):
        return 0
    count = _positive_int(retries)
    if count is None:
        raise ValidationError(f"retries must be an int >= 0 (0 fails fast), got {retries!r}")
    return count


def check_wait(wait_ms: object) -> int:
    if isinstance(wait_ms, int) and not isinstance(wait_ms, bool) and 0 <= wait_ms <= MAX_MS:
        return wait_ms
    raise ValidationError(
        f"wait_ms must be an int of milliseconds from 0 (fail fast) to {MAX_MS}, got {wait_ms!r}"
    )


def check_wait_or_retries(options: Mapping[str, object]) -> None:
    """Waiting and retrying are two answers to a held lock; given together at one level,
    neither could be honoured as asked."""
    if options.get("wait_ms") and options.get("retries"):
        raise ValidationError(
            "wait_ms and retries cannot both be non-zero at one level (both to the Lock, or "
            f"both to one call), got wait_ms={options['wait_ms']!r} and "
            f"retries={options['retries']!r}: wait_ms waits for the release in arrival "
            "order, retries spin; choose one"
        )


def check_delay(delay: object) -> float:
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not delay >= 0
        or delay > MAX_MS
    ):
        raise ValidationError(
            f"retry_delay_ms must be a number from 0 to {MAX_MS} ms, got {delay!r}"
        )
    return float(delay)


def check_heartbeat(heartbeat_ms: object, ttl_ms: int) -> Heartbeat:
    """``None`` (default ttl/4), ``False`` (no renewal) or an int in [1, ttl/2]."""
    if heartbeat_ms is None or heartbeat_ms is False:
        return heartbeat_ms
    beat = _positive_int(heartbeat_ms)
    if beat is None:
        raise ValidationError(
            "heartbeat_ms must be a positive int of milliseconds, False to disable renewal, "
            f"or None for ttl_ms // 4; got {heartbeat_ms!r}"
        )
    if beat * 2 > ttl_ms:
        raise ValidationError(
            f"heartbeat_ms must be at most half of ttl_ms ({ttl_ms}), got {beat}: "
            "above half, the first renewal can arrive at or after expiry"
        )
    return beat


def check_hook(hook: object) -> RenewErrorHook | None:
    if hook is None:
        return None
    if not callable(hook):
        raise ValidationError(f"on_renew_error must be callable or None, got {hook!r}")
    return hook


def check_drift(drift: object) -> float:
    if isinstance(drift, bool) or not isinstance(drift, int | float) or not 0 <= drift < 0.5:
        raise ValidationError(f"drift_factor must be a number in [0, 0.5), got {drift!r}")
    return float(drift)


def check_cancel(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"cancel_on_loss must be True or False, got {value!r}")
    return value


def check_cluster(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"cluster must be True or False, got {value!r}")
    return value


def check_replicas(value: object) -> int:
    if value == 0 and not isinstance(value, bool | float):
        return 0
    count = _positive_int(value)
    if count is None:
        raise ValidationError(
            f"replicas must be an int >= 0 (0: no WAIT for replicas), got {value!r}"
        )
    return count


def check_replica_timeout(value: object) -> int:
    return check_ttl(value, "replica_timeout_ms")


def check_replication(replicas: int, timeout_ms: int, ttl_ms: int) -> None:
    """A WAIT holds the reply for up to ``timeout_ms``, and the lease runs from the send:
    beyond half the TTL, waiting for replicas would eat the lease it protects."""
    if replicas and timeout_ms * 2 > ttl_ms:
        raise ValidationError(
            f"replica_timeout_ms must be at most half of ttl_ms ({ttl_ms}), got {timeout_ms}: "
            "the WAIT holds every grant and renewal reply that long at worst"
        )


def check_observers(observers: object) -> tuple[Observer, ...]:
    if isinstance(observers, str | bytes) or not isinstance(observers, Iterable):
        raise ValidationError(f"observers must be a sequence of callables, got {observers!r}")
    out = tuple(observers)
    for observer in out:
        if not callable(observer):
            raise ValidationError(f"each observer must be callable, got {observer!r}")
    return out


def check_trace(trace: object) -> TraceObserver | None:
    if trace is not None and not callable(trace):
        raise ValidationError(f"trace must be callable or None, got {trace!r}")
    return trace


# -- the options, declared once --------------------------------------------------------------
# Each option is one entry of OPTIONS: its name, type, default, validator and doc.  The rest
# is built from it or checked against it (``tests/test_options_declared.py``): the
# TypedDicts below (what mypy and IDEs show for ``**options``, so they must spell their keys
# out; their docs are made from OPTIONS), the fields and defaults of Options, the
# validators the drivers run, and the defaults of the core's SectionConfig.


@dataclass(frozen=True, slots=True)
class Option:
    """One option, declared once."""

    name: str
    #: What a caller passes (the TypedDicts' annotation).
    type: object
    #: The value when nobody gives one: the Lock's default, and the core's.
    default: object
    #: Validates a value before anything is sent, and returns it as kept.
    check: Callable[[object], object]
    #: One line for the TypedDicts' docs.
    doc: str
    #: The type it is kept as (Options' field), when not ``type``.
    kept_as: object = None
    #: The core's SectionConfig takes it under the same name.
    section: bool = False


OPTIONS: Final[dict[str, Option]] = {
    option.name: option
    for option in (
        Option(
            "ttl_ms",
            int,
            DEFAULT_TTL_MS,
            check_ttl,
            "Lease length in ms: the crash backstop and the renewal window (at most 2**31-1).",
            section=True,
        ),
        Option(
            "retries",
            int,
            DEFAULT_RETRIES,
            check_retries,
            "Extra attempts when the lock is held; 0 fails fast.",
            section=True,
        ),
        Option(
            "retry_delay_ms",
            float,
            float(DEFAULT_RETRY_DELAY_MS),
            check_delay,
            "Delay between attempts, in ms.",
            section=True,
        ),
        Option(
            "wait_ms",
            int,
            DEFAULT_WAIT_MS,
            check_wait,
            "How long to wait for a held lock, in ms, handed it by its release; 0 fails fast.",
            section=True,
        ),
        Option(
            "heartbeat_ms",
            Heartbeat,
            None,
            lambda value: check_heartbeat(value, MAX_MS),
            "Renewal interval in ms (at most ttl_ms / 2); None: ttl_ms // 4; False: no renewal.",
        ),
        Option(
            "on_renew_error",
            RenewErrorHook | None,
            None,
            check_hook,
            "Called with the exception of each failed renewal round trip (not a loss).",
        ),
        Option(
            "cancel_on_loss",
            bool,
            True,
            check_cancel,
            "asyncio only: cancel the body when the lease is lost.",
            section=True,
        ),
        Option(
            "prefix",
            str,
            DEFAULT_PREFIX,
            check_lock_prefix,
            "Key namespace: keys are ``<prefix>:<id>``.",
        ),
        Option(
            "drift_factor",
            float,
            DEFAULT_DRIFT_FACTOR,
            check_drift,
            "Fraction of the TTL the client clock may run slow against Redis's.",
            section=True,
        ),
        Option(
            "observers",
            Sequence[Observer],
            (),
            check_observers,
            "Receive typed lifecycle events (see :mod:`distlock.events`).",
            kept_as=tuple[Observer, ...],
            section=True,  # with on_renew_error's observer added under run/hold
        ),
        Option(
            "trace",
            TraceObserver | None,
            None,
            check_trace,
            "Receive every state-machine transition, in order (see :mod:`distlock.trace`).",
        ),
        Option(
            "cluster",
            bool,
            False,
            check_cluster,
            "With a URL client: make a ``RedisCluster`` from it instead of a ``Redis``.",
        ),
        Option(
            "replicas",
            int,
            0,
            check_replicas,
            "After each grant and renewal, ``WAIT`` for this many replicas to acknowledge it.",
            section=True,
        ),
        Option(
            "replica_timeout_ms",
            int,
            DEFAULT_REPLICA_TIMEOUT_MS,
            check_replica_timeout,
            "How long that ``WAIT`` may take, in ms (at most ttl_ms / 2).",
            section=True,
        ),
    )
}


def default_of(name: str) -> Any:
    """The declared default of option ``name`` (typed as its field is, by the caller)."""
    return OPTIONS[name].default


def _documented(cls: type, summary: str) -> None:
    """Give a TypedDict its doc: ``summary``, then one line per key it takes."""
    lines = [
        f"- ``{name}``: {OPTIONS[name].doc} Default: ``{OPTIONS[name].default!r}``."
        for name in cls.__annotations__
    ]
    cls.__doc__ = "\n".join([summary, "", *lines])


class AcquireOptions(TypedDict, total=False):
    ttl_ms: int
    retries: int
    retry_delay_ms: float
    wait_ms: int


class HoldOptions(AcquireOptions, total=False):
    heartbeat_ms: Heartbeat
    on_renew_error: RenewErrorHook | None


class AsyncHoldOptions(HoldOptions, total=False):
    cancel_on_loss: bool


class LockOptions(HoldOptions, total=False):
    prefix: str
    drift_factor: float
    observers: Sequence[Observer]
    trace: TraceObserver | None
    cluster: bool
    replicas: int
    replica_timeout_ms: int


class AsyncLockOptions(LockOptions, total=False):
    cancel_on_loss: bool


_documented(AcquireOptions, "Options of ``acquire`` (and of every call).")
_documented(HoldOptions, "Options of ``hold``/``run``/``hold_many``/``run_many``.")
_documented(AsyncHoldOptions, "Options of the asyncio ``hold``/``run``/``hold_many``/``run_many``.")
_documented(LockOptions, "Options of the ``Lock`` constructor: every call's defaults, and more.")
_documented(AsyncLockOptions, "Options of the asyncio ``Lock`` constructor.")


@dataclass(frozen=True, slots=True)
class Options:
    """A validated, complete set of options: the ``Lock``'s defaults or one call's."""

    ttl_ms: int
    retries: int
    retry_delay_ms: float
    wait_ms: int
    heartbeat_ms: Heartbeat
    on_renew_error: RenewErrorHook | None
    cancel_on_loss: bool
    drift_factor: float
    prefix: str
    observers: tuple[Observer, ...]
    trace: TraceObserver | None
    cluster: bool
    replicas: int
    replica_timeout_ms: int

    @property
    def renew_every_ms(self) -> int | None:
        """The renewal interval, or None when renewal is disabled."""
        if self.heartbeat_ms is False:
            return None
        if self.heartbeat_ms is None:
            return max(1, self.ttl_ms // 4)
        return self.heartbeat_ms

    def override(self, allowed: frozenset[str], options: Mapping[str, object]) -> Options:
        """These options with a call's ``options`` applied and validated together.

        ``allowed`` names what the call accepts; anything else is a TypeError, as for an
        unknown keyword.
        """
        if not options:
            return self  # validated when the Lock was made
        unknown = [name for name in options if name not in allowed]
        if unknown:
            raise TypeError(
                f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                f"accepted here: {', '.join(sorted(allowed))}"
            )
        changes = {name: _CHECKS[name](value) for name, value in options.items()}
        check_wait_or_retries(changes)
        if not WAITING_KEYS.isdisjoint(changes):
            # A call that says how to meet a held lock says it in full: what it leaves out
            # is the default, never the constructor's (``wait_ms=0`` on a Lock made with
            # ``retries=3`` fails fast, as it reads, instead of retrying).
            changes = {**_WAITING_DEFAULTS, **changes}
        merged = replace(self, **changes)  # type: ignore[arg-type]
        # A Lock-level explicit heartbeat must still fit a shorter per-call TTL.
        check_heartbeat(merged.heartbeat_ms, merged.ttl_ms)
        check_replication(merged.replicas, merged.replica_timeout_ms, merged.ttl_ms)
        return merged


_CHECKS: Final[dict[str, Callable[[object], object]]] = {
    name: option.check for name, option in OPTIONS.items()
}

#: The options that say how a call meets a held lock: a call naming any of them replaces
#: the constructor's three (see :meth:`Options.override`).
WAITING_KEYS: Final = frozenset({"wait_ms", "retries", "retry_delay_ms"})
_WAITING_DEFAULTS: Final[dict[str, object]] = {name: default_of(name) for name in WAITING_KEYS}

#: What each call accepts: the keys of its TypedDict.
ACQUIRE_KEYS: Final = frozenset(AcquireOptions.__optional_keys__)
HOLD_KEYS: Final = frozenset(HoldOptions.__optional_keys__)
ASYNC_HOLD_KEYS: Final = frozenset(AsyncHoldOptions.__optional_keys__)
LOCK_KEYS: Final = frozenset(LockOptions.__optional_keys__)
ASYNC_LOCK_KEYS: Final = frozenset(AsyncLockOptions.__optional_keys__)

#: The Lock's options when none are given: every option's declared default.  Options has
#: no defaults of its own, so an option missing from OPTIONS, or one OPTIONS has and it
#: lacks, fails here, at import.
DEFAULTS: Final = Options(**{name: default_of(name) for name in OPTIONS})
