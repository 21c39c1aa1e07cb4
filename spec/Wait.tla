-------------------------------- MODULE Wait --------------------------------
(***************************************************************************)
(* Waiting for a held lock: the wake-up protocol of one key K.            *)
(*                                                                         *)
(* Redis keeps, beside K, a FIFO queue of waiter tokens (the list          *)
(* distlock:queue:{tag}:K), each waiter's place in it, which expires (the  *)
(* hash token -> expiry instant; here `ticket`, its remaining life), and   *)
(* one wake list per waiter (distlock:wake:{tag}:K:<token>; here a flag:   *)
(* non-empty).  The scripts are the cases of the Redis* actions, each      *)
(* atomic:                                                                 *)
(*                                                                         *)
(*   attempt  drop expired places at the head; grant if K is free and     *)
(*            (the queue is empty, or we are its head, or we do not wait); *)
(*            else keep our place (or join at the tail), make it last the  *)
(*            wait we have left (never less than it had), and refuse with  *)
(*            the time we may block before re-checking; an attempt with    *)
(*            no wait left is the last: refused, it leaves the queue;      *)
(*   BLPOP    pop our wake list, or block until it is pushed or the        *)
(*            block's time runs out;                                       *)
(*   release  delete K if it holds our token and, in the same script,      *)
(*            push to the head waiter's wake list;                         *)
(*   leave    (the withdrawal) drop our place and wake list, delete K if   *)
(*            a late grant gave it to us, and pass the wake-up on if we    *)
(*            were the head and K is free.                                 *)
(*                                                                         *)
(* Clients run one section each, with the core's actions (Section): the   *)
(* ones in Waiting wait up to MaxWait ticks, the others fail fast (one     *)
(* attempt; they may take a free key even while others wait).  A client    *)
(* starts at any moment, holds the key for any time (its lease may expire  *)
(* under it), releases it, or dies anywhere (a holder that dies leaves K   *)
(* to expire; a waiter that dies leaves its place to expire); a waiter may *)
(* be cancelled (it withdraws).  Requests and replies take any time; a     *)
(* fault drops one (the client sees an error).                            *)
(*                                                                         *)
(* Time: countdowns, no absolute clock.  key_ttl, ticket and recheck_in    *)
(* count Redis time; wait_left and block_left count the client's (no       *)
(* drift here: DistLock.tla checks the lease arithmetic under drift).      *)
(*                                                                         *)
(* Mutant names a deliberately broken variant ("none": the protocol).     *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Clients,    \* the clients, one section each
    Waiting,    \* the clients that wait (wait_ms > 0); the others fail fast
    TTL,        \* K's lease (PX of a grant); every client of K uses the same
    MaxWait,    \* how long a waiting client waits (its wait_ms), in ticks
    MaxFaults,  \* faults (a dropped message, a dead client, a cancelled wait) per behaviour
    Mutant      \* "none" or the name of a broken variant

Mutants == {"none",
            \* the two the design names
            "subscribe_after_attempt", "notify_before_delete",
            \* one per other property
            "block_past_deadline", "grant_ignoring_queue", "release_plain_del",
            "leave_deletes_any_key", "enqueue_twice",
            \* the re-check time as first drafted: K's PTTL alone, which a head
            \* waiter whose place ends while it holds the wake-up outlives
            "recheck_ignores_head_ticket",
            \* a free K's re-check by the head's place alone: the head takes K and
            \* its lease ends before that place would have
            "recheck_ignores_ttl",
            \* a place set to end at now + the life the attempt carries, even if
            \* earlier than before (no cfg: see spec/README.md)
            "ticket_may_shrink",
            \* the leave drops a wake-up meant for the head that leaves
            "leave_drops_wakeup"}

(* A cfg may narrow the faults, or the clients that may die, by overriding *)
(* these definitions.                                                      *)
FaultKinds == {"drop", "crash", "cancel"}
Mortal == Clients

ASSUME
    /\ Mutant \in Mutants
    /\ Waiting \subseteq Clients
    /\ TTL \in Nat \ {0} /\ MaxWait \in Nat \ {0} /\ MaxFaults \in Nat
    /\ FaultKinds \subseteq {"drop", "crash", "cancel"}

None == "none"

Phases   == {"idle", "acquiring", "enqueuing", "refused", "blocked", "woken", "held",
             "body_done", "releasing", "withdrawing", "done", "dead"}
Outcomes == {"none", "ok", "not_acquired", "lost", "failed"}
\* requests, then replies
Kinds    == {"attempt", "enqueue", "blpop", "release", "release_del", "leave",
             "granted", "refused", "enqueued", "element", "released", "left", "error"}
Replies  == {"granted", "refused", "enqueued", "element", "released", "left", "error"}

Min(a, b) == IF a < b THEN a ELSE b
Dec(x)    == IF x > 0 THEN x - 1 ELSE 0
MaxTime   == IF TTL > MaxWait THEN TTL ELSE MaxWait

VARIABLES
    \* ---- client side, per client ----
    phase,        \* the section's phase
    outcome,      \* its outcome
    wait_left,    \* deadline - now of a waiting client (client clock)
    block_left,   \* end of the current block (BLPOP timeout) - now (client clock)
    \* ---- Redis ----
    key_holder,   \* the token in K, or None
    key_ttl,      \* K's remaining TTL
    queue,        \* K's queue: waiter tokens in arrival order
    ticket,       \* remaining life of each waiter's ticket (0: none or expired)
    wake,         \* the waiter's wake list is non-empty
    \* ---- environment ----
    net,          \* requests and replies in flight
    faults,       \* faults injected so far
    \* ---- ghosts for the properties ----
    recheck_in,   \* (Redis time) until the re-check instant the last refusal returned
    inbody,       \* clients in their bodies
    overlap,      \* clients that were in their bodies at the same time as this one
    foreign       \* some script deleted a K holding another client's token

client_vars == <<phase, outcome, wait_left, block_left>>
redis_vars  == <<key_holder, key_ttl, queue, ticket, wake>>
ghost_vars  == <<recheck_in, inbody, overlap, foreign>>
vars        == <<client_vars, redis_vars, net, faults, ghost_vars>>

(* n: the ticket life an attempt carries, the re-check time a refusal     *)
(* returns, the result of a release (1: deleted our K).                   *)
Msg(k, c, n) == [kind |-> k, c |-> c, n |-> n]

(* The phase in which a client reads a reply of kind k.  A reply nobody    *)
(* reads (its client withdrew, finished or died) is not sent.             *)
Reads(k) == CASE k \in {"granted", "refused"} -> "acquiring"
              [] k = "enqueued" -> "enqueuing"
              [] k = "element"  -> "blocked"
              [] k = "released" -> "releasing"
              [] k = "left"     -> "withdrawing"
Reply(k, c, n) == IF phase[c] = Reads(k) THEN {Msg(k, c, n)} ELSE {}

Waits(c) == c \in Waiting

(* The queue after the head's expired tickets are evicted (every script   *)
(* starts with it; a script that changes the queue stores it).            *)
RECURSIVE Evict(_)
Evict(q) == IF q # <<>> /\ ticket[Head(q)] = 0 THEN Evict(Tail(q)) ELSE q

Remove(q, c) == SelectSeq(q, LAMBDA x : x # c)
InQueue(q, c) == \E i \in 1..Len(q) : q[i] = c

(* The live waiter at the head of K's queue. *)
IsHead(c) == LET q == Evict(queue) IN q # <<>> /\ Head(q) = c

(* Push the wake-up to the head of q (if any). *)
WakeHead(q) == IF q = <<>> THEN wake ELSE [wake EXCEPT ![Head(q)] = TRUE]

Init ==
    /\ phase = [c \in Clients |-> "idle"]
    /\ outcome = [c \in Clients |-> "none"]
    /\ wait_left = [c \in Clients |-> 0]
    /\ block_left = [c \in Clients |-> 0]
    /\ key_holder = None
    /\ key_ttl = 0
    /\ queue = <<>>
    /\ ticket = [c \in Clients |-> 0]
    /\ wake = [c \in Clients |-> FALSE]
    /\ net = {}
    /\ faults = 0
    /\ recheck_in = [c \in Clients |-> 0]
    /\ inbody = {}
    /\ overlap = [c \in Clients |-> {}]
    /\ foreign = FALSE

-----------------------------------------------------------------------------
(***************************************************************************)
(* Client actions, one per method of distlock._core.section.Section: the  *)
(* lock's Acquire ... ReleaseFail, and the waiting ones (Block, Wake,      *)
(* Withdraw, WithdrawReply, WithdrawFail: WAIT_ACTIONS).                   *)
(***************************************************************************)

StillWaiting(c) ==
    Waits(c) /\ phase[c] \in {"acquiring", "enqueuing", "refused", "blocked", "woken"}

(* Acquire: the first attempt (the wait's clock starts), or the next one   *)
(* after a block.  It carries the wait left, the life of the caller's     *)
(* place in the queue; 0 makes it the last attempt (past the deadline).    *)
Acquire(c) ==
    /\ phase[c] \in {"idle", "woken"}
    /\ LET left == IF ~Waits(c) THEN 0 ELSE IF phase[c] = "idle" THEN MaxWait ELSE wait_left[c]
       IN /\ wait_left' = [wait_left EXCEPT ![c] = left]
          /\ net' = net \cup {Msg("attempt", c, left)}
    /\ phase' = [phase EXCEPT ![c] = "acquiring"]
    /\ UNCHANGED <<outcome, block_left, redis_vars, faults, ghost_vars>>

EnterBody(c) ==
    /\ inbody' = inbody \cup {c}
    /\ overlap' = [x \in Clients |->
                     IF x = c THEN overlap[x] \cup inbody
                     ELSE IF x \in inbody THEN overlap[x] \cup {c}
                     ELSE overlap[x]]

(* The block that follows a refusal: until the re-check time, and never    *)
(* past the caller's deadline.                                             *)
BlockFor(c, recheck) ==
    IF Mutant = "block_past_deadline" THEN recheck ELSE Min(wait_left[c], recheck)

(* AcquireReply.  Granted: the body runs.  Refused: a fail-fast caller, or *)
(* a waiter's last attempt (the script took it out of the queue), is done; *)
(* a waiter blocks next (or, in the broken variant, subscribes first).     *)
AcquireReply(c) ==
    /\ phase[c] = "acquiring"
    /\ \E m \in net :
        /\ m.c = c /\ m.kind \in {"granted", "refused"}
        /\ IF m.kind = "granted"
           THEN /\ phase' = [phase EXCEPT ![c] = "held"]
                /\ net' = net \ {m}
                /\ EnterBody(c)
                /\ UNCHANGED <<outcome, block_left>>
           ELSE IF m.n = 0
           THEN /\ phase' = [phase EXCEPT ![c] = "done"]
                /\ outcome' = [outcome EXCEPT ![c] = "not_acquired"]
                /\ net' = net \ {m}
                /\ UNCHANGED <<block_left, inbody, overlap>>
           ELSE IF Mutant = "subscribe_after_attempt"
           THEN /\ phase' = [phase EXCEPT ![c] = "enqueuing"]
                /\ block_left' = [block_left EXCEPT ![c] = BlockFor(c, m.n)]
                /\ net' = (net \ {m}) \cup {Msg("enqueue", c, wait_left[c])}
                /\ UNCHANGED <<outcome, inbody, overlap>>
           ELSE /\ phase' = [phase EXCEPT ![c] = "refused"]
                /\ block_left' = [block_left EXCEPT ![c] = BlockFor(c, m.n)]
                /\ net' = net \ {m}
                /\ UNCHANGED <<outcome, inbody, overlap>>
    /\ UNCHANGED <<wait_left, redis_vars, faults, recheck_in, foreign>>

(* Broken variant only: the separate subscription was answered. *)
EnqueueReply(c) ==
    /\ phase[c] = "enqueuing"
    /\ \E m \in net : m.c = c /\ m.kind = "enqueued" /\ net' = net \ {m}
    /\ phase' = [phase EXCEPT ![c] = "refused"]
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, faults, ghost_vars>>

(* Block: BLPOP on the waiter's wake list, for block_left. *)
Block(c) ==
    /\ phase[c] = "refused"
    /\ phase' = [phase EXCEPT ![c] = "blocked"]
    /\ net' = net \cup {Msg("blpop", c, 0)}
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, faults, ghost_vars>>

(* Wake: the block ended: BLPOP returned an element (woken), or its time   *)
(* ran out (BLPOP answered nil, or the client stopped reading a reply that *)
(* did not come: a late element is lost with the connection).  The next    *)
(* attempt follows at once.                                                *)
Wake(c) ==
    /\ phase[c] = "blocked"
    /\ \/ \E m \in net : m.c = c /\ m.kind = "element" /\ net' = net \ {m}
       \/ /\ block_left[c] = 0
          /\ net' = {m \in net : ~(m.c = c /\ m.kind \in {"blpop", "element"})}
    /\ phase' = [phase EXCEPT ![c] = "woken"]
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, faults, ghost_vars>>

(* Withdraw: a waiter stops waiting before its last attempt (cancelled, or *)
(* its attempt or its BLPOP failed): a blocked connection is discarded,    *)
(* and the leave script takes its place, its wake list and a late grant's  *)
(* key.                                                                    *)
Withdrawing(c, out, msgs) ==
    /\ phase' = [phase EXCEPT ![c] = "withdrawing"]
    /\ outcome' = [outcome EXCEPT ![c] = out]
    /\ net' = {m \in msgs : ~(m.c = c /\ m.kind \in {"blpop", "element"})}
              \cup {Msg("leave", c, 0)}

Withdraw(c) ==
    /\ Waits(c) /\ phase[c] \in {"acquiring", "refused", "blocked", "woken"}
    /\ \/ /\ "cancel" \in FaultKinds /\ faults < MaxFaults
          /\ Withdrawing(c, "not_acquired", net)
          /\ faults' = faults + 1
       \/ /\ phase[c] = "blocked"
          /\ \E m \in net : m.c = c /\ m.kind = "error" /\ Withdrawing(c, "failed", net \ {m})
          /\ UNCHANGED faults
    /\ UNCHANGED <<wait_left, block_left, redis_vars, ghost_vars>>

WithdrawReply(c) ==
    /\ phase[c] = "withdrawing"
    /\ \E m \in net : m.c = c /\ m.kind = "left" /\ net' = net \ {m}
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, faults, ghost_vars>>

(* The leave got no answer: the place expires by itself. *)
WithdrawFail(c) ==
    /\ phase[c] = "withdrawing"
    /\ \E m \in net : m.c = c /\ m.kind = "error" /\ net' = net \ {m}
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, faults, ghost_vars>>

(* AcquireFail: the attempt or its reply was lost; it may have run.  A     *)
(* fail-fast caller is done; a waiter withdraws (its place, and the key if *)
(* the attempt was granted).                                              *)
AcquireFail(c) ==
    /\ phase[c] = "acquiring"
    /\ \E m \in net :
        /\ m.c = c /\ m.kind = "error"
        /\ IF Waits(c)
           THEN Withdrawing(c, "failed", net \ {m})
           ELSE /\ phase' = [phase EXCEPT ![c] = "done"]
                /\ outcome' = [outcome EXCEPT ![c] = "failed"]
                /\ net' = net \ {m}
    /\ UNCHANGED <<wait_left, block_left, redis_vars, faults, ghost_vars>>

(* The body ends: release. *)
BodyDone(c) ==
    /\ phase[c] = "held"
    /\ phase' = [phase EXCEPT ![c] = "body_done"]
    /\ inbody' = inbody \ {c}
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, net, faults, recheck_in,
                   overlap, foreign>>

Release(c) ==
    /\ phase[c] = "body_done"
    /\ phase' = [phase EXCEPT ![c] = "releasing"]
    /\ net' = net \cup {Msg("release", c, 0)}
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, faults, ghost_vars>>

(* The release's reply: ok only if the script deleted our K. *)
ReleaseReply(c) ==
    /\ phase[c] = "releasing"
    /\ \E m \in net :
        /\ m.c = c /\ m.kind = "released"
        /\ net' = net \ {m}
        /\ outcome' = [outcome EXCEPT ![c] = IF m.n = 1 THEN "ok" ELSE "lost"]
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ UNCHANGED <<wait_left, block_left, redis_vars, faults, ghost_vars>>

ReleaseFail(c) ==
    /\ phase[c] = "releasing"
    /\ \E m \in net : m.c = c /\ m.kind = "error" /\ net' = net \ {m}
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = "failed"]
    /\ UNCHANGED <<wait_left, block_left, redis_vars, faults, ghost_vars>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Redis: each script runs atomically                                     *)
(***************************************************************************)

(* The waiting acquire, one script. *)
RedisAttempt ==
    \E m \in net :
      /\ m.kind = "attempt"
      /\ LET c    == m.c
             q    == Evict(queue)
             free == key_holder = None
             last == Waits(c) /\ m.n = 0
             mayTake == ~Waits(c) \/ q = <<>> \/ Head(q) = c
                        \/ Mutant = "grant_ignoring_queue"
             q2   == IF InQueue(q, c) /\ Mutant # "enqueue_twice" THEN q ELSE Append(q, c)
             \* another waiter is first: the re-check never outlives its place
             \* (it may end while that waiter holds the wake-up), nor the lease
             \* that waiter may take
             other_head == q2 # <<>> /\ Head(q2) # c
             recheck ==
                IF ~free
                THEN IF other_head /\ Mutant # "recheck_ignores_head_ticket"
                     THEN Min(key_ttl, ticket[Head(q2)])
                     ELSE key_ttl
                ELSE IF Mutant = "recheck_ignores_ttl" THEN ticket[Head(q2)]
                ELSE Min(ticket[Head(q2)], TTL)
         IN
         IF free /\ mayTake
         THEN /\ key_holder' = c
              /\ key_ttl' = TTL
              /\ queue' = Remove(q, c)
              /\ ticket' = [ticket EXCEPT ![c] = 0]
              /\ wake' = [wake EXCEPT ![c] = FALSE]
              /\ net' = (net \ {m}) \cup Reply("granted", c, 0)
              /\ UNCHANGED recheck_in
         ELSE IF ~Waits(c)
         THEN /\ net' = (net \ {m}) \cup Reply("refused", c, 0)
              /\ UNCHANGED <<key_holder, key_ttl, queue, ticket, wake, recheck_in>>
         ELSE IF last
         THEN \* the last attempt, refused, leaves the queue in the same script
              /\ queue' = Remove(q, c)
              /\ ticket' = [ticket EXCEPT ![c] = 0]
              /\ wake' = [wake EXCEPT ![c] = FALSE]
              /\ net' = (net \ {m}) \cup Reply("refused", c, 0)
              /\ UNCHANGED <<key_holder, key_ttl, recheck_in>>
         ELSE IF Mutant = "subscribe_after_attempt"
         THEN \* refuses without enqueueing: the client subscribes next
              LET rc == IF ~free THEN key_ttl ELSE TTL IN
              /\ net' = (net \ {m}) \cup Reply("refused", c, rc)
              /\ recheck_in' = [recheck_in EXCEPT ![c] = rc]
              /\ UNCHANGED <<key_holder, key_ttl, queue, ticket, wake>>
         ELSE /\ queue' = q2
              \* the expiry never moves earlier: another waiter's re-check
              \* counts on it
              /\ ticket' = [ticket EXCEPT ![c] =
                               IF Mutant = "ticket_may_shrink" THEN m.n
                               ELSE IF m.n > @ THEN m.n ELSE @]
              /\ net' = (net \ {m}) \cup Reply("refused", c, recheck)
              /\ recheck_in' = [recheck_in EXCEPT ![c] = recheck]
              /\ UNCHANGED <<key_holder, key_ttl, wake>>
    /\ UNCHANGED <<client_vars, faults, inbody, overlap, foreign>>

(* Broken variant only: the separate subscription enqueues, no re-check. *)
RedisEnqueue ==
    \E m \in net :
      /\ m.kind = "enqueue"
      /\ LET q == Evict(queue) IN
         queue' = IF InQueue(q, m.c) THEN q ELSE Append(q, m.c)
      /\ ticket' = [ticket EXCEPT ![m.c] = m.n]
      /\ net' = (net \ {m}) \cup Reply("enqueued", m.c, 0)
    /\ UNCHANGED <<client_vars, key_holder, key_ttl, wake, faults, ghost_vars>>

(* BLPOP finds an element: it pops it and answers. *)
RedisPop ==
    \E m \in net :
      /\ m.kind = "blpop" /\ wake[m.c]
      /\ wake' = [wake EXCEPT ![m.c] = FALSE]
      /\ net' = (net \ {m}) \cup Reply("element", m.c, 0)
    /\ UNCHANGED <<client_vars, key_holder, key_ttl, queue, ticket, faults, ghost_vars>>

(* The release.  Broken variants: a plain DEL (any token); the wake-up     *)
(* pushed by one command and K deleted by the next.                       *)
RedisRelease ==
    \E m \in net :
      /\ m.kind = "release"
      /\ LET c    == m.c
             q    == Evict(queue)
             mine == key_holder = c
             dels == IF Mutant = "release_plain_del" THEN key_holder # None ELSE mine
         IN
         IF Mutant = "notify_before_delete"
         THEN /\ wake' = IF mine THEN WakeHead(q) ELSE wake
              /\ queue' = q
              /\ net' = (net \ {m}) \cup {Msg("release_del", c, 0)}
              /\ UNCHANGED <<key_holder, key_ttl, foreign>>
         ELSE /\ key_holder' = IF dels THEN None ELSE key_holder
              /\ key_ttl' = IF dels THEN 0 ELSE key_ttl
              /\ wake' = IF dels THEN WakeHead(q) ELSE wake
              /\ queue' = q
              /\ foreign' = (foreign \/ (dels /\ ~mine))
              /\ net' = (net \ {m}) \cup Reply("released", c, IF dels THEN 1 ELSE 0)
    /\ UNCHANGED <<client_vars, ticket, faults, recheck_in, inbody, overlap>>

(* Broken variant only: the release's second command. *)
RedisReleaseDel ==
    \E m \in net :
      /\ m.kind = "release_del"
      /\ LET mine == key_holder = m.c IN
         /\ key_holder' = IF mine THEN None ELSE key_holder
         /\ key_ttl' = IF mine THEN 0 ELSE key_ttl
         /\ net' = (net \ {m}) \cup Reply("released", m.c, IF mine THEN 1 ELSE 0)
    /\ UNCHANGED <<client_vars, queue, ticket, wake, faults, ghost_vars>>

(* Leave the queue: drop our place and wake list; free K if a late grant   *)
(* gave it to us; if we were the head (the one a release wakes) and K is   *)
(* free, or we just freed it, pass the wake-up on to the new head.  While  *)
(* K is held, its release will wake the new head.                         *)
RedisLeave ==
    \E m \in net :
      /\ m.kind = "leave"
      /\ LET c    == m.c
             q    == Evict(queue)
             q2   == Remove(q, c)
             was_head == q # <<>> /\ Head(q) = c
             dels == IF Mutant = "leave_deletes_any_key" THEN key_holder # None
                     ELSE key_holder = c
             w2   == [wake EXCEPT ![c] = FALSE]
         IN
         /\ queue' = q2
         /\ ticket' = [ticket EXCEPT ![c] = 0]
         /\ wake' = IF ((was_head /\ key_holder = None) \/ dels) /\ q2 # <<>>
                       /\ Mutant # "leave_drops_wakeup"
                    THEN [w2 EXCEPT ![Head(q2)] = TRUE] ELSE w2
         /\ key_holder' = IF dels THEN None ELSE key_holder
         /\ key_ttl' = IF dels THEN 0 ELSE key_ttl
         /\ foreign' = (foreign \/ (dels /\ key_holder # c))
         /\ net' = (net \ {m}) \cup Reply("left", c, 0)
    /\ UNCHANGED <<client_vars, faults, recheck_in, inbody, overlap>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Environment                                                            *)
(***************************************************************************)

(* What is due happens before time moves on: a block's end, the step that  *)
(* follows a refusal or a wake-up, the release after the body.            *)
Due(c) == phase[c] \in {"refused", "woken", "body_done"}
          \/ (phase[c] = "blocked" /\ block_left[c] = 0)

Tick ==
    /\ \A c \in Clients : ~Due(c)
    /\ key_ttl' = Dec(key_ttl)
    /\ key_holder' = IF key_ttl <= 1 THEN None ELSE key_holder
    /\ ticket' = [c \in Clients |-> Dec(ticket[c])]
    /\ wait_left' = [c \in Clients |->
                       IF StillWaiting(c) THEN Dec(wait_left[c]) ELSE wait_left[c]]
    /\ block_left' = [c \in Clients |->
                        IF phase[c] = "blocked" THEN Dec(block_left[c]) ELSE block_left[c]]
    /\ recheck_in' = [c \in Clients |-> Dec(recheck_in[c])]
    /\ UNCHANGED <<phase, outcome, queue, wake, net, faults, inbody, overlap, foreign>>

(* A fault: the connection fails; the request is lost, or it ran and its   *)
(* reply is lost; the client sees an error (its *Fail action; a broken     *)
(* BLPOP ends the wait: Withdraw).  A lost message of a client that no longer reads *)
(* it is just gone.                                                       *)
Drop ==
    /\ "drop" \in FaultKinds /\ faults < MaxFaults
    /\ \E m \in net :
        /\ m.kind # "error"
        /\ LET reader == CASE m.kind \in {"attempt", "enqueue", "blpop", "release",
                                          "release_del", "leave"} ->
                                 CASE m.kind = "attempt" -> "acquiring"
                                   [] m.kind = "enqueue" -> "enqueuing"
                                   [] m.kind = "blpop" -> "blocked"
                                   [] m.kind = "leave" -> "withdrawing"
                                   [] OTHER -> "releasing"
                             [] OTHER -> Reads(m.kind)
           IN net' = (net \ {m}) \cup (IF phase[m.c] = reader /\ m.kind # "enqueue"
                                        THEN {Msg("error", m.c, 0)} ELSE {})
    /\ faults' = faults + 1
    /\ UNCHANGED <<client_vars, redis_vars, ghost_vars>>

(* A client dies: nothing more from it; its connection closes (a blocked  *)
(* BLPOP with it); what it sent before may still run.                     *)
Crash ==
    /\ "crash" \in FaultKinds /\ faults < MaxFaults
    /\ \E c \in Mortal :
        /\ phase[c] \notin {"idle", "done", "dead"}
        /\ phase' = [phase EXCEPT ![c] = "dead"]
        /\ inbody' = inbody \ {c}
        /\ net' = {m \in net : ~(m.c = c /\ m.kind \in {"blpop"} \cup Replies)}
    /\ faults' = faults + 1
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, recheck_in, overlap, foreign>>

ClientStep ==
    \E c \in Clients :
        \/ Acquire(c)
        \/ AcquireReply(c)
        \/ AcquireFail(c)
        \/ EnqueueReply(c)
        \/ Block(c)
        \/ Wake(c)
        \/ Withdraw(c)
        \/ WithdrawReply(c)
        \/ WithdrawFail(c)
        \/ BodyDone(c)
        \/ Release(c)
        \/ ReleaseReply(c)
        \/ ReleaseFail(c)

EnvStep ==
    \/ RedisAttempt
    \/ RedisEnqueue
    \/ RedisPop
    \/ RedisRelease
    \/ RedisReleaseDel
    \/ RedisLeave
    \/ Tick
    \/ Drop
    \/ Crash

Next == ClientStep \/ EnvStep

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(***************************************************************************)
(* Properties                                                             *)
(***************************************************************************)

TypeOK ==
    /\ phase \in [Clients -> Phases]
    /\ outcome \in [Clients -> Outcomes]
    /\ wait_left \in [Clients -> 0..MaxWait]
    /\ block_left \in [Clients -> 0..MaxTime]
    /\ key_holder \in Clients \cup {None}
    /\ key_ttl \in 0..TTL
    /\ (key_holder = None) <=> (key_ttl = 0)
    \* one place per waiter: a waiter that attempts again keeps its place
    /\ queue \in Seq(Waiting)
    /\ \A i, j \in 1..Len(queue) : i # j => queue[i] # queue[j]
    /\ ticket \in [Clients -> 0..MaxWait]
    /\ wake \in [Clients -> BOOLEAN]
    /\ \A m \in net : m.kind \in Kinds /\ m.c \in Clients
    /\ faults \in 0..MaxFaults
    /\ recheck_in \in [Clients -> 0..MaxTime]

(* Mutual exclusion of successful sections: two sections that both       *)
(* finished ok were never in their bodies at the same time.               *)
NoOverlappingSuccess ==
    \A c, d \in Clients :
        (c # d /\ outcome[c] = "ok" /\ outcome[d] = "ok") => d \notin overlap[c]

(* No script deletes a K holding another client's token. *)
NoForeignWrite == ~foreign

(* No lost wake-up: while K is free and the waiter at the head of its     *)
(* queue is blocked, a wake-up is on its way to it (in its wake list, in   *)
(* BLPOP's reply, or an error: the waiter withdraws, passing it on), or    *)
(* the re-check instant its last refusal gave it has come (it re-checks    *)
(* within one round trip).  That instant is K's expiry as the refusal saw  *)
(* it, or the end of the place of the waiter ahead of it: a holder that    *)
(* died, or a head waiter whose place ended while it held the wake-up, is  *)
(* waited out; a release is never missed.                                  *)
WakePending(c) == wake[c] \/ \E m \in net : m.c = c /\ m.kind \in {"element", "error"}

NoLostWakeup ==
    \A c \in Waiting :
        (phase[c] = "blocked" /\ key_holder = None /\ IsHead(c))
            => (WakePending(c) \/ recheck_in[c] = 0)

(* A waiter returns by its deadline: time never moves past the deadline   *)
(* of a blocked waiter (a block never outlasts the wait).  What follows    *)
(* the deadline is at most the attempt then in flight and one last attempt *)
(* (life 0: refused, it leaves the queue in the same script).              *)
ReturnsByDeadline ==
    [][\A c \in Waiting : (Tick /\ phase[c] = "blocked") => wait_left[c] > 0]_vars

(* FIFO: Redis grants a waiting caller K only when no live ticket of       *)
(* another waiter is ahead of it in the queue (all of them were granted,   *)
(* left or expired).  A fail-fast caller is not bound by it.              *)
Ahead(c) ==
    LET idx == {i \in 1..Len(queue) : queue[i] = c}
        lim == IF idx = {} THEN Len(queue) + 1 ELSE CHOOSE i \in idx : TRUE
    IN {queue[i] : i \in {j \in 1..Len(queue) : j < lim /\ ticket[queue[j]] > 0}}

GrantsInArrivalOrder ==
    [][\A c \in Waiting : (key_holder' = c /\ key_holder # c) => Ahead(c) = {}]_vars

(* Reachability probes: TLC must violate them. *)
ProbeWokenOnFreeKey ==     \* a blocked head waiter has a wake-up on a free key
    ~\E c \in Waiting : phase[c] = "blocked" /\ key_holder = None /\ IsHead(c)
                        /\ WakePending(c)
ProbeWaitedOut ==          \* ... or none: its re-check instant has come (a holder died)
    ~\E c \in Waiting : phase[c] = "blocked" /\ key_holder = None /\ IsHead(c)
                        /\ ~WakePending(c)

NoFaults == {}
WaitersOnly == Waiting
CancelOnly == {"cancel"}

Sym == Permutations(Waiting)

(* What TLC compares states by: a countdown nothing reads any more (the     *)
(* wait of a client no longer waiting, the block of one not blocked, the   *)
(* re-check of one not waiting) reads 0, so that states differing only in *)
(* it are one state.                                                       *)
Canon ==
    LET live(c) == phase[c] \in {"acquiring", "enqueuing", "refused", "blocked", "woken"}
    IN <<phase, outcome,
         [c \in Clients |-> IF StillWaiting(c) THEN wait_left[c] ELSE 0],
         [c \in Clients |-> IF phase[c] \in {"enqueuing", "refused", "blocked"}
                            THEN block_left[c] ELSE 0],
         redis_vars, net, faults,
         [c \in Clients |-> IF live(c) /\ Waits(c) THEN recheck_in[c] ELSE 0],
         inbody, overlap, foreign>>

(* Models that narrow the faults (FaultKinds <- ...). *)
CrashOnly == {"crash"}
DropOnly  == {"drop"}
=============================================================================
