"""An entity's facts follow the hit that names it: "when was the checkout outage" finds
`(incidentDate Incident17 "2026-04-09")` through `(incidentTitle Incident17 "checkout
outage")`, with which it shares no word (docs/search.md, "An entity's facts follow it").

The entities are the argument symbols of the best ENTITY_SOURCES hits found by words —
names of two or more parts (`Incident17`, `CheckoutApi`), not a context's or an agent's,
not searched for already, that at most ENTITY_SPREAD sentexes name.

Invariants:
- An entity is followed only where its facts together hold more of the search's typed
  words than the hit that names it holds alone (or that hit holds them all: the search is
  about it), and it has another fact to show.
- Several entities may be followed (at most ENTITIES_FOLLOWED): the one whose facts hold
  the most of the search first, then each that holds a typed word none followed before
  holds — "what caused the checkout outage and the duplicate emails" follows both
  incidents, and a third that only repeats their words is not followed.
- Each followed entity's facts (at most ENTITY_PULL, those holding more of the typed
  words first, a date the search names counting after them) come right behind its
  hit, `matched="linked"`; a fact already placed higher stays where it is.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from koinii.kb import terms_of_search
from koinii.kb.sentex import Node
from koinii.kb.store import fulltext
from koinii.terms import Sym

ENTITY_SPREAD = 25  # an entity named by more sentexes than this is too common to follow
ENTITY_PULL = 2  # facts pulled in behind an entity's hit, at most
ENTITY_DEPTH = 12  # the second search's hits looked at for them
ENTITY_SOURCES = 3  # the best hits whose entities may be followed
ENTITIES_FOLLOWED = 3  # entities followed in one search, at most

# The conversation's moves, as the engine sees them (koinii.speech names them; the
# engine sits below it): no claim about a subject, so no entity is followed from one.
MOVES = frozenset(
    Sym(name)
    for name in (
        *("queries", "answers", "endorses", "justifies", "disputes", "votesFor"),
        *("votesAgainst", "accepts", "closes", "notUnderstood", "refuse"),
    )
)

Ranked = list[tuple[Node, float]]


def linked(
    search: Any,
    query: terms_of_search.Query,
    ranked: Ranked,
    visible: Any,
    matched: dict[int, str],
) -> Generator[Any, Any, Ranked]:
    """`ranked` with the facts about the entities its best hits name pulled in right
    behind the hit naming each (see the module docstring). `search` is the KB's search
    (its index, stored words and word ranking); a step of its `search_steps`, asking
    the store's word index as they do."""
    found = (yield from _entities(search, query, ranked, visible, matched)) if query.groups else []
    if not found:
        return ranked
    followed: list[tuple[int, str, set[int]]] = []  # (position, form, its facts' handles)
    held: set[int] = set()
    for together, position, form, facts in sorted(found, key=lambda e: (-len(e[0]), e[1])):
        if len(followed) == ENTITIES_FOLLOWED:
            break
        if followed and not together - held:
            continue  # holds no typed word the entities followed already hold
        followed.append((position, form, {fact.handle for fact in facts}))
        held |= together
    placed = {node.handle for node, _ in ranked[: max(p for p, _, _ in followed) + 1]}
    behind: dict[int, list[Node]] = {}
    for position, form, about in sorted(followed, key=lambda f: f[0]):
        candidates = [
            node
            for node, _, _ in (
                yield from search._by_words([*query.without_asked(), form], ENTITY_DEPTH, visible)
            )
            if node.handle in about and node.handle not in placed
        ]
        # those holding more of the typed words first ("caused": the incident's cause),
        # a date counting after the words: it narrows which thing, the words say what
        # is asked ("what caused the outage in april": the cause before the date)
        candidates.sort(key=lambda n: _weight(query, n))
        for node in candidates[:ENTITY_PULL]:
            placed.add(node.handle)
            behind.setdefault(position, []).append(node)
            matched.setdefault(node.handle, "linked")
    pulled = {node.handle for nodes in behind.values() for node in nodes}
    out: Ranked = []
    for position, (node, score) in enumerate(ranked):
        if node.handle not in pulled:
            out.append((node, score))
        out.extend((fact, score) for fact in behind.get(position, ()))
    return out


def _weight(query: terms_of_search.Query, node: Node) -> tuple[int, int]:
    held = terms_of_search.covered_by(query, [node])
    return -len(held - set(query.dates)), -len(held)


def _entities(
    search: Any,
    query: terms_of_search.Query,
    ranked: Ranked,
    visible: Any,
    matched: dict[int, str],
) -> Generator[Any, Any, list[tuple[set[int], int, str, list[Node]]]]:
    """The entities the best hits name that may be followed: (the typed words their
    facts hold together, the position of the hit naming them, their form, their facts)."""
    searched = set(query.words)
    seen: set[str] = set()
    found = []
    every = set(range(len(query.groups)))
    for position, (node, _) in enumerate(ranked[:ENTITY_SOURCES]):
        if node.atom[0] in MOVES or not node.positive or matched.get(node.handle) == "meaning":
            continue  # a move, or found by meaning alone: too weak a link to follow
        alone = terms_of_search.covered_by(query, [node])
        for arg in node.atom[1:]:
            if type(arg) is not Sym or arg.name.startswith(("Agent", "Cx")):
                continue
            if len(fulltext.text_words(arg.name)) < 2:
                continue  # a word alone (Team, Dana) links too much to name a thing
            form = "".join(ch for ch in arg.name.lower() if ch.isalnum())
            if form in searched or form in seen:
                continue
            seen.add(form)
            if not 1 < search._terms().count.get(form, 0) <= ENTITY_SPREAD:
                continue  # named once (nothing to link) or too often (not a thing)
            named = yield ("search", [form], ENTITY_SPREAD + 1)
            facts = [
                fact
                for handle, _, _ in named
                if (fact := search._index.by_handle.get(handle)) is not None
                and fact.atom[0] not in MOVES
                and visible(fact)
            ]
            together = terms_of_search.covered_by(query, facts)
            # followed where its facts hold more of the search than the hit alone, or
            # the hit holds all of it (the search is about this entity)
            if (len(together) > len(alone) or alone == every) and len(facts) > 1:
                found.append((together, position, form, facts))
    return found
