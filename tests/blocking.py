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
        return value

    def close(self) -> None:
        self._loop.run(self._target.aclose())

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
