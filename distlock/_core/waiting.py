"""How long one acquisition may wait for a held key, and when it looks again.

A waiting acquisition is a run of attempts with blocks in between.  A refused attempt
leaves the waiter in the key's queue and says how long the refusal can last at most (the
holder's remaining TTL, or the remaining life of the queue's head when the key is free but
another waiter is first); the waiter then blocks until a release hands it the key (or
wakes it) or that time has passed, whichever is first, and never past its own deadline.
The attempt sent at or after the deadline is the last one: if refused, Redis removes the
waiter from the queue in the same script, so giving up costs no extra round trip.

A release may hand the key straight to the first waiter.  That waiter's lease counts from
its last attempt's send time (Redis set the TTL later, at the release), so a block also
ends half a TTL after it began at the latest: a key handed over during it still has half
its lease to run on the client's clock, where a block as long as the holder's TTL could
hand over a lease already spent.

A waiter can die while queued, and nobody can tell: so whatever a waiter leaves behind
ends soon, whatever the TTL.  A block lasts at most ``LONGEST_BLOCK_MS`` (each attempt
renews the waiter's place, which ends ``QUEUE_GRACE_MS`` after the block it was given),
and a key handed over lives ``HANDED_TTL_MS`` (or the waiter's TTL, if shorter) until
its new holder renews it, which a live one does at once.  A waiter that dies therefore
holds up the queue for at most ``HANDED_TTL_MS`` after its last attempt, and a waiter
pays one attempt per ``LONGEST_BLOCK_MS`` of waiting.  A section that is not renewed (a
manual handle, ``heartbeat_ms=False``) is never handed a key: it is woken, and takes the
key with its own attempt and its own TTL.

The instants are on the client's monotonic clock, like every other instant of the core.
"""

from __future__ import annotations

import math
from typing import Final

#: How long a waiter's place outlives the block it was given, in ms: room for the waiter's
#: next attempt to arrive (a woken waiter keeps its place; one that died loses it after
#: this).  It is also how often a waiter looks again at a key whose holder set no expiry.
QUEUE_GRACE_MS: Final = 2_000

#: The longest block, in ms: how often a waiter looks again (and renews its place) at
#: the latest, so that a dead waiter's place ends within this plus ``QUEUE_GRACE_MS`` of
#: its last attempt.  Also well under any socket timeout a client is likely to have.
LONGEST_BLOCK_MS: Final = 1_000

#: The TTL a release gives a key it hands to a waiter whose own TTL is longer, in ms: the
#: longest a key can idle when its waiter died; the live waiter's first renewal, sent at
#: once, gives it the waiter's own TTL.  Longer than a block and the grace, so that the
#: handed lease, counted from the waiter's last attempt, outlasts the block it was handed
#: in by the grace.
HANDED_TTL_MS: Final = LONGEST_BLOCK_MS + QUEUE_GRACE_MS


class Waiting:
    """The waiting part of one section: its deadline and its place in the queue."""

    __slots__ = ("block_until", "longest_block_ms", "queued", "sent_ms", "until", "wait_ms")

    def __init__(self, wait_ms: int, ttl_ms: int) -> None:
        self.wait_ms = wait_ms
        #: The longest block: half the lease a release may hand over during it, and never
        #: past ``LONGEST_BLOCK_MS``.
        self.longest_block_ms = max(1, min(ttl_ms // 2, LONGEST_BLOCK_MS))
        #: The deadline; set when the section (or its group) starts acquiring.
        self.until: float | None = None
        #: The end of the current block.
        self.block_until = 0.0
        #: What the last attempt asked Redis for: the ms left to wait (0: the last attempt).
        self.sent_ms = 0
        #: Redis may hold a place in the queue for us: a refused attempt left one, or an
        #: attempt's reply never came.  Whoever stops waiting while this is set withdraws.
        self.queued = False

    def hand_ms(self, ttl_ms: int) -> int:
        """The TTL a release may hand us the key with (see ``HANDED_TTL_MS``)."""
        return min(ttl_ms, HANDED_TTL_MS)

    def start(self, now: float) -> None:
        """The clock starts at the first attempt (of the section, or of its group)."""
        if self.until is None:
            self.until = now + self.wait_ms

    def attempt(self, now: float) -> int:
        """The ms this attempt may keep a place in the queue; 0 for the last attempt."""
        assert self.until is not None
        left = self.until - now
        self.sent_ms = math.ceil(left) if left > 0 else 0
        return self.sent_ms

    def refused(self, now: float, recheck_ms: int) -> bool:
        """The attempt was refused: True to block and try again, False to give up (the
        last attempt's script already took us out of the queue)."""
        assert self.until is not None
        if self.sent_ms == 0:
            self.queued = False
            return False
        self.queued = True
        block_ms = min(max(1, recheck_ms), self.longest_block_ms)
        self.block_until = min(self.until, now + block_ms)
        return True
