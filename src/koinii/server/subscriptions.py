"""The wire feed: per-subscription rings, cursors, long polls, streams, reaping (wire.md §3).

A callback cannot cross the wire, so for each subscription the daemon keeps the newest
`max_events` events in a ring and the client advances a cursor that counts events
(0, 1, 2, …). Invariants:
- `delivered` counts every event ever pushed into the ring; the ring holds events
  `delivered - len(ring)` … `delivered - 1`; a cursor is valid iff 0 <= cursor <= delivered.
- `lagged = max(0, (delivered - ring_size) - cursor)` on every reply: how many events the
  client missed because they fell off the ring (it must resnapshot).
- Everything here runs on the daemon's event-loop thread (the engine calls back on it),
  so a parked poll is a future, and waking it never blocks the writer.
- `waking` counts the parked waits woken and not yet run: while it is above 0, the
  daemon holds other replies back one turn of the loop (`Daemon.durable`), so the news
  reaches the watchers before the writer hears its own ack.
- One encoded copy of each event: subscriptions with the same standing query (goal and
  context, or neither) receive the same event from a write, so its JSON is rendered
  once and every such ring holds that one copy; a poll splices the copies into its reply.
- A subscription belongs to the principal that opened it: only it (or an operator)
  polls or drops it, and no principal holds more than `quota` of the `cap` slots, so
  one token cannot take the slots another principal needs.
- Once `stop_waiting` has run (the daemon is stopping) nothing parks: every parked wait
  is woken and answers what it has, a normal reply, and every later one answers at once.
- A stream is a long poll that never ends: one line (a poll's reply) at once, then one
  line whenever events arrive, or every `STREAM_KEEPALIVE_S` with none; it ends when its
  subscription is dropped or the daemon stops, and while it is open its subscription
  is never reaped. The daemon writes each waiting stream one line per write: no request
  to parse, no reply to frame, as a poll after each event costs.
- A stream's line holds every event from its cursor to `delivered` as it is made, and
  the cursor moves there before the line is sent (a send may wait for a slow reader:
  what arrives meanwhile is the next line's, written as soon as that send is done). So
  every event is written once, in order, and none waits for a later one.
- One pass: a parked stream whose connection takes a line at once (`chunks.WRITE_NOW`)
  waits in its subscription's `ready` list, and `_deliver` writes it its line as it
  delivers the event, waking no task. One whose connection cannot take it (its buffer
  full) leaves the list and is woken: its task sends the line by the ASGI `send`, which
  waits for the drain, and parks in the list again after.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from koinii.errors import Refused
from koinii.kb import KB, Event
from koinii.operations import Caller
from koinii.server.chunks import WriteNow
from koinii.terms import parse, show
from koinii.wire import STREAM_KEEPALIVE_S, RawJSON, encode_event, render

MAX_WAIT_MS = 30_000
QUOTA = 64  # subscriptions one principal may hold (Limits.subscriptions_per_principal)


@dataclass
class Subscription:
    token: str
    goal: str | None
    context: str | None
    max_events: int
    principal: str | None = None  # who opened it (None: an open daemon's caller)
    query: tuple = ()  # (canonical goal, context): what its events are routed by
    kb_token: int = 0
    ring: deque = field(default_factory=deque)  # encoded events, shared (see `_encoded`)
    delivered: int = 0
    last_poll: float = field(default_factory=time.monotonic)
    waiters: set[asyncio.Future] = field(default_factory=set)
    alive: bool = True
    streams: int = 0  # streams open on it (see `Subscriptions.stream`)
    ready: list[Stream] = field(default_factory=list)  # parked, written in `_deliver`'s pass

    def push(self, encoded: bytes) -> None:
        self.ring.append(encoded)
        self.delivered += 1
        if len(self.ring) > self.max_events:
            self.ring.popleft()

    def replayed(self, events: list[Event]) -> None:
        """Start with the events a resuming watch replayed (up to ten thousand writes'):
        only those the ring keeps are encoded, the rest counted as delivered."""
        self.ring.extend(render(encode_event(event)) for event in events[-self.max_events :])
        self.delivered = len(events)

    def reply(self, cursor: int) -> RawJSON:
        """`{events, cursor, lagged}`, each event numbered `n` (its place in this feed)."""
        first = self.delivered - len(self.ring)
        skip = max(0, cursor - first)
        events = list(islice(reversed(self.ring), len(self.ring) - skip))[::-1]
        lagged = max(0, (self.delivered - self.max_events) - cursor)
        start = first + skip
        numbered = b",".join(
            b'{"n":%d,%s' % (start + i, encoded[1:]) for i, encoded in enumerate(events)
        )
        return RawJSON(
            b'{"events":[%s],"cursor":%d,"lagged":%d}' % (numbered, self.delivered, lagged)
        )


@dataclass(eq=False)
class Stream:
    """One open stream of a subscription: `cursor` is where its next line starts."""

    sub: Subscription
    cursor: int
    write_now: WriteNow | None = None  # its connection's, when it offers one
    waiters: set[asyncio.Future] = field(default_factory=set)  # while it is `ready`


class Subscriptions:
    """Every live subscription of one daemon, plus the waiters of the durable tail."""

    def __init__(
        self,
        kb: KB,
        *,
        cap: int = 1024,
        quota: int = QUOTA,
        ring: int = 256,
        idle_s: float = 300.0,
    ) -> None:
        self.kb = kb
        self.cap = cap
        self.quota = quota
        self.ring = ring
        self.idle_s = idle_s
        self._subs: dict[str, Subscription] = {}
        self._held: dict[str | None, int] = {}  # principal -> subscriptions it holds
        self._encoded: dict[tuple, bytes] = {}  # (goal, context) -> this seq's event JSON
        self._encoded_seq = -1
        self._tail_waiters: set[asyncio.Future] = set()
        self.parked = 0  # requests waiting here (long polls), not running
        self.waking = 0  # of those, woken and not yet run
        self.stopping = False  # see `stop_waiting`
        self._tail_token = kb.on_commit(lambda seq, op: self._wake(self._tail_waiters))

    def watch(
        self,
        goal: Any,
        context: Any,
        max_events: int | None,
        caller: Caller | None = None,
        since: int | None = None,
    ) -> dict[str, Any]:
        """Open a subscription; with `since`, its ring starts with the events of the writes
        after that seq, replayed from the change log (a subscriber resuming after the
        daemon restarted). The reply's `seq` is where the subscription starts."""
        principal = caller.id if caller is not None else None
        held = self._held.get(principal, 0)
        if principal is not None and held >= self.quota:
            raise Refused(
                "too-many-subscriptions",
                f"{principal} holds {held} subscriptions, its quota of {self.quota}: unwatch "
                "one it no longer polls (idle ones are reaped), or ask the operator to raise "
                "--max-subscriptions-per-principal",
                {"quota": self.quota, "held": held, "principal": principal},
            )
        if len(self._subs) >= self.cap:
            raise Refused(
                "too-many-subscriptions",
                f"the daemon holds {self.cap} subscriptions, its cap: unwatch some first, or "
                "ask the operator to raise --max-subscriptions",
                {"cap": self.cap},
            )
        size = self.ring if max_events is None else max_events
        if type(size) is not int or not 1 <= size <= 65_536:
            raise Refused(
                "bad-option",
                "max_events is an integer from 1 to 65536",
                {"option": "max_events", "value": repr(max_events)},
            )
        if isinstance(goal, list) and len(goal) == 1:
            goal = goal[0]  # a conjunction of one literal is that literal
        sub = Subscription(secrets.token_urlsafe(16), goal, context, size, principal)
        replayed: list[Event] | None = None if since is None else []

        def deliver(event: Event) -> None:
            if replayed is None:
                self._deliver(sub, event)
            else:  # (the replay, while `kb.watch` runs)
                replayed.append(event)

        # The engine validates goal and context; the subscription starts exactly here,
        # between two writes, because the loop runs one operation at a time.
        sub.kb_token = self.kb.watch(deliver, goal=goal, ctx=context, since=since)
        if replayed:
            sub.replayed(replayed)
        replayed = None
        sub.query = (None if goal is None else show(parse(goal)), context)
        self._subs[sub.token] = sub
        self._held[principal] = held + 1
        return {"token": sub.token, "cursor": 0, "max_events": size, "seq": self.kb.seq}

    def _get(self, token: Any, caller: Caller | None = None) -> Subscription:
        sub = self._subs.get(token) if isinstance(token, str) else None
        if sub is None:
            raise Refused(
                "unknown-subscription",
                "no such subscription (never made, unwatched, or reaped after idling)",
                {"token": str(token)[:64]},
            )
        if caller is not None and not _may_use(caller, sub):
            raise Refused(
                "koinii/foreign-subscription",
                f"{caller.id} polls and unwatches only the subscriptions it opened; watch "
                "for yourself instead",
                {"agent": caller.id, "owner": sub.principal},
            )
        return sub

    async def poll(
        self, token: Any, cursor: Any, wait_ms: Any, caller: Caller | None = None
    ) -> RawJSON:
        sub = self._get(token, caller)
        sub.last_poll = time.monotonic()
        _check_cursor(sub, cursor)
        wait_ms = check_wait(wait_ms)
        if cursor == sub.delivered and wait_ms > 0:
            await self._park(sub.waiters, wait_ms / 1000)
            if not sub.alive:
                raise Refused(
                    "unknown-subscription",
                    "the subscription was dropped while the poll waited",
                    {"token": token},
                )
            sub.last_poll = time.monotonic()
        return sub.reply(cursor)

    def stream(self, token: Any, cursor: Any, caller: Caller | None = None) -> Stream:
        """The subscription's events from `cursor` on, for `lines` to write (see the
        module docstring). Checked here, before the first line: a refusal is an ordinary
        reply, not a stream."""
        sub = self._get(token, caller)
        _check_cursor(sub, cursor)
        return Stream(sub, cursor)

    async def lines(
        self, stream: Stream, write_now: WriteNow | None = None
    ) -> AsyncIterator[bytes]:
        """The lines of `stream` that its reply sends, as JSON: every line, or — given
        its connection's `write_now` (`chunks.WRITE_NOW`) — only the first, the
        keepalives and those the connection could not take at once; `_deliver` writes
        the rest itself as the writes commit."""
        sub = stream.sub
        stream.write_now = write_now
        sub.streams += 1
        try:
            while True:
                sub.last_poll = time.monotonic()
                line = sub.reply(stream.cursor) + b"\n"  # the events since the last, or none
                stream.cursor = sub.delivered
                yield line
                if not sub.alive or self.stopping:
                    return
                if stream.cursor < sub.delivered:
                    continue  # more came while that line waited for a slow reader: at once
                if write_now is None:
                    await self._park(sub.waiters, STREAM_KEEPALIVE_S)
                else:
                    sub.ready.append(stream)
                    try:
                        await self._park(stream.waiters, STREAM_KEEPALIVE_S)
                    finally:
                        if stream in sub.ready:  # (not when a line could not go at once)
                            sub.ready.remove(stream)
                if not sub.alive or (self.stopping and stream.cursor == sub.delivered):
                    return  # (stopping: what came meanwhile is still written first)
        finally:
            sub.streams -= 1

    def unwatch(self, token: Any, caller: Caller | None = None) -> bool:
        sub = self._subs.get(token) if isinstance(token, str) else None
        if sub is None:
            return False
        if caller is not None:
            self._get(token, caller)  # refuses another principal's subscription
        del self._subs[token]
        held = self._held[sub.principal] - 1
        if held:
            self._held[sub.principal] = held
        else:
            del self._held[sub.principal]
        sub.alive = False
        self.kb.unwatch(sub.kb_token)
        self._wake_all(sub)
        return True

    def describe(self, caller: Caller | None = None) -> list[dict[str, Any]]:
        """The live subscriptions; a subscription's token only to who may use it."""
        return [
            {
                "token": s.token if caller is None or _may_use(caller, s) else None,
                "principal": s.principal,
                "delivered": s.delivered,
                "pending": len(s.ring),
                "goal": s.goal,
                "context": s.context,
            }
            for s in self._subs.values()
        ]

    def reap(self) -> list[str]:
        """Drop subscriptions nobody polled for `idle_s`; returns their tokens."""
        now = time.monotonic()
        idle = [
            t
            for t, s in self._subs.items()
            if not s.waiters and not s.streams and now - s.last_poll > self.idle_s
        ]
        for token in idle:
            self.unwatch(token)
        return idle

    async def changes(self, since: Any, limit: Any, wait_ms: Any) -> dict[str, Any]:
        """The durable tail after global seq `since`, waiting up to `wait_ms` for news."""
        if limit is None:
            limit = 1000
        if type(limit) is not int or not 1 <= limit <= 10_000:
            raise Refused("bad-option", "limit is an integer from 1 to 10000", {"option": "limit"})
        wait_ms = check_wait(wait_ms)
        reply = self.kb.changes(since, limit)
        if not reply["entries"] and not reply["too_old"] and wait_ms > 0 and since >= self.kb.seq:
            await self._park(self._tail_waiters, wait_ms / 1000)
            reply = self.kb.changes(since, limit)
        return reply

    async def next_commit(self, timeout_s: float) -> None:
        """Wait until the next durable write (or the timeout)."""
        await self._park(self._tail_waiters, max(0.0, timeout_s))

    async def _park(self, waiters: set[asyncio.Future], timeout_s: float) -> None:
        """Wait among `waiters` until woken (`_wake`) or `timeout_s`, counted in `parked`;
        not at all once the daemon is stopping."""
        if self.stopping:
            return
        waiter = asyncio.get_running_loop().create_future()
        waiters.add(waiter)
        self.parked += 1
        try:
            async with asyncio.timeout(timeout_s):  # the waiter is awaited directly: a wake
                await waiter  # resumes this task in the next turn of the loop
        except TimeoutError:
            pass
        finally:
            self.parked -= 1
            waiters.discard(waiter)
            if waiter.done() and not waiter.cancelled():  # it was woken (`_wake`)
                self.waking -= 1

    def _deliver(self, sub: Subscription, event: Event) -> None:
        sub.push(self._encoded_for(sub, event))
        self._wake(sub.waiters)
        if sub.ready:
            self._write_ready(sub)

    def _write_ready(self, sub: Subscription) -> None:
        """The one pass: each stream of `sub` in `ready` is written its line here, at
        once. One whose connection cannot take it now leaves the pass, woken: its task
        sends the line when the connection drains (`lines`)."""
        stalled = False
        for stream in sub.ready:
            if stream.write_now(sub.reply(stream.cursor) + b"\n"):  # type: ignore[misc]
                stream.cursor = sub.delivered
            else:
                self._wake(stream.waiters)
                stalled = True
        if stalled:  # a woken stream's waiters are empty
            sub.ready = [stream for stream in sub.ready if stream.waiters]

    def _encoded_for(self, sub: Subscription, event: Event) -> bytes:
        """The JSON of `event`, rendered once for every subscription with `sub`'s standing
        query: the feed routes one write to each by its goal and context alone, so they
        all receive the same event (a write's events are delivered together)."""
        if event.seq != self._encoded_seq:
            self._encoded.clear()
            self._encoded_seq = event.seq
        encoded = self._encoded.get(sub.query)
        if encoded is None:
            encoded = self._encoded[sub.query] = render(encode_event(event))
        return encoded

    def _wake_all(self, sub: Subscription) -> None:
        """Wake every wait on `sub`: its long polls and its streams, `ready` or not."""
        self._wake(sub.waiters)
        for stream in sub.ready:
            self._wake(stream.waiters)

    def _wake(self, waiters: set[asyncio.Future]) -> None:
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
                self.waking += 1
        waiters.clear()

    def stop_waiting(self) -> None:
        """The daemon is stopping: wake every parked wait, so each answers what it has at
        once (a normal reply, not an error), and park nothing from now on. Subscriptions
        stay until `close`, so a poll that arrives meanwhile answers normally too."""
        self.stopping = True
        for sub in self._subs.values():
            self._wake_all(sub)
        self._wake(self._tail_waiters)

    def close(self) -> None:
        """Shutdown: drop every subscription and wake every parked poll."""
        self.stopping = True
        for token in list(self._subs):
            self.unwatch(token)
        self._wake(self._tail_waiters)


def _check_cursor(sub: Subscription, cursor: Any) -> None:
    if type(cursor) is not int or cursor < 0 or cursor > sub.delivered:
        raise Refused(
            "bad-cursor",
            f"cursor must be an integer from 0 to {sub.delivered} (events delivered so far)",
            {"cursor": repr(cursor), "delivered": sub.delivered},
        )


def _may_use(caller: Caller, sub: Subscription) -> bool:
    return caller.role == "operator" or caller.id == sub.principal


def check_wait(wait_ms: Any) -> int:
    if wait_ms is None:
        return 0
    if type(wait_ms) is not int or not 0 <= wait_ms <= MAX_WAIT_MS:
        raise Refused(
            "bad-option",
            f"wait_ms is an integer from 0 to {MAX_WAIT_MS}",
            {"option": "wait_ms", "value": repr(wait_ms)[:40], "max": MAX_WAIT_MS},
        )
    return wait_ms
