"""Renewals due in one tick go out together: one pipeline per connection, for both drivers.

The core decides which sections renew and when (:class:`~distlock._core.lease.LeaseClock`
puts renewal wake-ups on a grid, so sections with one heartbeat come due in the same tick);
each renewal is still one :func:`distlock._flows.renew` flow, started here up to its send
and finished with its own reply.  What this module adds is only the batching:

- members are grouped by the connection that carries them: one group on a plain client,
  one per node serving the keys' slots on a Redis Cluster;
- a group goes out as one pipeline (one round trip); a pipeline that fails as a whole is
  a failed round trip for every member (``RenewFail`` each);
- a member whose reply says the script is not loaded, or that its slot moved, is sent
  again on its own by the driver's single-command path, which handles both.

A renewal that must wait for replicas is never batched: ``WAIT`` counts the writes of the
connection it is sent on, so it goes alone (see :mod:`distlock._replicated`).  Nor is one
on a client that keeps a single connection (``single_connection_client=True``): a pipeline
would take a second connection from its pool, where the user asked for one.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import AskError, MovedError, NoScriptError

from distlock import _flows as flows
from distlock._core.commands import Command
from distlock._flows import Effects, Flow, H
from distlock._protocol import decode, encode

#: Replies that the single-command path answers better: it follows the slot to its new
#: node.  (The members a Redis without the script answered NOSCRIPT go again together,
#: by EVAL, which needs no permission EVALSHA does not: see :func:`unscripted`.)
RESEND = (MovedError, AskError)


class Renewal:
    """One section's renewal, sent by the core and waiting for its reply."""

    __slots__ = ("command", "flow")

    def __init__(self, command: Command, flow: Flow[None]) -> None:
        self.command = command
        self.flow = flow


def alone(client: object, command: Command) -> bool:
    """Whether ``command`` must go out by itself rather than in its tick's pipeline."""
    return bool(command.replicas) or getattr(client, "connection", None) is not None


def begin(fx: Effects[H], handle: H, command: Command) -> Renewal:
    """The renewal flow of ``command`` (the core's RenewSend already happened), run up to
    the point where it waits for the reply."""
    flow = flows.renew(fx, handle, command)
    sent = next(flow)
    assert sent is command
    return Renewal(command, flow)


def settle(renewal: Renewal, reply: int | BaseException) -> BaseException | None:
    """Hand ``renewal`` its reply (RenewReply) or its error (RenewFail).  Returns what the
    flow raised on: an interrupt (not an ``Exception``), for the caller to raise once every
    member of its batch is settled."""
    try:
        if isinstance(reply, BaseException):
            renewal.flow.throw(reply)
        else:
            renewal.flow.send(reply)
    except StopIteration:
        return None
    except BaseException as exc:
        return exc
    raise AssertionError("a renewal flow waits for one reply only")


def reply_of(renewal: Renewal, raw: object) -> int | BaseException:
    """A pipelined reply as the flow takes it: the decoded int, or the error."""
    if isinstance(raw, BaseException):
        return raw
    try:
        return decode(renewal.command, raw)
    except Exception as exc:
        return exc


def unscripted(replies: list[object]) -> list[int]:
    """Which members Redis answered NOSCRIPT (a restarted or flushed Redis)."""
    return [i for i, raw in enumerate(replies) if isinstance(raw, NoScriptError)]


def by_connection(client: object, batch: list[Renewal]) -> list[list[Renewal]]:
    """``batch`` split by the connection each member goes out on: one group for a plain
    client, one per node for a Redis Cluster (the node serving each key's slot)."""
    # Typed Any: redis-py's cluster routing API carries no annotations.
    cluster: Any = client
    if not hasattr(cluster, "get_node_from_key") or len(batch) == 0:
        return [batch] if batch else []
    groups: dict[str, list[Renewal]] = {}
    for renewal in batch:
        node = cluster.get_node_from_key(renewal.command.key)
        groups.setdefault(node.name, []).append(renewal)
    return list(groups.values())


def queue(pipe: Any, batch: list[Renewal], *, source: bool = False) -> Any:
    """Put every member's script call on ``pipe`` (a plain or cluster pipeline): by its
    SHA, or with ``source`` by its text (EVAL, which also loads it)."""
    for renewal in batch:
        script, keys, args = encode(renewal.command)
        if source:
            pipe.execute_command("EVAL", script.source, len(keys), *keys, *args)
        else:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    return pipe


def pipeline(client: object) -> Any:
    """A pipeline without MULTI: on a cluster client, one that sends each node its share."""
    api: Any = client
    if hasattr(api, "get_node_from_key"):
        return api.pipeline()
    return api.pipeline(transaction=False)
