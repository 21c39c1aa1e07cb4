----------------------------- MODULE MultiLock -----------------------------
(***************************************************************************)
(* Several locks held together (distlock.group, Lock.hold_many).          *)
(*                                                                         *)
(* Each client wants a set of locks, named in an order of its own, and     *)
(* takes them one after another, waiting (retrying) while the next one is  *)
(* held.  A client that holds locks while it waits keeps renewing them, so *)
(* no lease runs out under it: expiry cannot break a circular wait, and    *)
(* the model leaves it out.  After its body a client releases everything   *)
(* and may start another round.                                           *)
(*                                                                         *)
(* Mutant = "none" is distlock: a group is taken in sorted key order       *)
(* (distlock.group.acquisition_order).  The broken variants:               *)
(*   "caller_order": locks taken in the caller's order: TLC finds the     *)
(*       deadlock (two clients each holding what the other waits for);    *)
(*   "take_held": a take that ignores the holder (SET without NX):        *)
(*       Exclusive fails;                                                 *)
(*   "keep_on_finish": a client that does not release after its body:     *)
(*       with the deadlock check off, AllFinish fails.                    *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Wants,    \* Wants[c]: the locks client c names, in its own order (distinct naturals)
    Rounds,   \* groups each client takes, one after another
    Mutant    \* "none" or the name of a broken variant

\* The model's clients (a TLC config cannot write sequences: it substitutes this one).
\* Two pairs named in opposite orders, and a longer group overlapping both.
FourClients == << <<1, 2>>, <<2, 1>>, <<3, 2, 1>>, <<2, 3>> >>

Clients == 1..Len(Wants)
Locks   == UNION {{Wants[c][i] : i \in 1..Len(Wants[c])} : c \in Clients}
None    == 0

ASSUME /\ \A c \in Clients : Len(Wants[c]) > 0
       /\ None \notin Locks /\ Rounds \in Nat \ {0}
       /\ Mutant \in {"none", "caller_order", "take_held", "keep_on_finish"}

\* The order client c takes its locks in.
Order(c) == IF Mutant = "caller_order" THEN Wants[c] ELSE SortSeq(Wants[c], LAMBDA a, b : a < b)

VARIABLES
    holder,   \* holder[l]: the client holding lock l, or None
    taken,    \* taken[c]: how many of Order(c) client c holds (a prefix of it)
    phase,    \* phase[c]: "taking", "body" or "done"
    round     \* round[c]: groups client c has finished

vars == <<holder, taken, phase, round>>

TypeOK ==
    /\ holder \in [Locks -> Clients \cup {None}]
    /\ taken \in [Clients -> Nat]
    /\ phase \in [Clients -> {"taking", "body", "done"}]
    /\ round \in [Clients -> 0..Rounds]

Init ==
    /\ holder = [l \in Locks |-> None]
    /\ taken = [c \in Clients |-> 0]
    /\ phase = [c \in Clients |-> "taking"]
    /\ round = [c \in Clients |-> 0]

\* Take the next lock of the group if it is free (SET NX succeeds); otherwise the
\* client keeps retrying, which is this action staying disabled.
Take(c) ==
    /\ phase[c] = "taking"
    /\ LET l == Order(c)[taken[c] + 1] IN
        /\ holder[l] = None \/ Mutant = "take_held"
        /\ holder' = [holder EXCEPT ![l] = c]
        /\ taken' = [taken EXCEPT ![c] = @ + 1]
        /\ phase' = [phase EXCEPT ![c] =
                        IF taken[c] + 1 = Len(Order(c)) THEN "body" ELSE "taking"]
        /\ UNCHANGED round

\* The body is done: release every lock of the group (newest first; all at once here,
\* since nothing can take a lock between two releases of the same client that matters
\* for the circular wait), and start the next round or finish.
Finish(c) ==
    /\ phase[c] = "body"
    /\ holder' = IF Mutant = "keep_on_finish" THEN holder
                 ELSE [l \in Locks |-> IF holder[l] = c THEN None ELSE holder[l]]
    /\ taken' = [taken EXCEPT ![c] = 0]
    /\ round' = [round EXCEPT ![c] = @ + 1]
    /\ phase' = [phase EXCEPT ![c] = IF round[c] + 1 = Rounds THEN "done" ELSE "taking"]

\* Every client done: stutter, so that TLC's deadlock check reports only circular waits.
Terminated ==
    /\ \A c \in Clients : phase[c] = "done"
    /\ UNCHANGED vars

Next == Terminated \/ \E c \in Clients : Take(c) \/ Finish(c)

Spec == Init /\ [][Next]_vars /\ \A c \in Clients : WF_vars(Take(c)) /\ WF_vars(Finish(c))

\* A lock is held by at most one client, and a client holds exactly its prefix.
Exclusive ==
    \A c \in Clients :
        phase[c] # "done" => {l \in Locks : holder[l] = c} = {Order(c)[i] : i \in 1..taken[c]}

\* Liveness: every client eventually finishes all its rounds.
AllFinish == \A c \in Clients : <>(phase[c] = "done")
=============================================================================
