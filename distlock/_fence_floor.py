"""The clock floor under every fence, the numbers the scripts' ``lib/fence.lua`` takes.

A fence comes from its Cluster slot's counter (``INCR``), but never below
``(Redis's TIME in ms - FENCE_EPOCH_MS) * FENCES_PER_MS``: a grant that finds the counter
below that floor sets it there.  A fence granted at Redis time ``t`` (ms) is then below
``floor_at(t + 1)`` as long as Redis grants fewer than ``FENCES_PER_MS`` fences per ms of
its clock, so when Redis loses the counter (a restart without persistence, a failover to a
replica that missed the last grants, an ``allkeys-*`` eviction) the next grant is still
larger than every earlier one, provided Redis's clock then reads a later ms than
:func:`issued_ms` of the last fence granted before the loss.

Every value stays below 2**53: Redis hands a script's Lua an integer reply as a double,
exact only up to 2**53, and turns the script's number back into an integer reply.  With
2**11 fences per ms that leaves 2**42 ms after the epoch: until the year 2159.
"""

from __future__ import annotations

from typing import Final

#: 2020-01-01T00:00:00Z in ms since the Unix epoch: the fences' clock starts there.
FENCE_EPOCH_MS: Final = 1_577_836_800_000
#: log2 of the fences one ms of Redis's clock makes room for.
FENCE_BITS: Final = 11
#: Fences per ms of Redis's clock (2,048: the fence step alone, pipelined into one Redis,
#: peaked near 150 per ms when measured).
FENCES_PER_MS: Final = 1 << FENCE_BITS
#: Floors stay exact in Lua (below 2**53) until this Unix ms (in the year 2159).
FLOOR_EXACT_UNTIL_MS: Final = FENCE_EPOCH_MS + (1 << (53 - FENCE_BITS))


def floor_at(unix_ms: int) -> int:
    """The least fence a grant at Redis time ``unix_ms`` (ms since the Unix epoch) gives."""
    return (unix_ms - FENCE_EPOCH_MS) << FENCE_BITS


def issued_ms(fence: int) -> int:
    """The Redis time (Unix ms) ``fence`` stands for: the ms of its grant, or a later one if
    Redis granted more than :data:`FENCES_PER_MS` fences per ms before it.  After Redis
    loses its counter, the fences keep increasing if Redis's clock reads a later ms than
    this for the last fence granted before the loss."""
    return FENCE_EPOCH_MS + (fence >> FENCE_BITS)
