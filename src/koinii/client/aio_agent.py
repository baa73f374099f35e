"""The coordination channel for asyncio: `channel.Agent`'s moves and reads as coroutines
over an `AsyncClient`, and its subscriptions as async iterators.

    client = koinii.aconnect(url, token=token)
    atlas = await achannel.join(achannel.wire(client), "CxDeploy", "AgentAtlas")
    question = await atlas.pose_query("(usesDatabase ProdCluster ?db)")
    async with atlas.subscribe("(answers ?who ?what ?q)", "CxDeploy") as events:
        async for event in events:
            ...

One set of rules, not two: every move is one operation on the writer (`koinii.channel.moves`),
awaited on the client's connections — the same calls `channel.Agent` makes, built by the
same functions (`channel.move_call` and its kin), so the async channel cannot drift from
the blocking one, and no move needs a thread. A move is one request, so the daemon makes
it whole or not at all; a caller that cancels one mid-flight does not learn which (the
thread shows it). Subscriptions need no thread either: `subscribe`
is `koinii.client.asubscribe.Subscription` over the client, with the wire medium's guarantees
(every event once, in order, across outages).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from koinii.channel import agent as _sync
from koinii.client.asubscribe import Subscription
from koinii.kb import Edited, Hit, Sentex
from koinii.results import Dispute, Question, Thread
from koinii.speech import ANSWERS, ENDORSES, ref
from koinii.terms import Term, Var

__all__ = ["Agent", "Subscription", "Wire", "join", "wire"]


@dataclass(frozen=True)
class Wire:
    """The cross-process medium for asyncio: an `AsyncClient` (`koinii.aconnect`)."""

    store: Any


def wire(client: Any) -> Wire:
    """A medium over an asyncio daemon connection."""
    return Wire(client)


async def join(medium: Wire, channel: str, agent_id: str, *, speaks: str = "CxSpeechActs") -> Agent:
    """`channel.join`, awaited: the move `moves.join`, one exchange, with the same
    refusals before any write, and as idempotent."""
    name, fields = _sync.join_call(agent_id, getattr(channel, "name", channel), speaks)
    joined = await medium.store.invoke(name, **fields)
    return Agent(medium, agent_id, joined["context"], joined["channel"])


@dataclass(frozen=True)
class Agent:
    """A joined agent, for asyncio: every move and read of `channel.Agent`, awaited."""

    medium: Wire
    agent: str
    context: str
    channel: str

    @property
    def store(self) -> Any:
        """The `AsyncClient` underneath."""
        return self.medium.store

    async def _call(self, call: tuple[str, dict[str, Any]]) -> Any:
        name, fields = call
        return await self.store.invoke(name, **fields)

    async def _read(self, name: str, **fields: Any) -> Any:
        return await self.store.invoke(name, channel=self.channel, **fields)

    async def move(self, name: str, **fields: Any) -> dict[str, Any]:
        """The move `moves.<name>` with its whole reply (`channel.Agent.move`)."""
        return await self._call(_sync.move_call(self.agent, name, **fields))

    # --- moves ------------------------------------------------------------------------------

    async def claim(self, sentence: Term, **opts: Any) -> int:
        return (await self.move("claim", sentence=sentence, **opts))["handle"]

    async def ask(self, question: Any) -> int:
        return (await self.move("ask", question=question))["handle"]

    async def answer(self, question: int, content: Any) -> int:
        return (await self._call(_sync.answer_call(self.agent, question, content)))["handle"]

    async def endorse(self, target: int) -> int:
        return (await self.move("endorse", target=target))["handle"]

    async def justify(self, target: int, ground: Any) -> int:
        return (await self._call(_sync.justify_call(self.agent, target, ground)))["handle"]

    async def not_understood(self, target: int) -> int:
        return (await self.move("not_understood", target=target))["handle"]

    async def refuse(self, target: int) -> int:
        return (await self.move("refuse", target=target))["handle"]

    async def dispute(self, target: int) -> int:
        return (await self.move("dispute", target=target))["handle"]

    async def vote(self, target: int, stance: str) -> int:
        return (await self._call(_sync.vote_call(self.agent, target, stance)))["handle"]

    async def accept(self, answer: int, reason: str | None = None) -> int:
        return (await self.move("accept", answer=answer, reason=reason))["handle"]

    async def close(self, question: int, reason: str | None = None) -> int:
        return (await self.move("close", question=question, reason=reason))["handle"]

    async def withdraw(self, handle: int) -> Edited:
        return _sync.edited_of(await self.move("withdraw", handle=handle))

    async def concede(self, target: int, reason: str) -> dict[str, Any]:
        return await self.move("concede", target=target, reason=reason)

    async def reply_many(self, sentences: Sequence[Any]) -> Edited:
        return _sync.edited_of(await self.move("reply_many", sentences=list(sentences)))

    async def assert_(self, sentence: Term, **opts: Any) -> int:
        """Deprecated: `claim`."""
        _sync._deprecated("Agent.assert_", "Agent.claim")
        return await self.claim(sentence, **opts)

    async def pose_query(self, question: Any) -> int:
        """Deprecated: `ask`."""
        _sync._deprecated("Agent.pose_query", "Agent.ask")
        return await self.ask(question)

    # --- reads --------------------------------------------------------------------------------

    async def answers_to(self, query_handle: int) -> list[Sentex]:
        pattern = (ANSWERS, Var("a"), Var("c"), ref(query_handle))
        return await self.store.sentexes_matching(pattern, "?ctx")

    async def endorsements_of(self, target: int) -> list[Sentex]:
        return await self.store.sentexes_matching((ENDORSES, Var("a"), ref(target)), "?ctx")

    async def open_queries(self) -> list[Question]:
        return await self.questions("unsettled")

    async def questions(
        self,
        state: str | None = None,
        *,
        limit: int | None = None,
        before: int | None = None,
        as_of: int | None = None,
        as_of_ms: int | None = None,
    ) -> list[Question]:
        return await self._read(
            "conversation.questions",
            state=state,
            limit=limit,
            before=before,
            as_of=as_of,
            as_of_ms=as_of_ms,
        )

    async def queries(
        self, state: str | None = None, *, limit: int | None = None, before: int | None = None
    ) -> list[Question]:
        """Deprecated: `questions`."""
        _sync._deprecated("Agent.queries", "Agent.questions")
        return await self.questions(state, limit=limit, before=before)

    async def thread(
        self,
        handle: int,
        *,
        limit: int | None = None,
        before: int | None = None,
        as_of: int | None = None,
        as_of_ms: int | None = None,
    ) -> Thread:
        return await self._read(
            "conversation.thread",
            handle=handle,
            limit=limit,
            before=before,
            as_of=as_of,
            as_of_ms=as_of_ms,
        )

    async def disputes(
        self,
        state: str | None = None,
        *,
        limit: int | None = None,
        before: list[int] | None = None,
        as_of: int | None = None,
        as_of_ms: int | None = None,
    ) -> list[Dispute]:
        return await self._read(
            "conversation.disputes",
            state=state,
            limit=limit,
            before=before,
            as_of=as_of,
            as_of_ms=as_of_ms,
        )

    async def members(self) -> list[str]:
        return await self._read("conversation.members")

    async def roster(self) -> dict[str, Any]:
        return await self._read("conversation.roster")

    async def query(
        self, goal: Any, ctx: Any = None, *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        return await self.store.query(goal, self.channel if ctx is None else ctx, limit=limit)

    async def search(
        self, text: str, *, limit: int = 10, ctx: Any = None, ranking: str | None = None
    ) -> list[Hit]:
        where = self.channel if ctx is None else ctx
        return await self.store.search(text, where, limit=limit, ranking=ranking)

    async def vocabulary(self, ctx: Any = None) -> list[dict[str, Any]]:
        return await self.store.vocabulary(self.channel if ctx is None else ctx)

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
        member's moves), as an async iterator (`koinii.client.asubscribe`): it opens at `await`,
        `async with` or the first step of `async for`, and survives daemon restarts."""
        return Subscription(
            self.store, goal, ctx, wait_ms=wait_ms, on_lagged=on_lagged, on_error=on_error
        )
