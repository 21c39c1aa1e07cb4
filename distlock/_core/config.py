"""The terms a section runs under, the same for every section a Lock makes with one set
of options: validated once by :mod:`distlock.options` and shared, so that what is constant
per Lock costs a held lock nothing but the one reference."""

from __future__ import annotations

__all__ = ["SectionConfig"]


class SectionConfig:
    """Everything a section needs to decide, already validated by :mod:`distlock.options`."""

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
        retries: int = 0,
        retry_delay_ms: float = 100.0,
        renew_every_ms: int | None = None,
        watch: bool = False,
        cancel_on_loss: bool = False,
        drift_factor: float = 0.01,
        observed: bool = False,
        replicas: int = 0,
        replica_timeout_ms: int = 0,
        wait_ms: int = 0,
        observers: tuple[object, ...] = (),
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
        self.cancel_on_loss = cancel_on_loss
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

    def lease_ms(self, ttl_ms: int) -> float:
        """How long the client may trust a lease of ``ttl_ms`` granted at the send time."""
        return ttl_ms * (1.0 - self.drift_factor)
