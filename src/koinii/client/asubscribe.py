"""Wire subscriptions as async iterators: the asyncio twin of the channel's poll loop.

`Subscription(store, goal, ctx)` over an `AsyncClient` (its `watch`, `poll` and
`unwatch`) yields the events of the writes that `goal` matches in view of `ctx`:

    async with client.subscribe("(answers ?who ?what)", "CxDeploy") as events:
        async for event in events:
            ...

It keeps the invariants of `channel.Wire` subscriptions (channel.md, subscriptions that
survive), with the same pieces (`koinii.channel.resubscribe`): every event is yielded once, in
seq order — `last_seq` moves past an event as it is yielded, a resumed subscription
replays from it (`watch(since=last_seq)`) and an event at or below it is never yielded
again. An outage (a daemon restart, a reaping, the network) is reported once
(`on_error`, else the log) and survived with backoff; when the log no longer reaches
back, `on_lagged` hears how many events were missed and the subscription goes on from
now. A refusal for good (a revoked token, a goal that cannot be watched) ends the
iteration by raising it. `aclose()` (or leaving `async with`) drops it on the daemon and
wakes a poll parked in another task; it is idempotent.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable, Generator
from typing import Any

from koinii.channel.resubscribe import BACKOFF_S, UNRESUMABLE, jittered, lagged, missed
from koinii.errors import Refused, Unavailable
from koinii.kb import Event

__all__ = ["Subscription"]

log = logging.getLogger("koinii.channel.agent")

# What a poll answers once the daemon no longer holds the subscription (unwatched, reaped,
# or gone with a daemon restart): after `aclose()`, the end; before it, an outage.
_QUIET_ENDS = ("unknown-subscription",)


class Subscription:
    """A wire subscription, opened at `await`, `async with` or the first step of `async
    for`; from then on no write is missed. `token` is the daemon's current subscription
    (it changes when the subscription resumes), `last_seq` the seq of the last event
    yielded (or where it started), `outages` how many outages it came through."""

    def __init__(
        self,
        store: Any,
        goal: Any = None,
        ctx: Any = None,
        *,
        since: int | None = None,
        wait_ms: int = 20_000,
        on_lagged: Callable[[int], Any] | None = None,
        on_error: Callable[[BaseException], Any] | None = None,
    ) -> None:
        self.store = store
        self.goal = goal
        self.ctx = ctx
        self.token: str | None = None
        self.last_seq = 0
        self.outages = 0
        self._since = since
        self._wait_ms = wait_ms
        self._on_lagged = on_lagged
        self._on_error = on_error
        self._cursor = 0
        self._pending: collections.deque[Event] = collections.deque()
        self._stopped = False
        self._wake = asyncio.Event()

    @property
    def running(self) -> bool:
        return self.token is not None and not self._stopped

    async def open(self) -> Subscription:
        """Open it on the daemon (once; again is a no-op)."""
        if self.token is None and not self._stopped:
            opened = await self.store.watch(goal=self.goal, ctx=self.ctx, since=self._since)
            self.token, self._cursor = opened["token"], opened["cursor"]
            self.last_seq = opened.get("seq", 0) if self._since is None else self._since
        return self

    def __await__(self) -> Generator[Any, None, Subscription]:
        return self.open().__await__()

    async def __aenter__(self) -> Subscription:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        await self.open()
        while not self._stopped:
            while self._pending:
                event = self._pending.popleft()
                if event.seq <= self.last_seq:
                    continue  # yielded before the subscription resumed
                self.last_seq = event.seq
                return event
            await self._poll()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Drop it on the daemon. Idempotent; a poll parked in another task wakes."""
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()  # out of a backoff pause at once
        if self.token is not None:
            try:
                await self.store.unwatch(self.token)  # this also wakes the parked poll
            except Exception:
                log.warning("subscription %s: unwatch failed", self.token, exc_info=True)

    stop = aclose

    async def _poll(self) -> None:
        try:
            reply = await self.store.poll(self.token, self._cursor, self._wait_ms)
        except Refused as refusal:
            if self._stopped:
                return  # closed while the poll waited: a normal end
            if refusal.kind not in _QUIET_ENDS:
                self._stopped = True  # refused for good (a revoked token)
                raise
            await self._resume(refusal)
            return
        except Unavailable as exc:  # the daemon stopped, restarted, or is unreachable
            if self._stopped:
                return
            await self._resume(exc)
            return
        if reply.get("lagged", 0):
            lagged(self._on_lagged, reply["lagged"], self)
        self._pending.extend(reply["events"])
        self._cursor = reply["cursor"]

    async def _resume(self, cause: BaseException) -> None:
        """Report the outage once, then reopen from `last_seq` with backoff until it is
        back or closed (as `koinii.channel.resubscribe.resume` does for a thread)."""
        self.outages += 1
        self._report(cause)
        pause = BACKOFF_S[0]
        while not self._stopped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), jittered(pause))
            if self._stopped:
                return
            try:
                opened = await self._reopen()
            except Unavailable:
                pause = min(BACKOFF_S[1], pause * 2)
                continue
            except Refused:  # refused for good (a revoked token, say)
                self._stopped = True
                raise
            self.token, self._cursor = opened["token"], opened["cursor"]
            log.info("subscription resumed after seq %d as %s", self.last_seq, self.token)
            return

    async def _reopen(self) -> Any:
        try:
            return await self.store.watch(goal=self.goal, ctx=self.ctx, since=self.last_seq)
        except Refused as refusal:
            if refusal.kind not in UNRESUMABLE:
                raise
            opened = await self.store.watch(goal=self.goal, ctx=self.ctx)
            lagged(self._on_lagged, missed(refusal, self.last_seq), self)
            self.last_seq = opened.get("seq", self.last_seq)
            return opened

    def _report(self, exc: BaseException) -> None:
        if self._on_error is not None:
            try:
                self._on_error(exc)
                return
            except Exception:
                log.exception("subscription %s: on_error raised", self.token)
        log.warning("subscription-outage: %s: %s; resuming", self.token, exc)
