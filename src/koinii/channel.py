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

Invariant: every write check (registry, creator, speaker) runs before the first write of
a move, in the order channel.md states, so a refused move writes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from koinii.errors import Refused
from koinii.identity import (
    REGISTRY,
    check_channel_parent,
    check_creator,
    check_registry_write,
    check_speaker,
    context_for,
    place_agent_context,
)
from koinii.kb import Edited, Event, Sentex
from koinii.kb.sentex import NOT
from koinii.terms import Sym, Var, parse

__all__ = [
    "WRITER_ORDER",
    "Agent",
    "Subscription",
    "answer_content",
    "join",
    "local",
    "speaker_of",
    "unsubscribe",
    "wire",
]

log = logging.getLogger("koinii.channel")

WRITER_ORDER = "single-writer-total-order"
"""The consistency model, as documentation: the daemon serialises every write, so the feed
delivers one total order — every agent reads the same events in the same sequence and can
only reply to what it has seen. With one writer the store order is the causal order, so
no logical clocks are needed; they would be only if Koinii went multi-writer."""

STANCES = {"for": Sym("votesFor"), "against": Sym("votesAgainst")}
_HANDLE = Sym("sentexHandle")


def _ref(target: int) -> tuple:
    return (_HANDLE, target)


# --- media ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Local:
    """The single-process medium: an in-process KB."""

    store: Any

    def subscribe(self, goal, ctx, callback, wait_ms, on_lagged, on_error) -> Subscription:
        token = self.store.watch(callback, goal=goal, ctx=ctx)
        return Subscription(str(token), lambda: self.store.unwatch(token))

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


# --- the agent handle -------------------------------------------------------------------------


@dataclass(frozen=True)
class Agent:
    """A joined agent: every write lands in its own context with itself as creator."""

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
        return term

    def _opts(self, opts: dict[str, Any]) -> dict[str, Any]:
        return {**opts, "creator": self.agent}

    # --- moves ------------------------------------------------------------------------------

    def assert_(self, sentence: Any, **opts: Any) -> int:
        """Originate a claim in the agent's own context."""
        term = self._check(sentence, opts)
        return self.store.assert_(term, self.context, **self._opts(opts))

    def pose_query(self, question: Any) -> int:
        """A query node `(queries A question)`, answered later by handle."""
        return self.assert_((Sym("queries"), Sym(self.agent), _arg(question)))

    def answer(self, content: Any, target: int) -> int:
        """`(answers A content (sentexHandle T))`; the same answer again is the same handle."""
        return self.assert_((Sym("answers"), Sym(self.agent), _arg(content), _ref(target)))

    def endorse(self, target: int) -> int:
        """`(endorses A (sentexHandle T))`; two endorsers are two sentexes."""
        return self.assert_((Sym("endorses"), Sym(self.agent), _ref(target)))

    def justify(self, ground: Any, target: int) -> int:
        """`(justifies A ground (sentexHandle T))`: a reason for the claim T."""
        return self.assert_((Sym("justifies"), Sym(self.agent), _arg(ground), _ref(target)))

    def not_understood(self, target: int) -> int:
        """An error act; it outlives its target on purpose."""
        return self.assert_((Sym("notUnderstood"), Sym(self.agent), _ref(target)))

    def refuse(self, target: int) -> int:
        """An error act; it outlives its target on purpose."""
        return self.assert_((Sym("refuse"), Sym(self.agent), _ref(target)))

    def dispute(self, target: int) -> int:
        """Challenge the claim T: its rebuttal `(not S)` and `(disputes A (sentexHandle T))`,
        one atomic batch, so the pair surfaces in `contradictions`. Returns the edge."""
        edge = (Sym("disputes"), Sym(self.agent), _ref(target))
        self._check(edge, {})
        claim = self.store.sentex(target) if type(target) is int and target > 0 else None
        if claim is None:
            raise Refused(
                "koinii/no-such-handle",
                f"there is no sentex {target} to dispute",
                {"handle": target},
            )
        sentence = claim.sentence
        rebuttal = sentence[1] if sentence[0] is NOT else (NOT, sentence)
        opts = self._opts({})
        result = self.store.edit(add=[(rebuttal, self.context, opts), (edge, self.context, opts)])
        return result.handles[1]

    def vote(self, stance: str, target: int) -> int:
        """A ballot: "for" → votesFor, "against" → votesAgainst. One per agent per stance."""
        return self.assert_((stance_predicate(stance), Sym(self.agent), _ref(target)))

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

    # --- reads --------------------------------------------------------------------------------

    def answers_to(self, query_handle: int) -> list[Sentex]:
        """Every believed answer to the query, from anyone, anywhere."""
        return self.store.sentexes_matching(
            (Sym("answers"), Var("a"), Var("c"), _ref(query_handle)), "?ctx"
        )

    def endorsements_of(self, target: int) -> list[Sentex]:
        """Every believed endorsement of the claim; distinct endorsers are distinct sentexes."""
        return self.store.sentexes_matching((Sym("endorses"), Var("a"), _ref(target)), "?ctx")

    def open_queries(self) -> list[Sentex]:
        """Every query node anywhere: the catch-up read of an agent that was away."""
        return self.store.sentexes_matching((Sym("queries"), Var("a"), Var("q")), "?ctx")

    def query(self, goal: Any, ctx: Any) -> list[dict[str, Any]]:
        """Ancestor-set-aware bindings: the channel's whole current view of `goal`."""
        return self.store.query(goal, ctx)

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
        (watch the channel to see every member's moves). Forward-only: history comes
        from reading the KB. Over the wire the poll loop runs on its own thread."""
        return self.medium.subscribe(goal, ctx, callback, wait_ms, on_lagged, on_error)


def stance_predicate(stance: str) -> Sym:
    """The ballot predicate of a stance; any other stance is refused by name."""
    predicate = STANCES.get(stance) if isinstance(stance, str) else None
    if predicate is None:
        raise Refused(
            "koinii/no-such-stance",
            f"no stance {stance!r}; vote 'for' or 'against'",
            {"stance": str(stance), "known": list(STANCES)},
        )
    return predicate


def speaker_of(sentex: Sentex) -> str:
    """Who made a move: argument 1 of its sentence."""
    speaker = sentex.sentence[1]
    return speaker.name if type(speaker) is Sym else str(speaker)


def answer_content(sentex: Sentex) -> Any:
    """What an `answers` move says: argument 2 of its sentence."""
    return sentex.sentence[2]


def _arg(value: Any) -> Any:
    """Text names a symbol when it spells one (`"PostgreSQL14"`), else parses as a term."""
    return parse(value) if isinstance(value, str) else value
