"""A script and ``WAIT numreplicas timeout`` on one connection, for both drivers.

``WAIT`` counts the replicas that acknowledged the writes *of the connection it is sent
on*; sent on another pooled connection it could answer for an older write, and the count
would mean nothing.  So the two go out together on one connection: a pipeline of a plain
client, or, in a Redis Cluster, a connection to the primary that serves the key's slot.
A slot being moved answers ``ASK`` (the script and its ``WAIT`` go to the importing node
after ``ASKING``) or ``MOVED`` (the client's slot table is refreshed and the pair sent
again), as the cluster client does for a single command.

Only used when ``replicas`` > 0: the default path stays one script call per request.
What the count means is the core's decision (:func:`distlock._core.commands.replicated`).
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aredis
from redis.exceptions import AskError, MovedError, NoScriptError

from distlock._protocol import Script

#: A slot moves at most a few times while one request is redirected; more is a cluster
#: still reshuffling, which the caller sees as a failed round trip.
_REDIRECTS = 3

Pair = tuple[object, int]


def _calls(
    script: Script, keys: list[str], args: list[str | int], replicas: int, timeout_ms: int,
    *, source: bool, asking: bool,
) -> list[tuple[Any, ...]]:
    run: tuple[Any, ...] = (
        ("EVAL", script.source) if source else ("EVALSHA", script.sha)
    ) + (len(keys), *keys, *args)
    calls = [run, ("WAIT", replicas, timeout_ms)]
    return [("ASKING",), *calls] if asking else calls


def _result(replies: list[object]) -> Pair:
    """(script reply, replicas that acknowledged); a script error is raised."""
    reply, acked = replies[-2], replies[-1]
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(acked, BaseException):
        raise acked
    return reply, int(acked)  # type: ignore[call-overload]


#: What a reply asks of the loop that sends a script and its WAIT: nothing (the result),
#: to send again from the source, to follow an ASK, or to refresh the slots (MOVED).
_DONE, _SOURCE, _ASK, _MOVED = "done", "source", "ask", "moved"


def _next(reply: object, cluster: Any, source: bool) -> str:
    """The one decision of both drivers' loops, on the script's reply."""
    if isinstance(reply, NoScriptError) and not source:
        return _SOURCE
    if cluster is not None and isinstance(reply, AskError):
        return _ASK
    if cluster is not None and isinstance(reply, MovedError):
        return _MOVED
    return _DONE


def call_sync(
    client: redis.Redis | redis.RedisCluster,
    script: Script, keys: list[str], args: list[str | int], replicas: int, timeout_ms: int,
) -> Pair:
    # Typed Any: redis-py's cluster routing API carries no annotations.
    cluster: Any = client if isinstance(client, redis.RedisCluster) else None
    target: Any = client if cluster is None else cluster.get_node_from_key(keys[0])
    asking = source = False
    for _ in range(_REDIRECTS + 2):
        conn: Any = client if cluster is None else cluster.get_redis_connection(target)
        pipe = conn.pipeline(transaction=False)
        for call in _calls(script, keys, args, replicas, timeout_ms, source=source, asking=asking):
            pipe.execute_command(*call)
        replies = pipe.execute(raise_on_error=False)
        reply: Any = replies[-2]
        step = _next(reply, cluster, source)
        if step == _DONE:
            return _result(replies)
        if step == _SOURCE:
            source = True
        elif step == _ASK:
            target = cluster.get_node(reply.host, reply.port) or target
            asking = True
        else:
            cluster.nodes_manager.initialize()
            target = cluster.get_node_from_key(keys[0])
            asking = False
    return _result(replies)


async def call_async(
    client: aredis.Redis | aredis.RedisCluster,
    script: Script, keys: list[str], args: list[str | int], replicas: int, timeout_ms: int,
) -> Pair:
    cluster: Any = client if isinstance(client, aredis.RedisCluster) else None
    if cluster is not None:
        # An asyncio cluster client maps the slots at its first command, not when made (a
        # sync one does when made): this call, sent to the node itself, may be its first.
        await cluster.initialize()
    target: Any = None if cluster is None else cluster.get_node_from_key(keys[0])
    asking = source = False
    for _ in range(_REDIRECTS + 2):
        calls = _calls(script, keys, args, replicas, timeout_ms, source=source, asking=asking)
        if cluster is None:
            pipe: Any = client.pipeline(transaction=False)
            for call in calls:
                pipe.execute_command(*call)
            replies = list(await pipe.execute(raise_on_error=False))
        else:
            replies = await _on_node(target, calls)
        reply: Any = replies[-2]
        step = _next(reply, cluster, source)
        if step == _DONE:
            return _result(replies)
        if step == _SOURCE:
            source = True
        elif step == _ASK:
            target = cluster.get_node(reply.host, reply.port) or target
            asking = True
        else:
            await cluster.nodes_manager.initialize()
            target = cluster.get_node_from_key(keys[0])
            asking = False
    return _result(replies)


async def _on_node(node: Any, calls: list[tuple[Any, ...]]) -> list[object]:
    """Send ``calls`` on one connection of a cluster node; error replies come back as
    values, like a pipeline's with ``raise_on_error=False``."""
    conn = node.acquire_connection()
    try:
        await conn.send_packed_command(conn.pack_commands(calls))
        replies: list[object] = []
        for _ in calls:
            try:
                replies.append(await conn.read_response())
            except redis.ResponseError as error:
                replies.append(error)
    except BaseException:
        # The connection may hold unread replies: never hand it back in that state.
        await conn.disconnect()
        raise
    finally:
        node.release(conn)
    return replies
