"""``LockClosedError`` is public: what a closed primitive raises from every call, a
``LockError`` and a ``RuntimeError`` (what a closed Lock raised before).  The behaviour, on
both drivers, is in ``tests/drivers/_async/test_close.py``."""

from __future__ import annotations

import distlock
from distlock import LockClosedError, LockError


def test_closed_lock_error_is_exported() -> None:
    assert vars(distlock)["LockClosedError"] is LockClosedError
    assert "LockClosedError" in distlock.__all__
    assert issubclass(LockClosedError, LockError)
    assert issubclass(LockClosedError, RuntimeError)
