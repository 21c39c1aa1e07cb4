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
(* rest of the trace can tell them (e.drop, e.hang, e.starve, e.keylost). *)
(* A permit has no fence: no fence order is checked.                       *)
(*                                                                         *)
(* Invariant Unexplained is VIOLATED iff a behaviour explains the whole   *)
(* trace (TLC 2.15 cannot ask "some behaviour reaches the end" otherwise). *)
(***************************************************************************)
EXTENDS Semaphore, TraceData, TLC

VARIABLES l, now, at

ASSUME TLCSet(1, 0)

Logged(e) ==
    LET c == e.c IN
    CASE e.a = "Acquire"      -> Acquire(c)
      [] e.a = "AcquireReply" -> AcquireReply(c)
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

(* Faults only where the rest of the trace can tell them. *)
Hidden ==
    \/ /\ Tick /\ now < Trace[l].k /\ now' = now + 1
    \/ /\ \/ \E m \in net : RedisStep(m)
          \/ \E m \in net : <<m.tok[1], m.kind>> \in Trace[l].drop /\ DropReply(m)
          \/ \E m \in net : <<m.tok[1], m.kind>> \in Trace[l].hang /\ HangReply(m)
          \/ Trace[l].keylost /\ KeyLost
          \/ \E c \in Trace[l].starve : Starve(c)
       /\ UNCHANGED now

TraceInit ==
    /\ Init
    /\ auto_renew = [c \in Clients |-> AutoRenew[c]]
    /\ l = 1
    /\ now = 0
    /\ at = [c \in Clients |-> 0]

TraceNext ==
    /\ l <= Len(Trace)
    /\ \/ /\ Elapsed(Trace[l])
          /\ Logged(Trace[l]) /\ Observed(Trace[l]) /\ Answered(Trace[l])
          /\ at' = [at EXCEPT ![Trace[l].c] = IF Trace[l].keep THEN now ELSE 0]
          /\ l' = l + 1 /\ UNCHANGED now
       \/ /\ Hidden /\ UNCHANGED <<l, at>>

Unexplained == l <= Len(Trace)

(* The ghost variables are read by no action: states differing only there *)
(* have the same futures.                                                 *)
TraceView == <<client_vars, env_vars, l, now, at>>

Progress == IF l > TLCGet(1) THEN TLCSet(1, l) /\ PrintT(<<"reached", l>>) ELSE TRUE
=============================================================================
