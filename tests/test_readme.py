"""Every Python example in the README runs, against a real redis-server (and a real
PostgreSQL server for the examples that connect to one)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.redis_server import RedisServer

if TYPE_CHECKING:
    from tests.postgres_server import PostgresServer

README = Path(__file__).resolve().parent.parent / "README.md"
POSTGRES_DSN = "postgresql://postgres@localhost:5432/postgres"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(
    source: str, redis_server: RedisServer, request: pytest.FixtureRequest
) -> None:
    code = source.replace("redis://localhost:6379/0", redis_server.url)
    if POSTGRES_DSN in code:  # the PostgreSQL server starts only for the examples that use it
        server: PostgresServer = request.getfixturevalue("postgres_server")
        code = code.replace(POSTGRES_DSN, server.dsn)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
