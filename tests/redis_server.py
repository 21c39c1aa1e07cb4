"""Real ``redis-server`` processes on free loopback ports, owned by the test that starts them.

The package's own server helper (:mod:`distlock.tools.servers.redis_server`, which the
chaos tool starts its servers with too): started without persistence, so a restart loses
every key, and stopped by pid, never by port, so a developer's own Redis on 6379 is never
touched.
"""

from __future__ import annotations

import shutil

import redis

from distlock.tools.servers.redis_server import RedisServer, free_port, stop_process

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"



def redis_ms(client: redis.Redis) -> int:
    """Redis's clock, in ms: what the scripts read with ``TIME``."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


__all__ = ["REDIS_SERVER", "RedisServer", "free_port", "redis_ms", "stop_process"]
