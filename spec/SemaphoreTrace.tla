--------------------------- MODULE SemaphoreTrace ---------------------------
(***************************************************************************)
(* Trace validation of the semaphore: is a recorded trace of the permit    *)
(* sections on one id a behaviour of Semaphore.tla?                        *)
(* distlock.tools.tracecheck writes the recorded events as the module      *)
(* TraceData (Trace, a sequence of records; e.c is the section's index,    *)
(* which is its client in the spec) and a cfg that sets Limit to the limit *)
(* the Acquire events recorded; this module is the same for every trace.   *)
(*                                                                         *)
(* Each step either takes the client action named by event l, with the    *)
(* observed state after it (phase, outcome, loss signal), the reply value *)
(* Redis gave and at least e.lo ticks since the section's previous event  *)
(* all matching; or is one of the environment's unlogged steps, with time *)
(* bounded by the next event's timestamp (e.k) and faults only where the  *)
(* rest of the trace can tell them (e.drop, e.hang, e.starve, e.keylost); *)
(* a request sent and failed while no Redis ran never runs (e.unsent).     *)
(* A permit has no fence: no fence order is checked.                       *)
(*                                                                         *)
(* Waiting (wait_ms): a refused attempt with time left waits in the       *)
(* spec's "backoff" (WaitDenied: the core's "waiting"; the last one ends   *)
(* not acquired) and the next attempt leaves from there; a Block, a Wake   *)
(* and a withdrawal change nothing of the permits (the semaphore's release *)
(* wakes its queue and never hands a permit over).  A place left queued by  *)
(* a withdrawal that got no answer may refuse a waiting attempt on a free   *)
(* permit (BehindAbandoned).                                               *)
(*                                                                         *)
(* Each section's permit has its own TTL (TraceData's SectionTTL, in ticks: *)
(* Semaphore objects of one id may pass different ttl_ms); the cfg puts     *)
(* TraceTTLOf in the place of Semaphore.tla's TTLOf.                       *)
(*                                                                         *)
(* A run/hold section with heartbeat_ms=False (AutoRenew but not Renews)   *)
(* watches its lease and never renews: before its first step it is given  *)
(* a renewal "in flight" that no message carries (Unrenewed), so the     *)
(* spec's heartbeat never sends and its lease timer still fires.           *)
(*                                                                         *)
(* Invariant Unexplained is VIOLATED iff a behaviour explains the whole   *)
(* trace (TLC 2.15 cannot ask "some behaviour reaches the end" otherwise). *)
(***************************************************************************)
EXTENDS Semaphore, TraceData, TLC

VARIABLES l, now, at, withdrawing

ASSUME TLCSet(1, 0)

TraceTTLOf(c) == SectionTTL[c]

(* Waiting: a refusal with time left leaves the section waiting ("backoff"); *)
(* a refusal of the attempt sent at the deadline ends it not acquired.       *)
(* A waiter's refusals take none of its retries.                              *)
WaitDenied(c) ==
    /\ phase[c] = "acquiring"
    /\ \E m \in net :
        /\ Mine(m, c, "acquire") /\ m.st = "done" /\ m.val = 0
        /\ net' = net \ {m}
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ \E last \in BOOLEAN :
        /\ phase' = [phase EXCEPT ![c] = IF last THEN "done" ELSE "backoff"]
        /\ outcome' = [outcome EXCEPT ![c] = IF last THEN "not_acquired" ELSE @]
    /\ UNCHANGED <<retries_left, token, deadline_in, renew_in_flight, renew_sent_ago,
                   next_renew_in, extend_in_flight, extend_sent_ago, lost, granted,
                   auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

WaitReply(c) == \/ AcquireReply(c) /\ phase'[c] = "held"
                \/ WaitDenied(c)

(* A withdrawal from a block ends the section not acquired; from elsewhere  *)
(* (an attempt that failed) it changes nothing.  Its reply or failure       *)
(* changes nothing either.                                                  *)
WaitWithdraw(c) ==
    /\ ~withdrawing[c]
    /\ IF phase[c] = "backoff"
       THEN /\ phase' = [phase EXCEPT ![c] = "done"]
            /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
       ELSE UNCHANGED <<phase, outcome>>
    /\ UNCHANGED <<retries_left, token, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED ghost_vars
    /\ withdrawing' = [withdrawing EXCEPT ![c] = TRUE]

(* heartbeat_ms=False: a renewal in flight that no message carries, taken   *)
(* before the section's first step, keeps the spec's heartbeat from sending *)
(* (RenewSendEnabled) and leaves the lease timer (LeaseTimeout) as it is.  *)
Unrenewed(c) ==
    /\ AutoRenew[c] /\ ~Renews[c]
    /\ phase[c] = "idle" /\ ~renew_in_flight[c]
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<phase, outcome, retries_left, token, deadline_in, sent_ago,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED ghost_vars

Logged(e) ==
    LET c == e.c IN
    CASE e.a = "Acquire"      -> Acquire(c)
      [] e.a = "AcquireReply" -> IF e.w THEN WaitReply(c) ELSE AcquireReply(c)
      [] e.a = "AcquireFail"  -> AcquireFail(c)
      [] e.a = "RenewSend"    -> RenewSend(c)
      [] e.a = "RenewReply"   -> RenewReply(c)
      [] e.a = "RenewFail"    -> RenewFail(c)
      [] e.a = "LeaseTimeout" -> LeaseTimeout(c)
      [] e.a = "Extend"       -> Extend(c)
      [] e.a = "ExtendReply"  -> ExtendReply(c)
      [] e.a = "ExtendFail"   -> ExtendFail(c)
      [] e.a = "BodyDone"     -> BodyDone(c)
      [] e.a = "Release"      -> Release(c)
      [] e.a = "ReleaseReply" -> ReleaseReply(c)
      [] e.a = "ReleaseFail"  -> ReleaseFail(c)
      [] e.a = "Block"        -> phase[c] = "backoff" /\ UNCHANGED vars
      [] e.a = "Wake"         -> phase[c] = "backoff" /\ UNCHANGED vars
      [] e.a = "Withdraw"     -> WaitWithdraw(c)

(* The steps of the trace's client actions that leave withdrawing as it is. *)
Steps(e) ==
    IF e.a = "Withdraw" THEN Logged(e)
    ELSE IF e.a \in {"WithdrawReply", "WithdrawFail"}
    THEN /\ withdrawing[e.c] /\ UNCHANGED vars
         /\ withdrawing' = [withdrawing EXCEPT ![e.c] = FALSE]
    ELSE IF e.a = "Acquire" /\ AutoRenew[e.c] /\ ~Renews[e.c]
    THEN renew_in_flight[e.c] /\ Logged(e) /\ UNCHANGED withdrawing  \* never renews
    ELSE Logged(e) /\ UNCHANGED withdrawing

(* The core's state after its step. *)
Observed(e) ==
    /\ phase'[e.c] = e.phase
    /\ outcome'[e.c] = e.outcome
    /\ lost'[e.c] = e.lost

(* The reply the core was handed is the one the spec's Redis gave that request. *)
Answered(e) ==
    e.kind # "" =>
        \A m \in net \ net' : Mine(m, e.c, e.kind) => ((m.val > 0) = e.ok)

(* At least e.lo ticks since the section's previous event. *)
Elapsed(e) == now >= at[e.c] + e.lo

(* Trace only: the body stops starving the timers before it ends (the     *)
(* spec's Starve lasts until BodyDone).  Only that moves: the permit's     *)
(* timers are due at once, and BodyDone still judges the body on the       *)
(* deadline the clock made.  Offered where the section's next event is one *)
(* a starved section cannot take (Trace[l].resume).                        *)
Resume(c) ==
    /\ phase[c] = "held" /\ starved[c]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<drift, perm_ttl, key_ttl, released, faults, dead, net>>
    /\ UNCHANGED ghost_vars

(* A waiter whose withdrawal got no answer (e.abandoned: such sections, from  *)
(* their Withdraw until their place ends on its own) may have left its place  *)
(* queued, first in line: a waiting attempt is then refused though a permit  *)
(* is free (the waiting acquire grants a free permit only to the first in    *)
(* line).  A semaphore's release never hands a permit to a place.            *)
BehindAbandoned(m) ==
    /\ m \in net /\ m.st \in {"sent", "hung"} /\ m.kind = "acquire"
    /\ Waits[m.tok[1]] /\ perm_ttl[m.tok] = 0 /\ Cardinality(Live) < Limit
    /\ Answer(m, 0)
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* A request that never ran (sent and failed while no Redis process ran:    *)
(* e.unsent, from its send to its failure): Redis does not run it and no    *)
(* fault befalls it; right before its failure (e.refused) it fails as it   *)
(* did, unrun and without a fault.                                          *)
NoRun(m) == <<m.tok[1], m.kind>> \in Trace[l].unsent /\ m.tok = token[m.tok[1]]

Refused(m) ==
    /\ m \in net /\ m.st = "sent" /\ Awaited(m)
    /\ <<m.tok[1], m.kind>> \in Trace[l].refused
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "error"]}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* A dropped renewal that failed on its connection (not in e.hang: sooner than  *)
(* the socket timeout) is not also left queued at Redis to run later.            *)
NoneLeftQueued == {x \in net' : x.st = "hung"} \subseteq net

(* Faults only where the rest of the trace can tell them. *)
Hidden ==
    \/ /\ Tick /\ now < Trace[l].k /\ now' = now + 1 /\ UNCHANGED withdrawing
    \/ /\ \E c \in Clients : Unrenewed(c)
       /\ UNCHANGED <<now, withdrawing>>
    \/ /\ \/ \E m \in net : ~NoRun(m) /\ RedisStep(m)
          \/ \E m \in net : Refused(m)
          \/ \E m \in net : <<m.tok[1], m.kind>> \in Trace[l].drop /\ DropReply(m)
                /\ (<<m.tok[1], m.kind>> \notin Trace[l].hang => NoneLeftQueued)
          \/ \E m \in net : <<m.tok[1], m.kind>> \in Trace[l].hang /\ HangReply(m)
          \/ Trace[l].keylost /\ KeyLost
          \/ \E c \in Trace[l].starve : Starve(c)
          \/ \E c \in Trace[l].resume : Resume(c)
          \/ Trace[l].abandoned # {} /\ \E m \in net : ~NoRun(m) /\ BehindAbandoned(m)
       /\ UNCHANGED <<now, withdrawing>>

TraceInit ==
    /\ Init
    /\ auto_renew = [c \in Clients |-> AutoRenew[c]]
    /\ l = 1
    /\ now = 0
    /\ at = [c \in Clients |-> 0]
    /\ withdrawing = [c \in Clients |-> FALSE]

TraceNext ==
    /\ l <= Len(Trace)
    /\ \/ /\ Elapsed(Trace[l])
          /\ Steps(Trace[l]) /\ Observed(Trace[l]) /\ Answered(Trace[l])
          /\ at' = [at EXCEPT ![Trace[l].c] = IF Trace[l].keep THEN now ELSE 0]
          /\ l' = l + 1 /\ UNCHANGED now
       \/ /\ Hidden /\ UNCHANGED <<l, at>>

Unexplained == l <= Len(Trace)

(* The ghost variables are read by no action: states differing only there *)
(* have the same futures.                                                 *)
TraceView == <<client_vars, env_vars, l, now, at, withdrawing>>

Progress == IF l > TLCGet(1) THEN TLCSet(1, l) /\ PrintT(<<"reached", l>>) ELSE TRUE
=============================================================================
