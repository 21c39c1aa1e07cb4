"""Trace validation: is a recorded run a behaviour of ``spec/DistLock.tla``, or, for the
reentrant lock, of ``spec/Reentrant.tla``, for a semaphore, of ``spec/Semaphore.tla``, or,
for a read-write lock, of ``spec/ReadWrite.tla``?

The recorded events of the sections on one key are checked in two stages.

**A pre-pass in Python** rejects what needs no model, naming the event:

- time that runs backwards: each section's ``t`` (its monotonic clock) never decreases.
  (Between sections, file order may trail the clock by a scheduling hiccup: two threads
  read the clock, then take turns writing; that is not checked.)
- fences: ``fence`` is None until the section's grant, then the granted value on every
  later event; two grants never share a fence; and a grant whose request was sent after
  another grant's reply came back carries the larger fence (Redis's counter only grows).
  A trace that lost Redis's data (a restart without persistence resets the counter)
  declares it with a :data:`distlock.trace.DATA_LOSS` event: fences are compared within
  each stretch between declarations only.
- a waiting section's deadline (``wait_ms`` from its first attempt): it gives up on the
  refusal of an attempt sent at or after it, and only then; no block lasts past it.
- deadlines: the ``deadline`` a section records is never past the send time of the
  latest request a reply confirmed (grant, renewal, extend, re-entry; a key handed to a
  waiter: its last attempt, with the handed TTL) plus that request's TTL, the spec's
  lease (the core subtracts its drift allowance too, which only makes it earlier).

**TLC** then checks the rest against the spec.  The events become a generated TLA+
module holding a sequence literal (``TraceData``) and a trace spec (``DistLockTrace``)
that EXTENDS the real spec with a counter ``l`` into the trace.  Each step either takes
the client action named by event ``l`` for its section, with

- the observed state after it matching (phase, outcome, loss signal);
- the reply value matching: the granted/denied acquire and the 1/0 of a renewal, extend
  or release is the value the spec's Redis gave that request (so a release answered 1
  after the key expired or another section took it is no behaviour);
- the fence order matching: the model's grants are ordered at Redis as the recorded
  fences are (while the counter survives);
- elapsed time: at least ``lo`` Ticks since the section's previous event, where ``lo``
  is a conservative floor of the recorded gap (:func:`lower_bound`), so that three TTLs
  of recorded silence make the model's lease and the key's TTL run out too;

or is one of the environment's unlogged steps (Redis running a request, a dropped or
hung reply, the key lost, a starved client, time passing), which TLC finds by itself.
Time may pass only up to the next event's timestamp (in ticks of ``ttl_ms / TTL``, with
a tick of slack), which keeps the search finite.  Faults are offered only where the rest
of the trace can tell them (a reply dropped before the failure the trace reports, a
starved section before its body ends or before a timer event it could not take starved,
a key lost before some section finds it gone), and states differing only in the spec's
ghost variables are one state (``VIEW``): both keep TLC away from dead ends without
ruling out any behaviour that explains the trace.

**Rounds.**  The model's clients are fewer than a lock's sections: a section runs on a
model client whose previous section has ended (its last event leaves it ``done``) before
the section's first event, as the client's next round: the spec's ``NewSection``, a
fresh token (the old round's requests may still run at Redis, as any other's), taken as
a hidden step right before that first event (``e.fresh``) with the new section's own mode
(``AutoRenew``, ``Renews``: per client, per round).  Sections of the same Lock object go
together first, then any that do not overlap (:func:`lock_rounds`): the clients are as
many as the sections that run at once, however many run one after another (a poller's
attempts, or each failed attempt and its cleanup of a caller whose Redis is down, are a
section each).  What the trace module notes per section is per round: the recorded fence
(``Fence[c][r]``; a granted round that ended keeps its place in the fence order,
``retired``), whether it waits (``Waits[c][r]``), the places abandoned by a lost
withdrawal (named by token ``<<c, r>>``: the client may have started another round since),
and the wait notes (reset by the new round).  The view merges states that differ only in
what no step can tell: fences beyond their order (beyond being 0 once a declared data loss
lets the counter restart), the token of a key whose round has ended with nothing of it in
flight, and the send time noted for a section that is not waiting.  A semaphore's permit
sections are one model client each.

A starvation that ends mid-body (``time.sleep`` or a C call holding the GIL for a while,
then more body) is one step the spec lacks: its ``Starve`` lasts until ``BodyDone``.  The
lock's and the semaphore's trace models add ``Resume``, which ends a held section's
starvation and changes nothing else, offered where the section's next event is one a
starved section cannot take (a renewal sent or answered, the lease timeout) and comes
more than two renewal intervals after its previous one.  It only
lets the timers run again: they are due at once, the deadline is what the clock made of
it, and ``BodyDone`` still reports a body that outlived it lost, so a body reported ok
after its lease ran out during the starvation is refused.  The reentrant lock's trace
model has the same ``Resume``: ``spec/Reentrant.tla`` starves a body at any depth until
its level exits (``BodyDone``, or ``Leave`` for an inner level), so a starvation is
offered before either, and ``Resume`` ends one sooner.

Which check is where:

==================================  ===========  ======================================
corruption                          rejected by  at
==================================  ===========  ======================================
time running backwards              pre-pass     the event whose ``t`` went back
a fence that goes down, or repeats  pre-pass     the later grant (TLC also orders
                                                 grants as their fences are)
a fence changed within a section    pre-pass     the event carrying the other fence
a reader's fence that is no write's  pre-pass     the reader's grant (TLC also orders
(read-write lock), or below one                  it, equal or not, against every grant)
before its request
a deadline later than any reply     pre-pass     the event recording it
gave
a reply Redis could not have given  TLC          the reply (a release answered 1 after
                                                 the key expired or was taken, ...)
a refused renewal with no loss      TLC          the RenewReply
success long after the lease ran    TLC          the first event the model cannot reach
out; a late grant kept as held                   in time (BodyDone, AcquireReply)
==================================  ===========  ======================================

Long contended runs (chaos trials) are checked with :func:`check`'s ``condensed``,
``within_ms``, ``ticks`` and ``hang_after_ms``: a prefix of the trace, refusal runs
shortened, a coarser clock, requests that failed on their connection not left to run
later (nor, for a renewal, left queued at Redis beside its error); each keeps a genuine
trace accepted and makes TLC's search far smaller.  The lock's and the reentrant lock's
trace models have no drift allowance (``Margin`` 0, :data:`TRACE_MARGIN`): at four ticks
per TTL a whole tick of it would leave a lease of three heartbeats, and a holder whose
renewals fail sends its third one before its deadline.  The semaphore's keeps one tick
(:data:`SEMAPHORE_TRACE_MARGIN`), except where a renewal failed within a TTL of its send
(the case just described).

**Redis down.**  A trace may declare a stretch in which no Redis process ran
(:data:`distlock.trace.REDIS_DOWN`: the chaos suite's kill and restart, from the instant
its SIGKILL was sent, after which the dying process serves no request sent to it).  A round trip
sent and failed within it never ran (:func:`_never_ran`): in every trace model Redis does
not run it, no fault befalls it (none counts against ``MaxFaults``), and it fails as it
did (``Refused``).  So does one sent after the stretch's start that failed after its end
but sooner than the clients' socket timeout (``hang_after_ms``) and before the next
declaration: only the process started after the stretch could have run it, and a
request that reached that one is answered or fails by the socket timeout.  A declared
data loss followed by such a stretch happened between the
declaration and the stretch's start (:func:`loss_windows`): the key may be lost there
only, where it could be lost anywhere before.

TLC 2.15 has no way to say "some behaviour reaches the end", so the question is asked as
the invariant ``l <= Len(Trace)``: a violation (exit 12) means a behaviour consumed the
whole trace (ACCEPTED, and the counterexample is the witness); no violation (exit 0) means
none did (REJECTED), and the highest ``l`` any behaviour reached, printed by a
``CONSTRAINT``, names the first event no behaviour explains.  When the pre-pass rejects
event ``i``, TLC still checks the events before it, so the verdict names the first event
that is wrong either way.

**The reentrant lock.**  A key whose events hold a level change (``Reenter``,
``ReenterReply``, ``ReenterFail``, ``Leave``, ``LeaveReply``, ``LeaveFail``:
:func:`is_reentrant`) is checked against ``spec/Reentrant.tla`` instead
(:func:`build_reentrant_model`; ``reentrant=`` of :func:`check` forces either spec).  Its
sections, in the order they first appear, are the spec's holders ``Parent``, ``Child`` and
``Other``; a fourth and later section runs on a holder whose section has ended, as a fresh
section there (``NextSection``: nothing of the old one in flight; at most three sections
at once); the ones that re-enter are ``Deep``, and ``MaxDepth`` is the deepest level
recorded.  The trace module is the static ``spec/ReentrantTrace.tla``, the
same approach as above: each event is its holder action with the state after it (phase,
outcome, loss signal, and the ``depth`` the level events record), the reply value,
the fence order and the elapsed-time floor matching, and TLC finds the environment's
steps (time bounded by the timestamps; dropped or hung replies, a key loss or a starved
body, at any depth, only where the rest of the trace can tell them; ``Resume`` as the
lock's).  A denial with retries left (phase
``backoff``) is the spec's denial, and the retry after it the wrapper's ``RetryAcquire``
(the spec's holders do not retry).  The pre-pass is the same, so a fence changed between
levels of one section is rejected there.  A waiting section (``wait_ms``) is checked as
the lock's is (see Waiting below), with the steps of ``ReentrantTrace.tla``: a refusal with
time left is the spec's denial with the section left waiting (``e.waits``), its next
attempt a ``RetryAcquire``; ``Block``, ``Wake`` and the withdrawal change nothing (a
``Block`` or ``Wake`` only while waiting); the reentrant release hands the key as the
lock's does (``R_RELEASE``'s ``hand_head``: ``ReleaseHand``, the waiter's token at depth 1
with the handed TTL and a fresh fence), and the handed ``Wake`` is the outermost level's
grant counted from the last attempt's send (``HandedGrant``); or, as the lock's, to a
waiter whose block ran out with no element read, whose next attempt is granted that key
(``e.late``).  A place left queued by a
waiter whose withdrawal got no answer is the lock's (``AbandonedHand``,
``BehindAbandoned``, within the same bound), handed a token that is no holder's
(``Gone``): a later section run on the waiter's holder is refused while that key lasts,
as the real one is (a failed withdrawal leaves nothing of the section to run, so its
holder may take a later section).  Not checked against
``Reentrant.tla``: a granted manual handle (``Extend``).  A trace declaring a data loss
is checked as the lock's is: one key loss more, one that may reset the fence counter
(``CounterSurvives`` FALSE), fences compared by the pre-pass within each stretch between
declarations and not by TLC (``CheckFences``).

**Waiting.** A lock's waiting section (``wait_ms``) records, beside the lock's actions,
``Block``, ``Wake`` and its withdrawal (``Withdraw``, ``WithdrawReply``, ``WithdrawFail``),
checked against ``spec/DistLock.tla`` with these as client steps of the generated trace
module whose effects on the lease are the lock's: a refused attempt with time left waits in
the spec's ``backoff`` (``WaitDenied``; the last one ends not acquired), a ``Block``, a
``Wake`` without a fence and a withdrawal change nothing of the lease (a withdrawal from a
block ends not acquired), and a release may hand the key to a waiter whose next event is a
``Wake`` with a fence, or whose attempt Redis has just refused, the refusal's reply (and
the ``Block``) coming back after the release's, before such a ``Wake`` (``ReleaseHand``:
the key holds its token with the handed TTL, ``HANDED_TTL_MS`` or the section's TTL if
shorter, and a fresh fence); that ``Wake`` is the grant, counted from the last attempt's
send, renewed at once when the handed TTL is short (``HandedGrant``).  Its fence takes part
in the pre-pass and in the fence order like a granted attempt's.  A release may also hand
the key to a renewed waiter whose block ran out with no element read (a ``Wake`` with
``woken`` false and no fence: BLPOP answered nil, or Redis was paused past the block and the
client stopped reading), until its next attempt is sent, when that attempt is granted: the
attempt finds the key holding its token and is granted it, the last attempt too
(``lib/wait.lua``, ``spec/Wait.tla``'s ``Wake`` and ``RedisAttempt``); a hand that crosses
that attempt in flight is not modelled.  A waiter whose withdrawal
got no answer (``WithdrawFail``) may have left its place queued, until it ends on its own:
a release may then hand that place the key, which nobody claims and which lapses after the
handed TTL (``AbandonedHand``), and a waiting attempt may be refused on a free key, the
abandoned place being first in line (``BehindAbandoned``).  Not modelled: the queue's
order among live waiters and a handoff by a withdrawal (a withdrawing waiter's key handed on to
the next: the next waiter's handed ``Wake`` then follows a withdrawal, not a release, and
is no behaviour of the trace model). run/hold sections with ``heartbeat_ms=False`` are the
spec's ``WatchOnly`` sections (a lock's only).

**The semaphore.**  A key whose ``Acquire`` events record a ``limit`` holds a semaphore's
permit sections (:func:`is_semaphore`; ``semaphore=`` of :func:`check` forces it) and is
checked against ``spec/Semaphore.tla`` with the static ``spec/SemaphoreTrace.tla``.  A
permit takes the lock's actions and records the same transitions, so the TraceData module
and the time bounds are the lock's (:func:`build_model` with ``limit``); the cfg sets
``Limit`` to the recorded limit, which the sections of one id must share
(:func:`semaphore_limit`: callers passing different limits count against their own, and
the spec has one).  Permits have no fence: the pre-pass checks time only, and no fence
order is compared.  A declared data loss is Redis losing every permit (one fault more).
A waiting permit (``wait_ms``) records ``Block``, ``Wake`` and its withdrawal as a lock's
waiter does, with the same steps in ``SemaphoreTrace.tla`` (``WaitDenied``, ``Block``,
``Wake`` and the withdrawal change nothing of the permits), except that the semaphore's
release wakes its queue and never hands a permit over: a ``Wake`` with a fence is refused
(a TraceError), and the woken section's next attempt is an ordinary one.  A waiter whose
withdrawal got no answer may have left its place queued (the lock's bound on it, see
Waiting): a waiting attempt may then be refused on a free permit, that place being first
in line (``BehindAbandoned``; no place is ever handed a permit).  A run/hold
permit with ``heartbeat_ms=False`` is one whose renewal the spec never sends
(``Unrenewed``: a renewal in flight that no message carries, taken before its first
attempt, which its ``Acquire`` requires); its lease timer fires as a renewed one's does.

**The read-write lock.**  A key whose ``Acquire`` events record a role (``kind``: read or
write, :func:`is_readwrite`; ``readwrite=`` of :func:`check_key` forces it) holds a
read-write lock's sections, checked against ``spec/ReadWrite.tla`` with the static
``spec/ReadWriteTrace.tla`` (:func:`build_readwrite_model`).  Each section is a model
client of its own, with its recorded role and waiting (the cfg's ``Writers`` and
``Waiters``); the steps, the time bounds and the faults are the semaphore's, but for a
section with no event left: it may die (the spec's ``Die``: a process killed
mid-section records nothing more; its requests may still run, its timers never do)
where the lock's and the semaphore's starve for good; and no starvation is offered
before a late event of a section already lost, which has no timer left to hold back
(a paused Redis makes every reply late: offered there, each lost section's starvation
and its end, at any tick of the pause, cost TLC a quarter more states).  Fences:
readers share them, a read grant reporting the slot's counter as the last write left it.
The pre-pass (``readers``) therefore lets a reader's fence equal an earlier one, never go
below a fence whose reply came back before its request left; a reader's fence must be a
write's fence of the trace, or (before any write) one value below them all, the same for
every such reader (:func:`_reader_fences`); writers' fences stay strictly increasing and
unshared.  TLC compares each grant's fence with every earlier grant's, less, equal or
greater, as the recorded ones compare.  Waiting is the spec's own (a refused waiter is
``waiting``, its place queued for ``PlaceTTL`` ticks: the longest a real place lives, a
block and its grace), with two steps the core has and the spec lacks: the attempt sent at
the waiting deadline (``queue_ms`` 0) is the last, and refused it leaves the queue in the
same script (``GivenUp``) and ends the section not acquired (``LastDenied``); a withdrawal
from elsewhere than a block only sends the leave.  A withdrawal is answered once its leave
has run.  The release wakes, never hands: a ``Wake`` with a fence is a TraceError.  Not
modelled, so refused: a declared data loss (``spec/ReadWrite.tla`` has no key loss), and
another key of the slot taking a fence during the trace (a reader's fence above the last
write's: the spec's counter is the key's own).

**The election.**  A key whose events hold a campaign (an ``Acquire`` recording the
candidate's ``identity``) or an observer's ``leader()`` read (:data:`distlock.trace.LEADER_SEND`,
``LEADER_READ``, ``LEADER_FAIL``, recorded by :func:`distlock.trace.traced_leader`;
:func:`is_election`) is checked against ``spec/Election.tla`` with the static
``spec/ElectionTrace.tla`` (:func:`build_election_model`).  A campaign is the lock's
waiting section with the handoff, action for action, so the sections are the lock's
trace model's rows, as above (the generated ``DistLockTrace``, which
``ElectionTrace.tla`` EXTENDS): a resignation that hands the lease to the campaigner
first in line is the release's ``ReleaseHand``, a campaign whose ``wait_ms`` ran out a
waiter refused at its deadline, a killed leader a section that stops (its key lapses at
its TTL).  What the election adds is checked there: each read's script runs at one
instant between its send and its reply, and reports the identity and the fence of the
section whose token the key holds then (the leader record every grant writes in the same
step), or nobody while the key is free: a read naming a candidate never granted, one
whose lease has ended, or a fence not the last granted to the key's holder is no
behaviour.  A fence is compared by its rank among the sections' recorded fences; a read's
fence no section recorded (its grant's reply lost) matches only a holder with no recorded
grant.  Observers have no fences or deadlines of their own: the pre-pass checks only
their clocks.
"""

from __future__ import annotations

import argparse
import functools
import math
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from distlock._core.actions import CLIENT_ACTIONS, REENTRANT_ACTIONS, WAIT_ACTIONS
from distlock._core.waiting import HANDED_TTL_MS, LONGEST_BLOCK_MS, QUEUE_GRACE_MS
from distlock.tools import specfiles
from distlock.trace import (
    DATA_LOSS,
    DECLARATIONS,
    LEADER_ACTIONS,
    LEADER_FAIL,
    LEADER_READ,
    LEADER_SEND,
    REDIS_DOWN,
)

#: Ticks per TTL in the generated model (the spec's TTL constant), by default.  Fewer
#: ticks make TLC's search smaller and the timing checks coarser.
TTL_TICKS: Final = 8
#: The model must let at least ``floor(LOWER_RATE * gap / tick) - LOWER_SLACK_TICKS`` Ticks
#: pass between two events of one section ``gap`` ms apart.  Both terms are slack for what
#: the model does not have: its timers fire on the tick (a real one fires late, and those
#: delays add up over a run of renewals while another section waits), its lease ends on
#: a tick, and timestamps fall between ticks.
LOWER_RATE: Final = 0.75
LOWER_SLACK_TICKS: Final = 2
#: Faults (drops, hangs, key losses, starvation) the model may use beyond one per
#: failed round trip in the trace.
SPARE_FAULTS: Final = 2
#: The spec's ``Margin`` (ticks cut from every lease) in the trace models: none.  The
#: core's lease ends its drift allowance (``drift_factor``, 1% of the TTL by default)
#: before the key's TTL, less than one tick at any ``ticks`` used here; a whole tick in
#: its place is no over-approximation, and at 4 ticks per TTL (the chaos traces) it leaves
#: the model's lease a heartbeat short: renewing every quarter TTL, a section whose
#: renewals fail on a dead connection sends the third one after its last confirmed
#: renewal 150 ms into a 198 ms lease (TTL 200 ms), where the model's lease of 3 ticks
#: has already run out.  With none, the model's lease is the key's TTL from the send,
#: the bound the pre-pass holds the recorded deadlines to.
TRACE_MARGIN: Final = 0
#: The semaphore's trace model keeps its margin of one tick for now: with none, a
#: semaphore's hang trial (two permits, three victims, TTL 500 ms) took TLC's search
#: past 780,000 states in a minute, where TLC's disk queue failed; with one, every
#: semaphore trial the suite traces was accepted in the fresh-clone runs before.
SEMAPHORE_TRACE_MARGIN: Final = 1
#: ... but none in a trace where a renewal failed within a TTL of its send (a connection
#: refused while Redis is down): the holder goes on renewing within its lease, and with a
#: tick cut from it the model's lease runs out a heartbeat before the core's (see
#: :data:`TRACE_MARGIN`), so a genuine trace is no behaviour.

#: The reply events, and the kind of request each answers (the spec's message kinds).
REPLY_KIND: Final[dict[str, str]] = {
    "AcquireReply": "acquire",
    "RenewReply": "renew",
    "ExtendReply": "extend",
    "ReleaseReply": "release",
}
#: For each kind of request: the event that sends it, and the one that reports it failed.
SEND_OF: Final = {
    "acquire": "Acquire",
    "renew": "RenewSend",
    "extend": "Extend",
    "release": "Release",
}
FAIL_OF: Final = {
    "acquire": "AcquireFail",
    "renew": "RenewFail",
    "extend": "ExtendFail",
    "release": "ReleaseFail",
}

#: The reentrant lock (``spec/Reentrant.tla``): its reply events and message kinds, the
#: events that send and fail each kind, and the failures after which the key may be gone.
R_REPLY_KIND: Final[dict[str, str]] = {
    "AcquireReply": "acquire",
    "RenewReply": "renew",
    "ReenterReply": "enter",
    "LeaveReply": "leave",
    "ReleaseReply": "release",
}
R_SEND_OF: Final = {
    "acquire": "Acquire",
    "renew": "RenewSend",
    "enter": "Reenter",
    "leave": "Leave",
    "release": "Release",
}
R_FAIL_OF: Final = {
    "acquire": "AcquireFail",
    "renew": "RenewFail",
    "enter": "ReenterFail",
    "leave": "LeaveFail",
    "release": "ReleaseFail",
}
_R_REPLY_OF: Final = {kind: action for action, kind in R_REPLY_KIND.items()}
_REPLY_OF: Final = {kind: action for action, kind in REPLY_KIND.items()}
#: The holder actions of ``spec/Reentrant.tla`` (the lock's, without the manual extend).
R_ACTIONS: Final = (
    (frozenset(CLIENT_ACTIONS) - {"Extend", "ExtendReply", "ExtendFail"})
    | frozenset(REENTRANT_ACTIONS)
    | frozenset(WAIT_ACTIONS)
)
#: The spec's holders, in the order a trace's sections are mapped onto them.
R_HOLDERS: Final = ("Parent", "Child", "Other")

TRACE_SPEC: Final = """------------------------- MODULE DistLockTrace -------------------------
(* Generated by distlock.tools.tracecheck: the recorded trace in TraceData, checked  *)
(* against the real spec.  Invariant Unexplained is VIOLATED iff a behaviour   *)
(* of DistLock explains the whole trace.                                        *)
EXTENDS DistLock, TraceData, TLC

VARIABLES l, now, at, wsent, handed, withdrawing, retired

ASSUME TLCSet(1, 0)

(* Waiting (spec/Wait.tla's client actions), on this spec's lease.  A waiting    *)
(* section's refused attempt leaves it in the spec's "backoff" (the core's       *)
(* "waiting"); wsent[c] is when its latest attempt left (trace time: no drift).   *)
(* A release may hand the key to a waiter whose next event is a Wake with a fence *)
(* (e.hand): the key holds its token with HandTTL (the waiter's short handed TTL, *)
(* in ticks) and a fresh fence, handed[c]; the Wake is then a grant counted from  *)
(* the last attempt's send.  Or to a waiter whose block ran out with no element  *)
(* read, before its next attempt's send: that attempt is granted the key.  Any    *)
(* other Block, Wake or withdrawal changes nothing of the lease.                  *)
WaitVars == <<wsent, handed, withdrawing>>

WaitDenied(c) ==
    /\\ phase[c] = "acquiring"
    /\\ \\E m \\in net :
        /\\ Mine(m, c, "acquire") /\\ m.st = "done" /\\ m.val = 0
        /\\ net' = net \\ {m}
    /\\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    \\* refused with time left: block; refused at the deadline (the last attempt): give up
    /\\ \\E last \\in BOOLEAN :
        /\\ phase' = [phase EXCEPT ![c] = IF last THEN "done" ELSE "backoff"]
        /\\ outcome' = [outcome EXCEPT ![c] = IF last THEN "not_acquired" ELSE @]
    /\\ UNCHANGED <<retries_left, token, fence, deadline_in, renew_in_flight, renew_sent_ago,
                   next_renew_in, lost, extend_in_flight, extend_sent_ago, auto_renew, renews,
                   extend_ttl, unconfirmed_ttl>>
    /\\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\\ UNCHANGED ghost_vars

WaitReply(c) == \\/ AcquireReply(c) /\\ phase'[c] = "held"
                \\/ WaitDenied(c)

(* A Wake that hands over the key: the lock's grant, counted from the last      *)
(* attempt's send, with the handed TTL; a renewed section whose handed TTL is   *)
(* short renews at once.                                                        *)
HandedGrant(c) ==
    LET ago == now - wsent[c]
        lease == LeaseOf(HandTTL, ago)
    IN
    /\\ handed[c] > 0
    /\\ phase' = [phase EXCEPT ![c] = "held"]
    /\\ fence' = [fence EXCEPT ![c] = handed[c]]
    /\\ deadline_in' = [deadline_in EXCEPT ![c] = lease]
    /\\ next_renew_in' = [next_renew_in EXCEPT ![c] =
                           IF ~renews[c] \\/ HandTTL < TTL THEN 0 ELSE Max(Heartbeat - ago, 0)]
    /\\ lost' = [lost EXCEPT ![c] = lease = 0]
    /\\ overlap' = [d \\in Clients |->
                     IF d = c THEN {token[x] : x \\in {y \\in Clients : InBody(y)}}
                     ELSE IF InBody(d) THEN overlap[d] \\cup {token[c]}
                     ELSE overlap[d]]
    /\\ UNCHANGED <<outcome, retries_left, token, sent_ago, renew_in_flight, renew_sent_ago,
                   extend_in_flight, extend_sent_ago, auto_renew, renews, extend_ttl,
                   unconfirmed_ttl>>
    /\\ UNCHANGED env_vars
    /\\ UNCHANGED <<oks, late, grants, foreign, wiped, consec_fail, renewed>>

WaitBlock(c) == phase[c] = "backoff" /\\ UNCHANGED vars

WaitWake(c, e) ==
    /\\ phase[c] = "backoff"
    /\\ IF e.kind = "hand" THEN HandedGrant(c) ELSE UNCHANGED vars

(* Withdraw: a waiter that stops waiting ends not acquired; from elsewhere (an   *)
(* attempt that failed) it changes nothing of the lease.                         *)
WaitWithdraw(c) ==
    /\\ ~withdrawing[c]
    /\\ IF phase[c] = "backoff"
       THEN /\\ phase' = [phase EXCEPT ![c] = "done"]
            /\\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
       ELSE UNCHANGED <<phase, outcome>>
    /\\ UNCHANGED <<retries_left, token, fence, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, lost, extend_in_flight, extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\\ UNCHANGED env_vars
    /\\ UNCHANGED ghost_vars

(* The release script hands the key it deletes to the section of token t: the *)
(* token, the handed TTL and a fresh fence. *)
HandKey(m, t) ==
    /\\ m \\in net /\\ m.st \\in {"sent", "hung"} /\\ m.kind = "release"
    /\\ key_holder = m.tok
    /\\ key_holder' = t
    /\\ key_ttl' = HandTTL
    /\\ fence_ctr' = fence_ctr + 1
    /\\ grants' = Append(grants, [tok |-> t, fence |-> fence_ctr + 1])
    /\\ released' = IF ResendReleases \\/ Manual THEN released \\cup {m.tok} ELSE released
    /\\ Answer(m, 1)
    /\\ UNCHANGED client_vars
    /\\ UNCHANGED <<starved, drift, faults, queue>>
    /\\ UNCHANGED <<overlap, oks, late, foreign, wiped, consec_fail, renewed>>
    /\\ UNCHANGED <<wsent, withdrawing>>

(* ... to the waiter c, queued: refused and waiting, or refused at Redis with the *)
(* reply still on its way. *)
ReleaseHand(m, c) ==
    /\\ handed[c] = 0
    /\\ \\/ phase[c] = "backoff"
       \\/ /\\ phase[c] = "acquiring"
          /\\ \\E r \\in net : Mine(r, c, "acquire") /\\ r.st = "done" /\\ r.val = 0
    /\\ HandKey(m, token[c])
    /\\ handed' = [handed EXCEPT ![c] = fence_ctr + 1]

(* ... to a waiter that has gone, whose withdrawal got no answer (e.abandoned,  *)
(* the tokens of such sections: its client may have started another round      *)
(* since): its place may still be in the queue, ahead of any later waiter's.    *)
(* Nobody takes that key: it lapses after the handed TTL.                        *)
AbandonedHand(m, t) == HandKey(m, t) /\\ UNCHANGED handed

(* A waiting attempt refused on a free key: an abandoned place is first in line. *)
BehindAbandoned(m) ==
    /\\ m \\in net /\\ m.st \\in {"sent", "hung"} /\\ m.kind = "acquire"
    /\\ key_holder = NoToken /\\ Waits[m.tok[1]][m.tok[2]]
    /\\ net' = ((net \\ {m}) \\ WakeupsOf(m.tok))
              \\cup (IF Awaited(m) /\\ m.st = "sent"
                    THEN {[m EXCEPT !.st = "done", !.val = 0]} ELSE {})
    /\\ UNCHANGED client_vars
    /\\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\\ UNCHANGED ghost_vars
    /\\ UNCHANGED WaitVars

Logged(e) ==
    LET c == e.c IN
    CASE {cases}
      [] e.a = "Block"         -> WaitBlock(c) /\\ UNCHANGED WaitVars
      [] e.a = "Wake"          -> WaitWake(c, e)
                                  /\\ handed' = [handed EXCEPT ![c] = 0]
                                  /\\ UNCHANGED <<wsent, withdrawing>>
      [] e.a = "Withdraw"      -> WaitWithdraw(c)
                                  /\\ withdrawing' = [withdrawing EXCEPT ![c] = TRUE]
                                  /\\ UNCHANGED <<wsent, handed>>
      [] e.a \\in {"WithdrawReply", "WithdrawFail"} ->
                                  /\\ withdrawing[c] /\\ UNCHANGED vars
                                  /\\ withdrawing' = [withdrawing EXCEPT ![c] = FALSE]
                                  /\\ UNCHANGED <<wsent, handed>>

(* The core's state after its step. *)
Observed(e) ==
    LET c == e.c IN
    /\\ phase'[c] = e.phase
    /\\ outcome'[c] = e.outcome
    /\\ lost'[c] = e.lost

(* The reply the core was handed is the one the spec's Redis gave that request. *)
Answered(e) ==
    e.kind # "" =>
        \\A m \\in net \\ net' : Mine(m, e.c, e.kind) => ((m.val > 0) = e.ok)

(* Grants (a granted attempt, a key handed over) are ordered at Redis as their *)
(* recorded fences are: the other clients' current rounds (Fence[d][r]: the      *)
(* recorded fence of round r of client d), and the rounds that ended (retired:   *)
(* <<model fence, recorded fence>> of each granted one).                         *)
Fenced(e) ==
    (CheckFences /\\ e.kind \\in {"acquire", "hand"} /\\ e.ok) =>
        /\\ \\A d \\in Clients \\ {e.c} :
            fence[d] > 0 => ((fence'[e.c] > fence[d]) = (e.fence > Fence[d][token[d][2]]))
        /\\ \\A p \\in retired : (fence'[e.c] > p[1]) = (e.fence > p[2])

(* At least e.lo ticks since the section's previous event (at[c] is when it was taken). *)
Elapsed(e) == now >= at[e.c] + e.lo

(* Trace only: the body stops starving the timers before it ends (time.sleep or a *)
(* C call that returns mid-body).  The spec's Starve lasts until BodyDone; this    *)
(* ends it sooner, and only that: the section is held and starved, and nothing     *)
(* else moves.  Its timers are then due at once (Tick waits for them), its         *)
(* deadline is what the clock made of it, and BodyDone still judges the body on    *)
(* that deadline.  Offered where the section's next event is one a starved         *)
(* section cannot take (Trace[l].resume, see tracecheck._plausible_faults).        *)
Resume(c) ==
    /\\ phase[c] = "held" /\\ starved[c]
    /\\ starved' = [starved EXCEPT ![c] = FALSE]
    /\\ UNCHANGED client_vars
    /\\ UNCHANGED <<drift, key_holder, key_ttl, fence_ctr, released, faults, net, queue>>
    /\\ UNCHANGED ghost_vars

(* The next round of client c, whose previous section has ended (phase "done"), *)
(* right before the new section's first event (e.fresh): the spec's NewSection *)
(* (a fresh token; requests of the old round may still run at Redis), with the *)
(* new section's own mode.  The trace's notes of the old round start over, and  *)
(* a granted old round keeps its place in the fence order (retired).             *)
NextRound(c) ==
    LET r == token[c][2] + 1 IN
    /\\ NewSection(c)
    /\\ auto_renew'[c] = AutoRenew[c][r] /\\ renews'[c] = Renews[c][r]
    /\\ wsent' = [wsent EXCEPT ![c] = 0]
    /\\ handed' = [handed EXCEPT ![c] = 0]
    /\\ withdrawing' = [withdrawing EXCEPT ![c] = FALSE]
    /\\ retired' = IF CheckFences /\\ fence[c] > 0
                   THEN retired \\cup {<<fence[c], Fence[c][r - 1]>>} ELSE retired

(* A dropped renewal that failed on its connection (not in e.hang: sooner than  *)
(* the socket timeout) is not also left queued at Redis to run later.            *)
NoneLeftQueued == {x \\in net' : x.st = "hung"} \\subseteq net

(* A request that never ran (sent and failed while no Redis process ran:       *)
(* e.unsent, from its send to its failure): Redis does not run it and no fault   *)
(* befalls it; right before its failure (e.refused) it fails as it did, unrun    *)
(* and without a fault.                                                          *)
NoRun(m) == <<m.tok[1], m.kind>> \\in Trace[l].unsent /\\ m.tok = token[m.tok[1]]

Refused(m) ==
    /\\ m \\in net /\\ m.st = "sent" /\\ Awaited(m)
    /\\ <<m.tok[1], m.kind>> \\in Trace[l].refused
    /\\ net' = (net \\ {m}) \\cup {[m EXCEPT !.st = "error"]}
    /\\ UNCHANGED client_vars
    /\\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\\ UNCHANGED ghost_vars

(* Faults only where the rest of the trace can tell them (drop, hang, starve and   *)
(* keylost of each event: see tracecheck._plausible_faults); any other would only  *)
(* lead TLC down dead ends.                                                         *)
Hidden ==
    \\/ /\\ Tick /\\ now < Trace[l].k /\\ now' = now + 1 /\\ UNCHANGED WaitVars
    \\/ /\\ \\/ \\E m \\in net : ~NoRun(m) /\\ RedisStep(m)
          \\/ \\E m \\in net : Refused(m)
          \\/ \\E m \\in net : <<m.tok[1], m.kind>> \\in Trace[l].drop /\\ DropReply(m)
                /\\ (<<m.tok[1], m.kind>> \\notin Trace[l].hang => NoneLeftQueued)
          \\/ \\E m \\in net : <<m.tok[1], m.kind>> \\in Trace[l].hang /\\ HangReply(m)
          \\/ Trace[l].keylost /\\ KeyLost
          \\/ \\E c \\in Trace[l].starve : Starve(c)
          \\/ \\E c \\in Trace[l].resume : Resume(c)
       /\\ UNCHANGED <<now, WaitVars>>
    \\/ \\E m \\in net, c \\in Trace[l].hand : ~NoRun(m) /\\ ReleaseHand(m, c) /\\ UNCHANGED now
    \\/ \\E m \\in net, t \\in Trace[l].abandoned : ~NoRun(m) /\\ AbandonedHand(m, t)
                                                 /\\ UNCHANGED now
    \\/ Trace[l].abandoned # {} /\\ \\E m \\in net : ~NoRun(m) /\\ BehindAbandoned(m)
                                 /\\ UNCHANGED now

(* The hidden steps, and the next round where the trace starts one. *)
HiddenOrRound ==
    \\/ Hidden /\\ UNCHANGED retired
    \\/ Trace[l].fresh /\\ NextRound(Trace[l].c) /\\ UNCHANGED now

TraceInit ==
    /\\ Init
    /\\ auto_renew = [c \\in Clients |-> AutoRenew[c][1]]
    /\\ renews = [c \\in Clients |-> Renews[c][1]]
    /\\ l = 1
    /\\ now = 0
    /\\ at = [c \\in Clients |-> 0]
    /\\ wsent = [c \\in Clients |-> 0]
    /\\ handed = [c \\in Clients |-> 0]
    /\\ withdrawing = [c \\in Clients |-> FALSE]
    /\\ retired = {}

TraceNext ==
    /\\ l <= Len(Trace)
    /\\ \\/ /\\ Elapsed(Trace[l])
          /\\ Logged(Trace[l]) /\\ Observed(Trace[l])
          /\\ Answered(Trace[l]) /\\ Fenced(Trace[l])
          /\\ at' = [at EXCEPT ![Trace[l].c] = IF Trace[l].keep THEN now ELSE 0]
          /\\ l' = l + 1 /\\ UNCHANGED <<now, retired>>
       \\/ /\\ HiddenOrRound /\\ UNCHANGED <<l, at>>

Unexplained == l <= Len(Trace)

(* States that differ only in the spec's ghost variables (kept for its properties, *)
(* read by no action) have the same futures: TLC keeps one of them.  So do states  *)
(* that differ only in                                                             *)
(* - the fences, not in their order: a step reads a fence only to order it against *)
(*   another (Fenced) or to tell it from 0, and the counter's next value is above  *)
(*   them all (without CheckFences: only which are 0, the counter may restart);    *)
(* - the token in the key, where its round has ended and no request of it is left: *)
(*   a step reads it only to compare it with a request's token;                    *)
(* - when a section that is not waiting last sent an attempt (wsent).               *)
FenceSet == {fence_ctr} \\cup {fence[c] : c \\in Clients} \\cup {handed[c] : c \\in Clients}
            \\cup {p[1] : p \\in retired} \\cup {m.val : m \\in {x \\in net : x.kind = "acquire"}}
Rank(x) == IF x = 0 THEN 0
           ELSE IF CheckFences THEN Cardinality({y \\in FenceSet : 0 < y /\\ y <= x})
           ELSE 1
Dead(t) == t # NoToken /\\ t[2] < token[t[1]][2] /\\ ~\\E m \\in net : m.tok = t
TraceView ==
    <<phase, outcome, retries_left, token, [c \\in Clients |-> Rank(fence[c])], deadline_in,
      sent_ago, renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
      extend_sent_ago, lost, auto_renew, renews, extend_ttl, unconfirmed_ttl,
      starved, drift, IF Dead(key_holder) THEN <<0, 0>> ELSE key_holder, key_ttl,
      Rank(fence_ctr), released, faults,
      {IF m.kind = "acquire" THEN [m EXCEPT !.val = Rank(m.val)] ELSE m : m \\in net}, queue,
      l, now, at,
      [c \\in Clients |-> IF phase[c] \\in {"acquiring", "backoff"} THEN wsent[c] ELSE 0],
      [c \\in Clients |-> Rank(handed[c])], withdrawing,
      {<<Rank(p[1]), p[2]>> : p \\in retired}>>

Progress == IF l > TLCGet(1) THEN TLCSet(1, l) /\\ PrintT(<<"reached", l>>) ELSE TRUE
=============================================================================
"""


class TraceError(ValueError):
    """The trace cannot be checked against the spec (not a failed check: a misuse)."""


@dataclass
class Verdict:
    """The answer for the sections of one key."""

    key: str
    accepted: bool
    events: int
    sections: int
    seconds: float
    #: Index (0-based, into this key's events) and the event no behaviour explains.
    first_unexplained: int | None = None
    event: dict[str, Any] | None = None
    #: Who rejected it ("pre-pass" or "TLC") and why.
    by: str | None = None
    reason: str | None = None
    exit_code: int = 0
    output: str = field(default="", repr=False)

    def describe(self) -> str:
        head = f"{self.key}: {self.sections} section(s), {self.events} events"
        if self.accepted:
            return f"{head}: ACCEPTED by TLC in {self.seconds:.1f}s"
        where = (
            f"event {self.first_unexplained + 1} {self.event}"
            if self.first_unexplained is not None
            else "an unknown event"
        )
        return f"{head}: REJECTED in {self.seconds:.1f}s by the {self.by}: {self.reason}: {where}"


spec_dir = specfiles.spec_dir
tla2tools = specfiles.tla2tools


def _is_declaration(event: dict[str, Any]) -> bool:
    return event.get("action") in DECLARATIONS


def _is_read(event: dict[str, Any]) -> bool:
    """Whether ``event`` is an election observer's (a ``leader()`` read's), no section's."""
    return event.get("action") in LEADER_ACTIONS


def _read_key(event: dict[str, Any]) -> str:
    key = event.get("key")
    if not isinstance(key, str):
        raise TraceError(f"a leader read without its election's key: {event}")
    return key


def _data_losses(events: Sequence[dict[str, Any]]) -> int:
    """How many data losses ``events`` declare."""
    return sum(1 for e in events if e.get("action") == DATA_LOSS)


def down_windows(events: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """The stretches (ms, from, to) in which ``events`` declare that no Redis process ran
    (:data:`distlock.trace.REDIS_DOWN`)."""
    windows = []
    for e in events:
        if e.get("action") == REDIS_DOWN:
            since = e.get("since")
            if isinstance(since, bool) or not isinstance(since, int | float):
                raise TraceError(f"a {REDIS_DOWN} declaration without a time since: {e}")
            windows.append((float(since), _time(e)))
    return windows


def _unrun_windows(
    events: Sequence[dict[str, Any]], hang_after_ms: float = 0.0
) -> list[tuple[float, float, float]]:
    """For each stretch ``events`` declare without Redis (:func:`down_windows`): its start,
    its end, and how soon after its end a round trip sent after its start must have
    failed to have certainly never run (see :func:`_never_ran`): ``hang_after_ms`` (the
    clients' socket timeout), cut short by the next declaration (the new process may be
    killed after it)."""
    out = []
    declared = sorted(_time(e) for e in events if _is_declaration(e))
    for since, until in down_windows(events):
        later = [t for t in declared if t > until]
        out.append((since, until, min([until + hang_after_ms, *later])))
    return out


def _never_ran(
    events: Sequence[dict[str, Any]],
    windows: Sequence[tuple[float, float, float]],
    *,
    reentrant: bool = False,
) -> set[int]:
    """The failure events among ``events`` (no declarations) whose request certainly never
    ran at Redis (``windows``: :func:`_unrun_windows`).

    Sent (its send event's ``t``, read before it went out) and failed (the failure's, read
    after the call returned) within one stretch in which no Redis process ran
    (:func:`down_windows`): nothing could run it then, and a request is never carried
    over to a Redis started later: its connection is gone with the process it reached (a
    proxy in between dials Redis for each connection it accepts, and closes the ones it
    cannot).

    Or sent at or after such a stretch's start and failed after its end, but sooner after
    it than the clients' socket timeout (``hang_after_ms``, when :func:`check` is told it)
    and before the next declaration: the process that ran before the stretch had exited
    when it was sent, so only the one started after it could run it, on a connection made
    to it after the stretch (a fresh one: the old connections died with the old process);
    a request that reached it is answered (the new process is not stopped before the
    next declaration), so its round trip fails only when the socket timeout runs out, a
    timeout after the stretch's end.  One that failed sooner never reached it: a
    connection refused before the new process listened, or one to the old process."""
    if not windows:
        return set()
    send_of = R_SEND_OF if reentrant else SEND_OF
    fail_of = R_FAIL_OF if reentrant else FAIL_OF
    reply_of = _R_REPLY_OF if reentrant else _REPLY_OF
    sent: dict[tuple[str, str], float] = {}
    out: set[int] = set()
    for n, e in enumerate(events):
        client, action = str(e["client"]), e["action"]
        for kind, send in send_of.items():
            if action == send:
                sent[(client, kind)] = _time(e)
            elif action in (reply_of[kind], fail_of[kind]):
                at = sent.pop((client, kind), None)
                if action == fail_of[kind] and at is not None:
                    t = _time(e)
                    if any(
                        since <= at and (t <= until or t < by) for since, until, by in windows
                    ):
                        out.add(n)
    return out


def loss_windows(events: Sequence[dict[str, Any]]) -> list[tuple[float, float]] | None:
    """When the data losses ``events`` declare happened (ms, from, to): each between its
    declaration and the start of the next stretch in which no Redis ran (the process that
    lost the data had exited by then).  None when none is declared, or some declared loss
    has no such stretch after it: a loss may then have come at any time."""
    windows: list[tuple[float, float]] = []
    declared: list[float] = []
    for e in events:
        if e.get("action") == DATA_LOSS:
            declared.append(_time(e))
        elif e.get("action") == REDIS_DOWN and declared:
            ((since, _),) = down_windows([e])
            windows += [(t, since) for t in declared if t <= since]
            declared = [t for t in declared if t > since]
    return windows if windows and not declared else None


def never_ran_failures(
    events: Sequence[dict[str, Any]], *, reentrant: bool = False, hang_after_ms: float = 0.0
) -> int:
    """How many failed round trips of ``events`` (declarations included) certainly never
    ran at Redis (see :func:`_never_ran`; ``hang_after_ms``: the clients' socket timeout,
    if known): no fault the model has to place."""
    logged = [e for e in events if not _is_declaration(e)]
    windows = _unrun_windows(events, hang_after_ms)
    return len(_never_ran(logged, windows, reentrant=reentrant))


def split_by_key(events: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The events of each key, in order: a section's key is on its Acquire event.

    A data-loss declaration goes to the key it names, or to every key if it names none.
    """
    key_of: dict[str, str] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if _is_declaration(e):
            continue
        if _is_read(e):
            out.setdefault(_read_key(e), [])
            continue
        client = str(e["client"])
        if client not in key_of:
            if e["action"] != "Acquire" or "key" not in e:
                raise TraceError(f"section {client!r} does not start with an Acquire event")
            key_of[client] = str(e["key"])
        out.setdefault(key_of[client], [])
    for e in events:
        if _is_declaration(e):
            named = e.get("key")
            for key, evs in out.items():
                if named is None or named == key:
                    evs.append(e)
        elif _is_read(e):
            out[_read_key(e)].append(e)
        else:
            out[key_of[str(e["client"])]].append(e)
    return out


def condense(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` without the middle of each run of refused attempts of a section.

    A section polling a held key (retries every few ms) records an Acquire and a refusal
    per attempt, hundreds in a contended run, and each costs TLC a step of search.  In
    the spec a refusal changes nothing but the section's retries left, so a behaviour for
    the whole trace is one for the condensed trace: a trace the spec explains stays
    explained (the check is weaker, never stricter).  The first and last refusal of a run
    stay, as evidence that the key was held then; a section that gives up keeps all its
    attempts, since then their count matters.

    A semaphore's or a read-write lock's caller polling with fail-fast sections
    (``retries=0``: one refused attempt, one section, each a model client of its own) is
    condensed the same way: of a run of such refused sections of one object back to back,
    the first and the last stay.  A refused fail-fast section leaves nothing behind (no
    permit or lease, no place queued, nothing in flight, no release memory), so a
    behaviour of the whole trace without its steps is one of the condensed trace.
    """
    by_client: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        if not _is_declaration(e):
            by_client.setdefault(str(e["client"]), []).append(i)
    drop: set[int] = set()
    for indices in by_client.values():
        if any(events[i].get("outcome") == "not_acquired" for i in indices):
            continue
        # Refused attempts, by the position of their Acquire among the section's events;
        # a run is a stretch of them back to back (positions two apart).
        starts = [
            k
            for k in range(len(indices) - 1)
            if events[indices[k]]["action"] == "Acquire"
            and events[indices[k + 1]]["action"] == "AcquireReply"
            and not events[indices[k + 1]].get("granted")
            and events[indices[k + 1]].get("phase") == "backoff"
        ]
        runs: list[list[int]] = []
        for k in starts:
            if runs and runs[-1][-1] + 2 == k:
                runs[-1].append(k)
            else:
                runs.append([k])
        for run in runs:
            drop.update(indices[k + j] for k in run[1:-1] for j in (0, 1))
    # A semaphore's fail-fast sections, refused: their runs per Semaphore object.
    refused_runs: dict[str, list[list[str]]] = {}
    for client, indices in by_client.items():
        first = events[indices[0]]
        refused = (
            len(indices) == 2
            and first["action"] == "Acquire"
            and ("limit" in first or first.get("kind") in RW_ROLES)
            and not first.get("wait_ms")
            and events[indices[1]]["action"] == "AcquireReply"
            and events[indices[1]].get("granted") is False
            and events[indices[1]].get("outcome") == "not_acquired"
        )
        runs_of = refused_runs.setdefault(_lock_object(client), [[]])
        if refused:
            runs_of[-1].append(client)
        elif runs_of[-1]:
            runs_of.append([])
    for runs_of in refused_runs.values():
        for run_of in runs_of:
            drop.update(i for client in run_of[1:-1] for i in by_client[client])
    return [e for i, e in enumerate(events) if i not in drop]


def _tla_str(value: object) -> str:
    text = str(value)
    if not text.isascii() or '"' in text or "\\" in text:
        raise TraceError(f"not a plain ASCII string: {text!r}")
    return f'"{text}"'


def _tla_bool(value: object) -> str:
    return "TRUE" if value else "FALSE"


def _time(e: dict[str, Any]) -> float:
    t = e.get("t")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise TraceError(f"event without a finite time t: {e}")
    return float(t)


def _ttl_ms(events: Sequence[dict[str, Any]]) -> float:
    ttls = {e.get("ttl_ms") for e in events if e["action"] == "Acquire" and "key" in e}
    ttl = next(iter(ttls)) if len(ttls) == 1 else None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0:
        raise TraceError(f"the sections of one trace must share one ttl_ms, got {ttls}")
    return float(ttl)


def _section_ttls(config: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The ``ttl_ms`` of each section, from its first event (its Acquire)."""
    out = {}
    for client, e in config.items():
        ttl = e.get("ttl_ms")
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0:
            raise TraceError(f"section {client!r} starts without a positive ttl_ms: {e}")
        out[client] = float(ttl)
    return out


def lower_bound(gap_ms: float, ttl_ms: float, ticks: int = TTL_TICKS) -> int:
    """Ticks the model must let pass between two events of a section ``gap_ms`` apart."""
    unit = ttl_ms / ticks
    return max(0, math.floor(LOWER_RATE * gap_ms / unit) - LOWER_SLACK_TICKS)


def _fence_ranks(events: Sequence[dict[str, Any]]) -> dict[int, int]:
    """Each fence recorded in ``events``, by its rank among them (1 for the smallest).
    TLC's integers stop at 2**31 - 1 and a fence is a floor on Redis's clock (about 2**48
    now); the trace model reads a recorded fence only to order it against another, which
    the ranks keep."""
    recorded = {
        fence
        for e in events
        if isinstance(fence := e.get("fence"), int) and not isinstance(fence, bool) and fence > 0
    }
    return {fence: rank for rank, fence in enumerate(sorted(recorded), 1)}


def _handed_fence(e: dict[str, Any]) -> int | None:
    """The fence of a Wake event whose block ended with the key handed over (None: not
    such an event)."""
    if e["action"] != "Wake" or e.get("fence") in (None, 0) or e.get("phase") == "waiting":
        return None
    fence = e.get("fence")
    if isinstance(fence, bool) or not isinstance(fence, int) or fence <= 0:
        return -1
    return fence


def _handed_before(
    events: Sequence[dict[str, Any]],
    index: dict[str, int],
    takers: Collection[str] = (),
) -> list[str]:
    """For each event, the sections (a TLA+ set) a release may hand the key to before it:
    those whose next event is a Wake with the key handed over, or their refusal (waiting)
    and block before it: a release that runs after the attempt's refusal at Redis hands
    it the key, though the refusal's reply may not have come back yet.  And a section of
    ``takers`` (those whose attempts ask for a handed key) whose block ran out before the
    handed key reached it (:func:`_late_wake`: BLPOP timed out, or Redis was paused past
    the block and the client stopped reading), up to its next attempt, which Redis then
    grants as its own key (lib/wait.lua: "a key handed to us"): from its refusal and
    block to that attempt's send, when that attempt's reply is a grant.  Any other hand
    would only lead TLC down dead ends."""
    takers = set(takers)
    out: list[set[int]] = [set() for _ in events]
    mine: dict[str, list[int]] = {}
    for n, e in enumerate(events):
        mine.setdefault(str(e["client"]), []).append(n)
    for client, at in mine.items():
        i = index[client]
        for j, n in enumerate(at):
            e = events[n]
            if _handed_fence(e) is not None:
                last = j
            elif (
                client in takers
                and e["action"] == "AcquireReply"
                and e.get("granted") is True
                and j >= 2
                and events[at[j - 1]]["action"] == "Acquire"
                and _late_wake(events[at[j - 2]])
            ):
                last = j - 1  # the hand comes before the attempt's send
            else:
                continue
            first = last if _handed_fence(e) is not None else last - 1
            while first > 0 and _before_hand(events[at[first - 1]]):
                first -= 1
            if _handed_fence(e) is None and first == last - 1:
                continue  # no refusal queued it: not a waiter Redis hands to
            since = at[first - 1] + 1 if first > 0 else 0
            for m in range(since, at[last] + 1):
                out[m].add(i)
    return ["{" + ", ".join(str(c) for c in sorted(s)) + "}" for s in out]


def _late_wake(e: dict[str, Any]) -> bool:
    """Whether ``e`` is a Wake whose block ran out, with no key handed over read: BLPOP
    answered nil, or the client stopped reading a reply that did not come (a late
    element is lost with the connection), and it attempts again."""
    return (
        e["action"] == "Wake"
        and e.get("woken") is False
        and e.get("fence") in (None, 0)
        and e.get("phase") == "waiting"
    )


def _abandoned_places(
    events: Sequence[dict[str, Any]],
    index: dict[str, int],
    rounds: dict[str, int] | None = None,
) -> list[str]:
    """For each event, the sections (a TLA+ set) whose place in the queue may outlive
    them before it: a waiter whose withdrawal got no answer (``WithdrawFail``) may have
    left its place behind, from its ``Withdraw`` on, until that place ends on its own:
    ``LONGEST_BLOCK_MS + QUEUE_GRACE_MS`` after its last attempt at the latest (the
    waiting script's bound on a place's life), so after the ``Withdraw``.  With
    ``rounds`` (a lock's sections as rounds of its model clients), each is named by its
    token ``<<client, round>>``: its client may have started another round since."""
    ends: dict[str, tuple[int, float]] = {}
    withdrew: dict[str, int] = {}
    for n, e in enumerate(events):
        client = str(e["client"])
        if e["action"] == "Withdraw":
            withdrew[client] = n
        elif e["action"] == "WithdrawFail" and client in withdrew:
            start = withdrew.pop(client)
            ends[client] = (start, _time(events[start]) + LONGEST_BLOCK_MS + QUEUE_GRACE_MS)
    out: list[str] = []
    for n in range(len(events)):
        # The hand happens before event n, so after event n - 1 at the earliest.
        since = _time(events[n - 1]) if n else _time(events[0])
        gone = sorted(
            (index[c], rounds[c] if rounds is not None else 0)
            for c, (start, until) in ends.items()
            if start < n and since <= until
        )
        names = (f"<<{c}, {r}>>" if rounds is not None else str(c) for c, r in gone)
        out.append("{" + ", ".join(names) + "}")
    return out


def _before_hand(e: dict[str, Any]) -> bool:
    """Whether ``e`` may come between a release that hands its section the key and the
    section's Wake with it: the refusal that left it waiting, and its Block."""
    if e.get("phase") != "waiting":
        return False
    return e["action"] == "Block" or (e["action"] == "AcquireReply" and not e.get("granted"))


def _granted_fence(e: dict[str, Any]) -> int | None:
    """The fence of a granted AcquireReply event, or of a Wake with the key handed over
    (None: not a grant)."""
    handed = _handed_fence(e)
    if handed is not None:
        return handed
    if e["action"] != "AcquireReply" or not e.get("granted"):
        return None
    fence = e.get("fence")
    if isinstance(fence, bool) or not isinstance(fence, int) or fence <= 0:
        return -1
    return fence


@dataclass
class Problem:
    """The first event the pre-pass rejects (an index into the key's events) and why."""

    index: int
    reason: str


#: The request events that set a TTL, by the reply event that confirms them (ok).
_CONFIRMED_BY: Final = {
    "AcquireReply": "Acquire",
    "Wake": "Acquire",
    "RenewReply": "RenewSend",
    "ExtendReply": "Extend",
    "ReenterReply": "Reenter",
}
#: Slack on a recorded deadline, in ms: the recorder writes the core's float as it is,
#: so this only absorbs the float arithmetic of the sum.
DEADLINE_SLACK_MS: Final = 0.001


class _Deadlines:
    """The latest deadline each section may record: the spec's lease runs from the send
    time of the request that confirmed it, for that request's TTL (less the drift
    allowance, which only makes it earlier).  A recorded deadline past it claims a lease
    no reply gave."""

    def __init__(self) -> None:
        self.ttl: dict[str, float] = {}
        self.sent: dict[tuple[str, str], tuple[float, float]] = {}
        self.bound: dict[str, tuple[float, int]] = {}

    def step(self, i: int, e: dict[str, Any], t: float) -> Problem | None:
        client, action = str(e["client"]), str(e["action"])
        ttl = e.get("ttl_ms")
        if action == "Acquire" and isinstance(ttl, int | float) and not isinstance(ttl, bool):
            self.ttl.setdefault(client, float(ttl))
        own = self.ttl.get(client)
        if action in _CONFIRMED_BY.values() and own is not None:
            if action == "Extend" and isinstance(ttl, int | float) and not isinstance(ttl, bool):
                self.sent[(client, action)] = (t, float(ttl))
            else:
                self.sent[(client, action)] = (t, own)
        request = _CONFIRMED_BY.get(action)
        granted = (
            _granted_fence(e) is not None
            if action in ("AcquireReply", "Wake")
            else e.get("ok") is True
        )
        if request is not None and granted:
            # A renewal's or extend's send is answered once (an attempt's send stays: a
            # Wake after its refusal counts from it).
            sending = self.sent.get if request == "Acquire" else self.sent.pop
            sent = sending((client, request), None)
            if sent is None:
                return None  # a reply with no request before it: no behaviour (TLC's to say)
            sent_at, ttl_ms = sent
            if action == "Wake":
                ttl_ms = min(ttl_ms, HANDED_TTL_MS)
            end = sent_at + ttl_ms
            if client not in self.bound or end > self.bound[client][0]:
                self.bound[client] = (end, i)
        deadline = e.get("deadline")
        if isinstance(deadline, bool) or not isinstance(deadline, int | float):
            return None
        end, at = self.bound.get(client, (0.0, -1))
        if deadline > end + DEADLINE_SLACK_MS:
            since = (
                f"the latest lease a reply confirmed ends at {end} ms (event {at + 1}: its "
                "request's send time plus its TTL)"
                if at >= 0
                else "no reply has confirmed a lease"
            )
            return Problem(
                i,
                f"section {client} records deadline {deadline} ms, {deadline - end:.3f} ms past "
                f"what the spec allows: {since}",
            )
        return None


class _Waits:
    """A waiting section's deadline, on its clock: an attempt sent before it that is
    refused leaves the section waiting, and one sent at or after it is the last (refused,
    the section gives up); no block lasts past it.  The deadline is the first attempt's
    send time plus the wait it asked Redis for (``queue_ms``: the ms left, rounded up;
    a group's sections share the group's deadline, which started before some of them),
    so it is known to within 1 ms."""

    def __init__(self) -> None:
        self.until: dict[str, float] = {}
        self.sent: dict[str, float] = {}

    def step(self, i: int, e: dict[str, Any], t: float) -> Problem | None:
        client, action = str(e["client"]), str(e["action"])
        wait_ms, queue_ms = e.get("wait_ms"), e.get("queue_ms")
        if action == "Acquire" and isinstance(wait_ms, int | float) and wait_ms > 0:
            left = queue_ms if isinstance(queue_ms, int | float) else wait_ms
            self.until.setdefault(client, t + float(left))
            self.sent[client] = t
        until = self.until.get(client)
        if until is None:
            return None
        if action == "AcquireReply" and not e.get("granted") and client in self.sent:
            last = self.sent[client] >= until - 1 - DEADLINE_SLACK_MS
            gave_up = e.get("phase") != "waiting"
            if gave_up and not last:
                return Problem(
                    i,
                    f"section {client} gives up on an attempt sent "
                    f"{until - self.sent[client]:.3f} ms before its wait deadline",
                )
            if last and not gave_up and self.sent[client] > until + DEADLINE_SLACK_MS:
                return Problem(
                    i,
                    f"section {client} waits on after its last attempt, sent "
                    f"{self.sent[client] - until:.3f} ms past its wait deadline",
                )
        block_until = e.get("until")
        if (
            action == "Block"
            and isinstance(block_until, int | float)
            and block_until > until + DEADLINE_SLACK_MS
        ):
            return Problem(
                i,
                f"section {client} blocks until {block_until} ms, "
                f"{block_until - until:.3f} ms past its wait deadline",
            )
        return None


def prepass(
    events: Sequence[dict[str, Any]], *, fences: bool = True, readers: Collection[str] = ()
) -> Problem | None:
    """Checks that need no model: per-section time, and fences (see the module doc).
    ``fences`` false: time only (a semaphore's permits have no fence).  ``readers``: the
    sections that share fences (a read-write lock's read sections, see
    :func:`_reader_fences`)."""
    if fences and readers:
        problem = _reader_fences(events, readers)
        if problem is not None:
            return problem
    last: dict[str, tuple[int, float]] = {}
    granted: dict[str, int] = {}
    # Fences of the grants whose reply came back so far (in this stretch of Redis's data),
    # and for each section, the largest of them when its latest request left.
    seen: dict[int, str] = {}
    done_max: tuple[int, str] | None = None
    floor_at_send: dict[str, tuple[int, str] | None] = {}
    deadlines = _Deadlines()
    waits = _Waits()
    for i, e in enumerate(events):
        t = _time(e)
        if _is_declaration(e):
            if e["action"] == DATA_LOSS:
                seen, done_max = {}, None
                floor_at_send = dict.fromkeys(floor_at_send)
            continue
        client = str(e["client"])
        if client in last and t < last[client][1]:
            n, before = last[client]
            return Problem(
                i,
                f"time runs backwards: section {client} is at t={t} ms, {before - t:.3f} ms "
                f"before its own previous event (event {n + 1}, t={before} ms)",
            )
        last[client] = (i, t)
        if _is_read(e):
            continue  # an observer's read: its fence is checked against the model's grants
        problem = deadlines.step(i, e, t) or waits.step(i, e, t)
        if problem is not None:
            return problem
        if not fences:
            continue
        if e["action"] == "Acquire":
            floor_at_send[client] = done_max
        fence = _granted_fence(e)
        if fence is not None:
            if fence < 0:
                return Problem(i, f"a grant without a positive fence ({e.get('fence')!r})")
            floor = floor_at_send.get(client)
            if client in readers:
                # A reader reads the counter: it may share the latest fence, never go below.
                if floor is not None and fence < floor[0]:
                    return Problem(
                        i,
                        f"reader's fence {fence} is below fence {floor[0]}, granted to "
                        f"section {floor[1]} before this request was sent (Redis kept its "
                        "data: its counter only grows)",
                    )
                granted[client] = fence
                if done_max is None or fence > done_max[0]:
                    done_max = (fence, client)
                continue
            if fence in seen:
                return Problem(
                    i,
                    f"fence {fence} was already granted to section {seen[fence]} "
                    "(Redis kept its data: its counter never hands out a fence twice)",
                )
            if floor is not None and fence <= floor[0]:
                return Problem(
                    i,
                    f"fence {fence} is not above fence {floor[0]}, granted to section "
                    f"{floor[1]} before this request was sent (Redis kept its data: "
                    "its counter only grows)",
                )
            seen[fence] = client
            granted[client] = fence
            if done_max is None or fence > done_max[0]:
                done_max = (fence, client)
            continue
        expected = granted.get(client)
        if e.get("fence") != expected and not (expected is None and e.get("fence") == 0):
            return Problem(
                i,
                f"section {client} records fence {e.get('fence')!r} where its grant gave "
                f"{expected!r}",
            )
    return None


def _reader_fences(events: Sequence[dict[str, Any]], readers: Collection[str]) -> Problem | None:
    """A read grant reports the slot's fence counter as it stands: the fence of the write
    granted last before it, or, before any write, the counter's value then (made at the
    clock's floor if there was none), one value for every such reader.  So a reader's
    fence is a write's fence of this trace, or a value below all of them, the same for
    every reader that has one."""
    writes = {
        fence
        for e in events
        if not _is_declaration(e)
        and str(e["client"]) not in readers
        and (fence := _granted_fence(e)) is not None
    }
    base: tuple[int, str] | None = None
    for i, e in enumerate(events):
        if _is_declaration(e) or str(e["client"]) not in readers:
            continue
        fence = _granted_fence(e)
        if fence is None or fence < 0 or fence in writes:
            continue
        if writes and fence > min(writes):
            return Problem(
                i,
                f"reader's fence {fence} is no write's fence and above the first write's "
                f"({min(writes)}): a reader is given the counter as the last write left it",
            )
        if base is not None and fence != base[0]:
            return Problem(
                i,
                f"reader's fence {fence} differs from fence {base[0]} of reader {base[1]}, "
                "both before any write: the counter stood still between them",
            )
        base = (fence, str(e["client"]))
    return None


@dataclass
class Model:
    """The generated modules and config for the events of one key."""

    data: str
    trace_spec: str | None
    cfg: str
    sections: int
    #: The index, among the key's events, of each row of the TLA+ trace.
    rows: list[int]
    #: The trace module TLC checks; ``trace_spec`` None: it is ``spec/<module>.tla``.
    module: str = "DistLockTrace"
    #: The model's clients (a lock's sections run as rounds of fewer: see
    #: :func:`lock_rounds`); 0: one per section.
    clients: int = 0
    #: The lock's model: each row's time bound (``k``) and its hidden steps' fields (the
    #: handoffs and faults offered before it), which a row put before it shares.
    row_k: list[int] = field(default_factory=list)
    row_hidden: list[str] = field(default_factory=list)
    #: Other generated modules TLC needs beside TraceData, by name (the module
    #: ``trace_spec`` extends, when it is not the checked module itself).
    modules: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.clients:
            self.clients = self.sections


def _lows(
    events: Sequence[dict[str, Any]], ttl_ms: float, ticks: int
) -> tuple[list[int], list[bool]]:
    """Lower bounds on the ticks since each section's previous event, and "keep": whether
    the model must note the time of an event (only when the section's next event needs
    it: fewer states)."""
    lows: list[int] = []
    prev: dict[str, int] = {}
    keep = [False] * len(events)
    for n, e in enumerate(events):
        client = str(e["client"])
        lo = 0
        if client in prev:
            p = prev[client]
            lo = lower_bound(_time(e) - _time(events[p]), ttl_ms, ticks)
            keep[p] = lo > 0
        lows.append(lo)
        prev[client] = n
    return lows, keep


def build_model(
    events: Sequence[dict[str, Any]],
    *,
    complete: bool = True,
    ticks: int = TTL_TICKS,
    hang_after_ms: float = 0.0,
    limit: int | None = None,
) -> Model:
    """The TLA+ modules and TLC config checking ``events`` (one key) against the spec.

    ``complete`` false: ``events`` are a prefix of a longer trace (see
    :func:`_plausible_faults`).  ``limit``: the events are a semaphore's permit sections,
    checked with ``spec/SemaphoreTrace.tla`` against ``spec/Semaphore.tla`` with that
    ``Limit`` (the same actions and records as the lock's, without fences)."""
    logged = [(i, e) for i, e in enumerate(events) if not _is_declaration(e)]
    if not logged:
        raise TraceError("empty trace")
    declared = _data_losses(events)
    data_lost = declared > 0
    never_ran = _never_ran([e for _, e in logged], _unrun_windows(events, hang_after_ms))
    index: dict[str, int] = {}
    config: dict[str, dict[str, Any]] = {}
    for _, e in logged:
        client = str(e["client"])
        if client not in index:
            index[client] = len(index) + 1
            config[client] = e
        if e["action"] not in CLIENT_ACTIONS and e["action"] not in WAIT_ACTIONS:
            raise TraceError(f"unknown action {e['action']!r}")
    firsts = list(config.values())
    # A semaphore's permits may have TTLs of their own (the spec's TTLOf, per section):
    # the model's tick is the shortest one's, TTL ticks.
    ttl_ms = _ttl_ms(firsts) if limit is None else min(_section_ttls(config).values())
    waits = {c for c, e in config.items() if e.get("wait_ms")}
    if limit is not None and any(_handed_fence(e) is not None for _, e in logged):
        raise TraceError("a semaphore's release never hands a permit over: a Wake with a fence")
    # A waiting section's refusals do not count retries (it waits until its deadline).
    retries = {e.get("retries", 0) for c, e in config.items() if c not in waits} or {0}
    if len(retries) != 1:
        raise TraceError(f"the sections of one trace must share one retries, got {retries}")
    beats = {
        e.get("renew_every_ms")
        for e in firsts
        if e.get("watch") and e.get("renew_every_ms") is not None
    }
    # run/hold sections with heartbeat_ms=False: the spec's WatchOnly sections.
    watch_only = any(e.get("watch") and e.get("renew_every_ms") is None for e in firsts)
    if len(beats) > 1:
        raise TraceError(f"the renewed sections must share one heartbeat, got {beats}")
    unit = ttl_ms / ticks
    beat_ms = next(iter(beats)) if beats else ttl_ms / 4
    heartbeat = max(1, min(ticks // 2, round(float(beat_ms or ttl_ms / 4) / unit)))
    manual = any(not e.get("watch") for e in firsts)
    hand_ttl = max(1, round(min(ttl_ms, HANDED_TTL_MS) / unit))

    lows, keep = _lows([e for _, e in logged], ttl_ms, ticks)
    # A lock's sections run as rounds of fewer model clients (see lock_rounds); a
    # semaphore's permit sections are one model client each.
    if limit is None:
        client_of, round_of, fresh = lock_rounds([e for _, e in logged])
    else:
        client_of, round_of, fresh = dict(index), dict.fromkeys(index, 1), set()
    rounds = {(client_of[c], round_of[c]) for c in index}
    followed = {c for c in index if (client_of[c], round_of[c] + 1) in rounds}
    faults = _plausible_faults(
        [e for _, e in logged],
        client_of,
        complete=complete,
        hang_after_ms=hang_after_ms,
        followed=followed,
        never_ran=never_ran,
        losses=loss_windows(events),
    )
    # a semaphore's release never hands a permit over
    takers = {
        c for c in waits if limit is None and config[c].get("renew_every_ms") is not None
    }
    hands = _handed_before([e for _, e in logged], client_of, takers)
    abandoned = _abandoned_places(
        [e for _, e in logged], client_of, round_of if limit is None else None
    )
    fences = dict.fromkeys(index, 0)
    ranks = _fence_ranks([e for _, e in logged])
    t0 = _time(logged[0][1])
    k = 0
    rows: list[str] = []
    row_k: list[int] = []
    row_hidden: list[str] = []
    for n, (_, e) in enumerate(logged):
        client = str(e["client"])
        # Time may pass up to the event's timestamp (rounded up, plus one tick of slack);
        # file order may trail the clock between sections, so the bound never goes down.
        k = max(k, math.ceil((_time(e) - t0) / unit) + 1)
        kind = REPLY_KIND.get(str(e["action"]), "")
        value = e.get("granted") if e["action"] == "AcquireReply" else e.get("ok")
        if not isinstance(value, bool):
            kind = ""  # no reply value recorded: nothing to compare
        fence = e.get("fence") if e["action"] == "AcquireReply" and value else 0
        if _handed_fence(e) is not None:
            # a Wake with the fence of a key handed over: a grant
            kind, value, fence = "hand", True, e.get("fence")
        fence = ranks.get(fence, 0) if isinstance(fence, int) and not isinstance(fence, bool) else 0
        if fence:
            fences[client] = fence
        # the core's "waiting" is the spec's "backoff" (see WaitDenied)
        phase = "backoff" if e["phase"] == "waiting" else e["phase"]
        row_k.append(k)
        row_hidden.append(f"hand |-> {hands[n]}, abandoned |-> {abandoned[n]}, {faults[n]}")
        rows.append(
            f"[a |-> {_tla_str(e['action'])}, c |-> {client_of[client]}, k |-> {k}, "
            f"lo |-> {lows[n]}, keep |-> {_tla_bool(keep[n])}, "
            f"phase |-> {_tla_str(phase)}, outcome |-> {_tla_str(e['outcome'])}, "
            f"lost |-> {_tla_bool(e['lost'])}, kind |-> {_tla_str(kind)}, "
            f"ok |-> {_tla_bool(value)}, fence |-> {fence}, "
            f"w |-> {_tla_bool(client in waits)}, hand |-> {hands[n]}, "
            f"abandoned |-> {abandoned[n]}, {faults[n]}"
            + ("]" if limit is not None else f", fresh |-> {_tla_bool(n in fresh)}]")
        )
    auto = {c: _tla_bool(config[c].get("watch")) for c in index}
    renews = {
        c: _tla_bool(config[c].get("watch") and config[c].get("renew_every_ms") is not None)
        for c in index
    }
    waiting = {c: _tla_bool(c in waits) for c in index}
    fenced = {c: str(fences[c]) for c in index}
    # The lock's: per model client, per round (<<<<round 1, round 2>>, ...>>); the
    # semaphore's: per section.
    per: Callable[[dict[str, str]], str] = (
        functools.partial(_per_round, client_of, round_of)
        if limit is None
        else (lambda values: "<<" + ", ".join(values[c] for c in index) + ">>")
    )
    data = (
        "---------------------------- MODULE TraceData ----------------------------\n"
        "(* Generated by distlock.tools.tracecheck from a recorded trace. *)\n"
        "EXTENDS Sequences\n\n"
        f"AutoRenew == {per(auto)}\n\n"
        f"Renews == {per(renews)}\n\n"
        f"Waits == {per(waiting)}\n\n"
        f"HandTTL == {hand_ttl}\n\n"
        f"Fence == {per(fenced)}\n\n"
        f"CheckFences == {_tla_bool(not data_lost)}\n\n"
        "Trace == <<\n  " + ",\n  ".join(rows) + "\n>>\n"
        "=============================================================================\n"
    )
    if limit is not None:
        section_ttls = _section_ttls(config)
        data = data.replace(
            "Trace == <<",
            "SectionTTL == <<"
            + ", ".join(str(max(1, round(section_ttls[c] / unit))) for c in index)
            + ">>\n\nTrace == <<",
        )
        return Model(
            data,
            None,
            _semaphore_cfg(
                len(index), limit, retries, ticks, heartbeat, manual, logged, events, never_ran
            ),
            len(index),
            [i for i, _ in logged],
            module="SemaphoreTrace",
        )
    cases = "\n      [] ".join(_lock_case(a) for a in CLIENT_ACTIONS)
    trace_spec = TRACE_SPEC.replace("{cases}", cases)
    model_clients = max(client_of.values())
    clients = ", ".join(str(i) for i in range(1, model_clients + 1))
    failures = sum(1 for _, e in logged if str(e["action"]).endswith("Fail")) - len(never_ran)
    cfg = "\n".join(
        [
            "CONSTANTS",
            f"    Clients = {{{clients}}}",
            f"    MaxRounds = {max(round_of.values())}",
            f"    Retries = {int(next(iter(retries)))}",
            f"    TTL = {ticks}",
            f"    Heartbeat = {heartbeat}",
            f"    Margin = {TRACE_MARGIN}",
            "    Timely = FALSE",
            "    MaxDelay = 2",
            # One clock for every section, with no drift from real time: the slack of the
            # lower bounds on elapsed time covers the model's whole ticks.
            "    MaxDrift = 0",
            "    MaxFail = 1",
            f"    MaxFaults = {failures + declared + SPARE_FAULTS}",
            f"    CounterSurvives = {_tla_bool(not data_lost)}",
            f"    Manual = {_tla_bool(manual)}",
            f"    WatchOnly = {_tla_bool(watch_only)}",
            '    Mutant = "none"',
            # a body may release its own key (handle.release() inside hold)
            "    EarlyRelease = TRUE",
            "INIT TraceInit",
            "NEXT TraceNext",
            "INVARIANT Unexplained",
            "CONSTRAINT Progress",
            "VIEW TraceView",
            "",
        ]
    )
    return Model(
        data,
        trace_spec,
        cfg,
        len(index),
        [i for i, _ in logged],
        clients=model_clients,
        row_k=row_k,
        row_hidden=row_hidden,
    )


def _per_round(client_of: dict[str, int], round_of: dict[str, int], values: dict[str, str]) -> str:
    """``values`` (of each section) as a TLA+ tuple of tuples: per model client, per round."""
    by: dict[int, dict[int, str]] = {}
    for c, value in values.items():
        by.setdefault(client_of[c], {})[round_of[c]] = value
    return (
        "<<"
        + ", ".join(
            "<<" + ", ".join(by[i][r] for r in sorted(by[i])) + ">>" for i in sorted(by)
        )
        + ">>"
    )


def _lock_object(section: str) -> str:
    """The Lock object a section's client name belongs to: ``L2`` of ``L2.7`` (section 7
    of Lock 2; a name with no section number is its own)."""
    return section.rsplit(".", 1)[0]


def _spans(events: Sequence[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """The index of each section's first event, and of its last."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for n, e in enumerate(events):
        client = str(e["client"])
        first.setdefault(client, n)
        last[client] = n
    return first, last


def lock_rounds(
    events: Sequence[dict[str, Any]],
) -> tuple[dict[str, int], dict[str, int], set[int]]:
    """The model client (1, 2, ...) and round (1, 2, ...) of each section of a lock's
    ``events`` (one key, no declarations), and the events that start a round after the
    first (the trace's ``fresh``: the spec's ``NewSection`` comes right before them).

    Sections, in the order they first appear, take a model client whose current section
    has ended before their first event: its last event leaves it ``done`` (one that ends
    otherwise, a holder killed or a trace cut short, keeps its client to the end).  One of
    the same Lock object comes first, then the one that ended earliest; with none free, a
    new client.  So the clients are as many as the sections that run at once, however
    many run one after another (each failed attempt of a caller whose Redis is down is a
    section of its own).  A section's requests may still run at Redis after it ended: the
    spec's next round has a fresh token, and the old one's requests run as any other."""
    first, last = _spans(events)
    client_of: dict[str, int] = {}
    round_of: dict[str, int] = {}
    current: list[str] = []  # the latest section of each model client
    fresh: set[int] = set()
    for client, n in first.items():
        free = [
            i
            for i, d in enumerate(current)
            if last[d] < n and events[last[d]].get("phase") == "done"
        ]
        if not free:
            current.append(client)
            client_of[client], round_of[client] = len(current), 1
            continue
        same = [i for i in free if _lock_object(current[i]) == _lock_object(client)]
        i = min(same or free, key=lambda i: last[current[i]])
        client_of[client] = i + 1
        round_of[client] = round_of[current[i]] + 1
        current[i] = client
        fresh.add(n)
    return client_of, round_of, fresh


def _lock_case(action: str) -> str:
    """The arm of ``Logged`` for the lock's ``action``: a waiting section's attempt notes
    its send time, and its reply may be the waiting refusal."""
    if action == "Acquire":
        return (
            'e.a = "Acquire" -> Acquire(c) /\\ UNCHANGED <<handed, withdrawing>>\n'
            "                                  /\\ wsent' = [wsent EXCEPT ![c] = "
            "IF e.w THEN now ELSE @]"
        )
    if action == "AcquireReply":
        return (
            'e.a = "AcquireReply" -> (IF e.w THEN WaitReply(c) ELSE AcquireReply(c))\n'
            "                                  /\\ UNCHANGED WaitVars"
        )
    return f'e.a = "{action}" -> {action}(c) /\\ UNCHANGED WaitVars'


def _semaphore_cfg(
    sections: int,
    limit: int,
    retries: set[Any],
    ticks: int,
    heartbeat: int,
    manual: bool,
    logged: Sequence[tuple[int, dict[str, Any]]],
    events: Sequence[dict[str, Any]],
    never_ran: Collection[int] = (),
) -> str:
    """The cfg of ``spec/SemaphoreTrace.tla``: the lock's trace model, with ``Limit``.  A
    declared data loss is the permits lost (Redis restarted empty): one fault more.  A
    failure whose request never ran (``never_ran``) is no fault."""
    failures = sum(1 for _, e in logged if str(e["action"]).endswith("Fail")) - len(never_ran)
    declared = _data_losses(events)
    margin = 0 if _renewal_failed_soon([e for _, e in logged]) else SEMAPHORE_TRACE_MARGIN
    clients = ", ".join(str(i) for i in range(1, sections + 1))
    return "\n".join(
        [
            "CONSTANTS",
            f"    Clients = {{{clients}}}",
            "    MaxRounds = 1",
            f"    Retries = {int(next(iter(retries)))}",
            f"    Limit = {limit}",
            f"    TTL = {ticks}",
            f"    Heartbeat = {heartbeat}",
            f"    Margin = {margin}",
            # one clock for every section, as in the lock's trace model
            "    MaxDrift = 0",
            f"    MaxFaults = {failures + declared + SPARE_FAULTS}",
            f"    Manual = {_tla_bool(manual)}",
            '    Mutant = "none"',
            # a trace records no death: a killed process records nothing more
            '    FaultKinds = {"drop", "hang", "key_lost", "starve"}',
            "    EarlyRelease = TRUE",
            # each section's own TTL (TraceData's SectionTTL), in the model's ticks
            "    TTLOf <- TraceTTLOf",
            "INIT TraceInit",
            "NEXT TraceNext",
            "INVARIANT Unexplained",
            "CONSTRAINT Progress",
            "VIEW TraceView",
            "",
        ]
    )


def _renewal_failed_soon(events: Sequence[dict[str, Any]]) -> bool:
    """Whether some renewal of ``events`` (one key, no declarations) failed within its
    section's TTL of its send (see :data:`SEMAPHORE_TRACE_MARGIN`)."""
    ttl: dict[str, float] = {}
    sent: dict[str, float] = {}
    for e in events:
        client, action = str(e["client"]), e["action"]
        if action == "Acquire" and isinstance(e.get("ttl_ms"), int | float):
            ttl[client] = float(e["ttl_ms"])
        elif action == "RenewSend":
            sent[client] = _time(e)
        elif action == "RenewFail" and _time(e) - sent.pop(client, -math.inf) < ttl.get(
            client, 0.0
        ):
            return True
    return False


def is_semaphore(events: Sequence[dict[str, Any]]) -> bool:
    """Whether ``events`` are a semaphore's permit sections: their Acquire events record
    the ``limit`` the acquire script counted with."""
    return any(e.get("action") == "Acquire" and "limit" in e for e in events)


def semaphore_limit(events: Sequence[dict[str, Any]]) -> int:
    """The one limit the permit sections of ``events`` acquired with.  Callers of one id
    may pass different limits (each acquire counts with its own); the spec has one
    ``Limit``, so such a trace is not checked."""
    limits = {e.get("limit") for e in events if e.get("action") == "Acquire" and "limit" in e}
    limit = next(iter(limits)) if len(limits) == 1 else None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise TraceError(
            f"the permit sections of one id must share one positive limit, got {limits}"
        )
    return limit


#: The roles a read-write lock's section records on its Acquire event (``kind``).
RW_ROLES: Final = ("read", "write")


def is_readwrite(events: Sequence[dict[str, Any]]) -> bool:
    """Whether ``events`` are a read-write lock's sections: their Acquire events record
    the role (``kind``: read or write) the acquire script was sent with."""
    return any(e.get("action") == "Acquire" and e.get("kind") in RW_ROLES for e in events)


def readers_of(events: Sequence[dict[str, Any]]) -> set[str]:
    """The read sections of a read-write lock's ``events``."""
    return {
        str(e["client"]) for e in events if e.get("action") == "Acquire" and e.get("kind") == "read"
    }


def build_readwrite_model(
    events: Sequence[dict[str, Any]],
    *,
    complete: bool = True,
    ticks: int = TTL_TICKS,
    hang_after_ms: float = 0.0,
) -> Model:
    """The TraceData module and TLC config checking a read-write lock's ``events`` (one
    key) with ``spec/ReadWriteTrace.tla`` against ``spec/ReadWrite.tla``.

    Each section is one model client (``MaxRounds`` 1) whose role (``Writers``) and
    waiting (``Waiters``) are those its Acquire recorded.  A waiter's place lives
    ``PlaceTTL`` ticks, the longest a place can live (a block and its grace: the
    script's bound), so a model place never ends before the real one.  The fence order
    is compared at each grant (``Fence``: the ranks of the recorded fences), equal fences
    included, which a reader shares with the last write.  ``spec/ReadWrite.tla`` does not
    model Redis losing the keys, nor another key of the slot taking a fence meanwhile: a
    declared data loss is refused (a TraceError)."""
    logged = [(i, e) for i, e in enumerate(events) if not _is_declaration(e)]
    if not logged:
        raise TraceError("empty trace")
    if _data_losses(events):
        raise TraceError("spec/ReadWrite.tla does not model Redis losing the keys")
    rows_of = [i for i, _ in logged]
    evs = [e for _, e in logged]
    never_ran = _never_ran(evs, _unrun_windows(events, hang_after_ms))
    index: dict[str, int] = {}
    config: dict[str, dict[str, Any]] = {}
    for e in evs:
        client = str(e["client"])
        if client not in index:
            if e.get("kind") not in RW_ROLES:
                raise TraceError(f"section {client!r} records no role (kind read or write): {e}")
            index[client] = len(index) + 1
            config[client] = e
        if e["action"] not in CLIENT_ACTIONS and e["action"] not in WAIT_ACTIONS:
            raise TraceError(f"unknown action {e['action']!r}")
        if _handed_fence(e) is not None:
            raise TraceError(
                "a read-write lock's release never hands the key over: a Wake with a fence"
            )
    firsts = list(config.values())
    ttl_ms = _ttl_ms(firsts)
    waits = {c for c, e in config.items() if e.get("wait_ms")}
    retries = {e.get("retries", 0) for c, e in config.items() if c not in waits} or {0}
    if len(retries) != 1:
        raise TraceError(f"the sections of one trace must share one retries, got {retries}")
    beats = {
        e.get("renew_every_ms")
        for e in firsts
        if e.get("watch") and e.get("renew_every_ms") is not None
    }
    if len(beats) > 1:
        raise TraceError(f"the renewed sections must share one heartbeat, got {beats}")
    unit = ttl_ms / ticks
    beat_ms = next(iter(beats)) if beats else ttl_ms / 4
    heartbeat = max(1, min(ticks // 2, round(float(beat_ms or ttl_ms / 4) / unit)))
    manual = any(not e.get("watch") for e in firsts)
    place_life = max(2, math.ceil((LONGEST_BLOCK_MS + QUEUE_GRACE_MS) / unit) + 1)
    lows, keep = _lows(evs, ttl_ms, ticks)
    faults = _plausible_faults(
        evs, index, complete=complete, hang_after_ms=hang_after_ms, never_ran=never_ran,
        dies=True, quiet_once_lost=True,
    )
    # The row (1-based) of each waiting section's last attempt: the one sent with no
    # time left to wait (queue_ms 0), which a refusal takes out of the queue.
    last_sent = dict.fromkeys(index, 0)
    fences = dict.fromkeys(index, 0)
    ranks = _fence_ranks(evs)
    t0 = _time(evs[0])
    k = 0
    rows: list[str] = []
    for n, e in enumerate(evs):
        client = str(e["client"])
        action = str(e["action"])
        if action == "Acquire" and client in waits and e.get("queue_ms") == 0:
            last_sent[client] = n + 1
        k = max(k, math.ceil((_time(e) - t0) / unit) + 1)
        kind = REPLY_KIND.get(action, "")
        value = e.get("granted") if action == "AcquireReply" else e.get("ok")
        if not isinstance(value, bool):
            kind = ""
        fence = e.get("fence") if action == "AcquireReply" and value else 0
        fence = ranks.get(fence, 0) if isinstance(fence, int) and not isinstance(fence, bool) else 0
        if fence:
            fences[client] = fences[client] or fence
        rows.append(
            f"[a |-> {_tla_str(action)}, c |-> {index[client]}, k |-> {k}, "
            f"lo |-> {lows[n]}, keep |-> {_tla_bool(keep[n])}, "
            f"phase |-> {_tla_str(e['phase'])}, outcome |-> {_tla_str(e['outcome'])}, "
            f"lost |-> {_tla_bool(e['lost'])}, kind |-> {_tla_str(kind)}, "
            f"ok |-> {_tla_bool(value)}, fence |-> {fence}, "
            f"w |-> {_tla_bool(client in waits)}, {faults[n]}]"
        )

    def per(values: dict[str, str]) -> str:
        return "<<" + ", ".join(values[c] for c in index) + ">>"

    data = (
        "---------------------------- MODULE TraceData ----------------------------\n"
        "(* Generated by distlock.tools.tracecheck from a recorded trace. *)\n"
        "EXTENDS Sequences\n\n"
        f"Role == {per({c: _tla_str(config[c]['kind']) for c in index})}\n\n"
        f"AutoRenew == {per({c: _tla_bool(config[c].get('watch')) for c in index})}\n\n"
        "Renews == "
        + per(
            {
                c: _tla_bool(config[c].get("watch") and config[c].get("renew_every_ms") is not None)
                for c in index
            }
        )
        + "\n\n"
        f"Waits == {per({c: _tla_bool(c in waits) for c in index})}\n\n"
        f"LastSent == {per({c: str(last_sent[c]) for c in index})}\n\n"
        f"Fence == {per({c: str(fences[c]) for c in index})}\n\n"
        f"PlaceLife == {place_life}\n\n"
        "Trace == <<\n  " + ",\n  ".join(rows) + "\n>>\n"
        "=============================================================================\n"
    )
    failures = sum(1 for e in evs if str(e["action"]).endswith("Fail")) - len(never_ran)
    clients = ", ".join(str(i) for i in range(1, len(index) + 1))
    cfg = "\n".join(
        [
            "CONSTANTS",
            f"    Clients = {{{clients}}}",
            "    MaxRounds = 1",
            f"    Retries = {int(next(iter(retries)))}",
            f"    TTL = {ticks}",
            f"    Heartbeat = {heartbeat}",
            f"    Margin = {TRACE_MARGIN}",
            # one clock for every section, as in the lock's trace model
            "    MaxDrift = 0",
            f"    MaxFaults = {failures + SPARE_FAULTS}",
            f"    Manual = {_tla_bool(manual)}",
            '    Mutant = "none"',
            # a killed process records nothing more: a section with no event left may
            # die; the resends of a lost reply are the client library's, off in these runs
            '    FaultKinds = {"drop", "hang", "starve", "die"}',
            "    Writers <- TraceWriters",
            "    Waiters <- TraceWaiters",
            "    PlaceTTL <- TracePlaceTTL",
            "INIT TraceInit",
            "NEXT TraceNext",
            "INVARIANT Unexplained",
            "CONSTRAINT Progress",
            "VIEW TraceView",
            "",
        ]
    )
    return Model(data, None, cfg, len(index), rows_of, module="ReadWriteTrace")


def is_election(events: Sequence[dict[str, Any]]) -> bool:
    """Whether ``events`` are an election's: a campaign's Acquire records the candidate's
    ``identity``, or an observer read who leads."""
    return any(
        _is_read(e) or (e.get("action") == "Acquire" and "identity" in e) for e in events
    )


#: The reads' rows of the election's trace model: their action, by the recorded one.
_READ_ROW: Final = {LEADER_SEND: "LeaderSend", LEADER_READ: "LeaderRead", LEADER_FAIL: "LeaderFail"}


def build_election_model(
    events: Sequence[dict[str, Any]],
    *,
    complete: bool = True,
    ticks: int = TTL_TICKS,
    hang_after_ms: float = 0.0,
) -> Model:
    """The modules and TLC config checking an election's ``events`` (one key: its
    candidates' campaigns and its observers' ``leader()`` reads) with
    ``spec/ElectionTrace.tla``, which EXTENDS the lock's trace model.

    A campaign is a lock's waiting section, action for action (``spec/Election.tla``
    EXTENDS ``spec/DistLock.tla`` and takes the lock's steps as they are), so its events
    are the lock's trace model's rows (:func:`build_model`, the generated
    ``DistLockTrace``): a resignation's handoff is the release's (``ReleaseHand``), a
    campaign that gives up is a waiter whose wait ran out, a killed leader a section that
    stops.  TraceData adds ``Identity`` (per model client, per round: what each section's
    ``Acquire`` recorded) and ``Observers``.  Each read is two rows, put among the
    sections' rows in file order: its send, and its reply (the identity, ``""`` when
    nobody leads, and the fence's rank among the sections' recorded fences: 0 for one no
    section recorded) or its failure.  A read row shares the time bound and the hidden
    steps' fields of the section row after it (of the last row, at the end)."""
    logged = [(i, e) for i, e in enumerate(events) if not _is_declaration(e)]
    if not any(not _is_read(e) for _, e in logged):
        raise TraceError("an election's trace without a campaign")
    # The sections' events (declarations kept), and where each was among ``events``.
    section_at = [i for i, e in enumerate(events) if not _is_read(e)]
    sections = [events[i] for i in section_at]
    base = build_model(sections, complete=complete, ticks=ticks, hang_after_ms=hang_after_ms)
    assert base.trace_spec is not None
    section_logged = [e for e in sections if not _is_declaration(e)]
    client_of, round_of, _ = lock_rounds(section_logged)
    identity: dict[str, str] = {}
    for e in section_logged:
        client = str(e["client"])
        if client not in identity:
            who = e.get("identity")
            if not isinstance(who, str) or not who:
                raise TraceError(f"campaign {client!r} records no identity: {e}")
            identity[client] = _tla_str(who)
    ranks = _fence_ranks(section_logged)
    observers: dict[str, int] = {}
    # The section rows, by their index among ``events``.
    row_of = {section_at[r]: n for n, r in enumerate(base.rows)}
    section_rows = base.data.split("Trace == <<\n  ", 1)[1].split("\n>>\n", 1)[0]
    texts = section_rows.split(",\n  ")
    assert len(texts) == len(base.rows)
    rows: list[str] = []
    indices: list[int] = []
    next_row = 0
    t0 = _time(logged[0][1])
    unit = _ttl_ms([e for e in section_logged if e["action"] == "Acquire"]) / ticks
    for i, e in logged:
        if not _is_read(e):
            n = row_of[i]
            rows.append(texts[n])
            indices.append(i)
            next_row = n + 1
            continue
        observer = observers.setdefault(str(e["client"]), len(observers) + 1)
        # The section row after it: its bound and hidden steps (the last one's at the end).
        after = min(next_row, len(texts) - 1)
        k = base.row_k[after]
        if next_row >= len(texts):
            k = max(k, math.ceil((_time(e) - t0) / unit) + 1)
        who, fence = "", 0
        if e["action"] == LEADER_READ and e.get("identity") is not None:
            who = str(e["identity"])
            reported = e.get("fence")
            if isinstance(reported, bool) or not isinstance(reported, int) or reported <= 0:
                raise TraceError(f"a leader read reporting no positive fence: {e}")
            fence = ranks.get(reported, 0)
        rows.append(
            f"[a |-> {_tla_str(_READ_ROW[str(e['action'])])}, c |-> 1, o |-> {observer}, "
            f"id |-> {_tla_str(who)}, fence |-> {fence}, k |-> {k}, fresh |-> FALSE, "
            f"{base.row_hidden[after]}]"
        )
        indices.append(i)
    data = base.data.replace(
        "Trace == <<\n  " + section_rows + "\n>>\n",
        f"Identity == {_per_round(client_of, round_of, identity)}\n\n"
        f"Observers == {len(observers)}\n\n"
        "Trace == <<\n  " + ",\n  ".join(rows) + "\n>>\n",
    )
    cfg = (
        base.cfg.replace("INIT TraceInit", "INIT ElectionInit")
        .replace("NEXT TraceNext", "NEXT ElectionNext")
        .replace("VIEW TraceView", "VIEW ElectionView")
    )
    return Model(
        data,
        None,
        cfg,
        base.sections,
        indices,
        module="ElectionTrace",
        clients=base.clients,
        modules={"DistLockTrace": base.trace_spec},
    )


def is_reentrant(events: Sequence[dict[str, Any]]) -> bool:
    """Whether ``events`` are a reentrant lock's: some holder re-entered (a ``Reenter``
    or inner-exit event).  A reentrant lock's trace with no re-entry is a plain lock's
    trace, action for action, and is checked against ``spec/DistLock.tla``."""
    return any(e.get("action") in REENTRANT_ACTIONS for e in events)


def reentrant_unchecked(
    events: Sequence[dict[str, Any]], *, hang_after_ms: float = 0.0
) -> str | None:
    """Why :func:`build_reentrant_model` would refuse the reentrant lock's ``events`` (one
    key) for their shape rather than for a wrong step, or None: more sections than the
    spec has holders, or an action the spec does not have.  A caller checking many
    recorded runs (the chaos suite) skips such a trace, saying why, instead of counting
    the refusal as a rejected run.  A declared data loss is checked (see
    :func:`build_reentrant_model`).  ``hang_after_ms``: as for the model (see
    :func:`_reentrant_holders`)."""
    logged = [e for e in events if not _is_declaration(e)]
    foreign = sorted({str(e["action"]) for e in logged} - R_ACTIONS)
    if foreign:
        return f"{', '.join(foreign)} recorded: no such action in spec/Reentrant.tla"
    try:
        _reentrant_holders(logged, hang_after_ms=hang_after_ms)
    except TraceError as exc:
        return str(exc)
    return None


def _reentrant_holders(
    events: Sequence[dict[str, Any]], *, hang_after_ms: float = 0.0
) -> tuple[dict[str, int], set[int]]:
    """The holder (1 ``Parent``, 2 ``Child``, 3 ``Other``) each section of ``events`` runs
    on, and the events that start a section on a holder that ran one before.

    Sections take the holders in the order they first appear; a fourth and later one
    takes a holder whose section has ended (its last event, a final outcome with no
    failed round trip left to run, came before this section's first), and is a fresh
    section there (``NextSection`` of ``spec/ReentrantTrace.tla``).  The spec's holders
    differ only in their names, so this is any mapping of the sections that never runs
    two at once on one holder.  More sections at once than holders: a TraceError.

    A round trip reported failed sooner than ``hang_after_ms`` after its send (the
    client's socket timeout: its connection failed) is not left to run (the model offers
    it no hang, see :func:`_plausible_faults`): a section whose failures are all such,
    an attempt refused while Redis is down and its cleanup release, ends with nothing
    left to run, and its holder is free for a later section."""
    last: dict[str, int] = {}
    failed: set[str] = set()
    sent: dict[tuple[str, str], float] = {}
    for n, e in enumerate(events):
        client, action = str(e["client"]), e["action"]
        last[client] = n
        for kind, send in R_SEND_OF.items():
            if action == send:
                sent[(client, kind)] = _time(e)
            elif action in (R_FAIL_OF[kind], _R_REPLY_OF[kind]):
                since = sent.pop((client, kind), None)
                # A round trip that failed may still run, unless it failed on its
                # connection; a withdrawal that failed is none of the spec's: the place
                # it may leave queued is no holder's (``Gone``).
                if action == R_FAIL_OF[kind] and (
                    since is None or _time(e) - since >= hang_after_ms
                ):
                    failed.add(client)
    holder: dict[str, int] = {}
    current: dict[int, str] = {}
    fresh: set[int] = set()
    for n, e in enumerate(events):
        client = str(e["client"])
        if client in holder:
            continue
        if len(current) < len(R_HOLDERS):
            h = len(current) + 1
        else:
            free = [
                h
                for h, c in current.items()
                if last[c] < n and c not in failed and events[last[c]].get("phase") == "done"
            ]
            if not free:
                raise TraceError(
                    f"more than {len(R_HOLDERS)} sections at once on one key (at event "
                    f"{n + 1}): spec/Reentrant.tla has {len(R_HOLDERS)} holders, one "
                    "section each at a time"
                )
            h = min(free, key=lambda h: last[current[h]])
            fresh.add(n)
        holder[client] = h
        current[h] = client
    return holder, fresh


def _behind_abandoned(
    events: Sequence[dict[str, Any]], index: dict[str, int], waits: set[str], abandoned: list[str]
) -> list[str]:
    """For each event, the waiting sections (a TLA+ set) whose attempt may be refused on
    a free key before it, behind an abandoned place (:func:`_abandoned_places`): those
    under way then (begun before the event, not ended before it), while some place may
    be abandoned."""
    first, last = _spans(events)
    return [
        "{"
        + ", ".join(
            str(index[c])
            for c in sorted(waits, key=index.__getitem__)
            if gone != "{}" and first[c] < n <= last[c]
        )
        + "}"
        for n, gone in enumerate(abandoned)
    ]


def _spec_state(e: dict[str, Any]) -> tuple[str, str]:
    """The phase and outcome of ``spec/Reentrant.tla`` after event ``e``: a denial with
    retries left (phase ``backoff``) ends the spec's section as not acquired (the wrapper's
    RetryAcquire starts it again)."""
    phase, outcome = str(e["phase"]), str(e["outcome"])
    if phase in ("backoff", "waiting"):
        return "done", "not_acquired"
    if phase == "release_unknown":
        raise TraceError("a manual handle's unanswered release is not a step of spec/Reentrant.tla")
    return phase, outcome


def build_reentrant_model(
    events: Sequence[dict[str, Any]],
    *,
    complete: bool = True,
    ticks: int = TTL_TICKS,
    hang_after_ms: float = 0.0,
) -> Model:
    """The TraceData module and TLC config checking a reentrant lock's ``events`` (one
    key) with ``spec/ReentrantTrace.tla`` against ``spec/Reentrant.tla``.

    The sections, in the order they first appear, are the spec's holders ``Parent``,
    ``Child`` and ``Other`` (each holder runs one section; the spec's holders differ only
    in their names, so any two holders of one process or of two stand for each other).
    The holders that re-enter are ``Deep``, and ``MaxDepth`` is the deepest level
    recorded.

    A declared data loss (Redis restarted empty) is one key loss more, and one that may
    reset the fence counter (``CounterSurvives`` FALSE); the fence order is then not
    compared (``CheckFences``), as for the lock: the pre-pass compares fences within each
    stretch between declarations."""
    logged = [(i, e) for i, e in enumerate(events) if not _is_declaration(e)]
    if not logged:
        raise TraceError("empty trace")
    declared = _data_losses(events)
    declarations = [e for e in events if _is_declaration(e)]
    windows = _unrun_windows(declarations, hang_after_ms)
    rows_of = [i for i, _ in logged]
    events = [e for _, e in logged]
    never_ran = _never_ran(events, windows, reentrant=True)
    index: dict[str, int] = {}
    config: dict[str, dict[str, Any]] = {}
    for e in events:
        client = str(e["client"])
        if client not in index:
            index[client] = len(index) + 1
            config[client] = e
        if e["action"] not in R_ACTIONS:
            raise TraceError(f"{e['action']!r} is not an action of spec/Reentrant.tla")
    holder_of, fresh = _reentrant_holders(events, hang_after_ms=hang_after_ms)
    firsts = list(config.values())
    ttl_ms = _ttl_ms(firsts)
    # A manual acquire that is never granted (a refused child task) is any holder's.
    granted = {str(e["client"]) for e in events if _granted_fence(e) is not None}
    for e in firsts:
        renewed = e.get("watch") and e.get("renew_every_ms") is not None
        if str(e["client"]) in granted and not renewed:
            raise TraceError(
                f"section {e['client']!r} is not renewed: the holders of spec/Reentrant.tla "
                "run hold/run sections with a heartbeat"
            )
    beats = {
        float(e["renew_every_ms"])
        for e in firsts
        if e.get("watch") and e.get("renew_every_ms") is not None
    }
    if len(beats) > 1:
        raise TraceError(f"the sections must share one heartbeat, got {beats}")
    unit = ttl_ms / ticks
    beat_ms = next(iter(beats)) if beats else ttl_ms / 4
    heartbeat = max(1, min(ticks // 2, round(beat_ms / unit)))
    lows, keep = _lows(events, ttl_ms, ticks)
    faults = _plausible_faults(
        events,
        index,
        complete=complete,
        hang_after_ms=hang_after_ms,
        reentrant=True,
        never_ran=never_ran,
        losses=loss_windows(declarations),
    )
    waits = {c for c, e in config.items() if e.get("wait_ms")}
    takers = {c for c in waits if config[c].get("renew_every_ms") is not None}
    hands = _handed_before(events, index, takers)
    abandoned = _abandoned_places(events, index)
    behind = _behind_abandoned(events, index, waits, abandoned)
    hand_ttl = max(1, round(min(ttl_ms, HANDED_TTL_MS) / unit))
    deep: set[int] = set()
    max_depth = 1
    fences = dict.fromkeys(index, 0)
    ranks = _fence_ranks(events)
    t0 = _time(events[0])
    k = 0
    rows: list[str] = []
    for n, e in enumerate(events):
        client = str(e["client"])
        action = str(e["action"])
        k = max(k, math.ceil((_time(e) - t0) / unit) + 1)
        kind = R_REPLY_KIND.get(action, "")
        value = e.get("granted") if action == "AcquireReply" else e.get("ok")
        if not isinstance(value, bool):
            kind = ""
        fence = e.get("fence") if action == "AcquireReply" and value else 0
        if _handed_fence(e) is not None:
            # a Wake with the fence of a key handed over: a grant
            kind, value, fence = "hand", True, e.get("fence")
        fence = ranks.get(fence, 0) if isinstance(fence, int) and not isinstance(fence, bool) else 0
        if fence:
            fences[client] = fence
        depth = e.get("depth", -1)
        if isinstance(depth, bool) or not isinstance(depth, int):
            raise TraceError(f"a depth that is not a number: {e}")
        if action == "Reenter":
            deep.add(holder_of[client])
            max_depth = max(max_depth, depth + 1)
        max_depth = max(max_depth, depth)
        phase, outcome = _spec_state(e)
        rows.append(
            f"[a |-> {_tla_str(action)}, c |-> {index[client]}, k |-> {k}, "
            f"lo |-> {lows[n]}, keep |-> {_tla_bool(keep[n])}, "
            f"phase |-> {_tla_str(phase)}, outcome |-> {_tla_str(outcome)}, "
            f"lost |-> {_tla_bool(e['lost'])}, depth |-> {depth}, kind |-> {_tla_str(kind)}, "
            f"ok |-> {_tla_bool(value)}, fence |-> {fence}, fresh |-> {_tla_bool(n in fresh)}, "
            f"w |-> {_tla_bool(client in waits)}, waits |-> {_tla_bool(e['phase'] == 'waiting')}, "
            f"late |-> {_tla_bool(_late_wake(e))}, "
            f"hand |-> {hands[n]}, abandoned |-> {abandoned[n]}, behind |-> {behind[n]}, "
            f"{faults[n]}]"
        )
    data = (
        "---------------------------- MODULE TraceData ----------------------------\n"
        "(* Generated by distlock.tools.tracecheck from a recorded trace. *)\n"
        "EXTENDS Integers, Sequences\n\n"
        f"Sections == {len(index)}\n\n"
        f"HolderIndex == <<{', '.join(str(holder_of[c]) for c in index)}>>\n\n"
        f"Fence == <<{', '.join(str(fences[c]) for c in index)}>>\n\n"
        f"HandTTL == {hand_ttl}\n\n"
        f"CheckFences == {_tla_bool(not declared)}\n\n"
        "Trace == <<\n  " + ",\n  ".join(rows) + "\n>>\n"
        "=============================================================================\n"
    )
    holders = ", ".join(R_HOLDERS[: len(set(holder_of.values()))])
    failures = sum(1 for e in events if str(e["action"]).endswith("Fail")) - len(never_ran)
    cfg = "\n".join(
        [
            "CONSTANTS",
            *(f"    {h} = {h}" for h in R_HOLDERS),
            f"    Holders = {{{holders}}}",
            f"    Deep = {{{', '.join(R_HOLDERS[i - 1] for i in sorted(deep))}}}",
            f"    MaxDepth = {max_depth}",
            f"    TTL = {ticks}",
            f"    Heartbeat = {heartbeat}",
            f"    Margin = {TRACE_MARGIN}",
            f"    MaxFaults = {failures + declared + SPARE_FAULTS}",
            f"    CounterSurvives = {_tla_bool(not declared)}",
            '    Mutant = "none"',
            "INIT TraceInit",
            "NEXT TraceNext",
            "INVARIANT Unexplained",
            "CONSTRAINT Progress",
            "VIEW TraceView",
            "",
        ]
    )
    return Model(data, None, cfg, len(index), rows_of, module="ReentrantTrace")


#: Replies and failures after which the key may have been lost without expiring: a key
#: loss before them is plausible (some section will find its key gone, or never know).
_LOSS_WITNESS: Final = frozenset({"RenewFail", "ExtendFail", "ReleaseFail"})
_R_LOSS_WITNESS: Final = frozenset({"RenewFail", "ReenterFail", "LeaveFail", "ReleaseFail"})
#: The events a starved section cannot take (its timers and reply callbacks): before one
#: of them, when it comes late (see :func:`_plausible_faults`), a starvation may have
#: ended mid-body (the trace's ``Resume``), and may have begun.
_STARVED_OUT: Final = frozenset({"RenewSend", "RenewReply", "RenewFail", "LeaseTimeout"})
#: The events that end a starvation in the spec (the end of the starved level's body):
#: before one, a starvation may have begun.  spec/Reentrant.tla starves a body at any
#: depth until its level exits: ``BodyDone``, or an inner level's ``Leave``.
_STARVE_ENDS: Final = frozenset({"BodyDone"})
_R_STARVE_ENDS: Final = frozenset({"BodyDone", "Leave"})


def _plausible_faults(
    events: Sequence[dict[str, Any]],
    index: dict[str, int],
    *,
    complete: bool,
    hang_after_ms: float = 0.0,
    reentrant: bool = False,
    followed: Collection[str] = (),
    never_ran: Collection[int] = (),
    losses: Sequence[tuple[float, float]] | None = None,
    dies: bool = False,
    quiet_once_lost: bool = False,
) -> list[str]:
    """For each event, the faults that may happen before it, as TLA+ record fields.

    ``drop`` and ``hang``: the requests in flight (<<section, kind>>) whose reply may be
    dropped (the section's next word on it is the failure) or may hang (the failure, or
    no word at all).  ``starve``: the sections that may stop running timers and replies
    (their next event is the end of the body, or, for the reentrant lock, of an inner
    level, or they have none, or it is one a starved section cannot take and comes more
    than two renewal intervals after their previous one).  ``resume``: the sections whose
    starvation may end before the body (or level) does (that last case).
    ``keylost``: whether the key may vanish, i.e. some later reply finds a key gone (a 0 to
    a renewal, extend or release) or some later round trip fails. A fault outside these
    would only lead TLC down dead ends. A prefix of a trace (``complete`` false) may go on
    with any witness: a key loss is then always plausible. A request reported failed sooner
    than ``hang_after_ms`` after its send (less than the client's socket timeout: the
    connection failed) is not left to run later: its reply is dropped. ``reentrant``: the
    kinds of ``spec/Reentrant.tla`` (re-entries and inner exits too).  ``index`` maps
    each section to its model client; ``followed``: the sections whose model client runs
    another section after them (a lock's rounds): once they have no event left, their
    client is the later section's, and is not offered their faults.

    ``never_ran``: the failure events whose request certainly never ran (see
    :func:`_never_ran`).  Such a request is offered no fault, and Redis may not run it:
    it is in ``unsent`` from its send to its failure, and in ``refused`` right before the
    failure, where it fails as it did, without running and without a fault.
    ``losses``: when the key may be lost (:func:`loss_windows`; None: wherever plausible):
    before an event from the first at or after a window's start to the first after its
    end.

    ``dies``: a section with no event left may die (``die``: the spec's ``Die``, a killed
    process) rather than starve: a killed section is one that stops, and so is one the
    end of a prefix cut short.

    ``quiet_once_lost``: a section whose loss signal has fired (its previous event records
    ``lost``) has no timer left to hold back (``spec/ReadWrite.tla`` sends no renewal and
    fires no lease timeout once lost), so a late event of it is no sign of a starvation:
    none is offered there.  (A starvation there would only hold back its renewal's reply,
    which nothing awaits.)
    """
    reply_kind = R_REPLY_KIND if reentrant else REPLY_KIND
    send_of = R_SEND_OF if reentrant else SEND_OF
    fail_of = R_FAIL_OF if reentrant else FAIL_OF
    loss_witness = _R_LOSS_WITNESS if reentrant else _LOSS_WITNESS
    starve_ends = _R_STARVE_ENDS if reentrant else _STARVE_ENDS
    reply_of = {kind: action for action, kind in reply_kind.items()}
    outstanding: dict[tuple[str, str], float] = {}
    before: list[frozenset[tuple[str, str]]] = []
    # Requests reported failed sooner than ``hang_after_ms`` after their send.
    quick: set[int] = set()
    for n, e in enumerate(events):
        before.append(frozenset(outstanding))
        client, action = str(e["client"]), e["action"]
        for kind, send in send_of.items():
            if action == send:
                outstanding[(client, kind)] = _time(e)
            elif action in (reply_of[kind], fail_of[kind]):
                sent = outstanding.pop((client, kind), None)
                if sent is not None and _time(e) - sent < hang_after_ms:
                    quick.add(n)
    # Whether each event of a section comes late enough after the section's previous one
    # for its timers to have been held back: more than two renewal intervals (any gap
    # for a section that does not renew).  Only before such an event may a starvation
    # have ended; elsewhere the offer would only lead TLC down dead ends.
    every: dict[str, float] = {}
    previous: dict[str, float] = {}
    signalled: dict[str, bool] = {}
    held_back: list[bool] = []
    for e in events:
        client = str(e["client"])
        if e["action"] == "Acquire" and e.get("renew_every_ms") is not None:
            every[client] = float(e["renew_every_ms"])
        held_back.append(
            _time(e) - previous.get(client, _time(e)) > 2 * every.get(client, 0.0)
            and not (quiet_once_lost and signalled.get(client, False))
        )
        previous[client] = _time(e)
        signalled[client] = e.get("lost") is True
    # Where the key may be lost: everywhere, or in the windows of the declared losses.
    lossy = [losses is None] * len(events)
    for since, until in losses or ():
        start = next((n for n, e in enumerate(events) if _time(e) >= since), len(events))
        end = next((n for n, e in enumerate(events) if _time(e) > until), len(events) - 1)
        for n in range(start, end + 1):
            lossy[n] = True
    upcoming: dict[tuple[str, str], tuple[str, int]] = {}
    next_action: dict[str, str] = {}
    late: dict[str, bool] = {}
    witness = not complete
    fields: list[str] = [""] * len(events)
    for n in reversed(range(len(events))):
        client, action = str(events[n]["client"]), str(events[n]["action"])
        next_action[client] = action
        late[client] = held_back[n]
        if action in loss_witness or (
            action in reply_kind and action != "AcquireReply" and events[n].get("ok") is False
        ):
            witness = True
        for kind in send_of:
            if action in (reply_of[kind], fail_of[kind]):
                upcoming[(client, kind)] = (action, n)
        drop, hang, unsent, refused = [], [], [], []
        for client_kind in sorted(before[n]):
            word, at = upcoming.get(client_kind, (None, -1))
            pair = f'<<{index[client_kind[0]]}, "{client_kind[1]}">>'
            if at in never_ran and word == fail_of[client_kind[1]]:
                unsent.append(pair)
                if at == n:
                    refused.append(pair)
                continue
            if word == fail_of[client_kind[1]]:
                drop.append(pair)
            if word is None or (word == fail_of[client_kind[1]] and at not in quick):
                hang.append(pair)
        starve = sorted(
            {
                i
                for c, i in index.items()
                if (
                    next_action.get(c, "BodyDone") in starve_ends
                    and not (c not in next_action and (c in followed or dies))
                )
                or (c in next_action and next_action[c] in _STARVED_OUT and late[c])
            }
        )
        die = sorted(i for c, i in index.items() if dies and c not in next_action)
        resume = sorted(
            {i for c, i in index.items() if next_action.get(c) in _STARVED_OUT and late[c]}
        )
        fields[n] = (
            f"drop |-> {{{', '.join(drop)}}}, hang |-> {{{', '.join(hang)}}}, "
            f"starve |-> {{{', '.join(map(str, starve))}}}, "
            f"resume |-> {{{', '.join(map(str, resume))}}}, "
            f"keylost |-> {_tla_bool(witness and lossy[n])}, "
            f"unsent |-> {{{', '.join(unsent)}}}, refused |-> {{{', '.join(refused)}}}"
            + (f", die |-> {{{', '.join(map(str, die))}}}" if dies else "")
        )
    return fields


#: States TLC keeps queued in memory before spilling to disk (see :func:`_run_tlc`).
QUEUE_IN_MEMORY: Final = 1 << 18

_REACHED = re.compile(r'<<"reached", (\d+)>>')


@dataclass
class _Run:
    accepted: bool
    #: The row (0-based) no behaviour explains, when rejected.
    row: int | None
    exit_code: int
    output: str


def _run_tlc(
    model: Model, spec: Path, timeout_s: float, niceness: int = 0, cpu_s: float | None = None
) -> _Run:
    java = shutil.which("java")
    if java is None:
        raise TraceError("java is not installed (TLC needs it)")
    nice = shutil.which("nice") if niceness else None
    with tempfile.TemporaryDirectory(prefix="distlock-trace-") as tmp:
        work = Path(tmp)
        name = model.module
        trace_spec = model.trace_spec
        if trace_spec is None:
            trace_spec = (spec / f"{name}.tla").read_text(encoding="ascii")
        (work / "TraceData.tla").write_text(model.data, encoding="ascii")
        for module, text in model.modules.items():
            (work / f"{module}.tla").write_text(text, encoding="ascii")
        (work / f"{name}.tla").write_text(trace_spec, encoding="ascii")
        (work / f"{name}.cfg").write_text(model.cfg, encoding="ascii")
        (work / "tmp").mkdir()
        cmd = [
            *([nice, "-n", str(niceness)] if nice else []),
            java,
            "-XX:+UseParallelGC",
            # Keep TLC's queue of unexplored states in memory: TLC 2.15 fails writing some
            # states to disk ("Cannot invoke FcnRcdValue.write", seen on semaphore traces
            # of several thousand states queued); the default spills past 8192.
            f"-Dtlc2.tool.queue.DiskStateQueue.BufSize={QUEUE_IN_MEMORY}",
            f"-Djava.io.tmpdir={work / 'tmp'}",
            f"-DTLA-Library={spec.resolve()}",
            "-cp",
            str(tla2tools()),
            "tlc2.TLC",
            "-workers",
            "1",
            "-deadlock",
            "-metadir",
            str(work / "meta"),
            "-config",
            f"{name}.cfg",
            f"{name}.tla",
        ]
        proc = subprocess.Popen(
            cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        if cpu_s is not None:
            # Past its CPU budget the kernel stops TLC (SIGXCPU, then SIGKILL at the hard
            # limit), however busy the machine is: a budget in wall seconds would turn a
            # loaded machine into a timeout of a check that needs little work.
            budget = math.ceil(cpu_s)
            resource.prlimit(proc.pid, resource.RLIMIT_CPU, (budget, budget + 5))
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    if cpu_s is not None and proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise subprocess.TimeoutExpired(cmd, cpu_s)
    output = stdout + stderr
    if proc.returncode == 12:
        return _Run(True, None, 12, output)
    if proc.returncode != 0:
        raise TraceError(f"TLC failed with exit {proc.returncode}:\n{output[-3000:]}")
    reached = [int(m) for m in _REACHED.findall(output)]
    return _Run(False, max(reached) - 1 if reached else None, 0, output)


def check_key(
    key: str,
    events: Sequence[dict[str, Any]],
    *,
    spec: Path | None = None,
    timeout_s: float = 600.0,
    complete: bool = True,
    ticks: int = TTL_TICKS,
    hang_after_ms: float = 0.0,
    niceness: int = 0,
    cpu_s: float | None = None,
    reentrant: bool | None = None,
    semaphore: bool | None = None,
    readwrite: bool | None = None,
    election: bool | None = None,
) -> Verdict:
    """The pre-pass, then TLC, on the sections of one key (``complete`` false: the events
    are a prefix of a longer trace).  ``readwrite``: check against ``spec/ReadWrite.tla``
    (None: when :func:`is_readwrite`); ``reentrant``: against ``spec/Reentrant.tla``
    (None: when :func:`is_reentrant`); ``semaphore``: against ``spec/Semaphore.tla`` with
    the recorded limit (None: when :func:`is_semaphore`); else ``spec/DistLock.tla``."""
    spec = spec or spec_dir()
    if readwrite is None:
        readwrite = is_readwrite(events)
    if reentrant is None:
        reentrant = not readwrite and is_reentrant(events)
    if semaphore is None:
        semaphore = not readwrite and not reentrant and is_semaphore(events)
    if election is None:
        election = not (readwrite or reentrant or semaphore) and is_election(events)
    build: Callable[..., Model] = build_model
    needs: tuple[str, ...] = ("DistLock.tla",)
    readers: set[str] = set()
    if election:
        build, needs = build_election_model, ("DistLock.tla", "ElectionTrace.tla")
    elif readwrite:
        build, needs = build_readwrite_model, ("ReadWrite.tla", "ReadWriteTrace.tla")
        readers = readers_of(events)
    elif reentrant:
        build, needs = build_reentrant_model, ("Reentrant.tla", "ReentrantTrace.tla")
    elif semaphore:
        build = functools.partial(build_model, limit=semaphore_limit(events))
        needs = ("Semaphore.tla", "SemaphoreTrace.tla")
    for needed in needs:
        if not (spec / needed).is_file():
            raise TraceError(f"no {needed} in {spec}")
    model = build(events, complete=complete, ticks=ticks, hang_after_ms=hang_after_ms)
    started = time.monotonic()
    problem = prepass(events, fences=not semaphore, readers=readers)
    checked = events if problem is None else events[: problem.index]
    run: _Run | None = None
    rows: list[int] = []
    if any(not _is_declaration(e) for e in checked):
        prefix = (
            model
            if problem is None
            else build(checked, complete=False, ticks=ticks, hang_after_ms=hang_after_ms)
        )
        rows = prefix.rows
        run = _run_tlc(prefix, spec, timeout_s, niceness, cpu_s)
    verdict = Verdict(
        key=key,
        accepted=problem is None and run is not None and run.accepted,
        events=len(events),
        sections=model.sections,
        seconds=time.monotonic() - started,
        exit_code=run.exit_code if run is not None else 0,
        output=run.output if run is not None else "",
    )
    if verdict.accepted:
        return verdict
    if run is not None and not run.accepted:
        verdict.by = "TLC"
        verdict.reason = "no behaviour of the spec explains"
        if run.row is not None and run.row < len(rows):
            verdict.first_unexplained = rows[run.row]
    elif problem is not None:
        verdict.by = "pre-pass"
        verdict.reason = problem.reason
        verdict.first_unexplained = problem.index
    if verdict.first_unexplained is not None:
        verdict.event = dict(events[verdict.first_unexplained])
    return verdict


def first_ms(events: Sequence[dict[str, Any]], ms: float) -> list[dict[str, Any]]:
    """The events before the first one ``ms`` or more after the trace's start: a prefix
    in file order (what a prefix shows happened, whatever came next)."""
    if not events:
        return []
    t0 = _time(events[0])
    cut = next((i for i, e in enumerate(events) if _time(e) - t0 >= ms), len(events))
    return list(events[:cut])


def check(
    events: Sequence[dict[str, Any]],
    *,
    spec: Path | None = None,
    timeout_s: float = 600.0,
    condensed: bool = False,
    within_ms: float | None = None,
    ticks: int = TTL_TICKS,
    hang_after_ms: float = 0.0,
    niceness: int = 0,
    cpu_s: float | None = None,
    reentrant: bool | None = None,
    semaphore: bool | None = None,
) -> list[Verdict]:
    """One verdict per key of the trace.

    ``condensed``: check :func:`condense` of the events.  ``within_ms``: check only each
    key's events of its first ``within_ms`` (:func:`first_ms`).  Both keep a genuine
    trace accepted and cost TLC far less on long, contended runs, as do fewer ``ticks``
    per TTL.  ``hang_after_ms``: the clients' socket timeout, if known (a request that
    failed sooner failed on its connection, and cannot run later).  ``niceness``: run
    TLC at that lower scheduling priority (beside timing-sensitive work).  ``cpu_s``: stop
    TLC after that much CPU time (raising :class:`subprocess.TimeoutExpired`), which a busy
    machine does not shorten as it shortens ``timeout_s``'s wall-clock budget.
    """
    if condensed:
        events = condense(events)
    verdicts = []
    for key, evs in split_by_key(events).items():
        part = evs if within_ms is None else first_ms(evs, within_ms)
        verdicts.append(
            check_key(
                key,
                part,
                spec=spec,
                timeout_s=timeout_s,
                complete=len(part) == len(evs),
                ticks=ticks,
                hang_after_ms=hang_after_ms,
                niceness=niceness,
                cpu_s=cpu_s,
                reentrant=is_reentrant(evs) if reentrant is None else reentrant,
                semaphore=semaphore,
                readwrite=is_readwrite(evs),
            )
        )
    return verdicts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", type=Path, help="an NDJSON trace (distlock.trace.NdjsonRecorder)")
    parser.add_argument("--spec-dir", type=Path, default=None, help="default: the spec/ here")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per key")
    parser.add_argument(
        "--condense",
        action="store_true",
        help="drop the middle of each run of refused attempts (a weaker, much faster check)",
    )
    parser.add_argument(
        "--within-ms",
        type=float,
        default=None,
        help="check only the first MS of each key's events (a prefix)",
    )
    parser.add_argument(
        "--ticks",
        type=int,
        default=TTL_TICKS,
        help=f"model ticks per TTL (default {TTL_TICKS}; fewer: faster and coarser)",
    )
    parser.add_argument(
        "--hang-after-ms",
        type=float,
        default=0.0,
        help="a round trip that failed sooner than this failed on its connection and never "
        "ran in Redis (the chaos suite passes its socket timeout)",
    )


def run_cli(args: argparse.Namespace) -> int:
    """0 when TLC accepts every key's sections, 1 when it rejects one (naming the first
    event no behaviour explains), 2 when the trace cannot be checked."""
    from distlock.trace import read_events

    try:
        verdicts = check(
            read_events(args.trace),
            spec=args.spec_dir,
            timeout_s=args.timeout,
            condensed=args.condense,
            within_ms=args.within_ms,
            ticks=args.ticks,
            hang_after_ms=args.hang_after_ms,
        )
    except (TraceError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        print(f"validate-trace: {exc}")
        return 2
    for v in verdicts:
        print(v.describe())
    return 0 if all(v.accepted for v in verdicts) else 1


def main(argv: Sequence[str]) -> int:
    """``validate-trace TRACE.ndjson`` with ``argv`` as its arguments."""
    parser = argparse.ArgumentParser(
        prog="python -m distlock validate-trace",
        description="Check that a recorded NDJSON trace is a behaviour of spec/DistLock.tla "
        "(of spec/Reentrant.tla for a reentrant lock's, of spec/Semaphore.tla for a "
        "semaphore's permits, of spec/ReadWrite.tla for a read-write lock's sections).",
    )
    add_arguments(parser)
    return run_cli(parser.parse_args(list(argv)))


__all__ = [
    "DATA_LOSS",
    "Problem",
    "TraceError",
    "Verdict",
    "add_arguments",
    "build_election_model",
    "build_model",
    "build_readwrite_model",
    "build_reentrant_model",
    "check",
    "check_key",
    "condense",
    "first_ms",
    "is_election",
    "is_readwrite",
    "is_reentrant",
    "is_semaphore",
    "lock_rounds",
    "lower_bound",
    "main",
    "prepass",
    "readers_of",
    "run_cli",
    "semaphore_limit",
    "split_by_key",
]
