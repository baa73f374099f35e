"""The in-memory indexes over stored sentexes, and pattern matching against them.

Invariant: a Node is in the indexes exactly while it is stored (`link` / `unlink` are the
only writers and are inverses), and `two_sided` holds exactly the atoms stored with both
polarities. Index keys tell apart values Python calls equal
(`1`, `1.0`, `True`), so `(p 1)` and `(p true)` never meet in a bucket; `same` is the
type-aware equality that matching uses for the same reason.

A bucket holds a single Node until a second arrives, then a tuple, and past SMALL a
`ListSet` (sentex.py: a list that makes a map from node to place at its first removal):
most (functor, position, value) keys name one sentex or a few, and a set costs ~200 bytes
with two members and ~700 with eight, a tuple 56 and 104; past SMALL a set took 58 bytes
a member, a `ListSet` 8 (over SUMO the inheritance axiom's buckets held 360,000 nodes:
21 MB as sets). (A tuple is also safe to iterate while the bucket changes: a change
makes a new one.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any

from koinii.kb.sentex import ListSet, Node
from koinii.terms import QUOTE, Sym, Var, show, substitute


def key(value: Any) -> Any:
    """A dict key for `value` that keeps bool, int, float and compounds apart.

    A compound's key is its text, and the same term object is keyed again and again —
    a function term bound in a join is looked up once per rule literal its node
    triggers (SUMO's `(GovernmentFn ?C)`: hundreds each) — so the last keys made are
    kept by the term's identity (the term held with its key, so its id is not reused)."""
    cls = type(value)
    if cls is Sym or cls is str or cls is int or cls is Var:
        return value
    if cls is tuple:
        held = _COMPOUND_KEYS.get(id(value))
        if held is not None and held[0] is value:
            return held[1]
        made = ("(", show(value))
        if len(_COMPOUND_KEYS) >= _COMPOUND_KEYS_KEPT:
            _COMPOUND_KEYS.clear()
        _COMPOUND_KEYS[id(value)] = (value, made)
        return made
    return (cls.__name__, value)


_COMPOUND_KEYS: dict[int, tuple[tuple, tuple[str, str]]] = {}
_COMPOUND_KEYS_KEPT = 4096


def same(a: Any, b: Any) -> bool:
    """Term equality that does not confuse `1`, `1.0` and `true`."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def match(pattern: Any, value: Any, binding: dict[Var, Any]) -> dict[Var, Any] | None:
    """Extend `binding` so that `pattern` equals the ground `value`, or None.

    Returns `binding` itself when nothing new was bound, else a new dict. A quotation in
    the pattern matches only itself: its variables are data.
    """
    cls = type(pattern)
    if cls is Var:
        bound = binding.get(pattern, _UNBOUND)
        if bound is _UNBOUND:
            extended = dict(binding)
            extended[pattern] = value
            return extended
        return binding if same(bound, value) else None
    if cls is tuple:
        if type(value) is not tuple or len(value) != len(pattern):
            return None
        if pattern[0] is QUOTE:
            return binding if same(pattern, value) else None
        # The arguments of a sentence are mostly symbols and variables: those are matched
        # here, without a call each, and the binding is copied once, not once per variable.
        owned = False  # is `binding` a copy made here (so it may be extended in place)?
        for p, v in zip(pattern, value):
            cls = type(p)
            if cls is Sym:
                if p is not v:  # interned: equal symbols are one object
                    return None
            elif cls is Var:
                bound = binding.get(p, _UNBOUND)
                if bound is _UNBOUND:
                    if not owned:
                        binding, owned = dict(binding), True
                    binding[p] = v
                elif not same(bound, v):
                    return None
            else:
                extended = match(p, v, binding)
                if extended is None:
                    return None
                if extended is not binding:
                    binding, owned = extended, True
        return binding
    if cls is type(value) and pattern == value:
        return binding
    return None


_UNBOUND = object()
_SYMBOL_OR_VARIABLE = frozenset({Sym, Var})


def matcher(pattern: Any, binding: dict[Var, Any]) -> Callable[[Any], dict[Var, Any] | None]:
    """`lambda value: match(pattern, value, binding)`, prepared once for many values.

    A join scanning a large bucket matches one pattern, under one binding, against every
    candidate: a flat pattern of symbols and variables is sorted out once here (which
    positions must be which symbol, which equal a bound value or each other, which bind),
    so each candidate costs a few comparisons. Anything else is left to `match`.
    """
    if (
        type(pattern) is not tuple
        or pattern[0] is QUOTE
        or not _SYMBOL_OR_VARIABLE.issuperset(map(type, pattern))
    ):
        return functools.partial(match, pattern, binding=binding)
    symbols: list[tuple[int, Sym]] = []
    bound: list[tuple[int, Any]] = []  # positions whose variable the binding holds
    repeats: list[tuple[int, int]] = []  # (first, later) positions of one new variable
    fresh: dict[Var, int] = {}  # each new variable at its first position, in order
    for position, p in enumerate(pattern):
        if type(p) is Sym:
            symbols.append((position, p))
        elif p in binding:
            bound.append((position, binding[p]))
        elif p in fresh:
            repeats.append((fresh[p], position))
        else:
            fresh[p] = position
    length = len(pattern)
    new = list(fresh.items())

    def matched(value: Any) -> dict[Var, Any] | None:
        if type(value) is not tuple or len(value) != length:
            return None
        for position, symbol in symbols:
            if value[position] is not symbol:
                return None
        for position, held in bound:
            if not same(held, value[position]):
                return None
        for first, later in repeats:
            if not same(value[first], value[later]):
                return None
        if not new:
            return binding
        extended = dict(binding)
        for var, position in new:
            extended[var] = value[position]
        return extended

    return matched


SMALL = 16  # the most members a bucket holds as a tuple


def _with(bucket: Any, node: Node) -> Any:
    """`bucket` (not empty) with `node` added."""
    cls = type(bucket)
    if cls is ListSet:
        bucket.add(node)
        return bucket
    if cls is tuple:
        return bucket + (node,) if len(bucket) < SMALL else ListSet((*bucket, node))
    return (bucket, node)


def _discard(table: dict, k: Any, node: Node) -> None:
    bucket = table.get(k)
    if bucket is None:
        return
    rest = _without(bucket, node)
    if rest is None:
        del table[k]
    elif rest is not bucket:
        table[k] = rest


def _without(bucket: Any, node: Node) -> Any:
    """`bucket` (not empty) with `node` taken out: None when it was the last."""
    if bucket is node:
        return None
    cls = type(bucket)
    if cls is tuple:
        rest = tuple(n for n in bucket if n is not node)
        return rest[0] if len(rest) == 1 else rest
    if cls is ListSet:
        bucket.discard(node)
        if len(bucket) <= SMALL // 2:  # (not at SMALL: a bucket at the edge would flip)
            return tuple(bucket)
    return bucket


def members(bucket: Any) -> Iterable[Node]:
    if bucket is None:
        return ()
    cls = type(bucket)
    if cls is ListSet or cls is tuple:
        return bucket
    return (bucket,)


def size(bucket: Any) -> int:
    if bucket is None:
        return 0
    cls = type(bucket)
    return len(bucket) if cls is ListSet or cls is tuple else 1


class FunctorIndex:
    """Every stored sentex with one functor, by value at each argument position.

    It keeps no set of all its nodes: the first argument's table holds every node that
    has an argument, so a set beside it would hold each node twice (27-53 bytes a node,
    and a seventh of a reopen's time). A scan of the whole functor (`every`) walks that
    table's buckets, and `bare` holds the nodes with no argument. `negatives` counts its
    negative nodes: while there are none, no atom of it can be stored with both polarities.

    `shapes` holds the nodes with a compound argument (a function term) by (position,
    its functor, its length): a join whose pattern has a function term not yet ground
    there — `(instance ?w (WeekFn ?n ?y))` — finds its candidates in that bucket, not
    among every node of the functor. (SUMO's Merge.kif: one such rule matched each new
    `instance` against all the others, 64 s of a 118 s firing, for no conclusion.)
    """

    __slots__ = ("count", "negatives", "args", "bare", "shapes")

    def __init__(self) -> None:
        self.count = self.negatives = 0
        self.args: list[dict[Any, Any]] = []
        self.bare: Any = None  # a bucket: the nodes with no argument
        self.shapes: dict[tuple[int, Sym, int], Any] = {}

    def every(self) -> Every:
        """Every node of this functor, counted without walking them."""
        return Every(self)

    def narrowest(self, atom: tuple) -> Any:
        """The smallest bucket holding every stored node of `atom` (None: there is none):
        the first of its arguments' buckets that is not a `ListSet` (at most SMALL
        nodes), else the smallest."""
        arity = len(atom) - 1
        if not arity:
            return self.bare
        args = self.args
        if arity > len(args):
            return None
        best: Any = None
        for position in range(arity):
            value = atom[position + 1]
            bucket = args[position].get(value if type(value) is Sym else key(value))
            if type(bucket) is not ListSet:
                return bucket
            if best is None or len(bucket) < len(best):
                best = bucket
        return best


class Every:
    """A functor's nodes, as `FunctorIndex.every` gives them: sized, iterable again.

    In the first argument's table, whose keys come in the order the nodes were made: in
    memory order, near enough. Read by another table's buckets (a class's instances, say)
    a scan of a million nodes jumps about the heap and took four times as long.
    """

    __slots__ = ("_findex",)

    def __init__(self, findex: FunctorIndex) -> None:
        self._findex = findex

    def __len__(self) -> int:
        return self._findex.count

    def __iter__(self) -> Iterator[Node]:
        findex = self._findex
        if findex.bare is not None:
            yield from members(findex.bare)
        if findex.args:
            for bucket in findex.args[0].values():
                if type(bucket) is Node:
                    yield bucket
                else:
                    yield from bucket


class Index:
    """Stored nodes by handle, by functor and argument, and counted by context.

    There is no table by atom: the nodes of one atom (`same_atom`, `find`) are looked for
    in its narrowest argument bucket (`FunctorIndex.narrowest`), which holds them all — at
    a million facts a table by atom was 40 bytes a fact, and a fifth of a reopen's time.
    """

    def __init__(self) -> None:
        self.by_handle: dict[int, Node] = {}
        self.by_functor: dict[Sym, FunctorIndex] = {}
        self.per_context: dict[str, int] = {}
        # atom key -> atom, for the atoms stored with both polarities: where negation
        # clashes can be
        self.two_sided: dict[Any, tuple] = {}

    def link(self, node: Node) -> None:
        self.by_handle[node.handle] = node
        atom = node.atom
        findex = self.by_functor.get(atom[0])
        if findex is None:
            findex = self.by_functor[atom[0]] = FunctorIndex()
        if not node.positive or findex.negatives:
            if not node.positive:
                findex.negatives += 1
            k = node.key
            if k not in self.two_sided and any(
                n.key == k and n.positive is not node.positive
                for n in members(findex.narrowest(atom))
            ):
                self.two_sided[k] = atom
        findex.count += 1
        arity = len(atom) - 1
        args = findex.args
        if not arity:
            findex.bare = node if findex.bare is None else _with(findex.bare, node)
        while len(args) < arity:
            args.append({})
        for position in range(1, len(atom)):
            value = atom[position]
            # (`key` for a symbol, the commonest argument, without the call)
            k = value if type(value) is Sym else key(value)
            table = args[position - 1]
            bucket = table.get(k)
            table[k] = node if bucket is None else _with(bucket, node)
            if type(value) is tuple:
                shape = (position, value[0], len(value))
                bucket = findex.shapes.get(shape)
                findex.shapes[shape] = node if bucket is None else _with(bucket, node)
        self.per_context[node.context] = self.per_context.get(node.context, 0) + 1

    def unlink(self, node: Node) -> None:
        del self.by_handle[node.handle]
        atom = node.atom
        findex = self.by_functor[atom[0]]
        findex.count -= 1
        if not node.positive:
            findex.negatives -= 1
        if len(atom) == 1:
            findex.bare = _without(findex.bare, node)
        for position in range(1, len(atom)):
            value = atom[position]
            _discard(findex.args[position - 1], key(value), node)
            if type(value) is tuple:
                _discard(findex.shapes, (position, value[0], len(value)), node)
        left = self.per_context[node.context] - 1
        if left:
            self.per_context[node.context] = left
        else:
            del self.per_context[node.context]
        if node.key in self.two_sided:
            polarities = {n.positive for n in self.same_atom(atom, node.key)}
            if len(polarities) < 2:
                del self.two_sided[node.key]

    def find(self, atom: tuple, k: Any, context: str, positive: bool) -> Node | None:
        """The stored node of `atom` (whose key, `key_of`, is `k`) in this context and
        polarity, if any."""
        findex = self.by_functor.get(atom[0])
        if findex is None:
            return None
        bucket = findex.narrowest(atom)
        if bucket is None:
            return None
        if type(bucket) is Node:
            found = bucket.key == k and bucket.context == context and bucket.positive is positive
            return bucket if found else None
        for node in bucket:
            if node.context == context and node.positive is positive and node.key == k:
                return node
        return None

    def same_atom(self, atom: tuple, k: Any) -> list[Node]:
        """The stored nodes of `atom` (whose key is `k`), both polarities, every context."""
        findex = self.by_functor.get(atom[0])
        if findex is None:
            return []
        return [n for n in members(findex.narrowest(atom)) if n.key == k]

    def candidates(self, pattern: tuple, binding: dict[Var, Any]) -> Collection[Node]:
        """The smallest indexed superset of the nodes that can match `pattern` (sized:
        its length is a join's cost)."""
        findex = self.by_functor.get(pattern[0])
        if findex is None:
            return ()
        best: Any = None  # (every node of the functor)
        best_size = findex.count
        args = findex.args
        arity = len(pattern) - 1
        if arity > len(args):
            return ()
        for position in range(arity):
            term = pattern[position + 1]
            if type(term) is Var:
                term = binding.get(term, _UNBOUND)
                if term is _UNBOUND:
                    continue
            elif type(term) is tuple and not _ground(term):
                term = substitute(term, binding)
                if not _ground(term):
                    bucket = findex.shapes.get((position + 1, term[0], len(term)))
                    n = size(bucket)
                    if n < best_size:
                        if n == 0:
                            return ()
                        best, best_size = bucket, n
                    continue
            bucket = args[position].get(key(term))
            n = size(bucket)
            if n < best_size:
                if n == 0:
                    return ()
                best, best_size = bucket, n
                if n == 1:
                    break
        return findex.every() if best is None else members(best)

    def with_functor(self, functor: Sym) -> Iterator[Node]:
        findex = self.by_functor.get(functor)
        return iter(findex.every()) if findex else iter(())


def _ground(term: tuple) -> bool:
    if term[0] is QUOTE:
        return True
    for x in term:
        cls = type(x)
        if cls is Var or (cls is tuple and not _ground(x)):
            return False
    return True


Literal = tuple  # (positive: bool, pattern: tuple)
PREPARE_FROM = 32  # candidates from which preparing the match (`matcher`) pays


def accept_all(node: Node, binding: dict) -> dict:
    """The acceptor of `solve` that takes every candidate (stored, believed or not)."""
    return binding


def solve(
    index: Index,
    literals: list[Literal],
    binding: dict[Var, Any],
    accept: Any,
    budget: Any = None,
    admit: Any = None,
) -> Iterator[tuple[dict[Var, Any], tuple[Node, ...]]]:
    """Every way to match all `literals` against stored nodes, joined on shared variables.

    `accept(node, binding)` filters each candidate (belief, context) and may extend the
    binding; it returns the binding to go on with, or None. `admit(node)`, if given, is
    the part of that filter that looks at the node alone: it is asked first, so a node it
    turns away is never matched (matching costs more than the test). Yields the final
    binding and the matched nodes in literal order. The next literal is always the one
    with the fewest candidates under the binding so far. A `budget` (kb.budget.Budget) is
    ticked once per candidate considered, matched or not: a join's work, not its output.
    """
    chosen: list[Node | None] = [None] * len(literals)
    if accept is accept_all:
        accept = None
    return _solve(index, list(enumerate(literals)), binding, accept, admit, chosen, budget)


def _solve(index, pending, binding, accept, admit, chosen, budget):
    if not pending:
        yield binding, tuple(chosen)
        return
    pick = 0
    if len(pending) > 1:
        # each literal's candidates, found once: the fewest are joined next, and a
        # literal with none ends the search before the rest are looked up (a rule's
        # join that cannot succeed was costed literal by literal, then looked up again:
        # most of a SUMO rule check's time)
        found, least = None, 0
        for k, lit in enumerate(pending):
            these = index.candidates(lit[1][1], binding)
            count = len(these)
            if not count:
                return
            if found is None or count < least:
                pick, found, least = k, these, count
    else:
        found = index.candidates(pending[0][1][1], binding)
    position, (positive, pattern) = pending[pick]
    rest = pending[:pick] + pending[pick + 1 :]
    tick = budget.tick if budget is not None else None
    matches = matcher(pattern, binding) if len(found) > PREPARE_FROM else None
    for node in found:
        if tick is not None:
            tick()
        if node.positive is not positive or (admit is not None and not admit(node)):
            continue
        if matches is None:
            extended = match(pattern, node.atom, binding)
        else:
            extended = matches(node.atom)
        if extended is None:
            continue
        if accept is not None:
            extended = accept(node, extended)
            if extended is None:
                continue
        chosen[position] = node
        if rest:
            yield from _solve(index, rest, extended, accept, admit, chosen, budget)
        else:  # the last literal: yield here rather than through one more generator
            yield extended, tuple(chosen)
