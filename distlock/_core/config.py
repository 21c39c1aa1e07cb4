"""The terms a section runs under, the same for every section a Lock makes with one set
of options: validated once by :mod:`distlock.options` and shared, so that what is constant
per Lock costs a held lock nothing but the one reference."""

from __future__ import annotations

from distlock.options import default_of

__all__ = ["SectionConfig"]


class SectionConfig:
    """Everything a section needs to decide, already validated by :mod:`distlock.options`.

    The options it shares with the Lock take their defaults from there (``OPTIONS``, where
    each option is declared once); the rest (``watch``, the renewal interval, who observes)
    are the driver's to say.
    """

    __slots__ = (
        "cancel_on_loss",
        "drift_factor",
        "observed",
        "observers",
        "renew_every_ms",
        "replica_timeout_ms",
        "replicas",
        "retries",
        "retry_delay_ms",
        "ttl_ms",
        "wait_ms",
        "watch",
    )

    def __init__(
        self,
        ttl_ms: int,
        retries: int = default_of("retries"),
        retry_delay_ms: float = default_of("retry_delay_ms"),
        renew_every_ms: int | None = None,
        watch: bool = False,
        cancel_on_loss: bool = default_of("cancel_on_loss"),
        drift_factor: float = default_of("drift_factor"),
        observed: bool = False,
        replicas: int = default_of("replicas"),
        replica_timeout_ms: int = default_of("replica_timeout_ms"),
        wait_ms: int = default_of("wait_ms"),
        observers: tuple[object, ...] = default_of("observers"),
    ) -> None:
        self.ttl_ms = ttl_ms
        #: How long an acquisition may wait for a held key (0: fail fast).
        self.wait_ms = wait_ms
        self.retries = retries
        self.retry_delay_ms = retry_delay_ms
        #: Renewal interval while the body runs; None for a manual handle or heartbeat_ms=False.
        self.renew_every_ms = renew_every_ms if watch else None
        #: run/hold: watch the deadline in the background and fire the signal when it passes.
        self.watch = watch
        #: Cancel the body on a loss.  Only a watched body (run/hold) has one to cancel, as
        #: only it is renewed; a driver that cannot cancel its bodies (threads) says False.
        self.cancel_on_loss = cancel_on_loss and watch
        self.drift_factor = drift_factor
        #: Someone observes lifecycle events: make them (they cost nothing when off).
        self.observed = observed
        #: The driver's observers of these sections' events.  The core never calls them
        #: (it reads ``observed``); they are kept here, with the config they were made
        #: with, so that a held lock's handle carries no reference to them of its own.
        self.observers = observers
        #: Grants and renewals wait for this many replicas (0: they do not wait).
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
