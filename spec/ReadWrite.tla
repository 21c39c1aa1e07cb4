------------------------------ MODULE ReadWrite ------------------------------
(***************************************************************************)
(* The read-write lock on the lease engine: ReadWriteLock(client, prefix), *)
(* whose .read and .write are lock-like (acquire / hold / run, fail-fast  *)
(* by default or waiting with wait_ms, retries).  Written before the code. *)
(*                                                                         *)
(* Each client runs one section at a time; a section has a role, "read"  *)
(* or "write" (role[c]), and takes exactly the Lock's client actions and  *)
(* guards (Acquire ... ReleaseFail, one per distlock._core.section.Section *)
(* method, as in DistLock.tla and Semaphore.tla), plus Withdraw (a waiter  *)
(* giving up, Wait.tla's withdraw) and Upgrade (a reader asking for the    *)
(* write lock on the key it reads: refused).                              *)
(*                                                                         *)
(* Redis data, all under one hash tag {k} (one slot, for Cluster):        *)
(*   rw:{k}:readers  sorted set, member = a reader's token, score = its   *)
(*                   expiry instant on REDIS's clock (TIME in the script); *)
(*                   PEXPIREAT at its highest score.  Each reader's lease  *)
(*                   is its own (rd_ttl[t]), as each semaphore permit is.  *)
(*   rw:{k}:writer   hash {token, fence}, PEXPIRE ttl: the writer's lease  *)
(*                   (wtok, w_ttl, wfence).                               *)
(*   rw:{k}:queue    list of the waiters' tokens in arrival order, and    *)
(*   rw:{k}:places   hash token -> "role:expiry": each waiter's place and  *)
(*                   when it ends (queue, place[t]).                      *)
(*   distlock:fence:{k}  the fence counter (fence_ctr).                   *)
(* The scripts are the cases of RedisStep, each one atomic step:          *)
(*   RW_ACQUIRE  read:  our own live member (a resent acquire) is re-scored *)
(*                      and granted; else granted iff no live writer and  *)
(*                      no live WRITER place ahead of ours (all places,    *)
(*                      for an attempt that has none): ZADD, PEXPIREAT,   *)
(*                      drop our place; the reply carries the counter as  *)
(*                      it stands (GET: the fence of the last write        *)
(*                      granted, 0 before any): readers get the current   *)
(*                      fence, never a new one.                          *)
(*               write: our own token in the writer hash (a resent        *)
(*                      acquire) is granted again, PEXPIRE ttl, its fence *)
(*                      unchanged; else granted iff no live writer, no    *)
(*                      live reader and no live place ahead of ours: INCR  *)
(*                      the counter, HSET token fence, PEXPIRE, drop our  *)
(*                      place.  A fence larger than every fence issued    *)
(*                      before on the key, to writers and readers.        *)
(*               refused, a waiting attempt keeps (or takes, at the tail)  *)
(*                      its place, which now ends PlaceTTL from now.      *)
(*   RW_RENEW    read: ZADD XX if our token is a live member, PEXPIREAT;  *)
(*   /extend     write: PEXPIRE if the writer hash holds our token.       *)
(*   RW_RELEASE  read: ZREM our token if live; write: DEL the writer hash  *)
(*               if it holds our token; either way drop our place (the   *)
(*               cleanup of a waiter whose attempt got no answer).  1 iff *)
(*               our lease was removed.                                   *)
(*   RW_LEAVE    a waiter's withdrawal: drop our place.                   *)
(* Expired readers and places count for nothing in any script (evicted    *)
(* first, or checked score > now), so the spec drops them on the Tick     *)
(* their time passes, as Semaphore.tla does.                             *)
(*                                                                         *)
(* Waiting is modelled by its queue and its places, not by its wake-ups:  *)
(* a refused waiter's next attempt (the core's Acquire after a block) may *)
(* come at any time and must come before its place ends (the block never  *)
(* outlasts the place: TimerDue).  Wait.tla checks the wake lists and the *)
(* BLPOP; a release here wakes nobody, the waiters re-check (a semaphore's *)
(* waiters, Wait.tla's WakeUps, are woken the same way: then they attempt).*)
(*                                                                         *)
(* Time without a clock, as in DistLock.tla and Semaphore.tla.  Faults,   *)
(* at most MaxFaults per behaviour: dropped, hung and resent requests, a   *)
(* starved body, a client killed mid-section (SIGKILL: it sends nothing   *)
(* more, its lease must end at its own TTL), and client clocks lagging by *)
(* up to MaxDrift <= Margin.  Redis losing the keys (a restart) is not    *)
(* modelled here: see spec/README.md.                                      *)
(*                                                                         *)
(* Mutant names a deliberately broken variant ("none" for the real thing). *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Clients,    \* client processes (model values)
    MaxRounds,  \* sections per client in one behaviour
    Retries,    \* retries_left at the start of a fail-fast section
    TTL,        \* lease length of a reader's or the writer's lease
    Heartbeat,  \* renewal period of run/hold sections
    Margin,     \* clock-drift allowance subtracted from every deadline
    MaxDrift,   \* how far a client clock may lag real time during one section
    MaxFaults,  \* faults (drop, hang, resend, starvation, death) in one behaviour
    Manual,     \* TRUE: sections may be manual handles (acquire/extend/release)
    Mutant      \* "none" or the name of a broken variant

Mutants == {"none",
            \* one per property the design names
            "write_ignores_readers", "shared_ttl", "write_fence_after_readers",
            "resend_reuses_fence",
            "reader_preference", "upgrade_allowed",
            \* the Lock's and the semaphore's properties, broken through these scripts
            "release_plain_del", "deadline_from_reply", "no_completion_check",
            "acquire_not_idempotent"}

(* Options a cfg turns on by overriding the definition, as in DistLock.tla. *)
Writers == {}          \* clients whose sections write (the others read)
RolesOf(c) == IF c \in Writers THEN {"write"} ELSE {"read"}
Waiters == {}          \* clients whose sections wait (wait_ms); the others fail fast
(* Patient waiters: their wait outlasts the behaviour (they never withdraw) *)
(* and their round trips fit in their place's grace: no tick passes while  *)
(* an attempt of theirs, or its refusal, is in flight (Wait.tla's own      *)
(* reading).  The liveness runs use them.                                 *)
Patient == {}
Upgraders == {}        \* clients whose read sections ask for the write lock
PlaceTTL == 2          \* a place's life after the attempt that (re)set it
(* Clients whose sections keep coming: NewSection takes tokens 1 and 2 in *)
(* turn, forever (the liveness runs' stream of readers); a token is taken *)
(* again only when nothing of its previous section is left anywhere.      *)
Stream == {}
FaultKinds == {"drop", "hang", "resend", "starve", "die"}

ASSUME
    /\ Mutant \in Mutants
    /\ TTL \in Nat \ {0} /\ Heartbeat \in Nat \ {0} /\ Margin \in Nat /\ Margin < TTL
    /\ 2 * Heartbeat <= TTL
    /\ MaxDrift <= Margin
    /\ MaxRounds \in Nat \ {0} /\ Retries \in Nat /\ MaxFaults \in Nat
    /\ Writers \subseteq Clients /\ Waiters \subseteq Clients
    /\ Patient \subseteq Waiters /\ Upgraders \subseteq Clients
    /\ Stream \subseteq Clients /\ (Stream # {} => MaxRounds <= 2)
    /\ \A c \in Clients : RolesOf(c) \subseteq {"read", "write"} /\ RolesOf(c) # {}
    /\ PlaceTTL \in Nat \ {0, 1}
    /\ FaultKinds \subseteq {"drop", "hang", "resend", "starve", "die"}

Phases   == {"idle", "acquiring", "backoff", "waiting", "held", "body_done", "abandoned",
             "releasing", "release_unknown", "done"}
Outcomes == {"none", "ok", "not_acquired", "lost", "failed"}
Kinds    == {"acquire", "renew", "extend", "release", "leave", "upgrade"}
Roles    == {"read", "write"}
(* Stream clients take tokens 1 and 2 in turn, whatever MaxRounds. *)
Rounds   == IF Stream = {} \/ MaxRounds > 1 THEN MaxRounds ELSE 2
Tokens   == Clients \X (1..Rounds)
None     == <<>>

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b
Dec(x)    == IF x > 0 THEN x - 1 ELSE 0

AgeCap == Max(TTL - Margin, Heartbeat)

(* The largest fence a model can issue: one per write grant. *)
MaxFence == Cardinality(Tokens) + 1

VARIABLES
    \* ---- client side: one section per client (names follow distlock.core) ----
    phase,            \* Section.phase ("waiting": refused, holding a place in the queue)
    outcome,          \* Section.outcome
    retries_left,     \* Section.retries_left
    token,            \* Section.token: <<client, section number>>, unique per section
    role,             \* the section's role: "read" or "write"
    waits,            \* the section waits (wait_ms): a refusal leaves it queued
    fence,            \* Section.fence: the writer's new fence, a reader's current one
    deadline_in,      \* Section.deadline - now (client clock), floored at 0
    sent_ago,         \* now - sent_at of the acquire in flight (0 when none)
    renew_in_flight,  \* Section.renew_in_flight
    renew_sent_ago,   \* now - Section.renew_sent_at while renew_in_flight (else 0)
    next_renew_in,    \* Section.next_renew_at - now, floored at 0
    extend_in_flight, \* Section.extend_in_flight (manual extend)
    extend_sent_ago,  \* now - Section.extend_sent_at while extend_in_flight (else 0)
    lost,             \* Section.lost is not None: the lease is known lost
    granted,          \* Redis granted this section's lease
    auto_renew,       \* Section.config.watch: a run/hold section (FALSE: manual handle)
    asked,            \* the reader asked to upgrade (once per section)
    upgraded,         \* upgrade_allowed only: the reader also holds the write lease
    \* ---- environment ----
    starved,          \* the body blocks the client's event loop (timers do not run)
    drift,            \* clock lag accumulated by the client during this section
    rd_ttl,           \* per token: its reader score minus Redis's now (0: no live reader)
    wtok,             \* the writer hash's token (None: no writer)
    w_ttl,            \* the writer hash's PTTL (0: none)
    wfence,           \* the writer hash's fence
    fence_ctr,        \* the fence counter
    queue,            \* the live places in arrival order: [tok, role]
    place,            \* per token: what is left of its place (0: none)
    last_read,        \* write_fence_after_readers only: the last grant was a read's
    faults,           \* faults injected so far
    dead,             \* clients killed (SIGKILL): they take no step any more
    net,              \* requests and replies in flight
    \* ---- ghosts for the properties ----
    overlap,          \* tokens of the sections that were in their body at the same time
    oks,              \* finished sections reported ok: [tok, role, overlap]
    late,             \* the body finished when the client clock said the lease had expired
    own_ttl,          \* per live reader: what is left of the expiry its OWN last write set
    foreign,          \* some script renewed or removed a live lease of another token
    top,              \* the largest fence issued so far, to anyone
    fence_bad,        \* a write grant issued a fence no larger than one issued before
    issued            \* per token: the last fence a write grant issued to it

client_vars == <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                 sent_ago, renew_in_flight, renew_sent_ago, next_renew_in,
                 extend_in_flight, extend_sent_ago, lost, granted, auto_renew, asked,
                 upgraded>>
redis_vars  == <<rd_ttl, wtok, w_ttl, wfence, fence_ctr, queue, place, last_read>>
env_vars    == <<starved, drift, redis_vars, faults, dead, net>>
ghost_vars  == <<overlap, oks, late, own_ttl, foreign, top, fence_bad, issued>>
vars        == <<client_vars, env_vars, ghost_vars>>

LiveReaders == {t \in Tokens : rd_ttl[t] > 0}
WriterLive  == w_ttl > 0

(* run/hold sections, and (Manual) manual handles. *)
Modes == {TRUE} \cup (IF Manual THEN {FALSE} ELSE {})

Message == [tok : Tokens, kind : Kinds, role : Roles, waits : BOOLEAN,
            st : {"sent", "done", "error", "hung"}, val : {0, 1}, fence : 0..MaxFence]

Request(c, k) == [tok |-> token[c], kind |-> k, role |-> role[c], waits |-> waits[c],
                  st |-> "sent", val |-> 0, fence |-> 0]

Mine(m, c, k) == m.tok = token[c] /\ m.kind = k

NoAnswer(c, k) == ~\E m \in net : Mine(m, c, k) /\ m.st \in {"sent", "done"}

DropErrors(c, k) == {m \in net : ~(Mine(m, c, k) /\ m.st = "error")}

(* The lease a grant or renewal gives, on the client clock, from the age  *)
(* of the request: it runs from the SEND time.                            *)
LeaseFrom(ago) ==
    IF Mutant = "deadline_from_reply" THEN TTL - Margin ELSE Max(TTL - Margin - ago, 0)

InBody(c) == phase[c] = "held"

(* The lease Redis holds for c's section: its reader's score, or the      *)
(* writer hash holding its token.                                         *)
LeaseLive(c) ==
    IF role[c] = "read" THEN rd_ttl[token[c]] > 0 ELSE wtok = token[c] /\ WriterLive

Init ==
    /\ phase = [c \in Clients |-> "idle"]
    /\ outcome = [c \in Clients |-> "none"]
    /\ retries_left = [c \in Clients |-> Retries]
    /\ token = [c \in Clients |-> <<c, 1>>]
    /\ role \in {r \in [Clients -> Roles] : \A c \in Clients : r[c] \in RolesOf(c)}
    /\ waits = [c \in Clients |-> c \in Waiters]
    /\ fence = [c \in Clients |-> 0]
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
    /\ asked = [c \in Clients |-> FALSE]
    /\ upgraded = [c \in Clients |-> FALSE]
    /\ starved = [c \in Clients |-> FALSE]
    /\ drift = [c \in Clients |-> 0]
    /\ rd_ttl = [t \in Tokens |-> 0]
    /\ wtok = None
    /\ w_ttl = 0
    /\ wfence = 0
    /\ fence_ctr = 0
    /\ queue = <<>>
    /\ place = [t \in Tokens |-> 0]
    /\ last_read = FALSE
    /\ faults = 0
    /\ dead = {}
    /\ net = {}
    /\ overlap = [c \in Clients |-> {}]
    /\ oks = {}
    /\ late = [c \in Clients |-> FALSE]
    /\ own_ttl = [t \in Tokens |-> 0]
    /\ foreign = FALSE
    /\ top = 0
    /\ fence_bad = FALSE
    /\ issued = [t \in Tokens |-> 0]

-----------------------------------------------------------------------------
(***************************************************************************)
(* Client actions: one per distlock.core.Section method, the Lock's own,  *)
(* whatever the role (the role travels in every request), then Withdraw   *)
(* and Upgrade.                                                            *)
(***************************************************************************)

(* Section.acquire: RW_ACQUIRE with our token, role, TTL and whether we   *)
(* wait.  A waiter's next attempt after its block is this action too.     *)
Acquire(c) ==
    /\ phase[c] \in {"idle", "backoff", "waiting"}
    /\ net' = net \cup {Request(c, "acquire")}
    /\ phase' = [phase EXCEPT ![c] = "acquiring"]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<outcome, retries_left, token, role, waits, fence, deadline_in,
                   renew_in_flight, renew_sent_ago, next_renew_in, lost, extend_in_flight,
                   extend_sent_ago, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.acquire_reply: granted (1, with the fence) or refused (0).  A  *)
(* grant whose lease already ran out on the client clock is known lost at *)
(* once.  A refused waiter waits (its place is in the queue); a refused   *)
(* fail-fast section retries or ends not acquired.                        *)
AcquireReply(c) ==
    /\ phase[c] = "acquiring"
    /\ \E m \in net :
        /\ Mine(m, c, "acquire") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
        /\ IF m.val = 1
           THEN /\ phase' = [phase EXCEPT ![c] = "held"]
                /\ fence' = [fence EXCEPT ![c] = m.fence]
                /\ deadline_in' = [deadline_in EXCEPT ![c] = LeaseFrom(sent_ago[c])]
                /\ next_renew_in' = [next_renew_in EXCEPT ![c] =
                                       IF auto_renew[c] THEN Max(Heartbeat - sent_ago[c], 0)
                                       ELSE 0]
                /\ lost' = [lost EXCEPT ![c] = LeaseFrom(sent_ago[c]) = 0]
                /\ overlap' = [d \in Clients |->
                                 IF d = c THEN {token[e] : e \in {x \in Clients : InBody(x)}}
                                 ELSE IF InBody(d) THEN overlap[d] \cup {token[c]}
                                 ELSE overlap[d]]
                /\ granted' = [granted EXCEPT ![c] = TRUE]
                /\ UNCHANGED <<outcome, retries_left>>
           ELSE /\ UNCHANGED <<fence, deadline_in, next_renew_in, lost, overlap, granted>>
                /\ IF waits[c]
                   THEN /\ phase' = [phase EXCEPT ![c] = "waiting"]
                        /\ UNCHANGED <<outcome, retries_left>>
                   ELSE IF retries_left[c] > 0
                   THEN /\ phase' = [phase EXCEPT ![c] = "backoff"]
                        /\ retries_left' = [retries_left EXCEPT ![c] = @ - 1]
                        /\ UNCHANGED outcome
                   ELSE /\ phase' = [phase EXCEPT ![c] = "done"]
                        /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
                        /\ UNCHANGED retries_left
    /\ UNCHANGED <<token, role, waits, renew_in_flight, renew_sent_ago, extend_in_flight,
                   extend_sent_ago, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED <<oks, late, own_ttl, foreign, top, fence_bad, issued>>

(* Section.acquire_fail: no reply will come (error or timeout).  The      *)
(* acquire may have granted a lease: release it with our token            *)
(* (abandoned); the release drops a waiter's place too.                  *)
AcquireFail(c) ==
    /\ phase[c] = "acquiring"
    /\ NoAnswer(c, "acquire")
    /\ net' = DropErrors(c, "acquire")
    /\ phase' = [phase EXCEPT ![c] = "abandoned"]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<outcome, retries_left, token, role, waits, fence, deadline_in,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, lost, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
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
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, extend_in_flight, extend_sent_ago, lost, granted, auto_renew,
                   asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.renew_reply: 1 moves the deadline to send time + ttl - margin; *)
(* 0 (our lease is gone) is a loss while held.                            *)
RenewReply(c) ==
    /\ renew_in_flight[c] /\ ~starved[c]
    /\ \E m \in net :
        /\ Mine(m, c, "renew") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ IF phase[c] = "held" /\ m.val = 1
           THEN /\ deadline_in' = [deadline_in EXCEPT ![c] =
                                     IF lost[c] THEN @
                                     ELSE Max(@, LeaseFrom(renew_sent_ago[c]))]
                /\ UNCHANGED lost
           ELSE /\ lost' = [lost EXCEPT ![c] = @ \/ phase[c] = "held"]
                /\ UNCHANGED deadline_in
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, sent_ago,
                   next_renew_in, extend_in_flight, extend_sent_ago, granted, auto_renew,
                   asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.renew_fail: a connection error is not a loss. *)
RenewFail(c) ==
    /\ renew_in_flight[c] /\ ~starved[c]
    /\ \E m \in net :
        /\ Mine(m, c, "renew") /\ m.st = "error"
        /\ net' = net \ {m}
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.lease_timeout: a heartbeat tick finds the deadline passed. *)
LeaseTimeoutEnabled(c) ==
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~lost[c] /\ ~starved[c]
    /\ deadline_in[c] = 0

LeaseTimeout(c) ==
    /\ LeaseTimeoutEnabled(c)
    /\ lost' = [lost EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, renew_in_flight, renew_sent_ago, next_renew_in,
                   extend_in_flight, extend_sent_ago, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED ghost_vars

(* Section.extend: manual extend on a handle (the lease's own TTL). *)
Extend(c) ==
    /\ phase[c] = "held" /\ ~auto_renew[c] /\ ~extend_in_flight[c]
    /\ net' = net \cup {Request(c, "extend")}
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = TRUE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, renew_in_flight, renew_sent_ago, next_renew_in, lost,
                   granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
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
                                     ELSE Max(@, LeaseFrom(extend_sent_ago[c]))]
                /\ UNCHANGED lost
           ELSE /\ lost' = [lost EXCEPT ![c] = @ \/ phase[c] = "held"]
                /\ UNCHANGED deadline_in
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, granted, auto_renew,
                   asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.extend_fail: the error goes to the caller; no loss. *)
ExtendFail(c) ==
    /\ extend_in_flight[c]
    /\ NoAnswer(c, "extend")
    /\ net' = DropErrors(c, "extend")
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, renew_in_flight, renew_sent_ago, next_renew_in, lost, granted,
                   auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* Section.body_done: the completion-time check in the same turn. *)
BodyDone(c) ==
    /\ phase[c] = "held" /\ auto_renew[c]
    /\ phase' = [phase EXCEPT ![c] = "body_done"]
    /\ lost' = [lost EXCEPT ![c] =
                  @ \/ (deadline_in[c] = 0 /\ Mutant # "no_completion_check")]
    /\ late' = [late EXCEPT ![c] = deadline_in[c] = 0]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<outcome, retries_left, token, role, waits, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<drift, redis_vars, faults, dead, net>>
    /\ UNCHANGED <<overlap, oks, own_ttl, foreign, top, fence_bad, issued>>

(* Section.release: the token-checked release of our lease. *)
Release(c) ==
    /\ \/ phase[c] = "held" /\ ~auto_renew[c]
       \/ phase[c] = "held" /\ auto_renew[c] /\ lost[c]
       \/ phase[c] \in {"body_done", "abandoned", "release_unknown"}
    /\ net' = net \cup {Request(c, "release")}
    /\ phase' = [phase EXCEPT ![c] = "releasing"]
    /\ UNCHANGED <<outcome, retries_left, token, role, waits, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, lost, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* A section abandoned before any grant: its release is a cleanup and it  *)
(* ends failed whatever the reply.                                        *)
Abandoned(c) == ~granted[c]

(* The overlap ghosts keep only what WriterExclusive reads: a section     *)
(* that ends other than ok leaves every overlap set, and a finished       *)
(* section's own set moves into oks with its role.                        *)
Finish(c, result) ==
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = result]
    /\ lost' = [lost EXCEPT ![c] = @ \/ result = "lost"]
    /\ IF result = "ok"
       THEN /\ oks' = oks \cup {[tok |-> token[c], role |-> role[c], overlap |-> overlap[c]]}
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
                     ELSE IF m.val = 1 /\ ~lost[c] THEN "ok" ELSE "lost")
    /\ UNCHANGED <<retries_left, token, role, waits, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED <<late, own_ttl, foreign, top, fence_bad, issued>>

(* Section.release_fail: an error, or no reply before the timeout. *)
ReleaseFail(c) ==
    /\ phase[c] = "releasing"
    /\ NoAnswer(c, "release")
    /\ net' = DropErrors(c, "release")
    /\ IF ~auto_renew[c] /\ ~Abandoned(c)
       THEN /\ phase' = [phase EXCEPT ![c] = "release_unknown"]
            /\ UNCHANGED <<outcome, lost, oks, overlap>>
       ELSE Finish(c, IF Abandoned(c) THEN "failed" ELSE "lost")
    /\ UNCHANGED <<retries_left, token, role, waits, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED <<late, own_ttl, foreign, top, fence_bad, issued>>

(* Section.withdraw (Wait.tla's): a waiter gives up (its deadline, or a   *)
(* cancellation) between attempts: RW_LEAVE drops its place, and the      *)
(* section ends not acquired at once (nothing was granted: the last       *)
(* attempt was refused).  Its reply changes nothing of the lease and is   *)
(* not awaited; a leave that is lost leaves the place to end by itself.   *)
(* Patient waiters never give up.                                         *)
Withdraw(c) ==
    /\ phase[c] = "waiting" /\ c \notin Patient
    /\ net' = net \cup {Request(c, "leave")}
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
    /\ UNCHANGED <<retries_left, token, role, waits, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, lost, granted, auto_renew, asked, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* ReadWriteLock.write from a holder that holds a read section on the key *)
(* (an upgrade).  Refused at once by the core (UpgradeError): nothing is  *)
(* sent, the read section goes on.  Two readers upgrading would each wait *)
(* for the other's read to end, forever.  The broken upgrade_allowed sends *)
(* RW_ACQUIRE for the write with our read token, which the script grants  *)
(* when no OTHER reader (and no writer) is live: the obvious upgrade.     *)
Upgrade(c) ==
    /\ c \in Upgraders
    /\ phase[c] = "held" /\ role[c] = "read" /\ ~asked[c]
    /\ asked' = [asked EXCEPT ![c] = TRUE]
    /\ net' = IF Mutant = "upgrade_allowed"
              THEN net \cup {[Request(c, "upgrade") EXCEPT !.role = "write"]} ELSE net
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, renew_in_flight, renew_sent_ago, next_renew_in,
                   extend_in_flight, extend_sent_ago, lost, granted, auto_renew, upgraded>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

(* upgrade_allowed only: the upgrade's reply; 1 and the section holds the *)
(* write lease beside its read.                                           *)
UpgradeReply(c) ==
    /\ \E m \in net :
        /\ Mine(m, c, "upgrade") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ upgraded' = [upgraded EXCEPT ![c] = m.val = 1 /\ phase[c] = "held"]
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence, deadline_in,
                   sent_ago, renew_in_flight, renew_sent_ago, next_renew_in,
                   extend_in_flight, extend_sent_ago, lost, granted, auto_renew, asked>>
    /\ UNCHANGED <<starved, drift, redis_vars, faults, dead>>
    /\ UNCHANGED ghost_vars

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
         [] m.kind = "extend"  -> extend_in_flight[c]
         [] m.kind = "upgrade" -> TRUE
         [] OTHER              -> FALSE

(* A due timer fires before time moves on (unless starved); a dead        *)
(* client's timers never fire again.  A waiter's block ends before its    *)
(* place does (its next attempt, or its withdrawal); a patient waiter's   *)
(* attempt and its refusal take no time.                                  *)
TimerDue(c) ==
    /\ c \notin dead
    /\ \/ RenewSendEnabled(c)
       \/ LeaseTimeoutEnabled(c)
       \/ phase[c] \in {"body_done", "abandoned"}
       \/ phase[c] = "waiting" /\ place[token[c]] <= 1
       \/ phase[c] = "acquiring" /\ c \in Patient

MayLag == {c \in Clients \ dead : drift[c] < MaxDrift
                                  /\ phase[c] \in {"acquiring", "held", "body_done"}}

(* Time advances one unit.  Every reader's score, the writer hash's TTL   *)
(* and every place come one unit closer on Redis's clock; whatever has    *)
(* run out is gone.  Client countdowns move as in DistLock.tla, except on *)
(* a lagging client clock.                                                *)
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
                          ELSE Min(sent_ago[c] + 1, AgeCap)]
        /\ renew_sent_ago' = [c \in Clients |->
                                IF ~renew_in_flight[c] \/ phase[c] # "held" THEN 0
                                ELSE IF c \in lag THEN renew_sent_ago[c]
                                ELSE Min(renew_sent_ago[c] + 1, AgeCap)]
        /\ extend_sent_ago' = [c \in Clients |->
                                 IF ~extend_in_flight[c] \/ phase[c] # "held" THEN 0
                                 ELSE IF c \in lag THEN extend_sent_ago[c]
                                 ELSE Min(extend_sent_ago[c] + 1, AgeCap)]
    /\ rd_ttl' = [t \in Tokens |-> Dec(rd_ttl[t])]
    /\ own_ttl' = [t \in Tokens |-> IF rd_ttl[t] > 1 THEN Dec(own_ttl[t]) ELSE 0]
    /\ w_ttl' = Dec(w_ttl)
    /\ wtok' = IF w_ttl > 1 THEN wtok ELSE None
    /\ wfence' = IF w_ttl > 1 THEN wfence ELSE 0
    /\ place' = [t \in Tokens |-> Dec(place[t])]
    /\ queue' = SelectSeq(queue, LAMBDA e : place[e.tok] > 1)
    /\ UNCHANGED <<phase, outcome, retries_left, token, role, waits, fence,
                   renew_in_flight, lost, granted, extend_in_flight, auto_renew, asked,
                   upgraded>>
    /\ UNCHANGED <<starved, fence_ctr, last_read, faults, dead, net>>
    /\ UNCHANGED <<overlap, oks, late, foreign, top, fence_bad, issued>>

Answer(m, v, f) ==
    net' = (net \ {m}) \cup (IF Awaited(m) /\ m.st = "sent"
                            THEN {[m EXCEPT !.st = "done", !.val = v, !.fence = f]} ELSE {})

(* The readers after a script scores token t at now + n: ZADD t.  In the  *)
(* broken shared_ttl (the readers' set under the key's one TTL) PEXPIRE n *)
(* is every reader's expiry.                                              *)
Scored(t, n) ==
    [x \in Tokens |-> IF x = t THEN n
                     ELSE IF Mutant = "shared_ttl" /\ rd_ttl[x] > 0 THEN n
                     ELSE rd_ttl[x]]

(* The ghost: each live reader's own expiry, set by its own writes only. *)
OwnAfter(after, t, wrote, n) ==
    [x \in Tokens |-> IF after[x] = 0 THEN 0
                     ELSE IF wrote /\ x = t THEN n ELSE own_ttl[x]]

(* Some live reader of another token was re-scored or removed. *)
ForeignRead(after, t) == \E x \in LiveReaders \ {t} : after[x] # rd_ttl[x]

(* The queue: t's position, the places ahead of it (every place, for an   *)
(* attempt that holds none), t's place kept or taken at the tail, and the *)
(* queue without t.                                                       *)
Pos(t) == {i \in 1..Len(queue) : queue[i].tok = t}
Ahead(t) == IF Pos(t) = {} THEN {queue[i] : i \in 1..Len(queue)}
            ELSE {queue[i] : i \in 1..((CHOOSE j \in Pos(t) : TRUE) - 1)}
Enqueued(t, r) == IF Pos(t) = {} THEN Append(queue, [tok |-> t, role |-> r]) ELSE queue
Dequeued(t) == SelectSeq(queue, LAMBDA e : e.tok # t)

(* A refused attempt: a waiter keeps (or takes) its place, which ends     *)
(* PlaceTTL from now; a fail-fast attempt leaves the queue as it is.      *)
Refuse(m) ==
    /\ queue' = IF m.waits THEN Enqueued(m.tok, m.role) ELSE queue
    /\ place' = IF m.waits THEN [place EXCEPT ![m.tok] = PlaceTTL] ELSE place
    /\ Answer(m, 0, 0)

(* The write grant: RW_ACQUIRE's INCR.  The broken write_fence_after_readers *)
(* skips it when the last grant was a reader's and hands out the fence the  *)
(* readers were given; the broken resend_reuses_fence keeps a record token  *)
(* -> fence past the grant (for idempotent resends; the ghost issued is     *)
(* that record) and a resend whose first grant expired gets its old fence.  *)
WriteGrant(m) ==
    LET new == IF Mutant = "write_fence_after_readers" /\ last_read /\ fence_ctr > 0
               THEN fence_ctr
               ELSE IF Mutant = "resend_reuses_fence" /\ issued[m.tok] > 0
               THEN issued[m.tok]
               ELSE fence_ctr + 1
    IN /\ fence_ctr' = Max(fence_ctr, new)
       /\ wtok' = m.tok /\ w_ttl' = TTL /\ wfence' = new
       /\ queue' = Dequeued(m.tok) /\ place' = [place EXCEPT ![m.tok] = 0]
       /\ last_read' = FALSE
       /\ top' = Max(top, new)
       /\ fence_bad' = (fence_bad \/ new <= top)
       /\ issued' = [issued EXCEPT ![m.tok] = new]
       /\ Answer(m, 1, new)

(* Redis runs one request atomically (scripts see time frozen) and queues *)
(* its reply.  Requests run in any order (separate connections).          *)
RedisStep(m) ==
    /\ m \in net /\ m.st \in {"sent", "hung"}
    /\ CASE m.kind = "acquire" /\ m.role = "read" ->
              \* RW_ACQUIRE, read: keys readers, writer, queue, places, fence counter.
              \* Our own live member (a resent acquire that ran) is granted again
              \* whatever else holds or waits; the broken acquire_not_idempotent treats
              \* it as a new reader.  The broken reader_preference lets a reader in
              \* past a queued writer.
              LET mine    == rd_ttl[m.tok] > 0 /\ Mutant # "acquire_not_idempotent"
                  blocked == \/ WriterLive
                             \/ Mutant # "reader_preference"
                                /\ \E e \in Ahead(m.tok) : e.role = "write"
              IN IF mine \/ ~blocked
                 THEN LET after == Scored(m.tok, TTL)
                      IN /\ rd_ttl' = after
                         /\ own_ttl' = OwnAfter(after, m.tok, TRUE, TTL)
                         /\ foreign' = (foreign \/ ForeignRead(after, m.tok))
                         /\ queue' = Dequeued(m.tok) /\ place' = [place EXCEPT ![m.tok] = 0]
                         /\ last_read' = (Mutant = "write_fence_after_readers")
                         /\ Answer(m, 1, fence_ctr)
                         /\ UNCHANGED <<wtok, w_ttl, wfence, fence_ctr, top, fence_bad,
                                        issued>>
                 ELSE /\ Refuse(m)
                      /\ UNCHANGED <<rd_ttl, wtok, w_ttl, wfence, fence_ctr, last_read>>
                      /\ UNCHANGED <<own_ttl, foreign, top, fence_bad, issued>>
         [] m.kind \in {"acquire", "upgrade"} /\ m.role = "write" ->
              \* RW_ACQUIRE, write: keys readers, writer, queue, places, fence counter.
              \* Our own token in the writer hash (a resent acquire that ran) is
              \* granted again with its fence; the broken acquire_not_idempotent takes
              \* it for another writer.  The broken write_ignores_readers looks at the
              \* writer hash alone.  An "upgrade" (upgrade_allowed only) does not count
              \* the upgrader's own read.
              LET mine    == wtok = m.tok /\ WriterLive /\ Mutant # "acquire_not_idempotent"
                  readers == LiveReaders \ (IF m.kind = "upgrade" THEN {m.tok} ELSE {})
                  blocked == \/ WriterLive
                             \/ readers # {} /\ Mutant # "write_ignores_readers"
                             \/ Ahead(m.tok) # {}
              IN IF mine
                 THEN /\ w_ttl' = TTL
                      /\ Answer(m, 1, wfence)
                      /\ UNCHANGED <<rd_ttl, wtok, wfence, fence_ctr, queue, place,
                                     last_read>>
                      /\ UNCHANGED <<own_ttl, foreign, top, fence_bad, issued>>
                 ELSE IF ~blocked
                 THEN /\ WriteGrant(m)
                      /\ UNCHANGED <<rd_ttl, own_ttl, foreign>>
                 ELSE /\ Refuse(m)
                      /\ UNCHANGED <<rd_ttl, wtok, w_ttl, wfence, fence_ctr, last_read>>
                      /\ UNCHANGED <<own_ttl, foreign, top, fence_bad, issued>>
         [] m.kind \in {"renew", "extend"} /\ m.role = "read" ->
              \* RW_RENEW, read: key readers.  ZADD XX if our token is a live member.
              LET hit   == rd_ttl[m.tok] > 0
                  after == IF hit THEN Scored(m.tok, TTL) ELSE rd_ttl
              IN /\ rd_ttl' = after
                 /\ own_ttl' = OwnAfter(after, m.tok, hit, TTL)
                 /\ foreign' = (foreign \/ ForeignRead(after, m.tok))
                 /\ Answer(m, IF hit THEN 1 ELSE 0, 0)
                 /\ UNCHANGED <<wtok, w_ttl, wfence, fence_ctr, queue, place, last_read>>
                 /\ UNCHANGED <<top, fence_bad, issued>>
         [] m.kind \in {"renew", "extend"} /\ m.role = "write" ->
              \* RW_RENEW, write: key writer.  PEXPIRE iff it holds our token.
              LET hit == wtok = m.tok /\ WriterLive
              IN /\ w_ttl' = IF hit THEN TTL ELSE w_ttl
                 /\ Answer(m, IF hit THEN 1 ELSE 0, 0)
                 /\ UNCHANGED <<rd_ttl, wtok, wfence, fence_ctr, queue, place, last_read>>
                 /\ UNCHANGED <<own_ttl, foreign, top, fence_bad, issued>>
         [] m.kind = "release" /\ m.role = "read" ->
              \* RW_RELEASE, read: keys readers, queue, places.  ZREM our token.
              LET hit   == rd_ttl[m.tok] > 0
                  after == [rd_ttl EXCEPT ![m.tok] = 0]
              IN /\ rd_ttl' = after
                 /\ own_ttl' = OwnAfter(after, m.tok, FALSE, 0)
                 /\ queue' = Dequeued(m.tok) /\ place' = [place EXCEPT ![m.tok] = 0]
                 /\ Answer(m, IF hit THEN 1 ELSE 0, 0)
                 /\ UNCHANGED <<wtok, w_ttl, wfence, fence_ctr, last_read>>
                 /\ UNCHANGED <<foreign, top, fence_bad, issued>>
         [] m.kind = "release" /\ m.role = "write" ->
              \* RW_RELEASE, write: keys writer, queue, places.  DEL the writer hash
              \* iff it holds our token; the broken release_plain_del deletes it
              \* whoever holds it.
              LET hit  == wtok = m.tok /\ WriterLive
                  gone == hit \/ (Mutant = "release_plain_del" /\ WriterLive)
              IN /\ wtok' = IF gone THEN None ELSE wtok
                 /\ w_ttl' = IF gone THEN 0 ELSE w_ttl
                 /\ wfence' = IF gone THEN 0 ELSE wfence
                 /\ foreign' = (foreign \/ (gone /\ ~hit))
                 /\ queue' = Dequeued(m.tok) /\ place' = [place EXCEPT ![m.tok] = 0]
                 /\ Answer(m, IF hit THEN 1 ELSE 0, 0)
                 /\ UNCHANGED <<rd_ttl, fence_ctr, last_read>>
                 /\ UNCHANGED <<own_ttl, top, fence_bad, issued>>
         [] m.kind = "leave" ->
              \* RW_LEAVE: keys queue, places.  Drop our place.
              /\ queue' = Dequeued(m.tok) /\ place' = [place EXCEPT ![m.tok] = 0]
              /\ Answer(m, 1, 0)
              /\ UNCHANGED <<rd_ttl, wtok, w_ttl, wfence, fence_ctr, last_read>>
              /\ UNCHANGED <<own_ttl, foreign, top, fence_bad, issued>>
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, faults, dead>>
    /\ UNCHANGED <<overlap, oks, late>>

Fault(kind) == /\ faults < MaxFaults /\ kind \in FaultKinds
               /\ faults' = faults + 1

(* The connection fails: the request is lost, or it ran and its reply is  *)
(* lost; or a renewal's socket timeout fires while it waits at Redis and  *)
(* it runs later (kept as "hung").                                        *)
DropReply(m) ==
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m) /\ m.kind # "upgrade"
    /\ Fault("drop")
    /\ \E queued \in IF m.st = "sent" /\ m.kind = "renew" THEN BOOLEAN ELSE {FALSE} :
        net' = (net \ {m}) \cup {[m EXCEPT !.st = "error"]}
                            \cup (IF queued THEN {[m EXCEPT !.st = "hung"]} ELSE {})
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, redis_vars, dead>>
    /\ UNCHANGED ghost_vars

(* The reply never comes and no error is raised (a hung connection). *)
HangReply(m) ==
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m) /\ m.kind # "upgrade"
    /\ Fault("hang")
    /\ net' = IF m.st = "sent" THEN (net \ {m}) \cup {[m EXCEPT !.st = "hung"]}
              ELSE net \ {m}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, redis_vars, dead>>
    /\ UNCHANGED ghost_vars

(* The client library resends an acquire whose reply was lost: it runs    *)
(* again and finds our own lease (or takes a new one, with a new fence).  *)
Resend(m) ==
    /\ m \in net /\ m.kind = "acquire" /\ m.st = "done" /\ Awaited(m)
    /\ Fault("resend")
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "sent", !.val = 0, !.fence = 0]}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, redis_vars, dead>>
    /\ UNCHANGED ghost_vars

(* The body blocks the event loop until it finishes. *)
Starve(c) ==
    /\ c \notin dead
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~starved[c]
    /\ Fault("starve")
    /\ starved' = [starved EXCEPT ![c] = TRUE]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<drift, redis_vars, dead, net>>
    /\ UNCHANGED ghost_vars

(* The client process is killed (SIGKILL) during a section: it takes no   *)
(* step again and never releases; requests it sent may still run.  Its    *)
(* lease must end at its own TTL, whoever else renews.                    *)
Die(c) ==
    /\ c \notin dead /\ phase[c] \notin {"idle", "done"}
    /\ Fault("die")
    /\ dead' = dead \cup {c}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, redis_vars, net>>
    /\ UNCHANGED ghost_vars

(* The token the client's next section takes: the next number, or (for a  *)
(* Stream client) the other of 1 and 2, once nothing of the section that   *)
(* last had it is left.                                                   *)
NextToken(c) ==
    IF c \in Stream THEN <<c, 3 - token[c][2]>> ELSE <<c, token[c][2] + 1>>

Leftover(t) ==
    rd_ttl[t] > 0 \/ wtok = t \/ place[t] > 0 \/ \E m \in net : m.tok = t

(* The caller starts another section (a fresh section, a fresh token). *)
NewSection(c) ==
    /\ c \notin dead
    /\ phase[c] = "done"
    /\ IF c \in Stream THEN ~Leftover(NextToken(c)) ELSE token[c][2] < MaxRounds
    /\ phase' = [phase EXCEPT ![c] = "idle"]
    /\ outcome' = [outcome EXCEPT ![c] = "none"]
    /\ retries_left' = [retries_left EXCEPT ![c] = Retries]
    /\ token' = [token EXCEPT ![c] = NextToken(c)]
    /\ \E r \in RolesOf(c) : role' = [role EXCEPT ![c] = r]
    /\ fence' = [fence EXCEPT ![c] = 0]
    /\ deadline_in' = [deadline_in EXCEPT ![c] = 0]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ next_renew_in' = [next_renew_in EXCEPT ![c] = 0]
    /\ lost' = [lost EXCEPT ![c] = FALSE]
    /\ granted' = [granted EXCEPT ![c] = FALSE]
    /\ \E mode \in Modes : auto_renew' = [auto_renew EXCEPT ![c] = mode]
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ asked' = [asked EXCEPT ![c] = FALSE]
    /\ upgraded' = [upgraded EXCEPT ![c] = FALSE]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ drift' = [drift EXCEPT ![c] = 0]
    /\ net' = {m \in net : m.tok # token[c] \/ m.st \in {"sent", "hung"}}
    /\ overlap' = [overlap EXCEPT ![c] = {}]
    /\ late' = [late EXCEPT ![c] = FALSE]
    /\ issued' = IF c \in Stream THEN [issued EXCEPT ![NextToken(c)] = 0] ELSE issued
    /\ UNCHANGED <<waits, redis_vars, faults, dead, oks, own_ttl, foreign, top, fence_bad>>

-----------------------------------------------------------------------------
(* Every client action: the Lock's, one by one, then the waiter's         *)
(* withdrawal and the upgrade (refused).  Every environment action.       *)
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
    \/ Withdraw(c)
    \/ Upgrade(c)
    \/ UpgradeReply(c)

EnvStep ==
    \/ Tick
    \/ \E m \in net : RedisStep(m)
    \/ \E m \in net : DropReply(m)
    \/ \E m \in net : HangReply(m)
    \/ \E m \in net : Resend(m)
    \/ \E c \in Clients : Starve(c)
    \/ \E c \in Clients : Die(c)
    \/ \E c \in Clients : NewSection(c)

Next == (\E c \in Clients \ dead : ClientStep(c)) \/ EnvStep

Spec == Init /\ [][Next]_vars

(* Fairness for the liveness runs: every live client takes the step it can *)
(* take, Redis runs each client's requests, and time passes.  Faults and   *)
(* new sections are never forced.                                         *)
Fairness ==
    /\ \A c \in Clients : WF_vars(c \notin dead /\ ClientStep(c))
    /\ \A c \in Clients : WF_vars(\E m \in net : m.tok[1] = c /\ RedisStep(m))
    /\ WF_vars(Tick)

FairSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(***************************************************************************)
(* Properties                                                             *)
(***************************************************************************)

TypeOK ==
    /\ phase \in [Clients -> Phases]
    /\ outcome \in [Clients -> Outcomes]
    /\ retries_left \in [Clients -> 0..Retries]
    /\ token \in [Clients -> Tokens] /\ \A c \in Clients : token[c][1] = c
    /\ \A c \in Clients : role[c] \in RolesOf(c)
    /\ waits \in [Clients -> BOOLEAN]
    /\ fence \in [Clients -> 0..MaxFence]
    /\ deadline_in \in [Clients -> 0..TTL]
    /\ sent_ago \in [Clients -> 0..AgeCap]
    /\ renew_in_flight \in [Clients -> BOOLEAN]
    /\ renew_sent_ago \in [Clients -> 0..AgeCap]
    /\ next_renew_in \in [Clients -> 0..Heartbeat]
    /\ extend_in_flight \in [Clients -> BOOLEAN]
    /\ extend_sent_ago \in [Clients -> 0..AgeCap]
    /\ lost \in [Clients -> BOOLEAN]
    /\ granted \in [Clients -> BOOLEAN]
    /\ auto_renew \in [Clients -> BOOLEAN]
    /\ asked \in [Clients -> BOOLEAN] /\ upgraded \in [Clients -> BOOLEAN]
    /\ starved \in [Clients -> BOOLEAN]
    /\ drift \in [Clients -> 0..MaxDrift]
    /\ rd_ttl \in [Tokens -> 0..TTL]
    /\ (wtok = None) = (w_ttl = 0) /\ (wtok = None \/ wtok \in Tokens)
    /\ w_ttl \in 0..TTL /\ wfence \in 0..MaxFence /\ fence_ctr \in 0..MaxFence
    /\ place \in [Tokens -> 0..PlaceTTL]
    /\ \A i \in 1..Len(queue) : place[queue[i].tok] > 0
    /\ \A t \in Tokens : place[t] > 0 => Cardinality(Pos(t)) = 1
    /\ dead \subseteq Clients
    /\ net \subseteq Message

(* A writer's lease is exclusive.  Never a writer's successful section    *)
(* (its release answered 1, no loss known) in its body beside any other   *)
(* successful section; never a writer's live lease at Redis beside any    *)
(* other live lease (one writer hash: one writer).  No clock assumption.  *)
WriterExclusive ==
    /\ \A a, b \in oks : (a # b /\ "write" \in {a.role, b.role}) => a.tok \notin b.overlap
    /\ WriterLive => LiveReaders = {}

(* Sections that hold their lease as far as they can tell: the signal has *)
(* not fired and the lease is valid on their own clock.                  *)
Believes(c) == phase[c] \in {"held", "body_done"} /\ ~lost[c] /\ deadline_in[c] > 0

(* Never a section that believes it writes beside another that believes  *)
(* it holds (under the drift bound, as SignalSound, which it builds on).  *)
ValidWriterAlone ==
    \A c, d \in Clients :
        (c # d /\ Believes(c) /\ Believes(d)) => role[c] = "read" /\ role[d] = "read"

(* A reader's lease counts only until the expiry its own holder's last    *)
(* write set, on Redis's clock: a dead reader's share ends at its own TTL, *)
(* whoever else renews.                                                   *)
ReaderReclaimedAtOwnExpiry == \A t \in Tokens : rd_ttl[t] > 0 => own_ttl[t] > 0

(* Every write grant issues a fence larger than every fence issued before *)
(* on the key (to writers and readers), and a writer holds the fence last *)
(* issued to its token (a resent acquire granted again keeps it).         *)
WriterFenceIncreases ==
    /\ ~fence_bad
    /\ \A c \in Clients :
        (role[c] = "write" /\ phase[c] \in {"held", "body_done"}) =>
            fence[c] = issued[token[c]]

(* While the signal has not fired and the client clock says the lease is  *)
(* valid, Redis holds it.                                                 *)
SignalSound == \A c \in Clients : Believes(c) => LeaseLive(c)

(* A run/hold section reported ok finished its body within its lease. *)
OkWithinLease == \A c \in Clients : (outcome[c] = "ok" /\ auto_renew[c]) => ~late[c]

(* No script renews or removes a live lease of another token. *)
NoForeignWrite == ~foreign

(* A section refused (backing off, waiting, or ended not acquired) holds   *)
(* no lease: a resent acquire that already ran is granted again.          *)
RefusalHoldsNothing ==
    \A c \in Clients :
        (phase[c] \in {"backoff", "waiting"} \/ outcome[c] = "not_acquired")
            => ~LeaseLive(c)

(* No section holds read and write at once, on its side or at Redis. *)
NoUpgrade ==
    /\ \A c \in Clients : ~upgraded[c]
    /\ ~(WriterLive /\ rd_ttl[wtok] > 0)

(* Liveness: a patient writer waiting is granted the write lock in the   *)
(* end, whatever the readers keep doing (FairSpec).                      *)
WriterWaiting(c) == role[c] = "write" /\ phase[c] \in {"idle", "acquiring", "waiting"}
WriterNotStarved == \A c \in Patient : WriterWaiting(c) ~> ~WriterWaiting(c)

(***************************************************************************)
(* Reachability probes: invariants TLC must VIOLATE.                      *)
(***************************************************************************)
\* two readers in their bodies at once, neither known lost
ProbeReadersShare ==
    ~\E c, d \in Clients :
        /\ c # d /\ role[c] = "read" /\ role[d] = "read"
        /\ InBody(c) /\ InBody(d) /\ ~lost[c] /\ ~lost[d]
\* a reader killed while holding; its lease ended at its own TTL and a writer holds
ProbeDeadReaderReclaimed ==
    ~\E c, d \in Clients :
        /\ c # d /\ c \in dead /\ role[c] = "read" /\ granted[c]
        /\ phase[c] \in {"held", "body_done"}
        /\ role[d] = "write" /\ InBody(d) /\ ~lost[d] /\ deadline_in[d] > 0
\* a reader refused while only readers hold, because a writer waits
ProbeReaderHeldBack ==
    ~\E c \in Clients :
        /\ role[c] = "read" /\ phase[c] = "waiting" /\ ~WriterLive
        /\ \E e \in Ahead(token[c]) : e.role = "write"
\* a writer granted after waiting in the queue, the fence above a reader's
ProbeWriterAfterWait ==
    ~\E c, d \in Clients :
        /\ role[c] = "write" /\ waits[c] /\ InBody(c) /\ c # d /\ role[d] = "read"
        /\ outcome[d] = "ok" /\ fence[d] > 0 /\ fence[c] > fence[d]
\* an upgrade asked and refused: the reader goes on reading
ProbeUpgradeRefused == ~\E c \in Clients : asked[c] /\ InBody(c) /\ ~upgraded[c]

(* The clients a model may permute (a cfg overrides it): those of one role *)
(* and the same options only.                                             *)
Alike == {}
Symmetry == Permutations(Alike)

(* States that differ only in the overlap ghosts are one state, in a model *)
(* that does not check WriterExclusive's first half.                      *)
NoOverlapView == <<client_vars, env_vars, late, own_ttl, foreign, top, fence_bad, issued>>

=============================================================================
