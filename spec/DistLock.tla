------------------------------ MODULE DistLock ------------------------------
(***************************************************************************)
(* A Redis lock with fencing tokens, lease renewal and a loss signal.      *)
(*                                                                         *)
(* One Redis key (holder token, remaining TTL, fence counter), a set of    *)
(* clients, and a network in between.  Each client runs one section at a  *)
(* time (an acquisition lifecycle: a run/hold call or a manual handle),    *)
(* mirroring distlock.core.Section: every client action below is one       *)
(* method of Section with the same guard and effect (see spec/README.md). *)
(*                                                                         *)
(* Time is discrete (Tick).  No absolute clock is kept: every instant the  *)
(* core stores is held here as a countdown or an age on the CLIENT clock   *)
(* ("deadline_in" is deadline - now, "sent_ago" is now - sent_at, ...);   *)
(* the key TTL and message ages run on real time.  On a Tick a client     *)
(* clock may stand still (drift: it lags real time by at most MaxDrift    *)
(* units per section).                                                    *)
(*                                                                         *)
(* With the option Handoff, a refused section waits in the key's queue    *)
(* and a release hands the key to the first waiter (Wake, Withdraw, and   *)
(* the release and withdrawal cases of RedisStep).                        *)
(*                                                                         *)
(* Mutant names a deliberately broken variant ("none" for the real thing). *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Clients,          \* client processes (model values)
    MaxRounds,        \* sections per client in one behaviour
    Retries,          \* retries_left at the start of a section
    TTL,              \* lease length (PX of SET and PEXPIRE)
    Heartbeat,        \* renewal period of run/hold sections
    Margin,           \* clock-drift allowance subtracted from every deadline
    Timely,           \* TRUE: the NoSpuriousLoss world (every reply within MaxDelay, renewals
                      \* fail at most MaxFail times in a row, no other fault); FALSE: any
                      \* delay and every fault (drops, hangs, key loss, starvation)
    MaxDelay,         \* delay bound of the Timely world, in ticks from send to reply handled
    MaxDrift,         \* how far a client clock may lag real time during one section
    MaxFail,          \* consecutive failed renewals a lease must survive (NoSpuriousLoss)
    MaxFaults,        \* faults (drop, hang, key loss, starvation) in one behaviour
    CounterSurvives,  \* TRUE: a key loss keeps the fence counter (eviction of the volatile
                      \* lock key); FALSE: it loses it too (restart without persistence),
                      \* and grants count on from the floor of Redis's clock (KeyLost)
    Manual,           \* TRUE: sections may be manual handles (acquire/extend/release)
    Mutant            \* "none" or the name of a broken variant

Mutants == {"none", "release_plain_del", "extend_without_token_check",
            "deadline_from_reply", "no_completion_check", "ignore_release_reply",
            "heartbeat_above_half", "drift_above_margin", "retry_off_by_one",
            "no_release_timeout", "lease_timeout_waits_for_renewal",
            "renew_reject_ignored", "fence_from_counter", "extend_trusts_its_own_ttl",
            "release_without_record",
            \* the handoff (Handoff): the key handed with the releaser's remaining TTL; the
            \* waiter's lease counted from the wake-up instead of its last attempt's send; an
            \* attempt that finds its own token (a key handed to it) leaves the TTL as it is
            \* (held_as without PEXPIRE); the handoff reuses the releaser's fence (no INCR)
            "hand_releasers_ttl", "handed_lease_from_wakeup", "regrant_keeps_ttl",
            "hand_reuses_fence",
            \* the release deletes the key and leaves the queue be: no waiter is handed it nor
            \* woken (spec/Election.tla refutes the bound on a campaign's wait with it)
            "release_forgets_queue",
            \* a lost counter starts again at 0: no floor from Redis's clock (lib/fence.lua)
            "no_fence_floor"}

(* Options a cfg turns on by overriding the definition ("ShortTTL = 2" under    *)
(* CONSTANTS); the defaults leave them off, so a cfg that does not name them    *)
(* (the generated trace-validation model among them) gets the plain lock.       *)
ShortTTL  == TTL    \* the other TTL a manual extend may ask for (extend(ttl_ms))
WatchOnly == FALSE  \* run/hold sections may run with the heartbeat off (heartbeat_ms=False)
ResendReleases == FALSE  \* the client library resends a release whose reply was lost
EarlyRelease == FALSE  \* a run/hold body may release its own key (handle.release() inside)
\* Waiting with the handoff (wait_ms > 0): a refused attempt leaves its section in the key's
\* queue; a release (or a withdrawal) hands the key to the first waiter, with HandedTTL
\* (the implementation's min(ttl, HANDED_TTL_MS)) and a new fence sent in its wake-up.
\* Every section of such a model waits (run/hold with a heartbeat: the ones a key is
\* handed to; the others are woken, which spec/Wait.tla's WakeUps models check).
Handoff == FALSE
HandedTTL == TTL
\* the faults of the world outside Timely (a model may narrow them: see Restart.cfg)
\* ("queue", with Handoff: a wake-up or a withdrawal lost, and no other message)
FaultKinds == {"drop", "hang", "resend", "key_lost", "starve"}

ASSUME
    /\ Mutant \in Mutants
    /\ TTL \in Nat \ {0} /\ Heartbeat \in Nat \ {0} /\ Margin \in Nat
    /\ Margin < TTL /\ MaxDelay \in Nat /\ MaxFail \in Nat /\ Timely \in BOOLEAN
    /\ MaxRounds \in Nat \ {0} /\ Retries \in Nat /\ MaxFaults \in Nat
    \* the core rejects an explicit heartbeat above ttl/2
    /\ (2 * Heartbeat <= TTL) \/ (Mutant = "heartbeat_above_half")
    \* the drift bound the margin is sized for
    /\ (MaxDrift <= Margin) \/ (Mutant = "drift_above_margin")
    /\ ShortTTL \in (Margin + 1)..TTL /\ WatchOnly \in BOOLEAN
    /\ ResendReleases \in BOOLEAN /\ EarlyRelease \in BOOLEAN
    /\ Handoff \in BOOLEAN /\ HandedTTL \in (Margin + 1)..TTL
    /\ Handoff => (~Manual /\ ~WatchOnly)
    /\ FaultKinds \subseteq {"drop", "hang", "resend", "key_lost", "starve", "shared_counter",
                            "queue"}

Phases   == {"idle", "acquiring", "backoff", "waiting", "held", "body_done", "abandoned",
             "releasing", "release_unknown", "done"}
Outcomes == {"none", "ok", "not_acquired", "lost", "failed"}
\* (Handoff: "wake" is a waiter's wake-up, the handed fence in its wake list or on its way
\* in the reply of its BLPOP; "withdraw" the withdrawal, whose reply nobody reads)
Kinds    == {"acquire", "renew", "extend", "release", "wake", "withdraw"}
NoToken  == <<>>
Tokens   == Clients \X (1..MaxRounds)

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b
Dec(x)    == IF x > 0 THEN x - 1 ELSE 0

(* Ages on the client clock stop counting where they no longer matter:    *)
(* a request older than this grants no lease and no renewal delay.        *)
AgeCap == Max(TTL - Margin, Heartbeat)

VARIABLES
    \* ---- client side: one Section per client (names follow distlock.core) ----
    phase,            \* Section.phase
    outcome,          \* Section.outcome
    retries_left,     \* Section.retries_left
    token,            \* Section.token: <<client, section number>>, unique per section
    fence,            \* Section.fence (0 until granted)
    deadline_in,      \* Section.deadline - now (client clock), floored at 0
    sent_ago,         \* now - sent_at of the acquire in flight, or of the last attempt while
                      \* waiting (0 when none)
    renew_in_flight,  \* Section.renew_in_flight
    renew_sent_ago,   \* now - Section.renew_sent_at while renew_in_flight (else 0)
    next_renew_in,    \* Section.next_renew_at - now, floored at 0
    extend_in_flight, \* Section.extend_in_flight (manual extend)
    extend_sent_ago,  \* now - Section.extend_sent_at while extend_in_flight (else 0)
    lost,             \* Section.lost is not None: the lease is known lost
    auto_renew,       \* Section.config.watch: a run/hold section (FALSE: manual handle)
    renews,           \* Section.config.renew_every_ms is not None: the heartbeat is on
    extend_ttl,       \* Section.extend_ttl_ms of the extend in flight (TTL when none)
    unconfirmed_ttl,  \* Section.unconfirmed_ttl_ms (TTL for None: no shorter TTL pending)
    \* ---- environment ----
    starved,          \* the body blocks the client's event loop (timers do not run)
    drift,            \* clock lag accumulated by the client during this section
    key_holder,       \* token in the lock key, or NoToken
    key_ttl,          \* remaining TTL of the key (real time)
    fence_ctr,        \* the fence counter as a grant sees it: the next fence is
                      \* fence_ctr + 1 (max(INCR, the clock's floor): lib/fence.lua)
    released,         \* tokens whose release deleted the key (the release records, kept
                      \* longer than any resend takes: their expiry is not modelled)
    faults,           \* faults injected so far (outside the Timely world)
    net,              \* requests and replies in flight
    queue,            \* Handoff: the key's queue, the waiters' tokens in arrival order (their
                      \* places do not expire here: spec/Wait.tla checks that)
    \* ---- ghosts for the properties ----
    overlap,          \* tokens of the sections that were in their body at the same time
    oks,              \* finished sections reported ok: [tok, overlap]
    late,             \* the body finished when the client clock said the lease had expired
    grants,           \* fences issued by Redis, in issue order: [tok, fence]
    foreign,          \* some client extended or deleted a key holding another token
    wiped,            \* Redis lost the key while it held this section's token, and no
                      \* reply since has told the client so
    consec_fail,      \* consecutive failed renewals
    renewed           \* a renewal of this section succeeded

client_vars == <<phase, outcome, retries_left, token, fence, deadline_in, sent_ago,
                 renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                 extend_sent_ago, lost, auto_renew, renews, extend_ttl, unconfirmed_ttl>>
env_vars    == <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, net,
                 queue>>
ghost_vars  == <<overlap, oks, late, grants, foreign, wiped, consec_fail, renewed>>
vars        == <<client_vars, env_vars, ghost_vars>>

(* A section's mode: <<watched, renewed>>.  run/hold with a heartbeat, a   *)
(* manual handle, and (WatchOnly) run/hold with the heartbeat off.          *)
Modes == {<<TRUE, TRUE>>} \cup (IF Manual THEN {<<FALSE, FALSE>>} ELSE {})
                         \cup (IF WatchOnly THEN {<<TRUE, FALSE>>} ELSE {})

Message == [tok : Tokens, kind : Kinds, st : {"sent", "done", "error", "hung"},
            val : Nat, age : 0..MaxDelay]

(* A new request of client c; its reply is the same record with st "done" *)
(* ("error" when the connection fails; "hung": it may still run at Redis  *)
(* but no reply will ever come).                                          *)
Request(c, k) == [tok |-> token[c], kind |-> k, st |-> "sent", val |-> 0, age |-> 0]

Mine(m, c, k) == m.tok = token[c] /\ m.kind = k

(* No reply of kind k will come for c: the request failed or hangs. *)
NoAnswer(c, k) == ~\E m \in net : Mine(m, c, k) /\ m.st \in {"sent", "done"}

(* Consume c's error of kind k (hung requests stay: they may still run). *)
DropErrors(c, k) == {m \in net : ~(Mine(m, c, k) /\ m.st = "error")}

(* The lease a grant, renewal or extend of TTL t gives, on the client      *)
(* clock, from the age of the request: it runs from the SEND time.        *)
LeaseOf(t, ago) ==
    IF Mutant = "deadline_from_reply" THEN t - Margin ELSE Max(t - Margin - ago, 0)

LeaseFrom(ago) == LeaseOf(TTL, ago)

(* Section._confirm: a request of TTL t succeeded, but PEXPIRE replaces a  *)
(* TTL: a request that failed and may still run later can leave a shorter *)
(* one, so the shortest TTL among them is the one to count on.            *)
Confirmed(c, t) ==
    IF Mutant = "extend_trusts_its_own_ttl" THEN t ELSE Min(t, unconfirmed_ttl[c])

InBody(c) == phase[c] = "held"

Init ==
    /\ phase = [c \in Clients |-> "idle"]
    /\ outcome = [c \in Clients |-> "none"]
    /\ retries_left = [c \in Clients |-> Retries]
    /\ token = [c \in Clients |-> <<c, 1>>]
    /\ fence = [c \in Clients |-> 0]
    /\ deadline_in = [c \in Clients |-> 0]
    /\ sent_ago = [c \in Clients |-> 0]
    /\ renew_in_flight = [c \in Clients |-> FALSE]
    /\ renew_sent_ago = [c \in Clients |-> 0]
    /\ next_renew_in = [c \in Clients |-> 0]
    /\ lost = [c \in Clients |-> FALSE]
    /\ \E mode \in [Clients -> Modes] :
        /\ auto_renew = [c \in Clients |-> mode[c][1]]
        /\ renews = [c \in Clients |-> mode[c][2]]
    /\ extend_ttl = [c \in Clients |-> TTL]
    /\ unconfirmed_ttl = [c \in Clients |-> TTL]
    /\ extend_in_flight = [c \in Clients |-> FALSE]
    /\ extend_sent_ago = [c \in Clients |-> 0]
    /\ starved = [c \in Clients |-> FALSE]
    /\ drift = [c \in Clients |-> 0]
    /\ key_holder = NoToken
    /\ key_ttl = 0
    /\ fence_ctr = 0
    /\ released = {}
    /\ faults = 0
    /\ net = {}
    /\ queue = <<>>
    /\ overlap = [c \in Clients |-> {}]
    /\ oks = {}
    /\ late = [c \in Clients |-> FALSE]
    /\ grants = <<>>
    /\ foreign = FALSE
    /\ wiped = [c \in Clients |-> FALSE]
    /\ consec_fail = [c \in Clients |-> 0]
    /\ renewed = [c \in Clients |-> FALSE]

-----------------------------------------------------------------------------
(***************************************************************************)
(* Client actions: one per distlock.core.Section method.                  *)
(***************************************************************************)

(* Section.acquire: SET key token NX PX ttl and, if set, INCR the fence   *)
(* counter, in one script.  From backoff the retry delay has elapsed (the *)
(* delay itself has no bearing on the properties and is not modelled).    *)
(* From waiting (Handoff), the block ended, at its time-out or by a       *)
(* wake-up, and this is the next attempt: a wake-up not read by then is   *)
(* never read (the driver discards a block's connection; the script       *)
(* empties the wake list), and a key handed meanwhile is ours again only  *)
(* by this attempt (the script's held_as).  A waiter's attempts may come  *)
(* at any time, any number of them: the re-check times are spec/Wait.tla's. *)
Acquire(c) ==
    /\ phase[c] \in {"idle", "backoff", "waiting"}
    /\ net' = {m \in net : ~Mine(m, c, "wake")} \cup {Request(c, "acquire")}
    /\ phase' = [phase EXCEPT ![c] = "acquiring"]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<outcome, retries_left, token, fence, deadline_in, renew_in_flight,
                   renew_sent_ago, next_renew_in, lost, extend_in_flight, extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED ghost_vars

(* Section.acquire_reply: granted (fence > 0) or denied (0).  A grant     *)
(* whose lease already ran out on the client clock (the reply outlived    *)
(* it) is known lost at once: no body may rely on it.                     *)
AcquireReply(c) ==
    /\ phase[c] = "acquiring"
    /\ \E m \in net :
        /\ Mine(m, c, "acquire") /\ m.st = "done"
        /\ net' = net \ {m}
        \* a waiter's lease, if a release hands it the key, counts from this send
        /\ sent_ago' = [sent_ago EXCEPT ![c] = IF m.val = 0 /\ Handoff THEN @ ELSE 0]
        /\ IF m.val > 0
           THEN \* granted: the lease runs from the send time
                /\ phase' = [phase EXCEPT ![c] = "held"]
                \* the fence the body gets is the one the script returned
                /\ fence' = [fence EXCEPT ![c] =
                                IF Mutant = "fence_from_counter" THEN fence_ctr ELSE m.val]
                /\ deadline_in' = [deadline_in EXCEPT ![c] = LeaseFrom(sent_ago[c])]
                /\ next_renew_in' = [next_renew_in EXCEPT ![c] =
                                       IF renews[c] THEN Max(Heartbeat - sent_ago[c], 0)
                                       ELSE 0]
                /\ lost' = [lost EXCEPT ![c] = LeaseFrom(sent_ago[c]) = 0]
                /\ overlap' = [d \in Clients |->
                                 IF d = c THEN {token[e] : e \in {x \in Clients : InBody(x)}}
                                 ELSE IF InBody(d) THEN overlap[d] \cup {token[c]}
                                 ELSE overlap[d]]
                /\ UNCHANGED <<outcome, retries_left>>
           ELSE \* denied: back off while retries are left, else give up; a waiting
                \* attempt (Handoff) is in the queue and waits (its last attempt is a
                \* refusal and a withdrawal here: see Withdraw)
                /\ UNCHANGED <<fence, deadline_in, next_renew_in, lost, overlap>>
                /\ CASE Handoff ->
                          /\ phase' = [phase EXCEPT ![c] = "waiting"]
                          /\ UNCHANGED <<outcome, retries_left>>
                     [] retries_left[c] > 0
                          \/ (Mutant = "retry_off_by_one" /\ retries_left[c] >= 0) ->
                          /\ phase' = [phase EXCEPT ![c] = "backoff"]
                          /\ retries_left' = [retries_left EXCEPT ![c] = @ - 1]
                          /\ UNCHANGED outcome
                     [] OTHER ->
                          /\ phase' = [phase EXCEPT ![c] = "done"]
                          /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
                          /\ UNCHANGED retries_left
    /\ UNCHANGED <<token, renew_in_flight, renew_sent_ago, extend_in_flight, extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<oks, late, grants, foreign, wiped, consec_fail, renewed>>

(* Section.acquire_fail: the round trip failed or timed out (cancelled).  *)
(* The SET may have taken effect (or still may), so the section is        *)
(* abandoned and a cleanup release follows (fence stays 0: never granted). *)
AcquireFail(c) ==
    /\ phase[c] = "acquiring"
    /\ NoAnswer(c, "acquire")
    /\ net' = DropErrors(c, "acquire")
    /\ phase' = [phase EXCEPT ![c] = "abandoned"]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<outcome, retries_left, token, fence, deadline_in, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED ghost_vars

(* Waiting with the handoff (Handoff; spec/Wait.tla's Block, Wake and    *)
(* Withdraw, on this spec's lease).  Section.wake with a fence: a release  *)
(* handed us the key, and its wake-up (m.val, the fence) arrived while we  *)
(* block.  The key's TTL was set at the release, after our last attempt    *)
(* was sent, so the lease counts from that send (Section._granted,         *)
(* handed=True), with the handed TTL; a key handed with a TTL shorter than *)
(* the section's is renewed at once.  A block that ends without one is the *)
(* next Acquire.                                                           *)
Wake(c) ==
    /\ phase[c] = "waiting"
    /\ \E m \in net :
        /\ Mine(m, c, "wake") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ LET ago   == IF Mutant = "handed_lease_from_wakeup" THEN 0 ELSE sent_ago[c]
               lease == LeaseOf(HandedTTL, ago)
           IN /\ phase' = [phase EXCEPT ![c] = "held"]
              /\ fence' = [fence EXCEPT ![c] = m.val]
              /\ deadline_in' = [deadline_in EXCEPT ![c] = lease]
              /\ next_renew_in' = [next_renew_in EXCEPT ![c] =
                                     IF HandedTTL < TTL THEN 0 ELSE Max(Heartbeat - ago, 0)]
              /\ lost' = [lost EXCEPT ![c] = lease = 0]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ overlap' = [d \in Clients |->
                     IF d = c THEN {token[e] : e \in {x \in Clients : InBody(x)}}
                     ELSE IF InBody(d) THEN overlap[d] \cup {token[c]}
                     ELSE overlap[d]]
    /\ UNCHANGED <<outcome, retries_left, token, renew_in_flight, renew_sent_ago,
                   extend_in_flight, extend_sent_ago, auto_renew, renews, extend_ttl,
                   unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<oks, late, grants, foreign, wiped, consec_fail, renewed>>

(* Section.withdraw: a waiter stops waiting (a cancellation, an error of   *)
(* its block, or its deadline: the last attempt, whose refusal takes it    *)
(* out of the queue in the same script, is a refusal and a withdrawal      *)
(* here).  It ends not acquired and sends the withdrawal (best effort: the *)
(* request may be lost, a fault, and its place then stays).  Its wake-up,  *)
(* if any, is never read.                                                  *)
Withdraw(c) ==
    /\ phase[c] = "waiting"
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ \E sent \in IF ~Timely /\ faults < MaxFaults /\ FaultKinds \cap {"drop", "queue"} # {}
                    THEN BOOLEAN ELSE {TRUE} :
        /\ net' = {m \in net : ~Mine(m, c, "wake")}
                  \cup (IF sent THEN {Request(c, "withdraw")} ELSE {})
        /\ faults' = IF sent THEN faults ELSE faults + 1
    /\ UNCHANGED <<retries_left, token, fence, deadline_in, renew_in_flight, renew_sent_ago,
                   next_renew_in, lost, extend_in_flight, extend_sent_ago, auto_renew, renews,
                   extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, queue>>
    /\ UNCHANGED ghost_vars

(* Section.renew_send, as the heartbeat tick (Section.tick) takes it: the *)
(* lease is valid on the client clock, the renewal is due and none is in  *)
(* flight.  Sends the token-checked extend (PEXPIRE only if GET = token). *)
RenewSendEnabled(c) ==
    /\ phase[c] = "held" /\ renews[c] /\ ~lost[c] /\ ~starved[c]
    /\ ~renew_in_flight[c] /\ next_renew_in[c] = 0 /\ deadline_in[c] > 0

RenewSend(c) ==
    /\ RenewSendEnabled(c)
    /\ net' = net \cup {Request(c, "renew")}
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = TRUE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ next_renew_in' = [next_renew_in EXCEPT ![c] = Heartbeat]
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, deadline_in, sent_ago,
                   extend_in_flight, extend_sent_ago, lost,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED ghost_vars

(* A 0 reply to a renewal or extend handled while the section is held     *)
(* tells the client that Redis lost its key: from then on the key-loss    *)
(* excuse of SignalSound no longer covers it.                             *)
Told(c) == wiped' = [wiped EXCEPT ![c] = @ /\ phase[c] # "held"]

(* Section.renew_reply: 1 moves the deadline to send time + ttl - margin  *)
(* (unless the lease is already known lost); 0 is a loss.  Once the body  *)
(* is done the release reply is the authority: the reply only clears the  *)
(* in-flight flag.  A starved event loop runs no reply callback.          *)
RenewReply(c) ==
    /\ renew_in_flight[c] /\ ~starved[c]
    /\ \E m \in net :
        /\ Mine(m, c, "renew") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ IF phase[c] = "held" /\ m.val = 1
           THEN /\ deadline_in' = [deadline_in EXCEPT ![c] =
                                     IF lost[c] THEN @
                                     ELSE Max(@, LeaseOf(Confirmed(c, TTL), renew_sent_ago[c]))]
                /\ renewed' = [renewed EXCEPT ![c] = TRUE]
                /\ consec_fail' = [consec_fail EXCEPT ![c] = 0]
                /\ UNCHANGED <<lost, wiped>>
           ELSE /\ lost' = [lost EXCEPT ![c] =
                               @ \/ (phase[c] = "held" /\ Mutant # "renew_reject_ignored")]
                /\ Told(c)
                /\ UNCHANGED <<deadline_in, renewed, consec_fail>>
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, sent_ago, next_renew_in,
                   extend_in_flight, extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign>>

(* Section.renew_fail: a connection error is not a loss; the next tick    *)
(* (at next_renew_at) retries.  The renewal may still run later, but with *)
(* the lock's own TTL, so unconfirmed_ttl (the shortest such) stays put.  *)
RenewFail(c) ==
    /\ renew_in_flight[c] /\ ~starved[c]
    /\ \E m \in net :
        /\ Mine(m, c, "renew") /\ m.st = "error"
        /\ net' = net \ {m}
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ consec_fail' = [consec_fail EXCEPT ![c] = Min(@ + 1, MaxFail)]
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, deadline_in, sent_ago,
                   next_renew_in, extend_in_flight, extend_sent_ago, lost,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, renewed>>

(* Section.lease_timeout: a heartbeat tick finds the deadline passed.     *)
LeaseTimeoutEnabled(c) ==
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~lost[c] /\ ~starved[c]
    /\ deadline_in[c] = 0
    /\ ~(Mutant = "lease_timeout_waits_for_renewal" /\ renew_in_flight[c])

LeaseTimeout(c) ==
    /\ LeaseTimeoutEnabled(c)
    /\ lost' = [lost EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED env_vars
    /\ UNCHANGED ghost_vars

(* Section.extend: manual extend on a handle (no background renewal; a    *)
(* run/hold section refuses it), with the lock's TTL or a shorter one     *)
(* (ShortTTL).  Section._bound: if Redis runs it at once the key ends at  *)
(* now + t, which may be before the current deadline.                     *)
Extend(c) ==
    /\ phase[c] = "held" /\ ~auto_renew[c] /\ ~extend_in_flight[c]
    /\ \E t \in {TTL, ShortTTL} :
        /\ net' = net \cup {[Request(c, "extend") EXCEPT !.val = t]}
        /\ extend_ttl' = [extend_ttl EXCEPT ![c] = t]
        /\ deadline_in' = [deadline_in EXCEPT ![c] = Min(@, LeaseOf(t, 0))]
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = TRUE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, lost,
                   auto_renew, renews, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED ghost_vars

(* Section.extend_reply: 1 moves the deadline from the send time (unless  *)
(* known lost); 0 fires the signal while the handle is held (after        *)
(* release the release reply is the authority).                           *)
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
    /\ extend_ttl' = [extend_ttl EXCEPT ![c] = TTL]
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, auto_renew, renews, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, consec_fail, renewed>>

(* Section.extend_fail: an error or a timeout goes to the caller; no loss. *)
(* The extend may still run later (Section._unconfirmed): its TTL joins   *)
(* the ones a later confirmation must count with.                         *)
ExtendFail(c) ==
    /\ extend_in_flight[c]
    /\ NoAnswer(c, "extend")
    /\ net' = DropErrors(c, "extend")
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ unconfirmed_ttl' = [unconfirmed_ttl EXCEPT ![c] = Min(@, extend_ttl[c])]
    /\ extend_ttl' = [extend_ttl EXCEPT ![c] = TTL]
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, lost, auto_renew, renews>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED ghost_vars

(* Section.body_done: the body of a run/hold section returned or raised.  *)
(* Completion-time check in the same turn: a deadline passed on the       *)
(* client clock is a loss (a starved loop never ran LeaseTimeout).        *)
BodyDone(c) ==
    /\ phase[c] = "held" /\ auto_renew[c]
    /\ phase' = [phase EXCEPT ![c] = "body_done"]
    /\ lost' = [lost EXCEPT ![c] =
                  @ \/ (deadline_in[c] = 0 /\ Mutant # "no_completion_check")]
    /\ late' = [late EXCEPT ![c] = deadline_in[c] = 0]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<outcome, retries_left, token, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<drift, key_holder, key_ttl, fence_ctr, released, faults, net, queue>>
    /\ UNCHANGED <<overlap, oks, grants, foreign, wiped, consec_fail, renewed>>

(* Section.release: the token-checked compare-and-delete; from a manual   *)
(* handle still held, from a finished body, or as the cleanup of an       *)
(* abandoned acquire.                                                     *)
Release(c) ==
    /\ \/ phase[c] = "held" /\ ~auto_renew[c]
       \* a run/hold section granted after its own lease: released with no body (the
       \* drivers do this only then; allowing it after any loss only adds behaviours)
       \/ phase[c] = "held" /\ auto_renew[c] /\ lost[c]
       \* a run/hold body that releases its own key before it ends (handle.release()
       \* inside hold); an option, on in Manual.cfg and the trace and guard models
       \/ phase[c] = "held" /\ auto_renew[c] /\ EarlyRelease
       \* a manual release that got no answer, sent again
       \/ phase[c] \in {"body_done", "abandoned", "release_unknown"}
    /\ net' = net \cup {Request(c, "release")}
    /\ phase' = [phase EXCEPT ![c] = "releasing"]
    /\ UNCHANGED <<outcome, retries_left, token, fence, deadline_in, sent_ago,
                   renew_in_flight, renew_sent_ago, next_renew_in, extend_in_flight,
                   extend_sent_ago, lost, auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED ghost_vars

(* A section abandoned before any grant has fence 0: its release is a     *)
(* cleanup and it ends failed whatever the reply (Section._abandoned).    *)
Abandoned(c) == fence[c] = 0

Finish(c, result) ==
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = result]
    /\ lost' = [lost EXCEPT ![c] = @ \/ result = "lost"]
    /\ oks' = IF result = "ok" THEN oks \cup {[tok |-> token[c], overlap |-> overlap[c]]}
              ELSE oks

(* Section.release_reply: 1 with no loss recorded is the only success. *)
ReleaseReply(c) ==
    /\ phase[c] = "releasing"
    /\ \E m \in net :
        /\ Mine(m, c, "release") /\ m.st = "done"
        /\ net' = net \ {m}
        /\ Finish(c, IF Abandoned(c) THEN "failed"
                     ELSE IF (m.val = 1 \/ Mutant = "ignore_release_reply") /\ ~lost[c]
                     THEN "ok" ELSE "lost")
    /\ UNCHANGED <<retries_left, token, fence, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<overlap, late, grants, foreign, wiped, consec_fail, renewed>>

(* Section.release_fail: an error, or no reply before the timeout: the    *)
(* outcome is unknown, so it is not a success.                            *)
ReleaseFail(c) ==
    /\ phase[c] = "releasing"
    /\ IF Mutant = "no_release_timeout"
       THEN \E m \in net : Mine(m, c, "release") /\ m.st = "error"
       ELSE NoAnswer(c, "release")
    /\ net' = DropErrors(c, "release")
    \* A manual handle's caller gets the error and may release again: the key may still
    \* be ours, and only we can free it before its TTL.
    /\ IF ~auto_renew[c] /\ ~Abandoned(c)
       THEN /\ phase' = [phase EXCEPT ![c] = "release_unknown"]
            /\ UNCHANGED <<outcome, lost, oks>>
       ELSE Finish(c, IF Abandoned(c) THEN "failed" ELSE "lost")
    /\ UNCHANGED <<retries_left, token, fence, deadline_in, sent_ago, renew_in_flight,
                   renew_sent_ago, next_renew_in, extend_in_flight, extend_sent_ago,
                   auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<overlap, late, grants, foreign, wiped, consec_fail, renewed>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Environment actions: the world, not the core.                          *)
(***************************************************************************)

(* Is anyone still waiting for the reply to m? *)
Awaited(m) ==
    LET c == m.tok[1] IN
    /\ m.tok = token[c]
    /\ CASE m.kind = "acquire" -> phase[c] = "acquiring"
         [] m.kind = "release" -> phase[c] = "releasing"
         [] m.kind = "renew"   -> renew_in_flight[c]
         [] m.kind = "extend"  -> extend_in_flight[c]
         [] m.kind = "wake"    -> phase[c] = "waiting"
         [] OTHER              -> FALSE  \* a withdrawal: its reply changes nothing

(* A heartbeat timer that is due fires before time moves on, unless the   *)
(* body starves the event loop (then the timer waits: see Starve); the    *)
(* release that follows a finished body or an abandoned acquire is sent   *)
(* in the same turn.                                                      *)
TimerDue(c) ==
    \/ RenewSendEnabled(c)
    \/ LeaseTimeoutEnabled(c)
    \/ phase[c] \in {"body_done", "abandoned"}

(* Clients whose clock may lag real time on this tick (drift budget left). *)
MayLag == {c \in Clients : drift[c] < MaxDrift
                            /\ phase[c] \in {"acquiring", "waiting", "held", "body_done"}}

(* Time advances one unit.  The key expires at its instant, message ages  *)
(* move, and so do the countdowns of every client whose clock advances:   *)
(* the clocks of the clients in lag stand still for this tick (drift, at  *)
(* most MaxDrift units per section).  Countdowns that no longer matter    *)
(* (the deadline once the body is done, ...) read 0 after the next tick.  *)
(* In the Timely world time cannot                                        *)
(* pass a request or reply someone awaits beyond MaxDelay; otherwise      *)
(* delays are unbounded (and message ages are not kept).                  *)
Tick ==
    /\ \A c \in Clients : ~TimerDue(c)
    /\ \E lag \in SUBSET MayLag :
        /\ drift' = [c \in Clients |-> IF c \in lag THEN drift[c] + 1 ELSE drift[c]]
        /\ deadline_in' = [c \in Clients |->
                             IF phase[c] # "held" THEN 0
                             ELSE IF c \in lag THEN deadline_in[c] ELSE Dec(deadline_in[c])]
        /\ next_renew_in' = [c \in Clients |->
                               IF phase[c] # "held" \/ ~renews[c] THEN 0
                               ELSE IF c \in lag THEN next_renew_in[c]
                               ELSE Dec(next_renew_in[c])]
        \* (a waiter's stops where a handed lease would be spent: HandedTTL - Margin)
        /\ sent_ago' = [c \in Clients |->
                          IF phase[c] \notin {"acquiring", "waiting"} THEN 0
                          ELSE IF c \in lag THEN sent_ago[c]
                          ELSE IF phase[c] = "waiting"
                          THEN Min(sent_ago[c] + 1, HandedTTL - Margin)
                          ELSE Min(sent_ago[c] + 1, AgeCap)]
        /\ renew_sent_ago' = [c \in Clients |->
                                IF ~renew_in_flight[c] \/ phase[c] # "held" THEN 0
                                ELSE IF c \in lag THEN renew_sent_ago[c]
                                ELSE Min(renew_sent_ago[c] + 1, AgeCap)]
        /\ extend_sent_ago' = [c \in Clients |->
                                 IF ~extend_in_flight[c] \/ phase[c] # "held" THEN 0
                                 ELSE IF c \in lag THEN extend_sent_ago[c]
                                 ELSE Min(extend_sent_ago[c] + 1, AgeCap)]
    /\ key_ttl' = Dec(key_ttl)
    /\ key_holder' = IF key_ttl <= 1 THEN NoToken ELSE key_holder
    /\ IF Timely
       THEN /\ \A m \in net : Awaited(m) => m.age < MaxDelay
            /\ net' = {[m EXCEPT !.age = IF Awaited(m) THEN @ + 1 ELSE 0] : m \in net}
       ELSE UNCHANGED net
    /\ UNCHANGED <<phase, outcome, retries_left, token, fence, renew_in_flight, lost,
                   extend_in_flight, auto_renew, renews, extend_ttl, unconfirmed_ttl>>
    /\ UNCHANGED <<starved, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, consec_fail, renewed>>

Answer(m, v) ==
    net' = (net \ {m}) \cup (IF Awaited(m) /\ m.st = "sent"
                            THEN {[m EXCEPT !.st = "done", !.val = v]} ELSE {})

(* Handoff: the queue without the token t (the scripts' leave). *)
Leave(q, t) == SelectSeq(q, LAMBDA x : x # t)

(* The fence a handoff gives: a new one from the counter. *)
HandFence == IF Mutant = "hand_reuses_fence" THEN fence_ctr ELSE fence_ctr + 1

(* hand_head: the key goes to the waiter w with TTL ttl and a new fence,   *)
(* which its wake list gets (the wake-up, in net: read by Wake).           *)
HandTo(w, ttl) ==
    /\ key_holder' = w
    /\ key_ttl' = ttl
    /\ fence_ctr' = HandFence
    /\ grants' = Append(grants, [tok |-> w, fence |-> HandFence])

Wakeup(w) == [tok |-> w, kind |-> "wake", st |-> "done", val |-> HandFence, age |-> 0]

(* The wake-ups of token t (the script of an attempt of t empties its wake list). *)
WakeupsOf(t) == {x \in net : x.tok = t /\ x.kind = "wake"}

(* Redis runs one request atomically (scripts see time frozen) and queues *)
(* its reply.  Requests run in any order (separate connections).  The     *)
(* acquire script finding its own token (a resent acquire that already    *)
(* ran: Resend; with Handoff, a key handed to a waiter whose attempt came  *)
(* before it read the wake-up: held_as) re-sets the TTL and returns the    *)
(* current counter.  A renewal sets the lock's TTL, an extend the TTL it   *)
(* carries.  With Handoff every attempt is a waiting one (W_ACQUIRE): a    *)
(* free key goes to it only if nobody waits before it, and a refusal keeps *)
(* its place in the queue (or gives it one at the tail); whatever it does, *)
(* it empties its wake list.  A release whose key has a waiter hands it    *)
(* over in the same script; a withdrawal gives back a key handed to its    *)
(* waiter, and hands the key on if it gave it back or was first in line.   *)
RedisStep(m) ==
    /\ m \in net /\ m.st \in {"sent", "hung"}
    /\ CASE m.kind = "acquire" ->
              LET first == ~Handoff \/ queue = <<>> \/ Head(queue) = m.tok
              IN
              IF key_holder = m.tok
              THEN /\ key_ttl' = IF Mutant = "regrant_keeps_ttl" THEN key_ttl ELSE TTL
                   /\ net' = ((net \ {m}) \ WakeupsOf(m.tok))
                             \cup (IF Awaited(m) /\ m.st = "sent"
                                   THEN {[m EXCEPT !.st = "done", !.val = Max(fence_ctr, 1)]}
                                   ELSE {})
                   \* Other keys of the slot may have moved the shared counter since the
                   \* first run: then this reply re-issues a larger fence to the same owner.
                   /\ grants' = IF grants # <<>> /\ grants[Len(grants)].tok = m.tok
                                   /\ grants[Len(grants)].fence < Max(fence_ctr, 1)
                                THEN Append(grants, [tok |-> m.tok, fence |-> Max(fence_ctr, 1)])
                                ELSE grants
                   /\ queue' = Leave(queue, m.tok)
                   /\ UNCHANGED <<key_holder, fence_ctr, released, foreign>>
              ELSE IF key_holder = NoToken /\ first
              THEN /\ key_holder' = m.tok
                   /\ key_ttl' = TTL
                   /\ fence_ctr' = fence_ctr + 1
                   /\ grants' = Append(grants, [tok |-> m.tok, fence |-> fence_ctr + 1])
                   /\ net' = ((net \ {m}) \ WakeupsOf(m.tok))
                             \cup (IF Awaited(m) /\ m.st = "sent"
                                   THEN {[m EXCEPT !.st = "done", !.val = fence_ctr + 1]}
                                   ELSE {})
                   /\ queue' = Leave(queue, m.tok)
                   /\ UNCHANGED <<foreign, released>>
              ELSE /\ net' = ((net \ {m}) \ WakeupsOf(m.tok))
                             \cup (IF Awaited(m) /\ m.st = "sent"
                                   THEN {[m EXCEPT !.st = "done", !.val = 0]} ELSE {})
                   /\ queue' = IF Handoff /\ \A i \in 1..Len(queue) : queue[i] # m.tok
                               THEN Append(queue, m.tok) ELSE queue
                   /\ UNCHANGED <<key_holder, key_ttl, fence_ctr, released, grants, foreign>>
         [] m.kind \in {"renew", "extend"} ->
              LET hit == \/ key_holder = m.tok
                         \/ (Mutant = "extend_without_token_check" /\ key_holder # NoToken)
              IN /\ key_ttl' = IF ~hit THEN key_ttl
                               ELSE IF m.kind = "extend" THEN m.val ELSE TTL
                 /\ foreign' = (foreign \/ (hit /\ key_holder # m.tok))
                 /\ Answer(m, IF hit THEN 1 ELSE 0)
                 /\ UNCHANGED <<key_holder, fence_ctr, released, grants, queue>>
         [] m.kind = "release" ->
              \* The release script deletes the key if it holds our token and records
              \* that it did; a release whose token has such a record (a resend, or a
              \* manual release sent again) is answered as released.
              LET hit == \/ key_holder = m.tok
                         \/ (Mutant = "release_plain_del" /\ key_holder # NoToken)
                  again == /\ m.tok \in released
                           /\ Mutant # "release_without_record"
                  \* deleting our key, it hands it to the first waiter (Handoff)
                  hand == key_holder = m.tok /\ queue # <<>> /\ Mutant # "release_forgets_queue"
              IN /\ IF hand
                    THEN /\ HandTo(Head(queue), IF Mutant = "hand_releasers_ttl" THEN key_ttl
                                                ELSE HandedTTL)
                         /\ queue' = Tail(queue)
                         /\ net' = (net \ {m}) \cup {Wakeup(Head(queue))}
                                   \cup (IF Awaited(m) /\ m.st = "sent"
                                         THEN {[m EXCEPT !.st = "done", !.val = 1]} ELSE {})
                    ELSE /\ key_holder' = IF hit THEN NoToken ELSE key_holder
                         /\ key_ttl' = IF hit THEN 0 ELSE key_ttl
                         /\ Answer(m, IF hit \/ again THEN 1 ELSE 0)
                         /\ UNCHANGED <<fence_ctr, grants, queue>>
                 \* (kept only where a release can be sent twice: elsewhere the record is
                 \* never read, and tracking it would only multiply the states)
                 /\ released' = IF key_holder = m.tok /\ (ResendReleases \/ Manual)
                                THEN released \cup {m.tok} ELSE released
                 /\ foreign' = (foreign \/ (hit /\ key_holder # m.tok))
         [] m.kind = "withdraw" ->
              \* WITHDRAW: leave the queue; a key that holds our token (handed to us, or
              \* granted by an attempt whose reply we never read) is deleted; then, if we
              \* were first in line or gave the key back, and the key is free, it goes to
              \* the new first waiter.  Nobody reads the reply.
              LET q    == Leave(queue, m.tok)
                  mine == key_holder = m.tok
                  free == mine \/ key_holder = NoToken
              IN IF (mine \/ (queue # <<>> /\ Head(queue) = m.tok)) /\ free /\ q # <<>>
                 THEN /\ HandTo(Head(q), HandedTTL)
                      /\ queue' = Tail(q)
                      /\ net' = ((net \ {m}) \ WakeupsOf(m.tok)) \cup {Wakeup(Head(q))}
                      /\ UNCHANGED <<released, foreign>>
                 ELSE /\ key_holder' = IF mine THEN NoToken ELSE key_holder
                      /\ key_ttl' = IF mine THEN 0 ELSE key_ttl
                      /\ queue' = q
                      /\ net' = (net \ {m}) \ WakeupsOf(m.tok)
                      /\ UNCHANGED <<fence_ctr, released, grants, foreign>>
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, faults>>
    /\ UNCHANGED <<overlap, oks, late, wiped, consec_fail, renewed>>

(* The connection fails: the request is lost, or it ran and its reply is  *)
(* lost; the client sees an error.  Or a renewal's socket timeout fires   *)
(* while the request still waits at Redis: the client sees an error       *)
(* (RenewFail) and the request runs later all the same (kept as "hung":   *)
(* no reply).  An acquire, extend or release that times out while queued  *)
(* is HangReply (its Fail action needs no error).  In the Timely world    *)
(* only renewals fail, at most MaxFail times in a row, and none runs      *)
(* after its error.                                                       *)
DropReply(m) ==
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m)
    /\ IF Timely THEN /\ m.kind = "renew" /\ consec_fail[m.tok[1]] < MaxFail
                     /\ UNCHANGED faults
                ELSE /\ faults < MaxFaults
                     /\ \/ "drop" \in FaultKinds
                        \/ "queue" \in FaultKinds /\ m.kind = "wake"
                     /\ faults' = faults + 1
    /\ \E queued \in IF m.st = "sent" /\ m.kind = "renew" /\ ~Timely THEN BOOLEAN ELSE {FALSE} :
        net' = (net \ {m}) \cup {[m EXCEPT !.st = "error"]}
                            \cup (IF queued THEN {[m EXCEPT !.st = "hung"]} ELSE {})
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, consec_fail, renewed>>

(* The reply never comes and no error is raised (a hung connection).  An  *)
(* acquire, extend or release then times out (the Fail action); a hung    *)
(* renewal stays in flight for good and LeaseTimeout catches it.          *)
HangReply(m) ==
    /\ ~Timely /\ faults < MaxFaults /\ "hang" \in FaultKinds
    /\ m \in net /\ m.st \in {"sent", "done"} /\ Awaited(m)
    /\ net' = IF m.st = "sent" THEN (net \ {m}) \cup {[m EXCEPT !.st = "hung"]}
              ELSE net \ {m}
    /\ faults' = faults + 1
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, consec_fail, renewed>>

(* The client library resends a command after a connection error (redis-py *)
(* Retry): an acquire that already ran, whose reply was lost, runs again   *)
(* and the client gets the second run's reply.  Releases are not resent.  *)
Resend(m) ==
    /\ ~Timely /\ faults < MaxFaults /\ "resend" \in FaultKinds
    /\ m \in net /\ m.kind = "acquire" /\ m.st = "done" /\ Awaited(m)
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "sent", !.val = 0]}
    /\ faults' = faults + 1
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, consec_fail, renewed>>

(* The client library resends a release whose reply was lost (redis-py    *)
(* retries a command after a connection error or a timeout): Redis may run *)
(* it again, and the client gets the second run's reply.  Not a fault: it  *)
(* is what a client with the recommended socket_timeout does.              *)
ResendRelease(m) ==
    /\ ResendReleases
    /\ m \in net /\ m.kind = "release" /\ m.st = "done" /\ Awaited(m)
    /\ net' = (net \ {m}) \cup {[m EXCEPT !.st = "sent", !.val = 0]}
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, faults, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, consec_fail, renewed>>

(* Another key of the lock key's hash slot takes its lock: the fence      *)
(* counter is one per slot, so it moves on without this key changing hands. *)
SharedIncr ==
    /\ ~Timely /\ faults < MaxFaults /\ "shared_counter" \in FaultKinds
    /\ fence_ctr' = fence_ctr + 1
    /\ faults' = faults + 1
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, released, net, queue>>
    /\ UNCHANGED ghost_vars

(* Redis loses the key without expiry: eviction of the volatile lock key  *)
(* (the counter survives) or a restart without persistence / a failover   *)
(* to a lagging replica (the counter is lost or stale too, unless         *)
(* CounterSurvives).  A grant's fence is at least the floor of Redis's    *)
(* clock then (lib/fence.lua: INCR, raised to the floor), so fence_ctr     *)
(* stands for max(counter, floor - 1).  The clock assumption: Redis's     *)
(* clock after the loss reads a later ms than every fence before it stands *)
(* for, so its floor is above them all: fence_ctr after the loss is at    *)
(* least the highest fence issued (fence_ctr: it never drops between      *)
(* losses).  The model takes that least value, the worst case for the     *)
(* order: a floor further on only leaves a gap, as another key of the     *)
(* slot does (SharedIncr).  no_fence_floor: a lost counter starts again   *)
(* at 0, as it did before the floor.                                      *)
LostCounter == IF Mutant = "no_fence_floor" THEN 0 ELSE fence_ctr

KeyLost ==
    /\ ~Timely /\ faults < MaxFaults /\ "key_lost" \in FaultKinds
    /\ key_holder # NoToken \/ (~CounterSurvives /\ fence_ctr > 0)
    /\ key_holder' = NoToken
    /\ key_ttl' = 0
    /\ fence_ctr' = IF CounterSurvives THEN fence_ctr ELSE LostCounter
    \* release records are keys too: a restart loses them, an eviction may
    /\ released' \in {released, {}}
    /\ faults' = faults + 1
    /\ wiped' = [c \in Clients |-> wiped[c] \/ key_holder = token[c]]
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<starved, drift, net, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, consec_fail, renewed>>

(* The body blocks the event loop (or holds the GIL) until it finishes:   *)
(* no heartbeat tick and no reply callback runs until BodyDone.           *)
Starve(c) ==
    /\ ~Timely /\ faults < MaxFaults /\ "starve" \in FaultKinds
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~starved[c]
    /\ starved' = [starved EXCEPT ![c] = TRUE]
    /\ faults' = faults + 1
    /\ UNCHANGED client_vars
    /\ UNCHANGED <<drift, key_holder, key_ttl, fence_ctr, released, net, queue>>
    /\ UNCHANGED <<overlap, oks, late, grants, foreign, wiped, consec_fail, renewed>>

(* The caller starts another section (a fresh Section, a fresh token).    *)
(* Requests of the old section may still run at Redis; their replies go  *)
(* to the finished section and are ignored.                               *)
NewSection(c) ==
    /\ phase[c] = "done" /\ token[c][2] < MaxRounds
    /\ phase' = [phase EXCEPT ![c] = "idle"]
    /\ outcome' = [outcome EXCEPT ![c] = "none"]
    /\ retries_left' = [retries_left EXCEPT ![c] = Retries]
    /\ token' = [token EXCEPT ![c] = <<c, @[2] + 1>>]
    /\ fence' = [fence EXCEPT ![c] = 0]
    /\ deadline_in' = [deadline_in EXCEPT ![c] = 0]
    /\ sent_ago' = [sent_ago EXCEPT ![c] = 0]
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ next_renew_in' = [next_renew_in EXCEPT ![c] = 0]
    /\ lost' = [lost EXCEPT ![c] = FALSE]
    /\ \E mode \in Modes : /\ auto_renew' = [auto_renew EXCEPT ![c] = mode[1]]
                           /\ renews' = [renews EXCEPT ![c] = mode[2]]
    /\ extend_ttl' = [extend_ttl EXCEPT ![c] = TTL]
    /\ unconfirmed_ttl' = [unconfirmed_ttl EXCEPT ![c] = TTL]
    /\ extend_in_flight' = [extend_in_flight EXCEPT ![c] = FALSE]
    /\ extend_sent_ago' = [extend_sent_ago EXCEPT ![c] = 0]
    /\ starved' = [starved EXCEPT ![c] = FALSE]
    /\ drift' = [drift EXCEPT ![c] = 0]
    /\ net' = {m \in net : m.tok # token[c] \/ m.st \in {"sent", "hung"}}
    /\ overlap' = [overlap EXCEPT ![c] = {}]
    /\ late' = [late EXCEPT ![c] = FALSE]
    /\ wiped' = [wiped EXCEPT ![c] = FALSE]
    /\ consec_fail' = [consec_fail EXCEPT ![c] = 0]
    /\ renewed' = [renewed EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<key_holder, key_ttl, fence_ctr, released, faults, oks, grants, foreign,
                   queue>>

-----------------------------------------------------------------------------
(* Every client action; tests/test_parity.py reads these two lists. *)
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
    \/ SharedIncr
    \/ KeyLost
    \/ \E c \in Clients : Starve(c)
    \/ \E c \in Clients : NewSection(c)

(* Waiting with the handoff: the two of the core's WAIT_ACTIONS that move  *)
(* the lease (Block and the withdrawal's replies change nothing of it).    *)
(* Neither is enabled unless Handoff.                                      *)
WaitStep(c) ==
    \/ Wake(c)
    \/ Withdraw(c)

Next == (\E c \in Clients : ClientStep(c)) \/ (\E c \in Clients : WaitStep(c)) \/ EnvStep

Spec == Init /\ [][Next]_vars

(* Client steps that only consume a reply or a due timer, or end a phase: *)
(* none repeats forever within a phase, so one weak fairness covers them. *)
ClientProgress(c) ==
    \/ Acquire(c) \/ AcquireReply(c) \/ AcquireFail(c)
    \/ RenewReply(c) \/ RenewFail(c) \/ LeaseTimeout(c)
    \/ ExtendReply(c) \/ ExtendFail(c)
    \/ ReleaseReply(c) \/ ReleaseFail(c)

(* Fairness: the client, Redis and time make progress; bodies finish and  *)
(* manual handles are released.  Faults (drops, hangs, key loss, drift,   *)
(* starvation), Extend and new sections are never forced.                 *)
Fairness ==
    /\ \A c \in Clients :
        /\ WF_vars(ClientProgress(c))
        /\ WF_vars(RenewSend(c))
        /\ WF_vars(BodyDone(c))
        /\ WF_vars(Release(c))
    /\ WF_vars(\E m \in net : RedisStep(m))
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
    /\ fence \in [Clients -> Nat]
    /\ deadline_in \in [Clients -> 0..TTL]
    /\ sent_ago \in [Clients -> 0..AgeCap]
    /\ renew_in_flight \in [Clients -> BOOLEAN]
    /\ renew_sent_ago \in [Clients -> 0..AgeCap]
    /\ next_renew_in \in [Clients -> 0..Heartbeat]
    /\ lost \in [Clients -> BOOLEAN]
    /\ auto_renew \in [Clients -> BOOLEAN]
    /\ renews \in [Clients -> BOOLEAN] /\ \A c \in Clients : renews[c] => auto_renew[c]
    /\ extend_ttl \in [Clients -> {TTL, ShortTTL}]
    /\ unconfirmed_ttl \in [Clients -> {TTL, ShortTTL}]
    /\ extend_in_flight \in [Clients -> BOOLEAN]
    /\ extend_sent_ago \in [Clients -> 0..AgeCap]
    /\ starved \in [Clients -> BOOLEAN]
    /\ drift \in [Clients -> 0..MaxDrift]
    /\ key_holder \in Tokens \cup {NoToken}
    /\ key_ttl \in 0..TTL /\ (key_holder = NoToken) = (key_ttl = 0)
    /\ released \subseteq Tokens
    /\ fence_ctr \in Nat
    /\ net \subseteq Message
    /\ queue \in Seq(Tokens)

(* Two sections that both finished ok were never in their bodies at the  *)
(* same time.  No clock assumption; holds also when Redis loses the key.  *)
NoOverlappingSuccess == \A a, b \in oks : a.tok \notin b.overlap

(* No client ever extends or deletes a key that holds another token. *)
NoForeignWrite == ~foreign

(* The fence a client records (and hands to its body) is the one Redis    *)
(* issued to its token last (a resent acquire may be issued a second one). *)
FenceIssued ==
    \A c \in Clients : fence[c] > 0 =>
        \E i \in 1..Len(grants) :
            /\ grants[i].tok = token[c] /\ grants[i].fence = fence[c]
            /\ \A j \in (i + 1)..Len(grants) : grants[j].tok # token[c]

(* Each new owner gets a strictly larger fence (also across a loss of the *)
(* counter, under KeyLost's clock assumption), and the fence each client  *)
(* holds is the one Redis issued it.                                      *)
FencesIncrease ==
    /\ \A i \in 1..(Len(grants) - 1) : grants[i].fence < grants[i + 1].fence
    /\ FenceIssued

(* While the signal has not fired and the client clock says the lease is  *)
(* valid, Redis holds the token: under the drift bound, unless Redis      *)
(* itself lost the key and no reply has told the client so since (wiped). *)
SignalSound ==
    \A c \in Clients :
        (phase[c] \in {"held", "body_done"} /\ ~lost[c] /\ deadline_in[c] > 0 /\ ~wiped[c])
            => key_holder = token[c]

(* In the Timely world (every reply within MaxDelay, at most MaxFail      *)
(* consecutive failed renewals, no other fault) a renewed run/hold        *)
(* section never reports a loss.  Checked in the Timely models only.      *)
NoSpuriousLoss == \A c \in Clients : renews[c] => ~lost[c]

(* A held run/hold section whose loop runs and whose signal has not fired *)
(* has reached its deadline on its own clock.                             *)
Overdue(c) ==
    /\ phase[c] = "held" /\ auto_renew[c] /\ ~starved[c] /\ ~lost[c]
    /\ deadline_in[c] = 0

(* Time never carries such a section's clock past its deadline: the       *)
(* signal fires first (a renewal still in flight does not hold it back).  *)
(* Its clock stands still on a tick where it lags (drift grows).          *)
SignalOnTime ==
    [][\A c \in Clients : (Overdue(c) /\ Tick) => drift'[c] = drift[c] + 1]_vars

(* The client handles a 0 reply to its renewal or extend in this step     *)
(* (the cheap in-flight test first: TLC evaluates this on every step).    *)
Rejected(c) ==
    \E k \in {"renew", "extend"} :
        /\ IF k = "renew" THEN renew_in_flight[c] /\ ~renew_in_flight'[c]
                         ELSE extend_in_flight[c] /\ ~extend_in_flight'[c]
        /\ \E m \in net \ net' : Mine(m, c, k) /\ m.st = "done" /\ m.val = 0

(* A rejected renewal or extend (Redis no longer holds the token) while   *)
(* the section is held fires the signal in the same step.                 *)
RejectionSignals ==
    [][\A c \in Clients : (phase[c] = "held" /\ ~lost'[c]) => ~Rejected(c)]_vars

(* A run/hold section reported ok finished its body while its lease was   *)
(* valid on its own clock: a body that overran its lease is reported lost *)
(* even when Redis still held the key.  (A manual handle has no body: its *)
(* release answers whether the key was still ours.)                       *)
OkWithinLease == \A c \in Clients : (outcome[c] = "ok" /\ auto_renew[c]) => ~late[c]

(* Every section ends: ok, not_acquired, lost or failed. *)
Terminates == \A c \in Clients : (phase[c] # "done") ~> (phase[c] = "done")

(***************************************************************************)
(* Reachability probes: invariants TLC must VIOLATE (the state is         *)
(* reachable, so the properties above are not vacuous).                   *)
(***************************************************************************)
ProbeBothInBody     == ~\E a, b \in Clients : a # b /\ InBody(a) /\ InBody(b)
ProbeRenewed        == ~\E c \in Clients : renewed[c]
ProbeStarvedExpired == ~\E c \in Clients : starved[c] /\ InBody(c) /\ key_holder # token[c]
ProbeLost           == ~\E c \in Clients : outcome[c] = "lost"
ProbeOk             == ~\E c \in Clients : outcome[c] = "ok" /\ renewed[c]
ProbeWatchOnlyLost  == ~\E c \in Clients : auto_renew[c] /\ ~renews[c] /\ outcome[c] = "lost"
\* a resent acquire re-issued a larger fence to the same owner (the shared counter moved)
ProbeReissued       == ~\E i, j \in 1..Len(grants) : i < j /\ grants[i].tok = grants[j].tok

(* Handoff probes, as action properties TLC must VIOLATE: the step they   *)
(* name is taken.                                                          *)
\* a waiter is handed the key with its lease still running on its own clock (Wake)
ProbeHandedGrant ==
    [][\A c \in Clients : ~(phase[c] = "waiting" /\ phase'[c] = "held" /\ ~lost'[c])]_vars
\* an attempt finds the key holding its own token and is granted it again (held_as): with
\* no resend in the model, only a key handed to it that it had not read
ProbeRegranted ==
    [][~\E m \in net : /\ m.kind = "acquire" /\ m.st = "sent" /\ key_holder = m.tok
                       /\ \E r \in net' : /\ r.tok = m.tok /\ r.kind = "acquire"
                                          /\ r.st = "done" /\ r.val > 0]_vars
\* a withdrawal gives back the key handed to its waiter (handing it on needs another
\* waiter: a third client, or a second section)
ProbeWithdrawGivesBack ==
    [][~\E m \in net : /\ m.kind = "withdraw" /\ m.st = "sent" /\ key_holder = m.tok
                       /\ key_holder' # m.tok]_vars

Symmetry == Permutations(Clients)

(***************************************************************************)
(* State constraints that drop behaviours another model already checks.   *)
(***************************************************************************)
\* a model of manual handles: with every client run/hold it is DistLock.cfg
SomeManual == \E c \in Clients : ~auto_renew[c]
\* a model of heartbeat-off sections: with every client renewed it is DistLock.cfg
SomeWatchOnly == \E c \in Clients : auto_renew[c] /\ ~renews[c]
\* at most one client's clock lags: a lag only moves that client's own deadlines
OneClockLags == \A a, b \in Clients : (drift[a] > 0 /\ drift[b] > 0) => a = b

=============================================================================
