"""What the core needs from mypyc when it is compiled (the default build, see setup.py),
and a stand-in when it is not: the pure-Python package needs no mypy at run time.

Kept out of ``distlock._core`` so that it is never compiled itself: mypyc would take the
stand-in for unreachable code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:
    try:
        from mypy_extensions import mypyc_attr
    except ImportError:

        def mypyc_attr(*_args: object, **_kwargs: object) -> Any:
            return lambda cls: cls


__all__ = ["mypyc_attr"]
