"""What a stateful test's examples reached, by name: a test asserts that every step it
means to check was taken at least once, so that a model rule no example reaches cannot
pass unnoticed."""

from __future__ import annotations

from collections import Counter


class Seen(Counter[str]):
    def saw(self, what: str) -> None:
        self[what] += 1
