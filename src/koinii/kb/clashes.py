"""Clashes: what two believed sentexes disagree about, as a reader at a context sees it.

A clash is a sentence believed with both polarities (a negation clash), or two believed
last arguments of a functional predicate for the same leading ones. `contradictions`
lists default/default clashes (the dilemmas), `conflicts` monotonic/monotonic ones; a
clash where one side is defeated is the resolved case and is listed by neither.
Invariant: a clash is listed only where some context observes every side unmasked.
"""

from __future__ import annotations

from typing import Any

from koinii.kb import checks
from koinii.kb.index import same
from koinii.kb.sentex import Node, text_of_key
from koinii.kb.state import State
from koinii.terms import Sym, show


class Clashes(State):
    """Contradictions and conflicts (see the module docstring)."""

    def contradictions(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Dilemmas (default vs default) a reader at `ctx` can see (None: all)."""
        return self._clashes(ctx, monotonic=False)

    def conflicts(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Clashes between monotonic sentexes a reader at `ctx` can see (None: all)."""
        return self._clashes(ctx, monotonic=True)

    def _clashes(self, ctx: Any, monotonic: bool) -> list[dict[str, Any]]:
        ctx_name = None if ctx is None else checks.context_name(ctx, query=True)
        with self._lock:
            visible = None if ctx_name is None else self._acceptor(ctx_name)
            groups: list[list[Node]] = []
            two_sided = self._index.two_sided
            for key in sorted(two_sided, key=text_of_key):
                self._spend()
                nodes = [
                    n
                    for n in self._index.same_atom(two_sided[key], key)
                    if n.believed
                    and n.mono == monotonic
                    and (visible is None or visible(n, {}) is not None)
                ]
                if visible is not None:
                    if {n.positive for n in nodes} == {True, False}:
                        groups.append(sorted(nodes, key=lambda n: n.handle))
                else:
                    groups.extend(self._observed_clashes(nodes))
            for functor in sorted(self._functional_predicates(), key=lambda s: s.name):
                groups.extend(self._functional_clashes(functor, visible, monotonic))
            return [_clash_entry(g) for g in groups]

    def _observed_clashes(self, nodes: list[Node]) -> list[list[Node]]:
        """The clashes among `nodes` that some context observes: at each context that
        sees any of them, the unmasked ones it sees, when both polarities are there;
        only the largest such sets (what one reader sees together is one clash)."""
        seen: set[frozenset[Node]] = set()
        for ctx in set().union(*(self._hierarchy.down(n.context) for n in nodes)):
            at = self._acceptor(ctx)
            group = frozenset(n for n in nodes if at(n, {}) is not None)
            if {n.positive for n in group} == {True, False}:
                seen.add(group)
        largest = [g for g in seen if not any(g < other for other in seen)]
        return sorted(
            (sorted(g, key=lambda n: n.handle) for g in largest),
            key=lambda g: [n.handle for n in g],
        )

    def _functional_clashes(self, functor: Sym, visible, monotonic: bool) -> list[list[Node]]:
        by_prefix: dict[str, list[Node]] = {}
        for n in self._index.with_functor(functor):
            seen = visible is None or visible(n, {}) is not None
            if n.believed and n.positive and len(n.atom) >= 2 and seen:
                by_prefix.setdefault(show(n.atom[:-1]), []).append(n)
        groups = []
        for prefix in sorted(by_prefix):
            nodes = by_prefix[prefix]
            members_: set[Node] = set()
            for a in nodes:
                for b in nodes:
                    self._spend()
                    if (
                        a is not b
                        and not same(a.atom[-1], b.atom[-1])
                        and (a.mono and b.mono) == monotonic
                        and (visible is not None or self._clash_visible(a, b))
                    ):
                        members_.update((a, b))
            if members_:
                groups.append(sorted(members_, key=lambda n: n.handle))
        return groups


def _clash_entry(nodes: list[Node]) -> dict[str, Any]:
    sides = sorted(
        (
            {
                "handle": n.handle,
                "sentence": n.full_text,
                "context": n.context,
                "strength": n.effective_strength(),
            }
            for n in nodes
        ),
        key=lambda s: (s["sentence"], s["context"]),
    )
    return {"handles": sorted(n.handle for n in nodes), "sides": sides}
