"""What every fence guard checks before it touches anything: the fence, the resource, and
the name of its table."""

from __future__ import annotations

from typing import Protocol

from distlock.errors import ValidationError

#: The largest fence a guard accepts: PostgreSQL's ``bigint`` and SQLite's ``INTEGER``.
MAX_FENCE = 2**63 - 1


class HasFence(Protocol):
    """Anything with an int ``fence``: a ``LockHandle``, a ``ReentrantHandle``, or an object
    of the caller's that carries a fence it was handed."""

    @property
    def fence(self) -> int | None: ...


#: What a guard's ``admit`` takes as the fence: the int, or the handle that holds it.
Fence = int | HasFence


def check_fence(fence: object) -> int:
    """``fence`` as an int in ``0..2**63-1``, read from a handle if one is passed, or a
    :class:`ValidationError` that says what was wrong."""
    if not isinstance(fence, int):
        try:
            value = fence.fence  # type: ignore[attr-defined]
        except AttributeError as exc:
            if _is_permit(fence):
                raise ValidationError(
                    "a semaphore permit has no fence (several holders share the id at once, "
                    "so there is no order among them to check): pass the handle (or "
                    "handle.fence) of the Lock that protects this resource"
                ) from exc
            raise ValidationError(
                f"fence must be an int or a lock handle with a fence, not "
                f"{type(fence).__name__} ({exc}); pass the handle (or handle.fence) of the "
                "Lock that protects this resource"
            ) from exc
        if value is None:
            raise ValidationError(
                f"{type(fence).__name__} has no fence (None): only a lock that was granted "
                "carries one (a Lock's or ReentrantLock's handle; a semaphore permit never "
                "does), so pass the fence of the lock that protects this resource"
            )
        if not isinstance(value, int):
            raise ValidationError(
                f"{type(fence).__name__}.fence must be an int, not {type(value).__name__}"
            )
        fence = value
    if isinstance(fence, bool):
        raise ValidationError("fence must be an int, not a bool: pass handle.fence")
    if not 0 <= fence <= MAX_FENCE:
        raise ValidationError(
            f"fence {fence} is out of range: fences are 0..2**63-1 (what the lock issues, "
            "and what the guards' 64-bit column holds); pass handle.fence unchanged"
        )
    return fence


def _is_permit(handle: object) -> bool:
    """Whether ``handle`` is a semaphore's permit, of either driver (whose modules are
    imported only once a guard is refusing something that has no fence)."""
    from distlock._async.semaphore import PermitHandle as AsyncPermitHandle
    from distlock._sync.semaphore import PermitHandle

    return isinstance(handle, PermitHandle | AsyncPermitHandle)


def check_resource(resource: object) -> str:
    """``resource`` as a non-empty str with no NUL, or a :class:`ValidationError`."""
    if not isinstance(resource, str):
        raise ValidationError(
            f"resource must be a str naming what is protected, not {type(resource).__name__}"
        )
    if not resource:
        raise ValidationError("resource must be a non-empty str naming what is protected")
    if "\x00" in resource:
        raise ValidationError(f"resource {resource!r} contains a NUL character")
    return resource


def check_table(table: object, *, max_bytes: int | None = None) -> str:
    """A table name to quote (never to splice in bare), or a :class:`ValidationError`."""
    if not isinstance(table, str) or not table:
        raise ValidationError(f"table must be a non-empty str, not {table!r}")
    if "\x00" in table:
        raise ValidationError(f"table name {table!r} contains a NUL character")
    if max_bytes is not None and len(table.encode()) > max_bytes:
        raise ValidationError(
            f"table name {table!r} is longer than {max_bytes} bytes: the database would "
            "silently truncate it; choose a shorter name"
        )
    return table


def quote_ident(name: str) -> str:
    """``name`` as an SQL delimited identifier: in double quotes, each ``"`` doubled (what
    PostgreSQL's and SQLite's own quoting produce)."""
    return '"' + name.replace('"', '""') + '"'


def check_limit(limit: object) -> int:
    """``limit``, a positive int (how many rows a listing may return)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValidationError(f"limit must be a positive int, got {limit!r}")
    return limit
