"""The coordination channel for asyncio: `channel.Agent`'s moves and reads as coroutines
over an `AsyncClient`, and its subscriptions as async iterators.

    client = koinii.aconnect(url, token=token)
    atlas = await achannel.join(achannel.wire(client), "CxDeploy", "AgentAtlas")
    question = await atlas.pose_query("(usesDatabase ProdCluster ?db)")
    async with atlas.subscribe("(answers ?who ?what ?q)", "CxDeploy") as events:
        async for event in events:
            ...

One set of rules, not two: a move runs `channel.Agent`'s own code — the write checks in
channel.md's order, then its writes — on a worker thread (`anyio.to_thread`), where the
store it calls is the `AsyncClient` seen through `_Blocking`: each call is sent back to
the event loop and awaited there, on the client's connections. So the loop never waits
on a move, and the async channel cannot drift from the blocking one (a refused move
writes nothing; the same refusals, the same reads). A cancelled move finishes its writes
first (cancellation waits for the thread), so it never stops between two of them.
Subscriptions need no thread: `subscribe` is `koinii.asubscribe.Subscription` over the
client, with the wire medium's guarantees (every event once, in order, across outages).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.from_thread
import anyio.to_thread

from koinii import channel as _sync
from koinii.asubscribe import Subscription
from koinii.kb import Edited, Hit, Sentex
from koinii.terms import Term

__all__ = ["Agent", "Subscription", "Wire", "join", "wire"]

T = TypeVar("T")


class _Blocking:
    """An `AsyncClient` as `channel.Agent`'s code calls a store (blocking), from a worker
    thread that `anyio.to_thread` started: each coroutine runs on the client's loop."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return anyio.from_thread.run(functools.partial(method, *args, **kwargs))

        return call

    @property
    def seq(self) -> int:
        return anyio.from_thread.run(self._seq)

    async def _seq(self) -> int:
        return await self._client.seq


async def _off_loop(work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(work, *args, **kwargs))


@dataclass(frozen=True)
class Wire:
    """The cross-process medium for asyncio: an `AsyncClient` (`koinii.aconnect`)."""

    store: Any


def wire(client: Any) -> Wire:
    """A medium over an asyncio daemon connection."""
    return Wire(client)


async def join(medium: Wire, channel: str, agent_id: str, *, speaks: str = "CxSpeechActs") -> Agent:
    """`channel.join`, awaited: place `agent_id`'s own context under the channel; the
    same refusals before any write, and as idempotent."""
    blocking = _sync.wire(_Blocking(medium.store))
    joined = await _off_loop(_sync.join, blocking, channel, agent_id, speaks=speaks)
    return Agent(medium, joined)


@dataclass(frozen=True)
class Agent:
    """A joined agent, for asyncio: every move and read of `channel.Agent`, awaited."""

    medium: Wire
    moves: _sync.Agent  # the same agent on the blocking face (its code is the rules)

    @property
    def store(self) -> Any:
        """The `AsyncClient` underneath."""
        return self.medium.store

    @property
    def agent(self) -> str:
        return self.moves.agent

    @property
    def context(self) -> str:
        return self.moves.context

    @property
    def channel(self) -> str:
        return self.moves.channel

    # --- moves ------------------------------------------------------------------------------

    async def assert_(self, sentence: Term, **opts: Any) -> int:
        return await _off_loop(self.moves.assert_, sentence, **opts)

    async def pose_query(self, question: Any) -> int:
        return await _off_loop(self.moves.pose_query, question)

    ask = pose_query

    async def answer(self, content: Any, query: int) -> int:
        return await _off_loop(self.moves.answer, content, query)

    async def endorse(self, target: int) -> int:
        return await _off_loop(self.moves.endorse, target)

    async def justify(self, ground: Any, target: int) -> int:
        return await _off_loop(self.moves.justify, ground, target)

    async def not_understood(self, target: int) -> int:
        return await _off_loop(self.moves.not_understood, target)

    async def refuse(self, target: int) -> int:
        return await _off_loop(self.moves.refuse, target)

    async def dispute(self, target: int) -> int:
        return await _off_loop(self.moves.dispute, target)

    async def vote(self, stance: str, target: int) -> int:
        return await _off_loop(self.moves.vote, stance, target)

    async def accept(self, answer: int) -> int:
        return await _off_loop(self.moves.accept, answer)

    async def close(self, query: int) -> int:
        return await _off_loop(self.moves.close, query)

    async def withdraw(self, handle: int) -> Edited:
        return await _off_loop(self.moves.withdraw, handle)

    async def reply_many(self, sentences: Sequence[Any]) -> Edited:
        return await _off_loop(self.moves.reply_many, sentences)

    # --- reads --------------------------------------------------------------------------------

    async def answers_to(self, query_handle: int) -> list[Sentex]:
        return await _off_loop(self.moves.answers_to, query_handle)

    async def endorsements_of(self, target: int) -> list[Sentex]:
        return await _off_loop(self.moves.endorsements_of, target)

    async def open_queries(self) -> list[dict[str, Any]]:
        return await _off_loop(self.moves.open_queries)

    async def queries(
        self, state: str | None = None, *, limit: int | None = None, before: int | None = None
    ) -> list[dict[str, Any]]:
        return await _off_loop(self.moves.queries, state, limit=limit, before=before)

    async def thread(
        self, handle: int, *, limit: int | None = None, before: int | None = None
    ) -> dict[str, Any]:
        return await _off_loop(self.moves.thread, handle, limit=limit, before=before)

    async def disputes(
        self,
        state: str | None = None,
        *,
        limit: int | None = None,
        before: list[int] | None = None,
    ) -> list[dict[str, Any]]:
        return await _off_loop(self.moves.disputes, state, limit=limit, before=before)

    async def members(self) -> list[str]:
        return await _off_loop(self.moves.members)

    async def query(
        self, goal: Any, ctx: Any = None, *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        return await _off_loop(self.moves.query, goal, ctx, limit=limit)

    async def search(
        self, text: str, *, limit: int = 10, ctx: Any = None, ranking: str | None = None
    ) -> list[Hit]:
        return await _off_loop(self.moves.search, text, limit=limit, ctx=ctx, ranking=ranking)

    async def vocabulary(self, ctx: Any = None) -> list[dict[str, Any]]:
        return await _off_loop(self.moves.vocabulary, ctx)

    # --- the feed -------------------------------------------------------------------------------

    def subscribe(
        self,
        goal: Any,
        ctx: Any,
        *,
        wait_ms: int = 20_000,
        on_lagged: Callable[[int], Any] | None = None,
        on_error: Callable[[BaseException], Any] | None = None,
    ) -> Subscription:
        """The events of the writes `goal` matches in view of `ctx` (the channel: every
        member's moves), as an async iterator (`koinii.asubscribe`): it opens at `await`,
        `async with` or the first step of `async for`, and survives daemon restarts."""
        return Subscription(
            self.store, goal, ctx, wait_ms=wait_ms, on_lagged=on_lagged, on_error=on_error
        )
