"""Several locks held together: the decisions that concern a group, not one section.

Locks taken one after another can deadlock when two callers take the same keys in
different orders (each holds one and waits for the other).  A group is therefore always
taken in one global order, the sorted Redis keys, whatever order the caller named them
in, and released in the reverse order.  ``spec/MultiLock.tla`` shows the difference: TLC
finds the deadlock when callers take keys in their own order, and none in sorted order.
"""

from __future__ import annotations

from collections.abc import Sequence

from distlock.errors import ValidationError


def acquisition_order(keys: Sequence[str]) -> list[str]:
    """The order a group's keys are taken in: sorted, so every caller agrees on it."""
    if not keys:
        raise ValidationError("a group needs at least one lock id")
    if len(set(keys)) != len(keys):
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        raise ValidationError(f"lock ids in a group must be distinct; repeated: {dupes}")
    return sorted(keys)
