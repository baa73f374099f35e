"""Wire subscriptions as async iterators: the asyncio twin of the channel's poll loop.

`Subscription(store, goal, ctx)` over an `AsyncClient` (its `watch`, `poll` and
`unwatch`) yields the events of the writes that `goal` matches in view of `ctx`:

    async with client.subscribe("(answers ?who ?what)", "CxDeploy") as events:
        async for event in events:
            ...

It is the follower's asyncio driver (`koinii.channel.follow`: the rules are its core's,
the same as `channel.Wire` subscriptions'; channel.md, subscriptions that survive): every
event is yielded once, in seq order, and a resumed subscription replays from the last seq
yielded (`watch(since=last_seq)`). An outage (a daemon restart, a reaping, the network)
is reported once (`on_error`, else the log) and survived with backoff; when the log no
longer reaches back, `on_lagged` hears how many events were missed and the subscription
goes on from now. A refusal for good (a revoked token, a goal that cannot be watched)
ends the iteration by raising it. `aclose()` (or leaving `async with`) drops it on the
daemon and wakes a poll parked in another task; it is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator
from typing import Any

from koinii.channel import follow
from koinii.kb import Event

__all__ = ["Subscription"]

log = logging.getLogger("koinii.channel.agent")


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
        self._core: follow.Core | None = None
        self._stopped = False
        self._wake = asyncio.Event()

    @property
    def running(self) -> bool:
        return self.token is not None and not self._stopped

    async def open(self) -> Subscription:
        """Open it on the daemon (once; again is a no-op)."""
        if self._core is None and not self._stopped:
            core = follow.Core(follow.subscription(self, self._wait_ms, self._since))
            core.send(await follow.request(self.store, core.action))
            self._core = core
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
        if self._core is None:  # closed before it opened
            raise StopAsyncIteration
        try:
            event = await follow.astep(
                self._core,
                self.store,
                on_lagged=follow.tell_lagged(self._on_lagged, self),
                on_outage=self._report,
                pause=self._pause,
                stopped=lambda: self._stopped,
            )
        except Exception:
            self._stopped = True  # refused for good: the follower has ended
            raise
        if event is follow.END:
            raise StopAsyncIteration
        return event

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

    async def _pause(self, seconds: float) -> None:
        """A backoff pause, cut short by `aclose()`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    def _report(self, exc: BaseException) -> None:
        if self._on_error is not None:
            try:
                self._on_error(exc)
                return
            except Exception:
                log.exception("subscription %s: on_error raised", self.token)
        log.warning("subscription-outage: %s: %s; resuming", self.token, exc)
