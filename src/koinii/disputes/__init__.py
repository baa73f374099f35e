"""Disputes: clashes both of whose sides stand, their ids and their lifecycle.

A dispute is what the engine lists and does not settle: a `default`/`default` dilemma
(`contradictions`) or a `monotonic`/`monotonic` conflict (`conflicts`). A strength defeat
is not a dispute — that is the resolved case. A clash may have more than two members.

Invariants:
- A dispute's id is the sorted tuple of ALL its handles (`dispute_id`), so it does not
  depend on the order the sides arrived in or were listed in.
- `open` and `resolved` are derived from belief, never stored: an id is live while some
  context observes exactly that clash. `notified` and `stale` are stored marks in
  `CxDisputes` — `(disputeNotified D At)`, `(disputeStale D At Reason)` with D the
  `dispute_term` — so they are explainable like any sentex and retracting them reopens.
  The vocabulary (their arities) ships in `CxDisputes.sx`.
- Every function takes a `KB` or a `Client` (their shared read/write surface).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from koinii.errors import Refused
from koinii.terms import Sym, Var

__all__ = [
    "DISPUTES",
    "dispute_id",
    "dispute_state",
    "dispute_term",
    "disputed",
    "disputes_in",
    "is_disputed",
    "is_live",
    "is_notified",
    "is_stale",
    "mark_notified",
    "mark_states",
    "mark_stale",
    "marks_of",
    "pending_disputes",
    "reopen",
]

DISPUTES = "CxDisputes"
NOTIFIED = Sym("disputeNotified")
STALE = Sym("disputeStale")
_DISPUTE = Sym("dispute")
_HANDLE = Sym("sentexHandle")


# --- ids ------------------------------------------------------------------------------------


def dispute_id(entry: Any) -> tuple[int, ...]:
    """The id of a dispute: the sorted tuple of all its handles.

    Takes a listed entry (anything with `handles`) or the handles themselves in any
    order, so an id is accepted in either spelling.
    """
    handles = entry.get("handles") if isinstance(entry, dict) else entry
    try:
        key = tuple(sorted(set(handles)))
    except TypeError:
        key = ()
    if len(key) < 2 or any(type(h) is not int or h <= 0 for h in key):
        raise Refused(
            "koinii/bad-dispute-id",
            "a dispute id is two or more distinct positive handles",
            {"dispute_id": repr(entry)},
        )
    return key


def dispute_term(key: Iterable[int]) -> tuple:
    """`(dispute (sentexHandle a) (sentexHandle b) …)`: how a mark names the dispute."""
    return (_DISPUTE, *((_HANDLE, h) for h in dispute_id(key)))


# --- reads ----------------------------------------------------------------------------------


def disputes_in(kb: Any, ctx: Any) -> list[dict[str, Any]]:
    """The disputes a reader at `ctx` observes — clashes whose every side `ctx` sees.

    Each entry is the engine's `{handles, sides}` plus `dispute_id` and `dispute_class`
    (`contradiction` for a default dilemma, `conflict` for a monotonic one), and for
    differing values of a declared single-valued argument, the engine's `single_valued`
    (`{predicate, argument}`).
    """
    entries = []
    for dispute_class, clashes in (
        ("contradiction", kb.contradictions(ctx)),
        ("conflict", kb.conflicts(ctx)),
    ):
        for clash in clashes:
            entry = {
                "dispute_id": dispute_id(clash["handles"]),
                "handles": list(clash["handles"]),
                "dispute_class": dispute_class,
                "sides": clash["sides"],
            }
            if clash.get("single_valued"):  # differing values of a declared argument
                entry["single_valued"] = clash["single_valued"]
            entries.append(entry)
    return entries


def disputed(kb: Any, ctx: Any) -> bool:
    """Does `ctx` observe any dispute? (A whole scan; `is_disputed` reads one sentence.)"""
    return bool(kb.contradictions(ctx)) or bool(kb.conflicts(ctx))


def is_disputed(kb: Any, sentence: Any, ctx: Any) -> bool:
    """Is `sentence` disputed at `ctx`? One `argue`, no scan of the whole KB."""
    return kb.argue(sentence, ctx) == "contradiction"


def is_live(kb: Any, key: Iterable[int]) -> bool:
    """Is the dispute still standing: does some context observe exactly this clash?

    Only the contexts that see every side can observe it, so only those are read.
    """
    key = dispute_id(key)
    sides = [kb.sentex(h) for h in key]
    if any(side is None or not side.believed for side in sides):
        return False
    observers: set[str] | None = None
    for side in sides:
        below = set(kb.context_down(side.context))
        observers = below if observers is None else observers & below
    for ctx in sorted(observers or ()):
        if any(entry["dispute_id"] == key for entry in disputes_in(kb, ctx)):
            return True
    return False


# --- the lifecycle marks ----------------------------------------------------------------------


def _require_sides(kb: Any, key: tuple[int, ...]) -> None:
    for handle in key:
        if kb.sentex(handle) is None:
            raise Refused(
                "koinii/no-such-handle",
                f"dispute {list(key)} names sentex {handle}, which is not stored",
                {"handle": handle, "dispute_id": list(key)},
            )


def mark_notified(kb: Any, key: Iterable[int], at: int) -> int:
    """Record that the dispute was notified at `at` (epoch ms); returns the mark's handle."""
    key = dispute_id(key)
    _require_sides(kb, key)
    return kb.assert_((NOTIFIED, dispute_term(key), at), DISPUTES)


def mark_stale(kb: Any, key: Iterable[int], at: int, reason: str = "TimedOut") -> int:
    """Record that the dispute went stale at `at` for `reason`; returns the mark's handle.

    A stale dispute is still live: both sides stand; the mark only says it aged out.
    """
    key = dispute_id(key)
    _require_sides(kb, key)
    return kb.assert_((STALE, dispute_term(key), at, Sym(reason)), DISPUTES)


def marks_of(kb: Any, key: Iterable[int]) -> list[int]:
    """The handles of every lifecycle mark the dispute carries (notified, then stale)."""
    term = dispute_term(key)
    notified = kb.sentexes_matching((NOTIFIED, term, Var("at")), DISPUTES)
    stale = kb.sentexes_matching((STALE, term, Var("at"), Var("reason")), DISPUTES)
    return [s.handle for s in notified] + [s.handle for s in stale]


def is_notified(kb: Any, key: Iterable[int]) -> bool:
    term = dispute_term(key)
    return bool(kb.sentexes_matching((NOTIFIED, term, Var("at")), DISPUTES))


def is_stale(kb: Any, key: Iterable[int]) -> bool:
    term = dispute_term(key)
    return bool(kb.sentexes_matching((STALE, term, Var("at"), Var("reason")), DISPUTES))


def mark_states(kb: Any) -> dict[tuple[int, ...], str]:
    """Every marked dispute's id → `stale` or `notified` (stale outranks notified), from
    one match of each mark for all disputes: for a reader of every dispute's state (the
    web view's counts), where `is_stale` and `is_notified` would match twice per dispute.
    A mark whose term is not a `dispute_term` (hand-written, unsorted) marks nothing, as
    for them."""
    found: dict[tuple[int, ...], str] = {}
    stale = (STALE, Var("d"), Var("at"), Var("reason"))
    for state, pattern in (("notified", (NOTIFIED, Var("d"), Var("at"))), ("stale", stale)):
        for mark in kb.sentexes_matching(pattern, DISPUTES):
            term = mark.sentence[1]
            handles = term[1:] if type(term) is tuple else ()
            key = tuple(h[1] for h in handles if type(h) is tuple and len(h) == 2)
            try:
                if len(key) == len(handles) and dispute_term(key) == term:
                    found[key] = state
            except Refused:
                continue
    return found


def reopen(kb: Any, key: Iterable[int]) -> int:
    """Clear the dispute's marks in one edit; returns how many were retracted."""
    marks = marks_of(kb, key)
    if marks:
        kb.edit(remove=marks)
    return len(marks)


def dispute_state(kb: Any, key: Iterable[int]) -> str:
    """`open`, `notified`, `stale` (a live dispute; stale outranks notified) or `resolved`."""
    key = dispute_id(key)
    if not is_live(kb, key):
        return "resolved"
    if is_stale(kb, key):
        return "stale"
    if is_notified(kb, key):
        return "notified"
    return "open"


def pending_disputes(kb: Any, ctx: Any) -> list[dict[str, Any]]:
    """The disputes `ctx` observes that carry no mark yet: the ones nobody was told of."""
    return [
        entry
        for entry in disputes_in(kb, ctx)
        if not is_notified(kb, entry["dispute_id"]) and not is_stale(kb, entry["dispute_id"])
    ]
