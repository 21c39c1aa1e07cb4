"""Whether a script may go straight onto a pooled connection of the client's, instead of
through the client's ``execute_command``: the one decision both drivers take before each
script they send, and before a woken waiter's attempt rides on its waiter's connection.

redis-py's ``execute_command`` costs a lock cycle more client CPU than its round trips'
own work: per command it makes a closure, reads the clock twice, records the command's
duration and errors for OpenTelemetry, takes the single-connection lock, and asks the
connection whether a maintenance notification wants it reconnected.  A direct send takes
a connection from the pool, sends and parses with the same connection methods and, where
it would do anything, the client's own ``parse_response`` (its response callbacks), retries
with the connection's ``Retry`` exactly as ``execute_command`` does (the same errors,
disconnecting on each failure), and gives the connection back.  A script's reply is read
with the connection's ``read_response`` alone where ``parse_response`` would add nothing
to it (:func:`reads_plainly`).  The script's ``EVALSHA``
is packed here (:func:`packed_evalsha`) unless the connection packs or sends its own way.
What it leaves out must therefore have nothing to do for the client, or the client sends
through ``execute_command`` as before:

- a class (or instance) that overrides or wraps ``execute_command`` or
  ``_execute_command`` would not see the command: recording clients, fault injectors and
  users' instrumented clients see every one.  A pipeline overrides it too.
- a single-connection client holds its one connection and a lock around it; the pool is
  not where its commands go.
- a pool with client-side caching hands out caching proxies whose bookkeeping is driven
  from ``execute_command``'s options.
- redis-py's observability (its OpenTelemetry metrics), once initialised, records each
  command's duration and errors; and the debug log of ``redis.client`` logs each failure.
  Both are process-wide and may be switched on at any time, so they are asked per
  command (:func:`hooks_idle`), the rest once per client (:func:`plain_client`).

Everything else ``execute_command`` does is done by the direct send too, or is no work
for a script: ``_send_command_parse_response``'s only branch is for ``HIMPORT SET``.
Maintenance notifications (on by default, ``"auto"``) act in the connection and the pool,
which a direct send goes through; the one step of theirs in ``execute_command``, a
reconnect of a connection a notification marked (``should_reconnect``), the direct send
takes as ``execute_command`` does: the sync one reconnects it before giving it back, the
asyncio one lets the pool's ``release`` disconnect it.
A Cluster client is never plain (it is not a ``redis.Redis``): it routes by slot.  A
Sentinel's ``master_for`` client is: its connections find the primary, and turn a
``READONLY`` reply from a demoted one into a disconnect and a retried ``ConnectionError``,
themselves.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from distlock._protocol import Script, pack_evalsha

#: The direct send does what redis-py 8's ``_execute_command`` does, minus the hooks above;
#: another major version may send differently (redis-py 7 and older have no
#: ``redis.observability``, and their asyncio ``Retry`` takes no failure count), so its
#: clients keep ``execute_command``.
MIRRORED_MAJOR = 8
_MIRRORED = redis.__version__.split(".", 1)[0] == str(MIRRORED_MAJOR)
if _MIRRORED:
    from redis.observability.providers import get_observability_instance

#: redis-py's client logger, whose debug level logs each failed command's connection.
_CLIENT_LOG = logging.getLogger("redis.client")
#: The methods a client that wants to see its commands overrides.
_SEND_METHODS = ("execute_command", "_execute_command")


def _keeps(cls: type, base: type, names: tuple[str, ...]) -> bool:
    """Whether ``cls`` has ``base``'s own methods of these ``names`` (none overridden)."""
    return all(getattr(cls, name, None) is getattr(base, name, None) for name in names)


def plain_client(client: object, plain: type) -> bool:
    """Whether ``client`` (a driver's client) may have its scripts sent directly: an
    instance of redis-py's ``plain`` client class whose sending is redis-py's own, over a
    pool with nothing hooked into ``execute_command``.  Fixed for the client's life."""
    if not (_MIRRORED and isinstance(client, plain)):
        return False
    own = vars(client)
    if not _keeps(type(client), plain, _SEND_METHODS) or any(n in own for n in _SEND_METHODS):
        return False
    api: Any = client
    if getattr(api, "connection", None) is not None or getattr(
        api, "single_connection_client", getattr(api, "_single_connection_client", False)
    ):
        return False
    pool = getattr(api, "connection_pool", None)
    return pool is not None and getattr(pool, "cache", None) is None


def hooks_idle() -> bool:
    """Whether no process-wide hook of ``execute_command`` would act on a command now."""
    return (
        get_observability_instance().get_provider_manager() is None
        and not _CLIENT_LOG.isEnabledFor(logging.DEBUG)
    )


#: The packers of redis-py's sync connections (absent from versions before them).
_HIREDIS_PACKER: Any = getattr(redis.connection, "HiredisRespSerializer", None)
_PYTHON_PACKER: Any = getattr(redis.connection, "PythonRespSerializer", None)
#: Connection classes by whether their ``send_command`` is redis-py's own pack-and-send.
_PACKS_AS_REDIS_PY: dict[type, bool] = {}


def packed_evalsha(
    conn: Any, base: type, script: Script, keys: list[str], args: list[str | int]
) -> list[bytes] | None:
    """``EVALSHA`` of ``script`` as the bytes ``conn`` would send, for its
    ``send_packed_command``; None when ``conn``'s class sends its own way (it overrides
    ``send_command`` or ``pack_command`` of ``base``, redis-py's connection class of the
    driver's kind), and must be given the command through ``send_command``.

    redis-py packs a command in Python, a call per argument (with hiredis, through a
    Python wrapper): for a release's 11 arguments, two to three times the time of
    :func:`distlock._protocol.pack_evalsha`, which makes the same bytes."""
    cls = type(conn)
    plain = _PACKS_AS_REDIS_PY.get(cls)
    if plain is None:
        plain = _PACKS_AS_REDIS_PY[cls] = _keeps(cls, base, ("send_command", "pack_command"))
    if not plain:
        return None
    encoder = conn.encoder
    # A sync connection packs with its packer: redis-py's own, and an asyncio connection,
    # with the client's encoding; hiredis's too where redis-py hands it the encoder's
    # ``encode`` (redis-py 8), else as strict UTF-8 whatever the client's encoding.
    # Another packer is the user's: it is given the command.
    packer = getattr(conn, "_command_packer", None)
    if (
        packer is None
        or type(packer) is _PYTHON_PACKER
        or (type(packer) is _HIREDIS_PACKER and getattr(packer, "_encode", None) is not None)
    ):
        return [pack_evalsha(script, keys, args, encoder.encoding, encoder.encoding_errors)]
    if type(packer) is _HIREDIS_PACKER:
        return [pack_evalsha(script, keys, args, "utf-8", "strict")]
    return None


#: Client classes by whether their ``parse_response`` is redis-py's own.
_PARSES_AS_REDIS_PY: dict[type, bool] = {}


def reads_plainly(client: Any, conn: Any, base: type) -> bool:
    """Whether ``client``'s ``parse_response`` would make of an ``EVALSHA`` reply on
    ``conn`` just what the connection's ``read_response`` returns, so that a direct send
    may read it with that alone: one coroutine (or call) fewer on every reply.  It would,
    unless the client's class or the client itself parses its own way (a recording
    client), a response callback is set for ``EVALSHA``, or the connection fell back to
    RESP2, where redis-py picks callbacks of its own; each of those keeps
    ``parse_response``."""
    cls = type(client)
    plain = _PARSES_AS_REDIS_PY.get(cls)
    if plain is None:
        plain = _PARSES_AS_REDIS_PY[cls] = _keeps(cls, base, ("parse_response",))
    return (
        plain
        and "parse_response" not in vars(client)
        and "EVALSHA" not in client.response_callbacks
        and not getattr(conn, "_resp2_fallback", False)
    )


class Route:
    """One driver's memo of :func:`plain_client` for the client it last sent through (a
    Lock made from a factory learns its client at first use)."""

    __slots__ = ("_client", "_plain", "_verdict")

    def __init__(self, plain: type) -> None:
        self._plain = plain
        self._client: object = None
        self._verdict = False

    def direct(self, client: object) -> bool:
        """Whether the next command through ``client`` may be sent directly."""
        if client is not self._client:
            self._verdict = plain_client(client, self._plain)
            self._client = client
        return self._verdict and hooks_idle()
