"""Reasoning on a contested premise: an open dispute does not stop reasoning (both sides
stay believed, rules keep firing), so `contested_premises` makes it visible — what a
sentence rests on that is a side of a dispute the context observes — and `quarantine`,
the heavier option and off by default, masks a contested claim in one context with
`(except (sentexHandle h))`, so that context stops deriving from it (and stops seeing the
dispute at all). docs/disputes.md §5."""

from __future__ import annotations

from typing import Any

from koinii import disputes
from koinii.disputes.adjudication import content_key
from koinii.terms import Sym, Var, parse

__all__ = ["contested_premises", "quarantine", "quarantined", "rests_on_contested", "unquarantine"]

_HANDLE = Sym("sentexHandle")
_EXCEPT = Sym("except")


def contested_premises(kb: Any, sentence: Any, ctx: Any) -> list[int]:
    """The handles, by content, of what `sentence` rests on at `ctx` that is a side of a
    dispute `ctx` observes: the believed support, transitively, of every believed record
    of the sentence `ctx` sees. A pure read — the dispute does not block the reasoning;
    this makes it visible."""
    up = kb.context_up(ctx)
    records = [
        s
        for s in kb.sentexes_matching(sentence, "?ctx")
        if s.context in up and kb.believed(s.handle, ctx)
    ]
    if not records:
        return []
    contested = {h for entry in disputes.disputes_in(kb, ctx) for h in entry["handles"]}
    found: dict[int, tuple[Any, str]] = {}
    for record in records:
        tree = kb.why(record.handle)
        for node in _believed_support(tree) if tree else ():
            if node["handle"] in contested:
                found[node["handle"]] = (parse(node["sentence"]), node["context"])
    ordered = sorted(found.items(), key=lambda item: (content_key(item[1][0]), item[1][1]))
    return [handle for handle, _ in ordered]


def rests_on_contested(kb: Any, sentence: Any, ctx: Any) -> bool:
    """Does `sentence`, as `ctx` sees it, rest on a side of a dispute there?"""
    return bool(contested_premises(kb, sentence, ctx))


def _believed_support(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes below the root through justifications whose antecedents all hold."""
    out = []
    for justification in tree.get("justifications", ()):
        antecedents = justification["antecedents"]
        if not all(a["believed"] for a in antecedents):
            continue
        for antecedent in antecedents:
            out.append(antecedent)
            out.extend(_believed_support(antecedent))
    return out


def quarantine(kb: Any, ctx: Any, target: int) -> int:
    """Hide `target` from `ctx` (and what `ctx` feeds) with `(except (sentexHandle T))`.

    Off by default, and a trade-off: the claim stays believed where its author holds it,
    but `ctx` no longer sees the dispute at all. Prefer `contested_premises`, which hides
    nothing. Returns the mask's handle.
    """
    return kb.assert_((_EXCEPT, (_HANDLE, target)), ctx, strength="monotonic")


def unquarantine(kb: Any, ctx: Any, target: int) -> int:
    """Lift `ctx`'s quarantine of `target` (one edit); returns how many masks were retracted."""
    masks = [s.handle for s in kb.sentexes_matching((_EXCEPT, (_HANDLE, target)), ctx)]
    if masks:
        kb.edit(remove=masks)
    return len(masks)


def quarantined(kb: Any, ctx: Any) -> list[int]:
    """The handles `ctx` quarantines (the targets of its masks), sorted."""
    masks = kb.sentexes_matching((_EXCEPT, (_HANDLE, Var("h"))), ctx)
    return sorted(s.sentence[1][1] for s in masks)
