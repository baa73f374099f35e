"""The coordination channel: agents as contexts, moves as sentexes, the feed as the medium.

One concept: the agent as a caller — one method per move and per conversation read, each
a single call to its operation, plus the feed it follows; its size is their docstrings,
which are what a programmer reads.

An agent JOINS: its own context is placed under a shared channel context (the channel
then sees every member's claims), rooted in the speech-act vocabulary, and marked as the
agent's own. It then makes MOVES — claims, queries and replies — each a sentex in its own
context with itself as creator; a reply is a meta-sentex ON its target, so retracting the
target tears the reply down with it. It SUBSCRIBES to the channel through the change
feed and reacts, decoupled in time: nothing needs two agents online at once, because the
conversation lives in the knowledge base, not in the agents.

Two media, one surface: `local(kb)` for agents in one process (subscribe is a plain
`kb.watch`, whose callback runs on the writer's thread) and `wire(client)` for agents in
separate processes (every write goes through the daemon, the single writer; subscribe
polls the wire feed on a thread of its own, so a slow agent never stalls the writer).
For asyncio, `koinii.client.aio_agent` runs this module's `Agent` off the event loop over an
`AsyncClient`, so the rules below are written once.

Every move is one operation on the writer (`koinii.channel.moves`), so the conversation's rules
hold for every client, not only this one: this module names the calls and carries the
feed.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from koinii import speech
from koinii.channel import follow
from koinii.channel.conversation import sentex_named
from koinii.disputes.majority import stance_predicate
from koinii.errors import Refused
from koinii.identity import context_for, owners_of
from koinii.kb import Edited, Event, Hit, Sentex
from koinii.operations import invoker
from koinii.results import Dispute, Question, Thread
from koinii.speech import ANSWERS, ENDORSES, STANCES, ref
from koinii.terms import Sym, Term, Var, is_individual_name, show

__all__ = [
    "STANCES",
    "WRITER_ORDER",
    "Agent",
    "Subscription",
    "answer_content",
    "join",
    "local",
    "speaker_of",
    "stance_predicate",
    "unsubscribe",
    "wire",
]

log = logging.getLogger("koinii.channel.agent")

WRITER_ORDER = "single-writer-total-order"
"""The consistency model, as documentation: the daemon serialises every write, so the feed
delivers one total order — every agent reads the same events in the same sequence and can
only reply to what it has seen. With one writer the store order is the causal order, so
no logical clocks are needed; they would be only if Koinii went multi-writer."""

# --- media ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Local:
    """The single-process medium: an in-process KB."""

    store: Any

    def subscribe(self, goal, ctx, callback, wait_ms, on_lagged, on_error) -> Subscription:
        """A plain `kb.watch`; a callback that raises loses only its own event, reported
        to `on_error` as over the wire. It never lags (delivery is synchronous), so
        `on_lagged` is never called."""
        holder: list[Subscription] = []

        def deliver(event: Event) -> None:
            try:
                callback(event)
            except Exception as exc:  # loses only this event
                _report(on_error, exc, holder[0])

        token = self.store.watch(deliver, goal=goal, ctx=ctx)
        sub = Subscription(str(token), lambda: self.store.unwatch(token))
        holder.append(sub)
        return sub

    def _no_feed(self, *args: Any, **kwargs: Any) -> Any:
        raise Refused(
            "koinii/no-wire-feed",
            "a local medium has no cursor feed: subscribe with a callback instead",
            {},
        )

    open_feed = poll_feed = close_feed = _no_feed


@dataclass(frozen=True)
class Wire:
    """The cross-process medium: a daemon connection (`koinii.connect`)."""

    store: Any

    def subscribe(self, goal, ctx, callback, wait_ms, on_lagged, on_error) -> Subscription:
        """Poll the daemon's feed on a thread of its own. The subscription outlives the
        daemon's: after a restart or an outage it reopens with backoff and resumes from
        the last seq it delivered (`watch(since=…)` replays the writes it missed from the
        durable change log), so no event is lost or delivered twice; `on_error` hears of
        each outage once, `on_lagged` when the log no longer reaches back that far. The
        rules are the follower's (`koinii.channel.follow.subscription`); this is its
        blocking driver on a thread."""
        sub = Subscription("", lambda: None, goal=goal, ctx=ctx)
        core = follow.Core(follow.subscription(sub, wait_ms))
        core.send(follow.request(self.store, core.action))  # opened here: refusals raise
        sub._stop = lambda: self.store.unwatch(sub.token)
        thread = threading.Thread(
            target=_poll_loop,
            args=(self.store, sub, core, callback, on_lagged, on_error),
            name=f"koinii-subscribe-{sub.token}",
            daemon=True,
        )
        sub._thread = thread
        thread.start()
        return sub

    def open_feed(self, goal: Any = None, ctx: Any = None) -> dict[str, Any]:
        return self.store.watch(goal=goal, ctx=ctx)

    def poll_feed(self, token: str, cursor: int, wait_ms: int = 0) -> dict[str, Any]:
        return self.store.poll(token, cursor, wait_ms)

    def close_feed(self, token: str) -> bool:
        return self.store.unwatch(token)


def local(kb: Any) -> Local:
    """A medium over an in-process KB — the single-process shape."""
    return Local(kb)


def wire(client: Any) -> Wire:
    """A medium over a daemon connection — the cross-process shape."""
    return Wire(client)


@dataclass
class Subscription:
    """A live subscription; `stop()` (or `unsubscribe`) drops it, idempotently.

    Over the wire, `token` is the daemon's current subscription (it changes when the
    subscription resumes after an outage), `last_seq` the seq of the last event delivered
    (or where the subscription started), and `outages` how many outages it came through.
    """

    token: str
    _stop: Callable[[], Any] = field(repr=False)
    running: bool = True
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)
    goal: Any = field(default=None, repr=False)
    ctx: Any = field(default=None, repr=False)
    last_seq: int = 0
    outages: int = 0
    _wake: threading.Event = field(default_factory=threading.Event, repr=False)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()  # out of a backoff sleep at once
        try:
            self._stop()  # over the wire this also wakes the parked poll
        except Exception:
            log.warning("subscription %s: unwatch failed", self.token, exc_info=True)
        if self._thread is None:
            self.running = False
        elif self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def unsubscribe(sub: Subscription) -> None:
    """Drop a subscription. Idempotent."""
    sub.stop()


def _poll_loop(store, sub, core, callback, on_lagged, on_error) -> None:
    """The wire subscription's loop, on its own thread (named koinii-subscribe-<token>):
    the follower's blocking driver, calling back for each event it delivers. A callback
    that raises loses only its event; a refusal for good, or worse than the transport,
    is reported once and ends the loop."""

    def report(exc: BaseException) -> None:
        _report(on_error, exc, sub)

    try:
        for event in follow.run(
            core,
            store,
            on_lagged=follow.tell_lagged(on_lagged, sub),
            on_outage=report,
            pause=sub._wake.wait,
            stopped=lambda: sub._stopped,
        ):
            try:
                callback(event)
            except Exception as exc:  # loses only this event
                report(exc)
    except BaseException as exc:  # refused for good, or worse than the transport
        report(exc)
    finally:
        sub.running = False


def _report(on_error, exc: BaseException, sub: Subscription) -> None:
    if on_error is not None:
        try:
            on_error(exc)
            return
        except Exception:
            log.exception("subscription %s: on_error raised", sub.token)
    log.error("subscription-failed: %s: %s", sub.token, exc)


# --- joining ----------------------------------------------------------------------------------


def join(
    medium: Local | Wire, channel: str, agent_id: str, *, speaks: str = "CxSpeechActs"
) -> Agent:
    """Place `agent_id`'s own context under `channel` and return its handle: the move
    `moves.join`, one exchange over the wire.

    Refused before any write: joining as the registry (`koinii/registry-forbidden`), and
    a channel that is the registry, the agent's own context or another agent's own
    context (`koinii/not-a-channel`). Monotonic and idempotent: re-joining changes nothing.
    """
    channel = channel.name if type(channel) is Sym else channel
    name, fields = join_call(agent_id, channel, speaks)
    joined = invoker(medium.store)(name, **fields)
    return Agent(medium, agent_id, joined["context"], joined["channel"])


# --- the moves as calls: built once, for this module's Agent and achannel's ----------------
# Each builder answers (operation, fields) for `operations.invoker` or `AsyncClient.invoke`:
# terms go as their text, so the same fields run in-process and over the wire.


def join_call(agent: str, channel: str, speaks: str) -> tuple[str, dict[str, Any]]:
    return "moves.join", {"agent": agent, "channel": channel, "speaks": speaks}


def move_call(agent: str, name: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    """`moves.<name>` as `agent`, its fields as JSON values (terms as their text)."""
    return f"moves.{name}", {"agent": agent, **{k: _json(v) for k, v in fields.items()}}


def answer_call(agent: str, question: Any, content: Any) -> tuple[str, dict[str, Any]]:
    if type(question) is not int and type(content) is int:  # answer(content, query): 0.x
        _deprecated("answer(content, query)", "answer(question, content)")
        question, content = content, question
    return move_call(agent, "answer", question=question, content=content)


def justify_call(agent: str, target: Any, ground: Any) -> tuple[str, dict[str, Any]]:
    if type(target) is not int and type(ground) is int:  # justify(ground, target): 0.x
        _deprecated("justify(ground, target)", "justify(target, ground)")
        target, ground = ground, target
    return move_call(agent, "justify", target=target, ground=ground)


def vote_call(agent: str, target: Any, stance: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(target, str) and not isinstance(stance, str):  # vote(stance, target): 0.x
        _deprecated("vote(stance, target)", "vote(target, stance)")
        target, stance = stance, target
    return move_call(agent, "vote", target=target, stance=stance)


def edited_of(reply: dict[str, Any]) -> Edited:
    """A withdrawal's or a reply's result as the engine's `Edited`."""
    return Edited(
        handles=reply.get("handles", []),
        removed_sentexes=reply.get("removed_sentexes", 0),
        removed_justifications=reply.get("removed_justifications", 0),
        seq=reply.get("seq"),
    )


def _json(value: Any) -> Any:
    """A move's field as JSON: a term as its text, a binding map's values too."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(v, (str, tuple, Sym)) for v in value):
        return [_json(v) for v in value]
    return show(value)


def _deprecated(old: str, new: str) -> None:
    """A name or argument order before one name and one order per thing (kept one release)."""
    warnings.warn(
        f"{old} is deprecated: call {new} (one name and one argument order on every surface)",
        DeprecationWarning,
        stacklevel=4,
    )


def withdraw(medium: Local | Wire, handle: int, agent_id: str | None = None) -> Edited:
    """Take back a move as the agent whose context holds it (`Agent.withdraw`, the same
    checks and cascade), joining no channel: a withdrawal names none, and a join writes.
    `agent_id` defaults to the owner of the move's context (its join's mark, else the
    move's creator when the context is the creator's own); naming another agent is
    refused `koinii/foreign-sentex`, a sentex no agent's context holds `koinii/not-a-move`."""
    if agent_id is None:
        moved = sentex_named(medium.store, handle)  # refuses a bad or unknown handle
        owners = owners_of(medium.store, moved.context)
        creator = moved.provenance.get("creator")
        if not owners and isinstance(creator, str) and is_individual_name(creator):
            owners = [creator] if context_for(creator) == moved.context else []
        if len(owners) != 1:
            raise Refused(
                "koinii/not-a-move",
                f"#{handle} is in {moved.context}, which is no agent's own context: it is "
                "not a move to withdraw (retract takes back a plain sentence)",
                {"handle": handle, "context": moved.context},
            )
        agent_id = owners[0]
    return Agent(medium, agent_id, context_for(agent_id), "").withdraw(handle)


# --- the agent handle -------------------------------------------------------------------------


@dataclass(frozen=True)
class Agent:
    """A joined agent: every write lands in its own context with itself as creator.

    Each move is ONE operation on the writer (`koinii.channel.moves`): its checks and its write
    run there, for every client, so this class only names the call. Moves return the
    handle of what they wrote (`move` returns the whole reply); a move on an answer is a
    move on the answer's claim (what it says is what one agrees or disagrees with).
    """

    medium: Local | Wire
    agent: str
    context: str
    channel: str

    @property
    def store(self) -> Any:
        """The KB or Client underneath the medium."""
        return self.medium.store

    def _read(self, name: str, **fields: Any) -> Any:
        """One conversation read (a single daemon operation over the wire)."""
        return invoker(self.store)(name, channel=self.channel, **fields)

    def _call(self, call: tuple[str, dict[str, Any]]) -> Any:
        name, fields = call
        return invoker(self.store)(name, **fields)

    def move(self, name: str, **fields: Any) -> dict[str, Any]:
        """The move `moves.<name>` with its whole reply: `handle` and `sentence`, and what
        the move adds (an answer's `claim`, a dispute's `rebuttal`, …): one exchange."""
        return self._call(move_call(self.agent, name, **fields))

    # --- moves ------------------------------------------------------------------------------

    def claim(self, sentence: Term, **opts: Any) -> int:
        """State a claim in the agent's own context (`strength`, `provenance` options).
        Refused `koinii/use-the-move` for a speech act written out as a claim."""
        return self.move("claim", sentence=sentence, **opts)["handle"]

    def ask(self, question: Any) -> int:
        """Ask the channel: `(queries A Q)`. A sentence is quoted — with variables it is a
        pattern (`(usesDatabase ProdCluster ?db)`: which ?db?), ground it is a yes/no
        question (`(readyToShip BillingRelease)`); a string is free text; a symbol names
        the question. Returns the question's handle; answers name it."""
        return self.move("ask", question=question)["handle"]

    def answer(self, question: int, content: Any) -> int:
        """Answer the question `question`; the answer carries its claim
        (speech.answer_claim): a binding map or an instance for a pattern, the sentence or
        its negation (or true/false) for a yes/no question, any term for free text. The
        claim lands with the answer, in one write, and goes with it.

        One standing answer per agent per question: other content supersedes this agent's
        earlier answer in the same write; the same content again returns the same handle.
        Refused: `koinii/not-a-question`, `koinii/answer-mismatch`,
        `koinii/question-closed` (its asker closed it: an answer would be seen by no one).
        """
        return self._call(answer_call(self.agent, question, content))["handle"]

    def endorse(self, target: int) -> int:
        """`(endorses A (sentexHandle T))`: stand behind a claim (or an answer's claim)."""
        return self.move("endorse", target=target)["handle"]

    def justify(self, target: int, ground: Any) -> int:
        """`(justifies A ground (sentexHandle T))`: a reason for the claim T."""
        return self._call(justify_call(self.agent, target, ground))["handle"]

    def not_understood(self, target: int) -> int:
        """An error act; it outlives its target on purpose."""
        return self.move("not_understood", target=target)["handle"]

    def refuse(self, target: int) -> int:
        """An error act; it outlives its target on purpose."""
        return self.move("refuse", target=target)["handle"]

    def dispute(self, target: int) -> int:
        """Challenge a claim — another agent's claim or answer: its rebuttal `(not S)` and
        `(disputes A (sentexHandle T))`, one atomic edit, so the pair surfaces in
        `contradictions`. Returns the dispute move (`move("dispute", …)` also names the
        rebuttal). On an answer it disputes the answer's claim. Refused
        `koinii/not-disputable` for moves that assert nothing (an endorsement, a ballot, …:
        the message says what to do instead) and for the agent's own claim (withdraw it)."""
        return self.move("dispute", target=target)["handle"]

    def vote(self, target: int, stance: str) -> int:
        """A ballot on a claim (or an answer's claim): "for" → votesFor, "against" →
        votesAgainst. One standing ballot per agent per target: the other stance replaces
        this agent's earlier ballot in the same write."""
        return self._call(vote_call(self.agent, target, stance))["handle"]

    def accept(self, answer: int, reason: str | None = None) -> int:
        """As the asker: accept an answer (or an answer's claim), saying why if you will
        (shown in the thread and the feed); the question is settled. One accepted answer
        per question: accepting another replaces the earlier acceptance. Refused
        `koinii/not-an-answer`, `koinii/not-the-asker`."""
        return self.move("accept", answer=answer, reason=reason)["handle"]

    def close(self, question: int, reason: str | None = None) -> int:
        """As the asker: close the question unanswered, saying why if you will (withdraw
        the closing to reopen). Refused `koinii/not-a-question`, `koinii/not-the-asker`."""
        return self.move("close", question=question, reason=reason)["handle"]

    def withdraw(self, handle: int) -> Edited:
        """Take back one of this agent's own moves, with its cascade: the replies to it
        are torn down with it (an answer takes its claim along; a dispute its rebuttal;
        a rebuttal its disputes). The change log keeps the history. Refused
        `koinii/foreign-sentex` for another agent's move, `koinii/not-a-move` for what
        no move wrote (a rule's conclusion, the join's own marks)."""
        return edited_of(self.move("withdraw", handle=handle))

    def concede(self, target: int, reason: str) -> dict[str, Any]:
        """Give up one of this agent's own claims or answers, saying why: ONE move that
        withdraws it with its cascade and ends the disputes on it as `conceded`, kept in
        the record (thread(target) reads it). Returns the move's reply (`withdrawn`,
        `removed`, `record`, `seq`). Refused `bad-option` (no reason),
        `koinii/foreign-sentex`, `koinii/not-a-claim`."""
        return self.move("concede", target=target, reason=reason)

    def reply_many(self, sentences: Sequence[Any]) -> Edited:
        """Several linked claims as ONE reply: every sentence checked, the batch dry-run,
        then committed in one atomic edit — never a half-reply."""
        return edited_of(self.move("reply_many", sentences=list(sentences)))

    # the names before one name per thing (0.x): kept for one release
    def assert_(self, sentence: Term, **opts: Any) -> int:
        """Deprecated: `claim`."""
        _deprecated("Agent.assert_", "Agent.claim")
        return self.claim(sentence, **opts)

    def pose_query(self, question: Any) -> int:
        """Deprecated: `ask`."""
        _deprecated("Agent.pose_query", "Agent.ask")
        return self.ask(question)

    # --- reads --------------------------------------------------------------------------------

    def answers_to(self, query_handle: int) -> list[Sentex]:
        """Every believed answer to the question, from anyone, anywhere."""
        return self.store.sentexes_matching(
            (ANSWERS, Var("a"), Var("c"), ref(query_handle)), "?ctx"
        )

    def endorsements_of(self, target: int) -> list[Sentex]:
        """Every believed endorsement of the claim; distinct endorsers are distinct sentexes."""
        return self.store.sentexes_matching((ENDORSES, Var("a"), ref(target)), "?ctx")

    def open_queries(self) -> list[Question]:
        """This channel's questions that are neither settled nor closed, oldest first,
        each with its state and answer count (conversation.questions)."""
        return self.questions("unsettled")

    def questions(
        self,
        state: str | None = None,
        *,
        limit: int | None = None,
        before: int | None = None,
        as_of: int | None = None,
        as_of_ms: int | None = None,
    ) -> list[Question]:
        """This channel's questions, oldest first, with their state; `state` filters:
        open, answered, contested, settled, closed, unsettled (the first three), all.
        With `limit`, only the newest `limit` of them, asked before the handle `before`
        if given; with `as_of` (a log seq) or `as_of_ms` (a time), as they stood then
        (conversation.questions)."""
        return self._read(
            "conversation.questions",
            state=state,
            limit=limit,
            before=before,
            as_of=as_of,
            as_of_ms=as_of_ms,
        )

    def queries(
        self, state: str | None = None, *, limit: int | None = None, before: int | None = None
    ) -> list[Question]:
        """Deprecated: `questions`."""
        _deprecated("Agent.queries", "Agent.questions")
        return self.questions(state, limit=limit, before=before)

    def thread(
        self,
        handle: int,
        *,
        limit: int | None = None,
        before: int | None = None,
        as_of: int | None = None,
        as_of_ms: int | None = None,
    ) -> Thread:
        """A claim or question with everything said about it, in one read — and what was
        taken back (`withdrawn_answers`, `withdrawn`), each with its ending; a withdrawn
        handle reads as its record. With `limit`, a question's newest `limit` answers,
        before the handle `before` if given; with `as_of` (a log seq) or `as_of_ms` (a
        time), as it stood then (conversation.thread)."""
        return self._read(
            "conversation.thread",
            handle=handle,
            limit=limit,
            before=before,
            as_of=as_of,
            as_of_ms=as_of_ms,
        )

    def disputes(
        self,
        state: str | None = None,
        *,
        limit: int | None = None,
        before: list[int] | None = None,
        as_of: int | None = None,
        as_of_ms: int | None = None,
    ) -> list[Dispute]:
        """Every dispute on this channel, standing or ended, with its sides, state,
        `ending` (ruled, withdrawn, conceded, superseded), tally and ruling, in the order
        of their ids; `state` filters by a state or an ending. With `limit`, only the
        last `limit` of them, those whose id comes before the dispute_id `before` if
        given; with `as_of`/`as_of_ms`, as they stood then (conversation.disputes_on)."""
        return self._read(
            "conversation.disputes",
            state=state,
            limit=limit,
            before=before,
            as_of=as_of,
            as_of_ms=as_of_ms,
        )

    def members(self) -> list[str]:
        """The agents joined to this channel."""
        return self._read("conversation.members")

    def roster(self) -> dict[str, Any]:
        """Who is on this channel: each member's role, session and coordinator's session
        (where its wraps go), and the channel's active coordinators (conversation.roster)."""
        return self._read("conversation.roster")

    def query(
        self, goal: Any, ctx: Any = None, *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Ancestor-set-aware bindings: the channel's whole current view of `goal` (or
        `ctx`'s); with `limit`, the first `limit` solutions found (KB.query)."""
        return self.store.query(goal, self.channel if ctx is None else ctx, limit=limit)

    def search(
        self, text: str, *, limit: int = 10, ctx: Any = None, ranking: str | None = None
    ) -> list[Hit]:
        """What the channel (or `ctx`) sees whose words (or, ranked hybrid, meaning) match
        `text`, best first — to find what the team said without guessing its predicate
        (docs/search.md)."""
        where = self.channel if ctx is None else ctx
        return self.store.search(text, where, limit=limit, ranking=ranking)

    def vocabulary(self, ctx: Any = None) -> list[dict[str, Any]]:
        """The predicates in use where the channel (or `ctx`) sees, most used first,
        each with its count and an example: the words to ask and claim in."""
        return self.store.vocabulary(self.channel if ctx is None else ctx)

    # --- the feed -------------------------------------------------------------------------------

    def subscribe(
        self,
        goal: Any,
        ctx: Any,
        callback: Callable[[Event], Any],
        *,
        wait_ms: int = 20_000,
        on_lagged: Callable[[int], Any] | None = None,
        on_error: Callable[[BaseException], Any] | None = None,
    ) -> Subscription:
        """Call back when a sentex matching `goal` appears or changes in view of `ctx`
        (watch the channel to see every member's moves; a goal of None with the channel
        as `ctx` hears every move there). Forward-only: history comes from reading the
        KB. Over the wire the poll loop runs on its own thread."""
        return self.medium.subscribe(goal, ctx, callback, wait_ms, on_lagged, on_error)


def speaker_of(sentex: Sentex) -> str:
    """Who made a move: argument 1 of its sentence."""
    speaker = sentex.sentence[1]
    return speaker.name if type(speaker) is Sym else str(speaker)


def answer_content(sentex: Sentex) -> Any:
    """What an answer says: its claim (pattern and yes/no questions), its content (free
    text), or the bare term of an answer written before answers carried claims."""
    return speech.answer_content(sentex.sentence)
