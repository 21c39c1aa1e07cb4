------------------------------ MODULE Reentrant ------------------------------
(***************************************************************************)
(* The reentrant lock: holders (threads or tasks) inside clients           *)
(* (processes), each holder re-entering the lock it holds.                 *)
(*                                                                         *)
(* One key.  Holders: Parent and Child run in one client, Other in        *)
(* another (a model takes some of them: Holders; the ones in Deep          *)
(* re-enter).  Each holder runs one section (its outermost level) with the *)
(* Lock's actions (Acquire ... ReleaseFail, run/hold with a heartbeat),   *)
(* and inside it opens and closes inner levels: Reenter / ReenterReply /  *)
(* ReenterFail and Leave / LeaveReply / LeaveFail.  Every level shares    *)
(* the outermost level's token, fence, lease, signal and renewals; the    *)
(* key is released only when the outermost level exits.                   *)
(*                                                                         *)
(* Redis keeps the key as a hash: the holder's token -> its depth, and    *)
(* the fence (key_holder, key_depth; the fence stored is the counter's    *)
(* value at the grant, fence_ctr, since no other grant can move it while  *)
(* the key is held).  The scripts R_ACQUIRE, R_ENTER, R_LEAVE, R_RENEW    *)
(* and R_RELEASE are the cases of RedisStep.                              *)
(*                                                                         *)
(* Time as in DistLock.tla: countdowns and ages, no absolute clock; the   *)
(* key's TTL counts real time.  Client clocks do not drift here (the      *)
(* deadline arithmetic is the Lock's, checked with drift in DistLock.tla). *)
(*                                                                         *)
(* Why the bounds suffice: two levels are the smallest nesting with an    *)
(* inner exit that must not free the key, a re-entry that refreshes the   *)
(* lease, and a depth Redis must mirror (a third level repeats the same   *)
(* scripts with another number); TTL 3 with heartbeat 1 and margin 1      *)
(* gives a lease that renewals and a re-entry refresh, and that expires   *)
(* on Redis while a slow reply is in flight; one fault per behaviour puts *)
(* each fault (dropped, hung or resent request, key loss, starved body)   *)
(* against every step of every level; with a competing holder, a key loss *)
(* or a dropped or resent request puts one holder's late scripts and      *)
(* resent release on the other's key (ReentrantContention.cfg).  Two    *)
(* holders share nothing in the real lock but their process (Tok(h) = h), *)
(* so one competing holder                                                 *)
(* stands for a child and for another client's holder alike; a third      *)
(* holder multiplies the states (over 1.5 million at TTL 2 without a      *)
(* fault) and adds no new interleaving of the scripts.                    *)
(*                                                                         *)
(* Mutant names a deliberately broken variant ("none" for the real thing). *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Parent,     \* a holder (thread or task) of the first client
    Child,      \* another holder of the same client (a child thread or task of Parent)
    Other,      \* a holder of the second client
    Holders,    \* the holders of the model: a subset of {Parent, Child, Other}
    MaxDepth,   \* the deepest level a holder opens (1 outermost, 2 next, ...)
    Deep,       \* the holders that re-enter (the others hold at depth 1 only)
    TTL,        \* lease length (PX of the grant, PEXPIRE of renewals and re-entries)
    Heartbeat,  \* renewal period
    Margin,     \* subtracted from every deadline
    MaxFaults,  \* faults (drop, hang, resend, key loss, starvation) in one behaviour
    CounterSurvives, \* TRUE: a key loss keeps the fence counter (eviction, failover with the
                \* counter replicated); FALSE: it may lose it too (restart without persistence)
    Mutant      \* "none" or the name of a broken variant

Mutants == {"none",
            \* the design's four
            "release_at_first_exit", "child_inherits_identity", "renew_resets_count",
            "reenter_after_loss",
            \* the Lock's properties, broken through the new scripts and actions
            "leave_without_token_check", "reenter_deadline_from_reply",
            "fence_from_counter", "no_completion_check",
            \* writes without the token check, rejections without the signal, release
            \* records that match any token or keep only the last releaser's
            "renew_without_token_check", "reenter_without_token_check",
            "leave_reject_ignored", "reenter_reject_ignored",
            "release_record_any_token", "release_record_last_token",
            \* a lost counter starts again at 0: no floor from Redis's clock (lib/fence.lua)
            "no_fence_floor"}

(* A cfg may narrow the faults by overriding this definition. *)
FaultKinds == {"drop", "hang", "resend", "key_lost", "starve"}

Clients == {"c1", "c2"}
ClientOf(h) == IF h = Other THEN "c2" ELSE "c1"

ASSUME
    /\ Mutant \in Mutants
    /\ Holders \subseteq {Parent, Child, Other} /\ Parent \in Holders
    /\ MaxDepth \in Nat \ {0} /\ Deep \subseteq {Parent, Child, Other}
    /\ TTL \in Nat \ {0} /\ Heartbeat \in Nat \ {0} /\ Margin \in Nat /\ Margin < TTL
    /\ 2 * Heartbeat <= TTL
    /\ MaxFaults \in Nat
    /\ CounterSurvives \in BOOLEAN
    /\ FaultKinds \subseteq {"drop", "hang", "resend", "key_lost", "starve"}

(* The identity a holder's requests carry (its token).  The broken variant *)
(* "child_inherits_identity" gives the child its parent's (a holder id     *)
(* inherited by a child task, e.g. through a context variable).            *)
Tok(h) == IF Mutant = "child_inherits_identity" /\ h = Child THEN Parent ELSE h
NoToken == "nobody"

Phases   == {"idle", "acquiring", "held", "body_done", "abandoned", "releasing", "done"}
Outcomes == {"none", "ok", "not_acquired", "lost", "failed"}
Kinds    == {"acquire", "renew", "enter", "leave", "release"}
Ops      == {"none", "enter", "leave"}

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b
Dec(x)    == IF x > 0 THEN x - 1 ELSE 0

AgeCap == Max(TTL - Margin, Heartbeat)

VARIABLES
    \* ---- client side, per holder (names follow distlock.core) ----
    phase,            \* the holder's section phase
    outcome,          \* its outcome
    fence,            \* its fence (0 until granted)
    depth,            \* the holder's depth: 0 outside, 1 in the outermost level, ...
    deadline_in,      \* deadline - now (client clock), floored at 0
    sent_ago,         \* now - sent_at of the acquire in flight
    renew_in_flight,  \* a renewal is in flight
    renew_sent_ago,   \* now - renew_sent_at while a renewal is in flight
    next_renew_in,    \* next_renew_at - now
    op,               \* the level change the holder waits for: "none", "enter", "leave"
    op_sent_ago,      \* now - sent_at of the re-entry in flight (0 when none)
    lost,             \* the lease is known lost (the signal fired)
    \* ---- environment ----
    starved,          \* the body blocks its event loop at some depth (timers and replies wait)
    key_holder,       \* the token in the lock hash, or NoToken
    key_depth,        \* the depth the hash holds for it (0 when no key)
    key_ttl,          \* remaining TTL of the key (real time)
    fence_ctr,        \* the fence counter as a grant sees it: max(INCR, the clock's floor)
    released,         \* tokens whose release deleted the key (the release records)
    faults,           \* faults injected so far
    net,              \* requests and replies in flight
    \* ---- ghosts for the properties ----
    overlap,          \* holders that were in their bodies at the same time as this one
    oks,              \* finished sections reported ok: [h, overlap]
    late,             \* the body finished when the client clock said the lease had expired
    grants,           \* fences issued by Redis, in issue order: [tok, fence]
    foreign,          \* some script wrote a key holding another token
    wiped,            \* Redis lost the key while it held this holder's token, and no
                      \* reply since has told the holder so
    unsettled,        \* a level change of this holder failed (or ran without being
                      \* taken) and no settled one with nothing older left to run came since
    freed_inner,      \* a script freed a key whose owner's outermost level was still open
    freed_by          \* tokens whose own release freed the key (what the records must
                      \* remember; forgotten only with them, when Redis loses the key)

client_vars == <<phase, outcome, fence, depth, deadline_in, sent_ago, renew_in_flight,
                 renew_sent_ago, next_renew_in, op, op_sent_ago, lost>>
env_vars    == <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults, net>>
ghost_vars  == <<overlap, oks, late, grants, foreign, wiped, unsettled, freed_inner, freed_by>>
vars        == <<client_vars, env_vars, ghost_vars>>

Message == [h : Holders, tok : Holders, kind : Kinds, st : {"sent", "done", "error", "hung"},
            val : Nat, d : 0..MaxDepth, clean : BOOLEAN]

(* A new request of holder h (d: the depth R_ENTER / R_LEAVE writes).  A   *)
(* ghost field, clean: no older level change of h could still run when it  *)
(* was sent, so none can run after it and overwrite the depth it writes.   *)
Request(h, k, d) == [h |-> h, tok |-> Tok(h), kind |-> k, st |-> "sent", val |-> 0, d |-> d,
                     clean |-> TRUE]

Mine(m, h, k) == m.h = h /\ m.kind = k

(* No reply of kind k will come for h: the request failed or hangs. *)
NoAnswer(h, k) == ~\E m \in net : Mine(m, h, k) /\ m.st \in {"sent", "done"}

(* Consume h's error of kind k (hung requests stay: they may still run). *)
DropErrors(h, k) == {m \in net : ~(Mine(m, h, k) /\ m.st = "error")}

(* A level change of h may still run at Redis or still be answered. *)
LevelPending(h, msgs) == \E m \in msgs : m.h = h /\ m.kind \in {"enter", "leave"}

(* The lease a request of age `ago` gives on the client clock: from the SEND time. *)
LeaseFrom(ago) == Max(TTL - Margin - ago, 0)

InBody(h) == phase[h] = "held"

Init ==
    /\ phase = [h \in Holders |-> "idle"]
    /\ outcome = [h \in Holders |-> "none"]
    /\ fence = [h \in Holders |-> 0]
    /\ depth = [h \in Holders |-> 0]
    /\ deadline_in = [h \in Holders |-> 0]
    /\ sent_ago = [h \in Holders |-> 0]
    /\ renew_in_flight = [h \in Holders |-> FALSE]
    /\ renew_sent_ago = [h \in Holders |-> 0]
    /\ next_renew_in = [h \in Holders |-> 0]
    /\ op = [h \in Holders |-> "none"]
    /\ op_sent_ago = [h \in Holders |-> 0]
    /\ lost = [h \in Holders |-> FALSE]
    /\ starved = [h \in Holders |-> FALSE]
    /\ key_holder = NoToken
    /\ key_depth = 0
    /\ key_ttl = 0
    /\ fence_ctr = 0
    /\ released = {}
    /\ faults = 0
    /\ net = {}
    /\ overlap = [h \in Holders |-> {}]
    /\ oks = {}
    /\ late = [h \in Holders |-> FALSE]
    /\ grants = <<>>
    /\ foreign = FALSE
    /\ wiped = [h \in Holders |-> FALSE]
    /\ unsettled = [h \in Holders |-> FALSE]
    /\ freed_inner = FALSE
    /\ freed_by = {}

-----------------------------------------------------------------------------
(***************************************************************************)
(* The outermost level: the Lock's actions (see DistLock.tla).            *)
(***************************************************************************)

(* acquire: R_ACQUIRE(token, ttl). *)
Acquire(h) ==
    /\ phase[h] = "idle"
    /\ net' = net \cup {Request(h, "acquire", 0)}
    /\ phase' = [phase EXCEPT ![h] = "acquiring"]
    /\ sent_ago' = [sent_ago EXCEPT ![h] = 0]
    /\ UNCHANGED <<outcome, fence, depth, deadline_in, renew_in_flight, renew_sent_ago,
                   next_renew_in, op, op_sent_ago, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

(* acquire_reply: granted (fence > 0): the outermost level, depth 1; a     *)
(* grant whose lease already ran out is known lost at once (it is released *)
(* with no body).  Denied (0): not acquired (no retry in this model: a     *)
(* retry is a new acquire, checked in DistLock.tla).  A holder of the key  *)
(* calling acquire again re-enters instead (Reenter): a denial is another  *)
(* holder's refusal.                                                       *)
AcquireReply(h) ==
    /\ phase[h] = "acquiring"
    /\ \E m \in net :
        /\ Mine(m, h, "acquire") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ sent_ago' = [sent_ago EXCEPT ![h] = 0]
        /\ IF m.val > 0
           THEN /\ phase' = [phase EXCEPT ![h] = "held"]
                /\ depth' = [depth EXCEPT ![h] = 1]
                /\ fence' = [fence EXCEPT ![h] =
                                IF Mutant = "fence_from_counter" THEN fence_ctr ELSE m.val]
                /\ deadline_in' = [deadline_in EXCEPT ![h] = LeaseFrom(sent_ago[h])]
                /\ next_renew_in' = [next_renew_in EXCEPT ![h] =
                                       Max(Heartbeat - sent_ago[h], 0)]
                /\ lost' = [lost EXCEPT ![h] = LeaseFrom(sent_ago[h]) = 0]
                /\ overlap' = [x \in Holders |->
                                 IF x = h THEN {y \in Holders : InBody(y)}
                                 ELSE IF InBody(x) THEN overlap[x] \cup {h}
                                 ELSE overlap[x]]
                /\ UNCHANGED outcome
           ELSE /\ phase' = [phase EXCEPT ![h] = "done"]
                /\ outcome' = [outcome EXCEPT ![h] = "not_acquired"]
                /\ UNCHANGED <<fence, depth, deadline_in, next_renew_in, lost, overlap>>
    /\ UNCHANGED <<renew_in_flight, renew_sent_ago, op, op_sent_ago>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<oks, late, grants, foreign, wiped, unsettled, freed_inner, freed_by>>

(* acquire_fail: no reply (error or timeout); the script may have run:    *)
(* abandoned, a cleanup release follows.                                  *)
AcquireFail(h) ==
    /\ phase[h] = "acquiring"
    /\ NoAnswer(h, "acquire")
    /\ net' = DropErrors(h, "acquire")
    /\ phase' = [phase EXCEPT ![h] = "abandoned"]
    /\ sent_ago' = [sent_ago EXCEPT ![h] = 0]
    /\ UNCHANGED <<outcome, fence, depth, deadline_in, renew_in_flight, renew_sent_ago,
                   next_renew_in, op, op_sent_ago, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

(* renew_send: R_RENEW(token, ttl), one renewal schedule per held key,    *)
(* whatever the depth.                                                    *)
RenewSendEnabled(h) ==
    /\ phase[h] = "held" /\ ~lost[h] /\ ~starved[h]
    /\ ~renew_in_flight[h] /\ next_renew_in[h] = 0 /\ deadline_in[h] > 0

RenewSend(h) ==
    /\ RenewSendEnabled(h)
    /\ net' = net \cup {Request(h, "renew", 0)}
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![h] = TRUE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![h] = 0]
    /\ next_renew_in' = [next_renew_in EXCEPT ![h] = Heartbeat]
    /\ UNCHANGED <<phase, outcome, fence, depth, deadline_in, sent_ago, op, op_sent_ago,
                   lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

(* A 0 reply handled while held tells the holder Redis lost its key. *)
Told(h) == wiped' = [wiped EXCEPT ![h] = @ /\ phase[h] # "held"]

(* renew_reply: 1 moves the deadline to send time + ttl - margin (unless  *)
(* known lost); 0 while held is a loss.                                   *)
RenewReply(h) ==
    /\ renew_in_flight[h] /\ ~starved[h]
    /\ \E m \in net :
        /\ Mine(m, h, "renew") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ IF phase[h] = "held" /\ m.val = 1
           THEN /\ deadline_in' = [deadline_in EXCEPT ![h] =
                                     IF lost[h] THEN @
                                     ELSE Max(@, LeaseFrom(renew_sent_ago[h]))]
                /\ UNCHANGED <<lost, wiped>>
           ELSE /\ lost' = [lost EXCEPT ![h] = @ \/ phase[h] = "held"]
                /\ Told(h)
                /\ UNCHANGED deadline_in
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![h] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![h] = 0]
    /\ UNCHANGED <<phase, outcome, fence, depth, sent_ago, next_renew_in, op, op_sent_ago>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, unsettled, freed_inner, freed_by>>

(* renew_fail: a connection error is not a loss; the next tick retries. *)
RenewFail(h) ==
    /\ renew_in_flight[h] /\ ~starved[h]
    /\ \E m \in net :
        /\ Mine(m, h, "renew") /\ m.st = "error"
        /\ net' = net \ {m}
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![h] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![h] = 0]
    /\ UNCHANGED <<phase, outcome, fence, depth, deadline_in, sent_ago, next_renew_in, op,
                   op_sent_ago, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

(* lease_timeout: a tick finds the deadline passed: the signal fires, for *)
(* every level (they share one lease).                                    *)
LeaseTimeoutEnabled(h) ==
    /\ phase[h] = "held" /\ ~lost[h] /\ ~starved[h] /\ deadline_in[h] = 0

LeaseTimeout(h) ==
    /\ LeaseTimeoutEnabled(h)
    /\ lost' = [lost EXCEPT ![h] = TRUE]
    /\ UNCHANGED <<phase, outcome, fence, depth, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, op, op_sent_ago>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED ghost_vars

(* body_done: the outermost level's body ends (every inner level has      *)
(* exited: depth 1, nothing awaited), with the completion-time check.     *)
BodyDone(h) ==
    /\ phase[h] = "held" /\ depth[h] = 1 /\ op[h] = "none"
    /\ phase' = [phase EXCEPT ![h] = "body_done"]
    /\ depth' = [depth EXCEPT ![h] = 0]
    /\ lost' = [lost EXCEPT ![h] =
                  @ \/ (deadline_in[h] = 0 /\ Mutant # "no_completion_check")]
    /\ late' = [late EXCEPT ![h] = deadline_in[h] = 0]
    /\ starved' = [starved EXCEPT ![h] = FALSE]
    /\ UNCHANGED <<outcome, fence, deadline_in, sent_ago, renew_in_flight, renew_sent_ago,
                   next_renew_in, op, op_sent_ago>>
    /\ UNCHANGED <<key_holder, key_depth, key_ttl, fence_ctr, released, faults, net>>
    /\ UNCHANGED <<overlap, oks, grants, foreign, wiped, unsettled, freed_inner, freed_by>>

(* release: R_RELEASE(token), the outermost exit only: after the body, as *)
(* the cleanup of an abandoned acquire, or for a grant that arrived after *)
(* its lease (lost at once, depth 1, no body runs).                       *)
Release(h) ==
    /\ \/ phase[h] \in {"body_done", "abandoned"}
       \/ phase[h] = "held" /\ lost[h] /\ depth[h] = 1 /\ op[h] = "none"
    /\ net' = net \cup {Request(h, "release", 0)}
    /\ phase' = [phase EXCEPT ![h] = "releasing"]
    /\ depth' = [depth EXCEPT ![h] = 0]
    /\ UNCHANGED <<outcome, fence, deadline_in, sent_ago, renew_in_flight, renew_sent_ago,
                   next_renew_in, op, op_sent_ago, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

Abandoned(h) == fence[h] = 0

Finish(h, result) ==
    /\ phase' = [phase EXCEPT ![h] = "done"]
    /\ outcome' = [outcome EXCEPT ![h] = result]
    /\ lost' = [lost EXCEPT ![h] = @ \/ result = "lost"]
    /\ oks' = IF result = "ok" THEN oks \cup {[h |-> h, overlap |-> overlap[h]]} ELSE oks

(* release_reply: 1 with no loss recorded is the only success. *)
ReleaseReply(h) ==
    /\ phase[h] = "releasing"
    /\ \E m \in net :
        /\ Mine(m, h, "release") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ Finish(h, IF Abandoned(h) THEN "failed"
                     ELSE IF m.val = 1 /\ ~lost[h] THEN "ok" ELSE "lost")
    /\ UNCHANGED <<fence, depth, deadline_in, sent_ago, renew_in_flight, renew_sent_ago,
                   next_renew_in, op, op_sent_ago>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<overlap, late, grants, foreign, wiped, unsettled, freed_inner, freed_by>>

(* release_fail: no reply: the outcome is unknown, so not a success. *)
ReleaseFail(h) ==
    /\ phase[h] = "releasing"
    /\ NoAnswer(h, "release")
    /\ net' = DropErrors(h, "release")
    /\ Finish(h, IF Abandoned(h) THEN "failed" ELSE "lost")
    /\ UNCHANGED <<fence, depth, deadline_in, sent_ago, renew_in_flight, renew_sent_ago,
                   next_renew_in, op, op_sent_ago>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<overlap, late, grants, foreign, wiped, unsettled, freed_inner, freed_by>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Inner levels: the new actions, one per core method.                    *)
(***************************************************************************)

(* reenter: the holder, at depth d >= 1 of a held section that is not     *)
(* known lost, sends R_ENTER(token, ttl, d + 1) and waits for the reply.  *)
(* (Known lost: the re-entry raises at once, nothing is sent, no action.)  *)
Reenter(h) ==
    /\ phase[h] = "held" /\ depth[h] >= 1 /\ depth[h] < MaxDepth /\ h \in Deep
    /\ op[h] = "none" /\ ~starved[h]
    /\ ~lost[h] \/ Mutant = "reenter_after_loss"
    /\ net' = net \cup {[Request(h, "enter", depth[h] + 1) EXCEPT !.clean = ~LevelPending(h, net)]}
    /\ op' = [op EXCEPT ![h] = "enter"]
    /\ op_sent_ago' = [op_sent_ago EXCEPT ![h] = 0]
    /\ UNCHANGED <<phase, outcome, fence, depth, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

(* A level change answered 1 settles the holder's depth if nothing older  *)
(* of the holder could still run when it was sent (a hung R_LEAVE or      *)
(* R_ENTER that runs late overwrites even a later write: until the next   *)
(* clean one, the depth in Redis is advisory).                            *)
Settle(h, m) == unsettled' = [unsettled EXCEPT ![h] = ~m.clean]

(* reenter_reply: 1 -> depth d + 1, and the deadline moves to send time + *)
(* ttl - margin (R_ENTER refreshed the TTL), like a renewal reply.  A 1   *)
(* that arrives once the lease is known lost does not open the level: the *)
(* re-entry raises LockLeaseLostError (Redis may now hold d + 1: the depth *)
(* is unsettled until the next level change).  0 -> lost (the signal      *)
(* fires), and the re-entry raises LockLeaseLostError.                    *)
ReenterReply(h) ==
    /\ op[h] = "enter" /\ ~starved[h]
    /\ \E m \in net :
        /\ Mine(m, h, "enter") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ IF m.val = 1 /\ (~lost[h] \/ Mutant = "reenter_after_loss")
           THEN /\ depth' = [depth EXCEPT ![h] = @ + 1]
                /\ deadline_in' = [deadline_in EXCEPT ![h] =
                                     IF lost[h] THEN @
                                     ELSE IF Mutant = "reenter_deadline_from_reply"
                                     THEN TTL - Margin
                                     ELSE Max(@, LeaseFrom(op_sent_ago[h]))]
                /\ Settle(h, m)
                /\ UNCHANGED <<lost, wiped>>
           ELSE IF m.val = 1
           THEN /\ unsettled' = [unsettled EXCEPT ![h] = TRUE]
                /\ UNCHANGED <<depth, deadline_in, lost, wiped>>
           ELSE IF Mutant = "reenter_reject_ignored"
           THEN UNCHANGED <<depth, deadline_in, lost, wiped, unsettled>>
           ELSE /\ lost' = [lost EXCEPT ![h] = TRUE]
                /\ Told(h)
                /\ UNCHANGED <<depth, deadline_in, unsettled>>
    /\ op' = [op EXCEPT ![h] = "none"]
    /\ op_sent_ago' = [op_sent_ago EXCEPT ![h] = 0]
    /\ UNCHANGED <<phase, outcome, fence, sent_ago, renew_in_flight, renew_sent_ago,
                   next_renew_in>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, freed_inner, freed_by>>

(* reenter_fail: no reply (error or timeout): depth stays d, the re-entry *)
(* raises the error; not a loss (Redis may hold d + 1 until the next      *)
(* level change writes the true depth).                                   *)
ReenterFail(h) ==
    /\ op[h] = "enter" /\ ~starved[h]
    /\ NoAnswer(h, "enter")
    /\ net' = DropErrors(h, "enter")
    /\ op' = [op EXCEPT ![h] = "none"]
    /\ op_sent_ago' = [op_sent_ago EXCEPT ![h] = 0]
    /\ unsettled' = [unsettled EXCEPT ![h] = TRUE]
    /\ UNCHANGED <<phase, outcome, fence, depth, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, freed_inner, freed_by>>

(* leave: an inner level (depth d >= 2) exits: depth d - 1 at once on the *)
(* client, R_LEAVE(token, d - 1) sent, and the exit waits for the reply.  *)
(* It exits whether or not the lease is known lost (then the exit raises  *)
(* LockLeaseLostError whatever the reply).  A level whose body starved    *)
(* the holder ends that starvation here (see Starve).                     *)
Leave(h) ==
    /\ phase[h] = "held" /\ depth[h] >= 2 /\ op[h] = "none"
    /\ net' = net \cup {[Request(h, "leave", depth[h] - 1) EXCEPT !.clean = ~LevelPending(h, net)]}
    /\ depth' = [depth EXCEPT ![h] = @ - 1]
    /\ op' = [op EXCEPT ![h] = "leave"]
    /\ starved' = [starved EXCEPT ![h] = FALSE]
    /\ UNCHANGED <<phase, outcome, fence, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, op_sent_ago, lost>>
    /\ UNCHANGED <<key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED ghost_vars

(* leave_reply: 1 -> nothing more; 0 -> lost (the signal fires), and that *)
(* inner exit raises LockLeaseLostError.                                  *)
LeaveReply(h) ==
    /\ op[h] = "leave" /\ ~starved[h]
    /\ \E m \in net :
        /\ Mine(m, h, "leave") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ IF m.val = 1 \/ Mutant = "leave_reject_ignored"
           THEN /\ Settle(h, m)
                /\ UNCHANGED <<lost, wiped>>
           ELSE /\ lost' = [lost EXCEPT ![h] = TRUE]
                /\ Told(h)
                /\ UNCHANGED unsettled
    /\ op' = [op EXCEPT ![h] = "none"]
    /\ UNCHANGED <<phase, outcome, fence, depth, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, op_sent_ago>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, freed_inner, freed_by>>

(* leave_fail: no reply: not a loss (the depth in Redis is advisory until *)
(* the next write).                                                       *)
LeaveFail(h) ==
    /\ op[h] = "leave" /\ ~starved[h]
    /\ NoAnswer(h, "leave")
    /\ net' = DropErrors(h, "leave")
    /\ op' = [op EXCEPT ![h] = "none"]
    /\ unsettled' = [unsettled EXCEPT ![h] = TRUE]
    /\ UNCHANGED <<phase, outcome, fence, depth, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, op_sent_ago, lost>>
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released, faults>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, freed_inner, freed_by>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Environment actions.                                                   *)
(***************************************************************************)

(* Is the holder still waiting for the reply to m? *)
Awaited(m) ==
    CASE m.kind = "acquire" -> phase[m.h] = "acquiring"
      [] m.kind = "release" -> phase[m.h] = "releasing"
      [] m.kind = "renew"   -> renew_in_flight[m.h]
      [] m.kind = "enter"   -> op[m.h] = "enter"
      [] OTHER              -> op[m.h] = "leave"

(* A due heartbeat timer fires, and a release follows a finished body, *)
(* before time moves on (unless the body starves the loop).            *)
TimerDue(h) ==
    \/ RenewSendEnabled(h)
    \/ LeaseTimeoutEnabled(h)
    \/ phase[h] \in {"body_done", "abandoned"}

(* Time advances one unit: the key expires at its instant; countdowns and *)
(* ages move; those that no longer matter read 0.  Delays are unbounded.  *)
Tick ==
    /\ \A h \in Holders : ~TimerDue(h)
    /\ deadline_in' = [h \in Holders |->
                         IF phase[h] # "held" THEN 0 ELSE Dec(deadline_in[h])]
    /\ next_renew_in' = [h \in Holders |->
                           IF phase[h] # "held" THEN 0 ELSE Dec(next_renew_in[h])]
    /\ sent_ago' = [h \in Holders |->
                      IF phase[h] # "acquiring" THEN 0 ELSE Min(sent_ago[h] + 1, AgeCap)]
    /\ renew_sent_ago' = [h \in Holders |->
                            IF ~renew_in_flight[h] \/ phase[h] # "held" THEN 0
                            ELSE Min(renew_sent_ago[h] + 1, AgeCap)]
    /\ op_sent_ago' = [h \in Holders |->
                         IF op[h] # "enter" THEN 0 ELSE Min(op_sent_ago[h] + 1, AgeCap)]
    /\ key_ttl' = Dec(key_ttl)
    /\ key_holder' = IF key_ttl <= 1 THEN NoToken ELSE key_holder
    /\ key_depth' = IF key_ttl <= 1 THEN 0 ELSE key_depth
    /\ UNCHANGED <<phase, outcome, fence, depth, renew_in_flight, op, lost>>
    /\ UNCHANGED <<starved, fence_ctr, released, faults, net>>
    /\ UNCHANGED ghost_vars

Answer(m, v) ==
    net' = (net \ {m}) \cup (IF Awaited(m) /\ m.st = "sent"
                            THEN {[m EXCEPT !.st = "done", !.val = v]} ELSE {})

Mirrored(tok) == key_holder = tok

(* Redis runs one script atomically and queues its reply.               *)
(* R_ACQUIRE: absent -> HSET token 1, fence INCR, PEXPIRE, {1, fence};   *)
(*   our token (a resend of our own acquire) -> PEXPIRE, {1, stored      *)
(*   fence}, depth untouched; else {0, 0}.                               *)
(* R_RENEW: our token -> PEXPIRE, 1 (depth untouched); else 0.           *)
(* R_ENTER(d): our token -> HSET token d, PEXPIRE, 1; else 0.            *)
(* R_LEAVE(d): our token -> HSET token d (never deletes), 1; else 0.     *)
(* R_RELEASE: our token -> DEL, SET its own record (one key per token:   *)
(*   released_key), 1; our record -> 1; else 0.                          *)
(* A write to a key holding another token is recorded (foreign), for    *)
(* every script: a broken variant that drops a token check writes it.   *)
RedisStep(m) ==
    /\ m \in net /\ m.st \in {"sent", "hung"}
    /\ CASE m.kind = "acquire" ->
              IF key_holder = m.tok
              THEN /\ key_ttl' = TTL
                   /\ Answer(m, fence_ctr)
                   /\ UNCHANGED <<key_holder, key_depth, fence_ctr, released, grants,
                                  foreign>>
              ELSE IF key_holder = NoToken
              THEN /\ key_holder' = m.tok
                   /\ key_depth' = 1
                   /\ key_ttl' = TTL
                   /\ fence_ctr' = fence_ctr + 1
                   /\ grants' = Append(grants, [tok |-> m.tok, fence |-> fence_ctr + 1])
                   /\ Answer(m, fence_ctr + 1)
                   /\ UNCHANGED <<foreign, released>>
              ELSE /\ Answer(m, 0)
                   /\ UNCHANGED <<key_holder, key_depth, key_ttl, fence_ctr, released,
                                  grants, foreign>>
         [] m.kind = "renew" ->
              \* (without the token check: PEXPIRE on whatever hash is there)
              LET hit == \/ key_holder = m.tok
                         \/ (Mutant = "renew_without_token_check" /\ key_holder # NoToken)
              IN /\ key_ttl' = IF hit THEN TTL ELSE key_ttl
                 /\ key_depth' = IF hit /\ Mutant = "renew_resets_count" THEN 1
                                 ELSE key_depth
                 /\ foreign' = (foreign \/ (hit /\ key_holder # m.tok))
                 /\ Answer(m, IF hit THEN 1 ELSE 0)
                 /\ UNCHANGED <<key_holder, fence_ctr, released, grants>>
         [] m.kind = "enter" ->
              \* (without the token check: our field HSET into another token's hash,
              \* its TTL refreshed; the holder and its depth stay the owner's)
              LET ours == key_holder = m.tok
                  hit == \/ ours
                         \/ (Mutant = "reenter_without_token_check" /\ key_holder # NoToken)
              IN /\ key_ttl' = IF hit THEN TTL ELSE key_ttl
                 /\ key_depth' = IF ours THEN m.d ELSE key_depth
                 /\ foreign' = (foreign \/ (hit /\ ~ours))
                 /\ Answer(m, IF hit THEN 1 ELSE 0)
                 /\ UNCHANGED <<key_holder, fence_ctr, released, grants>>
         [] m.kind = "leave" ->
              LET hit == \/ key_holder = m.tok
                         \/ (Mutant = "leave_without_token_check" /\ key_holder # NoToken)
                  del == Mutant = "release_at_first_exit" /\ key_holder = m.tok
              IN /\ key_holder' = IF del THEN NoToken ELSE key_holder
                 /\ key_ttl' = IF del THEN 0 ELSE key_ttl
                 /\ key_depth' = IF del THEN 0 ELSE IF hit THEN m.d ELSE key_depth
                 /\ foreign' = (foreign \/ (hit /\ key_holder # m.tok))
                 /\ Answer(m, IF hit THEN 1 ELSE 0)
                 /\ UNCHANGED <<fence_ctr, released, grants>>
         [] m.kind = "release" ->
              \* The records: one per released token (the set of them), read for our
              \* own token only.  Broken: one record per key, overwritten by each
              \* release (the last releaser's token); or a record read as any token's.
              LET hit == key_holder = m.tok
                  again == IF Mutant = "release_record_any_token" THEN released # {}
                           ELSE m.tok \in released
              IN /\ key_holder' = IF hit THEN NoToken ELSE key_holder
                 /\ key_ttl' = IF hit THEN 0 ELSE key_ttl
                 /\ key_depth' = IF hit THEN 0 ELSE key_depth
                 /\ released' = IF ~hit THEN released
                                ELSE IF Mutant = "release_record_last_token" THEN {m.tok}
                                ELSE released \cup {m.tok}
                 /\ freed_by' = IF hit THEN freed_by \cup {m.tok} ELSE freed_by
                 /\ Answer(m, IF hit \/ again THEN 1 ELSE 0)
                 /\ UNCHANGED <<fence_ctr, grants, foreign>>
    /\ m.kind # "release" => UNCHANGED freed_by
    \* a script freed the key while its owner's outermost level was still open
    /\ freed_inner' = \/ freed_inner
                      \/ /\ key_holder # NoToken /\ key_holder' = NoToken
                         /\ \E h \in Holders : Tok(h) = key_holder /\ phase[h] = "held"
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, faults>>
    /\ UNCHANGED <<overlap, oks, late, wiped, unsettled>>

(* The connection fails: the request is lost, or it ran and its reply is  *)
(* lost; the holder sees an error.  A renewal's socket timeout may fire   *)
(* while the request still waits at Redis (kept as "hung": it runs later). *)
DropReply(m) ==
    /\ faults < MaxFaults /\ "drop" \in FaultKinds
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m)
    /\ faults' = faults + 1
    /\ \E queued \in IF m.st = "sent" /\ m.kind = "renew" THEN BOOLEAN ELSE {FALSE} :
        net' = (net \ {m}) \cup {[m EXCEPT !.st = "error"]}
                            \cup (IF queued THEN {[m EXCEPT !.st = "hung"]} ELSE {})
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released>>
    /\ UNCHANGED ghost_vars

(* No reply ever comes and no error is raised: the waiting call times out *)
(* (its Fail action); the request may still run later.  A hung renewal    *)
(* stays in flight and LeaseTimeout catches it.                           *)
HangReply(m) ==
    /\ faults < MaxFaults /\ "hang" \in FaultKinds
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m)
    /\ net' = IF m.st = "sent" THEN (net \ {m}) \cup {[m EXCEPT !.st = "hung"]}
              ELSE net \ {m}
    /\ faults' = faults + 1
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released>>
    /\ UNCHANGED ghost_vars

(* The client library resends a command whose reply was lost (redis-py    *)
(* Retry): the script runs again and the holder gets the second reply.    *)
(* R_ACQUIRE, R_ENTER, R_LEAVE and R_RELEASE are written to be run twice. *)
Resend(m) ==
    /\ faults < MaxFaults /\ "resend" \in FaultKinds
    /\ m \in net /\ m.kind \in {"acquire", "enter", "leave", "release"}
    /\ m.st = "done" /\ Awaited(m)
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "sent", !.val = 0]}
    /\ faults' = faults + 1
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, key_holder, key_depth, key_ttl, fence_ctr, released>>
    /\ UNCHANGED ghost_vars

(* Redis loses the key without expiry: eviction or a failover (the        *)
(* counter survives), or, unless CounterSurvives, a restart without        *)
(* persistence, which may also lose the fence counter (held key or not).   *)
(* Grants then count on from the floor of Redis's clock (lib/fence.lua),   *)
(* above every fence before under the clock assumption (DistLock.tla's     *)
(* KeyLost): fence_ctr, the counter as a grant sees it, stays (the least   *)
(* value the assumption allows); no_fence_floor: it may drop to 0, the     *)
(* counter starting again.                                                 *)
KeyLost ==
    /\ faults < MaxFaults /\ "key_lost" \in FaultKinds
    /\ key_holder # NoToken \/ (~CounterSurvives /\ fence_ctr > 0)
    /\ key_holder' = NoToken
    /\ key_depth' = 0
    /\ key_ttl' = 0
    /\ fence_ctr' \in IF CounterSurvives \/ Mutant # "no_fence_floor" THEN {fence_ctr}
                      ELSE {fence_ctr, 0}
    \* the release records may be lost with it (a failover to a replica that had
    \* none of them): forgotten, a resend of a release is answered 0
    /\ \E forget \in BOOLEAN :
        /\ released' = IF forget THEN {} ELSE released
        /\ freed_by' = IF forget THEN {} ELSE freed_by
    /\ faults' = faults + 1
    /\ wiped' = [h \in Holders |-> wiped[h] \/ key_holder = Tok(h)]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, net>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, unsettled, freed_inner>>

(* The body's last stretch at its depth blocks the event loop (or holds   *)
(* the GIL) until that level ends: no timer or reply callback of the      *)
(* holder runs, and it opens no level, until its exit: BodyDone at depth  *)
(* 1, Leave deeper (the exit then waits for its reply: the loop runs).    *)
Starve(h) ==
    /\ faults < MaxFaults /\ "starve" \in FaultKinds
    /\ phase[h] = "held" /\ op[h] = "none" /\ ~starved[h]
    /\ starved' = [starved EXCEPT ![h] = TRUE]
    /\ faults' = faults + 1
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<key_holder, key_depth, key_ttl, fence_ctr, released, net>>
    /\ UNCHANGED ghost_vars

-----------------------------------------------------------------------------
(* Every holder action, then the environment's. *)
HolderStep(h) ==
    \/ Acquire(h)
    \/ AcquireReply(h)
    \/ AcquireFail(h)
    \/ RenewSend(h)
    \/ RenewReply(h)
    \/ RenewFail(h)
    \/ LeaseTimeout(h)
    \/ Reenter(h)
    \/ ReenterReply(h)
    \/ ReenterFail(h)
    \/ Leave(h)
    \/ LeaveReply(h)
    \/ LeaveFail(h)
    \/ BodyDone(h)
    \/ Release(h)
    \/ ReleaseReply(h)
    \/ ReleaseFail(h)

EnvStep ==
    \/ Tick
    \/ \E m \in net : RedisStep(m)
    \/ \E m \in net : DropReply(m)
    \/ \E m \in net : HangReply(m)
    \/ \E m \in net : Resend(m)
    \/ KeyLost
    \/ \E h \in Holders : Starve(h)

Next == (\E h \in Holders : HolderStep(h)) \/ EnvStep

Spec == Init /\ [][Next]_vars

(* Progress: replies, failures, timers and releases happen; bodies and    *)
(* inner levels end (Leave and BodyDone); faults, re-entries and new      *)
(* acquires are never forced.                                             *)
HolderProgress(h) ==
    \/ Acquire(h) \/ AcquireReply(h) \/ AcquireFail(h)
    \/ RenewReply(h) \/ RenewFail(h) \/ LeaseTimeout(h)
    \/ ReenterReply(h) \/ ReenterFail(h) \/ LeaveReply(h) \/ LeaveFail(h)
    \/ ReleaseReply(h) \/ ReleaseFail(h)

Fairness ==
    /\ \A h \in Holders :
        /\ WF_vars(HolderProgress(h))
        /\ WF_vars(RenewSend(h))
        /\ WF_vars(Leave(h))
        /\ WF_vars(BodyDone(h))
        /\ WF_vars(Release(h))
    /\ WF_vars(\E m \in net : RedisStep(m))
    /\ WF_vars(Tick)

FairSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(***************************************************************************)
(* Properties                                                             *)
(***************************************************************************)

TypeOK ==
    /\ phase \in [Holders -> Phases]
    /\ outcome \in [Holders -> Outcomes]
    /\ fence \in [Holders -> Nat]
    /\ depth \in [Holders -> 0..MaxDepth]
    /\ deadline_in \in [Holders -> 0..TTL]
    /\ sent_ago \in [Holders -> 0..AgeCap]
    /\ renew_in_flight \in [Holders -> BOOLEAN]
    /\ renew_sent_ago \in [Holders -> 0..AgeCap]
    /\ next_renew_in \in [Holders -> 0..Heartbeat]
    /\ op \in [Holders -> Ops]
    /\ op_sent_ago \in [Holders -> 0..AgeCap]
    /\ lost \in [Holders -> BOOLEAN]
    /\ starved \in [Holders -> BOOLEAN]
    /\ key_holder \in Holders \cup {NoToken}
    /\ key_ttl \in 0..TTL /\ (key_holder = NoToken) = (key_ttl = 0)
    /\ key_depth \in 0..MaxDepth /\ (key_holder = NoToken) = (key_depth = 0)
    /\ released \subseteq Holders
    /\ freed_by \subseteq Holders
    /\ fence_ctr \in Nat
    /\ net \subseteq Message
    /\ \A h \in Holders : (depth[h] > 0) = (phase[h] = "held")

(* No two holders' successful sections overlap: two holders that both     *)
(* finished ok were never in their bodies at the same time.               *)
NoOverlappingSuccess == \A a, b \in oks : a.h \notin b.overlap

(* The key stops holding a holder's token only by the outermost release,  *)
(* its expiry or Redis losing it: never at an inner exit (no script frees *)
(* it while its owner's outermost level is open).                         *)
FreedOnlyAtOutermost == ~freed_inner

(* When no level change of a holder is in flight (or may still run at     *)
(* Redis) and none failed since the last settled one, Redis's depth for   *)
(* its token equals the holder's depth.                                   *)
DepthMirrored ==
    \A h \in Holders :
        (/\ phase[h] = "held" /\ key_holder = Tok(h)
         /\ op[h] = "none" /\ ~unsettled[h] /\ ~LevelPending(h, net))
            => key_depth = depth[h]

(* A re-entry never succeeds once the holder's section is known lost. *)
NoReentryAfterLoss ==
    [][\A h \in Holders : (depth[h] >= 1 /\ depth'[h] > depth[h]) => ~lost[h]]_vars

(* The Lock's properties that apply. *)
NoForeignWrite == ~foreign

(* The fence each holder holds is the one Redis last issued its token     *)
(* (checked as part of FencesIncrease).                                    *)
FenceIssued ==
    \A h \in Holders : fence[h] > 0 =>
        \E i \in 1..Len(grants) :
            /\ grants[i].tok = Tok(h) /\ grants[i].fence = fence[h]
            /\ \A j \in (i + 1)..Len(grants) : grants[j].tok # Tok(h)

(* Each new owner gets a strictly larger fence (while Redis keeps the     *)
(* counter), and the fence each holder holds is the one Redis issued it.   *)
FencesIncrease ==
    /\ \A i \in 1..(Len(grants) - 1) : grants[i].fence < grants[i + 1].fence
    /\ FenceIssued

(* While the signal has not fired and the holder's clock says the lease   *)
(* (shared by every level) is valid, Redis holds its token, unless Redis  *)
(* lost the key and no reply has told the holder since.                   *)
SignalSound ==
    \A h \in Holders :
        (phase[h] \in {"held", "body_done"} /\ ~lost[h] /\ deadline_in[h] > 0 /\ ~wiped[h])
            => key_holder = Tok(h)

OkWithinLease == \A h \in Holders : outcome[h] = "ok" => ~late[h]

(* The holder handles a 0 reply to its renewal, re-entry or inner exit in *)
(* this step (the cheap in-flight tests first: TLC evaluates this on     *)
(* every step).                                                           *)
Rejected(h) ==
    \E k \in {"renew", "enter", "leave"} :
        /\ IF k = "renew" THEN renew_in_flight[h] /\ ~renew_in_flight'[h]
                         ELSE op[h] = k /\ op'[h] = "none"
        /\ \E m \in net \ net' : Mine(m, h, k) /\ m.st = "done" /\ m.val = 0

(* A rejected renewal, re-entry or inner exit (Redis no longer holds the  *)
(* token) while the section is held fires the signal in the same step,    *)
(* for every level still open: the levels share one lease and one signal  *)
(* (lost; in the code, one section under every level's handle), so the    *)
(* outermost level and every inner one, the exiting level's parent among  *)
(* them, see the loss, not only the call that got the 0.                  *)
RejectionSignals ==
    [][\A h \in Holders :
         (phase[h] = "held" /\ ~lost'[h]) => ~Rejected(h)]_vars

(* A release resent (its first run freed the key, its reply was lost) is  *)
(* answered as released whoever acquired and released the key in between: *)
(* a holder whose own release freed its key is never told by that         *)
(* release's reply that the key was not its own (the records remember     *)
(* every released token, not only the last releaser's).  Unless Redis     *)
(* lost the records with the key (KeyLost forgets freed_by with them).    *)
ReleaseRejected(h) ==
    /\ phase[h] = "releasing" /\ phase'[h] = "done"
    /\ \E m \in net \ net' : Mine(m, h, "release") /\ m.st = "done" /\ m.val = 0

NoSpuriousLoss == [][\A h \in Holders : ReleaseRejected(h) => Tok(h) \notin freed_by]_vars

(* Every holder's section ends. *)
Terminates == \A h \in Holders : (phase[h] # "done") ~> (phase[h] = "done")

(***************************************************************************)
(* Reachability probes: properties TLC must VIOLATE.                      *)
(***************************************************************************)
\* a holder at depth 2
ProbeDepth2 == ~\E h \in Holders : depth[h] = 2
\* the child refused while its parent holds the key
ProbeChildRefused == ~(Child \in Holders /\ outcome[Child] = "not_acquired" /\ phase[Parent] = "held")
\* a section lost at depth 2, its levels still open
ProbeLostAtDepth2 == ~\E h \in Holders : phase[h] = "held" /\ depth[h] = 2 /\ lost[h]
\* a body starved at depth 2 whose key has expired meanwhile
ProbeStarvedAtDepth2 ==
    ~\E h \in Holders : starved[h] /\ depth[h] = 2 /\ key_holder # Tok(h)
\* a re-entry that refreshed the lease (its reply moved the deadline later)
ProbeReentryRefreshed ==
    [][\A h \in Holders : ~(/\ depth[h] >= 1 /\ depth'[h] = depth[h] + 1
                            /\ deadline_in'[h] > deadline_in[h])]_vars

HolderSymmetry == Permutations(Holders)

=============================================================================
