------------------------------ MODULE Semaphore ------------------------------
(***************************************************************************)
(* The counting semaphore: at most Limit owned, renewed, expiring permits  *)
(* on one id.                                                              *)
(*                                                                         *)
(* Each client runs one section at a time, and a section is one permit:   *)
(* a lease with exactly the Lock's client actions and guards (Acquire ... *)
(* ReleaseFail, one per distlock._core.section.Section method, as in       *)
(* DistLock.tla) minus the fence.  Only the Redis side differs: the key   *)
(* is a sorted set, member = permit token, score = the permit's expiry    *)
(* instant on REDIS's clock (TIME inside the script).  The scripts are    *)
(* the cases of RedisStep:                                                 *)
(*   acquire  evict expired permits; our own live token (a resent acquire) *)
(*            is re-scored and granted; else grant iff fewer than Limit.  *)
(*   renew    grant iff our token is a live member (the membership check), *)
(*   /extend  then re-score it (ZADD XX).                                  *)
(*   release  remove our token if it is a live member and remember that   *)
(*            it did (per token), so a resent release is answered 1.     *)
(* Every script that writes a permit ends by setting the key's own expiry *)
(* to its latest permit's instant (PEXPIREAT); when the key expires, every *)
(* permit in it goes (key_ttl).                                           *)
(*                                                                         *)
(* Time without a clock, as in DistLock.tla: every instant is a countdown *)
(* or an age.  Client instants count on the client clock (which may lag   *)
(* real time by at most MaxDrift per section); each permit's score is its *)
(* own countdown on Redis's clock (perm_ttl[t]: the score minus Redis's   *)
(* now; 0 is no permit).  A permit whose score has passed counts for      *)
(* nothing in any script (acquire evicts it before counting, renew and    *)
(* release check score > now), so it is dropped on the Tick its score     *)
(* passes: the same replies as evicting it lazily.                        *)
(*                                                                         *)
(* Faults, at most MaxFaults per behaviour: dropped, hung and resent      *)
(* requests, Redis losing the key (a restart without persistence: empty), *)
(* a starved body, and a client dying (SIGKILL: its requests already sent *)
(* may still run, it sends nothing more and never releases).              *)
(*                                                                         *)
(* Mutant names a deliberately broken variant ("none" for the real thing). *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Clients,    \* client processes (model values)
    MaxRounds,  \* sections (permits) per client in one behaviour
    Retries,    \* retries_left at the start of a section
    Limit,      \* permits on the id (the limit every acquire passes)
    TTL,        \* lease length of a permit (the score is now + TTL)
    Heartbeat,  \* renewal period of run/hold sections
    Margin,     \* clock-drift allowance subtracted from every deadline
    MaxDrift,   \* how far a client clock may lag real time during one section
    MaxFaults,  \* faults (drop, hang, resend, key loss, starvation, death) in one behaviour
    Manual,     \* TRUE: sections may be manual handles (acquire/extend/release)
    Mutant      \* "none" or the name of a broken variant

Mutants == {"none",
            \* the three the design names
            "shared_ttl", "renew_without_membership_check", "expiry_by_client_clock",
            \* the Lock's properties, broken through the permit's scripts and actions
            "release_any_permit", "ignore_release_reply", "deadline_from_reply",
            "no_completion_check", "retry_off_by_one",
            \* the key's own expiry, a resent acquire, the release memory
            "renew_keeps_key_expiry", "acquire_not_idempotent",
            "release_memory_any_token", "release_memory_last_only"}

(* Options a cfg turns on by overriding the definition, as in DistLock.tla. *)
ShortTTL == TTL          \* the other TTL a manual extend may ask for
ResendReleases == FALSE  \* the client library resends a release whose reply was lost
EarlyRelease == FALSE    \* a run/hold body may release its own permit
FaultKinds == {"drop", "hang", "resend", "key_lost", "starve", "die"}
(* expiry_by_client_clock: how far ahead of Redis's the acquiring client's *)
(* clock runs (it evicts permits with no more than this left).            *)
Skew == 0
(* Each client's TTL: TTL for every one, except in the trace model, where a *)
(* section's permit may have a TTL of its own (Semaphore objects of one id  *)
(* passing different ttl_ms: SemaphoreTrace.tla's TraceTTLOf).             *)
TTLOf(c) == TTL

ASSUME
    /\ Mutant \in Mutants
    /\ Limit \in Nat \ {0}
    /\ TTL \in Nat \ {0} /\ Heartbeat \in Nat \ {0} /\ Margin \in Nat /\ Margin < TTL
    /\ 2 * Heartbeat <= TTL
    /\ MaxDrift <= Margin
    /\ MaxRounds \in Nat \ {0} /\ Retries \in Nat /\ MaxFaults \in Nat
    /\ ShortTTL \in (Margin + 1)..TTL
    /\ \A c \in Clients : TTLOf(c) \in Nat /\ Margin < TTLOf(c) /\ 2 * Heartbeat <= TTLOf(c)
    /\ ResendReleases \in BOOLEAN /\ EarlyRelease \in BOOLEAN
    /\ FaultKinds \subseteq {"drop", "hang", "resend", "key_lost", "starve", "die"}
    /\ Skew \in Nat

Phases   == {"idle", "acquiring", "backoff", "held", "body_done", "abandoned",
             "releasing", "release_unknown", "done"}
Outcomes == {"none", "ok", "not_acquired", "lost", "failed"}
Kinds    == {"acquire", "renew", "extend", "release"}
Tokens   == Clients \X (1..MaxRounds)

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b
Dec(x)    == IF x > 0 THEN x - 1 ELSE 0

(* The longest TTL of any client (TTL, but in a trace model with TTLs of its *)
(* own), and the age past which a client's request grants it no lease.      *)
LongestTTL == LET s == {TTLOf(c) : c \in Clients} IN CHOOSE v \in s : \A w \in s : w <= v
AgeCap == Max(LongestTTL - Margin, Heartbeat)
AgeCapOf(c) == Max(TTLOf(c) - Margin, Heartbeat)

VARIABLES
    \* ---- client side: one Section per client (names follow distlock.core) ----
    phase,            \* Section.phase
    outcome,          \* Section.outcome
    retries_left,     \* Section.retries_left
    token,            \* Section.token: <<client, section number>>, unique per section
    deadline_in,      \* Section.deadline - now (client clock), floored at 0
    sent_ago,         \* now - sent_at of the acquire in flight (0 when none)
    renew_in_flight,  \* Section.renew_in_flight
    renew_sent_ago,   \* now - Section.renew_sent_at while renew_in_flight (else 0)
    next_renew_in,    \* Section.next_renew_at - now, floored at 0
    extend_in_flight, \* Section.extend_in_flight (manual extend)
    extend_sent_ago,  \* now - Section.extend_sent_at while extend_in_flight (else 0)
    lost,             \* Section.lost is not None: the lease is known lost
    granted,          \* SemaphoreSection.granted: Redis granted this permit (no fence)
    auto_renew,       \* Section.config.watch: a run/hold section (FALSE: manual handle)
    extend_ttl,       \* Section.extend_ttl_ms of the extend in flight (TTLOf(c) when none)
    unconfirmed_ttl,  \* Section.unconfirmed_ttl_ms (TTLOf(c) for None)
    \* ---- environment ----
    starved,          \* the body blocks the client's event loop (timers do not run)
    drift,            \* clock lag accumulated by the client during this section
    perm_ttl,         \* per token: its score minus Redis's now (0: not a live permit)
    key_ttl,          \* the key's own PTTL (0: no key): when it runs out, every permit goes
    released,         \* tokens whose release removed their permit (the release memory)
    faults,           \* faults injected so far
    dead,             \* clients killed (SIGKILL): they take no step any more
    net,              \* requests and replies in flight
    \* ---- ghosts for the properties ----
    overlap,          \* tokens of the sections that were in their body at the same time
    oks,              \* finished sections reported ok: [tok, overlap]
    late,             \* the body finished when the client clock said the lease had expired
    own_ttl,          \* per live permit: what is left of the expiry its OWN last write set
    foreign,          \* some script renewed or removed a live permit of another token
    wiped,            \* Redis lost the permit while it was this section's, and no reply
                      \* since has told the client so
    freed             \* tokens whose own release removed their live permit, while Redis
                      \* keeps its release memory (where a release can be sent twice)

client_vars == <<phase, outcome, retries_left, token, deadline_in, sent_ago,
                 renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                 extend_sent_ago, lost, granted, auto_renew, extend_ttl, unconfirmed_ttl>>
env_vars    == <<starved, drift, perm_ttl, key_ttl, released, faults, dead, net>>
ghost_vars  == <<overlap, oks, late, own_ttl, foreign, wiped, freed>>
vars        == <<client_vars, env_vars, ghost_vars>>

Live == {t \in Tokens : perm_ttl[t] > 0}

(* run/hold sections, and (Manual) manual handles. *)
Modes == {TRUE} \cup (IF Manual THEN {FALSE} ELSE {})

Message == [tok : Tokens, kind : Kinds, st : {"sent", "done", "error", "hung"}, val : Nat]

Request(c, k) == [tok |-> token[c], kind |-> k, st |-> "sent", val |-> 0]

Mine(m, c, k) == m.tok = token[c] /\ m.kind = k

NoAnswer(c, k) == ~\E m \in net : Mine(m, c, k) /\ m.st \in {"sent", "done"}

DropErrors(c, k) == {m \in net : ~(Mine(m, c, k) /\ m.st = "error")}

(* The lease a grant, renewal or extend of TTL t gives, on the client      *)
(* clock, from the age of the request: it runs from the SEND time.        *)
LeaseOf(t, ago) ==
    IF Mutant = "deadline_from_reply" THEN t - Margin ELSE Max(t - Margin - ago, 0)

LeaseFrom(c, ago) == LeaseOf(TTLOf(c), ago)

Confirmed(c, t) == Min(t, unconfirmed_ttl[c])

InBody(c) == phase[c] = "held"

Init ==
    /\ phase = [c \in Clients |-> "idle"]
    /\ outcome = [c \in Clients |-> "none"]
    /\ retries_left = [c \in Clients |-> Retries]
    /\ token = [c \in Clients |-> <<c, 1>>]
    /\ deadline_in = [c \in Clients |-> 0]
    /\ sent_ago = [c \in Clients |-> 0]
    /\ renew_in_flight = [c \in Clients |-> FALSE]
    /\ renew_sent_ago = [c \in Clients |-> 0]
    /\ next_renew_in = [c \in Clients |-> 0]
    /\ extend_in_flight = [c \in Clients |-> FALSE]
    /\ extend_sent_ago = [c \in Clients |-> 0]
    /\ lost = [c \in Clients |-> FALSE]
    /\ granted = [c \in Clients |-> FALSE]
    /\ auto_renew \in [Clients -> Modes]
    /\ extend_ttl = [c \in Clients |-> TTLOf(c)]
    /\ unconfirmed_ttl = [c \in Clients |-> TTLOf(c)]
    /\ starved = [c \in Clients |-> FALSE]
    /\ drift = [c \in Clients |-> 0]
    /\ perm_ttl = [t \in Tokens |-> 0]
    /\ key_ttl = 0
    /\ released = {}
    /\ faults = 0
    /\ dead = {}
    /\ net = {}
    /\ overlap = [c \in Clients |-> {}]
    /\ oks = {}
    /\ late = [c \in Clients |-> FALSE]
    /\ own_ttl = [t \in Tokens |-> 0]
    /\ foreign = FALSE
    /\ wiped = [c \in Clients |-> FALSE]
    /\ freed = {}

-----------------------------------------------------------------------------
(***************************************************************************)
(* Client actions: one per distlock.core.Section method, the Lock's own   *)
(* (DistLock.tla), without the fence.                                      *)
(***************************************************************************)

(* Section.acquire: the acquire script with our token, TTL and Limit. *)
Acquire(c) ==
    /\ phase[c] \in {"idle", "backoff"}
    /\ net' = net \cup {Request(c, "acquire")}
    /\ phase' = [phase EXCEPT ![c] = "acquiring"]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<outcome, retries_left, token, deadline_in, renew_in_flight,
                   renew_sent_ago, next_renew_in, lost, extend_in_flight, extend_sent_ago,
                   granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.acquire_reply: granted (1) or refused (0: no free permit).  A   *)
(* grant whose lease already ran out on the client clock is known lost at *)
(* once: no body may rely on it.                                          *)
AcquireReply(c) ==
    /\ phase[c] = "acquiring"
    /\ \E m \in net :
        /\ Mine(m, c, "acquire") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
        /\ IF m.val > 0
           THEN /\ phase' = [phase EXCEPT ![c] = "held"]
                /\ deadline_in' = [deadline_in EXCEPT ![c] = LeaseFrom(c, sent_ago[c])]
                /\ next_renew_in' = [next_renew_in EXCEPT ![c] =
                                       IF auto_renew[c] THEN Max(Heartbeat - sent_ago[c], 0)
                                       ELSE 0]
                /\ lost' = [lost EXCEPT ![c] = LeaseFrom(c, sent_ago[c]) = 0]
                /\ overlap' = [d \in Clients |->
                                 IF d = c THEN {token[e] : e \in {x \in Clients : InBody(x)}}
                                 ELSE IF InBody(d) THEN overlap[d] \cup {token[c]}
                                 ELSE overlap[d]]
                /\ granted' = [granted EXCEPT ![c] = TRUE]
                /\ UNCHANGED <<outcome, retries_left>>
           ELSE /\ UNCHANGED <<deadline_in, next_renew_in, lost, overlap, granted>>
                /\ IF retries_left[c] > 0
                      \/ (Mutant = "retry_off_by_one" /\ retries_left[c] >= 0)
                   THEN /\ phase' = [phase EXCEPT ![c] = "backoff"]
                        /\ retries_left' = [retries_left EXCEPT ![c] = @ - 1]
                        /\ UNCHANGED outcome
                   ELSE /\ phase' = [phase EXCEPT ![c] = "done"]
                        /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
                        /\ UNCHANGED retries_left
    /\ UNCHANGED <<token, renew_in_flight, renew_sent_ago, extend_in_flight,
                   extend_sent_ago, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED <<oks, late, own_ttl, foreign, freed, wiped>>

(* Section.acquire_fail: no reply will come (error or timeout).  The      *)
(* acquire may have taken a permit: release it with our token (abandoned). *)
AcquireFail(c) ==
    /\ phase[c] = "acquiring"
    /\ NoAnswer(c, "acquire")
    /\ net' = DropErrors(c, "acquire")
    /\ phase' = [phase EXCEPT ![c] = "abandoned"]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<outcome, retries_left, token, deadline_in, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.renew_send, as the heartbeat tick takes it. *)
RenewSendEnabled(c) ==
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~lost[c] /\ ~starved[c]
    /\ ~renew_in_flight[c] /\ next_renew_in[c] = 0 /\ deadline_in[c] > 0

RenewSend(c) ==
    /\ RenewSendEnabled(c)
    /\ net' = net \cup {Request(c, "renew")}
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = TRUE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ next_renew_in' = [next_renew_in EXCEPT ![c] = Heartbeat]
    /\ UNCHANGED <<phase, outcome, retries_left, token, deadline_in, sent_ago,
                   extend_in_flight, extend_sent_ago, lost, granted, auto_renew, extend_ttl,
                   unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

Told(c) == wiped' = [wiped EXCEPT ![c] = @ /\ phase[c] # "held"]

(* Section.renew_reply: 1 moves the deadline to send time + ttl - margin; *)
(* 0 (our permit is gone) is a loss while held.                           *)
RenewReply(c) ==
    /\ renew_in_flight[c] /\ ~starved[c]
    /\ \E m \in net :
        /\ Mine(m, c, "renew") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ IF phase[c] = "held" /\ m.val = 1
           THEN /\ deadline_in' = [deadline_in EXCEPT ![c] =
                                     IF lost[c] THEN @
                                     ELSE Max(@, LeaseOf(Confirmed(c, TTLOf(c)), renew_sent_ago[c]))]
                /\ UNCHANGED <<lost, wiped>>
           ELSE /\ lost' = [lost EXCEPT ![c] = @ \/ phase[c] = "held"]
                /\ Told(c)
                /\ UNCHANGED deadline_in
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, sent_ago, next_renew_in,
                   extend_in_flight, extend_sent_ago, granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED <<overlap, oks, late, own_ttl, foreign, freed>>

(* Section.renew_fail: a connection error is not a loss. *)
RenewFail(c) ==
    /\ renew_in_flight[c] /\ ~starved[c]
    /\ \E m \in net :
        /\ Mine(m, c, "renew") /\ m.st = "error"
        /\ net' = net \ {m}
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, deadline_in, sent_ago,
                   next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.lease_timeout: a heartbeat tick finds the deadline passed. *)
LeaseTimeoutEnabled(c) ==
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~lost[c] /\ ~starved[c]
    /\ deadline_in[c] = 0

LeaseTimeout(c) ==
    /\ LeaseTimeoutEnabled(c)
    /\ lost' = [lost EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<phase, outcome, retries_left, token, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED ghost_vars

(* Section.extend: manual extend on a handle, the permit's TTL or ShortTTL. *)
Extend(c) ==
    /\ phase[c] = "held" /\ ~auto_renew[c] /\ ~extend_in_flight[c]
    /\ \E t \in {TTLOf(c), ShortTTL} :
        /\ net' = net \cup {[Request(c, "extend") EXCEPT !.val = t]}
        /\ extend_ttl' = [extend_ttl EXCEPT ![c] = t]
        /\ deadline_in' = [deadline_in EXCEPT ![c] = Min(@, LeaseOf(t, 0))]
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = TRUE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, lost,
                   granted, auto_renew, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.extend_reply: 1 moves the deadline from the send time; 0 fires *)
(* the signal while the handle is held.                                   *)
ExtendReply(c) ==
    /\ extend_in_flight[c]
    /\ \E m \in net :
        /\ Mine(m, c, "extend") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ IF m.val = 1
           THEN /\ deadline_in' = [deadline_in EXCEPT ![c] =
                                     IF lost[c] \/ phase[c] # "held" THEN @
                                     ELSE Max(@, LeaseOf(Confirmed(c, extend_ttl[c]),
                                                         extend_sent_ago[c]))]
                /\ UNCHANGED <<lost, wiped>>
           ELSE /\ lost' = [lost EXCEPT ![c] = @ \/ phase[c] = "held"]
                /\ Told(c)
                /\ UNCHANGED deadline_in
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ extend_ttl' = [extend_ttl EXCEPT ![c] = TTLOf(c)]
    /\ UNCHANGED <<phase, outcome, retries_left, token, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, granted, auto_renew, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED <<overlap, oks, late, own_ttl, foreign, freed>>

(* Section.extend_fail: the error goes to the caller; no loss.  The extend *)
(* may still run later: its TTL joins the ones a confirmation counts with. *)
ExtendFail(c) ==
    /\ extend_in_flight[c]
    /\ NoAnswer(c, "extend")
    /\ net' = DropErrors(c, "extend")
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ unconfirmed_ttl' = [unconfirmed_ttl EXCEPT ![c] = Min(@, extend_ttl[c])]
    /\ extend_ttl' = [extend_ttl EXCEPT ![c] = TTLOf(c)]
    /\ UNCHANGED <<phase, outcome, retries_left, token, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, lost, granted, auto_renew>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.body_done: the completion-time check in the same turn. *)
BodyDone(c) ==
    /\ phase[c] = "held" /\ auto_renew[c]
    /\ phase' = [phase EXCEPT ![c] = "body_done"]
    /\ lost' = [lost EXCEPT ![c] =
                  @ \/ (deadline_in[c] = 0 /\ Mutant # "no_completion_check")]
    /\ late' = [late EXCEPT ![c] = deadline_in[c] = 0]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<outcome, retries_left, token, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<drift, perm_ttl, key_ttl, released, faults, dead, net>>
    /\ UNCHANGED <<overlap, oks, own_ttl, foreign, freed, wiped>>

(* Section.release: the token-checked release of our permit. *)
Release(c) ==
    /\ \/ phase[c] = "held" /\ ~auto_renew[c]
       \/ phase[c] = "held" /\ auto_renew[c] /\ lost[c]
       \/ phase[c] = "held" /\ auto_renew[c] /\ EarlyRelease
       \/ phase[c] \in {"body_done", "abandoned", "release_unknown"}
    /\ net' = net \cup {Request(c, "release")}
    /\ phase' = [phase EXCEPT ![c] = "releasing"]
    /\ UNCHANGED <<outcome, retries_left, token, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, lost, granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* A section abandoned before any grant: its release is a cleanup and it  *)
(* ends failed whatever the reply (SemaphoreSection._abandoned: the Lock  *)
(* tests fence = 0, a permit has no fence and keeps "granted" instead).   *)
Abandoned(c) == ~granted[c]

(* The overlap ghosts keep only what NoOverlapAboveLimit reads: a section *)
(* that ends other than ok leaves every overlap set (fewer states, the    *)
(* same verdicts), and a finished section's own set moves into oks.       *)
Finish(c, result) ==
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = result]
    /\ lost' = [lost EXCEPT ![c] = @ \/ result = "lost"]
    /\ IF result = "ok"
       THEN /\ oks' = oks \cup {[tok |-> token[c], overlap |-> overlap[c]]}
            /\ overlap' = [overlap EXCEPT ![c] = {}]
       ELSE /\ oks' = {[r EXCEPT !.overlap = @ \ {token[c]}] : r \in oks}
            /\ overlap' = [d \in Clients |-> IF d = c THEN {} ELSE overlap[d] \ {token[c]}]

(* Section.release_reply: 1 with no loss recorded is the only success. *)
ReleaseReply(c) ==
    /\ phase[c] = "releasing"
    /\ \E m \in net :
        /\ Mine(m, c, "release") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ Finish(c, IF Abandoned(c) THEN "failed"
                     ELSE IF (m.val = 1 \/ Mutant = "ignore_release_reply") /\ ~lost[c]
                     THEN "ok" ELSE "lost")
    /\ UNCHANGED <<retries_left, token, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago,
                   granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED <<late, own_ttl, foreign, freed, wiped>>

(* Section.release_fail: an error, or no reply before the timeout. *)
ReleaseFail(c) ==
    /\ phase[c] = "releasing"
    /\ NoAnswer(c, "release")
    /\ net' = DropErrors(c, "release")
    /\ IF ~auto_renew[c] /\ ~Abandoned(c)
       THEN /\ phase' = [phase EXCEPT ![c] = "release_unknown"]
            /\ UNCHANGED <<outcome, lost, oks, overlap>>
       ELSE Finish(c, IF Abandoned(c) THEN "failed" ELSE "lost")
    /\ UNCHANGED <<retries_left, token, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago,
                   granted, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED <<late, own_ttl, foreign, freed, wiped>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Environment actions: the world, not the core.                          *)
(***************************************************************************)

(* Is anyone still waiting for the reply to m?  (Not a dead client.) *)
Awaited(m) ==
    LET c == m.tok[1] IN
    /\ m.tok = token[c] /\ c \notin dead
    /\ CASE m.kind = "acquire" -> phase[c] = "acquiring"
         [] m.kind = "release" -> phase[c] = "releasing"
         [] m.kind = "renew"   -> renew_in_flight[c]
         [] OTHER              -> extend_in_flight[c]

(* A due timer fires before time moves on (unless starved); a dead        *)
(* client's timers never fire again.                                      *)
TimerDue(c) ==
    /\ c \notin dead
    /\ \/ RenewSendEnabled(c)
       \/ LeaseTimeoutEnabled(c)
       \/ phase[c] \in {"body_done", "abandoned"}

MayLag == {c \in Clients \ dead : drift[c] < MaxDrift
                                  /\ phase[c] \in {"acquiring", "held", "body_done"}}

(* Time advances one unit.  Every permit's score comes one unit closer on *)
(* Redis's clock, and one whose score is reached stops counting (the      *)
(* scripts' eviction and "score > now" checks); when the key's own expiry *)
(* is reached, the key and every permit in it are gone.  Client countdowns *)
(* move as in DistLock.tla, except on a lagging client clock.             *)
Tick ==
    /\ \A c \in Clients : ~TimerDue(c)
    /\ \E lag \in SUBSET MayLag :
        /\ drift' = [c \in Clients |-> IF c \in lag THEN drift[c] + 1 ELSE drift[c]]
        /\ deadline_in' = [c \in Clients |->
                             IF phase[c] # "held" THEN 0
                             ELSE IF c \in lag THEN deadline_in[c] ELSE Dec(deadline_in[c])]
        /\ next_renew_in' = [c \in Clients |->
                               IF phase[c] # "held" \/ ~auto_renew[c] THEN 0
                               ELSE IF c \in lag THEN next_renew_in[c]
                               ELSE Dec(next_renew_in[c])]
        /\ sent_ago' = [c \in Clients |->
                          IF phase[c] # "acquiring" THEN 0
                          ELSE IF c \in lag THEN sent_ago[c]
                          ELSE Min(sent_ago[c] + 1, AgeCapOf(c))]
        /\ renew_sent_ago' = [c \in Clients |->
                                IF ~renew_in_flight[c] \/ phase[c] # "held" THEN 0
                                ELSE IF c \in lag THEN renew_sent_ago[c]
                                ELSE Min(renew_sent_ago[c] + 1, AgeCapOf(c))]
        /\ extend_sent_ago' = [c \in Clients |->
                                 IF ~extend_in_flight[c] \/ phase[c] # "held" THEN 0
                                 ELSE IF c \in lag THEN extend_sent_ago[c]
                                 ELSE Min(extend_sent_ago[c] + 1, AgeCapOf(c))]
    \* the key itself expires (PEXPIREAT): every permit in it goes with it
    /\ key_ttl' = Dec(key_ttl)
    /\ perm_ttl' = [t \in Tokens |-> IF key_ttl > 1 THEN Dec(perm_ttl[t]) ELSE 0]
    /\ own_ttl' = [t \in Tokens |->
                     IF perm_ttl[t] > 1 /\ key_ttl > 1 THEN Dec(own_ttl[t]) ELSE 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, renew_in_flight, lost, granted,
                   extend_in_flight, auto_renew, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, released, faults, dead, net>>
    /\ UNCHANGED <<overlap, oks, late, foreign, wiped, freed>>

Answer(m, v) ==
    net' = (net \ {m}) \cup (IF Awaited(m) /\ m.st = "sent"
                            THEN {[m EXCEPT !.st = "done", !.val = v]} ELSE {})

(* The permits after a script scores token t at now + n: ZADD t.  In the *)
(* broken shared_ttl (a set of tokens under the key's one TTL) PEXPIRE n  *)
(* is every member's expiry.                                              *)
Scored(base, t, n) ==
    [x \in Tokens |-> IF x = t THEN n
                     ELSE IF Mutant = "shared_ttl" /\ base[x] > 0 THEN n
                     ELSE base[x]]

(* The key's PTTL after a script that wrote the permits `after` ends with *)
(* expire_at_last (PEXPIREAT the key at its highest score): the latest    *)
(* permit's countdown, and 0 (no key) when none is left (Redis deletes an *)
(* empty sorted set).                                                     *)
LastExpiry(after) ==
    LET s == {after[x] : x \in Tokens} IN CHOOSE v \in s : \A w \in s : w <= v

(* The ghost: each live permit's own expiry, set by its own writes only. *)
OwnAfter(after, t, wrote, n) ==
    [x \in Tokens |-> IF after[x] = 0 THEN 0
                     ELSE IF wrote /\ x = t THEN n ELSE own_ttl[x]]

(* Some live permit of another token was re-scored or removed. *)
Foreign(after, t) == foreign \/ \E x \in Live \ {t} : after[x] # perm_ttl[x]

(* The permits the acquire script keeps after its eviction: those whose   *)
(* score is after now.  The broken variant expiry_by_client_clock takes   *)
(* "now" from a client clock Skew ahead of Redis's.                       *)
Kept == IF Mutant = "expiry_by_client_clock" THEN {t \in Live : perm_ttl[t] > Skew}
        ELSE Live

(* Redis runs one request atomically (scripts see time frozen) and queues *)
(* its reply.  Requests run in any order (separate connections).          *)
RedisStep(m) ==
    /\ m \in net /\ m.st \in {"sent", "hung"}
    /\ CASE m.kind = "acquire" ->
              \* Our own live token (a resent acquire that already ran) is
              \* granted whatever the count: the script re-scores it.  The broken
              \* acquire_not_idempotent counts it against the limit like any other
              \* permit, and refuses the resend while keeping the permit.
              LET base  == [x \in Tokens |-> IF x \in Kept THEN perm_ttl[x] ELSE 0]
                  mine  == m.tok \in Kept /\ Mutant # "acquire_not_idempotent"
                  grant == mine \/ Cardinality(Kept) < Limit
                  after == IF grant THEN Scored(base, m.tok, TTLOf(m.tok[1])) ELSE base
              IN /\ perm_ttl' = after
                 /\ key_ttl' = IF grant THEN LastExpiry(after) ELSE key_ttl
                 /\ own_ttl' = OwnAfter(after, m.tok, grant, TTLOf(m.tok[1]))
                 /\ foreign' = Foreign(after, m.tok)
                 /\ Answer(m, IF grant THEN 1 ELSE 0)
                 /\ UNCHANGED <<released, freed>>
         [] m.kind \in {"renew", "extend"} ->
              \* renew and extend are one script: the extend carries its TTL.  The
              \* broken renew_keeps_key_expiry re-scores the permit but leaves the
              \* key's own expiry where the last grant put it.
              LET n     == IF m.kind = "extend" THEN m.val ELSE TTLOf(m.tok[1])
                  hit   == perm_ttl[m.tok] > 0 \/ Mutant = "renew_without_membership_check"
                  after == IF hit THEN Scored(perm_ttl, m.tok, n) ELSE perm_ttl
              IN /\ perm_ttl' = after
                 /\ key_ttl' = IF hit /\ Mutant # "renew_keeps_key_expiry"
                               THEN LastExpiry(after) ELSE key_ttl
                 /\ own_ttl' = OwnAfter(after, m.tok, hit, n)
                 /\ foreign' = Foreign(after, m.tok)
                 /\ Answer(m, IF hit THEN 1 ELSE 0)
                 /\ UNCHANGED <<released, freed>>
         [] m.kind = "release" ->
              \* Our token if it is a live permit (ZREM), then the key's expiry at
              \* the latest permit left, and our token in the release memory (a
              \* sorted set of tokens beside the key).  A release of a permit no
              \* longer live is answered 1 if the memory holds our token (a resend
              \* of a release that ran).  The broken variant release_any_permit frees
              \* the permit closest to expiry (ZPOPMIN), as if permits were
              \* interchangeable; release_memory_any_token answers 1 if the memory
              \* holds any token; release_memory_last_only keeps only the last
              \* releaser's token (one record per key, overwritten).
              LET popped  == {v \in Live : \A x \in Live : perm_ttl[v] <= perm_ttl[x]}
                  victims == IF Mutant = "release_any_permit" /\ popped # {} THEN popped
                             ELSE {m.tok}
              IN \E v \in victims :
                   LET hit   == perm_ttl[v] > 0
                       after == [perm_ttl EXCEPT ![v] = 0]
                       again == IF Mutant = "release_memory_any_token" THEN released # {}
                                ELSE m.tok \in released
                       \* (kept only where a release can be sent twice, as in DistLock.tla)
                       kept  == hit /\ v = m.tok /\ (ResendReleases \/ Manual)
                   IN /\ perm_ttl' = after
                      /\ key_ttl' = IF hit THEN LastExpiry(after) ELSE key_ttl
                      /\ own_ttl' = OwnAfter(after, m.tok, FALSE, 0)
                      /\ foreign' = Foreign(after, m.tok)
                      /\ released' = IF ~kept THEN released
                                     ELSE IF Mutant = "release_memory_last_only"
                                     THEN {m.tok} ELSE released \cup {m.tok}
                      /\ freed' = IF kept THEN freed \cup {m.tok} ELSE freed
                      /\ Answer(m, IF hit \/ again THEN 1 ELSE 0)
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, faults, dead>>
    /\ UNCHANGED <<overlap, oks, late, wiped>>

Fault(kind) == /\ faults < MaxFaults /\ kind \in FaultKinds
               /\ faults' = faults + 1

(* The connection fails: the request is lost, or it ran and its reply is  *)
(* lost; or a renewal's socket timeout fires while it waits at Redis and  *)
(* it runs later (kept as "hung").                                        *)
DropReply(m) ==
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m)
    /\ Fault("drop")
    /\ \E queued \in IF m.st = "sent" /\ m.kind = "renew" THEN BOOLEAN ELSE {FALSE} :
        net' = (net \ {m}) \cup {[m EXCEPT !.st = "error"]}
                            \cup (IF queued THEN {[m EXCEPT !.st = "hung"]} ELSE {})
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, dead>>
    /\ UNCHANGED ghost_vars

(* The reply never comes and no error is raised (a hung connection). *)
HangReply(m) ==
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m)
    /\ Fault("hang")
    /\ net' = IF m.st = "sent" THEN (net \ {m}) \cup {[m EXCEPT !.st = "hung"]}
              ELSE net \ {m}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, dead>>
    /\ UNCHANGED ghost_vars

(* The client library resends an acquire whose reply was lost: it runs    *)
(* again and finds our own token (or the permit gone and takes another).  *)
Resend(m) ==
    /\ m \in net /\ m.kind = "acquire" /\ m.st = "done" /\ Awaited(m)
    /\ Fault("resend")
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "sent", !.val = 0]}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, dead>>
    /\ UNCHANGED ghost_vars

(* The client library resends a release whose reply was lost (not a fault). *)
ResendRelease(m) ==
    /\ ResendReleases
    /\ m \in net /\ m.kind = "release" /\ m.st = "done" /\ Awaited(m)
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "sent", !.val = 0]}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Redis restarts empty (no persistence) or fails over to a replica that  *)
(* had not seen the key: every permit is gone; the release memory may go. *)
KeyLost ==
    /\ Live # {}
    /\ Fault("key_lost")
    /\ perm_ttl' = [t \in Tokens |-> 0]
    /\ key_ttl' = 0
    /\ own_ttl' = [t \in Tokens |-> 0]
    /\ released' \in {released, {}}
    \* a release answered 0 once Redis forgot it is Redis's loss, not the script's
    /\ freed' = IF released' = {} THEN {} ELSE freed
    /\ wiped' = [c \in Clients |-> wiped[c] \/ perm_ttl[token[c]] > 0]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, dead, net>>
    /\ UNCHANGED <<overlap, oks, late, foreign>>

(* The body blocks the event loop until it finishes. *)
Starve(c) ==
    /\ c \notin dead
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~starved[c]
    /\ Fault("starve")
    /\ starved' = [starved EXCEPT ![c] = TRUE]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<drift, perm_ttl, key_ttl, released, dead, net>>
    /\ UNCHANGED ghost_vars

(* The client process is killed (SIGKILL) during a section: it takes no   *)
(* step again and never releases; requests it sent may still run.  Its    *)
(* permit must stop counting once its own expiry passes.                  *)
Die(c) ==
    /\ c \notin dead /\ phase[c] \notin {"idle", "done"}
    /\ Fault("die")
    /\ dead' = dead \cup {c}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, perm_ttl, key_ttl, released, net>>
    /\ UNCHANGED ghost_vars

(* The caller starts another section (a fresh Section, a fresh token). *)
NewSection(c) ==
    /\ c \notin dead
    /\ phase[c] = "done" /\ token[c][2] < MaxRounds
    /\ phase' = [phase EXCEPT ![c] = "idle"]
    /\ outcome' = [outcome EXCEPT ![c] = "none"]
    /\ retries_left' = [retries_left EXCEPT ![c] = Retries]
    /\ token' = [token EXCEPT ![c] = <<c, @[2] + 1>>]
    /\ deadline_in' = [deadline_in EXCEPT ![c] = 0]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ next_renew_in' = [next_renew_in EXCEPT ![c] = 0]
    /\ lost' = [lost EXCEPT ![c] = FALSE]
    /\ granted' = [granted EXCEPT ![c] = FALSE]
    /\ \E mode \in Modes : auto_renew' = [auto_renew EXCEPT ![c] = mode]
    /\ extend_ttl' = [extend_ttl EXCEPT ![c] = TTLOf(c)]
    /\ unconfirmed_ttl' = [unconfirmed_ttl EXCEPT ![c] = TTLOf(c)]
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ drift' = [drift EXCEPT ![c] = 0]
    /\ net' = {m \in net : m.tok # token[c] \/ m.st \in {"sent", "hung"}}
    /\ overlap' = [overlap EXCEPT ![c] = {}]
    /\ late' = [late EXCEPT ![c] = FALSE]
    /\ wiped' = [wiped EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<perm_ttl, key_ttl, released, faults, dead, oks, own_ttl, foreign, freed>>

-----------------------------------------------------------------------------
(* Every client action (the Lock's, one by one: tests/test_parity.py reads *)
(* both lists) and every environment action.                              *)
ClientStep(c) ==
    \/ Acquire(c)
    \/ AcquireReply(c)
    \/ AcquireFail(c)
    \/ RenewSend(c)
    \/ RenewReply(c)
    \/ RenewFail(c)
    \/ LeaseTimeout(c)
    \/ Extend(c)
    \/ ExtendReply(c)
    \/ ExtendFail(c)
    \/ BodyDone(c)
    \/ Release(c)
    \/ ReleaseReply(c)
    \/ ReleaseFail(c)

EnvStep ==
    \/ Tick
    \/ \E m \in net : RedisStep(m)
    \/ \E m \in net : DropReply(m)
    \/ \E m \in net : HangReply(m)
    \/ \E m \in net : Resend(m)
    \/ \E m \in net : ResendRelease(m)
    \/ KeyLost
    \/ \E c \in Clients : Starve(c)
    \/ \E c \in Clients : Die(c)
    \/ \E c \in Clients : NewSection(c)

Next == (\E c \in Clients \ dead : ClientStep(c)) \/ EnvStep

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(***************************************************************************)
(* Properties                                                             *)
(***************************************************************************)

TypeOK ==
    /\ phase \in [Clients -> Phases]
    /\ outcome \in [Clients -> Outcomes]
    /\ retries_left \in [Clients -> 0..Retries]
    /\ token \in [Clients -> Tokens] /\ \A c \in Clients : token[c][1] = c
    /\ deadline_in \in [Clients -> 0..LongestTTL]
    /\ sent_ago \in [Clients -> 0..AgeCap]
    /\ renew_in_flight \in [Clients -> BOOLEAN]
    /\ renew_sent_ago \in [Clients -> 0..AgeCap]
    /\ next_renew_in \in [Clients -> 0..Heartbeat]
    /\ extend_in_flight \in [Clients -> BOOLEAN]
    /\ extend_sent_ago \in [Clients -> 0..AgeCap]
    /\ lost \in [Clients -> BOOLEAN]
    /\ granted \in [Clients -> BOOLEAN]
    /\ auto_renew \in [Clients -> BOOLEAN]
    /\ \A c \in Clients : extend_ttl[c] \in {TTLOf(c), ShortTTL}
    /\ \A c \in Clients : unconfirmed_ttl[c] \in {TTLOf(c), ShortTTL}
    /\ starved \in [Clients -> BOOLEAN]
    /\ drift \in [Clients -> 0..MaxDrift]
    /\ perm_ttl \in [Tokens -> 0..LongestTTL]
    /\ key_ttl \in 0..LongestTTL
    /\ released \subseteq Tokens /\ freed \subseteq Tokens
    /\ dead \subseteq Clients
    /\ net \subseteq Message

(* Never more than Limit sections that finished ok were in their bodies   *)
(* at the same time.  (A body is one stretch of time, so sections that    *)
(* overlap pairwise were all in their bodies at one instant.)  No clock   *)
(* assumption; holds when Redis loses every permit.                       *)
NoOverlapAboveLimit ==
    \A S \in SUBSET oks :
        Cardinality(S) > Limit => \E a, b \in S : a # b /\ a.tok \notin b.overlap

(* Redis never holds more than Limit live permits on the id: an acquire    *)
(* grants only below the limit, and nothing else adds a permit.           *)
LiveWithinLimit == Cardinality(Live) <= Limit

(* Sections that hold their permit as far as they can tell: the signal    *)
(* has not fired, the lease is valid on their own clock, and Redis has not *)
(* lost their permit unbeknown to them.                                   *)
Believes(c) ==
    phase[c] \in {"held", "body_done"} /\ ~lost[c] /\ deadline_in[c] > 0 /\ ~wiped[c]

(* Never more than Limit sections believe they hold a permit at once: a   *)
(* body that runs with a valid, unsignalled lease is one of at most Limit. *)
(* (Needs the drift bound, as SignalSound does, which it builds on.)      *)
ValidPermitsWithinLimit == Cardinality({c \in Clients : Believes(c)}) <= Limit

(* No script renews, re-scores or removes a live permit of another token. *)
NoForeignWrite == ~foreign

(* A permit counts against the limit only until the expiry its own       *)
(* holder's last write set, on Redis's clock: a dead holder's permit is   *)
(* reclaimed once its own TTL passes, whoever else renews.               *)
ReclaimedAtOwnExpiry == \A t \in Tokens : perm_ttl[t] > 0 => own_ttl[t] > 0

(* While the signal has not fired and the client clock says the lease is  *)
(* valid, Redis holds the permit (unless Redis lost it and no reply has   *)
(* told the client so since).                                             *)
SignalSound == \A c \in Clients : Believes(c) => perm_ttl[token[c]] > 0

(* A run/hold section reported ok finished its body within its lease. *)
OkWithinLease == \A c \in Clients : (outcome[c] = "ok" /\ auto_renew[c]) => ~late[c]

(* A section told "no free permit" holds none: a resent acquire of a      *)
(* permit it was already granted is granted again, not refused with the   *)
(* permit left behind (it would count against the limit for a whole TTL, *)
(* held by nobody).                                                       *)
RefusalHoldsNothing ==
    \A c \in Clients :
        (phase[c] = "backoff" \/ outcome[c] = "not_acquired") => perm_ttl[token[c]] = 0

(* A release whose token's release removed its live permit is answered 1, *)
(* whoever acquired and released in between (the release memory is per   *)
(* token), unless Redis has lost the memory since: a resent release is    *)
(* never reported as a lost permit.  Meaningful where a release can be    *)
(* sent twice (ResendReleases, Manual), where the memory is kept.         *)
NoSpuriousReleaseLoss ==
    \A m \in net : (m.kind = "release" /\ m.st = "done" /\ m.tok \in freed) => m.val = 1

(***************************************************************************)
(* Reachability probes: invariants TLC must VIOLATE.                      *)
(***************************************************************************)
\* Limit sections in their bodies at once, none known lost
ProbeLimitInBody ==
    Cardinality({c \in Clients : InBody(c) /\ ~lost[c] /\ c \notin dead}) < Limit
\* a holder killed while holding; its permit expired and another holds a valid one
ProbeDeadReclaimed ==
    ~\E c, d \in Clients :
        /\ c # d /\ c \in dead /\ granted[c] /\ phase[c] \in {"held", "body_done"}
        /\ InBody(d) /\ d \notin dead /\ ~lost[d] /\ deadline_in[d] > 0

Symmetry == Permutations(Clients)

(* States that differ only in the overlap ghosts (read by no action and by *)
(* no property but NoOverlapAboveLimit) are one state, in a model that     *)
(* does not check that property.                                          *)
NoOverlapView == <<client_vars, env_vars, late, own_ttl, foreign, wiped, freed>>

=============================================================================
