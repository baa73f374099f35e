"""Watching: the feed as the KB offers it — standing queries, replay, unwatching.

Invariant: a watcher registered with `since` first receives the events of every write
after that seq, replayed from the durable change log and filtered like live ones, before
any later write can come between; live events follow in seq order (`feed.Feed`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from koinii.errors import Refused
from koinii.kb import checks
from koinii.kb.contexts import EVERYTHING
from koinii.kb.feed import Change, Event, Feed, Routed
from koinii.kb.reads import Goals, goal_literals
from koinii.kb.sentex import NOT
from koinii.kb.store import LogEntry
from koinii.terms import show

if TYPE_CHECKING:
    import threading

    from koinii.kb.contexts import Hierarchy
    from koinii.kb.ledger import Ledger
    from koinii.kb.store import Store

MAX_REPLAY = 10_000  # change-log entries a resuming watch replays, at most


class Watching:
    """watch, unwatch and watchers (see the module docstring): an object of its own, which
    `KB` holds and delegates to (engine.py).

    Its state is its own: the feed, the watchers registered and the delivery loop, which
    writes hands each durable write's changes to (`route`, then `deliver` once the write
    is durable). What it reads is given to it, and it changes none of it: the KB's lock,
    the store (its change log, for a replay), the ledger (the seq, and whether a group is
    open: writes'), the hierarchy a change is filtered against, and truth maintenance
    for a goal's declared arity (`Goals`: maintenance's, as a query's is)."""

    __slots__ = ("_goals", "_lock", "_store", "_ledger", "_hierarchy", "_feed")

    def __init__(
        self,
        goals: Goals,
        *,
        lock: threading.RLock,
        store: Store,
        ledger: Ledger,
        hierarchy: Hierarchy,
    ) -> None:
        self._goals = goals
        self._lock = lock
        self._store = store
        self._ledger = ledger
        self._hierarchy = hierarchy
        self._feed = Feed()

    def route(self, seq: int, added: list[Change], removed: list[Change]) -> Routed | None:
        """Each watcher's event for the durable write `seq`, filtered against the
        hierarchy as it is now (`Feed.route`), or None while nobody watches: writes
        routes a write when it is made and delivers it once durable (a group commit's,
        at `commit_group`)."""
        feed = self._feed
        return feed.route(seq, added, removed, self._hierarchy.up) if feed else None

    def deliver(self, routed: Routed) -> None:
        """Call each routed watcher still registered, in order (`Feed.deliver`)."""
        self._feed.deliver(routed)

    def watch(
        self,
        callback: Callable[[Event], Any],
        goal: Any = None,
        ctx: Any = None,
        *,
        since: int | None = None,
    ) -> int:
        """Call `callback(event)` after each durable write that changes belief.

        With a goal, only matching changes; with a context, only changes in
        `context_up(ctx)` (a variable ctx watches everywhere and binds the witness); with
        a context and no goal, every change `ctx` sees. Returns a token for `unwatch`.
        With `since` (a global seq), first replays — before any later write can come
        between — the events of the writes after `since`, from the change log, filtered
        the same way (against the hierarchy as it is now): a watcher resumes where it left
        off, with no gap and no repeat. Refused `too-old` when the log no longer holds
        them all (compacted, or more than `MAX_REPLAY` writes behind: resnapshot), and
        `bad-cursor` for a seq past the store's.
        """
        if not callable(callback):
            raise Refused("not-watchable", "the callback must be callable", {})
        literal_ = None
        goal_text = None
        if goal is not None:
            literals = goal_literals(goal)
            if len(literals) != 1:
                raise Refused("not-watchable", "a standing query watches one literal", {})
            literal_ = literals[0]
            goal_text = show(literal_[1] if literal_[0] else (NOT, literal_[1]))
        ctx_name = None
        if ctx is not None:
            ctx_name = checks.context_name(ctx, query=True)
            if ctx_name == EVERYTHING:
                raise Refused("not-watchable", "CxEverything is not watchable", {})
        with self._lock:
            if literal_ is not None:
                self._goals.check_goal_arity([literal_], ctx_name)
            entries = [] if since is None else self._replayable(since)
            token = self._feed.add(callback, literal_, ctx_name, goal_text)
            if entries:
                self._feed.replay(token, entries, self._hierarchy.up)
            return token

    def _replayable(self, since: Any) -> list[LogEntry]:
        """The change-log entries after `since`, all of them, or a refusal."""
        if type(since) is not int or since < 0:
            raise Refused("bad-cursor", "since must be a non-negative integer seq", {})
        self._ledger.refuse_inside_group("a replaying watch")
        seq = self._ledger.seq
        if since > seq:
            raise Refused(
                "bad-cursor",
                f"since {since} is past this store's seq {seq}; watch without since",
                {"since": since, "seq": seq},
            )
        floor = self._store.floor()
        if since < floor or seq - since > MAX_REPLAY:
            raise Refused(
                "too-old",
                f"the change log cannot replay every write after seq {since} (it holds "
                f"those after {floor}, at most {MAX_REPLAY} at once); resnapshot, then watch "
                "without since",
                {"since": since, "floor": floor, "seq": seq},
            )
        return self._store.changes(since, MAX_REPLAY) if since < seq else []

    def unwatch(self, token: Any) -> bool:
        with self._lock:
            return self._feed.remove(token)

    def watchers(self) -> list[dict[str, Any]]:
        with self._lock:
            return self._feed.describe()
