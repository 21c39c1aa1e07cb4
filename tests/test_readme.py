"""Every Python example in the README runs, against a real redis-server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.redis_server import RedisServer

README = Path(__file__).resolve().parent.parent / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(source: str, redis_server: RedisServer) -> None:
    code = source.replace("redis://localhost:6379/0", redis_server.url)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
