"""The coordination channel: agents as contexts, moves as sentexes, the feed as the medium.

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
For asyncio, `koinii.achannel` runs this module's `Agent` off the event loop over an
`AsyncClient`, so the rules below are written once.

Invariant: every write check (registry, creator, speaker) runs before the first write of
a move, in the order channel.md states, so a refused move writes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from koinii import speech
from koinii.adjudication import STANCES, stance_predicate
from koinii.errors import Refused
from koinii.identity import (
    AGENT_CONTEXT,
    REGISTRY,
    check_channel_parent,
    check_creator,
    check_meaning,
    check_registry_write,
    check_speaker,
    context_for,
    owners_of,
    place_agent_context,
)
from koinii.kb import Edited, Event, Hit, Sentex
from koinii.operations import invoker
from koinii.speech import ACCEPTS, ANSWERS, CLOSES, DISPUTES, ENDORSES, JUSTIFIES, QUERIES, ref
from koinii.terms import QUOTE, Sym, Term, Var, is_individual_name, parse, show

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

log = logging.getLogger("koinii.channel")

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
        each outage once, `on_lagged` when the log no longer reaches back that far."""
        opened = self.store.watch(goal=goal, ctx=ctx)
        sub = Subscription(opened["token"], lambda: None, goal=goal, ctx=ctx)
        sub._stop = lambda: self.store.unwatch(sub.token)
        sub.last_seq = opened.get("seq", 0)
        thread = threading.Thread(
            target=_poll_loop,
            args=(self.store, sub, opened["cursor"], callback, wait_ms, on_lagged, on_error),
            name=f"koinii-subscribe-{opened['token']}",
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


# What a poll answers once the daemon no longer holds the subscription (unwatched, reaped,
# or gone with a daemon restart): after `stop()`, the end; before it, an outage to resume.
_QUIET_ENDS = ("unknown-subscription",)


def _poll_loop(store, sub, cursor, callback, wait_ms, on_lagged, on_error) -> None:
    """The wire subscription's loop, on its own thread (named koinii-subscribe-<token>).

    Invariant: every event is delivered once, in seq order — `sub.last_seq` moves only
    past a delivered event, a resumed subscription replays from it (`koinii.resubscribe`),
    and an event at or below it is never delivered again.
    """
    from koinii.errors import Unavailable  # here, not at the top: see koinii.resubscribe
    from koinii.resubscribe import lagged, resume

    try:
        while not sub._stopped:
            try:
                reply = store.poll(sub.token, cursor, wait_ms)
            except Refused as refusal:
                if sub._stopped:
                    return  # stopped while the poll waited: a normal end
                if refusal.kind not in _QUIET_ENDS:
                    _report(on_error, refusal, sub)  # refused for good (a revoked token)
                    return
                cursor = resume(store, sub, refusal, on_lagged, lambda e: _report(on_error, e, sub))
                continue
            except Unavailable as exc:  # the daemon stopped, restarted, or is unreachable
                if sub._stopped:
                    return
                cursor = resume(store, sub, exc, on_lagged, lambda e: _report(on_error, e, sub))
                continue
            except BaseException as exc:  # worse than the transport: report once and end
                _report(on_error, exc, sub)
                return
            if reply.get("lagged", 0):
                lagged(on_lagged, reply["lagged"], sub)
            for event in reply["events"]:
                if event.seq <= sub.last_seq:
                    continue  # delivered before the subscription resumed
                try:
                    callback(event)
                except Exception as exc:  # loses only this event
                    _report(on_error, exc, sub)
                sub.last_seq = event.seq
            cursor = reply["cursor"]
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
    """Place `agent_id`'s own context under `channel` and return its handle.

    Refused before any write: joining as the registry (`koinii/registry-forbidden`), and
    a channel that is the registry, the agent's own context or another agent's own
    context (`koinii/not-a-channel`). Monotonic and idempotent: re-joining changes nothing.
    """
    channel = channel.name if type(channel) is Sym else channel
    own = context_for(agent_id)
    if own == REGISTRY:
        raise Refused(
            "koinii/registry-forbidden",
            f"{agent_id} would own {REGISTRY}, which no agent may write",
            {"agent": agent_id, "context": own},
        )
    store = medium.store
    check_channel_parent(store, agent_id, channel)

    def write(sentence: Any, ctx: str, opts: dict[str, Any]) -> Any:
        return store.assert_(sentence, ctx, **opts)

    place_agent_context(write, channel, agent_id, speaks)
    return Agent(medium, agent_id, own, channel)


def withdraw(medium: Local | Wire, handle: int, agent_id: str | None = None) -> Edited:
    """Take back a move as the agent whose context holds it (`Agent.withdraw`, the same
    checks and cascade), joining no channel: a withdrawal names none, and a join writes.
    `agent_id` defaults to the owner of the move's context (its join's mark, else the
    move's creator when the context is the creator's own); naming another agent is
    refused `koinii/foreign-sentex`, a sentex no agent's context holds `koinii/not-a-move`."""
    if agent_id is None:
        nobody = Agent(medium, "", "", "")
        moved = nobody._sentex(handle)  # refuses a bad or unknown handle, saying how
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

    Moves return the handle of what they wrote; a move on an answer is a move on the
    answer's claim (what it says is what one agrees or disagrees with).
    """

    medium: Local | Wire
    agent: str
    context: str
    channel: str

    @property
    def store(self) -> Any:
        """The KB or Client underneath the medium."""
        return self.medium.store

    # --- the shared write checks, in channel.md's order -----------------------------------

    def _check(self, sentence: Any, opts: dict[str, Any]) -> Any:
        check_registry_write(self.agent, self.context)
        check_creator(self.agent, opts.get("creator"))
        term = parse(sentence) if isinstance(sentence, str) else sentence
        check_speaker(self.agent, term)
        check_meaning(self.store, self.agent, term, opts.get("strength"))
        return term

    def _opts(self, opts: dict[str, Any]) -> dict[str, Any]:
        return {**opts, "creator": self.agent}

    def _read(self, name: str, **fields: Any) -> Any:
        """One conversation read (a single daemon operation over the wire)."""
        return invoker(self.store)(name, channel=self.channel, **fields)

    def _sentex(self, handle: Any) -> Sentex:
        """The stored sentex `handle` names, or a refusal that says how to find one."""
        sentex = self.store.sentex(handle) if type(handle) is int and handle > 0 else None
        if sentex is None:
            if type(handle) is not int or handle <= 0:
                raise Refused(
                    "bad-handle",
                    f"a handle is a positive integer, not {handle!r:.40}",
                    {"handle": repr(handle)[:40]},
                )
            raise Refused(
                "koinii/no-such-handle",
                f"there is no sentex {handle} (never made, or withdrawn since); "
                "questions() and disputes() list the live ones",
                {"handle": handle},
            )
        return sentex

    def _stored(self, sentence: Any, context: str) -> Sentex | None:
        for sentex in self.store.sentexes_matching(sentence, "CxEverything"):
            if sentex.context == context:
                return sentex
        return None

    def _claim(self, handle: Any, action: str) -> Sentex:
        """What `action` (dispute, vote, endorse, justify) acts on for `handle`: a claim,
        or an answer's claim; any other move is refused by name with what to do."""
        moved = self._sentex(handle)
        kind = speech.move_kind(moved.sentence)
        if kind == "claim":
            return moved
        if kind == "answer":
            claim = speech.carried_claim(moved.sentence)
            found = None if claim is None else self._stored(claim, moved.context)
            if found is not None:
                return found
            if action in ("endorse", "justify"):
                return moved  # a legacy answer without a claim is endorsed as it is
        if action in ("endorse", "justify") and kind == "question":
            return moved
        raise _not_a_claim(moved, kind, action)

    def _mine(self, sentex: Sentex) -> bool:
        creator = sentex.provenance.get("creator")
        return sentex.context == self.context and creator in (None, self.agent)

    # --- moves ------------------------------------------------------------------------------

    def assert_(self, sentence: Term, **opts: Any) -> int:
        """Originate a claim in the agent's own context."""
        term = self._check(sentence, opts)
        return self.store.assert_(term, self.context, **self._opts(opts))

    def pose_query(self, question: Any) -> int:
        """Ask the channel: `(queries A Q)`. A sentence is quoted — with variables it is a
        pattern (`(usesDatabase ProdCluster ?db)`: which ?db?), ground it is a yes/no
        question (`(readyToShip BillingRelease)`); a string is free text; a symbol names
        the question. Returns the question's handle; answers name it."""
        return self.assert_((QUERIES, Sym(self.agent), speech.question_form(question)))

    ask = pose_query

    def answer(self, content: Any, query: int) -> int:
        """Answer the question `query`; the answer carries its claim (speech.answer_claim):
        a binding map or an instance for a pattern, the sentence or its negation (or
        true/false) for a yes/no question, any term for free text. The claim lands with
        the answer, in one write, and goes with it.

        One standing answer per agent per question: other content supersedes this agent's
        earlier answer in the same write; the same content again returns the same handle.
        Refused: `koinii/not-a-question`, `koinii/answer-mismatch`,
        `koinii/question-closed` (its asker closed it: an answer would be seen by no one).
        """
        question = self._sentex(query)
        if speech.move_kind(question.sentence) != "question":
            raise _not_a_question(question, "answer")
        asker = speech.speaker(question.sentence)
        # the asker's closing, stored where the asker asked: in its own context
        closings = self.store.sentexes_matching((CLOSES, Sym(asker), ref(query)), question.context)
        if closings:
            closing = closings[0].handle
            raise Refused(
                "koinii/question-closed",
                f"question #{query} is closed: its asker {asker} closed it (#{closing}) and "
                f"takes no more answers; to say it anyway, claim it, or ask {asker} to reopen "
                "the question (by withdrawing the closing)",
                {"question": query, "closing": closing, "asker": asker},
            )
        claim = speech.answer_claim(question.sentence[2], query, content)
        check_speaker(self.agent, claim)  # an answer's claim is the agent's own claim
        act = (ANSWERS, Sym(self.agent), (QUOTE, claim), ref(query))
        self._check(act, {})
        standing = self.store.sentexes_matching(
            (ANSWERS, Sym(self.agent), Var("content"), ref(query)), self.context
        )
        text = show(act)
        same = [s.handle for s in standing if s.text == text]
        if same:
            return same[0]
        edited = self.store.edit(
            add=[(act, self.context, self._opts({}))], remove=[s.handle for s in standing]
        )
        return edited.handles[0]

    def endorse(self, target: int) -> int:
        """`(endorses A (sentexHandle T))`: stand behind a claim (or an answer's claim)."""
        claim = self._claim(target, "endorse")
        return self.assert_((ENDORSES, Sym(self.agent), ref(claim.handle)))

    def justify(self, ground: Any, target: int) -> int:
        """`(justifies A ground (sentexHandle T))`: a reason for the claim T."""
        claim = self._claim(target, "justify")
        return self.assert_((JUSTIFIES, Sym(self.agent), _arg(ground), ref(claim.handle)))

    def not_understood(self, target: int) -> int:
        """An error act; it outlives its target on purpose."""
        return self.assert_((speech.NOT_UNDERSTOOD, Sym(self.agent), ref(target)))

    def refuse(self, target: int) -> int:
        """An error act; it outlives its target on purpose."""
        return self.assert_((speech.REFUSE, Sym(self.agent), ref(target)))

    def dispute(self, target: int) -> int:
        """Challenge a claim — another agent's claim or answer: its rebuttal `(not S)` and
        `(disputes A (sentexHandle T))`, one atomic edit, so the pair surfaces in
        `contradictions`. Returns the dispute move. On an answer it disputes the answer's
        claim. Refused `koinii/not-disputable` for moves that assert nothing (an
        endorsement, a ballot, …: the message says what to do instead) and for the
        agent's own claim (withdraw it instead)."""
        claim = self._claim(target, "dispute")
        if self._mine(claim):
            raise Refused(
                "koinii/not-disputable",
                f"#{claim.handle} is your own claim: to take it back, withdraw({target})",
                {"handle": target, "claim": claim.handle, "kind": "own-claim"},
            )
        edge = (DISPUTES, Sym(self.agent), ref(claim.handle))
        self._check(edge, {})
        opts = self._opts({})
        result = self.store.edit(
            add=[(speech.negation(claim.sentence), self.context, opts), (edge, self.context, opts)]
        )
        return result.handles[1]

    def vote(self, stance: str, target: int) -> int:
        """A ballot on a claim (or an answer's claim): "for" → votesFor, "against" →
        votesAgainst. One standing ballot per agent per target: the other stance replaces
        this agent's earlier ballot in the same write."""
        predicate = stance_predicate(stance)
        claim = self._claim(target, "vote")
        mine = [
            s
            for other in STANCES.values()
            for s in self.store.sentexes_matching(
                (other, Sym(self.agent), ref(claim.handle)), self.context
            )
        ]
        if any(s.sentence[0] is predicate for s in mine) and len(mine) == 1:
            return mine[0].handle
        ballot = (predicate, Sym(self.agent), ref(claim.handle))
        self._check(ballot, {})
        edited = self.store.edit(
            add=[(ballot, self.context, self._opts({}))],
            remove=[s.handle for s in mine if s.sentence[0] is not predicate],
        )
        return edited.handles[0]

    def accept(self, answer: int) -> int:
        """As the asker: accept an answer (or an answer's claim); the question is settled.
        One accepted answer per question: accepting another replaces the earlier
        acceptance. Refused `koinii/not-an-answer`, `koinii/not-the-asker`."""
        act = self._answer(answer)
        question = self._sentex(speech.target_of(act.sentence))
        self._require_asker(question, "accept an answer to it")
        earlier = self.thread(question.handle).get("acceptance")
        move = (ACCEPTS, Sym(self.agent), ref(act.handle))
        self._check(move, {})
        edited = self.store.edit(
            add=[(move, self.context, self._opts({}))],
            remove=[earlier] if earlier is not None else [],
        )
        return edited.handles[0]

    def close(self, query: int) -> int:
        """As the asker: close the question unanswered (withdraw the closing to reopen).
        Refused `koinii/not-a-question`, `koinii/not-the-asker`."""
        question = self._sentex(query)
        if speech.move_kind(question.sentence) != "question":
            raise _not_a_question(question, "close")
        self._require_asker(question, "close it")
        return self.assert_((CLOSES, Sym(self.agent), ref(query)))

    def withdraw(self, handle: int) -> Edited:
        """Take back one of this agent's own moves, with its cascade: the replies to it
        are torn down with it (an answer takes its claim along; a dispute its rebuttal).
        The change log keeps the history. Refused `koinii/foreign-sentex` for another
        agent's move (the daemon enforces it from the token), `koinii/not-a-move` for
        what no move wrote (a rule's conclusion, the join's own marks)."""
        moved = self._sentex(handle)
        if not self._mine(moved):
            raise _foreign(moved, self.agent)
        if moved.derived:
            act = self._carrier(moved)
            if act is None:
                raise Refused(
                    "koinii/not-a-move",
                    f"#{handle} was derived by a rule, not said by you: withdraw what it "
                    f"rests on (why({handle}) shows it)",
                    {"handle": handle},
                )
            moved = act
        if moved.sentence[0] is AGENT_CONTEXT or moved.sentence[0] is Sym("genlCx"):
            raise Refused(
                "koinii/not-a-move",
                f"#{handle} marks your context as yours (written when you joined); it is "
                "not a move to withdraw",
                {"handle": handle},
            )
        remove = [moved.handle]
        if speech.move_kind(moved.sentence) == "dispute":
            remove += self._rebuttal_left_alone(moved)
        return self.store.edit(remove=remove)

    def reply_many(self, sentences: Sequence[Any]) -> Edited:
        """Several linked claims as ONE reply: check every sentence, dry-run the batch,
        then commit it in one atomic edit — never a half-reply."""
        opts = self._opts({})
        entries = []
        for sentence in sentences:
            try:
                term = self._check(sentence, {})
            except Refused as refusal:
                if refusal.kind in ("parse", "shape"):
                    term = sentence  # not a sentence at all: the dry run names the problem
                else:
                    raise
            entries.append((term, self.context, opts))
        problems = self.store.check_edit(add=entries)
        if problems:
            raise Refused(
                "koinii/reply-inadmissible",
                f"the reply has {len(problems)} problem(s); nothing was written",
                {"problems": problems},
            )
        return self.store.edit(add=entries)

    # --- what the moves need to know ---------------------------------------------------------

    def _answer(self, handle: int) -> Sentex:
        moved = self._sentex(handle)
        if speech.move_kind(moved.sentence) == "claim" and moved.derived:
            act = self._carrier(moved)
            if act is not None:
                return act
        if speech.move_kind(moved.sentence) != "answer":
            raise Refused(
                "koinii/not-an-answer",
                f"#{handle} is not an answer ({speech.move_kind(moved.sentence)}): accept "
                "takes the handle of an answer to your question (thread(question) lists them)",
                {"handle": handle, "kind": speech.move_kind(moved.sentence)},
            )
        return moved

    def _carrier(self, claim: Sentex) -> Sentex | None:
        """The answer in the claim's context that carries it, if any."""
        pattern = (ANSWERS, Var("who"), (QUOTE, claim.sentence), Var("q"))
        found = self.store.sentexes_matching(pattern, claim.context)
        return found[0] if found else None

    def _require_asker(self, question: Sentex, what: str) -> None:
        asker = speech.speaker(question.sentence)
        if asker != self.agent:
            raise Refused(
                "koinii/not-the-asker",
                f"only {asker}, who asked #{question.handle}, can {what}; to back an "
                "answer, endorse it or vote for it",
                {"handle": question.handle, "asker": asker, "agent": self.agent},
            )

    def _rebuttal_left_alone(self, edge: Sentex) -> list[int]:
        """The rebuttal a withdrawn dispute takes along — unless another of this agent's
        standing disputes rests on the same rebuttal."""
        target = self.store.sentex(speech.target_of(edge.sentence))
        if target is None:
            return []
        rebuttal = self._stored(speech.negation(target.sentence), self.context)
        if rebuttal is None or rebuttal.derived:
            return []
        for other in self.store.sentexes_matching(
            (DISPUTES, Sym(self.agent), Var("t")), self.context
        ):
            if other.handle == edge.handle:
                continue
            disputed = self.store.sentex(speech.target_of(other.sentence))
            if disputed is not None and disputed.text == target.text:
                return []
        return [rebuttal.handle]

    # --- reads --------------------------------------------------------------------------------

    def answers_to(self, query_handle: int) -> list[Sentex]:
        """Every believed answer to the question, from anyone, anywhere."""
        return self.store.sentexes_matching(
            (ANSWERS, Var("a"), Var("c"), ref(query_handle)), "?ctx"
        )

    def endorsements_of(self, target: int) -> list[Sentex]:
        """Every believed endorsement of the claim; distinct endorsers are distinct sentexes."""
        return self.store.sentexes_matching((ENDORSES, Var("a"), ref(target)), "?ctx")

    def open_queries(self) -> list[dict[str, Any]]:
        """This channel's questions that are neither settled nor closed, oldest first,
        each with its state and answer count (conversation.questions)."""
        return self.queries("unsettled")

    def queries(
        self, state: str | None = None, *, limit: int | None = None, before: int | None = None
    ) -> list[dict[str, Any]]:
        """This channel's questions, oldest first, with their state; `state` filters:
        open, answered, contested, settled, closed, unsettled (the first three), all.
        With `limit`, only the newest `limit` of them, asked before the handle `before`
        if given (conversation.questions)."""
        return self._read("conversation.questions", state=state, limit=limit, before=before)

    def thread(
        self, handle: int, *, limit: int | None = None, before: int | None = None
    ) -> dict[str, Any]:
        """A claim or question with everything said about it, in one read; with `limit`,
        a question's newest `limit` answers, before the handle `before` if given
        (conversation.thread)."""
        return self._read("conversation.thread", handle=handle, limit=limit, before=before)

    def disputes(
        self,
        state: str | None = None,
        *,
        limit: int | None = None,
        before: list[int] | None = None,
    ) -> list[dict[str, Any]]:
        """Every dispute on this channel with its sides, state, tally and ruling, in the
        order of their ids. With `limit`, only the last `limit` of them, those whose id
        comes before the dispute_id `before` if given (conversation.disputes_on)."""
        return self._read("conversation.disputes", state=state, limit=limit, before=before)

    def members(self) -> list[str]:
        """The agents joined to this channel."""
        return self._read("conversation.members")

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


def _arg(value: Any) -> Any:
    """Text names a symbol when it spells one (`"PostgreSQL14"`), else parses as a term."""
    return parse(value) if isinstance(value, str) else value


# --- refusals that say what to do instead ------------------------------------------------------

_INSTEAD = {
    "endorsement": "dispute the claim it endorses, dispute({target}), or vote against it",
    "justification": "dispute the claim it justifies, dispute({target}), or state the "
    "opposite of its ground as a claim of your own",
    "dispute": "to side with the disputed claim, vote for it: vote(target={target}, stance='for')",
    "ballot": "vote the other way on the claim: vote(target={target}, stance='against' or 'for')",
    "acceptance": "only the asker accepts; to disagree with the accepted answer, dispute it",
    "closing": "only the asker closes a question",
    "error": "it asserts nothing; to challenge what it is about, dispute({target})",
    "question": "a question asserts nothing: answer question #{handle} instead",
    "answer": "this answer carries no claim (it predates claims); answer the question again",
}


def _not_a_claim(moved: Sentex, kind: str, action: str) -> Refused:
    target = speech.target_of(moved.sentence)
    instead = _INSTEAD.get(kind, "act on a claim").format(target=target, handle=moved.handle)
    refusal_kind = {"dispute": "koinii/not-disputable", "vote": "koinii/not-votable"}.get(
        action, "koinii/not-a-claim"
    )
    return Refused(
        refusal_kind,
        f"#{moved.handle} is {_a(kind)}, not a claim: you cannot {action} it; {instead}",
        {"handle": moved.handle, "kind": kind, "target": target},
    )


def _not_a_question(moved: Sentex, action: str) -> Refused:
    kind = speech.move_kind(moved.sentence)
    return Refused(
        "koinii/not-a-question",
        f"#{moved.handle} is {_a(kind)}, not a question: {action} takes a question's handle "
        "(questions() lists them); to agree with a claim endorse it, to disagree dispute it",
        {"handle": moved.handle, "kind": kind},
    )


def _foreign(moved: Sentex, agent: str) -> Refused:
    owner = moved.provenance.get("creator") or moved.context
    kind = speech.move_kind(moved.sentence)
    instead = (
        "vote the other way on its target"
        if kind == "ballot"
        else f"to challenge it, dispute({moved.handle})"
    )
    return Refused(
        "koinii/foreign-sentex",
        f"#{moved.handle} is {owner}'s, not {agent}'s: you withdraw only your own moves; {instead}",
        {"agent": agent, "handle": moved.handle, "owner": owner},
    )


def _a(kind: str) -> str:
    name = "error act" if kind == "error" else kind
    return ("an " if name[0] in "aeiou" else "a ") + name
