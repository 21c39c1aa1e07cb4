"""Driving the pure core by hand in tests: a section that hands its transitions to a
callable as it takes them (what a driver does by draining the outbox), and the op of a
step's command."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distlock._core.actions import CLIENT_ACTIONS, method_name
from distlock._core.commands import Op, Step
from distlock._core.section import Section, SectionConfig
from distlock.events import Transition

Trace = Callable[[dict[str, Any]], None]


class TracedSection(Section):
    """A :class:`Section` whose every action drains its outbox into ``trace``."""

    __slots__ = ("_sink",)

    def __init__(
        self, key: str, token: str, config: SectionConfig, *, client: str = "c",
        trace: Trace | None = None,
    ) -> None:
        super().__init__(key, token, config, client=client, record=trace is not None)
        self._sink = trace


def _traced(name: str) -> Callable[..., Step]:
    method: Callable[..., Step] = getattr(Section, name)

    def action(self: TracedSection, *args: Any, **kwargs: Any) -> Step:
        step = method(self, *args, **kwargs)
        if self._sink is not None:
            for event in self.take_events():
                if isinstance(event, Transition):
                    self._sink(event.as_dict())
        return step

    action.__name__ = name
    return action


for _name in [*map(method_name, CLIENT_ACTIONS), "tick", "reply", "failed"]:
    setattr(TracedSection, _name, _traced(_name))


def op_of(step: Step) -> Op | None:
    """The operation a step asks to send, if any."""
    return None if step.send is None else step.send.op
