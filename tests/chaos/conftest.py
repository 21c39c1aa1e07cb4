"""Fixtures for the chaos suite, and the report printed at the end of the session.

``toxiproxy``: a Toxiproxy server this session starts (or the one at ``TOXIPROXY_URL``).
``chaos_target``: a redis-server of the test's own (or the Redis at ``CHAOS_REDIS_URL``).
``chaos``: makes a :class:`~tests.chaos.harness.Scenario` with a fresh proxy in front of
that Redis; the scenario's row lands in ``chaos-report.json`` and in the terminal summary.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.chaos.harness import Scenario
from tests.chaos.report import ChaosReport
from tests.chaos.targets import ExternalTarget, LocalTarget, RedisTarget, Settings
from tests.chaos.toxiproxy import (
    Proxy,
    ToxiproxyClient,
    ToxiproxyServer,
    find_server_binary,
)
from tests.redis_server import RedisServer, free_port

REPORT_KEY = pytest.StashKey[ChaosReport]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[REPORT_KEY] = ChaosReport()


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
        client = ToxiproxyClient(chaos_settings.toxiproxy_url, timeout=2.0)
        # A container may still be starting: its API port is the only thing to poll.
        give_up = time.monotonic() + 30
        while True:
            try:
                client.version()
                break
            except OSError:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.2)
        yield client
        return
    binary = find_server_binary()
    if binary is None:
        pytest.fail(
            "Toxiproxy not found: install it with "
            "`go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0` "
            "(or set TOXIPROXY_SERVER to its binary, or TOXIPROXY_URL to a running one)"
        )
    server = ToxiproxyServer(binary).start()
    try:
        yield ToxiproxyClient(server.url)
    finally:
        server.stop()


@pytest.fixture
def chaos_target(chaos_settings: Settings) -> Iterator[RedisTarget]:
    if chaos_settings.redis_url:
        yield ExternalTarget(chaos_settings.redis_url, chaos_settings.redis_upstream)
        return
    with RedisServer() as server:
        yield LocalTarget(server)


@pytest.fixture
def local_redis(chaos_target: RedisTarget) -> LocalTarget:
    """For scenarios that need to own the process (SIGSTOP, SIGKILL of clients, ...)."""
    if not isinstance(chaos_target, LocalTarget):
        pytest.skip("needs a redis-server this suite starts itself (CHAOS_REDIS_URL is set)")
    return chaos_target


@pytest.fixture
def chaos_proxy(
    toxiproxy: ToxiproxyClient, chaos_target: RedisTarget, chaos_settings: Settings
) -> Iterator[Proxy]:
    listen = chaos_settings.proxy_listen or f"127.0.0.1:{free_port()}"
    proxy = toxiproxy.create_proxy(
        "distlock-chaos",
        listen=listen,
        upstream=chaos_target.upstream,
        address=chaos_settings.proxy_address,
    )
    try:
        yield proxy
    finally:
        proxy.delete()


@pytest.fixture
def chaos_admin(chaos_target: RedisTarget) -> Iterator[redis.Redis]:
    """A direct connection for looking at Redis (never through the proxy)."""
    client = redis.Redis.from_url(chaos_target.url, socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
def chaos(
    chaos_target: RedisTarget,
    chaos_proxy: Proxy,
    chaos_settings: Settings,
    chaos_report: ChaosReport,
    chaos_admin: redis.Redis,
) -> Iterator[Callable[..., Scenario]]:
    made: list[Scenario] = []

    def make(name: str, *, ttl_ms: int) -> Scenario:
        scenario = Scenario(
            name=name,
            ttl_ms=ttl_ms,
            target=chaos_target,
            proxy=chaos_proxy,
            settings=chaos_settings,
            report=chaos_report,
            admin=chaos_admin,
        )
        made.append(scenario)
        return scenario

    yield make
    for scenario in made:
        scenario.close_sync()
        if chaos_target.external:
            chaos_target.lose_data(scenario.prefix)
