"""Faults on the wire between the lock's clients and Redis, injected by Toxiproxy.

Each scenario runs several trials; in each, three victims (behind the proxy, two of them
sharing one Lock) contend for one key with an intruder on a direct connection, and the
injector hurts the proxy once a victim is inside its body with a renewal on the wire.
Faults the lock must ride out end with ``expect="none"`` (no loss may be reported at
all); faults that make the lease lapse end with ``expect="lapse"``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import redis

from distlock.tools.chaos.failures import require
from distlock.tools.chaos.harness import Scenario
from distlock.tools.chaos.recorder import Section
from distlock.tools.chaos.registration import MODES, Context, scenario
from distlock.tools.chaos.sections import Body
from distlock.tools.servers.toxiproxy import Proxy, Stream

TRIALS = 3


def _proxy(sc: Scenario) -> Proxy:
    assert sc.proxy is not None
    return sc.proxy


def _finished(section: Section) -> bool:
    return section.finished is not None


def _trial(sc: Scenario, mode: str) -> Callable[..., None]:
    return sc.trials.run_sync if mode == "sync" else sc.trials.run_async


@scenario(
    "mild-latency-and-jitter-is-ridden-out",
    "latency 30+-30 ms each way [{mode}]",
    "latency 30±30 ms each way (TTL 1 s): ridden out, no loss",
    modes=MODES,
)
def mild_latency_and_jitter_is_ridden_out(ctx: Context, mode: str) -> None:
    """Every byte delayed by 0-60 ms each way: inside the heartbeat margin, so no loss.

    The lease is long against the delays (a 250 ms heartbeat): the claim is about the
    network's delays, and a TTL near them would also measure how loaded the machine is."""
    sc = ctx.scenario(ttl_ms=1_000)
    proxy = _proxy(sc)

    def fault(victim: Section) -> None:
        proxy.add_toxic("latency", stream="downstream", latency=30, jitter=30)
        proxy.add_toxic("latency", stream="upstream", latency=30, jitter=30)
        sc.recorder.fault("latency 30+-30 ms up and down")
        # The fault lasts for the rest of the victim's body.
        sc.recorder.wait_until(lambda: victim.end is not None, 10)
        proxy.remove_all_toxics()

    for trial in range(TRIALS):
        _trial(sc, mode)(trial, lambda: sc.faults.inject(fault, expect_lapse=False))
    sc.finish(expect="none")


@scenario(
    "latency-beyond-the-ttl-surfaces-the-loss",
    "latency 2xTTL +- TTL/2 on replies [sync]",
    "replies delayed 400±100 ms (TTL 200 ms): the lapse is surfaced",
)
def latency_beyond_the_ttl_surfaces_the_loss(ctx: Context) -> None:
    """Replies delayed by more than the TTL: renewals answer too late to count."""
    sc = ctx.scenario(ttl_ms=200)
    proxy = _proxy(sc)

    def fault(victim: Section) -> None:
        with proxy.toxic("latency", stream="downstream", latency=400, jitter=100):
            sc.recorder.fault("latency 400+-100 ms on replies")
            sc.faults.wait_signal(victim)

    for trial in range(TRIALS):
        sc.trials.run_sync(trial, lambda: sc.faults.inject(fault, expect_lapse=True))
    sc.finish(expect="lapse", min_overlaps=1)


@scenario(
    "renewal-that-hangs-forever",
    "renewal hangs forever (timeout toxic) [{mode}]",
    "requests or replies dropped on an open connection: the lapse is surfaced by the deadline",
    modes=MODES,
)
def renewal_that_hangs_forever(
    ctx: Context,
    mode: str,
    *,
    reentrant: bool = False,
    limit: int | None = None,
    ttl_ms: int = 200,
    trials: int = TRIALS,
) -> None:
    """Toxiproxy ``timeout`` with timeout=0: data is dropped and the connection stays open,
    so the renewal in flight never answers.  Only the deadline can see that.  (``limit``:
    on Semaphores of that many permits.)"""
    sc = ctx.scenario(
        ttl_ms=ttl_ms, reentrant=reentrant, limit=limit, cooperative_every=min(3, trials)
    )
    proxy = _proxy(sc)

    for trial in range(trials):
        # Dropping requests (never run) and dropping replies (run, never answered).
        stream: Stream = "downstream" if trial % 2 == 0 else "upstream"

        def fault(victim: Section, stream: Stream = stream, trial: int = trial) -> None:
            with proxy.toxic("timeout", stream=stream, timeout=0):
                sc.recorder.fault(f"timeout=0 on {stream}")
                sc.faults.wait_signal(victim)
                crowds = limit is not None and not sc.params.cooperative(trial)
                crowded = sc.faults.crowd(victim) if crowds else None
            if crowded is not None:
                crowded()

        _trial(sc, mode)(trial, partial(sc.faults.inject, fault, expect_lapse=True))
    sc.finish(expect="lapse", min_overlaps=1)


@scenario(
    "connection-reset-mid-renewal-is-not-a-loss",
    "connection reset mid-renewal [sync]",
    "connection reset until a renewal fails: no loss (the next heartbeat retries)",
)
def connection_reset_mid_renewal_is_not_a_loss(ctx: Context) -> None:
    """A renewal whose connection is reset (after Redis ran it, or before) fails its round
    trip; the next heartbeat retries on a new connection and the lease survives (a long
    lease, so that the claim does not also depend on how loaded the machine is)."""
    sc = ctx.scenario(ttl_ms=1_000)
    proxy = _proxy(sc)
    victims: list[Section] = []

    for trial in range(TRIALS):
        stream: Stream = "downstream" if trial % 2 == 0 else "upstream"

        def fault(victim: Section, stream: Stream = stream) -> None:
            victims.append(victim)
            with proxy.toxic("reset_peer", stream=stream, timeout=0):
                sc.recorder.fault(f"reset_peer on {stream}")
                sc.recorder.wait_until(lambda: victim.renew_errors > 0 or victim.end is not None, 5)

        sc.trials.run_sync(trial, partial(sc.faults.inject, fault, expect_lapse=False))
    for victim in victims:
        require(
            victim.renew_errors > 0, f"the reset never failed a renewal: {victim.describe()}"
        )
    sc.finish(expect="none")


@scenario(
    "connection-reset-mid-release",
    "connection reset mid-release [{mode}]",
    "connection reset as the body returns: the section reports the loss",
    modes=MODES,
)
def connection_reset_mid_release(ctx: Context, mode: str) -> None:
    """The release runs in Redis but its reply is lost to a reset: no proof the key was ours
    at the end, so the section must not report success."""
    sc = ctx.scenario(ttl_ms=200)
    proxy = _proxy(sc)
    reset: list[Section] = []

    def reset_before_release(section: Section) -> None:
        # Last thing the body does: the release is the next command on the wire.
        proxy.add_toxic("reset_peer", stream="downstream", name="release_reset", timeout=0)
        sc.recorder.fault("reset_peer on replies as the body returns")
        reset.append(section)

    def bodies(trial: int, index: int) -> list[Body]:
        first = Body(sc.params.ttl_ms * 1.5, at_end=reset_before_release)
        return [first, Body(sc.params.ttl_ms * 0.5)]

    def heal() -> None:
        # Each victim's first release meets the toxic; lift it once that section is over.
        for _ in range(3):
            if not sc.recorder.wait_until(lambda: any(s.finished is None for s in reset), 10):
                return
            pending = next(s for s in reset if s.finished is None)
            sc.recorder.wait_until(partial(_finished, pending), 10)
            proxy.remove_toxic("release_reset")

    for trial in range(TRIALS):
        _trial(sc, mode)(trial, heal, bodies=bodies)
    # Each victim's body ends with the reset, unless its lease was lost before the end (a
    # loaded machine can starve a 200 ms lease), so fewer than one reset per victim is not
    # a failure; fewer than one per trial means the fault was not exercised.
    require(len(reset) >= TRIALS, f"{len(reset)} releases reset, want {TRIALS} or more")
    for section in reset:
        require(section.outcome == "lost", f"reset release reported {section.describe()}")
    sc.finish(expect="any")


@scenario(
    "proxy-down-past-the-ttl",
    "proxy disabled 2xTTL then re-enabled [{mode}]",
    "proxy down for 2xTTL, then back: the lapse is surfaced",
    modes=MODES,
)
def proxy_down_past_the_ttl(ctx: Context, mode: str) -> None:
    """The proxy is disabled (connections closed, new ones refused) for twice the TTL,
    then brought back: renewals fail fast, the deadline declares the loss, the intruder
    takes the key, and the victim's release once the proxy is back finds it gone."""
    sc = ctx.scenario(ttl_ms=200)
    proxy = _proxy(sc)

    def fault(victim: Section) -> None:
        proxy.disable()
        sc.recorder.fault("proxy disabled")
        try:
            sc.faults.wait_signal(victim)
            # Down past the TTL, whatever the victim saw: that is the fault.
            time.sleep(2 * sc.params.ttl)
        finally:
            proxy.enable()

    for trial in range(TRIALS):
        _trial(sc, mode)(trial, lambda: sc.faults.inject(fault, expect_lapse=True))
    sc.finish(expect="lapse", min_overlaps=1)


@scenario(
    "replies-sliced-into-small-delayed-packets",
    "replies sliced 1-5 B / 2 ms [sync]",
    "replies cut into 1-5 byte packets 2 ms apart (TTL 1 s): no loss",
)
def replies_sliced_into_small_delayed_packets(ctx: Context) -> None:
    """Replies cut into 1-5 byte packets 2 ms apart: parsers see partial reads, the lease
    must not suffer.  The lease is long against the delays (TTL 1 s), as in the other
    scenarios that must report no loss: at 300 ms a loaded machine's scheduling alone could
    make a renewal late."""
    sc = ctx.scenario(ttl_ms=1_000)
    proxy = _proxy(sc)

    def fault(victim: Section) -> None:
        proxy.add_toxic("slicer", stream="downstream", average_size=3, size_variation=2, delay=2000)
        sc.recorder.fault("slicer 3+-2 bytes, 2 ms apart")
        sc.recorder.wait_until(lambda: victim.end is not None, 10)
        proxy.remove_all_toxics()

    for trial in range(TRIALS):
        sc.trials.run_sync(trial, lambda: sc.faults.inject(fault, expect_lapse=False))
    sc.finish(expect="none")


@scenario(
    "replies-sliced-slower-than-the-ttl",
    "replies sliced 1 B / 0.4 TTL [asyncio]",
    "replies sliced one byte per 80 ms (TTL 200 ms): the lapse is surfaced",
)
def replies_sliced_slower_than_the_ttl(ctx: Context) -> None:
    """One byte every 0.4 TTL: a four-byte renewal reply takes 1.6 TTL to arrive."""
    sc = ctx.scenario(ttl_ms=200)
    proxy = _proxy(sc)

    def fault(victim: Section) -> None:
        with proxy.toxic(
            "slicer", stream="downstream", average_size=1, size_variation=0, delay=80_000
        ):
            sc.recorder.fault("slicer 1 byte, 80 ms apart")
            sc.faults.wait_signal(victim)

    for trial in range(TRIALS):
        sc.trials.run_async(trial, lambda: sc.faults.inject(fault, expect_lapse=True))
    sc.finish(expect="lapse", min_overlaps=1)


@scenario(
    "bandwidth-limit-alone-is-ridden-out",
    "bandwidth 4 KB/s each way [sync]",
    "bandwidth 4 KB/s each way (TTL 1 s): no loss",
)
def bandwidth_limit_alone_is_ridden_out(ctx: Context) -> None:
    """4 KB/s each way: a renewal (about 150 bytes out, 4 back) takes some 40 ms, well
    inside the heartbeat margin, so no loss.  TTL 1 s, as in the other scenarios that must
    report no loss: at 300 ms, three victims queueing on the throttled link of a loaded
    machine once let a renewal take past 0.74 x TTL, and the lease (counted from the send
    time) rightly lapsed."""
    sc = ctx.scenario(ttl_ms=1_000)
    proxy = _proxy(sc)

    def fault(victim: Section) -> None:
        proxy.add_toxic("bandwidth", stream="downstream", rate=4)
        proxy.add_toxic("bandwidth", stream="upstream", rate=4)
        sc.recorder.fault("bandwidth 4 KB/s up and down")
        sc.recorder.wait_until(lambda: victim.end is not None, 10)
        proxy.remove_all_toxics()

    for trial in range(TRIALS):
        sc.trials.run_sync(trial, lambda: sc.faults.inject(fault, expect_lapse=False))
    sc.finish(expect="none")


@scenario(
    "bandwidth-starvation-behind-a-bulk-reply",
    "bandwidth starvation: renewals behind a bulk reply [sync]",
    "renewals queued behind a 2 KB reply at 4 KB/s: the lapse is surfaced",
)
def bandwidth_starvation_behind_a_bulk_reply(ctx: Context) -> None:
    """Each victim's client has a single connection, and its body reads a 2 KB value over
    a 4 KB/s link: the renewals queue behind the bulk reply for 2.5 TTL."""
    sc = ctx.scenario(ttl_ms=200)
    proxy = _proxy(sc)
    bulk_key = f"{sc.params.prefix}:bulk"
    sc.admin.set(bulk_key, b"x" * 2048)
    clients: dict[str, redis.Redis] = {}

    def bulk_read(section: Section) -> None:
        sc.faults.targets.append(section)
        clients[section.client].get(bulk_key)

    def bodies(trial: int, index: int) -> list[Body]:
        return [Body(sc.params.ttl_ms * 3.0, at_start=bulk_read), Body(sc.params.ttl_ms * 0.5)]

    for trial in range(TRIALS):
        proxy.add_toxic("bandwidth", stream="downstream", rate=4)
        sc.recorder.fault("bandwidth 4 KB/s on replies, 2 KB bulk read per victim")
        try:
            sc.trials.run_sync(
                trial,
                None,
                bodies=bodies,
                victim_client={"single_connection_client": True},
                on_client=clients.__setitem__,
            )
        finally:
            proxy.remove_all_toxics()
    sc.finish(expect="lapse", min_overlaps=1)


@scenario(
    "grant-arriving-after-its-lease-starts-no-body",
    "grant arrives after its lease (reply latency 1.5xTTL) [{mode}]",
    "replies delayed 1.5xTTL: no body starts on a late grant, run raises at once",
    modes=MODES,
)
def grant_arriving_after_its_lease_starts_no_body(ctx: Context, mode: str) -> None:
    """Replies delayed by 1.5 TTL from the start: each grant arrives after the lease it
    grants has run out (Redis set the key when the request came in, and expired it while
    the reply travelled).  The loss is known the moment the grant arrives, so no body may
    start on it: ``run`` releases the key and raises ``LockLeaseLostError`` at once."""
    sc = ctx.scenario(ttl_ms=200)
    proxy = _proxy(sc)

    def bodies(trial: int, index: int) -> list[Body]:
        return [Body(sc.params.ttl_ms * 1.0)]

    for trial in range(TRIALS):
        proxy.add_toxic("latency", stream="downstream", latency=300)
        sc.recorder.fault("latency 300 ms on replies for the whole trial")
        try:
            _trial(sc, mode)(trial, None, victims=2, bodies=bodies)
        finally:
            proxy.remove_all_toxics()
    victims = [s for s in sc.recorder.sections if s.client.startswith("victim")]
    late = [s for s in victims if s.outcome == "lost" and not s.entered]
    started = [s.describe(sc.recorder.origin) for s in victims if s.entered]
    try:
        sc.finish(expect="any")
    finally:
        require(late, "no grant arrived after its lease")
        require(
            all("arrived after the lease it granted" in (s.error or "") for s in late),
            f"late grants not reported as such: {[s.describe(sc.recorder.origin) for s in late]}",
        )
        require(
            not started,
            "bodies started on a grant that arrived after its own lease deadline:\n  "
            + "\n  ".join(started),
        )
