"""``python -m distlock chaos``: the chaos scenarios against a team's own Redis.

Runs every registered scenario (or those named with ``--scenarios``) and prints the
table ``make chaos`` prints; exits 1 when any scenario failed (an overlap among
successes, a loss not surfaced or detected too late, a leak, a trace TLC rejects), 2
when it could not start, 0 otherwise.  Scenarios that pause or kill Redis run only
against a redis-server the tool starts itself (``--redis local``, the default); against
``--redis URL`` they are listed as not run.  So are the failovers on a Redis Cluster and
a Sentinel set-up (:mod:`distlock.tools.chaos.failover_rows`), which the tool starts on
loopback after the scenarios, and which are also listed as not run where it cannot
(``redis-cli`` missing, a redis-server too old for its Cluster).  Last, the fencing
experiment (:mod:`distlock.tools.chaos.fence_experiment`): worker processes incrementing
a PostgreSQL row under the lock, with and without fences, on the ``--postgres`` database
or a PostgreSQL the tool starts (listed as not run where none is installed).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path

#: ``--redis`` value (and default) for a redis-server the tool starts itself.
LOCAL = "local"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis",
        metavar="URL",
        default=LOCAL,
        help="the Redis to test, e.g. redis://localhost:6379/0 (default: 'local', a "
        "redis-server from PATH started on a free loopback port for each scenario)",
    )
    parser.add_argument(
        "--redis-from-proxy",
        metavar="HOST:PORT",
        help="that Redis as Toxiproxy dials it, e.g. redis:6379 when Toxiproxy runs in "
        "a container next to it (default: host and port of --redis)",
    )
    parser.add_argument(
        "--toxiproxy",
        metavar="URL",
        help="a running Toxiproxy API, e.g. http://localhost:8474 (default: start "
        "$TOXIPROXY_SERVER, toxiproxy-server from PATH, or ~/go/bin/server)",
    )
    parser.add_argument(
        "--proxy-listen",
        metavar="HOST:PORT",
        help="where Toxiproxy listens for the scenarios' proxy, e.g. 0.0.0.0:26379 in a "
        "container with that port published (default: a free 127.0.0.1 port)",
    )
    parser.add_argument(
        "--proxy-address",
        metavar="HOST:PORT",
        help="where the clients reach that listener, e.g. 127.0.0.1:26379 "
        "(default: the listen address)",
    )
    parser.add_argument(
        "--scenarios",
        nargs="+",
        metavar="NAME",
        help="run only these (a name from --list, a name without -sync/-asyncio for both, "
        "'failover' for the Cluster and Sentinel failovers, or 'fencing' for the fencing "
        "experiment)",
    )
    parser.add_argument(
        "--failover-trials",
        type=_positive,
        default=1,
        metavar="N",
        help="trials of each Cluster and Sentinel failover (default: 1; each starts real "
        "processes and waits out a failover, a few seconds apiece); they run only with "
        "--redis local, and need redis-cli and redis-server 7+ for the Cluster",
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="the PostgreSQL for the fencing experiment, e.g. "
        "postgresql://user:pass@localhost:5432/scratch (default: start one from PATH or "
        "/usr/lib/postgresql/*/bin on a free loopback port); it creates the tables "
        "distlock_chaos_balance and distlock_chaos_fences, and drops them at the end "
        "unless they were there before",
    )
    parser.add_argument(
        "--postgres-reuse",
        action="store_true",
        help="let the fencing experiment overwrite the rows of its tables when they exist "
        "and hold rows already (otherwise it refuses to run)",
    )
    parser.add_argument("--json", metavar="FILE", type=Path, help="also write the report here")
    parser.add_argument(
        "--allow-nonempty",
        action="store_true",
        help="run against a Redis holding keys of others (only the scenarios' own keys, "
        "under chaos-<hex>, are written and deleted)",
    )
    parser.add_argument(
        "--detection-slack-ms",
        type=float,
        metavar="MS",
        help="scheduling slack on top of the TTL for the detection bound "
        "(default: max(150, TTL/2)); raise it on a slow, shared runner",
    )
    parser.add_argument(
        "--trace-dir",
        metavar="DIR",
        help="keep each scenario's traced trial there as NDJSON "
        "(for python -m distlock validate-trace)",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the scenarios with one line each, and exit"
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _error(message: str) -> int:
    print(f"distlock chaos: {message}", file=sys.stderr)
    return 2


def run_cli(args: argparse.Namespace) -> int:
    # Imported here: `python -m distlock` for other subcommands needs none of it.
    import redis

    from distlock.tools.chaos import failover_rows, fence_experiment, registry
    from distlock.tools.chaos.failures import NEEDS_OWN_REDIS
    from distlock.tools.chaos.report import ChaosReport
    from distlock.tools.chaos.runner import Runner, tlc_available
    from distlock.tools.chaos.targets import KEY_PREFIX, Settings, foreign_keys
    from distlock.tools.servers.redis_server import ServerNotFound, redis_server_binary
    from distlock.tools.servers.toxiproxy import (
        INSTALL_TOXIPROXY,
        ToxiproxyClient,
        ToxiproxyServer,
        connect,
        find_server_binary,
    )

    if args.list:
        every = registry.entries()
        width = max(len(e.name) for e in every)
        for entry in every:
            note = f" ({NEEDS_OWN_REDIS})" if entry.needs_own_redis else ""
            print(f"{entry.name:{width}}  {entry.summary}{note}")
        for run in failover_rows.RUNS.values():
            print(f"{run.name:{width}}  {run.summary} ({failover_rows.NEEDS_OWN_TOPOLOGY})")
        print(
            f"{fence_experiment.NAME:{width}}  {fence_experiment.SUMMARY} "
            f"({fence_experiment.NEEDS_OWN_REDIS}, and PostgreSQL)"
        )
        return 0
    fencing, rest = fence_experiment.select(args.scenarios)
    failovers, others = failover_rows.select(rest)
    try:
        entries = registry.select(others) if others != [] else []
    except KeyError as exc:
        return _error(str(exc.args[0]))

    # Where the results go exists before anything runs: a scenario that ran for nothing
    # because its trace or the report had nowhere to go is a scenario wasted.
    for folder in (args.trace_dir, None if args.json is None else args.json.parent):
        if folder is not None:
            try:
                Path(folder).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                return _error(f"cannot create the folder {str(folder)!r} for the results: {exc}")

    external = args.redis != LOCAL
    if external:
        try:
            probe = redis.Redis.from_url(args.redis, socket_timeout=10, socket_connect_timeout=10)
        except ValueError as exc:
            return _error(f"--redis {args.redis!r} is not a Redis URL: {exc}")
        try:
            foreign = foreign_keys(probe)
        except redis.RedisError as exc:
            return _error(f"cannot reach the Redis at {args.redis}: {exc}")
        finally:
            probe.close()
        if foreign and not args.allow_nonempty:
            return _error(
                f"refusing to run: the Redis at {args.redis} holds {foreign} key(s) outside "
                f"the tool's own ({KEY_PREFIX}*, distlock:fence:*, distlock:*:{KEY_PREFIX}*); "
                "point --redis at an empty database (e.g. .../15) or pass --allow-nonempty "
                "(only the scenarios' own keys are written and deleted)"
            )
    else:
        try:
            redis_server_binary()
        except ServerNotFound as exc:
            return _error(str(exc))
    if fencing and args.postgres is not None and not external:
        # A database holding someone's rows in the experiment's tables is refused before
        # anything runs, as a Redis holding others' keys is.
        try:
            fence_experiment.check_tables(args.postgres, reuse=args.postgres_reuse)
        except (fence_experiment.TableInUse, ServerNotFound) as exc:
            return _error(str(exc))
        except Exception as exc:
            return _error(f"cannot use the PostgreSQL given with --postgres: {exc}")

    validate = tlc_available()
    settings = Settings(
        toxiproxy_url=args.toxiproxy,
        redis_url=args.redis if external else None,
        redis_upstream=args.redis_from_proxy,
        proxy_listen=args.proxy_listen,
        proxy_address=args.proxy_address,
        slack_ms=args.detection_slack_ms,
        trace_dir=args.trace_dir,
        validate_traces=validate,
    )
    report = ChaosReport()
    with ExitStack() as stack:
        toxiproxy: ToxiproxyClient | None = None
        if not entries:
            pass  # the failovers alone need no Toxiproxy
        elif args.toxiproxy:
            try:
                toxiproxy = connect(args.toxiproxy)
            except (OSError, ValueError) as exc:
                return _error(f"cannot reach Toxiproxy at {args.toxiproxy}: {exc}")
        else:
            binary = find_server_binary()
            if binary is None:
                return _error(INSTALL_TOXIPROXY)
            server = ToxiproxyServer(binary)
            stack.callback(server.stop)
            server.start()
            toxiproxy = ToxiproxyClient(server.url)
        if entries and not validate:
            print(
                "distlock chaos: traces not checked against the spec (no TLC: it needs "
                "`java` on PATH and `pip install 'distlock[chaos]'`)",
                file=sys.stderr,
            )
        if toxiproxy is not None:
            runner = Runner(settings, toxiproxy, report)
            for entry in entries:
                print(f"chaos: {entry.name} ...", file=sys.stderr, flush=True)
                result = runner.run(entry)
                print(
                    f"chaos: {entry.name}: {result.status} ({result.seconds:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                if result.status == "failed":
                    print(result.message, file=sys.stderr, flush=True)
    for run in failovers:
        print(f"chaos: {run.name} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        since = len(report.rows)
        status = failover_rows.run(report, run, args.failover_trials, external=external)
        print(
            f"chaos: {run.name}: {status} ({time.monotonic() - started:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        if status == "failed":
            for row in report.rows[since:]:
                if row.status == "failed":
                    print(row.reason, file=sys.stderr, flush=True)
    if fencing:
        print(f"chaos: {fence_experiment.NAME} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        since = len(report.rows)
        status = fence_experiment.run(
            report, postgres_url=args.postgres, reuse=args.postgres_reuse, external=external
        )
        print(
            f"chaos: {fence_experiment.NAME}: {status} ({time.monotonic() - started:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        if status == "failed":
            # Both arms' rows carry one reason when the experiment itself broke.
            reasons = [row.reason for row in report.rows[since:] if row.status == "failed"]
            for reason in dict.fromkeys(reasons):
                print(reason, file=sys.stderr, flush=True)
    for line in report.table():
        print(line)
    if args.json is not None:
        report.write_json(args.json)
        print(f"(written to {args.json})")
    return 0 if report.passed else 1
