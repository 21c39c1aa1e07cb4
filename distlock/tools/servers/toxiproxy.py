"""A small typed client for Toxiproxy's HTTP API, and a Toxiproxy server process we own.

Only the standard library: the PyPI client is unmaintained.  The API is the one of
Toxiproxy v2 (``/version``, ``/proxies``, ``/proxies/{name}/toxics``); proxies are updated
with PATCH.  Every request has a timeout, so a wedged Toxiproxy fails a test instead of
hanging it.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from distlock.tools.servers.redis_server import free_port, stop_process

Stream = Literal["upstream", "downstream"]
ToxicType = Literal[
    "latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data"
]
JSON = dict[str, Any]


class ToxiproxyError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"toxiproxy {method} {path} -> {status}: {body}")
        self.status = status


@dataclass(frozen=True)
class Toxic:
    name: str
    type: ToxicType
    stream: Stream
    attributes: Mapping[str, int]
    toxicity: float = 1.0


@dataclass
class Proxy:
    """A proxy as Toxiproxy reports it. ``host``/``port`` is where clients connect."""

    api: ToxiproxyClient
    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: list[Toxic] = field(default_factory=list)
    #: Where the clients reach ``listen`` (differs when Toxiproxy runs in a container).
    address: str | None = None

    @property
    def host(self) -> str:
        return (self.address or self.listen).rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int((self.address or self.listen).rsplit(":", 1)[1])

    def add_toxic(
        self,
        type: ToxicType,
        *,
        stream: Stream = "downstream",
        name: str | None = None,
        toxicity: float = 1.0,
        **attributes: int,
    ) -> Toxic:
        """Add a toxic: ``proxy.add_toxic("latency", stream="downstream", latency=50)``."""
        return self._add(
            Toxic(name or f"{type}_{stream}", type, stream, dict(attributes), toxicity)
        )

    def _add(self, toxic: Toxic) -> Toxic:
        self.api.request(
            "POST",
            f"/proxies/{self.name}/toxics",
            {
                "name": toxic.name,
                "type": toxic.type,
                "stream": toxic.stream,
                "toxicity": toxic.toxicity,
                "attributes": dict(toxic.attributes),
            },
        )
        self.toxics.append(toxic)
        return toxic

    def remove_toxic(self, toxic: Toxic | str) -> None:
        name = toxic if isinstance(toxic, str) else toxic.name
        self.api.request("DELETE", f"/proxies/{self.name}/toxics/{name}")
        self.toxics = [t for t in self.toxics if t.name != name]

    def remove_all_toxics(self) -> None:
        for toxic in self.api.list_toxics(self.name):
            self.remove_toxic(toxic)

    @contextmanager
    def toxic(
        self, type: ToxicType, *, stream: Stream = "downstream", **attributes: int
    ) -> Iterator[Toxic]:
        toxic = self._add(Toxic(f"{type}_{stream}", type, stream, dict(attributes)))
        try:
            yield toxic
        finally:
            self.remove_toxic(toxic)

    def disable(self) -> None:
        """Close every connection through the proxy and refuse new ones."""
        self.api.request("PATCH", f"/proxies/{self.name}", {"enabled": False})
        self.enabled = False

    def enable(self) -> None:
        self.api.request("PATCH", f"/proxies/{self.name}", {"enabled": True})
        self.enabled = True

    def delete(self) -> None:
        self.api.request("DELETE", f"/proxies/{self.name}")


class ToxiproxyClient:
    """``ToxiproxyClient("http://127.0.0.1:8474")``: one HTTP connection per request."""

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"expected http://host:port for Toxiproxy, got {url!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or 8474
        self.timeout = timeout

    def request(self, method: str, path: str, body: JSON | None = None) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            payload = None if body is None else json.dumps(body)
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            text = response.read().decode()
        finally:
            conn.close()
        if response.status >= 300:
            raise ToxiproxyError(method, path, response.status, text)
        return json.loads(text) if text.strip() else None

    def version(self) -> str:
        reply = self.request("GET", "/version")
        return str(reply["version"]) if isinstance(reply, dict) else str(reply)

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self.request("POST", "/reset")

    def proxies(self) -> dict[str, JSON]:
        return cast(dict[str, JSON], self.request("GET", "/proxies"))

    def list_toxics(self, proxy: str) -> list[str]:
        return [str(t["name"]) for t in self.request("GET", f"/proxies/{proxy}/toxics")]

    def create_proxy(
        self, name: str, *, listen: str, upstream: str, address: str | None = None
    ) -> Proxy:
        """Create ``name`` (replacing a stale one left by an interrupted run)."""
        if name in self.proxies():
            self.request("DELETE", f"/proxies/{name}")
        reply = self.request(
            "POST",
            "/proxies",
            {"name": name, "listen": listen, "upstream": upstream, "enabled": True},
        )
        return Proxy(
            self,
            name=str(reply["name"]),
            listen=str(reply["listen"]),
            upstream=str(reply["upstream"]),
            enabled=bool(reply["enabled"]),
            address=address,
        )


#: What to do when no Toxiproxy server binary is found.
INSTALL_TOXIPROXY = (
    "Toxiproxy not found: install it with "
    "`go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0` (the binary lands in "
    "~/go/bin/server), or put a release's toxiproxy-server on PATH "
    "(https://github.com/Shopify/toxiproxy/releases), or set TOXIPROXY_SERVER to its "
    "binary, or pass --toxiproxy URL (TOXIPROXY_URL for pytest) of a running one"
)


def connect(url: str, *, wait: float = 30.0) -> ToxiproxyClient:
    """A client for the Toxiproxy API at ``url``, once it answers (a container may still
    be starting: its API port is the only thing to poll); ``OSError`` after ``wait``."""
    client = ToxiproxyClient(url, timeout=2.0)
    give_up = time.monotonic() + wait
    while True:
        try:
            client.version()
            return client
        except OSError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.2)


def find_server_binary() -> str | None:
    """Toxiproxy's server: ``$TOXIPROXY_SERVER``, ``toxiproxy-server`` or ``server`` on PATH,
    or ``$(go env GOPATH)/bin/server`` (where ``go install .../cmd/server@v2.12.0`` puts it).
    """
    explicit = os.environ.get("TOXIPROXY_SERVER")
    if explicit:
        return explicit
    for name in ("toxiproxy-server",):
        found = shutil.which(name)
        if found:
            return found
    gopaths: list[str] = []
    if os.environ.get("GOPATH"):
        gopaths.extend(os.environ["GOPATH"].split(os.pathsep))
    go = shutil.which("go")
    if go:
        try:
            out = subprocess.run(
                [go, "env", "GOPATH"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
            gopaths.extend(out.split(os.pathsep))
        except (OSError, subprocess.SubprocessError):
            pass
    gopaths.append(str(Path.home() / "go"))
    for gopath in gopaths:
        candidate = Path(gopath) / "bin" / "server"
        if gopath and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    # A bare ``server`` on PATH is too generic a name to trust without asking it.
    generic = shutil.which("server")
    if generic and _is_toxiproxy(generic):
        return generic
    return None


def _is_toxiproxy(binary: str) -> bool:
    try:
        out = subprocess.run(
            [binary, "-help"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return "toxiproxy" in (out.stdout + out.stderr).lower()


class ToxiproxyServer:
    """A Toxiproxy server child process on a free loopback port, stopped by pid."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        fd, self._log_path = tempfile.mkstemp(prefix="toxiproxy-", suffix=".log")
        os.close(fd)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> ToxiproxyServer:
        with open(self._log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [self.binary, "-host", "127.0.0.1", "-port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "LOG_LEVEL": "warn"},
            )
        client = ToxiproxyClient(self.url, timeout=1.0)
        give_up = time.monotonic() + timeout
        # Polling the API port is the one wait with no event to block on.
        while time.monotonic() < give_up:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"toxiproxy exited with {self.proc.returncode}; log: {self.log_tail()}"
                )
            try:
                client.version()
                return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"toxiproxy did not answer on {self.url} within {timeout}s")

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return Path(self._log_path).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)
        self.proc = None
        Path(self._log_path).unlink(missing_ok=True)
