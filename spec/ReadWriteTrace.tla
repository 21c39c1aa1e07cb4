--------------------------- MODULE ReadWriteTrace ---------------------------
(***************************************************************************)
(* Trace validation of the read-write lock: is a recorded trace of the    *)
(* read and write sections on one key a behaviour of ReadWrite.tla?        *)
(* distlock.tools.tracecheck writes the recorded events as the module      *)
(* TraceData (Trace, a sequence of records; e.c is the section's index,    *)
(* which is its client in the spec, one section each) and a cfg that puts *)
(* TraceData's roles, waiters and place life in the place of the spec's   *)
(* Writers, Waiters and PlaceTTL; this module is the same for every trace. *)
(*                                                                         *)
(* Each step either takes the client action named by event l, with the    *)
(* observed state after it (phase, outcome, loss signal), the reply value *)
(* Redis gave, the fence order and at least e.lo ticks since the          *)
(* section's previous event all matching; or is one of the environment's  *)
(* unlogged steps, with time bounded by the next event's timestamp (e.k)  *)
(* and faults only where the rest of the trace can tell them (e.drop,     *)
(* e.hang, e.starve); a request sent and failed while no Redis ran never  *)
(* runs (e.unsent).  A section with no event left may die (e.die: the      *)
(* spec's Die, a process killed mid-section, which records nothing more).  *)
(*                                                                         *)
(* Fences: a write grant's is a new one, a read grant's the counter as it *)
(* stands (readers share it with the last write).  Each grant is compared *)
(* with every earlier grant's, less, equal or greater, as the recorded     *)
(* fences compare (TraceData's Fence: their ranks).                        *)
(*                                                                         *)
(* Waiting (wait_ms) is the spec's: a refusal with time left leaves the    *)
(* section "waiting" with its place queued, Block and Wake change nothing, *)
(* the next attempt is the spec's Acquire, and a withdrawal from a block  *)
(* is the spec's Withdraw.  Two steps the core has and the spec lacks:    *)
(* - the attempt sent at the deadline (LastSent) is the last: refused, the *)
(*   script takes the waiter out of the queue in the same step (GivenUp)  *)
(*   and the section ends not acquired (LastDenied);                      *)
(* - a withdrawal from elsewhere (an attempt that failed) sends RW_LEAVE  *)
(*   and changes nothing else.                                             *)
(* The read-write release wakes its queue and never hands the key over.    *)
(*                                                                         *)
(* A run/hold section with heartbeat_ms=False (AutoRenew but not Renews)   *)
(* never renews: before its first step it is given a renewal "in flight"  *)
(* that no message carries (Unrenewed), as in SemaphoreTrace.tla.          *)
(*                                                                         *)
(* Invariant Unexplained is VIOLATED iff a behaviour explains the whole   *)
(* trace (TLC 2.15 cannot ask "some behaviour reaches the end" otherwise). *)
(***************************************************************************)
EXTENDS ReadWrite, TraceData, TLC

VARIABLES l, now, at, withdrawing

ASSUME TLCSet(1, 0)

(* The cfg's substitutions for the spec's options. *)
TraceWriters == {c \in Clients : Role[c] = "write"}
TraceWaiters == {c \in Clients : Waits[c]}
TracePlaceTTL == PlaceLife

(* RW_ACQUIRE grants m (RedisStep's condition, of the real scripts): our own *)
(* live lease (a resent acquire), or a reader with no live writer and no    *)
(* writer's place ahead, or a writer with no live lease and no place ahead. *)
Claimable(m) ==
    IF m.role = "read"
    THEN \/ rd_ttl[m.tok] > 0
         \/ ~WriterLive /\ ~\E e \in Ahead(m.tok) : e.role = "write"
    ELSE \/ wtok = m.tok /\ WriterLive
         \/ ~WriterLive /\ LiveReaders = {} /\ Ahead(m.tok) = {}

(* The attempt a waiting section sent at its deadline (the trace's row      *)
(* LastSent[c], consumed before row l): refused, it leaves the queue.       *)
IsLast(m) == m.kind = "acquire" /\ LastSent[m.tok[1]] > 0 /\ l > LastSent[m.tok[1]]

GivenUp(m) ==
    /\ m \in net /\ m.st \in {"sent", "hung"} /\ ~Claimable(m)
    /\ queue' = Dequeued(m.tok) /\ place' = [place EXCEPT ![m.tok] = 0]
    /\ Answer(m, 0, 0)
    /\ UNCHANGED <<rd_ttl, wtok, w_ttl, wfence, fence_ctr, last_read>>
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, faults, dead>>
    /\ UNCHANGED ghost_vars

RunAt(m) == IF IsLast(m) THEN (Claimable(m) /\ RedisStep(m)) \/ GivenUp(m)
            ELSE RedisStep(m)

(* The last attempt's refusal: the section ends not acquired. *)
LastDenied(c) ==
    /\ phase[c] = "acquiring"
    /\ \E m \in net :
        /\ Mine(m, c, "acquire") /\ m.st = "done" /\ m.val = 0
        /\ net' = net \ {m}
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
    /\ UNCHANGED <<retries_left, token, role, waits, fence, deadline_in, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* A withdrawal: the spec's from a block; from elsewhere (an attempt that  *)
(* failed, the section abandoned) only RW_LEAVE goes out.                   *)
TraceWithdraw(c) ==
    /\ ~withdrawing[c]
    /\ IF phase[c] = "waiting"
       THEN Withdraw(c)
       ELSE /\ net' = net \cup {Request(c, "leave")}
            /\ UNCHANGED client_vars
            /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
            /\ UNCHANGED ghost_vars
    /\ withdrawing' = [withdrawing EXCEPT ![c] = TRUE]

(* heartbeat_ms=False: a renewal in flight that no message carries, taken   *)
(* before the section's first step, keeps the spec's heartbeat from sending *)
(* (RenewSendEnabled) and leaves the lease timer (LeaseTimeout) as it is.  *)
Unrenewed(c) ==
    /\ AutoRenew[c] /\ ~Renews[c]
    /\ phase[c] = "idle" /\ ~renew_in_flight[c]
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, lost, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED ghost_vars

Logged(e) ==
    LET c == e.c IN
    CASE e.a = "Acquire"      -> Acquire(c)
      [] e.a = "AcquireReply" -> AcquireReply(c) \/ (e.w /\ LastDenied(c))
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
      [] e.a = "Block"        -> phase[c] = "waiting" /\ UNCHANGED vars
      [] e.a = "Wake"         -> phase[c] = "waiting" /\ UNCHANGED vars

(* The steps of the trace's client actions, and withdrawing: a withdrawal   *)
(* is answered once its RW_LEAVE has run (none of it is left in flight);   *)
(* one that failed may leave it to run later, or never.                     *)
Steps(e) ==
    IF e.a = "Withdraw" THEN TraceWithdraw(e.c)
    ELSE IF e.a \in {"WithdrawReply", "WithdrawFail"}
    THEN /\ withdrawing[e.c] /\ UNCHANGED vars
         /\ e.a = "WithdrawReply" => ~\E m \in net : Mine(m, e.c, "leave")
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

(* A grant's fence compares with every earlier grant's (each section's first *)
(* grant stays in fence) as the recorded ones do: less, equal or greater.  *)
Cmp(a, b) == IF a < b THEN 0 ELSE IF a = b THEN 1 ELSE 2

Fenced(e) ==
    (e.kind = "acquire" /\ e.ok) =>
        \A d \in Clients \ {e.c} :
            granted[d] => Cmp(fence'[e.c], fence[d]) = Cmp(e.fence, Fence[d])

(* At least e.lo ticks since the section's previous event. *)
Elapsed(e) == now >= at[e.c] + e.lo

(* Trace only: the body stops starving the timers before it ends (the     *)
(* spec's Starve lasts until BodyDone).  Only that moves: the timers are   *)
(* due at once, and BodyDone still judges the body on the deadline the     *)
(* clock made.  Offered where the section's next event is one a starved    *)
(* section cannot take (Trace[l].resume).                                  *)
Resume(c) ==
    /\ phase[c] = "held" /\ starved[c]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<drift, redis_vars, faults, dead, net>>
    /\ UNCHANGED ghost_vars

(* A request that never ran (sent and failed while no Redis process ran:    *)
(* e.unsent, from its send to its failure): Redis does not run it and no    *)
(* fault befalls it; right before its failure (e.refused) it fails as it   *)
(* did, unrun and without a fault.                                          *)
NoRun(m) == <<m.tok[1], m.kind>> \in Trace[l].unsent

Refused(m) ==
    /\ m \in net /\ m.st = "sent" /\ Awaited(m)
    /\ <<m.tok[1], m.kind>> \in Trace[l].refused
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "error"]}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* A dropped renewal that failed on its connection (not in e.hang: sooner than  *)
(* the socket timeout) is not also left queued at Redis to run later.            *)
NoneLeftQueued == {x \in net' : x.st = "hung"} \subseteq net

(* Faults only where the rest of the trace can tell them. *)
Hidden ==
    \/ /\ Tick /\ now < Trace[l].k /\ now' = now + 1 /\ UNCHANGED withdrawing
    \/ /\ \/ \E c \in Clients : Unrenewed(c)
          \/ \E m \in net : ~NoRun(m) /\ RunAt(m)
          \/ \E m \in net : Refused(m)
          \/ \E m \in net : <<m.tok[1], m.kind>> \in Trace[l].drop /\ DropReply(m)
                /\ (<<m.tok[1], m.kind>> \notin Trace[l].hang => NoneLeftQueued)
          \/ \E m \in net : <<m.tok[1], m.kind>> \in Trace[l].hang /\ HangReply(m)
          \/ \E c \in Trace[l].starve : Starve(c)
          \/ \E c \in Trace[l].resume : Resume(c)
          \/ \E c \in Trace[l].die : Die(c)
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
          /\ Fenced(Trace[l])
          /\ at' = [at EXCEPT ![Trace[l].c] = IF Trace[l].keep THEN now ELSE 0]
          /\ l' = l + 1 /\ UNCHANGED now
       \/ /\ Hidden /\ UNCHANGED <<l, at>>

Unexplained == l <= Len(Trace)

(* The ghost variables are read by no action: states differing only there *)
(* have the same futures.                                                 *)
TraceView == <<client_vars, env_vars, l, now, at, withdrawing>>

Progress == IF l > TLCGet(1) THEN TLCSet(1, l) /\ PrintT(<<"reached", l>>) ELSE TRUE
=============================================================================
