"""Many locks held at once: client memory per held lock, and the renewal cost per held lock.

Memory: the resident set of a child process holding N locks (default 10,000) against the
same child holding none, divided by N.  distlock holds them with ``hold`` (each renewed
in the background, so with its timer and deadline watch armed), with the sync driver and
with the asyncio one (``async with`` blocks entered by one task); the floor keeps only the
token strings it needs to release them; the peers keep their lock objects.

Renewal: a child holds N locks with a heartbeat of ``--heartbeat-ms`` and, once all are
held, measures for ``--seconds`` the process CPU time (all threads), the renewals Redis ran
(``commandstats``) and the reads it served (``total_reads_processed``: one per pipeline or
single command that arrived on its own).  The figure is CPU microseconds per held lock per
tick, against the floor: a hand-written loop that renews every token each heartbeat in one
pipeline, which is the least a client can do.

    python benchmarks/held.py [--locks N] [--seconds S] [--pin] [--json FILE]
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
from contextlib import ExitStack
from typing import Any

import redis
import redis.asyncio as aredis
from harness import (
    FLOOR,
    arguments,
    build_label,
    conditions,
    peer,
    redis_url,
    rss_bytes,
    table,
    write_json,
)

import distlock.asyncio
from distlock import Lock

TTL_MS = 60_000
#: The floor's renewal: extend only while the key still holds our token.
FLOOR_RENEW = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

ASYNC_DISTLOCK = "distlock (asyncio)"
MEMORY_CONTENDERS = (
    FLOOR, "distlock", ASYNC_DISTLOCK, "redis-py Lock", "python-redis-lock", "pottery"
)


def hold(stack: ExitStack, name: str, url: str, n: int, tag: str = "") -> list[Any]:
    """Take ``n`` free keys the way ``name`` does and keep what it needs to release them."""
    r = redis.Redis.from_url(url)
    kept: list[Any] = []
    if name == FLOOR:
        import secrets

        for i in range(n):
            token = secrets.token_hex(16)
            r.set(f"mem:floor:{tag}{i}", token, nx=True, px=TTL_MS)
            kept.append(token)
    elif name == "distlock":
        locks = stack.enter_context(Lock(r, prefix="mem", ttl_ms=TTL_MS))
        # What a service holding many locks keeps: each hold() it is inside (a list entry
        # each; an ExitStack would add its own two objects per lock).
        holds = [locks.hold(f"d{tag}{i}") for i in range(n)]
        for held in holds:
            held.__enter__()
        stack.callback(_exit_all, holds)
        kept.extend(holds)
    elif name == "redis-py Lock":
        for i in range(n):
            lock = r.lock(f"mem:rp:{tag}{i}", timeout=TTL_MS / 1000)
            lock.acquire(blocking=False)
            kept.append(lock)
    elif name == "python-redis-lock":
        prl: Any = peer("redis_lock")
        for i in range(n):
            lock = prl.Lock(r, f"mem:prl:{tag}{i}", expire=TTL_MS // 1000)
            lock.acquire(blocking=False)
            kept.append(lock)
    elif name == "pottery":
        pottery: Any = peer("pottery")
        for i in range(n):
            lock = pottery.Redlock(
                key=f"mem:pot:{tag}{i}", masters={r}, auto_release_time=TTL_MS / 1000
            )
            lock.acquire(blocking=False)
            kept.append(lock)
    return kept


def _exit_all(holds: list[Any]) -> None:
    for held in reversed(holds):
        held.__exit__(None, None, None)


async def _async_memory(url: str, n: int) -> dict[str, Any]:
    """As :func:`memory_child`, for distlock's asyncio driver: the ``hold()`` blocks of one
    task, entered and kept open (what ``async with`` keeps for each)."""
    r = aredis.Redis.from_url(url)
    async with distlock.asyncio.Lock(r, prefix="mem", ttl_ms=TTL_MS) as locks:
        warm = [locks.hold(f"aw{i}") for i in range(10)]
        for held in warm:
            await held.__aenter__()
        gc.collect()
        before = rss_bytes()
        holds = [locks.hold(f"a{i}") for i in range(n)]
        for held in holds:
            await held.__aenter__()
        gc.collect()
        after = rss_bytes()
        for held in reversed(warm + holds):
            await held.__aexit__(None, None, None)
    await r.aclose()
    return {"rss_before": before, "rss_after": after, "locks": n}


def memory_child(name: str, url: str, n: int) -> dict[str, Any]:
    if name == ASYNC_DISTLOCK:
        return asyncio.run(_async_memory(url, n))
    with ExitStack() as stack:
        hold(stack, name, url, 10, "warm")  # warm: imports, connection, scripts, threads
        gc.collect()
        before = rss_bytes()
        kept = hold(stack, name, url, n)
        gc.collect()
        after = rss_bytes()
        assert len(kept) == n
        return {"rss_before": before, "rss_after": after, "locks": n}


def renewal_child(name: str, url: str, n: int, heartbeat_ms: int, seconds: float) -> dict[str, Any]:
    r = redis.Redis.from_url(url)
    with ExitStack() as stack:
        if name == FLOOR:
            import secrets

            sha = r.script_load(FLOOR_RENEW)
            tokens = []
            for i in range(n):
                token = secrets.token_hex(16)
                r.set(f"ren:floor:{i}", token, nx=True, px=TTL_MS)
                tokens.append((f"ren:floor:{i}", token))

            def floor_loop(until: float) -> None:
                next_at = time.monotonic() + heartbeat_ms / 1000
                while next_at < until:
                    time.sleep(max(0.0, next_at - time.monotonic()))
                    pipe = r.pipeline(transaction=False)
                    for key, token in tokens:
                        pipe.evalsha(sha, 1, key, token, TTL_MS)
                    pipe.execute()
                    next_at += heartbeat_ms / 1000

        else:
            locks = stack.enter_context(
                Lock(r, prefix="ren", ttl_ms=TTL_MS, heartbeat_ms=heartbeat_ms)
            )
            for i in range(n):
                stack.enter_context(locks.hold(f"d{i}"))
        stats0 = _server_counts(r)
        cpu0, wall0 = time.process_time(), time.monotonic()
        if name == FLOOR:
            floor_loop(wall0 + seconds)
        else:
            time.sleep(seconds)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        stats = _server_counts(r)
    return {
        "locks": n,
        "heartbeat_ms": heartbeat_ms,
        "seconds": wall,
        "cpu_seconds": cpu,
        "renewals": stats[0] - stats0[0],
        "reads": stats[1] - stats0[1],
    }


def _server_counts(r: redis.Redis) -> tuple[int, int]:
    """(scripts Redis ran, reads it served), both counted by the server."""
    stats: Any = r.info("commandstats")
    evals = sum(
        int(v["calls"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval")
    )
    return evals, int(r.info("stats")["total_reads_processed"])


def child(*argv: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *argv], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> dict[str, Any]:
    parser = arguments((__doc__ or "").split("\n\n")[0], rounds=1)
    parser.add_argument("--locks", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=6.0, help="renewal window")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--child", nargs="+", help=argparse_hidden())
    args = parser.parse_args()
    if args.child:
        kind, name, url = args.child[:3]
        if kind == "memory":
            print(json.dumps(memory_child(name, url, args.locks)))
        else:
            print(json.dumps(renewal_child(name, url, args.locks, args.heartbeat_ms, args.seconds)))
        return {}
    if args.quick:
        args.locks, args.seconds = 2000, 3.0
    memory: dict[str, dict[str, Any]] = {}
    renewal: dict[str, dict[str, Any]] = {}
    with redis_url(args) as url:
        for name in MEMORY_CONTENDERS:
            if name in ("python-redis-lock", "pottery") and peer(
                "redis_lock" if name == "python-redis-lock" else "pottery"
            ) is None:
                continue
            m = child("memory", name, url, "--locks", str(args.locks))
            m["bytes_per_lock"] = (m["rss_after"] - m["rss_before"]) / m["locks"]
            memory[name] = m
            redis.Redis.from_url(url).flushall()
        for name in (FLOOR, "distlock"):
            run = child(
                "renewal", name, url, "--locks", str(args.locks),
                "--heartbeat-ms", str(args.heartbeat_ms), "--seconds", str(args.seconds),
            )
            ticks = max(1, run["renewals"]) / run["locks"]
            run["cpu_us_per_lock_per_tick"] = run["cpu_seconds"] / max(1, run["renewals"]) * 1e6
            run["reads_per_tick"] = run["reads"] / ticks
            renewal[name] = run
            redis.Redis.from_url(url).flushall()
    print(f"\n{build_label()}")
    print(f"\nMemory per held lock: RSS of a process holding {args.locks} against one holding none")
    print(table(
        ["contender", "bytes per held lock"],
        [[n, f"{m['bytes_per_lock']:.0f}"] for n, m in memory.items()],
    ))
    floor_cpu = renewal[FLOOR]["cpu_us_per_lock_per_tick"]
    print(f"\nRenewal of {args.locks} held locks, heartbeat {args.heartbeat_ms} ms, "
          f"{args.seconds:.0f} s window")
    print(table(
        ["contender", "renewals", "CPU µs per held lock per tick", "ratio",
         "server reads per tick"],
        [[n, v["renewals"], f"{v['cpu_us_per_lock_per_tick']:.1f}",
          f"{v['cpu_us_per_lock_per_tick'] / floor_cpu:.2f}×", f"{v['reads_per_tick']:.0f}"]
         for n, v in renewal.items()],
    ))
    result = {"benchmark": "held", "conditions": conditions(args), "memory": memory,
              "renewal": renewal}
    write_json(args.json, result)
    return result


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
