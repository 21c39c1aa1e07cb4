"""What the user-rules tests of both drivers share: the primitives' kinds, and a trace
recorder counting a Lock's transitions by action."""

from __future__ import annotations

from typing import Any

KINDS = ["lock", "reentrant", "semaphore"]
#: The primitives whose run takes a body, and "many": a Lock's run_many.
BODY_KINDS = [*KINDS, "many"]


class Recorder:
    """The trace of a Lock: every transition, by action."""

    def __init__(self) -> None:
        self.actions: list[str] = []

    def __call__(self, transition: dict[str, Any]) -> None:
        self.actions.append(transition["action"])

    def count(self, action: str) -> int:
        return self.actions.count(action)
