"""Fixtures for the chaos suite, and the report printed at the end of the session.

The scenarios themselves live in :mod:`distlock.tools.chaos` (what ``python -m distlock
chaos`` runs); ``test_scenarios.py`` runs each through the same
:class:`~distlock.tools.chaos.runner.Runner`, against the session's Toxiproxy and the
settings of :meth:`~distlock.tools.chaos.targets.Settings.from_env`.

``toxiproxy``: a Toxiproxy server this session starts (or the one at ``TOXIPROXY_URL``).
``chaos_runner``: runs one registered scenario; its row lands in ``chaos-report.json``
(``CHAOS_REPORT``) and in the terminal summary.  It leaves TLC's verdict on the traced
trial to ``test_trace`` for each scenario whose ``test_scenario`` and ``test_trace`` are
both selected (:data:`DEFERRED_KEY`).
``chaos_target``/``chaos_proxy``: a redis-server of the test's own (or the Redis at
``CHAOS_REDIS_URL``) and a fresh proxy in front of it, for the instruments' own tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from distlock.tools.chaos.registration import Entry
from distlock.tools.chaos.report import ChaosReport
from distlock.tools.chaos.runner import PROXY_NAME, Runner
from distlock.tools.chaos.targets import ExternalTarget, LocalTarget, RedisTarget, Settings
from distlock.tools.servers.redis_server import RedisServer, free_port
from distlock.tools.servers.toxiproxy import (
    INSTALL_TOXIPROXY,
    Proxy,
    ToxiproxyClient,
    ToxiproxyServer,
    connect,
    find_server_binary,
)

REPORT_KEY = pytest.StashKey[ChaosReport]()
#: The scenarios whose ``test_scenario`` and ``test_trace`` both run in this session.
DEFERRED_KEY = pytest.StashKey[frozenset[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[REPORT_KEY] = ChaosReport()


def pytest_collection_finish(session: pytest.Session) -> None:
    selected: dict[str, set[str]] = {"test_scenario": set(), "test_trace": set()}
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        entry = None if callspec is None else callspec.params.get("entry")
        test = getattr(item, "originalname", None)
        if isinstance(entry, Entry) and test in selected:
            selected[test].add(entry.name)
    session.config.stash[DEFERRED_KEY] = frozenset(
        selected["test_scenario"] & selected["test_trace"]
    )


def _report_path(config: pytest.Config) -> Path:
    explicit = os.environ.get("CHAOS_REPORT")
    return Path(explicit) if explicit else Path(config.rootpath) / "chaos-report.json"


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    report = config.stash.get(REPORT_KEY, None)
    if report is None or not report.rows:
        return
    path = _report_path(config)
    report.write_json(path)
    terminalreporter.section("chaos report")
    for line in report.table():
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"(written to {path})")


@pytest.fixture(scope="session")
def chaos_settings() -> Settings:
    return Settings.from_env()


@pytest.fixture(scope="session")
def chaos_report(request: pytest.FixtureRequest) -> ChaosReport:
    return request.config.stash[REPORT_KEY]


@pytest.fixture(scope="session")
def toxiproxy(chaos_settings: Settings) -> Iterator[ToxiproxyClient]:
    if chaos_settings.toxiproxy_url:
        yield connect(chaos_settings.toxiproxy_url)
        return
    binary = find_server_binary()
    if binary is None:
        pytest.fail(INSTALL_TOXIPROXY)
    server = ToxiproxyServer(binary).start()
    try:
        yield ToxiproxyClient(server.url)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chaos_runner(
    request: pytest.FixtureRequest,
    chaos_settings: Settings,
    toxiproxy: ToxiproxyClient,
    chaos_report: ChaosReport,
) -> Runner:
    deferred = request.config.stash.get(DEFERRED_KEY, frozenset())
    return Runner(chaos_settings, toxiproxy, chaos_report, defer_traces=deferred)


@pytest.fixture
def chaos_target(chaos_settings: Settings) -> Iterator[RedisTarget]:
    if chaos_settings.redis_url:
        yield ExternalTarget(chaos_settings.redis_url, chaos_settings.redis_upstream)
        return
    with RedisServer() as server:
        yield LocalTarget(server)


@pytest.fixture
def chaos_proxy(
    toxiproxy: ToxiproxyClient, chaos_target: RedisTarget, chaos_settings: Settings
) -> Iterator[Proxy]:
    listen = chaos_settings.proxy_listen or f"127.0.0.1:{free_port()}"
    proxy = toxiproxy.create_proxy(
        PROXY_NAME,
        listen=listen,
        upstream=chaos_target.upstream,
        address=chaos_settings.proxy_address,
    )
    try:
        yield proxy
    finally:
        proxy.delete()
