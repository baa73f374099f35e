"""Resuming a wire subscription after an outage: reopen it, with backoff, from the last seq
it delivered (channel.md, subscriptions that survive).

A daemon's subscriptions live in its memory, so a restart (or a reaping, or a network
outage long enough) ends them; its change log does not end. `resume` reopens the
subscription with `watch(since=last_seq)`, which replays from the log the events of every
write the subscriber missed and then goes on live, in one step on the daemon (no write
can come between). Invariants:
- The outage is reported once (`report`), however many attempts it takes.
- Attempts back off from `BACKOFF_S[0]` to `BACKOFF_S[1]` seconds, with jitter, so a fleet
  of subscribers does not reconnect in lockstep; `sub.stop()` interrupts the wait.
- When the log no longer reaches back to `last_seq` (compacted, or too far behind), the
  subscription goes on from now and `on_lagged` is told: the subscriber resnapshots.

It lives beside `koinii.channel.agent` rather than in it so the channel module keeps to the
conversation; `channel._poll_loop` calls it, and the asyncio twin (`koinii.client.asubscribe`)
keeps the same invariants with the same pieces (`jittered`, `missed`, `lagged`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from koinii.errors import Refused, Unavailable

log = logging.getLogger("koinii.channel.agent")

# What a resuming watch answers when the log cannot replay from `last_seq`.
UNRESUMABLE = ("too-old", "bad-cursor")
BACKOFF_S = (0.05, 2.0)  # the first and the longest pause between attempts


def resume(
    store: Any,
    sub: Any,
    cause: BaseException,
    on_lagged: Callable[[int], Any] | None,
    report: Callable[[BaseException], None],
) -> int:
    """Report the outage, then reopen `sub` (a `channel.Subscription`) from its last seq
    until it is back or stopped; returns the new subscription's cursor."""
    sub.outages += 1
    report(cause)
    pause = BACKOFF_S[0]
    while not sub._stopped:
        sub._wake.wait(jittered(pause))
        if sub._stopped:
            break
        try:
            opened = _reopen(store, sub, on_lagged)
        except Unavailable:
            pause = min(BACKOFF_S[1], pause * 2)
            continue
        except Refused as refusal:  # refused for good (a revoked token, say)
            report(refusal)
            sub._stopped = True
            break
        sub.token = opened["token"]
        log.info("subscription resumed after seq %d as %s", sub.last_seq, sub.token)
        return opened["cursor"]
    return 0


def _reopen(store: Any, sub: Any, on_lagged: Callable[[int], Any] | None) -> dict[str, Any]:
    try:
        return store.watch(goal=sub.goal, ctx=sub.ctx, since=sub.last_seq)
    except Refused as refusal:
        if refusal.kind not in UNRESUMABLE:
            raise
        opened = store.watch(goal=sub.goal, ctx=sub.ctx)
        lagged(on_lagged, missed(refusal, sub.last_seq), sub)
        sub.last_seq = opened.get("seq", sub.last_seq)
        return opened


def jittered(pause: float) -> float:
    """A pause between attempts, with jitter (a fleet does not reconnect in lockstep)."""
    return pause * (0.5 + random.random() / 2)


def missed(refusal: Refused, last_seq: int) -> int:
    """How many events a subscription that cannot resume from `last_seq` missed, at least
    (the log's floor, which the refusal names, minus where the subscriber was)."""
    return max(1, refusal.data.get("floor", last_seq) - last_seq)


def lagged(on_lagged: Callable[[int], Any] | None, missed: int, sub: Any) -> None:
    """Tell the subscriber it missed `missed` events (it must resnapshot)."""
    if on_lagged is not None:
        on_lagged(missed)
    else:
        log.warning("subscription-lagged: %s missed %d events; resync", sub.token, missed)
