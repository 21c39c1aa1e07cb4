--------------------------- MODULE ReentrantTrace ---------------------------
(***************************************************************************)
(* Trace validation of the reentrant lock: is a recorded trace a behaviour *)
(* of Reentrant.tla?  distlock.tools.tracecheck writes the recorded events *)
(* of one key as the module TraceData (Trace, a sequence of records; e.c   *)
(* is the section's index, HolderIndex[e.c] its holder: 1 is Parent, 2     *)
(* Child, 3 Other) and a cfg; this module is the same for every trace.     *)
(* A key with more sections than holders runs a later section on a holder  *)
(* whose section has ended (e.fresh: see NextSection).                     *)
(*                                                                         *)
(* Each step either takes the holder action named by event l, with the    *)
(* observed state after it (phase, outcome, loss signal, depth when       *)
(* recorded), the reply value Redis gave, the order of the fences and at  *)
(* least e.lo ticks since the section's previous event all matching; or   *)
(* is one of the environment's unlogged steps, with time bounded by the   *)
(* next event's timestamp (e.k) and faults only where the rest of the     *)
(* trace can tell them (e.drop, e.hang, e.starve, e.keylost); a starved   *)
(* body may stop starving before its level ends (e.resume, Resume); a     *)
(* request sent and failed while no Redis ran never runs (e.unsent).       *)
(*                                                                         *)
(* Waiting (wait_ms): a refused attempt with time left is the spec's      *)
(* denial with the section left waiting (e.waits; waiting[i]), its next    *)
(* attempt the wrapper's RetryAcquire; a Block, a Wake without a fence and *)
(* a withdrawal change nothing of the key or the lease.  A release may     *)
(* hand the key to a waiter whose next event is a Wake with a fence        *)
(* (e.hand, ReleaseHand): the key holds its token at depth 1 with HandTTL  *)
(* and a fresh fence; that Wake is the grant (HandedGrant), counted from   *)
(* the last attempt's send (wsent[i]) with the handed TTL, renewed at once *)
(* when the handed TTL is short.  Or to a waiter whose block ran out       *)
(* (e.late: BLPOP timed out, or the client stopped reading a reply that    *)
(* did not come, Redis paused past the block) and whose next attempt is    *)
(* granted: Redis grants it the key it holds (Wait.tla's RedisAttempt, "a  *)
(* K holding our token was handed to us"), from the key's fence, with the  *)
(* attempt's TTL.  A waiter whose withdrawal got no answer *)
(* (WithdrawFail) may have left its place queued, until the place ends on  *)
(* its own (e.abandoned): a release may hand that place the key, which     *)
(* nobody claims and which lapses after HandTTL (AbandonedHand), and a     *)
(* waiting attempt (e.behind) may be refused on a free key, the abandoned  *)
(* place first in line (BehindAbandoned).                                  *)
(*                                                                         *)
(* A declared data loss (Redis restarted empty) is not an event: it is one *)
(* fault more (MaxFaults), a KeyLost that may lose the fence counter       *)
(* (CounterSurvives FALSE), and the fence order is not compared.           *)
(*                                                                         *)
(* Invariant Unexplained is VIOLATED iff a behaviour explains the whole   *)
(* trace (TLC 2.15 cannot ask "some behaviour reaches the end" otherwise). *)
(***************************************************************************)
EXTENDS Reentrant, TraceData, TLC

VARIABLES l, now, at, rfence, waiting, wsent, handed, withdrawing

WaitVars == <<waiting, wsent, handed, withdrawing>>

HolderOf == [i \in 1..Sections |-> <<Parent, Child, Other>>[HolderIndex[i]]]

ASSUME TLCSet(1, 0)

(* A denied attempt with retries left backs off and sends again: in       *)
(* Reentrant.tla a denial ends the section (a retry is a new acquire), so *)
(* the retry is the holder's Acquire from where the denial left it.       *)
RetryAcquire(h) ==
    /\ phase[h] = "done" /\ outcome[h] = "not_acquired"
    /\ net' = net \cup {Request(h, "acquire", 0)}
    /\ phase' = [phase EXCEPT ![h] = "acquiring"]
    /\ outcome' = [outcome EXCEPT ![h] = "none"]
    /\ sent_ago' = [sent_ago EXCEPT ![h] = 0]
    /\ UNCHANGED <<fence, depth, deadline_in, renew_in_flight, renew_sent_ago,
                   next_renew_in, op, op_sent_ago, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

(* A later section on holder h, whose own section has ended with nothing of *)
(* it left to run (no request or reply in flight, the key not its own): a  *)
(* fresh section, with a fresh token the spec names as the holder's, so     *)
(* its release record is not the old section's.                            *)
NextSection(h) ==
    /\ phase[h] = "done"
    /\ ~\E m \in net : m.h = h \/ m.tok = Tok(h)
    /\ key_holder # Tok(h)
    /\ net' = net \cup {Request(h, "acquire", 0)}
    /\ phase' = [phase EXCEPT ![h] = "acquiring"]
    /\ outcome' = [outcome EXCEPT ![h] = "none"]
    /\ fence' = [fence EXCEPT ![h] = 0]
    /\ depth' = [depth EXCEPT ![h] = 0]
    /\ deadline_in' = [deadline_in EXCEPT ![h] = 0]
    /\ sent_ago' = [sent_ago EXCEPT ![h] = 0]
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![h] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![h] = 0]
    /\ next_renew_in' = [next_renew_in EXCEPT ![h] = 0]
    /\ op' = [op EXCEPT ![h] = "none"]
    /\ op_sent_ago' = [op_sent_ago EXCEPT ![h] = 0]
    /\ lost' = [lost EXCEPT ![h] = FALSE]
    /\ starved' = [starved EXCEPT ![h] = FALSE]
    /\ released' = released \ {Tok(h)}
    /\ freed_by' = freed_by \ {Tok(h)}
    /\ UNCHANGED <<key_holder, key_depth, key_ttl, fence_ctr, faults>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, unsettled, freed_inner>>

(* The release script hands the key it deletes to the token tok: R_RELEASE's *)
(* hand_head, a new hash at depth 1 with a new fence and the handed TTL.    *)
HandKey(m, tok) ==
    /\ m \in net /\ m.st \in {"sent", "hung"} /\ m.kind = "release"
    /\ key_holder = m.tok
    /\ key_holder' = tok
    /\ key_depth' = 1
    /\ key_ttl' = HandTTL
    /\ fence_ctr' = fence_ctr + 1
    /\ grants' = Append(grants, [tok |-> tok, fence |-> fence_ctr + 1])
    /\ released' = released \cup {m.tok}
    /\ freed_by' = freed_by \cup {m.tok}
    /\ Answer(m, 1)
    /\ freed_inner' = \/ freed_inner
                      \/ \E x \in Holders : Tok(x) = key_holder /\ phase[x] = "held"
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, faults>>
    /\ UNCHANGED <<overlap, oks, late, foreign, wiped, unsettled>>
    /\ UNCHANGED <<waiting, wsent, withdrawing>>

(* ... to the waiting section i: its holder's token. *)
ReleaseHand(m, i) ==
    LET h == HolderOf[i] IN
    /\ handed[i] = 0
    \* queued: refused and waiting, or refused at Redis with the reply still on its way
    /\ \/ waiting[i]
       \/ /\ phase[h] = "acquiring"
          /\ \E r \in net : Mine(r, h, "acquire") /\ r.st = "done" /\ r.val = 0
    /\ HandKey(m, Tok(h))
    /\ handed' = [handed EXCEPT ![i] = fence_ctr + 1]

(* ... to a place left by a waiter whose withdrawal got no answer            *)
(* (e.abandoned): nobody takes that key, it lapses after the handed TTL.     *)
(* Its token is no holder's: a later section on the waiter's holder (see    *)
(* NextSection) is another token, refused while that key lasts.             *)
Gone == "abandoned place"

AbandonedHand(m) == HandKey(m, Gone) /\ UNCHANGED handed

(* A waiting attempt (of a section in e.behind) refused on a free key: an    *)
(* abandoned place is first in line.                                         *)
BehindAbandoned(m) ==
    /\ m \in net /\ m.st \in {"sent", "hung"} /\ m.kind = "acquire"
    /\ key_holder = NoToken /\ \E i \in Trace[l].behind : HolderOf[i] = m.h
    /\ Answer(m, 0)
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars
    /\ UNCHANGED WaitVars

(* A Wake that hands over the key: the outermost level's grant, counted   *)
(* from the last attempt's send, with the handed TTL; renewed at once when *)
(* the handed TTL is short.                                                *)
HandedGrant(i) ==
    LET h == HolderOf[i]
        ago == now - wsent[i]
        lease == Max(HandTTL - Margin - ago, 0)
    IN
    /\ handed[i] > 0 /\ phase[h] = "done"
    /\ phase' = [phase EXCEPT ![h] = "held"]
    /\ outcome' = [outcome EXCEPT ![h] = "none"]
    /\ depth' = [depth EXCEPT ![h] = 1]
    /\ fence' = [fence EXCEPT ![h] = handed[i]]
    /\ deadline_in' = [deadline_in EXCEPT ![h] = lease]
    /\ next_renew_in' = [next_renew_in EXCEPT ![h] =
                           IF HandTTL < TTL THEN 0 ELSE Max(Heartbeat - ago, 0)]
    /\ lost' = [lost EXCEPT ![h] = lease = 0]
    /\ overlap' = [x \in Holders |->
                     IF x = h THEN {y \in Holders : InBody(y)}
                     ELSE IF InBody(x) THEN overlap[x] \cup {h}
                     ELSE overlap[x]]
    /\ UNCHANGED <<sent_ago, renew_in_flight, renew_sent_ago, op, op_sent_ago>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED <<oks, late, grants, foreign, wiped, unsettled, freed_inner, freed_by>>

(* Block, Wake and withdrawal: a waiting section's steps (see above).     *)
(* A withdrawal from a block ends the wait; from elsewhere (an attempt     *)
(* that failed) it changes nothing.                                        *)
WaitStep(e) ==
    LET i == e.c IN
    CASE e.a = "Block" ->
              /\ waiting[i] /\ UNCHANGED vars
              /\ UNCHANGED <<wsent, handed, withdrawing>>
      [] e.a = "Wake" ->
              /\ waiting[i]
              /\ IF e.kind = "hand" THEN HandedGrant(i)
                 ELSE (handed[i] = 0 \/ e.late) /\ UNCHANGED vars
              /\ handed' = [handed EXCEPT ![i] = 0]
              /\ UNCHANGED <<wsent, withdrawing>>
      [] e.a = "Withdraw" ->
              /\ ~withdrawing[i] /\ handed[i] = 0 /\ UNCHANGED vars
              /\ withdrawing' = [withdrawing EXCEPT ![i] = TRUE]
              /\ UNCHANGED <<wsent, handed>>
      [] OTHER ->   \* WithdrawReply, WithdrawFail
              /\ withdrawing[i] /\ UNCHANGED vars
              /\ withdrawing' = [withdrawing EXCEPT ![i] = FALSE]
              /\ UNCHANGED <<wsent, handed>>

Logged(e) ==
    LET h == HolderOf[e.c] IN
    CASE e.a = "Acquire" /\ e.fresh -> NextSection(h)
      [] e.a = "Acquire"      -> Acquire(h) \/ RetryAcquire(h)
      [] e.a = "AcquireReply" -> AcquireReply(h)
      [] e.a = "AcquireFail"  -> AcquireFail(h)
      [] e.a = "RenewSend"    -> RenewSend(h)
      [] e.a = "RenewReply"   -> RenewReply(h)
      [] e.a = "RenewFail"    -> RenewFail(h)
      [] e.a = "LeaseTimeout" -> LeaseTimeout(h)
      [] e.a = "Reenter"      -> Reenter(h)
      [] e.a = "ReenterReply" -> ReenterReply(h)
      [] e.a = "ReenterFail"  -> ReenterFail(h)
      [] e.a = "Leave"        -> Leave(h)
      [] e.a = "LeaveReply"   -> LeaveReply(h)
      [] e.a = "LeaveFail"    -> LeaveFail(h)
      [] e.a = "BodyDone"     -> BodyDone(h)
      [] e.a = "Release"      -> Release(h)
      [] e.a = "ReleaseReply" -> ReleaseReply(h)
      [] e.a = "ReleaseFail"  -> ReleaseFail(h)

(* The holder's state after its step (e.depth < 0: no depth recorded). *)
Observed(e) ==
    LET h == HolderOf[e.c] IN
    /\ phase'[h] = e.phase
    /\ outcome'[h] = e.outcome
    /\ lost'[h] = e.lost
    /\ e.depth >= 0 => depth'[h] = e.depth
    /\ waiting' = [waiting EXCEPT ![e.c] = e.waits]

(* The reply the holder was handed is the one the spec's Redis gave. *)
Answered(e) ==
    e.kind # "" =>
        \A m \in net \ net' : Mine(m, HolderOf[e.c], e.kind) => ((m.val > 0) = e.ok)

(* Grants are ordered at Redis as their recorded fences are (rfence[h]: the *)
(* recorded fence of holder h's current section); not compared in a trace  *)
(* declaring a data loss (CheckFences FALSE: the counter may have started  *)
(* again; the pre-pass compares fences between declarations).              *)
Fenced(e) ==
    (CheckFences /\ e.kind \in {"acquire", "hand"} /\ e.ok) =>
        \A h \in Holders :
            (h # HolderOf[e.c] /\ fence[h] > 0) =>
                ((fence'[HolderOf[e.c]] > fence[h]) = (e.fence > rfence[h]))

(* At least e.lo ticks since the section's previous event. *)
Elapsed(e) == now >= at[e.c] + e.lo

Is(p, m) == HolderOf[p[1]] = m.h /\ p[2] = m.kind

(* Trace only: the body stops starving the timers before its level ends    *)
(* (time.sleep or a C call that returns mid-body).  The spec's Starve lasts *)
(* until the level's exit (BodyDone, or Leave deeper); this ends it sooner, *)
(* and only that: the holder is held and starved, and nothing else moves.   *)
(* Its timers are then due at once (Tick waits for them), its deadline is   *)
(* what the clock made of it, and BodyDone still judges the body on that    *)
(* deadline.  Offered where the section's next event is one a starved       *)
(* section cannot take (e.resume, see tracecheck._plausible_faults).        *)
Resume(h) ==
    /\ phase[h] = "held" /\ starved[h]
    /\ starved' = [starved EXCEPT ![h] = FALSE]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<key_holder, key_depth, key_ttl, fence_ctr, released, faults, net>>
    /\ UNCHANGED ghost_vars

(* A request that never ran (sent and failed while no Redis process ran:    *)
(* e.unsent, from its send to its failure): Redis does not run it and no    *)
(* fault befalls it; right before its failure (e.refused) it fails as it   *)
(* did, unrun and without a fault.                                          *)
NoRun(m) == \E p \in Trace[l].unsent : Is(p, m)

Refused(m) ==
    /\ m \in net /\ m.st = "sent" /\ Awaited(m)
    /\ \E p \in Trace[l].refused : Is(p, m)
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "error"]}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

Hidden ==
    \/ /\ Tick /\ now < Trace[l].k /\ now' = now + 1 /\ UNCHANGED WaitVars
    \/ /\ \/ \E m \in net : ~NoRun(m) /\ RedisStep(m)
          \/ \E m \in net : Refused(m)
          \/ \E m \in net : (\E p \in Trace[l].drop : Is(p, m)) /\ DropReply(m)
          \/ \E m \in net : (\E p \in Trace[l].hang : Is(p, m)) /\ HangReply(m)
          \/ Trace[l].keylost /\ KeyLost
          \/ \E i \in Trace[l].starve : Starve(HolderOf[i])
          \/ \E i \in Trace[l].resume : Resume(HolderOf[i])
       /\ UNCHANGED <<now, WaitVars>>
    \/ \E m \in net, i \in Trace[l].hand : ~NoRun(m) /\ ReleaseHand(m, i) /\ UNCHANGED now
    \/ Trace[l].abandoned # {} /\ \E m \in net : ~NoRun(m) /\ AbandonedHand(m)
                                 /\ UNCHANGED now
    \/ \E m \in net : ~NoRun(m) /\ BehindAbandoned(m) /\ UNCHANGED now

TraceInit ==
    /\ Init
    /\ l = 1
    /\ now = 0
    /\ at = [i \in 1..Sections |-> 0]
    /\ rfence = [h \in Holders |-> 0]
    /\ waiting = [i \in 1..Sections |-> FALSE]
    /\ wsent = [i \in 1..Sections |-> 0]
    /\ handed = [i \in 1..Sections |-> 0]
    /\ withdrawing = [i \in 1..Sections |-> FALSE]

TraceNext ==
    /\ l <= Len(Trace)
    /\ \/ /\ Elapsed(Trace[l])
          /\ IF Trace[l].a \in {"Block", "Wake", "Withdraw", "WithdrawReply", "WithdrawFail"}
             THEN WaitStep(Trace[l])
             ELSE /\ Logged(Trace[l])
                  /\ wsent' = IF Trace[l].a = "Acquire" /\ Trace[l].w
                              THEN [wsent EXCEPT ![Trace[l].c] = now] ELSE wsent
                  \* a key handed over before the attempt is its grant (see ReleaseHand)
                  /\ handed' = IF Trace[l].a = "Acquire"
                               THEN [handed EXCEPT ![Trace[l].c] = 0] ELSE handed
                  /\ UNCHANGED withdrawing
          /\ Observed(Trace[l])
          /\ Answered(Trace[l]) /\ Fenced(Trace[l])
          /\ at' = [at EXCEPT ![Trace[l].c] = IF Trace[l].keep THEN now ELSE 0]
          /\ rfence' = IF Trace[l].fence > 0
                       THEN [rfence EXCEPT ![HolderOf[Trace[l].c]] = Trace[l].fence]
                       ELSE rfence
          /\ l' = l + 1 /\ UNCHANGED now
       \/ /\ Hidden /\ UNCHANGED <<l, at, rfence, waiting>>

Unexplained == l <= Len(Trace)

(* The ghost variables are read by no action: states differing only there *)
(* have the same futures.                                                 *)
TraceView == <<client_vars, env_vars, l, now, at, rfence, WaitVars>>

Progress == IF l > TLCGet(1) THEN TLCSet(1, l) /\ PrintT(<<"reached", l>>) ELSE TRUE
=============================================================================
