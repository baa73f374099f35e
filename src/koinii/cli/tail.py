"""Following the durable change log: resumable by global seq, filtered by goal and context.

A reader of the change log, not of a subscription: it can start from any seq the log
still holds (after a restart of the reader or of the daemon), and it sees every write in
the one total order. Filtering happens on the reader's side, so the daemon keeps no state
for it. Following, it outlives the daemon: an outage (a restart, a stop, a network drop)
is reported once (`on_outage`) and the reader retries with backoff from the last seq it
yielded, so across restarts nothing is missed and nothing repeated. The rules are the
follower's (`koinii.channel.follow.log`); this module is its blocking driver for `koinii
tail`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from koinii.channel import follow as follower


def changes(
    store: Any,
    *,
    since: int | None = None,
    goal: Any = None,
    ctx: str | None = None,
    follow: bool = True,
    wait_ms: int = 20_000,
    on_outage: Callable[[BaseException], Any] | None = None,
) -> Iterator[tuple[dict[str, Any], dict[str, Any], bool]]:
    """Yield `(entry, change, added)` for each matching change after `since` (default:
    the current seq), waiting for more when `follow` (over a daemon; a KB only replays).
    Refuses `too-old` when the log was compacted past `since`. Following, a daemon that
    cannot be reached is waited for (`on_outage(exc)` once per outage), not given up on."""
    for entry in entries(
        store,
        since=since,
        goal=goal,
        ctx=ctx,
        follow=follow,
        wait_ms=wait_ms,
        on_outage=on_outage,
    ):
        for added, side in ((True, entry["added"]), (False, entry["removed"])):
            for change in side:
                yield entry, change, added


def entries(
    store: Any,
    *,
    since: int | None = None,
    goal: Any = None,
    ctx: str | None = None,
    follow: bool = True,
    wait_ms: int = 20_000,
    on_outage: Callable[[BaseException], Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield each change-log entry after `since` with only its matching changes (an
    entry none of whose changes match is skipped, unless nothing filters), in seq order;
    see `changes`."""
    core = follower.Core(
        follower.log(
            store.seq if since is None else since,
            goal=goal,
            ctx=ctx,
            follow=follow,
            wait_ms=wait_ms if follow else 0,
        )
    )
    yield from follower.run(core, store, on_outage=on_outage or (lambda exc: None))
