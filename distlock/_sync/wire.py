# Generated from distlock/_async/wire.py by tools/unasync.py: do not edit.
"""Scripts on the wire: ``EVALSHA`` (and ``EVAL`` when Redis lacks the script) through
``execute_command``, on a connection of the client's pool (:mod:`distlock._direct`), or on
a connection of its own."""

from __future__ import annotations

from functools import partial
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from distlock._core.commands import Command
from distlock._direct import packed_evalsha, reads_plainly
from distlock._protocol import Script, decode, encode

from . import backend


def eval_script(
    client: object, script: Script, keys: list[str], args: list[str | int]
) -> Any:
    """``script``'s reply through ``execute_command`` (no lock cycle goes this way)."""
    api: Any = client  # execute_command carries no annotations
    try:
        return api.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return api.execute_command("EVAL", script.source, len(keys), *keys, *args)


def call_once(
    client: backend.Redis, script: Script, keys: list[str], args: list[str | int]
) -> object:
    """One attempt on a connection of its own, with no retry (of the command or of
    the connect): the pool's connections retry as the client was configured."""
    pool: Any = client.connection_pool
    conn: Any = pool.connection_class(
        **{**pool.connection_kwargs, "retry": backend.ONE_ATTEMPT}
    )
    try:
        return script_reply(client, conn, script, keys, args)
    finally:
        conn.disconnect()


def send(client: object, command: Command, conn: Any = None, pool: Any = None) -> int:
    """``command``'s reply, decoded, sent on ``conn``, or on a connection taken from ``pool``
    (the direct send of :mod:`distlock._direct`) and given back to it at the end, whatever
    happened.  Retried as the connection's ``Retry`` says (the errors and backoff of
    execute_command's retry, disconnecting after each failure).  One coroutine does the
    whole send, its caller awaiting it directly: every coroutine between a lock cycle and
    the socket is resumed on every reply.

    A connection interrupted mid-command (a cancellation, ``KeyboardInterrupt``, or any
    error but a reply Redis sent whole) is disconnected here, so that it goes back to the
    pool with nothing unread on it and Redis forgets whatever it was still doing for it."""
    if conn is None:
        conn = pool.get_connection()
    script, keys, args = encode(command)
    try:
        try:
            # The first attempt outside the retry loop: two coroutines fewer between the
            # cycle and the socket, on every reply.
            reply = script_reply(client, conn, script, keys, args)
        except Exception as first:
            reply = backend.call_with_retry(
                conn, _Again(first, partial(script_reply, client, conn, script, keys, args))
            )
    except ResponseError:
        raise  # an error reply, read whole: the connection is clean
    except BaseException:
        backend.drop(conn)
        raise
    finally:
        if pool is not None:
            backend.give_back(pool, conn)
    return decode(command, reply)


def script_reply(
    client: Any, conn: Any, script: Script, keys: list[str], args: list[str | int]
) -> object:
    """One send of ``script``: by its hash, and by its source if Redis does not have it."""
    try:
        packed = packed_evalsha(conn, backend.CONNECTION, script, keys, args)
        if packed is None:
            conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
        else:
            conn.send_packed_command(packed)
        if reads_plainly(client, conn, backend.Redis):
            return conn.read_response()
        return client.parse_response(conn, "EVALSHA")
    except NoScriptError:
        conn.send_command("EVAL", script.source, len(keys), *keys, *args)
        return client.parse_response(conn, "EVAL")


class _Again:
    """A retry loop's attempt that takes a failure already met as the loop's first: the
    first call raises it (the loop then does what it does with a failed attempt: retry,
    with the connection's backoff and its disconnect, or raise), later calls send
    again.  The loop is the connection's ``Retry``, as ``execute_command``'s is."""

    __slots__ = ("first", "send")

    def __init__(self, first: Exception, send: Any) -> None:
        self.first: Exception | None = first
        self.send = send

    def __call__(self) -> Any:
        first = self.first
        if first is not None:
            self.first = None
            raise first
        return self.send()
