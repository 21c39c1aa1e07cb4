"""A scenario's parameters: its name, the lock's TTL and kind, and what follows from them
(the key, the slack its checks allow, which trials are cooperative)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from distlock.tools.chaos.targets import Settings

#: Socket timeouts on every client: long against the TTLs used here (a hang is a hang for
#: the lease), short enough that a stuck call ends within the scenario.
SOCKET_TIMEOUT = 1.0
#: Upper bound for one trial's threads and tasks to finish.
TRIAL_TIMEOUT = 30.0
#: The trial of each scenario whose lock events (every Lock of the trial, the intruder's
#: too) are recorded and checked against the spec with TLC: one sample per scenario.
TRACED_TRIAL = 0
#: Retries of every section, victims and intruder alike: the spec has one Retries for all
#: the sections of a trace.  Denials only back off: no section gives up on contention.
RETRIES = 400


@dataclass
class Params:
    name: str
    ttl_ms: int
    settings: Settings
    #: Victims and intruder on a ReentrantLock; each victim's body re-enters the key and
    #: spends its time at depth 2 (the intruder holds its own key at depth 1).
    reentrant: bool = False
    #: Victims and intruder on a Semaphore of this many permits (None: on a lock).  The
    #: checks then allow up to ``limit`` bodies at once (see ``invariants.check``).
    limit: int | None = None
    #: Long victim bodies are cooperative in one trial out of this many, oblivious in the
    #: others (see :meth:`cooperative`).
    cooperative_every: int = 3
    #: The client names' prefix, and the keys' (one scenario's clients and keys are its own).
    tag: str = field(init=False)

    def __post_init__(self) -> None:
        self.tag = f"chaos-{uuid.uuid4().hex[:10]}"

    @property
    def prefix(self) -> str:
        return self.tag

    @property
    def key_id(self) -> str:
        return "res"

    @property
    def key(self) -> str:
        return f"{self.prefix}:{self.key_id}"

    @property
    def ttl(self) -> float:
        return self.ttl_ms / 1000.0

    @property
    def capacity(self) -> int:
        """How many sections may hold the key at once: the semaphore's limit, or 1."""
        return 1 if self.limit is None else self.limit

    def cooperative(self, trial: int) -> bool:
        """Whether ``trial``'s long bodies stop when their signal fires."""
        return trial % self.cooperative_every == self.cooperative_every - 1

    @property
    def slack_ms(self) -> float:
        return self.settings.slack_for(self.ttl_ms)

    @property
    def slack(self) -> float:
        return self.slack_ms / 1000.0

    def detection_window(self) -> float:
        """How long to keep a fault in place while waiting for a victim's signal."""
        return self.ttl + self.slack + 0.5
