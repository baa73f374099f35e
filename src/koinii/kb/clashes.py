"""Clashes: what two believed sentexes disagree about, as a reader at a context sees it.

A clash is a sentence believed with both polarities (a negation clash), or two believed
values of a single-valued argument for the same other arguments. A predicate is
single-valued in an argument where a declaration says so: `(singleValued P N)` (SUMO's
`singleValued`, Cyc's `functionalInArgs`: for the same other arguments, argument N takes
one value), or `(functional P)` (the same, in the last argument). `contradictions` lists
default/default clashes (the dilemmas), `conflicts` monotonic/monotonic ones; a clash
where one side is defeated is the resolved case and is listed by neither.

Whose values a declaration governs (docs/security.md, non-interference): those written
in a context that sees it (the writer speaks that vocabulary), and those in the
declaring context's own view (a channel's operator declares, in the channel, a
predicate single-valued among the claims the channel sees). Since an agent's own context
sees only vocabulary, an agent's declaration governs its own values, never another
agent's; a declaration refuses nothing and changes no belief, it only groups values.

Invariants:
- a clash is listed only where some context observes every side unmasked;
- a single-valued clash is listed only at a reader that sees a declaration governing
  every side (a context that cannot see the declaration lists nothing);
- values are grouped by their other arguments, never compared in pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from koinii.kb import checks
from koinii.kb.contexts import EVERYTHING
from koinii.kb.sentex import Node, text_of_key
from koinii.terms import Sym, show

if TYPE_CHECKING:
    import threading

    from koinii.kb.contexts import Hierarchy
    from koinii.kb.index import Index

FUNCTIONAL = Sym("functional")
SINGLE_VALUED = checks.SINGLE_VALUED
LAST = 0  # the argument `(functional P)` declares: the last, whatever the arity


class Sight(Protocol):
    """What clashes read of the KB around them, asked at each use: what a reader at a
    context sees (`Reads.acceptor`), and the running operation's budget (`spend`)."""

    def acceptor(self, ctx: str) -> Callable[[Node, dict], dict | None]: ...

    def spend(self) -> None: ...


class Clashes:
    """Contradictions and conflicts (see the module docstring): an object of its own,
    which `KB` holds and delegates to (engine.py). It keeps no state: it reads the KB's
    lock, the stored nodes' index and the hierarchy (maintenance's), and the KB for what
    a reader sees and the budget (`Sight`); it changes none of them."""

    __slots__ = ("_kb", "_lock", "_index", "_hierarchy")

    def __init__(
        self, kb: Sight, *, lock: threading.RLock, index: Index, hierarchy: Hierarchy
    ) -> None:
        self._kb = kb
        self._lock = lock
        self._index = index
        self._hierarchy = hierarchy

    def contradictions(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Dilemmas (default vs default) a reader at `ctx` can see (None: all)."""
        return self._listed(ctx, monotonic=False)

    def conflicts(self, ctx: Any = None) -> list[dict[str, Any]]:
        """Clashes between monotonic sentexes a reader at `ctx` can see (None: all)."""
        return self._listed(ctx, monotonic=True)

    def _listed(self, ctx: Any, monotonic: bool) -> list[dict[str, Any]]:
        ctx_name = None if ctx is None else checks.context_name(ctx, query=True)
        with self._lock:
            visible = None if ctx_name is None else self._kb.acceptor(ctx_name)
            groups: list[list[Node]] = []
            two_sided = self._index.two_sided
            for key in sorted(two_sided, key=text_of_key):
                self._kb.spend()
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
            found = [_clash_entry(g) for g in groups]
            declared = self._single_valued_declarations()
            for functor, argument in sorted(declared, key=lambda d: (d[0].name, d[1])):
                where = declared[(functor, argument)]
                for group in self._single_valued_clashes(
                    functor, argument, where, ctx_name, visible, monotonic
                ):
                    entry = _clash_entry(group)
                    entry["single_valued"] = {
                        "predicate": functor.name,
                        "argument": argument_position(group[0].atom, argument),
                    }
                    found.append(entry)
            return found

    def _observed_clashes(self, nodes: list[Node]) -> list[list[Node]]:
        """The clashes among `nodes` that some context observes: at each context that
        sees any of them, the unmasked ones it sees, when both polarities are there;
        only the largest such sets (what one reader sees together is one clash)."""
        seen: set[frozenset[Node]] = set()
        for ctx in set().union(*(self._hierarchy.down(n.context) for n in nodes)):
            at = self._kb.acceptor(ctx)
            group = frozenset(n for n in nodes if at(n, {}) is not None)
            if {n.positive for n in group} == {True, False}:
                seen.add(group)
        largest = [g for g in seen if not any(g < other for other in seen)]
        return sorted(
            (sorted(g, key=lambda n: n.handle) for g in largest),
            key=lambda g: [n.handle for n in g],
        )

    def _single_valued_declarations(self) -> dict[tuple[Sym, int], set[str]]:
        """Each single-valued declaration believed, as (predicate, argument) to the
        contexts that declare it; argument `LAST` for `(functional P)`. A declaration of
        another shape (`(singleValued P 0)`, a non-symbol predicate) declares nothing."""
        declared: dict[tuple[Sym, int], set[str]] = {}
        for n in self._index.with_functor(FUNCTIONAL):
            if n.believed and n.positive and len(n.atom) == 2 and type(n.atom[1]) is Sym:
                declared.setdefault((n.atom[1], LAST), set()).add(n.context)
        for n in self._index.with_functor(SINGLE_VALUED):
            atom = n.atom
            if (
                n.believed
                and n.positive
                and len(atom) == 3
                and type(atom[1]) is Sym
                and type(atom[2]) is int
                and atom[2] >= 1
            ):
                declared.setdefault((atom[1], atom[2]), set()).add(n.context)
        return declared

    def _single_valued_clashes(
        self,
        functor: Sym,
        argument: int,
        where: set[str],
        ctx_name: str | None,
        visible: Callable[[Node, dict], dict | None] | None,
        monotonic: bool,
    ) -> list[list[Node]]:
        """The clashes of `functor` single-valued in `argument`, declared in the contexts
        `where`, among the values those declarations govern (the module docstring). Per
        other arguments, the values one context sees together: the reader's (`visible`,
        when it sees a declaration; a reader that sees none lists nothing), else each
        context that sees a declaration and the values. Values are grouped, not paired:
        2,000 values of one agent made 4 million pairs, and a read that listed clashes
        held the daemon for seconds."""
        hierarchy = self._hierarchy
        if ctx_name is not None and not ctx_name.startswith("?") and ctx_name != EVERYTHING:
            where = where & hierarchy.up(ctx_name)  # the declarations the reader sees
            if not where:
                return []
        governing: dict[str, frozenset[str]] = {}  # context -> the declarations over it

        def governed_by(context: str) -> frozenset[str]:
            found = governing.get(context)
            if found is None:
                up = hierarchy.up(context)
                found = governing[context] = frozenset(
                    d for d in where if d in up or context in hierarchy.up(d)
                )
            return found

        by_others: dict[str, list[Node]] = {}
        for n in self._index.with_functor(functor):
            position = argument_position(n.atom, argument)
            if not (n.believed and n.positive and position) or not governed_by(n.context):
                continue
            if visible is None or visible(n, {}) is not None:
                others = n.atom[:position] + n.atom[position + 1 :]
                by_others.setdefault(show(others), []).append(n)
        groups = []
        for others in sorted(by_others):
            self._kb.spend()
            nodes = by_others[others]
            if len(nodes) < 2:
                continue
            if visible is not None:
                members_ = _clashing(nodes, monotonic, argument)
            else:
                members_ = set()
                for ctx in sorted(set().union(*(hierarchy.down(n.context) for n in nodes))):
                    self._kb.spend()
                    seen_there = where & hierarchy.up(ctx)
                    if not seen_there:
                        continue
                    at = self._kb.acceptor(ctx)
                    members_ |= _clashing(
                        [
                            n
                            for n in nodes
                            if at(n, {}) is not None and governed_by(n.context) & seen_there
                        ],
                        monotonic,
                        argument,
                    )
            if members_:
                groups.append(sorted(members_, key=lambda n: n.handle))
        return groups


def argument_position(atom: tuple, argument: int) -> int:
    """Where in `atom` the declared argument is (`LAST`: its last; 0: the atom has no
    such argument)."""
    position = len(atom) - 1 if argument == LAST else argument
    return position if 1 <= position < len(atom) else 0


def _value(node: Node, argument: int) -> tuple:
    """The declared argument as a key that tells apart what `index.same` does (1, 1.0,
    true)."""
    value = node.atom[argument_position(node.atom, argument)]
    return (type(value), show(value) if type(value) is tuple else value)


def _clashing(nodes: list[Node], monotonic: bool, argument: int) -> set[Node]:
    """Which of `nodes` (one predicate's values for the same other arguments, seen
    together) take part in a clash: a pair of different values, both monotonic for a
    conflict, not both for a dilemma — found by counting values, not by pairing."""
    if monotonic:
        mono = [n for n in nodes if n.mono]
        return set(mono) if len({_value(n, argument) for n in mono}) > 1 else set()
    if len({_value(n, argument) for n in nodes}) < 2:
        return set()  # (with two values, every node has a partner of another value)
    defaults = {_value(n, argument) for n in nodes if not n.mono}
    return {n for n in nodes if not n.mono or defaults - {_value(n, argument)}}


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
