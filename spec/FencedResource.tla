--------------------------- MODULE FencedResource ---------------------------
(***************************************************************************)
(* The lock of DistLock.tla and a resource fenced by distlock.fencing.     *)
(*                                                                         *)
(* Every action of the lock, faults included, is the lock's own: this      *)
(* module EXTENDS DistLock and takes its Next as it is.  Beside it, one    *)
(* resource and its guard.  A section that was granted a fence may write  *)
(* at any point of its body (or while it holds its manual handle), as     *)
(* often as MaxWrites allows: with its lease valid, or past it, starved,   *)
(* its key expired or lost by Redis and taken by another section: nothing *)
(* about the lease gates a write.  Each write is one transaction at the    *)
(* guard: the fence is checked against the largest fence the resource has  *)
(* admitted and recorded, in the same transaction as the write (the row   *)
(* stays locked until commit, so no other admission comes in between):    *)
(* admitted iff fence >= that largest fence, else nothing is written      *)
(* (StaleFenceError).  The resource's history (hist) is the admitted      *)
(* writes in commit order.                                                 *)
(*                                                                         *)
(* The fences are the lock's: the counter, resent acquires, key loss and   *)
(* CounterSurvives are DistLock.tla's (FloorModelled below: the clock's    *)
(* floor under the fences when Redis loses the counter).                  *)
(*                                                                         *)
(* GuardMutant names a broken guard ("none" for distlock.fencing's).       *)
(***************************************************************************)
EXTENDS DistLock

CONSTANTS
    MaxWrites,    \* writes a section sends to the resource (admitted or refused)
    GuardMutant   \* "none", "strict" (admits fence > largest only) or "split" (the
                  \* check commits in one transaction, the write in a later one)

ASSUME
    /\ MaxWrites \in Nat \ {0}
    /\ GuardMutant \in {"none", "strict", "split"}

VARIABLES
    writes,     \* writes[c]: the writes c's section has sent (admitted or refused)
    res_fence,  \* the guard's record: the largest fence admitted at the resource (0: none)
    hist,       \* the resource's history: the admitted writes in commit order, [tok, fence]
    checked     \* "split" only: c's check passed and its write has not run yet

(* The clock floor under the fences.  Where DistLock.tla models it (its   *)
(* variant "no_fence_floor" exists), a lost counter (CounterSurvives =    *)
(* FALSE) leaves grants counting on from the floor, above every fence      *)
(* issued before, and "no_fence_floor" restarts it at 0; where it does not, *)
(* a lost counter restarts at 0 whatever the variant.  The cfgs take the   *)
(* two below ("CounterSurvives <- LossKeepsCounter", "Mutant <- NoFloor"),   *)
(* so they pick the floor up where DistLock.tla has it.                    *)
FloorModelled == "no_fence_floor" \in Mutants
\* the holding models' CounterSurvives: with the floor modelled, FALSE (a restart loses the
\* counter, grants count on from the floor); without it, TRUE (a loss that keeps the
\* counter, which stands for the floor: see spec/README.md)
LossKeepsCounter == ~FloorModelled
\* the lock with no floor under its fences
NoFloor == IF FloorModelled THEN "no_fence_floor" ELSE "none"

res_vars == <<writes, res_fence, hist, checked>>
fvars    == <<vars, res_vars>>

(* The guard's comparison: a fence at least the largest admitted (the same *)
(* fence again is a second write of the same section).                    *)
Admits(f, rec) == IF GuardMutant = "strict" THEN f > rec ELSE f >= rec

(* The write commits: the record keeps the largest fence admitted. *)
Admit(c) ==
    /\ res_fence' = Max(res_fence, fence[c])
    /\ hist' = Append(hist, [tok |-> token[c], fence |-> fence[c]])

FInit ==
    /\ Init
    /\ writes = [c \in Clients |-> 0]
    /\ res_fence = 0
    /\ hist = <<>>
    /\ checked = [c \in Clients |-> FALSE]

(* A section in its body (or holding its handle) writes: one transaction  *)
(* that checks its fence and records it with the write (admitted), or     *)
(* writes nothing (refused: StaleFenceError).  "split": the check alone,  *)
(* in a transaction of its own; the write follows in Apply.               *)
Write(c) ==
    /\ phase[c] = "held" /\ fence[c] > 0 /\ writes[c] < MaxWrites /\ ~checked[c]
    /\ writes' = [writes EXCEPT ![c] = @ + 1]
    /\ IF GuardMutant = "split"
       THEN /\ checked' = [checked EXCEPT ![c] = Admits(fence[c], res_fence)]
            /\ UNCHANGED <<res_fence, hist>>
       ELSE /\ IF Admits(fence[c], res_fence) THEN Admit(c) ELSE UNCHANGED <<res_fence, hist>>
            /\ UNCHANGED checked
    /\ UNCHANGED vars

(* "split": the write whose check passed, and the record of its fence (the *)
(* larger of the two), in a later transaction: other sections' writes may *)
(* commit in between.                                                     *)
Apply(c) ==
    /\ checked[c] /\ phase[c] = "held"
    /\ checked' = [checked EXCEPT ![c] = FALSE]
    /\ Admit(c)
    /\ UNCHANGED writes
    /\ UNCHANGED vars

ResourceStep(c) == Write(c) \/ Apply(c)

(* The lock's steps leave the resource alone; a new section (a new token) *)
(* starts with no write sent.                                              *)
LockStep ==
    /\ Next
    /\ writes' = [c \in Clients |-> IF token'[c] = token[c] THEN writes[c] ELSE 0]
    /\ checked' = [c \in Clients |-> checked[c] /\ token'[c] = token[c]]
    /\ UNCHANGED <<res_fence, hist>>

FNext == LockStep \/ (\E c \in Clients : ResourceStep(c))

FSpec == FInit /\ [][FNext]_fvars

-----------------------------------------------------------------------------
(***************************************************************************)
(* Properties                                                             *)
(***************************************************************************)

ResourceTypeOK ==
    /\ writes \in [Clients -> 0..MaxWrites]
    /\ res_fence \in Nat
    /\ hist \in Seq([tok : Tokens, fence : Nat \ {0}])
    /\ checked \in [Clients -> BOOLEAN]
    \* the record is the largest fence of the history
    /\ \A i \in 1..Len(hist) : hist[i].fence <= res_fence
    /\ res_fence = 0 \/ \E i \in 1..Len(hist) : hist[i].fence = res_fence

(* The resource's history is the history of a serial execution of the    *)
(* sections: no write is admitted with a fence smaller than one already   *)
(* admitted, and the writes of different sections never interleave (once *)
(* a later section's write is admitted, no earlier section's write is     *)
(* admitted after it: each section's admitted writes are one contiguous   *)
(* run of the history, never A, B, A).                                     *)
SerialHistory ==
    /\ \A i, j \in 1..Len(hist) : i < j => hist[i].fence <= hist[j].fence
    /\ \A i, j, k \in 1..Len(hist) :
          (i < j /\ j < k /\ hist[i].tok = hist[k].tok) => hist[j].tok = hist[i].tok

(* The writes of c's section the resource admitted. *)
AdmittedOf(c) == Cardinality({i \in 1..Len(hist) : hist[i].tok = token[c]})

(* c is in its body (or holds its handle) with its lease valid on its own *)
(* clock, and its grant is the latest Redis made.                         *)
LatestValid(c) ==
    /\ phase[c] = "held" /\ ~lost[c] /\ deadline_in[c] > 0
    /\ grants # <<>> /\ grants[Len(grants)].tok = token[c]

(* A write of such a holder is admitted: the guard refuses only stale     *)
(* writes, never the rightful holder's, its second write included.        *)
HolderAdmitted ==
    [][\A c \in Clients :
          (LatestValid(c) /\ writes'[c] = writes[c] + 1) => AdmittedOf(c)' = AdmittedOf(c) + 1
      ]_fvars

(***************************************************************************)
(* Reachability probes: invariants TLC must VIOLATE.                      *)
(***************************************************************************)
\* the latest holder, its lease valid, has had its second write admitted
ProbeHolderWroteTwice == ~\E c \in Clients : LatestValid(c) /\ AdmittedOf(c) = 2
\* a write of a section was refused, after another section's write was admitted
ProbeStaleRefused ==
    ~\E c \in Clients : writes[c] > AdmittedOf(c) /\ \E i \in 1..Len(hist) : hist[i].tok # token[c]

=============================================================================
