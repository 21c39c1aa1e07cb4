"""How a key's waiting structures are named: written once, read by ``_protocol.queue_keys``
and written into the release script (``lua/release.lua`` makes a queue's wake-list prefix
from the queue's name, so that a release sends one argument fewer)."""

from __future__ import annotations

from typing import Final

#: A key's queue of waiters, its places, and its waiters' wake lists: each prefix, then the
#: kind's mark, the slot tag and the key (see ``_protocol.queue_keys``).
QUEUE_PREFIX: Final = "distlock:queue:"
PLACES_PREFIX: Final = "distlock:queued:"
WAKE_PREFIX: Final = "distlock:wake:"
