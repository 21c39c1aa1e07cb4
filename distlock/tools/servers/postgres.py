"""A real PostgreSQL server on a free loopback port, in a scratch directory, owned by the
process that starts it: the fencing experiment's database when no ``--postgres URL`` is
given (the test suite starts its servers with this module too: ``tests/postgres_server.py``).

PostgreSQL refuses to run as root: as root, ``initdb`` and ``postgres`` run as the
unprivileged system user ``distlock-pg`` (made with ``useradd --system`` if it is missing;
``nobody`` if that fails).  The binaries are found on PATH or, where Debian puts them, in
``/usr/lib/postgresql/<version>/bin``; neither is a :class:`ServerNotFound` saying what to
install.  Trust authentication on loopback, no fsync: a scratch server, stopped by pid (a
fast shutdown), its directory removed.  psycopg is imported only when a server is started.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from distlock.tools.servers.redis_server import ServerNotFound, free_port

USER = "distlock-pg"
#: Where Debian keeps each version's binaries, off PATH: ``<version>/bin``.
DEBIAN_PREFIX = Path("/usr/lib/postgresql")

INSTALL_POSTGRES = (
    "PostgreSQL's initdb/postgres not found on PATH nor in /usr/lib/postgresql/*/bin: "
    "install PostgreSQL (Debian/Ubuntu: `apt-get install postgresql`, macOS: `brew install "
    "postgresql`), or pass --postgres URL to use a PostgreSQL you run"
)


def postgres_bin_dir() -> Path:
    """The directory with ``initdb`` and ``postgres``: PATH's, else Debian's newest."""
    found = shutil.which("initdb")
    if found is not None and shutil.which("postgres") is not None:
        return Path(found).resolve().parent
    versions = [
        p
        for p in DEBIAN_PREFIX.glob("*/bin")
        if (p / "initdb").exists() and (p / "postgres").exists()
    ]
    if not versions:
        raise ServerNotFound(INSTALL_POSTGRES)
    return max(versions, key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.name)])


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        pass
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
        capture_output=True, check=False,
    )  # fmt: skip
    try:
        return pwd.getpwnam(USER)
    except KeyError:  # no useradd here: the user every Debian has
        return pwd.getpwnam("nobody")


class PostgresServer:
    """One ``postgres`` child process; ``dsn`` reaches it as the superuser ``postgres``."""

    def __init__(self) -> None:
        self.bin = postgres_bin_dir()
        self.user = _server_user()
        self.host = "127.0.0.1"
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="distlock-pg-", dir=self._scratch_parent()))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)

    def _scratch_parent(self) -> str:
        """The temporary directory, if the server's user can reach it (a root's TMPDIR
        under /root cannot be), else /tmp."""
        parent = Path(tempfile.gettempdir()).resolve()
        if self.user is None:
            return str(parent)
        for step in (parent, *parent.parents):
            if not os.stat(step).st_mode & 0o001:  # no search right for others
                return "/tmp"
        return str(parent)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/postgres"

    def start(self) -> PostgresServer:
        uid: int | None = None
        gid: int | None = None
        groups: list[int] | None = None
        if self.user is not None:
            uid, gid, groups = self.user.pw_uid, self.user.pw_gid, []
        initdb = subprocess.run(
            [self.bin / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"],
            capture_output=True, check=False, cwd=self.dir,
            user=uid, group=gid, extra_groups=groups,
        )  # fmt: skip
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{initdb.stdout!r}\n{initdb.stderr!r}")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [self.bin / "postgres", "-D", self.data, "-p", str(self.port),
                 "-c", f"listen_addresses={self.host}",
                 "-c", f"unix_socket_directories={self.dir}",
                 "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=40"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir,
                user=uid, group=gid, extra_groups=groups,
            )  # fmt: skip
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        # Polling for readiness is the one wait with no event to block on.
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self.proc.returncode}:\n{self.log.read_text()}"
                )
            try:
                with psycopg.connect(self.dsn, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                time.sleep(0.05)
        raise RuntimeError(f"postgres did not answer on port {self.port} within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: ends open sessions
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
