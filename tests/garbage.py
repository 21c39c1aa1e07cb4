"""What the tests use to check that distlock leaves nothing for the cycle collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_saves_all() -> Iterator[list[str]]:
    """Within the block, the cycle collector runs only when asked and keeps what it finds.
    On exit, after a last collection, the list given holds the sorted names of the types of
    distlock's objects it found: those that only the cycle collector would have freed."""
    found: list[str] = []
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.extend(sorted({
            type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("distlock")
        }))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
