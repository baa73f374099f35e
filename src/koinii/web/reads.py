"""What each page of the view shows, read from the daemon's KB: plain values for the
templates, gathered with the domain's own reads (conversation, adjudication, wraps,
sessions) so the view shows what an agent reading the same thing is told.

Invariant: every function here only reads. Each one is bounded by what its page shows
— a window of moves, of questions, of a context's sentexes — not by the size of the
team's history, and refuses bad input with a named `Refused` whose message says what
to do instead.
"""

from __future__ import annotations

import bisect
from typing import Any

from koinii.channel import belief, conversation
from koinii.errors import Refused
from koinii.identity import AGENT_CONTEXT
from koinii.kb import KB
from koinii.kb.checks import context_name
from koinii.kb.rules import GENL_CX
from koinii.operations import invoker
from koinii.sessions import search as session_search
from koinii.terms import Sym, Var, show
from koinii.web import graph
from koinii.web.moves import Line
from koinii.wraps.queue import wrap_headers, wraps_named

MOVES = 200  # lines in a channel window
QUESTIONS = 12  # questions beside the moves
DISPUTES = 50  # disputes a page
HELD = 100  # sentexes of a context a page
CONTEXTS = 200  # contexts a page of the drawing and its list (and of what one sees)
WRAPS = 50  # processed wraps shown per coordinator (the newest)
WAITING = 100  # unprocessed wraps shown per coordinator (the oldest: the queue's head)
ENTRIES = 100  # entries shown per wrap (the first)
_NOTES = {"memoryNote": "note", "memoryDecision": "decision", "memoryConvention": "convention"}


def number(value: str | None, name: str, *, default: int | None = None) -> int | None:
    """A query parameter that must be a non-negative integer."""
    if value is None or value == "":
        return default
    if not value.isdigit() or len(value) > 18:
        raise Refused(
            "bad-option",
            f"{name} is a non-negative integer, not {value[:40]!r}: follow the page's own "
            "links, or leave it out",
            {"option": name},
        )
    return int(value)


# --- who and where ----------------------------------------------------------------------


class Hierarchy:
    """What the contexts page asks of the `genlCx` hierarchy, one context at a time (each
    a lookup, kept for the page): its owner, what it sees and what sees it, and its kind.
    A page asks of the contexts it shows only: reading every edge and every agent's mark
    to classify them all cost 0.2 s at 20,000 agents, whatever the page showed."""

    def __init__(self, kb: KB) -> None:
        self.kb = kb
        self._owners: dict[str, str | None] = {}
        self._sees: dict[str, list[str]] = {}

    def owner(self, ctx: str) -> str | None:
        """The agent whose own context `ctx` is: the mark `ctx` holds of itself."""
        if ctx not in self._owners:
            marks = self.kb.sentexes_matching((AGENT_CONTEXT, Sym(ctx), Var("agent")), ctx)
            agents = [m.sentence[2] for m in marks if type(m.sentence[2]) is Sym]
            self._owners[ctx] = agents[0].name if agents else None
        return self._owners[ctx]

    def sees(self, ctx: str) -> list[str]:
        """The contexts `ctx` sees directly: its believed `(genlCx ctx B)`, sorted."""
        if ctx not in self._sees:
            self._sees[ctx] = self._edges((GENL_CX, Sym(ctx), Var("b")), 2)
        return self._sees[ctx]

    def sees_among(self, ctx: str, among: set[str]) -> list[str]:
        """The contexts of `among` that `ctx` sees directly: from its edges, or — when it
        has more than CONTEXTS (a team's channel sees every member's) — from each of
        `among` asked in turn, rather than every edge read for a page's few."""
        if ctx not in self._sees:
            goal = (GENL_CX, Sym(ctx), Var("b"))
            answers = self.kb.query(goal, "?ctx", limit=CONTEXTS + 1)
            if len(answers) > CONTEXTS:
                return sorted(b for b in among if self._edge(ctx, b))
            seen = {a["?b"].name for a in answers if type(a["?b"]) is Sym}
            return sorted(seen & among)
        return [b for b in self._sees[ctx] if b in among]

    def _edge(self, ctx: str, other: str) -> bool:
        """Is `(genlCx ctx other)` believed somewhere?"""
        return bool(self.kb.query((GENL_CX, Sym(ctx), Sym(other)), "?ctx", limit=1))

    def seen_by(self, ctx: str) -> list[str]:
        """The contexts that see `ctx` directly: the believed `(genlCx A ctx)`, sorted."""
        return self._edges((GENL_CX, Var("a"), Sym(ctx)), 1)

    def _edges(self, pattern: tuple, end: int) -> list[str]:
        found = self.kb.sentexes_matching(pattern, "?ctx")
        return sorted({e.sentence[end].name for e in found if type(e.sentence[end]) is Sym})

    def kind(self, ctx: str) -> str:
        """An agent's own context (marked), a channel (it sees an agent's context and is
        none itself), a vocabulary (an agent's context sees it, through others or not:
        the engine's hierarchy below it), or other."""
        self.kb.spend()
        if self.owner(ctx) is not None:
            return "agent"
        if self._sees_an_agent(ctx):
            return "channel"
        below = self.kb.context_down(ctx)
        if any(self.owner(c) is not None for c in below if c != ctx):
            return "vocabulary"
        return "other"

    def _sees_an_agent(self, ctx: str) -> bool:
        """Does `ctx` directly see an agent's own context? The first CONTEXTS contexts it
        sees are asked before all of them: a team's channel sees every member's, and
        reading 20,000 edges to find the first (0.2-0.35 s) was most of the contexts
        page's 0.5 s budget."""
        if ctx not in self._sees:
            pattern = (GENL_CX, Sym(ctx), Var("b"))
            answers = self.kb.query(pattern, "?ctx", limit=CONTEXTS)
            seen = {a["?b"] for a in answers}
            if any(type(b) is Sym and self.owner(b.name) is not None for b in seen):
                return True
            if len(answers) < CONTEXTS:
                return False
        return any(self.owner(seen) is not None for seen in self.sees(ctx))


def channels(kb: KB) -> list[dict[str, Any]]:
    """The channels: contexts that see an agent's own context and are none themselves."""
    return conversation.channels(kb)


def channel_name(kb: KB, name: str) -> str:
    """A channel's name, checked: a context name that has members."""
    name = context_name(name)
    if not conversation.members(kb, name):
        raise Refused(
            "koinii/no-such-channel",
            f"{name} has no members, so there is no conversation to show: agents join a "
            "channel with channel.join(medium, channel, agent); the channels are listed at /",
            {"channel": name},
        )
    return name


# --- the channel ------------------------------------------------------------------------


def channel_page(
    kb: KB, channel: str, lines: list[Line], earlier: int | None, latest: bool
) -> dict[str, Any]:
    """The channel page around its window of moves (`moves.window_steps`, read first)."""
    return {
        "channel": channel,
        "members": conversation.members(kb, channel),
        "lines": lines,
        "earlier": earlier,
        "latest": latest,
        "questions": questions_part(kb, channel),
    }


def questions_part(kb: KB, channel: str) -> list[dict[str, Any]]:
    """The newest questions, each with its state and its answers (whole threads)."""
    return conversation.questions(kb, channel, limit=QUESTIONS, threads=True)


def disputes_page(kb: KB, channel: str, state: str | None, page: int) -> dict[str, Any]:
    """A page of DISPUTES disputes, newest first, with how many are in each state: only
    the shown ones read in full (`conversation.dispute_window`)."""
    found = conversation.dispute_window(kb, channel, state, skip=page * DISPUTES, limit=DISPUTES)
    return {
        "channel": channel,
        "state": state,
        "states": conversation.DISPUTE_STATES,
        "counts": found["counts"],
        "total": found["total"],
        "disputes": found["disputes"],
        "page": page,
        "pages": max(1, -(-found["matched"] // DISPUTES)),
    }


# --- contexts -----------------------------------------------------------------------------


def contexts_page(
    kb: KB, selected: str | None, after: int, page: int | None = None
) -> dict[str, Any]:
    """A page of the context hierarchy: CONTEXTS contexts, by name, drawn with the edges
    between them and listed; with `selected`, what it holds (HELD a page) and what it
    sees and is seen by. Without `page`, the page that holds `selected`, else the first.

    Only the page's contexts are classified, laid out and rendered: 20,000 contexts drawn
    at once took 1.8 s, past the page's budget, and a drawing that wide shows nothing."""
    counts = kb.context_counts()  # every context stored in, or named by an edge
    name = None if selected is None else context_name(selected)
    if name is not None and name not in counts:
        raise Refused(
            "not-found",
            f"no context {name}: nothing is stored in it and no edge names it; the "
            "contexts are drawn at /contexts",
            {"context": name},
        )
    names = sorted(counts)
    pages = max(1, -(-len(names) // CONTEXTS))
    if page is None:
        page = 0 if name is None else bisect.bisect_left(names, name) // CONTEXTS
    shown = names[page * CONTEXTS : (page + 1) * CONTEXTS]
    on_page = set(shown)
    hierarchy = Hierarchy(kb)
    kinds = {n: hierarchy.kind(n) for n in {*shown, *([name] if name else [])}}
    links = [(a, b) for a in shown for b in hierarchy.sees_among(a, on_page)]
    drawing = graph.layout({n: counts[n] for n in shown}, links, kinds, kb.spend)
    found: dict[str, Any] = {
        "drawing": drawing,
        "box_h": graph.BOX_H,
        "selected": None,
        "page": page,
        "pages": pages,
        "first": page * CONTEXTS + 1,
        "total": len(names),
    }
    if name is not None:
        held = kb.sentexes_in(name, after=after, limit=HELD)
        sees, seen_by = hierarchy.sees(name), hierarchy.seen_by(name)
        found["selected"] = {
            "name": name,
            "kind": kinds[name],
            "owner": hierarchy.owner(name),
            "count": counts[name],
            "sees": sees[:CONTEXTS],
            "sees_count": len(sees),
            "seen_by": seen_by[:CONTEXTS],
            "seen_by_count": len(seen_by),
            "held": held,
            "next": held[-1].handle if len(held) == HELD else None,
            "after": after,
        }
    return found


# --- why ----------------------------------------------------------------------------------


def why_page(kb: KB, handle: str) -> dict[str, Any]:
    if not handle.isdigit() or len(handle) > 18 or int(handle) == 0:
        raise Refused(
            "bad-handle",
            f"a handle is a positive integer, not {handle[:40]!r}: follow a move's why link",
            {"handle": handle[:40]},
        )
    number_ = int(handle)
    tree = kb.why(number_)
    if tree is None:
        raise Refused(
            "koinii/no-such-handle",
            f"there is no sentex {number_} (never made, or withdrawn since); a thread's "
            "claims link to their why",
            {"handle": number_},
        )
    sentex = kb.sentex(number_)
    reason = kb.why_not(number_)
    defeaters = []
    if reason == "defeated" and sentex is not None:
        for other in belief.defeaters(kb, number_):
            defeaters.append({"sentex": other, "tree": kb.why(other.handle)})
    return {"tree": tree, "sentex": sentex, "reason": reason, "defeaters": defeaters}


# --- wraps ----------------------------------------------------------------------------------


def wraps_records(kb: KB) -> dict[str, Any]:
    """The wraps page's records (read on a thread, through a connection of its own):
    the coordinators, each with the wraps the page shows, read out only if it shows
    them — a queue of 2,000 unprocessed wraps was an 8.5 MB page that held the daemon
    0.7 s."""
    call = invoker(kb)
    coordinators = call("wraps.coordinators.list")
    every = wrap_headers(kb, include_processed=True)  # ids: the shown ones' only
    by_session: dict[str | None, list[dict[str, Any]]] = {}
    for wrap in every:
        by_session.setdefault(wrap["parent_session_id"], []).append(wrap)
    groups = []
    for coordinator in coordinators:
        groups.append((coordinator, by_session.pop(coordinator["session_id"], [])))
    for session, wraps in sorted(by_session.items(), key=lambda kv: str(kv[0])):
        groups.append(({"coordinator_id": None, "session_id": session}, wraps))
    return {"groups": [_group(kb, *group) for group in groups], "total": len(every)}


def _group(kb: KB, coordinator: dict[str, Any], wraps: list[dict[str, Any]]) -> dict[str, Any]:
    processed = [w for w in wraps if w["processed"]]
    unprocessed = [w for w in wraps if not w["processed"]]
    shown = wraps_named(kb, [w["wrap_id"] for w in (*unprocessed[:WAITING], *processed[-WRAPS:])])
    whole = {w["wrap_id"]: w for w in shown}  # with their ids (`wrap_headers` has none)
    return {
        "coordinator": coordinator,
        "unprocessed": [whole[w["wrap_id"]] for w in unprocessed[:WAITING]],
        "unprocessed_count": len(unprocessed),
        "processed": [whole[w["wrap_id"]] for w in processed[-WRAPS:][::-1]],
        "processed_count": len(processed),
    }


def wraps_page(kb: KB, records: dict[str, Any]) -> dict[str, Any]:
    """The wraps page: its records (`wraps_records`), each shown wrap's entries read
    out of the KB."""
    groups = [
        {
            **group,
            "unprocessed": [_wrap(kb, w) for w in group["unprocessed"]],
            "processed": [_wrap(kb, w) for w in group["processed"]],
        }
        for group in records["groups"]
    ]
    return {"groups": groups, "total": records["total"]}


def _wrap(kb: KB, wrap: dict[str, Any]) -> dict[str, Any]:
    """A wrap with its first ENTRIES entries read out (a wrap may list 10,000)."""
    entries = []
    for handle in wrap["created_ids"][:ENTRIES]:
        kb.spend()
        sentex = kb.sentex(handle) if type(handle) is int and handle > 0 else None
        if sentex is None:
            entries.append({"kind": "gone", "text": str(handle), "handle": None})
            continue
        atom = sentex.sentence
        kind = _NOTES.get(atom[0].name, "entry") if type(atom[0]) is Sym else "entry"
        text = atom[2] if kind != "entry" and len(atom) == 3 else sentex.text
        entries.append(
            {
                "kind": kind,
                "text": text if isinstance(text, str) else show(text),
                "handle": sentex.handle,
            }
        )
    return {**wrap, "entries": entries, "entry_count": len(wrap["created_ids"])}


# --- sessions -------------------------------------------------------------------------------


def sessions_page(kb: KB, search: str | None) -> dict[str, Any]:
    text = (search or "").strip()[:200] or None
    rows = invoker(kb)("sessions.list_sessions", search=text, limit=100)
    for row in rows:
        for key in ("request_snippet", "reply_snippet"):
            if row.get(key):
                row[key + "_marked"] = session_search.marked(row[key], text or "")
    return {"search": text, "rows": rows}


def session_page(kb: KB, target: str) -> dict[str, Any]:
    read = invoker(kb)("sessions.read_session", target=target[:200])
    if read["session"] is None:
        raise Refused(
            "not-found",
            f"no session matches {target[:60]!r}: open one from the list at /sessions",
            {"target": target[:200]},
        )
    return {"read": read}
