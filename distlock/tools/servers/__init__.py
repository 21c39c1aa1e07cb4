"""Servers on loopback that this package's tools start and stop themselves: a
``redis-server`` (:mod:`.redis_server`), a Redis Cluster and a Sentinel set-up
(:mod:`.topologies`), Toxiproxy (:mod:`.toxiproxy`) and PostgreSQL (:mod:`.postgres`).

Plain process helpers, with nothing of the chaos tool in them: the chaos tool, the
benchmarks and the test suite's fixtures all start their servers with them.  Each is
stopped by its pid, never by port or name, so no other server on the machine is touched.
"""
