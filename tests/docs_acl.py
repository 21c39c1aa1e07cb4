"""The restricted Redis users docs/acl.md documents, read from the page itself, so that the
tests that run the primitives under them test what the page says."""

from __future__ import annotations

import re
from pathlib import Path

ACL_PAGE = Path(__file__).resolve().parent.parent / "docs" / "acl.md"


def documented_acls() -> dict[str, list[str]]:
    """Each ``ACL SETUSER <user> <rules...>`` line of the page: user -> its rules."""
    found: dict[str, list[str]] = {}
    for line in ACL_PAGE.read_text(encoding="utf-8").splitlines():
        m = re.match(r"ACL SETUSER (\S+) (.*)", line)
        if m is not None:
            assert m.group(1) not in found, f"{m.group(1)} is documented twice"
            found[m.group(1)] = m.group(2).split()
    return found


def documented_acl(user: str) -> list[str]:
    """The rules docs/acl.md gives ``user``, exactly as written there."""
    return documented_acls()[user]
