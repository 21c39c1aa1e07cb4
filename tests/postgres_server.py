"""A real PostgreSQL server on a free loopback port, owned by the test session that starts it.

The same code the chaos tool ships (:mod:`distlock.tools.chaos.postgres`): as root the
server runs as an unprivileged user; the binaries come from PATH or Debian's
``/usr/lib/postgresql/<version>/bin`` (``.ci/setup`` installs Debian's ``postgresql`` when
neither has them).
"""

from __future__ import annotations

from distlock.tools.chaos.postgres import PostgresServer, postgres_bin_dir

__all__ = ["PostgresServer", "postgres_bin_dir"]
