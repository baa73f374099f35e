"""The context hierarchy: genlCx edges and their cached closures.

Invariant: the edges form a partial order (no cycles — `would_cycle` is asked before an
edge is added) and `CxUniverse` is in every context's ancestor set, implicitly, without
an edge. `up(K)` and `down(K)` are reflexive-transitive closures, cached until the next
edge change, because every read at K walks `up(K)` and every derivation asks `down`.
"""

from __future__ import annotations

UNIVERSE = "CxUniverse"
EVERYTHING = "CxEverything"
_UNKNOWN = object()


class Hierarchy:
    """genlCx edges (`sub` sees `sup`) with cached ancestor and descendant sets."""

    __slots__ = ("_parents", "_children", "_up", "_down", "_placed", "_fitting")

    def __init__(self) -> None:
        self._parents: dict[str, dict[str, int]] = {}
        self._children: dict[str, dict[str, int]] = {}
        self._up: dict[str, frozenset[str]] = {}
        self._down: dict[str, frozenset[str]] = {}
        # placements asked for, by the contexts asked about (`placement`)
        self._placed: dict[tuple[str, ...], list[str]] = {}
        # the contexts a firing may join, by rule context and node context (`fitting`)
        self._fitting: dict[tuple[str, str, bool], frozenset[str] | None] = {}

    # Edges are counted, not set: the same edge may be asserted in no other context
    # (genlCx lives in CxUniverse), but counting keeps add/remove exact inverses.
    def add_edge(self, sub: str, sup: str) -> None:
        parents = self._parents.setdefault(sub, {})
        parents[sup] = parents.get(sup, 0) + 1
        children = self._children.setdefault(sup, {})
        children[sub] = children.get(sub, 0) + 1
        self._forget()

    def remove_edge(self, sub: str, sup: str) -> None:
        for table, key, other in ((self._parents, sub, sup), (self._children, sup, sub)):
            edges = table[key]
            if edges[other] == 1:
                del edges[other]
                if not edges:
                    del table[key]
            else:
                edges[other] -= 1
        self._forget()

    def _forget(self) -> None:
        self._up.clear()
        self._down.clear()
        self._placed.clear()
        self._fitting.clear()

    def up(self, ctx: str) -> frozenset[str]:
        """`ctx`, everything it sees (transitively), and CxUniverse."""
        found = self._up.get(ctx)
        if found is None:
            found = self._closure(ctx, self._parents) | {UNIVERSE}
            self._up[ctx] = found
        return found

    def down(self, ctx: str) -> frozenset[str]:
        """`ctx` and every context that sees it; for CxUniverse, every known context."""
        found = self._down.get(ctx)
        if found is None:
            if ctx == UNIVERSE:
                found = frozenset(self.known()) | {UNIVERSE}
            else:
                found = self._closure(ctx, self._children)
            self._down[ctx] = found
        return found

    def known(self) -> set[str]:
        """Every context that takes part in an edge."""
        return set(self._parents) | set(self._children)

    def would_cycle(self, sub: str, sup: str) -> bool:
        """True when adding `sub` sees `sup` would close a cycle."""
        return sub == sup or sub in self.up(sup)

    def sees(self, ctx: str, other: str) -> bool:
        return other in self.up(ctx)

    def edges(self) -> list[tuple[str, str]]:
        return sorted((sub, sup) for sub, sups in self._parents.items() for sup in sups)

    @staticmethod
    def _closure(start: str, table: dict[str, dict[str, int]]) -> frozenset[str]:
        seen = {start}
        stack = [start]
        while stack:
            for nxt in table.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return frozenset(seen)

    def placement(self, contexts: tuple[str, ...]) -> list[str]:
        """`maximal_common_descendants` of `contexts`, kept until an edge changes.

        A rule's firings ask it once per firing whose antecedents lie in another context
        than the rule's: over SUMO's 73 contexts the inheritance axiom asked 1.76 million
        times about a few hundred combinations (a quarter of its time)."""
        found = self._placed.get(contexts)
        if found is None:
            found = self._placed[contexts] = self.maximal_common_descendants(set(contexts))
        return found

    def fitting(self, home: str, ctx: str, authored: bool) -> frozenset[str] | None:
        """The contexts a sentex may sit in to fire with one in `ctx` under a rule in
        `home` and have its conclusion placed somewhere (kept until an edge changes).

        An authored rule concludes only from what its own context sees: `up(home)`, if
        that holds `ctx`. Else a conclusion needs a context seeing `home`, `ctx` and the
        other's context together: the other sees some common descendant of `home` and
        `ctx`. A join skips every other candidate: over SUMO's 69 contexts half the
        inheritance axiom's firings joined sibling files no context sees together, each
        made and then dropped for want of a place. None: every context fits."""
        key = (home, ctx, authored)
        found = self._fitting.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            if authored:
                up = self.up(home)
                found = up if ctx in up else frozenset()
            else:  # (as `maximal_common_descendants`: CxUniverse is above everything)
                below = [self.down(c) for c in {home, ctx} - {UNIVERSE}]
                if not below:
                    found = None
                else:
                    common = frozenset.intersection(*below)
                    found = frozenset().union(*[self.up(c) for c in common])  # (CxUniverse too)
            self._fitting[key] = found
        return found

    def maximal_common_descendants(self, contexts: set[str]) -> list[str]:
        """Where a conclusion drawn from sentexes in `contexts` is placed (sorted).

        The most general contexts that see every one of `contexts`; empty when none does.
        """
        for ctx in contexts:  # fast path: one of them already sees all the others
            up = self.up(ctx)
            if all(other in up for other in contexts):
                return [ctx]
        common: set[str] | None = None
        for ctx in contexts - {UNIVERSE}:  # everything is below CxUniverse
            down = self.down(ctx)
            common = set(down) if common is None else common & down
            if not common:
                return []
        assert common is not None
        return sorted(
            ctx for ctx in common if not any(o != ctx and o in self.up(ctx) for o in common)
        )
