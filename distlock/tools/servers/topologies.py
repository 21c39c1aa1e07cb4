"""Real Redis topologies on loopback: a Redis Cluster (primaries with one replica each) and
a Sentinel-managed primary with a replica and three sentinels.

Every process is a child started here, on free ports, without persistence, and is stopped
by pid.  Faults (a failover, a killed primary, a slot moved while a key in it is held) are
methods that return once the topology has settled again, found by polling what the nodes
themselves report, with generous deadlines: a loaded machine makes them slower, never
wrong.  A killed node is started again afterwards and rejoins as a replica, so one topology
can serve many tests in turn.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import redis

from distlock._slots import key_slot
from distlock.tools.servers.redis_server import (
    RedisServer,
    ServerNotFound,
    free_port,
    redis_server_binary,
    stop_process,
)

#: How long a fault may take to settle on a loaded machine before the topology is broken.
SETTLE_S = 60.0


def wait_for(what: str, ready: Callable[[], bool], timeout: float = SETTLE_S) -> None:
    """Poll ``ready`` until it holds: the nodes announce a new state only by being asked."""
    give_up = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            pass
        if time.monotonic() > give_up:
            raise TimeoutError(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def redis_cli_binary() -> str:
    found = shutil.which("redis-cli")
    if found is None:
        raise ServerNotFound("redis-cli not found on PATH: it creates the cluster")
    return found


#: The first redis-server with ``--cluster-port`` (each node's bus on a port of its own).
CLUSTER_MIN_VERSION = (7, 0)


def redis_server_version(binary: str) -> tuple[int, ...] | None:
    """``redis-server --version``'s ``v=X.Y.Z``, or None when it says no such thing."""
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\bv=(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else None


def cluster_unavailable() -> str | None:
    """Why :class:`Cluster` cannot start here (a binary missing or too old), else None."""
    try:
        binary = redis_server_binary()
        redis_cli_binary()
    except ServerNotFound as exc:
        return str(exc)
    version = redis_server_version(binary)
    if version is None or version < CLUSTER_MIN_VERSION:
        found = "an unknown version" if version is None else ".".join(map(str, version))
        return (
            f"{binary} is {found}: the Cluster here needs Redis "
            f"{'.'.join(map(str, CLUSTER_MIN_VERSION))} or later (--cluster-port)"
        )
    return None


def sentinel_unavailable() -> str | None:
    """Why :class:`SentinelTopology` cannot start here, else None.  Its sentinels are
    ``redis-server --sentinel``: no ``redis-sentinel`` binary is needed."""
    try:
        redis_server_binary()
    except ServerNotFound as exc:
        return str(exc)
    return None


def _client(node: RedisServer) -> redis.Redis:
    return redis.Redis(node.host, node.port, socket_timeout=5, decode_responses=True)


def _ask(node: RedisServer, *command: Any) -> Any:
    with _client(node) as r:
        return r.execute_command(*command)


class Cluster:
    """A Redis Cluster of ``primaries`` primaries, each with one replica."""

    def __init__(self, primaries: int = 3, node_timeout_ms: int = 1000) -> None:
        self.size = primaries * 2
        self.primaries_wanted = primaries
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[RedisServer] = []

    # -- life ----------------------------------------------------------------------------

    def start(self) -> Self:
        binary = redis_server_binary()
        try:
            for _ in range(self.size):
                port = free_port()
                node = RedisServer(port=port, binary=binary, args=(
                    "--cluster-enabled", "yes",
                    # Its own bus port: the default, port + 10000, may not exist.
                    "--cluster-port", str(free_port()),
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(self.node_timeout_ms),
                    # A replica that lost its primary for long still takes over: the
                    # faults here are short, and a cluster that refuses is no test.
                    "--cluster-replica-validity-factor", "0",
                ))
                self.nodes.append(node.start())
            subprocess.run(
                [redis_cli_binary(), "--cluster", "create",
                 *(f"{n.host}:{n.port}" for n in self.nodes),
                 "--cluster-replicas", "1", "--cluster-yes"],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
            )
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the nodes say ----------------------------------------------------------------

    @property
    def running(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.proc is not None]

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [(n.host, n.port) for n in self.running]

    @property
    def url(self) -> str:
        node = self.running[0]
        return f"redis://{node.host}:{node.port}"

    def client(self, **kwargs: Any) -> redis.RedisCluster:
        from redis.cluster import ClusterNode

        node: Any = ClusterNode  # redis-py leaves it unannotated
        return redis.RedisCluster(
            startup_nodes=[node(h, p) for h, p in self.startup_nodes], **kwargs
        )

    def node_id(self, node: RedisServer) -> str:
        return str(_ask(node, "CLUSTER", "MYID"))

    def _by_port(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)

    def primary_of_slot(self, slot: int) -> RedisServer:
        """The primary serving ``slot``, as a running node sees it."""
        for start, end, primary, *_ in _ask(self.running[0], "CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return self._by_port(int(primary[1]))
        raise LookupError(f"slot {slot} is not served")

    def primary_for(self, key: str) -> RedisServer:
        return self.primary_of_slot(key_slot(key))

    def replica_of(self, primary: RedisServer) -> RedisServer:
        for node in self.running:
            if (
                node is not primary
                and _ask(node, "ROLE")[0] == "slave"
                and int(_ask(node, "INFO", "replication")["master_port"]) == primary.port
            ):
                return node
        raise LookupError(f"no replica of {primary.port}")

    def primaries(self) -> list[RedisServer]:
        return [n for n in self.running if _ask(n, "ROLE")[0] == "master"]

    def healthy(self) -> bool:
        """Every node up, agreeing the cluster is ok with every slot served; every replica
        linked to its primary and caught up, so a failover loses nothing by accident."""
        for node in self.nodes:
            if node.proc is None:
                return False
            info = str(_ask(node, "CLUSTER", "INFO"))
            if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
                return False
            if "cluster_known_nodes:" + str(self.size) not in info:
                return False
        primaries = self.primaries()
        if len(primaries) != self.primaries_wanted:
            return False
        # Gossip reaches nodes at different times: right after a failover one node may
        # still map a slot to the demoted primary, and a trial that asked it would aim at
        # a replica.  Healthy means every node names the same primaries, each one a master.
        maps = {self._slot_map(node) for node in self.nodes}
        if len(maps) != 1:
            return False
        owners = {port for _, _, port in next(iter(maps))}
        if owners != {node.port for node in primaries}:
            return False
        for node in self.nodes:
            if node in primaries:
                continue
            info = _ask(node, "INFO", "replication")
            if info.get("master_link_status") != "up":
                return False
            if int(info.get("master_repl_offset", -1)) != int(
                _ask(self._by_port(int(info["master_port"])), "INFO", "replication")[
                    "master_repl_offset"
                ]
            ):
                return False
        return True

    def wait_healthy(self, timeout: float = SETTLE_S) -> None:
        wait_for("the cluster to be healthy", self.healthy, timeout)

    # -- faults --------------------------------------------------------------------------

    def failover(self, primary: RedisServer) -> RedisServer:
        """``CLUSTER FAILOVER`` on ``primary``'s replica (a coordinated one: the replica
        catches up first, so no acknowledged write is lost).  Returns the new primary."""
        replica = self.replica_of(primary)
        _ask(replica, "CLUSTER", "FAILOVER")
        wait_for("the replica to take over", lambda: _ask(replica, "ROLE")[0] == "master")
        self.wait_healthy()
        return replica

    def kill_primary(
        self,
        primary: RedisServer,
        *,
        replica: RedisServer | None = None,
        then: Callable[[], None] | None = None,
        restart: bool = True,
    ) -> RedisServer:
        """SIGKILL ``primary``; return its replica once that took over (the cluster
        detects the death after the node timeout).  ``then`` runs right after the kill.
        The dead node is then started again and rejoins as a replica (its ``nodes.conf``
        survives), unless ``restart`` is False.  Name the ``replica`` when it is paused
        (it could not say whose replica it is)."""
        replica = replica or self.replica_of(primary)
        primary.kill()
        if then is not None:
            then()
        wait_for("the replica to be promoted", lambda: _ask(replica, "ROLE")[0] == "master")
        if restart:
            self.restart(primary)
        return replica

    def restart(self, node: RedisServer) -> None:
        node.start()
        self.wait_healthy()

    def move_slot(
        self,
        slot: int,
        target: RedisServer,
        *,
        between: Callable[[str], None] | None = None,
    ) -> None:
        """Move ``slot`` to ``target`` the way ``redis-cli --cluster reshard`` does:
        IMPORTING on the target, MIGRATING on the source, MIGRATE the keys, then give the
        slot to the target everywhere.  ``between(phase)`` runs at ``"migrating"`` (before
        any key moved: the source still answers for its keys, others are ``ASK``ed to the
        target) and at ``"moved"`` (keys moved, slot not yet reassigned: every key of the
        slot is ``ASK``ed)."""
        source = self.primary_of_slot(slot)
        if source is target:
            raise ValueError(f"slot {slot} is already on {target.port}")
        sid, tid = self.node_id(source), self.node_id(target)
        _ask(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", sid)
        _ask(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", tid)
        if between is not None:
            between("migrating")
        while keys := _ask(source, "CLUSTER", "GETKEYSINSLOT", slot, 100):
            _ask(source, "MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
        if between is not None:
            between("moved")
        for node in (target, source, *self.primaries()):
            _ask(node, "CLUSTER", "SETSLOT", slot, "NODE", tid)
        wait_for(
            f"every node to agree slot {slot} is on {target.port}",
            lambda: all(
                self._owner_seen_by(node, slot) == target.port for node in self.running
            ),
        )

    def _slot_map(self, node: RedisServer) -> tuple[tuple[int, int, int], ...]:
        """``node``'s view of which primary serves which slots, sorted."""
        return tuple(
            sorted(
                (int(start), int(end), int(primary[1]))
                for start, end, primary, *_ in _ask(node, "CLUSTER", "SLOTS")
            )
        )

    def _owner_seen_by(self, node: RedisServer, slot: int) -> int | None:
        for start, end, primary, *_ in _ask(node, "CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(primary[1])
        return None


def _fields(reply: Any) -> dict[str, Any]:
    """A sentinel's record as a dict, whether redis-py parsed it or not."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _flags(fields: dict[str, Any]) -> set[str]:
    flags = fields.get("flags", "")
    return set(flags.split(",")) if isinstance(flags, str) else set(flags)


class SentinelProcess:
    """One ``redis-sentinel`` (``redis-server <conf> --sentinel``) on a free port."""

    def __init__(self, primary: RedisServer, name: str, quorum: int, down_after_ms: int) -> None:
        self.host = "127.0.0.1"
        self.port = free_port()
        self.server = RedisServer(port=self.port)
        self.conf = Path(self.server.dir) / "sentinel.conf"
        self.conf.write_text(
            f"port {self.port}\nbind {self.host}\nprotected-mode no\n"
            f"dir {self.server.dir}\n"
            f"sentinel monitor {name} {primary.host} {primary.port} {quorum}\n"
            f"sentinel down-after-milliseconds {name} {down_after_ms}\n"
            f"sentinel failover-timeout {name} 10000\n"
            f"sentinel parallel-syncs {name} 1\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [redis_server_binary(), str(self.conf), "--sentinel"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(f"sentinel on {self.port}", lambda: bool(self.ask("PING")), 30)

    def ask(self, *command: Any) -> Any:
        with redis.Redis(self.host, self.port, socket_timeout=5, decode_responses=True) as r:
            return r.execute_command(*command)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        self.server.stop()  # never started: only removes the directory


class SentinelTopology:
    """A primary, one replica and three sentinels (quorum 2) watching them."""

    NAME = "distlock"

    def __init__(self, down_after_ms: int = 1000) -> None:
        self.down_after_ms = down_after_ms
        self.primary = RedisServer()
        self.replica: RedisServer | None = None
        self.sentinels: list[SentinelProcess] = []

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [(s.host, s.port) for s in self.sentinels]

    def start(self) -> Self:
        try:
            self.primary.start()
            self.replica = RedisServer(args=("--replicaof", self.primary.host,
                                             str(self.primary.port)))
            self.replica.start()
            for _ in range(3):
                sentinel = SentinelProcess(self.primary, self.NAME, 2, self.down_after_ms)
                self.sentinels.append(sentinel)
                sentinel.start()
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        self.sentinels = []
        for node in (self.primary, self.replica):
            if node is not None:
                node.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def master_for(self, **kwargs: Any) -> redis.Redis:
        """A client that asks the sentinels where the primary is (redis-py's own)."""
        from redis.sentinel import Sentinel

        make: Any = Sentinel  # redis-py leaves it unannotated
        client: redis.Redis = make(self.addresses, **kwargs).master_for(self.NAME, **kwargs)
        return client

    def async_master_for(self, **kwargs: Any) -> Any:
        """The same for asyncio: a ``redis.asyncio.Redis``."""
        from redis.asyncio.sentinel import Sentinel

        make: Any = Sentinel
        return make(self.addresses, **kwargs).master_for(self.NAME, **kwargs)

    def master_port(self, sentinel: SentinelProcess) -> int:
        return int(sentinel.ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.NAME)[1])

    def healthy(self) -> bool:
        """Every sentinel agrees on the primary and knows the replica and the two other
        sentinels (without them no quorum elects a leader); the replica is caught up."""
        assert self.replica is not None
        for sentinel in self.sentinels:
            if self.master_port(sentinel) != self.primary.port:
                return False
            fields = _fields(sentinel.ask("SENTINEL", "MASTER", self.NAME))
            if int(fields["num-slaves"]) < 1 or int(fields["num-other-sentinels"]) < 2:
                return False
            if {"s_down", "o_down"} & _flags(fields):
                return False
            replicas = [_fields(r) for r in sentinel.ask("SENTINEL", "REPLICAS", self.NAME)]
            if not any(
                int(r["port"]) == self.replica.port
                and not {"disconnected", "s_down", "o_down"} & _flags(r)
                for r in replicas
            ):
                return False
        info = _ask(self.replica, "INFO", "replication")
        if info.get("master_link_status") != "up" or int(info["master_port"]) != self.primary.port:
            return False
        return int(info["master_repl_offset"]) == int(
            _ask(self.primary, "INFO", "replication")["master_repl_offset"]
        )

    def wait_healthy(self, timeout: float = SETTLE_S) -> None:
        wait_for("the sentinels to agree and the replica to catch up", self.healthy, timeout)

    def kill_primary(self, *, then: Callable[[], None] | None = None) -> None:
        """SIGKILL the primary; return once every sentinel names the replica as the new
        primary.  The old primary is started again empty: the sentinels turn it into the
        new primary's replica, and the two swap roles here."""
        assert self.replica is not None
        old, new = self.primary, self.replica
        old.kill()
        if then is not None:
            then()
        wait_for(
            "the sentinels to promote the replica",
            lambda: all(self.master_port(s) == new.port for s in self.sentinels)
            and _ask(new, "ROLE")[0] == "master",
        )
        old.args = ()
        old.start()
        self.primary, self.replica = new, old
        self.wait_healthy()
