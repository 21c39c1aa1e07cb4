------------------------------ MODULE Election ------------------------------
(***************************************************************************)
(* Leader election on the lock's lease (Election(client, name)).           *)
(*                                                                         *)
(* A candidate's campaign is a waiting section of the lock with the        *)
(* handoff: this module EXTENDS DistLock and takes every action of the     *)
(* lock as it is, with Handoff on (every section waits: campaign(wait_ms)) *)
(* and every section run/hold with a heartbeat (a leadership handle is     *)
(* renewed while held).  The lease, its renewals, the loss signal, the     *)
(* queue, the handoff, the fences and every fault are DistLock.tla's:      *)
(*                                                                         *)
(*   campaign(wait_ms)   Acquire, AcquireReply, AcquireFail, Wake,         *)
(*                       Withdraw (the deadline: None)                     *)
(*   the held handle     RenewSend, RenewReply, RenewFail, LeaseTimeout    *)
(*   handle.resign()     BodyDone, Release, ReleaseReply, ReleaseFail      *)
(*                       (the release hands the lease to the next          *)
(*                       campaigner, with a new fence)                     *)
(*                                                                         *)
(* What this module adds:                                                  *)
(*   * the leader record at Redis (rec): the token, identity and fence of  *)
(*     the last grant, written by the script that grants, in the same      *)
(*     step (the campaign's, or a release's or withdrawal's handoff);      *)
(*   * leader(), the observer's read: one script reading the lease key     *)
(*     and the record (LeaderRead), which reports the record only when its *)
(*     token is the one the lease key holds;                               *)
(*   * the handle's own check (Acting: is_leader), a read of its clock;    *)
(*   * a leader killed (Die): its lease ends at the key's TTL;             *)
(*   * in the timed model (LongestBlock > 0), a campaigner's block that    *)
(*     ends within LongestBlock, and the bound on how long a campaign      *)
(*     waits once the leader is gone (CampaignServed, ghost vacant_for).   *)
(*                                                                         *)
(* Two constants name broken variants: DistLock's Mutant for the lock's    *)
(* rules (a rule lives in one place), ElectionMutant for this module's.    *)
(***************************************************************************)
EXTENDS DistLock

CONSTANTS
    ElectionMutant, \* "none" or a broken variant of ElectionMutants
    LongestBlock,   \* > 0: a campaigner blocks at most this many ticks (its next attempt
                    \* is sent within MaxDelay + LongestBlock of its last); 0: any time
    Kills           \* a leader's process may be killed (at most MaxFaults faults in all)

ElectionMutants == {"none",
    \* the campaign writes its identity into the leader record before it is granted (a
    \* refused attempt leaves it there)
    "identity_before_grant",
    \* leader() reads the identity with one command and the fence and the TTL with another
    "two_step_read",
    \* leader() reports the record without checking its token against the lease key's
    "read_without_token_check",
    \* the handle lets its leader act while no signal has fired, without reading its clock
    "act_past_deadline"}

ASSUME
    /\ ElectionMutant \in ElectionMutants
    /\ LongestBlock \in Nat /\ Kills \in BOOLEAN
    /\ Handoff /\ ~Manual /\ ~WatchOnly
    \* the timed model: every reply within MaxDelay (the Timely world), and a handed lease
    \* that outlasts a campaigner's longest round trip and block
    /\ LongestBlock > 0 => (Timely /\ MaxDelay + LongestBlock < HandedTTL - Margin)

Timed == LongestBlock > 0

(* A campaigner's next attempt is sent within this many ticks of its last: *)
(* the refusal's round trip, then a block of at most LongestBlock.         *)
RecheckAge == MaxDelay + LongestBlock

(* The bounds of CampaignServed, in ticks during which some candidate      *)
(* campaigns and none leads.  After a resignation: the release, sent as    *)
(* the leader resigns, runs and hands the lease over within MaxDelay; a    *)
(* blocked head campaigner reads the wake-up within MaxDelay; one whose    *)
(* attempt ran before the handoff has its refusal within MaxDelay more,    *)
(* and then reads the wake-up within MaxDelay; an attempt that runs after  *)
(* the handoff is granted the key handed to it (held_as).  After a death   *)
(* (or at the start): the dead leader's key lives at most TTL ticks more;  *)
(* the head campaigner's last attempt                                      *)
(* before it expired ran before the tick that expired it, so it was sent   *)
(* at least a tick before; the next is sent within RecheckAge of it and    *)
(* answered within MaxDelay.  After a lease that lapsed on its leader's    *)
(* clock with a renewal in flight (a handed lease counts from the          *)
(* campaigner's last attempt, so it may be short): that renewal may still  *)
(* run, up to MaxDelay later, and the leader die then: MaxDelay more.      *)
(* Each is tight: one tick less is refuted, ResignBound and DeathBound in  *)
(* ElectionServed.cfg's world, LossBound with a third candidate.           *)
ResignBound == 3 * MaxDelay
DeathBound  == TTL - 1 + RecheckAge + MaxDelay
LossBound   == DeathBound + MaxDelay

VARIABLES
    rec,         \* the leader record at Redis: [tok, id, fence] of the last grant (id: the
                 \* identity string, here the token of the candidate it names)
    obs,         \* two_step_read: the identity the observer's first command read (NoToken:
                 \* no read half done)
    dead,        \* candidates killed
    vacant_for,  \* timed model: ticks since the last leader stopped leading while some
                 \* candidate campaigns (0 while someone leads or nobody campaigns)
    cause        \* what ended the last leadership: "start", "resign", "death", "loss"; or
                 \* "withdraw": the campaigner first in line gave up

evars    == <<rec, obs, dead, vacant_for, cause>>
allvars  == <<vars, evars>>

NoRecord == [tok |-> NoToken, id |-> NoToken, fence |-> 0]
NoReport == [id |-> NoToken, fence |-> 0, holder |-> NoToken]

(* A leader: held, no signal fired, its lease valid on its own clock.      *)
Leading(c) == phase[c] = "held" /\ ~lost[c] /\ deadline_in[c] > 0

(* The handle's check before its leader acts (is_leader): the signal has   *)
(* not fired and the deadline, read on its own clock, has not passed.  A   *)
(* starved event loop runs no timer, but the check is a read of the clock  *)
(* in the caller's own code, as the lock's completion check is.            *)
Acting(c) ==
    IF ElectionMutant = "act_past_deadline" THEN phase[c] = "held" /\ ~lost[c]
    ELSE Leading(c)

Campaigning == \E c \in Clients : phase[c] \in {"acquiring", "waiting"}
Vacant      == Campaigning /\ ~\E c \in Clients : Leading(c)

(* The fence Redis issued last to token t (0: none).                       *)
LastFence(t) ==
    LET is == {i \in 1..Len(grants) : grants[i].tok = t}
    IN IF is = {} THEN 0 ELSE grants[CHOOSE i \in is : \A j \in is : j <= i].fence

(* leader(): what the observer's read returns if it runs now.  One script  *)
(* (E_LEADER): the lease key's token and PTTL and the record; the record   *)
(* is reported only when its token is the one the key holds (a record      *)
(* left by a lease that ended is never reported).  The read writes         *)
(* nothing, so every reachable state is an instant a read may run at, and  *)
(* the invariant on LeaderRead checks every read.  two_step_read: the      *)
(* identity came from an earlier command (obs), the fence and the TTL      *)
(* come from this one.  read_without_token_check: the record is reported   *)
(* whatever the key holds (the record outlives its lease).                 *)
Recorded == key_holder # NoToken /\ rec.tok = key_holder
LeaderRead ==
    IF ElectionMutant = "read_without_token_check"
    THEN IF rec.tok # NoToken
         THEN [id |-> rec.id, fence |-> rec.fence, holder |-> key_holder] ELSE NoReport
    ELSE IF ElectionMutant = "two_step_read"
    THEN IF obs # NoToken /\ Recorded
         THEN [id |-> obs, fence |-> rec.fence, holder |-> key_holder] ELSE NoReport
    ELSE IF Recorded
         THEN [id |-> rec.id, fence |-> rec.fence, holder |-> key_holder] ELSE NoReport

EInit ==
    /\ Init
    /\ rec = NoRecord
    /\ obs = NoToken
    /\ dead = {}
    /\ vacant_for = 0
    /\ cause = "start"

-----------------------------------------------------------------------------
(***************************************************************************)
(* The lock's steps, with the record and the ghosts alongside.             *)
(***************************************************************************)

(* The timed model's ghosts, on a step that is not a tick: what ended the  *)
(* last leadership, and the vacancy, which only a tick lengthens.          *)
Track ==
    IF ~Timed THEN UNCHANGED <<vacant_for, cause>>
    ELSE /\ vacant_for' = IF Vacant' THEN vacant_for ELSE 0
         /\ cause' = IF \E c \in Clients : Leading(c) /\ phase'[c] = "body_done"
                     THEN "resign"
                     ELSE IF \E c \in Clients : Leading(c) /\ ~(Leading(c))'
                     THEN "loss" ELSE cause

(* The record is written by the script that grants, in the same step: a    *)
(* new grant (the campaign's attempt, or the handoff of a release or a     *)
(* withdrawal: lib/hands_off.lua's hand_head) records the grantee's token, *)
(* identity and fence.  identity_before_grant: the campaign script writes  *)
(* its identity into the record first, and a refusal leaves it there.      *)
RecordGrant(m) ==
    IF Len(grants') > Len(grants)
    THEN LET g == grants'[Len(grants')] IN
         rec' = [tok |-> g.tok, id |-> g.tok, fence |-> g.fence]
    ELSE IF ElectionMutant = "identity_before_grant" /\ m.kind = "acquire"
            /\ key_holder' # m.tok
    THEN rec' = [rec EXCEPT !.id = m.tok]
    ELSE UNCHANGED rec

(* E_CAMPAIGN, E_RENEW, E_RESIGN, E_WITHDRAW: the lock's scripts           *)
(* (RedisStep), the grants among them writing the record.                  *)
RedisRun(m) ==
    /\ RedisStep(m)
    /\ RecordGrant(m)
    /\ UNCHANGED <<obs, dead>>
    /\ Track

(* Time: no campaigner's block outlasts LongestBlock in the timed model;   *)
(* the vacancy grows by a tick.                                            *)
ETick ==
    /\ Tick
    /\ Timed => \A c \in Clients : phase[c] = "waiting" => sent_ago[c] < RecheckAge
    \* nothing waits for a withdrawal's reply, so the lock's Timely world does not bound
    \* its delay: in the timed model it runs before time moves on
    /\ Timed => ~\E m \in net : m.kind = "withdraw" /\ m.st = "sent"
    /\ IF Timed
       THEN /\ vacant_for' = IF Vacant' THEN vacant_for + 1 ELSE 0
            /\ cause' = IF \E c \in Clients : Leading(c) /\ ~(Leading(c))'
                        THEN "loss" ELSE cause
       ELSE UNCHANGED <<vacant_for, cause>>
    /\ UNCHANGED <<rec, obs, dead>>

(* Redis loses the key (not in the election's models: see spec/README.md): *)
(* a restart loses the record too (same slot), an eviction may keep it.    *)
EKeyLost ==
    /\ KeyLost
    /\ rec' \in {rec, NoRecord}
    /\ UNCHANGED <<obs, dead>>
    /\ Track

(* The other steps of the world, as the lock has them.                     *)
EnvOther ==
    /\ \/ \E m \in net : DropReply(m)
       \/ \E m \in net : HangReply(m)
       \/ \E m \in net : Resend(m)
       \/ \E m \in net : ResendRelease(m)
       \/ SharedIncr
       \/ \E c \in Clients : Starve(c)
       \/ \E c \in Clients : NewSection(c)
    /\ UNCHANGED <<rec, obs, dead>>
    /\ Track

(* A campaigner gives up (its deadline, a cancellation) while the lease is *)
(* handed to it, or while it is first in line for a free lease: its        *)
(* withdrawal gives the lease back or passes its turn on, handing the      *)
(* lease to the next campaigner as a resignation does, and the vacancy     *)
(* counts again from here.                                                 *)
GaveUpFirst(c) ==
    /\ phase[c] = "waiting" /\ phase'[c] = "done"
    /\ \/ key_holder = token[c]
       \/ key_holder = NoToken /\ queue # <<>> /\ Head(queue) = token[c]

(* A candidate's own step: the lock's Section methods.  In the timed       *)
(* model a block does not end by its time-out while a wake-up is in the    *)
(* campaigner's list: BLPOP returns an element that is there (the lock's   *)
(* model lets any attempt cross a wake-up, which the timed model keeps for *)
(* an attempt sent before the handoff ran).                                *)
CandidateStep(c) ==
    /\ ClientStep(c) \/ WaitStep(c)
    /\ (Timed /\ phase[c] = "waiting" /\ WakeupsOf(token[c]) # {})
           => phase'[c] # "acquiring"
    /\ UNCHANGED <<rec, obs, dead>>
    /\ IF Timed /\ GaveUpFirst(c)
       THEN /\ vacant_for' = 0
            /\ cause' = "withdraw"
       ELSE Track

(* The leader's process is killed: nothing more runs on its side (no       *)
(* renewal, no release, no signal); its key lives until its TTL.  In the   *)
(* Timely world what it sent runs at once or never (its requests are       *)
(* dropped with it); elsewhere a request of it may still run late.         *)
Die(c) ==
    /\ Kills /\ faults < MaxFaults
    /\ phase[c] = "held"
    /\ phase' = [phase EXCEPT ![c] = "done"]
    /\ outcome' = [outcome EXCEPT ![c] = "failed"]
    /\ renew_in_flight' = [renew_in_flight EXCEPT ![c] = FALSE]
    /\ renew_sent_ago' = [renew_sent_ago EXCEPT ![c] = 0]
    /\ net' = IF Timely THEN {m \in net : m.tok # token[c]} ELSE net
    /\ faults' = faults + 1
    /\ dead' = dead \cup {c}
    /\ UNCHANGED <<retries_left, token, fence, deadline_in, sent_ago, next_renew_in,
                   extend_in_flight, extend_sent_ago, lost, auto_renew, renews, extend_ttl,
                   unconfirmed_ttl>>
    /\ UNCHANGED <<starved, drift, key_holder, key_ttl, fence_ctr, released, queue>>
    /\ UNCHANGED ghost_vars
    /\ UNCHANGED <<rec, obs>>
    /\ IF Timed
       THEN /\ vacant_for' = IF Vacant' THEN vacant_for ELSE 0
            /\ cause' = IF Leading(c) THEN "death" ELSE cause
       ELSE UNCHANGED <<vacant_for, cause>>

(* two_step_read only: the observer's first command reads the identity     *)
(* (with the token check); its second reads the fence and the TTL at any   *)
(* later instant (LeaderRead, the read then ends: ObserveRest).            *)
ObserveIdentity ==
    /\ ElectionMutant = "two_step_read" /\ obs = NoToken /\ Recorded
    /\ obs' = rec.id
    /\ UNCHANGED <<vars, rec, dead, vacant_for, cause>>

ObserveRest ==
    /\ obs # NoToken
    /\ obs' = NoToken
    /\ UNCHANGED <<vars, rec, dead, vacant_for, cause>>

(* The observer's steps: with the one-script read there are none: a read   *)
(* at any instant returns LeaderRead and changes nothing.                  *)
ObserverStep == ObserveIdentity \/ ObserveRest

ENext ==
    \/ \E c \in Clients : CandidateStep(c)
    \/ \E m \in net : RedisRun(m)
    \/ ETick
    \/ EKeyLost
    \/ EnvOther
    \/ \E c \in Clients : Die(c)
    \/ ObserverStep

ESpec == EInit /\ [][ENext]_allvars

-----------------------------------------------------------------------------
(***************************************************************************)
(* Properties                                                              *)
(***************************************************************************)

ETypeOK ==
    /\ TypeOK
    /\ rec \in [tok : Tokens \cup {NoToken}, id : Tokens \cup {NoToken}, fence : Nat]
    /\ obs \in Tokens \cup {NoToken}
    /\ dead \subseteq Clients
    /\ vacant_for \in Nat
    /\ cause \in {"start", "resign", "withdraw", "death", "loss"}

(* At most one candidate leads: acting as leader with its lease valid on   *)
(* its own clock.  (Unless Redis lost the key under one and no reply has   *)
(* told it yet, wiped: the models have no key loss.)                       *)
AtMostOneLeader ==
    \A a, b \in Clients :
        (a # b /\ Leading(a) /\ Leading(b)) => (wiped[a] \/ wiped[b])

(* A candidate its handle lets act holds the lease at Redis: no leader     *)
(* acts past its lease, renewals failing, its loop starved or its clock    *)
(* lagging within the margin.  With the lock's SignalOnTime and            *)
(* RejectionSignals (the loss signalled at once), checked beside it.       *)
ActsOnlyWithinLease ==
    \A c \in Clients : Acting(c) => (key_holder = token[c] \/ wiped[c])

(* leader() reports only a candidate that was granted the lease, with the  *)
(* fence it was granted, and the TTL of that candidate's own lease (the    *)
(* key held its token when the TTL was read).                              *)
LeaderReadSound ==
    LET r == LeaderRead IN
    r.id # NoToken => (r.holder = r.id /\ r.fence > 0 /\ r.fence = LastFence(r.id))

(* The timed model: while a candidate campaigns (within its wait) and      *)
(* nobody leads, a leader is in place within ResignBound ticks of a        *)
(* resignation (or of the withdrawal of the campaigner first in line for   *)
(* the lease, or handed it), within DeathBound of a death or the start,    *)
(* and within LossBound of a lease that lapsed on its leader's clock.      *)
CampaignServed ==
    vacant_for <= CASE cause \in {"resign", "withdraw"} -> ResignBound
                    [] cause = "loss"                  -> LossBound
                    [] OTHER                           -> DeathBound

(***************************************************************************)
(* Reachability probes: TLC must VIOLATE them.                             *)
(***************************************************************************)
\* a resignation hands the lease to a campaigner (the release's handoff)
ProbeResignHandoff ==
    [][~\E c \in Clients : /\ phase[c] = "releasing" /\ key_holder = token[c]
                           /\ key_holder' \notin {token[c], NoToken}]_allvars
\* a killed leader is replaced: another candidate leads
ProbeDeadReplaced == ~\E d \in dead, c \in Clients : c # d /\ Leading(c)
\* leader() reports a leader the lease was handed to (a fence after the first)
ProbeReportHanded == ~(LeaderRead.id # NoToken /\ LeaderRead.fence > 1)

ESymmetry == Permutations(Clients)

=============================================================================
