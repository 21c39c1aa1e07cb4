"""Redis's instructions per lock cycle, counted by valgrind: the server's part of a cycle.

Redis's time per command (``INFO commandstats``) is a wall clock inside the server, which
load moves as it moves a loopback round trip.  This runs ``redis-server`` under valgrind's
callgrind, counting only what the server does for a client's commands (from reading them,
``readQueryFromClient``, to writing the replies, ``writeToClient``; not its timers), sends
``--cycles`` cycles of one contender, shuts the server down, does the same with a fifth of
the cycles, and takes the difference over the difference in cycles: start-up and the
scripts' loading cancel out.  Runs of the same cycle agree within about 1%.

Contenders, each on the same Redis work as ``cycles.py``'s rows of the same name:

- floor: ``SET key token NX PX ttl`` and the compare-and-delete ``EVALSHA``;
- floor, distlock's scripts: distlock's acquire and release scripts sent by hand (what
  any distlock cycle asks of Redis, a sync or asyncio one alike);
- distlock ``acquire()`` + ``release()`` (sync): the same two scripts, sent by distlock.

Needs ``valgrind`` (Debian: ``apt-get install valgrind``) and a ``redis-server`` built
with its symbols exported (Debian's is); a few minutes.

    python benchmarks/server_instructions.py [--cycles N] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import time
from pathlib import Path

import redis
from cycles import SCRIPTS_BY_HAND, TTL_MS, load_scripts, sync_contenders
from harness import FLOOR, table, write_json

from distlock import Lock
from distlock.tools.servers.redis_server import free_port

NAMES = (FLOOR, SCRIPTS_BY_HAND, "acquire + release")
#: What the server does for a client's commands, and nothing else it does.
COLLECT = ("readQueryFromClient", "writeToClient")


def send(r: redis.Redis, name: str, cycles: int) -> None:
    """``cycles`` cycles of ``name`` against ``r`` (whose scripts are loaded)."""
    locks = Lock(r, prefix="bench", ttl_ms=TTL_MS)
    plain, _ = sync_contenders(r, locks)
    plain["distlock" if name == "acquire + release" else name](cycles)


def _collected(name: str, cycles: int) -> int:
    """The instructions the server spent on ``cycles`` cycles of ``name`` (set-up
    included), by callgrind."""
    port = free_port()
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         *(f"--toggle-collect={fn}" for fn in COLLECT),
         shutil.which("redis-server") or "redis-server", "--port", str(port),
         "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    r = redis.Redis(port=port)
    try:
        for _ in range(600):  # valgrind starts a server slowly
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        load_scripts(r)
        send(r, name, cycles)
        with contextlib.suppress(redis.ConnectionError):  # it closes as it goes
            r.shutdown(nosave=True)
    finally:
        r.close()
    _, err = server.communicate(timeout=600)
    found = re.search(r"Collected\s*:\s*(\d+)", err)
    if found is None:
        raise SystemExit(f"no count from callgrind:\n{err}")
    return int(found.group(1))


def count(name: str, cycles: int) -> int:
    """Redis's instructions per cycle of ``name``."""
    few = cycles // 5
    return round((_collected(name, cycles) - _collected(name, few)) / (cycles - few))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2_000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    counts = {name: count(name, args.cycles) for name in NAMES}
    floor = counts[FLOOR]
    print(f"Redis's instructions per cycle (callgrind, {args.cycles:,} cycles)")
    print(table(["cycle", "instructions (ratio to the floor)"],
                [[name, f"{n:,} ({n / floor:.2f}×)"] for name, n in counts.items()]))
    write_json(args.json, {"cycles": args.cycles, "server_per_cycle": counts})


if __name__ == "__main__":
    main()
