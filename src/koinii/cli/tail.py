"""Following the durable change log: resumable by global seq, filtered by goal and context.

A reader of the change log, not of a subscription: it can start from any seq the log
still holds (after a restart of the reader or of the daemon), and it sees every write in
the one total order. Filtering happens here, on the reader's side, so the daemon keeps no
state for it. Following, it outlives the daemon: an outage (a restart, a stop, a network
drop) is reported once (`on_outage`) and the reader retries with backoff from the last
seq it yielded, so across restarts nothing is missed and nothing repeated.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from koinii.errors import Refused, Unavailable
from koinii.kb.index import match
from koinii.kb.sentex import NOT
from koinii.terms import parse


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
    pattern = None
    if goal is not None:
        term = parse(goal) if isinstance(goal, str) else goal
        positive = term[0] is not NOT
        pattern = (positive, term if positive else term[1])
    cursor = store.seq if since is None else since
    view = store.context_up(ctx) if ctx is not None else None
    outage = False
    pause = _BACKOFF_S[0]
    while True:
        try:
            if follow:
                reply = store.changes(since=cursor, limit=1000, wait_ms=wait_ms)
            else:
                reply = store.changes(since=cursor, limit=1000)
            if outage and view is not None:
                view = store.context_up(ctx)  # the hierarchy may have changed meanwhile
        except Unavailable as exc:
            if not follow:
                raise
            if not outage and on_outage is not None:
                on_outage(exc)
            outage = True
            time.sleep(pause * (0.5 + random.random() / 2))
            pause = min(_BACKOFF_S[1], pause * 2)
            continue
        outage, pause = False, _BACKOFF_S[0]
        if reply["too_old"]:
            raise Refused(
                "too-old",
                f"the change log no longer holds seq {cursor}; it starts after {reply['floor']}",
                {"since": cursor, "floor": reply["floor"]},
            )
        for entry in reply["entries"]:
            if ctx is not None and any(
                " genlCx " in c["sentence"] or c["sentence"].startswith("(genlCx ")
                for c in entry["added"] + entry["removed"]
            ):
                view = store.context_up(ctx)  # the hierarchy changed: what ctx sees did too
            cursor = entry["seq"]
            added = [c for c in entry["added"] if _admits(c, pattern, view)]
            removed = [c for c in entry["removed"] if _admits(c, pattern, view)]
            if added or removed or (pattern is None and view is None):
                yield {**entry, "added": added, "removed": removed}
        if not reply["entries"] and not follow:
            return


_BACKOFF_S = (0.05, 2.0)  # the first and the longest pause between attempts in an outage


def _admits(change: dict[str, Any], pattern: Any, view: Any) -> bool:
    if view is not None and change["context"] not in view:
        return False
    if pattern is None:
        return True
    term = parse(change["sentence"])
    positive = term[0] is not NOT
    if positive is not pattern[0]:
        return False
    return match(pattern[1], term if positive else term[1], {}) is not None
