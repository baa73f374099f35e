"""A blocking face for async objects, so one test suite runs over the blocking client and
the asyncio one (and over the channel's two agents): the coroutines run on an event
loop of their own thread; a test, and any thread it starts, calls them as if blocking.

Nothing of Koinii is replaced: the async object underneath does all the work.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any


class Loop:
    """An asyncio event loop on a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run `coro` on the loop and wait for its result (its exception is raised here;
        the caller's context variables go with it, as `budget` needs)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Blocking:
    """`target` with every coroutine method called and awaited on `loop`, every awaitable
    attribute (`await client.seq`) awaited, and everything else as it is."""

    def __init__(self, target: Any, loop: Loop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if inspect.isawaitable(value):
            return self._loop.run(value)
        if inspect.iscoroutinefunction(value):
            return lambda *args, **kwargs: self._loop.run(value(*args, **kwargs))
        if inspect.isasyncgenfunction(value):
            return lambda *args, **kwargs: Iterated(value(*args, **kwargs), self._loop)
        return value

    def close(self) -> None:
        self._loop.run(self._target.aclose())

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Iterated:
    """An async iterator (`AsyncClient.stream`) iterated as if blocking: each step runs
    on the loop; `close()` closes it there."""

    def __init__(self, iterator: Any, loop: Loop) -> None:
        self._iterator = iterator
        self._loop = loop

    def __iter__(self) -> Iterated:
        return self

    def __next__(self) -> Any:
        try:
            return self._loop.run(self._iterator.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        self._loop.run(self._iterator.aclose())


class Medium:
    """An `achannel.wire(AsyncClient)` medium behind a blocking face: `join` returns an
    `AsyncAgent` whose moves are called as if blocking (`Agent`)."""

    def __init__(self, client: Any, loop: Loop) -> None:
        from koinii.client import aio_agent as achannel

        self.async_medium = achannel.wire(client)
        self.store = Blocking(client, loop)
        self._loop = loop

    def join(self, channel: str, agent_id: str, **kwargs: Any) -> Agent:
        from koinii.client import aio_agent as achannel

        joined = self._loop.run(achannel.join(self.async_medium, channel, agent_id, **kwargs))
        return Agent(joined, self)


class Agent(Blocking):
    """An `achannel.Agent` called as if blocking; `subscribe(goal, ctx, callback)` iterates
    its async subscription in a task of the loop and calls `callback` for each event."""

    def __init__(self, target: Any, medium: Medium) -> None:
        super().__init__(target, medium._loop)
        self.medium = medium
        self.store = medium.store

    def forged(self, context: str) -> Agent:
        """This agent's handle on another context (a handle the write checks must stop)."""
        from koinii.client import aio_agent as achannel

        forged = achannel.Agent(self._target.medium, self.agent, context, self.channel)
        return Agent(forged, self.medium)

    def subscribe(self, goal, ctx, callback, **kwargs: Any) -> Subscribed:
        subscription = self._target.subscribe(goal, ctx, **kwargs)
        self._loop.run(subscription.open())
        return Subscribed(subscription, callback, self._loop)


class Subscribed:
    """A running async subscription, with the blocking `channel.Subscription`'s face:
    `token`, `last_seq`, `outages`, `running`, `stop()`. The callback runs off the loop
    (as an async consumer's slow work awaits, it does not block the loop); a refusal
    that ends the iteration goes to `on_error`, as a `channel.wire` one does."""

    def __init__(self, subscription: Any, callback: Any, loop: Loop) -> None:
        self.subscription = subscription
        self._loop = loop
        self.thread_name = None

        async def deliver() -> None:
            try:
                async for event in subscription:
                    try:
                        await asyncio.to_thread(callback, event)
                    except Exception as exc:  # loses only this event
                        subscription._report(exc)
            except Exception as exc:
                subscription._report(exc)

        self._task = asyncio.run_coroutine_threadsafe(deliver(), loop.loop)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.subscription, name)

    @property
    def running(self) -> bool:
        return not self._task.done()

    def stop(self) -> None:
        self._loop.run(self.subscription.aclose())
        self._task.result(10)
