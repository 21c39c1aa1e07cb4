"""``mypyc_attr`` for the modules the compiled build compiles, without mypy_extensions
installed at run time: mypyc reads the decorator from mypy_extensions (the import the type
checker sees), and a program running distlock finds a decorator here that changes nothing.
This module itself is never compiled (distlock/_build.py), so the branch below runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:

    def mypyc_attr(*_: Any, **__: Any) -> Any:
        return lambda cls: cls
