"""Round trips per operation, counted by the server: every command a client sent, seen by
``MONITOR`` (commands a script runs inside Redis are not round trips and are left out);
and the time Redis spends running the commands of one cycle (``INFO commandstats``, over
``--cycles`` cycles, the least of three runs): what the scripts cost the server, which a
client waits for on every round trip.  Only the commands ``MONITOR`` saw are summed (a
script's time includes the calls it makes); a name a contender sends and also calls from
its scripts would count those calls twice (none of distlock's or the floor's does).

One uncontended cycle per contender, sync: the floor, distlock's ``acquire``/``release``
and ``run``, redis-py's ``Lock``, python-redis-lock and pottery (when installed).

    python benchmarks/roundtrips.py [--cycles N] [--json FILE]
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import redis
from cycles import every_sync_contender, load_scripts
from harness import arguments, build_label, conditions, redis_url, table, write_json

from distlock import Lock

#: A connection's set-up (and our own probe), not part of any operation.
HANDSHAKE = frozenset({"HELLO", "CLIENT", "PING", "SELECT"})
#: Sent by the counting connection to mark the end of one contender's window.
END = "distlock-bench-end"


def count(url: str, cycle: Callable[[], object]) -> tuple[int, dict[str, int]]:
    """Commands the clients sent while ``cycle`` ran once, total and by name."""
    seen: list[dict[str, Any]] = []
    ready = threading.Event()
    # Typed Any: redis-py's monitor() carries no annotations.
    monitor_client: Any = redis.Redis.from_url(url)

    def watch() -> None:
        with monitor_client.monitor() as m:
            ready.set()
            for command in m.listen():
                text = str(command["command"])
                if text == f"ECHO {END}":
                    return
                seen.append(command)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready.wait()
    # MONITOR is set up by the time it answers one command: wait for our own PING to show.
    probe = redis.Redis.from_url(url)
    probe.ping()
    cycle()
    probe.echo(END)
    watcher.join(10)
    probe.close()
    monitor_client.close()
    sent = [
        c for c in seen
        if c.get("client_type") != "lua"
        and str(c["command"]).split()[0].upper() not in HANDSHAKE
    ]
    names = Counter(str(c["command"]).split()[0].upper() for c in sent)
    return len(sent), dict(names)


def server_us(
    r: redis.Redis, cycles: Callable[[int], object], n: int, names: Iterable[str]
) -> float:
    """Redis's time in ``names`` (the commands a cycle sends) per cycle while ``cycles(n)``
    ran, the least of three runs."""
    wanted = {f"cmdstat_{name.lower()}" for name in names}
    best = float("inf")
    for _ in range(3):
        r.config_resetstat()
        cycles(n)
        stats: Any = r.info("commandstats")
        used = sum(float(v["usec"]) for k, v in stats.items() if k in wanted)
        best = min(best, used / n)
    return best


def main() -> dict[str, Any]:
    parser = arguments((__doc__ or "").split("\n\n")[0], rounds=1)
    parser.add_argument("--cycles", type=int, default=2_000, help="cycles per time reading")
    args = parser.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    with redis_url(args) as url:
        r = redis.Redis.from_url(url)
        load_scripts(r)  # the floor's release and distlock's scripts, for the by-hand rows
        with Lock(r, prefix="bench") as locks:
            contenders = every_sync_contender(r, locks)
            for name, fn in contenders.items():
                fn(1)  # warm: scripts loaded, connections open
                total, names = count(url, partial(fn, 1))
                used = server_us(r, fn, args.cycles, names)
                rows[name] = {"round_trips": total, "commands": names, "server_us": used}
        r.close()
    print(f"\nRound trips per uncontended cycle (sync, {build_label()}), counted by MONITOR; "
          "Redis's time in them")
    print(table(
        ["contender", "round trips", "commands", "Redis µs"],
        [[n, v["round_trips"], ", ".join(f"{k}×{c}" for k, c in sorted(v["commands"].items())),
          f"{v['server_us']:.1f}"]
         for n, v in rows.items()],
    ))
    result = {"benchmark": "roundtrips", "conditions": conditions(args), "cycle": rows}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
