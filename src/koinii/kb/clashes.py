"""Clashes: what two believed sentexes disagree about, as a reader at a context sees it.

A clash is a sentence believed with both polarities (a negation clash), or two believed
last arguments of a functional predicate for the same leading ones, each written in a
context that sees the `(functional P)` declaration. `contradictions`
lists default/default clashes (the dilemmas), `conflicts` monotonic/monotonic ones; a
clash where one side is defeated is the resolved case and is listed by neither.
Invariant: a clash is listed only where some context observes every side unmasked.
"""

from __future__ import annotations

from typing import Any

from koinii.kb import checks
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
            declared = self._functional_declarations()
            for functor in sorted(declared, key=lambda s: s.name):
                groups.extend(
                    self._functional_clashes(functor, declared[functor], visible, monotonic)
                )
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

    def _functional_clashes(
        self, functor: Sym, where: set[str], visible, monotonic: bool
    ) -> list[list[Node]]:
        """The clashes of a functional predicate declared in the contexts `where`, among
        the values written in a context that sees a declaration: a declaration applies to
        the writes of the contexts that see it, and to no one else's (an agent's
        `(functional P)` does not make two values of another agent a clash, in a channel
        or anywhere). Per leading arguments, the values one context sees together: the
        reader's (`visible`, as the negation clashes are read), else each context that
        sees them. Values are grouped, not paired: 2,000 values of one agent made 4 million
        pairs, and a read that listed clashes held the daemon for seconds."""
        hierarchy = self._hierarchy
        governed: dict[str, bool] = {}  # context -> does it see a declaration?
        by_prefix: dict[str, list[Node]] = {}
        for n in self._index.with_functor(functor):
            if not (n.believed and n.positive and len(n.atom) >= 2):
                continue
            under = governed.get(n.context)
            if under is None:
                under = governed[n.context] = not where.isdisjoint(hierarchy.up(n.context))
            if under and (visible is None or visible(n, {}) is not None):
                by_prefix.setdefault(show(n.atom[:-1]), []).append(n)
        groups = []
        for prefix in sorted(by_prefix):
            self._spend()
            nodes = by_prefix[prefix]
            if len(nodes) < 2:
                continue
            if visible is not None:
                members_ = _clashing(nodes, monotonic)
            else:
                members_ = set()
                for ctx in sorted(set().union(*(hierarchy.down(n.context) for n in nodes))):
                    self._spend()
                    at = self._acceptor(ctx)
                    members_ |= _clashing([n for n in nodes if at(n, {}) is not None], monotonic)
            if members_:
                groups.append(sorted(members_, key=lambda n: n.handle))
        return groups


def _value(node: Node) -> tuple:
    """The last argument as a key that tells apart what `index.same` does (1, 1.0, true)."""
    value = node.atom[-1]
    return (type(value), show(value) if type(value) is tuple else value)


def _clashing(nodes: list[Node], monotonic: bool) -> set[Node]:
    """Which of `nodes` (one functional predicate's values for the same leading arguments,
    seen together) take part in a clash: a pair of different values, both monotonic for
    a conflict, not both for a dilemma — found by counting values, not by pairing."""
    if monotonic:
        mono = [n for n in nodes if n.mono]
        return set(mono) if len({_value(n) for n in mono}) > 1 else set()
    if len({_value(n) for n in nodes}) < 2:
        return set()  # (with two values, every node has a partner of another value)
    defaults = {_value(n) for n in nodes if not n.mono}
    return {n for n in nodes if not n.mono or defaults - {_value(n)}}


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
