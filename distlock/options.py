"""Option validation and defaults, shared by both drivers.

Everything here runs before a Redis command is sent, so a bad argument costs nothing and
loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from distlock.errors import ValidationError

DEFAULT_PREFIX: Final = "lock"
DEFAULT_TTL_MS: Final = 30_000
DEFAULT_RETRIES: Final = 0
DEFAULT_RETRY_DELAY_MS: Final = 100
#: Fraction of the TTL the client assumes its clock may run slow against Redis's.
DEFAULT_DRIFT_FACTOR: Final = 0.01
#: The longest TTL or retry delay accepted: 2**31 - 1 ms, about 24.8 days.  A TTL is how
#: long a crashed holder blocks everyone else, so anything near this is already a mistake;
#: the bound also keeps every timer the drivers arm within what the platform can wait.
MAX_MS: Final = 2**31 - 1

RenewErrorHook = Callable[[BaseException], object]
Heartbeat = int | Literal[False] | None


class Unset:
    """The type of :data:`UNSET`: an argument left to the Lock's default."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset()


def _positive_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def check_id(id: object) -> str:
    if not isinstance(id, str):
        raise ValidationError(f"lock id must be a str, got {type(id).__name__}: {id!r}")
    if not id:
        raise ValidationError("lock id must be a non-empty str")
    return id


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise ValidationError(f"prefix must be a non-empty str, got {prefix!r}")
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


@dataclass(frozen=True, slots=True)
class Options:
    """A validated, complete set of options: the ``Lock``'s defaults or one call's."""

    ttl_ms: int = DEFAULT_TTL_MS
    retries: int = DEFAULT_RETRIES
    retry_delay_ms: float = DEFAULT_RETRY_DELAY_MS
    heartbeat_ms: Heartbeat = None
    on_renew_error: RenewErrorHook | None = None
    drift_factor: float = DEFAULT_DRIFT_FACTOR

    @property
    def renew_every_ms(self) -> int | None:
        """The renewal interval, or None when renewal is disabled."""
        if self.heartbeat_ms is False:
            return None
        if self.heartbeat_ms is None:
            return max(1, self.ttl_ms // 4)
        return self.heartbeat_ms

    def override(
        self,
        *,
        ttl_ms: object = UNSET,
        retries: object = UNSET,
        retry_delay_ms: object = UNSET,
        heartbeat_ms: object = UNSET,
        on_renew_error: object = UNSET,
    ) -> Options:
        """These options with a call's arguments applied and validated together."""
        if (
            ttl_ms is UNSET
            and retries is UNSET
            and retry_delay_ms is UNSET
            and heartbeat_ms is UNSET
            and on_renew_error is UNSET
        ):
            return self  # validated when the Lock was made
        ttl = self.ttl_ms if ttl_ms is UNSET else check_ttl(ttl_ms)
        if heartbeat_ms is UNSET:
            # A Lock-level explicit heartbeat must still fit a shorter per-call TTL.
            heartbeat = check_heartbeat(self.heartbeat_ms, ttl)
        else:
            heartbeat = check_heartbeat(heartbeat_ms, ttl)
        return Options(
            ttl_ms=ttl,
            retries=self.retries if retries is UNSET else check_retries(retries),
            retry_delay_ms=(
                self.retry_delay_ms if retry_delay_ms is UNSET else check_delay(retry_delay_ms)
            ),
            heartbeat_ms=heartbeat,
            on_renew_error=(
                self.on_renew_error if on_renew_error is UNSET else check_hook(on_renew_error)
            ),
            drift_factor=self.drift_factor,
        )


def lock_defaults(
    *,
    ttl_ms: object,
    retries: object,
    retry_delay_ms: object,
    heartbeat_ms: object,
    on_renew_error: object,
    drift_factor: object,
) -> Options:
    ttl = check_ttl(ttl_ms)
    return Options(
        ttl_ms=ttl,
        retries=check_retries(retries),
        retry_delay_ms=check_delay(retry_delay_ms),
        heartbeat_ms=check_heartbeat(heartbeat_ms, ttl),
        on_renew_error=check_hook(on_renew_error),
        drift_factor=check_drift(drift_factor),
    )
