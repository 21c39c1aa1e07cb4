"""Every Python example in the README runs, against a real redis-server, and prints what its
comments say it prints (the documentation's own examples: tests/test_docs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distlock._build import COMPILED_MODULES, BuildInfo, describe
from distlock._version import __version__
from tests.redis_server import RedisServer
from tests.test_docs import python_blocks, run_example

README = Path(__file__).resolve().parent.parent / "README.md"
EXAMPLES = python_blocks(README)


def test_the_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 2  # the quickstart, sync and asyncio


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(
    source: str, redis_server: RedisServer, request: pytest.FixtureRequest
) -> None:
    run_example(source, README, redis_server, request)


def test_the_readme_s_version_line_is_what_a_compiled_build_prints() -> None:
    # The line `python -m distlock --version` prints for the build pip makes.
    compiled = BuildInfo(version=__version__, build="compiled", compiled=COMPILED_MODULES)
    assert describe(compiled) in README.read_text()
