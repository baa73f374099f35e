"""The in-process change feed: events, standing queries, delivery.

Invariant: one `Event` per durable write that changed belief, carrying that write's
global `seq`; watchers see events in seq order, each filtered to what its standing query
(goal + context) matches. Watchers with the same standing query receive the same `Event`
object (so a write to many watchers builds each event once): a callback reads it, and
never changes it. Delivery happens after the write is durable, on the writer's
thread, in registration order; a callback that raises loses only its own delivery.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from koinii.kb.index import match
from koinii.terms import Sym, Var, parse

log = logging.getLogger("koinii.feed")


@dataclass(frozen=True)
class Event:
    """What one write changed: sentexes that became believed / stopped being believed.

    Each change is `{handle, sentence, context}` (sentence as canonical text); removals
    add `reason` (`retracted`, `unsupported`, `defeated`, `excepted`); a mask's effect
    adds `hidden_in` (the mask's context); a standing query adds `bindings`.
    """

    seq: int
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)


class Change:
    """One change as the engine knows it: what its public dict says, and the atom to match.

    The dict itself (`public`) is made when asked: a write that derives a quarter of a
    million sentexes would otherwise hold a dict per change (twice a Change's size) from
    labelling to commit, and the change log's encoding asks for one at a time. A node a
    write added, with no reason, is its own change (it has these fields: sentex.py).
    """

    __slots__ = ("handle", "text", "positive", "atom", "context", "reason", "hidden_in")

    def __init__(
        self,
        handle: int,
        text: str,  # the atom's canonical text (without `not`)
        positive: bool,
        atom: tuple,
        context: str,
        reason: str | None = None,
        hidden_in: str | None = None,
    ) -> None:
        self.handle = handle
        self.text = text
        self.positive = positive
        self.atom = atom
        self.context = context
        self.reason = reason
        self.hidden_in = hidden_in

    @property
    def public(self) -> dict[str, Any]:
        """`{handle, sentence, context}`, and `reason` / `hidden_in` where set (`Event`)."""
        text = self.text
        public: dict[str, Any] = {
            "handle": self.handle,
            "sentence": text if self.positive else "(not " + text + ")",
            "context": self.context,
        }
        if self.reason is not None:
            public["reason"] = self.reason
        if self.hidden_in is not None:
            public["hidden_in"] = self.hidden_in
        return public


@dataclass
class Watcher:
    token: int
    callback: Callable[[Event], Any]
    literal: tuple[bool, tuple] | None  # the standing query's goal, if any
    context: str | None  # a context name, a variable ("?ctx"), or None for all
    goal_text: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"token": self.token, "goal": self.goal_text, "context": self.context}


Routed = list[tuple[Watcher, Event]]  # one write's events, each with the watcher it is for


class Feed:
    """Registered watchers and the delivery loop."""

    MAX_ROUNDS = 64  # callbacks that write cause more events; this bounds the cascade

    def __init__(self) -> None:
        self._watchers: dict[int, Watcher] = {}
        self._tokens = itertools.count(1)
        self._pending: list[Routed] = []
        self._delivering = False

    def add(self, callback, literal, context, goal_text) -> int:
        token = next(self._tokens)
        self._watchers[token] = Watcher(token, callback, literal, context, goal_text)
        return token

    def remove(self, token: Any) -> bool:
        return self._watchers.pop(token, None) is not None

    def describe(self) -> list[dict[str, Any]]:
        return [w.describe() for w in self._watchers.values()]

    def __bool__(self) -> bool:
        return bool(self._watchers)

    def route(self, seq: int, added: list[Change], removed: list[Change], up) -> Routed:
        """Each watcher's event for one write, filtered against the hierarchy as it is now.

        Routing is separate from delivery so that a write can be routed when it is made
        and delivered once it is durable (a group commit), judged by the hierarchy it saw.
        """
        routed = []
        events: dict[tuple, Event | None] = {}  # watchers with one standing query share
        for watcher in self._watchers.values():
            query = (watcher.literal, watcher.context)
            if query in events:
                event = events[query]
            else:
                event = events[query] = _filter(watcher, seq, added, removed, up)
            if event is not None:
                routed.append((watcher, event))
        return routed

    def replay(self, token: int, entries: list[Any], up) -> None:
        """Deliver to watcher `token` the events of change-log `entries` (oldest first),
        routed as a live write would be (a resuming watch).

        Thousands of writes are replayed at once, holding the writer meanwhile, so no
        more is made of a logged change than its watcher needs: one its standing query
        cannot match by its text (`_plausible`) is passed over, a sentence is parsed only
        for a goal to match, and a watcher of everything is handed the log's own dicts.
        """
        watcher = self._watchers[token]
        if watcher.literal is None and watcher.context is None:
            for entry in entries:
                self.deliver([(watcher, Event(entry.seq, entry.added, entry.removed))])
            return
        plausible = _plausible(watcher.literal)
        parsed = watcher.literal is not None
        for entry in entries:
            added = [_change_of(p, parsed) for p in entry.added if plausible(p["sentence"])]
            removed = [_change_of(p, parsed) for p in entry.removed if plausible(p["sentence"])]
            if added or removed:
                event = _filter(watcher, entry.seq, added, removed, up)
                if event is not None:
                    self.deliver([(watcher, event)])

    def deliver(self, routed: Routed) -> None:
        """Call each routed watcher that is still registered, in order."""
        self._pending.append(routed)
        if self._delivering:
            return  # a callback wrote: its event goes out after this round
        self._delivering = True
        try:
            rounds = 0
            while self._pending:
                rounds += 1
                if rounds > self.MAX_ROUNDS:
                    log.warning(
                        "feed: callbacks kept writing for %d rounds; %d events not delivered "
                        "(they are in the change log)",
                        self.MAX_ROUNDS,
                        len(self._pending),
                    )
                    self._pending.clear()
                    break
                for watcher, event in self._pending.pop(0):
                    if watcher.token not in self._watchers:
                        continue  # unwatched since the write
                    try:
                        watcher.callback(event)
                    except Exception:
                        log.exception(
                            "feed: watcher %s raised; its delivery is lost", watcher.token
                        )
        finally:
            self._delivering = False


def _change_of(public: dict[str, Any], parsed: bool) -> Change:
    """A change as the change log holds it (its public dict), as the engine knew it; its
    atom is parsed from the sentence only if `parsed` (else None: nothing will match it)."""
    sentence = public["sentence"]
    positive = not sentence.startswith("(not ")
    text = sentence if positive else sentence[len("(not ") : -1]  # canonical: one `(not X)`
    return Change(
        public["handle"],
        text,
        positive,
        parse(text) if parsed else None,
        public["context"],
        public.get("reason"),
        public.get("hidden_in"),
    )


def _plausible(literal: tuple[bool, tuple] | None) -> Callable[[str], bool]:
    """A test of a change's canonical text that every change `literal` matches passes:
    its polarity and predicate (`(usesDatabase ?s ?d)` matches only sentences that begin
    `(usesDatabase `; a goal's functor is always a symbol)."""
    if literal is None:
        return _anything
    positive, pattern = literal
    head = ("(" if positive else "(not (") + pattern[0].name
    ends = len(head)
    return lambda text: text.startswith(head) and text[ends] in " )"


def _anything(text: str) -> bool:
    return True


def _filter(watcher: Watcher, seq: int, added, removed, up) -> Event | None:
    if watcher.literal is None and watcher.context is None:
        return Event(seq, [c.public for c in added], [c.public for c in removed])
    out_added = [p for c in added if (p := _admit(watcher, c, up)) is not None]
    out_removed = [p for c in removed if (p := _admit(watcher, c, up)) is not None]
    if not out_added and not out_removed:
        return None
    return Event(seq, out_added, out_removed)


def _admit(watcher: Watcher, change: Change, up) -> dict[str, Any] | None:
    ctx = watcher.context
    binding: dict[Var, Any] = {}
    if ctx is not None and not ctx.startswith("?"):
        visible = up(ctx)
        if change.context not in visible:
            return None
        if change.hidden_in is not None and change.hidden_in not in visible:
            return None
    if watcher.literal is None:
        return change.public
    positive, pattern = watcher.literal
    if positive is not change.positive:
        return None
    found = match(pattern, change.atom, binding)
    if found is None:
        return None
    bindings = {v.text: value for v, value in found.items()}
    if ctx is not None and ctx.startswith("?"):
        bindings[ctx] = Sym(change.context)
    return {**change.public, "bindings": bindings}
