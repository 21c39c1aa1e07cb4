"""A real PostgreSQL server on a free loopback port, owned by the test session that starts it.

The package's own server helper (:mod:`distlock.tools.servers.postgres`, the fencing
experiment's too): as root the
server runs as an unprivileged user; the binaries come from PATH or Debian's
``/usr/lib/postgresql/<version>/bin`` (``.ci/setup`` installs Debian's ``postgresql`` when
neither has them).
"""

from __future__ import annotations

from distlock.tools.servers.postgres import PostgresServer, postgres_bin_dir

__all__ = ["PostgresServer", "postgres_bin_dir"]
