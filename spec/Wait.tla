-------------------------------- MODULE Wait --------------------------------
(***************************************************************************)
(* Waiting for a held lock: the handoff protocol of one key K.            *)
(*                                                                         *)
(* Redis keeps, beside K, a FIFO queue of waiter tokens (the list          *)
(* distlock:queue:{tag}:K), each waiter's place in it, which expires (the  *)
(* hash token -> expiry instant; here `ticket`, its remaining life), and   *)
(* one wake list per waiter (distlock:wake:{tag}:K:<token>; here a flag:   *)
(* non-empty).  An element in a wake list is a grant: K was handed to its  *)
(* waiter.  The scripts are the cases of the Redis* actions, each atomic:  *)
(*                                                                         *)
(*   attempt  drop expired places at the head; grant if K holds our token  *)
(*            (it was handed to us: its TTL is refreshed), or if K is free *)
(*            and (the queue is empty, or we are its head, or we do not    *)
(*            wait); else keep our place (or join at the tail), make it    *)
(*            last the wait we have left (never less than it had), empty   *)
(*            our wake list, and refuse with the time we may block before  *)
(*            re-checking; an attempt with no wait left is the last:       *)
(*            refused, it leaves the queue;                                *)
(*   BLPOP    pop our wake list, or block until it is pushed or the        *)
(*            block's time runs out;                                       *)
(*   release  if K holds our token: hand it, in the same script, to the    *)
(*            first live waiter (K holds that waiter's token with a fresh  *)
(*            TTL, the waiter leaves the queue, and its wake list gets the *)
(*            grant), or delete it if nobody waits;                        *)
(*   leave    (the withdrawal) drop our place and wake list, take back K   *)
(*            if it holds our token (a late grant, or a handoff we never   *)
(*            read), and hand K on to the new first live waiter if we      *)
(*            took it back, or were the head and K is free.                *)
(*                                                                         *)
(* Clients run one section each, with the core's actions (Section): the   *)
(* ones in Waiting wait up to MaxWait ticks, the others fail fast (one     *)
(* attempt; they may take a free key even while others wait).  A client    *)
(* starts at any moment, holds the key for any time (its lease may expire  *)
(* under it), releases it, or dies anywhere (a holder that dies leaves K   *)
(* to expire; a waiter that dies leaves its place, or a K handed to it, to *)
(* expire); a waiter may be cancelled (it withdraws).  Requests and        *)
(* replies take any time; a fault drops one (the client sees an error).   *)
(*                                                                         *)
(* Time: countdowns, no absolute clock.  key_ttl, ticket and recheck_in    *)
(* count Redis time; wait_left and block_left count the client's (no       *)
(* drift here: DistLock.tla checks the lease arithmetic under drift; a     *)
(* handed waiter's lease is anchored at the send of its last attempt,      *)
(* before the handoff: the late grant of DistLock.tla).                    *)
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
            \* the two the design names: a waiter that subscribes after its attempt;
            \* the grant pushed by one command and K deleted by the next (the head
            \* enters its body on a K that is not its own)
            "subscribe_after_attempt", "notify_before_delete",
            \* one per other property
            "block_past_deadline", "grant_ignoring_queue", "release_plain_del",
            "leave_deletes_any_key", "enqueue_twice",
            \* the release hands K on but pushes nothing: the waiter never learns
            "hand_without_wakeup",
            \* the attempt does not take a K holding its own token as a grant: a last
            \* attempt is refused while K waits for its caller
            "attempt_ignores_handoff",
            \* a refused attempt keeps the wake list: a grant whose K lapsed is read
            \* after the waiter queued again, and K handed to it again later
            "refusal_keeps_wake_list",
            \* the re-check time as first drafted: K's PTTL alone.  Refuted while a
            \* release pushes a plain wake-up (WakeUps: a head whose place ended
            \* holding it); with the handoff no longer (see spec/README.md)
            "recheck_ignores_head_ticket",
            \* a free K's re-check by the head's place alone: the head takes K and
            \* its lease ends before that place would have
            "recheck_ignores_ttl",
            \* a place set to end at now + the life the attempt carries, even if
            \* earlier than before (no cfg: see spec/README.md)
            "ticket_may_shrink",
            \* the leave does not hand on a K it takes back, nor a free K whose head
            \* leaves
            "leave_drops_wakeup",
            \* the leave hands on a K it takes back, but a free K whose head leaves
            \* stays free (the next waiter waits out the head's place)
            "leave_drops_head_wakeup",
            \* the leave does not take back a K that holds its token (a handoff it
            \* never read): K idles its whole TTL
            "leave_keeps_key",
            \* places never expire: a waiter that died blocks the queue for good
            "places_never_expire"}

(* A cfg may narrow the faults, or the clients that may die, by overriding *)
(* these definitions.                                                      *)
FaultKinds == {"drop", "crash", "cancel"}
Mortal == Clients

(* Patient waiters (a cfg overrides it): waiters whose wait outlasts any   *)
(* behaviour of the model, so that they give up only if never served.      *)
(* Every attempt of one carries MaxWait, the longest life of a place (the  *)
(* implementation's min(wait left, re-check, LONGEST_BLOCK_MS) +           *)
(* QUEUE_GRACE_MS, whatever the wait): its deadline never comes.  The      *)
(* liveness runs (WaiterServed) use them.  Their round trips fit in the   *)
(* grace (the implementation's assumption: QUEUE_GRACE_MS is room for the  *)
(* next attempt to arrive): no tick passes while an attempt of theirs, or  *)
(* its refusal, is in flight.                                             *)
Patient == {}

(* The place's life (a cfg overrides both).  With Grace > 0, the          *)
(* protocol as implemented: a refused attempt's place ends Grace ticks     *)
(* (QUEUE_GRACE_MS) after the longest block it allows, the shorter of the  *)
(* wait it carries, the re-check time and LongestBlock (LONGEST_BLOCK_MS), *)
(* and a block never lasts longer than LongestBlock: a waiter that died is *)
(* dropped LongestBlock + Grace ticks after its last attempt at the most,  *)
(* whatever its wait.  Grace = 0 (the safety runs): a place lasts the wait *)
(* its attempt carries, as before the grace; their properties hold either  *)
(* way, and the smaller state space checks more faults.                   *)
Grace == 0
LongestBlock == IF TTL > MaxWait THEN TTL ELSE MaxWait
One == 1

(* Handoff: a K let go is handed to the first live waiter (the lock's and  *)
(* the reentrant lock's protocol).  A cfg that overrides it with WakeUps   *)
(* checks the protocol of waiters that are woken instead and send their    *)
(* own attempt (a semaphore's, here with one permit, and a lock's waiter   *)
(* whose grants replicas must confirm): a K let go is deleted, and the     *)
(* first live waiter's wake list gets a plain wake-up.                     *)
Handoff == TRUE
WakeUps == FALSE

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
    foreign,      \* some script deleted a K holding another client's token
    lapsed        \* K expired while it held this client's token

client_vars == <<phase, outcome, wait_left, block_left>>
redis_vars  == <<key_holder, key_ttl, queue, ticket, wake>>
ghost_vars  == <<recheck_in, inbody, overlap, foreign, lapsed>>
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

(* A K let go (released, or taken back by a leave) goes to the first live  *)
(* waiter of q, the queue after eviction, if there is one: K holds its     *)
(* token with a fresh TTL (the one it registered with its place: every     *)
(* client of K uses the same), it leaves the queue, and its wake list gets *)
(* the grant (unless push is FALSE: a broken variant).  Else K is deleted. *)
(* wake0 and ticket0 are the lists and places before the hand (the caller's *)
(* own may already be gone).                                              *)
LetGo(q, wake0, ticket0, push) ==
    IF q = <<>> \/ ~Handoff
    THEN /\ key_holder' = None
         /\ key_ttl' = 0
         /\ queue' = q
         /\ ticket' = ticket0
         /\ wake' = IF q # <<>> /\ push THEN [wake0 EXCEPT ![Head(q)] = TRUE] ELSE wake0
    ELSE /\ key_holder' = Head(q)
         /\ key_ttl' = TTL
         /\ queue' = Tail(q)
         /\ ticket' = [ticket0 EXCEPT ![Head(q)] = 0]
         /\ wake' = IF push THEN [wake0 EXCEPT ![Head(q)] = TRUE] ELSE wake0

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
    /\ lapsed = [c \in Clients |-> FALSE]

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
    /\ LET left == IF ~Waits(c) THEN 0
                   ELSE IF phase[c] = "idle" \/ c \in Patient THEN MaxWait
                   ELSE wait_left[c]
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
    IF Mutant = "block_past_deadline" THEN recheck
    ELSE Min(Min(wait_left[c], recheck), LongestBlock)

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
    /\ UNCHANGED <<wait_left, redis_vars, faults, recheck_in, foreign, lapsed>>

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

(* Wake: the block ended.  BLPOP returned an element: K was handed to us  *)
(* (the release or leave that let it go gave it our token), and the body   *)
(* runs, as after a grant; our lease is anchored at the send of our last   *)
(* attempt, which came before the handoff.  Or its time ran out (BLPOP     *)
(* answered nil, or the client stopped reading a reply that did not come:  *)
(* a late element is lost with the connection; the next attempt, which     *)
(* follows at once, then finds K holding our token and is granted).       *)
(* With WakeUps an element is a plain wake-up: the next attempt follows.   *)
Wake(c) ==
    /\ phase[c] = "blocked"
    /\ \/ \E m \in net :
            /\ m.c = c /\ m.kind = "element"
            /\ net' = net \ {m}
            /\ IF Handoff
               THEN /\ phase' = [phase EXCEPT ![c] = "held"]
                    /\ EnterBody(c)
               ELSE /\ phase' = [phase EXCEPT ![c] = "woken"]
                    /\ UNCHANGED <<inbody, overlap>>
       \/ /\ block_left[c] = 0
          /\ net' = {m \in net : ~(m.c = c /\ m.kind \in {"blpop", "element"})}
          /\ phase' = [phase EXCEPT ![c] = "woken"]
          /\ UNCHANGED <<inbody, overlap>>
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, faults, recheck_in, foreign,
                   lapsed>>

(* Withdraw: a waiter stops waiting before its last attempt (cancelled, or *)
(* its attempt or its BLPOP failed): a blocked connection is discarded,    *)
(* and the leave script takes its place, its wake list, and K if a late    *)
(* grant or a handoff gave it to us (handing it on).                       *)
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
                   overlap, foreign, lapsed>>

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

(* A release that got no answer: the key may or may not be gone, and the     *)
(* section ends lost, as in DistLock.tla and the core.                      *)
ReleaseFail(c) ==
    /\ phase[c] = "releasing"
    /\ \E m \in net : m.c = c /\ m.kind = "error" /\ net' = net \ {m}
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = "lost"]
    /\ UNCHANGED <<wait_left, block_left, redis_vars, faults, ghost_vars>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Redis: each script runs atomically                                     *)
(***************************************************************************)

(* The waiting acquire, one script.  A K holding our token was handed to   *)
(* us (we timed out before reading the grant, or the attempt crossed it):  *)
(* granted, whatever else holds, the last attempt too.                    *)
RedisAttempt ==
    \E m \in net :
      /\ m.kind = "attempt"
      /\ LET c    == m.c
             q    == Evict(queue)
             free == key_holder = None
             ours == key_holder = c /\ Mutant # "attempt_ignores_handoff"
             last == Waits(c) /\ m.n = 0
             mayTake == ~Waits(c) \/ q = <<>> \/ Head(q) = c
                        \/ Mutant = "grant_ignoring_queue"
             q2   == IF InQueue(q, c) /\ Mutant # "enqueue_twice" THEN q ELSE Append(q, c)
             \* another waiter is first: the re-check never outlives the lease
             \* that waiter may take, nor its place (which a plain wake-up needed:
             \* with the handoff the model holds without it, see spec/README.md)
             other_head == q2 # <<>> /\ Head(q2) # c
             recheck ==
                IF ~free
                THEN IF other_head /\ Mutant # "recheck_ignores_head_ticket"
                     THEN Min(key_ttl, ticket[Head(q2)])
                     ELSE key_ttl
                ELSE IF Mutant = "recheck_ignores_ttl" THEN ticket[Head(q2)]
                ELSE Min(ticket[Head(q2)], TTL)
         IN
         IF ours \/ (free /\ mayTake)
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
              /\ LET life == IF Grace = 0 THEN m.n
                            ELSE Min(Min(m.n, recheck), LongestBlock) + Grace
                 IN ticket' = [ticket EXCEPT ![c] =
                                  IF Mutant = "ticket_may_shrink" THEN life
                                  ELSE IF life > @ THEN life ELSE @]
              \* a grant still in our wake list is one whose K lapsed (K does
              \* not hold our token): read after this attempt, it would start a
              \* body on a lease anchored after the handoff
              /\ wake' = IF Mutant = "refusal_keeps_wake_list" THEN wake
                         ELSE [wake EXCEPT ![c] = FALSE]
              /\ net' = (net \ {m}) \cup Reply("refused", c, recheck)
              /\ recheck_in' = [recheck_in EXCEPT ![c] = recheck]
              /\ UNCHANGED <<key_holder, key_ttl>>
    /\ UNCHANGED <<client_vars, faults, inbody, overlap, foreign, lapsed>>

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

(* The release: if K holds our token, let it go in the same script: hand  *)
(* it to the first live waiter, or delete it.  Broken variants: a plain    *)
(* DEL (any token); the grant pushed (and the head taken out of the queue) *)
(* by one command, K deleted by the next, not handed; K handed with        *)
(* nothing pushed.                                                         *)
RedisRelease ==
    \E m \in net :
      /\ m.kind = "release"
      /\ LET c    == m.c
             q    == Evict(queue)
             mine == key_holder = c
             dels == IF Mutant = "release_plain_del" THEN key_holder # None ELSE mine
         IN
         IF Mutant = "notify_before_delete"
         THEN /\ IF mine /\ q # <<>>
                 THEN /\ wake' = [wake EXCEPT ![Head(q)] = TRUE]
                      /\ ticket' = [ticket EXCEPT ![Head(q)] = IF Handoff THEN 0 ELSE @]
                      /\ queue' = IF Handoff THEN Tail(q) ELSE q
                 ELSE /\ queue' = q
                      /\ UNCHANGED <<wake, ticket>>
              /\ net' = (net \ {m}) \cup {Msg("release_del", c, 0)}
              /\ UNCHANGED <<key_holder, key_ttl, foreign>>
         ELSE /\ IF dels
                 THEN LetGo(q, wake, ticket, Mutant # "hand_without_wakeup")
                 ELSE /\ queue' = q
                      /\ UNCHANGED <<key_holder, key_ttl, ticket, wake>>
              /\ foreign' = (foreign \/ (dels /\ ~mine))
              /\ net' = (net \ {m}) \cup Reply("released", c, IF dels THEN 1 ELSE 0)
    /\ UNCHANGED <<client_vars, faults, recheck_in, inbody, overlap, lapsed>>

(* Broken variant only: the release's second command. *)
RedisReleaseDel ==
    \E m \in net :
      /\ m.kind = "release_del"
      /\ LET mine == key_holder = m.c IN
         /\ key_holder' = IF mine THEN None ELSE key_holder
         /\ key_ttl' = IF mine THEN 0 ELSE key_ttl
         /\ net' = (net \ {m}) \cup Reply("released", m.c, IF mine THEN 1 ELSE 0)
    /\ UNCHANGED <<client_vars, queue, ticket, wake, faults, ghost_vars>>

(* Leave the queue: drop our place and wake list; take back K if it holds  *)
(* our token (a grant that came after we stopped waiting, or a handoff we  *)
(* never read) and hand it on, as a release does; if we were the head (the *)
(* one a release hands K to) and K is free, hand it to the new head.      *)
(* While K is another's, its release hands it on.  Broken variant: K taken *)
(* back is deleted, and a free K stays free.                              *)
RedisLeave ==
    \E m \in net :
      /\ m.kind = "leave"
      /\ LET c    == m.c
             q    == Evict(queue)
             q2   == Evict(Remove(q, c))
             was_head == q # <<>> /\ Head(q) = c
             dels == IF Mutant = "leave_deletes_any_key" THEN key_holder # None
                     ELSE IF Mutant = "leave_keeps_key" THEN FALSE
                     ELSE key_holder = c
             head_free == was_head /\ key_holder = None
                          /\ Mutant # "leave_drops_head_wakeup"
             t2   == [ticket EXCEPT ![c] = 0]
             w2   == [wake EXCEPT ![c] = FALSE]
         IN
         /\ IF (head_free \/ dels) /\ q2 # <<>>
               /\ Mutant # "leave_drops_wakeup"
            THEN LetGo(q2, w2, t2, TRUE)
            ELSE /\ queue' = q2
                 /\ ticket' = t2
                 /\ wake' = w2
                 /\ key_holder' = IF dels THEN None ELSE key_holder
                 /\ key_ttl' = IF dels THEN 0 ELSE key_ttl
         /\ foreign' = (foreign \/ (dels /\ key_holder # c))
         /\ net' = (net \ {m}) \cup Reply("left", c, 0)
    /\ UNCHANGED <<client_vars, faults, recheck_in, inbody, overlap, lapsed>>

-----------------------------------------------------------------------------
(***************************************************************************)
(* Environment                                                            *)
(***************************************************************************)

(* What is due happens before time moves on: a block's end, the step that  *)
(* follows a refusal or a block's end, the release after the body.        *)
Due(c) == phase[c] \in {"refused", "woken", "body_done"}
          \/ (phase[c] = "blocked" /\ block_left[c] = 0)

Tick ==
    /\ \A c \in Clients : ~Due(c)
    \* a patient waiter's round trip (attempt and refusal) fits in the grace
    /\ ~\E m \in net : m.c \in Patient /\ m.kind \in {"attempt", "refused"}
    /\ key_ttl' = Dec(key_ttl)
    /\ key_holder' = IF key_ttl <= 1 THEN None ELSE key_holder
    /\ ticket' = IF Mutant = "places_never_expire" THEN ticket
                 ELSE [c \in Clients |-> Dec(ticket[c])]
    /\ wait_left' = [c \in Clients |->
                       IF StillWaiting(c) /\ c \notin Patient THEN Dec(wait_left[c])
                       ELSE wait_left[c]]
    /\ block_left' = [c \in Clients |->
                        IF phase[c] = "blocked" THEN Dec(block_left[c]) ELSE block_left[c]]
    /\ recheck_in' = [c \in Clients |-> Dec(recheck_in[c])]
    /\ lapsed' = IF key_holder # None /\ key_ttl <= 1
                 THEN [lapsed EXCEPT ![key_holder] = TRUE] ELSE lapsed
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
    /\ UNCHANGED <<outcome, wait_left, block_left, redis_vars, recheck_in, overlap, foreign,
                   lapsed>>

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

(* The same actions, of one client (the fairness of the liveness runs is  *)
(* per client); tests/test_parity_wait.py checks the two lists agree.    *)
ClientActs(c) ==
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

(* Fairness for the liveness runs: every live client takes the step it can *)
(* take (a dead one has none), Redis runs each script it can run, and time *)
(* passes.  Faults are never forced.                                      *)
Fairness ==
    /\ \A c \in Clients : WF_vars(ClientActs(c))
    /\ WF_vars(RedisAttempt) /\ WF_vars(RedisPop) /\ WF_vars(RedisRelease)
    /\ WF_vars(RedisLeave) /\ WF_vars(RedisEnqueue) /\ WF_vars(RedisReleaseDel)
    /\ WF_vars(Tick)

FairSpec == Spec /\ Fairness

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
    /\ ticket \in [Clients -> 0..(MaxWait + Grace)]
    /\ wake \in [Clients -> BOOLEAN]
    /\ \A m \in net : m.kind \in Kinds /\ m.c \in Clients
    /\ faults \in 0..MaxFaults
    /\ recheck_in \in [Clients -> 0..MaxTime]
    /\ lapsed \in [Clients -> BOOLEAN]

(* Mutual exclusion of successful sections: two sections that both       *)
(* finished ok were never in their bodies at the same time.               *)
NoOverlappingSuccess ==
    \A c, d \in Clients :
        (c # d /\ outcome[c] = "ok" /\ outcome[d] = "ok") => d \notin overlap[c]

(* No script deletes a K holding another client's token. *)
NoForeignWrite == ~foreign

(* No lost wake-up.  While K is free and the waiter at the head of its     *)
(* queue is blocked, a wake-up is on its way to it (an error: the waiter   *)
(* withdraws, handing K on), or the re-check instant its last refusal gave *)
(* it has come (it re-checks within one round trip).  That instant is K's  *)
(* expiry as the refusal saw it, or the end of the place of the waiter     *)
(* ahead of it: a holder that died is waited out; a release is never       *)
(* missed, since it hands K on.  And a blocked waiter that K was handed to *)
(* learns it: the grant is in its wake list or BLPOP's reply (or an error  *)
(* is: it withdraws, handing K on), or its re-check has come (its next     *)
(* attempt finds K holding its token).                                    *)
WakePending(c) == wake[c] \/ \E m \in net : m.c = c /\ m.kind \in {"element", "error"}

NoLostWakeup ==
    \A c \in Waiting :
        /\ (phase[c] = "blocked" /\ key_holder = None /\ IsHead(c))
              => (WakePending(c) \/ recheck_in[c] = 0)
        /\ (phase[c] = "blocked" /\ key_holder = c)
              => (WakePending(c) \/ recheck_in[c] = 0)

(* A body runs on the client's own K: K holds its token, or held it and   *)
(* expired (the lease the client keeps ends it: DistLock.tla).  Refutes a *)
(* grant pushed before K is handed over.                                  *)
HeldInBody == \A c \in inbody : key_holder = c \/ lapsed[c]

(* A caller told it did not get K does not hold it: the refusal that ends *)
(* a section (life 0: a fail-fast caller's, or a waiter's last attempt,    *)
(* out of the queue in the same script) never goes to a caller K holds,    *)
(* and nothing hands K to it after (it has no place).  So K handed to a    *)
(* waiter is never left for its TTL while the waiter gives up.  (A         *)
(* cancelled waiter is not told "not acquired", and may hold K: its        *)
(* attempt, still in flight, can run after its leave.)                     *)
NoOrphanGrant ==
    \A m \in net : (m.kind = "refused" /\ m.n = 0) => key_holder # m.c

(* A grant on its way to a waiter (in its wake list, or BLPOP's reply)    *)
(* came after the waiter's last attempt: the waiter is out of the queue.  *)
(* Every attempt that leaves it in the queue empties its wake list, so a   *)
(* grant it reads was pushed after that attempt was sent, and the lease    *)
(* the client anchors at that send ends before K's.  Refutes a grant whose *)
(* K lapsed, kept across the waiter's next attempt.                       *)
HasGrant(c) == wake[c] \/ \E m \in net : m.c = c /\ m.kind = "element"

NoStaleGrant == Handoff => \A c \in Waiting : HasGrant(c) => ~InQueue(queue, c)

(* A waiter returns by its deadline: time never moves past the deadline   *)
(* of a blocked waiter (a block never outlasts the wait).  What follows    *)
(* the deadline is at most the attempt then in flight and one last attempt *)
(* (life 0: refused, it leaves the queue in the same script).              *)
ReturnsByDeadline ==
    [][\A c \in Waiting : (Tick /\ phase[c] = "blocked") => wait_left[c] > 0]_vars

(* FIFO: Redis grants a waiting caller K (by its attempt, or by a handoff) *)
(* only when no live place of another waiter is ahead of it in the queue   *)
(* (all of them were granted, left or expired; one that leaves in the same *)
(* script is not ahead).  A fail-fast caller is not bound by it.          *)
Ahead(c) ==
    LET idx == {i \in 1..Len(queue) : queue[i] = c}
        lim == IF idx = {} THEN Len(queue) + 1 ELSE CHOOSE i \in idx : TRUE
    IN {queue[i] : i \in {j \in 1..Len(queue) : j < lim /\ ticket'[queue[j]] > 0}}

GrantsInArrivalOrder ==
    [][\A c \in Waiting : (key_holder' = c /\ key_holder # c) => Ahead(c) = {}]_vars

(* A withdrawal gives back K if it holds the waiter's token (a handoff it  *)
(* never read): once its leave script has run, K does not hold that token  *)
(* (an attempt of the waiter still in flight may take K again later: the   *)
(* core's cleanup release gives that one back).  So a key handed to a      *)
(* waiter that gave up never idles for its TTL.                            *)
LeaveRan(c) ==
    Msg("leave", c, 0) \in net /\ Msg("leave", c, 0) \notin net' /\ faults' = faults

LeaveGivesBack ==
    [][\A c \in Waiting : LeaveRan(c) => key_holder' # c]_vars

(* Liveness: every patient waiter that is alive is served: under fairness  *)
(* (FairSpec) its section leaves the waiting phases, by being granted K    *)
(* (a patient waiter never reaches its deadline; with crashes only, it has *)
(* no other way out) or by dying.  A waiter that died is in nobody's way   *)
(* for longer than the life of its place (MaxWait ticks after its last     *)
(* attempt: TypeOK bounds ticket) or of a K handed to it (its TTL: TypeOK  *)
(* bounds key_ttl); this says nothing else holds a live waiter up.        *)
WaiterServed ==
    \A c \in Patient : StillWaiting(c) ~> ~StillWaiting(c)

(* Reachability probes: TLC must violate them. *)
ProbeWokenOnFreeKey ==     \* WakeUps: a blocked head holds a wake-up on a free K
    ~\E c \in Waiting : phase[c] = "blocked" /\ key_holder = None /\ IsHead(c)
                        /\ wake[c]
ProbeHanded ==             \* a blocked waiter that K was handed to, the grant on its way
    ~\E c \in Waiting : phase[c] = "blocked" /\ key_holder = c /\ WakePending(c)
ProbeWaitedOut ==          \* a blocked head on a free key, nothing coming: its re-check
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
         inbody, overlap, foreign, lapsed>>

(* Models that narrow the faults (FaultKinds <- ...). *)
CrashOnly == {"crash"}
DropOnly  == {"drop"}
=============================================================================
