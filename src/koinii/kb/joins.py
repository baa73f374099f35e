"""A rule's joins, prepared once: how a node that fills one antecedent finds the rest.

Forward chaining is semi-naive (firing.py): a new node is matched against each
antecedent it can fill, and joined through the index with stored nodes for the others.
A `Rule` keeps one join per antecedent, made when the rule is compiled, so that work is
not redone at every firing: the antecedent's pattern sorted out for matching, the other
literals listed, the consequent ready to build.

Most rules are one or two flat literals — `(implies (and (subclass ?x ?y) (instance ?z
?x)) (instance ?z ?y))` — and their joins are compiled further (`_Flat`): which argument
of the new node probes which argument table for the other literal, which arguments the
candidates must equal, and where each argument of the conclusion comes from, so that a
firing makes no binding map at all (its conclusion is picked, by one `itemgetter` call,
out of the two nodes' atoms). Any other rule joins through `index.solve` (`_General`).

Invariant: both answer alike — every firing with the node at this antecedent and stored
nodes not waiting to fire at the others, each once — and a join never changes the
index: it returns its firings, and the caller derives them afterwards.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Container, Iterable
from typing import Any

from koinii.kb.index import Index, Literal, accept_all, key, matcher, members, same, solve
from koinii.kb.sentex import Node
from koinii.terms import QUOTE, Sym, Var

# One firing: the atom it concludes and its antecedent nodes, in literal order.
Derivation = tuple[tuple, tuple[Node, ...]]


def prepare(antecedents: tuple[Literal, ...], consequent: Literal) -> tuple[Any, ...]:
    """One join per antecedent of a rule (compiled where the rule is flat)."""
    flat = len(antecedents) <= 2 and all(
        _flat(pattern) for _, pattern in (*antecedents, consequent)
    )
    kind = _Flat if flat else _General
    return tuple(kind(antecedents, consequent, i) for i in range(len(antecedents)))


def scan_position(antecedents: tuple[Literal, ...], index: Index) -> int:
    """The antecedent a new rule's firings are found from: the one with the fewest
    candidates (each joined for the rest)."""
    sizes = [_count(index.candidates(pattern, {})) for _, pattern in antecedents]
    return sizes.index(min(sizes))


def every_firing(
    joins: tuple[Any, ...],
    antecedents: tuple[Literal, ...],
    index: Index,
    waiting: Collection[Node],
    budget: Any,
    position: int | None = None,
    fitting: Callable[[str], Container[str] | None] | None = None,
) -> list[Derivation]:
    """Every firing of a new rule over the stored nodes not waiting to fire: each node
    that fills the antecedent at `position` (`scan_position` if not given), joined for
    the rest — with the nodes in the contexts `fitting(node.context)` names alone, if
    given (see `_Flat.firings`)."""
    if position is None:
        position = scan_position(antecedents, index)
    positive, pattern = antecedents[position]
    join = joins[position]
    out: list[Derivation] = []
    for node in list(index.candidates(pattern, {})):
        if budget is not None:
            budget.tick()  # (a rule of one antecedent joins nothing that would)
        if node.positive is positive and node not in waiting:
            fits = fitting(node.context) if fitting is not None else None
            out.extend(join.firings(index, node, waiting, budget, True, fits))
    return out


class Triggers:
    """A functor's rule literals (`_rules_by_literal`'s entries for it) by what a node
    must hold to fill each: a new node is joined only with the literals it can match.

    A literal with a constant argument — `(instance ?x Corporation)` — is filed under
    that argument's position and value; one with a function term there and no constant,
    under the term's position, functor and length; one with neither is asked of every
    node. Before this, each new `instance` node was matched against every rule literal
    of `instance` — 1,000 of them in SUMO's Merge.kif, 3,878 new nodes: 3.9 million head
    matches, most of a 38 s firing, for a few thousand conclusions. `of(atom)` gives the
    entries in their order in `_rules_by_literal`, as the plain list did.
    """

    __slots__ = ("every", "general", "by_value", "by_shape")

    FEW = 4  # up to this many literals, each is simply asked (filing costs more)

    def __init__(self, entries: list[tuple[Node, int]], rules: dict[Node, Any]) -> None:
        self.every: list[tuple[Node, int]] | None = None
        if len(entries) <= self.FEW:
            self.every = list(entries)
            return
        self.general: list[tuple[int, Node, int]] = []
        self.by_value: dict[tuple[int, Any], list[tuple[int, Node, int]]] = {}
        self.by_shape: dict[tuple[int, Any, int], list[tuple[int, Node, int]]] = {}
        for serial, (rule_node, i) in enumerate(entries):
            pattern = rules[rule_node].antecedents[i][1]
            filed = (serial, rule_node, i)
            shape = None
            for position in range(1, len(pattern)):
                x = pattern[position]
                if type(x) is Var:
                    continue
                if type(x) is not tuple or _ground(x):
                    self.by_value.setdefault((position, key(x)), []).append(filed)
                    break
                if shape is None:
                    shape = (position, x[0], len(x))
            else:
                if shape is None:
                    self.general.append(filed)
                else:
                    self.by_shape.setdefault(shape, []).append(filed)

    def of(self, atom: tuple) -> list[tuple[Node, int]]:
        """The entries whose literal `atom` may fill, in their order."""
        if self.every is not None:
            return self.every
        found = list(self.general)
        by_value, by_shape = self.by_value, self.by_shape
        sources = 1 if found else 0
        for position in range(1, len(atom)):
            value = atom[position]
            hit = by_value.get((position, value if type(value) is Sym else key(value)))
            if hit:
                found += hit
                sources += 1
            if type(value) is tuple and by_shape:
                hit = by_shape.get((position, value[0], len(value)))
                if hit:
                    found += hit
                    sources += 1
        if sources > 1:
            found.sort()  # (by serial, unique: nodes are never compared)
        return [(rule_node, i) for _, rule_node, i in found]


def _ground(term: tuple) -> bool:
    if term[0] is QUOTE:
        return True
    return all(type(x) is not Var and (type(x) is not tuple or _ground(x)) for x in term)


def _count(found: Iterable[Node]) -> int:
    return len(found) if hasattr(found, "__len__") else sum(1 for _ in found)


def _flat(pattern: tuple) -> bool:
    """No compound argument (no function term, no quotation) in the pattern."""
    return all(type(x) is not tuple for x in pattern)


def _builder(pattern: tuple) -> Callable[[dict], tuple]:
    """The consequent built from a binding that binds each of its variables."""
    if _flat(pattern):
        # a binding's keys are variables, so `get(x, x)` is `x` itself for a constant
        return lambda binding: tuple(map(binding.get, pattern, pattern))
    return lambda binding: _substitute(pattern, binding)


def _substitute(pattern: Any, binding: dict) -> Any:
    cls = type(pattern)
    if cls is Var:
        return binding[pattern]
    if cls is tuple:
        if pattern[0] is QUOTE:
            return pattern
        return tuple([_substitute(x, binding) for x in pattern])
    return pattern


class _General:
    """A join of any rule: the antecedent matched by a prepared matcher, the other
    literals solved through the index, the conclusion built from the binding."""

    __slots__ = ("position", "head", "others", "build")

    def __init__(self, antecedents: tuple[Literal, ...], consequent: Literal, position: int):
        self.position = position
        self.head = matcher(antecedents[position][1], {})
        self.others = [lit for k, lit in enumerate(antecedents) if k != position]
        self.build = _builder(consequent[1])

    def firings(
        self,
        index: Index,
        node: Node,
        waiting: Collection[Node],
        budget: Any,
        only_way: bool = False,
        fits: Container[str] | None = None,
    ) -> list[Derivation]:
        """The firings with `node` at this antecedent. Unless this is the `only_way` in
        (a new rule scanned whole), a firing where `node` also fills an earlier
        antecedent is left to the join of that one, so it is found once. With `fits`,
        only nodes in those contexts are joined (the others' firings would have no
        place to conclude in: contexts.py, `Hierarchy.fitting`)."""
        binding = self.head(node.atom)
        if binding is None:
            return []
        if not self.others:
            return [(self.build(binding), (node,))]
        if fits is not None:
            if waiting:
                admit = lambda c: c.context in fits and c not in waiting  # noqa: E731
            else:
                admit = lambda c: c.context in fits  # noqa: E731
        else:
            admit = (lambda c: c not in waiting) if waiting else None
        i = self.position
        out = []
        for full, rest in solve(index, self.others, binding, accept_all, budget, admit):
            if i and not only_way and node in rest[:i]:
                continue
            out.append((self.build(full), rest[:i] + (node,) + rest[i:]))
        return out


class _Flat:
    """A join of a rule of one or two flat literals, compiled (see the module docstring).

    Positions are into the atoms: 0 is the functor. The conclusion is picked out of
    `consts + atom + other_atom` (the consequent's constants, the node's atom, the
    candidate's), so each firing costs one tuple concatenation and one `itemgetter`.
    """

    __slots__ = (
        "position",
        "length",
        "fixed",
        "repeats",
        "other",
        "functor",
        "other_length",
        "other_positive",
        "probes",
        "other_repeats",
        "consts",
        "pick",
    )

    def __init__(self, antecedents: tuple[Literal, ...], consequent: Literal, position: int):
        self.position = position
        pattern = antecedents[position][1]
        self.length = len(pattern)
        self.fixed, self.repeats, where = _sorted_out(pattern)
        others = [lit for k, lit in enumerate(antecedents) if k != position]
        self.other = bool(others)
        sources: dict[Var, int] = {var: q for var, q in where.items()}  # into the combined
        if others:
            other_positive, other = others[0]
            self.functor = other[0]
            self.other_length = len(other)
            self.other_positive = other_positive
            # probes: (position in the candidate, position in the node or None, constant)
            self.probes: list[tuple[int, int | None, Any]] = []
            self.other_repeats: list[tuple[int, int]] = []
            own: dict[Var, int] = {}
            for q in range(1, len(other)):
                x = other[q]
                if type(x) is not Var:
                    self.probes.append((q, None, x))
                elif x in where:
                    self.probes.append((q, where[x], None))
                elif x in own:
                    self.other_repeats.append((own[x], q))
                else:
                    own[x] = q
            for var, q in own.items():
                sources[var] = self.length + q
        conclusion = consequent[1]
        self.consts = tuple(x for x in conclusion if type(x) is not Var)
        offset = len(self.consts)
        indices, c = [], 0
        for x in conclusion:
            if type(x) is Var:
                indices.append(offset + sources[x])
            else:
                indices.append(c)
                c += 1
        if len(indices) == 1:
            only = indices[0]
            self.pick: Callable[[tuple], tuple] = lambda combined: (combined[only],)
        else:
            self.pick = operator.itemgetter(*indices)

    def firings(
        self,
        index: Index,
        node: Node,
        waiting: Collection[Node],
        budget: Any,
        only_way: bool = False,
        fits: Container[str] | None = None,
    ) -> list[Derivation]:
        """As `_General.firings`."""
        atom = node.atom
        if len(atom) != self.length:
            return []
        for q, constant in self.fixed:
            if atom[q] is not constant and not same(constant, atom[q]):
                return []
        for first, later in self.repeats:
            if not same(atom[first], atom[later]):
                return []
        head = self.consts + atom
        if not self.other:
            return [(self.pick(head), (node,))]
        findex = index.by_functor.get(self.functor)
        if findex is None or len(findex.args) < self.other_length - 1:
            return []
        # the candidates: the smallest bucket a probe names (every node of the functor
        # where nothing probes: a cross product)
        probes = [(q, atom[at] if at is not None else constant) for q, at, constant in self.probes]
        bucket: Any = None  # (every node of the functor)
        smallest = findex.count
        chosen = None
        for probe in probes:
            q, value = probe
            found = findex.args[q - 1].get(value if type(value) is Sym else key(value))
            if found is None:
                return []
            size = len(found) if type(found) is not Node else 1
            if size < smallest:
                bucket, smallest, chosen = found, size, probe
        # every candidate in the bucket a probe chose holds that probe's value: equal keys
        # are the same term (index.py, `key`), so only the other probes are checked
        if chosen is not None:
            probes.remove(chosen)
        repeats = self.other_repeats
        tick = budget.tick if budget is not None else None
        pick, positive, length = self.pick, self.other_positive, self.other_length
        first = self.position == 0
        skip_self = not first and not only_way  # node at both: the first antecedent's firing
        out: list[Derivation] = []
        for candidate in findex.every() if bucket is None else members(bucket):
            if tick is not None:
                tick()
            if candidate.positive is not positive or candidate in waiting:
                continue
            if fits is not None and candidate.context not in fits:
                continue
            other = candidate.atom
            if len(other) != length:
                continue
            for q, value in probes:
                found = other[q]
                if found is not value and not same(value, found):
                    break
            else:
                for a, b in repeats:
                    if not same(other[a], other[b]):
                        break
                else:
                    if first:
                        out.append((pick(head + other), (node, candidate)))
                    elif not (skip_self and candidate is node):
                        out.append((pick(head + other), (candidate, node)))
        return out


def _sorted_out(pattern: tuple) -> tuple[list[tuple[int, Any]], list[tuple[int, int]], dict]:
    """A flat pattern's constants `(position, value)`, its repeated variables `(first,
    later)`, and each variable's first position."""
    fixed, repeats, where = [], [], {}
    for q in range(1, len(pattern)):
        x = pattern[q]
        if type(x) is not Var:
            fixed.append((q, x))
        elif x in where:
            repeats.append((where[x], q))
        else:
            where[x] = q
    return fixed, repeats, where
