"""The docstrings cross-reference in Sphinx's roles (``:class:`~distlock.Lock```), which
Python's own help and IDEs read as they are; mkdocstrings renders them as literal text.
This hook turns each into the code span it names, short form for ``~`` as Sphinx does."""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(
    r":(?:py:)?(?:class|meth|func|attr|mod|exc|data|obj|const):<code>(~?)([^<]*)</code>"
)


def _code(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if short else target}</code>"


def on_page_content(html: str, **_: Any) -> str:
    return ROLE.sub(_code, html)
