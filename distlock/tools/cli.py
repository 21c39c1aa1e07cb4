"""Command line: ``python -m distlock <subcommand> [...]``.

Each subcommand is one entry of :data:`SUBCOMMANDS`: a function adding its
arguments to a parser and a function running it (returning the exit status).
Adding a subcommand is adding one entry.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from distlock._build import describe
from distlock.tools import inspect, tracecheck, verify
from distlock.tools.chaos import cli as chaos_cli

AddArguments = Callable[[argparse.ArgumentParser], None]
RunCommand = Callable[[argparse.Namespace], int]

#: name -> (help, add_arguments, run)
SUBCOMMANDS: dict[str, tuple[str, AddArguments, RunCommand]] = {
    "verify": (
        "model-check the TLA+ specification and its broken variants with TLC",
        verify.add_arguments,
        verify.run_cli,
    ),
    "validate-trace": (
        "ask TLC whether a recorded NDJSON trace is a behaviour of the specification",
        tracecheck.add_arguments,
        tracecheck.run_cli,
    ),
    "inspect": (
        "list what is held under a prefix on one Redis node (read-only)",
        inspect.add_arguments,
        inspect.run_cli,
    ),
    "chaos": (
        "run the chaos scenarios (faults through Toxiproxy) against a Redis and print the table",
        chaos_cli.add_arguments,
        chaos_cli.run_cli,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distlock")
    # The version and which build runs (compiled with mypyc or pure Python).
    parser.add_argument("--version", action="version", version=describe())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, run) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        add_arguments(sub)
        sub.set_defaults(run=run)
    args = parser.parse_args(argv)
    run_command: RunCommand = args.run
    return run_command(args)

