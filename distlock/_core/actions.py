"""The action vocabulary shared by the TLA+ specification and the pure core.

Every client-side action of ``spec/DistLock.tla`` is one method of
:class:`distlock._core.section.Section` (``RenewSend`` is ``Section.renew_send``), with
the same guard and the same effect on the same state variables.  The
environment actions exist only in the specification: they are what the world
does to a client (time passing, Redis expiring or losing the key, replies that
are late or never come, an event loop that does not run timers).

``tests/test_parity.py`` reads the specification and fails when an action
exists on one side but not on the other.
"""

from __future__ import annotations

from typing import Final

#: Client-side actions, in the order a section usually takes them.
CLIENT_ACTIONS: Final[dict[str, str]] = {
    "Acquire": "send the acquire request (SET NX PX and mint the fence, one script)",
    "AcquireReply": "the acquire reply arrives: granted (lease runs from the send time), denied with retries left (back off), or denied for good",
    "AcquireFail": "the acquire round trip failed or was cancelled: the request may have taken effect, so release with our token before reporting",
    "RenewSend": "a heartbeat tick finds the lease still valid on the client clock and no renewal in flight: send a token-checked extend",
    "RenewReply": "the renewal reply arrives: 1 moves the deadline to send time + ttl, 0 means the key is gone or foreign (loss)",
    "RenewFail": "the renewal round trip failed (connection error): not a loss, the next tick retries",
    "LeaseTimeout": "a tick finds the deadline passed with no successful renewal: the lease is lost (covers hung renewals and starved ticks that finally run)",
    "Extend": "manual extend on a handle: send a token-checked extend",
    "ExtendReply": "manual extend reply: 1 moves the deadline, 0 fires the signal",
    "ExtendFail": "manual extend round trip failed: the error goes to the caller, not a loss",
    "BodyDone": "the body finished (returned or raised): check the deadline in the same turn",
    "Release": "send the token-checked release (compare and delete)",
    "ReleaseReply": "release reply: 1 with no loss recorded is the only success; 0 is a loss",
    "ReleaseFail": "release round trip failed or never answered: the outcome is unknown, so it is reported as a loss",
}

#: The reentrant lock's own client-side actions (``spec/Reentrant.tla``), one method each of
#: :class:`distlock._core.reentrant.ReentrantSection`.  Its outermost level takes exactly
#: the lock's actions above; these are the levels inside it, per holder.
REENTRANT_ACTIONS: Final[dict[str, str]] = {
    "Reenter": "the holder, at depth d >= 1 of a held section not known lost, sends R_ENTER with depth d+1 (a lease write: it refreshes the TTL)",
    "ReenterReply": "R_ENTER replies: 1 is depth d+1 and the deadline moves to send time + ttl, like a renewal; 0 is the loss, and the re-entry raises it",
    "ReenterFail": "R_ENTER got no reply: the depth stays d and the re-entry raises the error; not a loss (Redis may hold d+1 until the next depth write)",
    "Leave": "an inner level (depth d >= 2) exits: depth d-1 at once on the client, and R_LEAVE(d-1) is sent",
    "LeaveReply": "R_LEAVE replies: 1 is nothing more; 0 is the loss, and that inner exit raises it",
    "LeaveFail": "R_LEAVE got no reply: not a loss (the depth in Redis is advisory until the next depth write)",
}

#: The waiting acquisition's own client-side actions (``spec/Wait.tla``), one method each
#: of :class:`distlock._core.section.Section`.  A waiting attempt is the lock's
#: ``Acquire``/``AcquireReply`` with a place in the key's queue; these come in between.
WAIT_ACTIONS: Final[dict[str, str]] = {
    "Block": "a waiting attempt was refused (the waiter is in the key's queue): block on the waiter's wake list until woken or until the refusal may have run out (the holder's TTL, the head's place), never past the wait deadline",
    "Wake": "the block ended: a release handed the key over (with its fence: held, the lease counted from the last attempt) or woke the waiter, or the block's time ran out; unless held, the next attempt follows, the last one once the deadline has passed (refused, it leaves the queue in the same script)",
    "Withdraw": "a waiter that stops waiting (an error, a cancellation) removes its place and wake list and gives back a key handed to it; if it was the head, or gave a key back, and the key is free, the key goes to the next waiter (or the next is woken)",
    "WithdrawReply": "the withdrawal was answered",
    "WithdrawFail": "the withdrawal got no answer: the place expires by itself",
}

#: Environment actions: in the specification only, never in the core.
ENVIRONMENT_ACTIONS: Final[dict[str, str]] = {
    "Tick": "time advances one unit: the key expires at its instant, countdowns and message ages move; a client clock may lag (drift within the bound); a due heartbeat timer fires first unless the loop is starved",
    "RedisStep": "Redis runs one request in flight atomically (in any order: separate connections) and queues its reply",
    "DropReply": "the connection fails: the request is lost, or it ran and its reply is lost; or the client's socket timeout fires while the request still waits at Redis and runs later; the client sees an error",
    "HangReply": "no reply ever comes and no error either (a hung connection): the request may still run; acquire, extend and release time out, a renewal stays in flight",
    "Resend": "the client library resends an acquire after a connection error (redis-py Retry): the script may run twice, and its own-token branch returns the current fence and re-sets the TTL",
    "ResendRelease": "the client library resends a release whose reply was lost: Redis may run it again, and the release record answers our own release as released",
    "SharedIncr": "another key of the lock key's hash slot takes its lock: the one fence counter of the slot moves on without this key changing hands",
    "KeyLost": "Redis loses the key without expiry: eviction of the volatile key (the fence counter survives) or a restart without persistence (the counter is reset too)",
    "Starve": "the body blocks the event loop or holds the GIL until it finishes: no heartbeat tick and no reply callback runs",
    "NewSection": "the caller starts another section on the same client: a fresh Section with a fresh token",
}

ALL_ACTIONS: Final[frozenset[str]] = frozenset(CLIENT_ACTIONS) | frozenset(ENVIRONMENT_ACTIONS)


def method_name(action: str) -> str:
    """``RenewSend`` -> ``renew_send``: the core method implementing ``action``."""
    out: list[str] = []
    for i, ch in enumerate(action):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
