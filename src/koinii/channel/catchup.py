"""Catch-up: an agent that was away reaches the channel's current view of a goal.

Snapshot plus tail, the change-data-capture pattern. A consumer keeps a materialized
view — the set of sentences answering a goal at a context — and a position in a feed.
`sync` tails the feed from the position and applies its events; when the tail cannot be
trusted (the daemon's ring dropped events, or the subscription is gone) it re-reads the
current state instead (the snapshot) and tails on from there. Two tails:

- the wire feed (default): a daemon subscription, position `{token, cursor}`. Cheap and
  filtered by the daemon, but it lives in the daemon's memory: a restart loses it.
- the durable change log (`durable=True`): position `{seq}`, read with
  `changes(since=seq)`. It survives restarts of the agent and of the daemon, so a
  consumer resumes without a snapshot while the log still holds its seq.

Invariants:
- The position is kept client-side, in a `CursorStore`, so polling never writes to the
  shared knowledge base.
- The view and the stored position change together, after each applied batch; a pass
  that fails leaves both as the last batch left them, and closes a subscription it opened
  that no stored position names.
- Events are applied as set additions and removals, in feed order, onto a snapshot taken
  after them or onto the view they continue, so replaying an event is harmless.
- One pass takes at most `MAX_SNAPSHOTS` snapshots (lag, reaping and a compacted log share
  the budget; the bootstrap counts): past it the consumer is not keeping up, and
  `koinii/catchup-thrashing` says which condition tripped it rather than looping.
- A pass holds the consumer's lock, so two threads driving one consumer cannot interleave
  a snapshot with another's applied batch.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from koinii.channel import follow
from koinii.errors import Refused
from koinii.terms import Var, parse, substitute

__all__ = [
    "MAX_SNAPSHOTS",
    "Consumer",
    "CursorStore",
    "FileCursorStore",
    "MemoryCursorStore",
    "open",
    "snapshot",
    "sync",
    "view_of",
]

log = logging.getLogger("koinii.channel.catchup")

MAX_SNAPSHOTS = 8
"""Snapshots one pass may take. A handful clears any burst; a consumer that needs more is
not keeping up, which its caller should hear about instead of a pass that never ends."""


# --- where the position is kept -------------------------------------------------------------


class CursorStore(Protocol):
    """Where a consumer keeps its position: `{token, cursor}` on the wire feed, `{seq}` on
    the durable tail. Local to the agent (a file, a row of its own store)."""

    def read_position(self) -> dict[str, Any] | None: ...

    def write_position(self, position: dict[str, Any]) -> None: ...


class MemoryCursorStore:
    """A position in memory: for an agent that does not outlive its process, and tests."""

    def __init__(self, position: dict[str, Any] | None = None) -> None:
        self.position = dict(position) if position is not None else None

    def read_position(self) -> dict[str, Any] | None:
        return dict(self.position) if self.position is not None else None

    def write_position(self, position: dict[str, Any]) -> None:
        self.position = dict(position)


class FileCursorStore:
    """A position in a JSON file, replaced atomically and fsynced: a restarted agent reads
    back exactly the last position written, never a torn one."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def read_position(self) -> dict[str, Any] | None:
        try:
            with builtins.open(self.path, encoding="utf-8") as f:  # `open` here opens consumers
                position = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise _store_error(self.path, exc) from exc
        if not isinstance(position, dict):
            raise _store_error(self.path, "it does not hold a position object")
        return position

    def write_position(self, position: dict[str, Any]) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, temporary = tempfile.mkstemp(dir=directory, prefix=".cursor-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(position, f, sort_keys=True)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, self.path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
                raise
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # the rename itself is durable
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise _store_error(self.path, exc) from exc


def _store_error(path: str, cause: Any) -> Refused:
    return Refused(
        "koinii/cursor-store-error",
        f"the cursor file {path} could not be used: {cause}",
        {"path": path},
    )


# --- the snapshot -----------------------------------------------------------------------------


def snapshot(agent: Any, goal: Any, ctx: Any) -> set[Any]:
    """The goal with each of its current solutions at `ctx` substituted: the view a
    consumer converges to. Reads through `ctx`'s ancestors (`query`). `agent` is anything
    with `query` — a channel `Agent`, a `KB` or a `Client`."""
    term = parse(goal) if isinstance(goal, str) else goal
    return {
        substitute(term, {Var(name): value for name, value in binding.items()})
        for binding in agent.query(term, ctx)
    }


# --- the consumer -----------------------------------------------------------------------------


@dataclass(eq=False)
class Consumer:
    """A materialized view of `goal` at `ctx`, kept in sync by `sync`.

    `snapshots` counts the snapshots it has taken over its life (a resume that needed
    none leaves it unchanged)."""

    agent: Any
    goal: Any
    ctx: Any
    store: CursorStore
    durable: bool = False
    snapshots: int = 0
    _view: frozenset[Any] = frozenset()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def open(
    agent: Any,
    goal: Any,
    ctx: Any,
    store: CursorStore,
    initial_view: Iterable[Any] = frozenset(),
    *,
    durable: bool = False,
) -> Consumer:
    """A consumer of `goal` at `ctx` for `agent`, keeping its position in `store`.

    `agent` is a channel `Agent` joined over the wire (the feed is its medium's
    `open_feed/poll_feed/close_feed`); with `durable=True` anything with `query`, `seq`
    and `changes` works through `agent.store` (a KB or a Client). Seed `initial_view`
    with the view the agent kept when it resumes from a stored position. Opens nothing
    until the first `sync`."""
    term = parse(goal) if isinstance(goal, str) else goal
    view = frozenset(parse(s) if isinstance(s, str) else s for s in initial_view)
    return Consumer(agent, term, ctx, store, durable, _view=view)


def view_of(consumer: Consumer) -> frozenset[Any]:
    """The consumer's current view (a set of sentences)."""
    return consumer._view


def sync(consumer: Consumer) -> frozenset[Any]:
    """Bring the view up to date and return it.

    With no stored position: open the tail, then snapshot. Then drain the tail with
    non-blocking reads, applying each batch and storing the position, until it is empty.
    A lagged reply re-snapshots and goes on; a reaped subscription is re-opened and
    re-snapshotted. Refused: `koinii/catchup-thrashing` past `MAX_SNAPSHOTS` (data
    `condition`: `lagged`, `unknown-subscription` or `too-old`), `koinii/feed-error` when
    a read fails otherwise (data `cause_kind`: the failure's kind, if it had one),
    `koinii/no-cursor` when a reply (or the stored position) has no usable cursor.
    """
    with consumer._lock:
        if consumer.durable:
            return _sync_durable(consumer)
        return _sync_feed(consumer)


# --- the wire feed ----------------------------------------------------------------------------


class _Pass:
    """One sync pass: its snapshot budget and the view it is building."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.view = consumer._view
        self.snapshots = 0

    def spend(self, condition: str, token: Any, cause: BaseException | None) -> None:
        """Refuse a further snapshot once the pass has taken its budget."""
        if self.snapshots < MAX_SNAPSHOTS:
            return
        reason = {
            "lagged": "kept falling behind the daemon's ring: it is not keeping up",
            "unknown-subscription": "kept losing its subscription before it could poll it",
            "too-old": "kept falling behind the compacted change log: it is not keeping up",
        }[condition]
        raise Refused(
            "koinii/catchup-thrashing",
            f"catch-up took {self.snapshots} snapshots in one pass and {reason}",
            {"condition": condition, "snapshots": self.snapshots, "token": token},
        ) from cause

    def snapshot(self) -> None:
        c = self.consumer
        self.view = frozenset(snapshot(c.agent, c.goal, c.ctx))
        self.snapshots += 1
        c.snapshots += 1

    def commit(self, position: dict[str, Any]) -> None:
        self.consumer.store.write_position(position)
        self.consumer._view = self.view


def _sync_feed(consumer: Consumer) -> frozenset[Any]:
    medium = consumer.agent.medium
    stored = consumer.store.read_position()
    run = _Pass(consumer)
    opened: Any = None  # a token this pass opened that no stored position names yet
    try:
        if stored is None:
            token, cursor = _open_feed(medium, consumer)
            opened = token
            run.snapshot()
        else:
            token, cursor = _feed_position(stored)
        while True:
            try:
                reply = medium.poll_feed(token, cursor, 0)
            except Refused as refusal:
                if refusal.kind != "unknown-subscription":
                    raise _feed_error(refusal, token, cursor) from refusal
                run.spend("unknown-subscription", token, refusal)
                token, cursor = _open_feed(medium, consumer)
                opened = token
                run.snapshot()
                continue
            except Exception as exc:
                raise _feed_error(exc, token, cursor) from exc
            next_cursor = reply.get("cursor") if isinstance(reply, dict) else None
            if type(next_cursor) is not int or next_cursor < 0:
                raise Refused(
                    "koinii/no-cursor",
                    f"the poll of {token} answered {next_cursor!r} as its cursor; "
                    "there is no resuming from that",
                    {"token": token, "cursor": next_cursor},
                )
            cursor = next_cursor
            if (reply.get("lagged") or 0) > 0:
                # events fell off the ring: re-read; the surviving ones are in the snapshot
                run.spend("lagged", token, None)
                run.snapshot()
                continue
            events = reply.get("events") or []
            run.view = _applied(run.view, events)
            run.commit({"token": token, "cursor": cursor})
            opened = None
            if not events:
                return run.view
    except BaseException:
        if opened is not None:
            _close_quietly(medium, opened)
        raise


def _open_feed(medium: Any, consumer: Consumer) -> tuple[Any, int]:
    opened = medium.open_feed(consumer.goal, consumer.ctx)
    return opened["token"], opened["cursor"]


def _feed_position(position: dict[str, Any]) -> tuple[Any, int]:
    token, cursor = position.get("token"), position.get("cursor")
    if token is None or type(cursor) is not int or cursor < 0:
        raise Refused(
            "koinii/no-cursor",
            "the stored position has no feed cursor to resume from",
            {"token": token, "cursor": cursor},
        )
    return token, cursor


def _feed_error(exc: BaseException, token: Any, cursor: Any) -> Refused:
    kind = exc.kind if isinstance(exc, Refused) else None
    return Refused(
        "koinii/feed-error",
        f"catch-up could not read subscription {token}: {exc}",
        {"token": token, "cursor": cursor, "cause_kind": kind, "cause": str(exc)},
    )


def _close_quietly(medium: Any, token: Any) -> None:
    """Close what a failed pass opened; the pass's own failure is what the caller needs
    to hear, so a failure to close is logged, not raised over it."""
    try:
        medium.close_feed(token)
    except Exception:
        log.warning("catch-up: closing subscription %s failed", token, exc_info=True)


def _applied(view: frozenset[Any], events: Iterable[Any]) -> frozenset[Any]:
    """`view` with each event's additions, then its removals, applied in order."""
    current = set(view)
    for event in events:
        current.update(parse(change["sentence"]) for change in event.added)
        current.difference_update(parse(change["sentence"]) for change in event.removed)
    return frozenset(current)


# --- the durable tail -------------------------------------------------------------------------


def _sync_durable(consumer: Consumer) -> frozenset[Any]:
    """The follower's `log` core (koinii.channel.follow), not following: each page's
    admitted changes applied and the position stored after it; a log compacted past the
    position resnapshots and goes on from its last seq; a `genlCx` in the tail changes
    what the context sees, so the pass ends with a snapshot."""
    store = consumer.agent.store
    stored = consumer.store.read_position()
    run = _Pass(consumer)
    if stored is None:
        seq = store.seq  # read before the snapshot, so the tail replays nothing it missed
        run.snapshot()
    else:
        seq = stored.get("seq")
        if type(seq) is not int or seq < 0:
            raise Refused(
                "koinii/no-cursor",
                "the stored position has no change-log seq to resume from",
                {"token": None, "cursor": seq},
            )

    current = set(run.view)  # the view as this page's changes leave it

    def lagged(told: follow.Lagged) -> None:
        run.spend("too-old", None, None)
        run.snapshot()
        current.clear()
        current.update(run.view)

    core = follow.Core(
        follow.log(
            seq,
            goal=consumer.goal,
            ctx=consumer.ctx,
            follow=False,
            wait_ms=0,
            too_old="head",
            pages=True,
        )
    )
    reread = False  # the hierarchy changed in the tail: what the context sees must be re-read
    for item in follow.run(core, _Reading(store), on_lagged=lagged):
        if type(item) is follow.Page:
            reread |= item.moved_hierarchy
            run.view = frozenset(current)
            if not item.entries and reread:
                run.snapshot()
            run.commit({"seq": item.cursor})
            continue
        current.update(parse(change["sentence"]) for change in item["added"])
        current.difference_update(parse(change["sentence"]) for change in item["removed"])
    return run.view


class _Reading:
    """The store as catch-up reads its log: a read that fails is `koinii/feed-error`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def changes(self, *, since: int, limit: int, wait_ms: int) -> dict[str, Any]:
        try:
            return self.store.changes(since=since, limit=limit, wait_ms=wait_ms)
        except Exception as exc:
            raise _feed_error(exc, None, since) from exc

    def context_up(self, ctx: Any) -> frozenset[str]:
        return frozenset(self.store.context_up(ctx))
