"""One follower for "tell me what changed": a sans-I/O core and its two drivers.

Every reader that hears what changed — the channel's wire subscriptions (`channel.Wire`,
a thread; `koinii.client.asubscribe`, an async iterator), `koinii tail`, catch-up's
durable tail (`koinii.channel.catchup`) and an agent's news (`koinii.channel.news`, the MCP
feed) — keeps the same few rules, written here once:

- a **cursor by seq**: what was delivered is never delivered again, and a reader resumes
  after the last seq it delivered;
- an **outage** (a daemon restart, a reaping, the network) is told once, however many
  attempts it takes, and survived with **backoff** from `BACKOFF_S[0]` to `BACKOFF_S[1]`
  seconds, jittered, so a fleet does not reconnect in lockstep;
- **lagged**: when the daemon's ring or the change log no longer reaches back to the
  cursor, the reader hears how many events it missed, at least, and goes on from where
  the feed can (it resnapshots);
- **filtering** by goal and context as the engine's feed filters (`admits`).

The core does no I/O. A core is a generator of **actions**: it yields what it needs done
(`Watch`, `Poll`, `Changes`, `View` — calls on the store — and `Pause`) or what it has to
say (`Deliver`, `Lagged`, `Outage`), and is sent each call's result (or has its failure
thrown in). Two cores: `subscription`, a daemon subscription resumed from its last seq
with `watch(since=…)`; `log`, the durable change log read by global seq with
`changes(since=…)`. Two drivers run either: `run` (blocking, an iterator of what is
delivered) and `astep` (asyncio, up to the next delivery). A store is a `KB`, a `Client`
or an `AsyncClient`: `request(store, action)` is the call, awaited by the asyncio driver.
The tests drive the cores by hand (tests/test_follow.py), with no daemon.

Stopping is the driver's: a driver asked `stopped()` before each step ends quietly, and a
call that fails once the reader was stopped is the end, not an outage.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from koinii.errors import Refused, Unavailable
from koinii.kb.index import match
from koinii.terms import parse

__all__ = [
    "BACKOFF_S",
    "END",
    "Backoff",
    "Changes",
    "Core",
    "Deliver",
    "Lagged",
    "Outage",
    "Page",
    "Pause",
    "Poll",
    "View",
    "Watch",
    "admits",
    "astep",
    "log",
    "request",
    "run",
    "subscription",
]

logger = logging.getLogger("koinii.channel.agent")

BACKOFF_S = (0.05, 2.0)  # the first and the longest pause between attempts in an outage
QUIET_ENDS = ("unknown-subscription",)  # a poll of a subscription the daemon dropped
UNRESUMABLE = ("too-old", "bad-cursor")  # a resuming watch the log cannot replay to
PAGE = 1000  # change-log entries per request


# --- the actions --------------------------------------------------------------------------


@dataclass(frozen=True)
class Watch:
    """Open a daemon subscription (from `since`, replaying the log after it): its reply."""

    goal: Any
    ctx: Any
    since: int | None = None


@dataclass(frozen=True)
class Poll:
    """A subscription's events after `cursor`, waiting up to `wait_ms`: its reply."""

    token: str
    cursor: int
    wait_ms: int


@dataclass(frozen=True)
class Changes:
    """The change log after global seq `since`: its reply."""

    since: int
    limit: int
    wait_ms: int


@dataclass(frozen=True)
class View:
    """The contexts `ctx` sees (`context_up`), as a frozenset."""

    ctx: Any


@dataclass(frozen=True)
class Pause:
    """Wait `seconds` (a stop should cut it short)."""

    seconds: float


@dataclass(frozen=True)
class Deliver:
    """Hand the reader `item`: an `Event` of a subscription, an entry of the log."""

    item: Any


@dataclass(frozen=True)
class Lagged:
    """The feed no longer reached back to the reader: it missed `missed` events at least,
    and goes on from `cursor` (resnapshot)."""

    missed: int
    cursor: int


@dataclass(frozen=True)
class Outage:
    """The feed went away (told once per outage); the core is retrying."""

    cause: BaseException


@dataclass(frozen=True)
class Page:
    """One read of the log, delivered when a reader asks for pages: the reader has had
    every entry through `cursor`; the log's last seq was `head`; the read held `entries`,
    of which some changed which contexts see which when `moved_hierarchy`."""

    cursor: int
    head: int
    entries: int
    moved_hierarchy: bool = False


Action = Watch | Poll | Changes | View | Pause | Deliver | Lagged | Outage
Steps = Generator[Action, Any, None]


# --- the pieces ---------------------------------------------------------------------------


def jittered(pause: float) -> float:
    """A pause between attempts, with jitter (a fleet does not reconnect in lockstep)."""
    return pause * (0.5 + random.random() / 2)


class Backoff:
    """One outage at a time: `fail()` is True for its first failure only (tell it once),
    `pause()` the next wait (doubling up to `BACKOFF_S[1]`), `ok()` the end of it."""

    def __init__(self) -> None:
        self.out = False
        self._pause = BACKOFF_S[0]

    def fail(self) -> bool:
        first, self.out = not self.out, True
        return first

    def pause(self) -> Pause:
        wait = Pause(jittered(self._pause))
        self._pause = min(BACKOFF_S[1], self._pause * 2)
        return wait

    def ok(self) -> None:
        self.out, self._pause = False, BACKOFF_S[0]


def missed(refusal: Refused, last_seq: int) -> int:
    """How many events a reader that cannot resume from `last_seq` missed, at least (the
    log's floor, which the refusal names, minus where the reader was)."""
    return max(1, refusal.data.get("floor", last_seq) - last_seq)


def literal(goal: Any) -> Any:
    """A goal as a term (text parsed), or None for everything."""
    return parse(goal) if isinstance(goal, str) else goal


def viewed(ctx: Any) -> str | None:
    """The context whose view filters, or None when `ctx` reads everywhere (none, or a
    variable)."""
    name = getattr(ctx, "name", ctx)
    return None if name is None or str(name).startswith("?") else str(name)


def admits(change: dict[str, Any], pattern: Any, view: frozenset[str] | None) -> bool:
    """Would the engine's feed deliver this change to a standing query of `pattern` at a
    context that sees `view`? In view, not hidden there, matching (kb/feed.py `_admit`)."""
    if view is not None:
        if change["context"] not in view:
            return False
        hidden_in = change.get("hidden_in")
        if hidden_in is not None and hidden_in not in view:
            return False
    return pattern is None or match(pattern, parse(change["sentence"]), {}) is not None


def moves_hierarchy(entry: dict[str, Any]) -> bool:
    """Does this entry change which contexts see which (a `genlCx` written or taken back)?"""
    return any(
        c["sentence"].startswith("(genlCx ") or " genlCx " in c["sentence"]
        for c in entry["added"] + entry["removed"]
    )


# --- the cores ----------------------------------------------------------------------------


class Followed(Protocol):
    """What a subscription core keeps on its reader: the goal and context it follows, the
    daemon's current `token`, the `last_seq` delivered and the `outages` come through."""

    goal: Any
    ctx: Any
    token: Any
    last_seq: int
    outages: int


def subscription(sub: Followed, wait_ms: int, since: int | None = None) -> Steps:
    """A daemon subscription of `sub.goal` at `sub.ctx`, outliving the daemon's.

    Invariant: every event is delivered once, in seq order — `sub.last_seq` moves past an
    event as it is delivered, a resumed subscription replays from it (`watch(since=…)`)
    and an event at or below it is never delivered again. A refusal that will not pass (a
    revoked token, a goal that cannot be watched) is raised out of the core: the end."""
    opened = yield Watch(sub.goal, sub.ctx, since)
    sub.token, cursor = opened["token"], opened["cursor"]
    sub.last_seq = opened.get("seq", 0) if since is None else since
    while True:
        try:
            reply = yield Poll(sub.token, cursor, wait_ms)
        except Refused as refusal:
            if refusal.kind not in QUIET_ENDS:
                raise
            cursor = yield from _resume(sub, refusal)
            continue
        except Unavailable as exc:  # the daemon stopped, restarted, or is unreachable
            cursor = yield from _resume(sub, exc)
            continue
        if reply.get("lagged", 0):
            yield Lagged(reply["lagged"], reply["cursor"])
        for event in reply["events"]:
            if event.seq <= sub.last_seq:
                continue  # delivered before the subscription resumed
            sub.last_seq = event.seq
            yield Deliver(event)
        cursor = reply["cursor"]


def _resume(sub: Followed, cause: BaseException) -> Generator[Action, Any, int]:
    """Tell the outage once, then reopen from `sub.last_seq` with backoff until it is back;
    answers the new subscription's cursor. When the log no longer reaches back, the
    subscription goes on from now and `Lagged` says so."""
    sub.outages += 1
    yield Outage(cause)
    backoff = Backoff()
    while True:
        yield backoff.pause()
        try:
            try:
                opened = yield Watch(sub.goal, sub.ctx, sub.last_seq)
            except Refused as refusal:
                if refusal.kind not in UNRESUMABLE:
                    raise  # refused for good (a revoked token, say)
                opened = yield Watch(sub.goal, sub.ctx, None)
                yield Lagged(missed(refusal, sub.last_seq), opened["cursor"])
                sub.last_seq = opened.get("seq", sub.last_seq)
        except Unavailable:
            continue
        sub.token = opened["token"]
        logger.info("subscription resumed after seq %d as %s", sub.last_seq, sub.token)
        return opened["cursor"]


def log(
    since: int,
    *,
    goal: Any = None,
    ctx: Any = None,
    follow: bool = True,
    wait_ms: int = 20_000,
    too_old: str = "refuse",
    pages: bool = False,
) -> Steps:
    """The change log after global seq `since`: each entry with only its changes that
    `goal` at `ctx` admits (an entry none of whose changes match is skipped, unless
    nothing filters), in seq order; with `pages`, a `Page` after each read's entries.
    Each read waits up to `wait_ms` for a write when there is none yet.

    Following, a log that cannot be reached is waited for (`Outage` once, then backoff)
    and read on from the last entry delivered; not following, the `Unavailable` is
    raised and the core ends at the first empty read. When the log was compacted past
    the cursor, `too_old` says what to do: "refuse" (raise `too-old`), "floor" (go on
    from the oldest entry it holds) or "head" (go on from its last seq); either of the
    last two says `Lagged` first. A `genlCx` entry re-reads what `ctx` sees."""
    pattern = literal(goal)
    where = viewed(ctx)
    view = (yield View(where)) if where is not None else None
    cursor = since
    backoff = Backoff()
    while True:
        try:
            reply = yield Changes(cursor, PAGE, wait_ms)
            if backoff.out and where is not None:
                view = yield View(where)  # the hierarchy may have changed meanwhile
        except Unavailable as exc:
            if not follow:
                raise
            if backoff.fail():
                yield Outage(exc)
            yield backoff.pause()
            continue
        backoff.ok()
        if reply["too_old"]:
            if too_old == "refuse":
                raise Refused(
                    "too-old",
                    f"the change log no longer holds seq {cursor}; it starts after "
                    f"{reply['floor']}",
                    {"since": cursor, "floor": reply["floor"]},
                )
            gone, cursor = cursor, reply["floor"] if too_old == "floor" else reply["seq"]
            yield Lagged(max(1, reply["floor"] - gone), cursor)
            continue
        moved = False
        watch_hierarchy = pages or where is not None
        for entry in reply["entries"]:
            if watch_hierarchy and moves_hierarchy(entry):
                moved = True
                if where is not None:
                    view = yield View(where)  # what ctx sees changed with it
            cursor = entry["seq"]
            if pattern is None and view is None:
                yield Deliver(entry)  # nothing filters
                continue
            added = [c for c in entry["added"] if admits(c, pattern, view)]
            removed = [c for c in entry["removed"] if admits(c, pattern, view)]
            if added or removed:
                yield Deliver({**entry, "added": added, "removed": removed})
        if pages:
            yield Deliver(Page(cursor, reply["seq"], len(reply["entries"]), moved))
        if not reply["entries"] and not follow:
            return


# --- the drivers --------------------------------------------------------------------------


class Core:
    """A core and the action it waits on: `send` a result, `fail` with an exception."""

    def __init__(self, steps: Steps) -> None:
        self._steps = steps
        self.action: Action | None = next(steps)

    def send(self, result: Any = None) -> None:
        try:
            self.action = self._steps.send(result)
        except StopIteration:
            self.action = None
        except BaseException:
            self.action = None
            raise

    def fail(self, exc: BaseException) -> None:
        try:
            self.action = self._steps.throw(exc)
        except StopIteration:
            self.action = None
        except BaseException:
            self.action = None
            raise


_CALLS = (Watch, Poll, Changes, View)  # the actions that are store calls (`request`)


def request(store: Any, action: Action | None) -> Any:
    """The store call an action asks for (a coroutine over an `AsyncClient`)."""
    if type(action) is Watch:
        return store.watch(goal=action.goal, ctx=action.ctx, since=action.since)
    if type(action) is Poll:
        return store.poll(action.token, action.cursor, action.wait_ms)
    if type(action) is Changes:
        return store.changes(since=action.since, limit=action.limit, wait_ms=action.wait_ms)
    if type(action) is View:
        return store.context_up(action.ctx)
    raise TypeError(f"{action!r} is no store call")


def _never() -> bool:
    return False


def run(
    core: Core,
    store: Any,
    *,
    on_lagged: Callable[[Lagged], Any] = lambda lagged: None,
    on_outage: Callable[[BaseException], Any] = lambda exc: None,
    pause: Callable[[float], Any] = time.sleep,
    stopped: Callable[[], bool] = _never,
) -> Iterator[Any]:
    """The blocking driver: run `core` on `store`, yielding what it delivers, until it
    ends or `stopped()`. What the core raises (a refusal for good) is raised here."""
    while core.action is not None and not stopped():
        action = core.action
        if isinstance(action, Deliver):
            core.send()
            yield action.item
            continue
        if isinstance(action, _CALLS):
            try:
                result = request(store, action)
            except Exception as exc:  # (an interrupt leaves the core waiting on the call)
                if stopped():
                    return  # stopped while the call waited: a normal end
                core.fail(exc)
                continue
            core.send(result)
            continue
        _tell(action, on_lagged, on_outage)
        if isinstance(action, Pause):
            pause(action.seconds)
        core.send()


END = object()
"""What `astep` answers once the core has ended or the reader was stopped."""


async def astep(
    core: Core,
    store: Any,
    *,
    on_lagged: Callable[[Lagged], Any] = lambda lagged: None,
    on_outage: Callable[[BaseException], Any] = lambda exc: None,
    pause: Callable[[float], Awaitable[Any]],
    stopped: Callable[[], bool] = _never,
) -> Any:
    """The asyncio driver: run `core` on `store` (an `AsyncClient`) until it delivers,
    and answer what it delivered, or `END`. What the core raises is raised here."""
    while core.action is not None and not stopped():
        action = core.action
        if isinstance(action, Deliver):
            core.send()
            return action.item
        if isinstance(action, _CALLS):
            try:
                result = await request(store, action)
            except Exception as exc:  # (a cancellation leaves the core waiting on it)
                if stopped():
                    return END
                core.fail(exc)
                continue
            core.send(result)
            continue
        _tell(action, on_lagged, on_outage)
        if isinstance(action, Pause):
            await pause(action.seconds)
        core.send()
    return END


def tell_lagged(on_lagged: Callable[[int], Any] | None, sub: Any) -> Callable[[Lagged], None]:
    """A subscription's `on_lagged(missed)`, or a warning in the log when nobody listens."""

    def tell(told: Lagged) -> None:
        if on_lagged is not None:
            on_lagged(told.missed)
        else:
            logger.warning(
                "subscription-lagged: %s missed %d events; resync", sub.token, told.missed
            )

    return tell


def _tell(action: Action, on_lagged: Callable, on_outage: Callable) -> None:
    if type(action) is Lagged:
        on_lagged(action)
    elif type(action) is Outage:
        on_outage(action.cause)
