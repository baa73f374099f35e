"""Sentexes as the engine holds them (`Node`, `Justification`) and as readers see them.

A `Node` is the one in-memory record of a stored sentex: the positive atom, its key (see
`key_of`), the context, polarity, whether it was asserted (a premise) and with what strength,
its provenance, the justifications that derive it, and the belief flags the labeller
keeps. Readers never get a Node: they get a frozen `Sentex` snapshot, so nothing outside
the engine can change belief by accident. What holds many of them, or many
justifications, holds them in a `ListSet`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from sys import intern
from typing import Any

from koinii.terms import MAX_TEXT, Sym, Term, parse, show

NOT = Sym("not")
DEFAULT, MONOTONIC = 0, 1
STRENGTHS = {"default": DEFAULT, "monotonic": MONOTONIC}
STRENGTH_NAMES = ("default", "monotonic")
MAX_HANDLE = 2**63 - 1  # handles live in a store's signed 64-bit column


def key_of(atom: tuple, text: str | None = None) -> tuple | str:
    """What tells `atom` apart from every other atom, as a dict key: the atom itself, or
    its canonical text (`text`, or shown here) where it holds a float or a bool — Python
    calls `1`, `1.0` and `True` equal, so `(p 1)` and `(p 1.0)` would be one tuple key
    and are two sentences. A node keeps its key, not its text: the tuple is there anyway,
    a text is ~70 more bytes a sentex (and is shown again when asked for).

    Refuses (kind `shape`) an atom past the limits, as `show` does: a rule's conclusion is
    built from bound values and checked here."""
    if text is None:  # not shown yet, so not checked against the limits either
        for x in atom:
            if type(x) is not Sym:
                return key_of(atom, show(atom))
        # n symbols show in at most n * (longest name + 1) + 1 characters: most atoms
        # are known short without their names read (a closure keys a million; symbol
        # names are ASCII: their length is their bytes)
        if (
            len(atom) * (Sym.longest + 1) > MAX_TEXT
            and len(atom) + sum([len(x.name) for x in atom]) > MAX_TEXT
        ):
            show(atom)  # refuses, saying how long
        return atom
    return atom if _plain(atom) else text


def text_of_key(key: tuple | str) -> str:
    """The canonical text of the atom whose key (`key_of`) is `key`."""
    return key if type(key) is str else show(key)


def _plain(term: tuple) -> bool:
    for x in term:
        cls = type(x)
        if cls is float or cls is bool or (cls is tuple and not _plain(x)):
            return False
    return True


class Node:
    """One stored sentex (engine-internal, mutable, identity-hashed)."""

    __slots__ = (
        "handle",
        "atom",  # the sentence without `not`
        "key",  # `key_of(atom)`: the atom, or its canonical text
        "context",
        "positive",
        "premise",  # asserted by a writer (else it exists only by derivation)
        "strength",  # the premise's strength (DEFAULT / MONOTONIC)
        "creator",
        "created",  # epoch ms
        "extra",  # other provenance fields, or None
        "justs",  # justifications concluding this node: None, a tuple, or a `ListSet`
        # (maintenance.py: a list past 64 entries)
        "uses",  # justifications this node is an antecedent of (or the carriesClaim
        # declaration of), likewise; a rule's are not kept (maintenance.py, `firings_of`)
        "believed",
        "mono",  # believed at monotonic strength
        "defeated",
        "elided",  # derived again by a rule it holds a justification of, and that
        # derivation not kept (firing.py, `_derive`): `Maintenance.rederive_elided`
        # finds what it elided when its justifications are asked for all
    )

    def __init__(
        self,
        handle: int,
        atom: tuple,
        key: tuple | str,
        context: str,
        positive: bool,
        premise: bool,
        strength: int,
        creator: str | None,
        created: int,
        extra: dict[str, Any] | None,
    ) -> None:
        self.handle = handle
        self.atom = atom
        self.key = key
        self.context = intern(context)  # a few contexts, a million nodes: one str each
        self.positive = positive
        self.premise = premise
        self.strength = strength
        self.creator = creator
        self.created = created
        self.extra = extra
        self.justs: tuple[Justification, ...] | list[Justification] | None = None
        self.uses: tuple[Justification, ...] | list[Justification] | None = None
        self.believed = False
        self.mono = False
        self.defeated = False
        self.elided = False

    # A node that a write added and left believed is that write's change as it stands
    # (feed.py `Change`'s fields, with no reason and no mask): the commonest change by
    # far, and a write deriving a quarter of a million sentexes would otherwise hold a
    # Change and a shown text for each from labelling to commit.
    reason = None
    hidden_in = None

    @property
    def public(self) -> dict[str, Any]:
        """The node as an added change: `{handle, sentence, context}` (`Event`)."""
        return {"handle": self.handle, "sentence": self.full_text, "context": self.context}

    @property
    def text(self) -> str:
        """The canonical text of `atom`."""
        return text_of_key(self.key)

    @property
    def full_text(self) -> str:
        text = text_of_key(self.key)
        return text if self.positive else "(not " + text + ")"

    @property
    def sentence(self) -> Term:
        return self.atom if self.positive else (NOT, self.atom)

    def provenance(self) -> dict[str, Any]:
        prov: dict[str, Any] = {"creator": self.creator, "created": self.created}
        if self.extra:
            for key, value in self.extra.items():
                prov.setdefault(key, value)
        return prov

    def effective_strength(self) -> str:
        if self.mono or (self.premise and self.strength == MONOTONIC):
            return "monotonic"
        return "default"

    def __repr__(self) -> str:
        return f"<Node {self.handle} {self.full_text} in {self.context}>"


class Justification:
    """`conclusion` holds while `rule` and every antecedent are believed and unmasked.

    The antecedents are kept in two fields rather than a tuple of their own: a rule has
    one or two antecedents far more often than more, and a closure keeps hundreds of
    thousands of justifications (a tuple of their own is 72 bytes, one field more is 8).
    `first` and `second` are the two, or `second` is None for one; past two, `first` is
    the tuple of them and `second` is MANY.
    """

    __slots__ = ("id", "conclusion", "rule", "first", "second")

    def __init__(self, id: int, conclusion: Node, rule: Node, antecedents: tuple[Node, ...]):
        self.id = id
        self.conclusion = conclusion
        self.rule = rule
        count = len(antecedents)
        if count == 2:
            self.first, self.second = antecedents
        elif count == 1:
            self.first, self.second = antecedents[0], None
        else:
            self.first, self.second = antecedents, MANY

    @property
    def antecedents(self) -> tuple[Node, ...]:
        second = self.second
        if second is None:
            return (self.first,)
        if second is MANY:
            return self.first
        return (self.first, second)

    def supports(self) -> tuple[Node, ...]:
        """What the conclusion rests on: the rule and the antecedents."""
        return (self.rule, *self.antecedents)


MANY: Any = object()  # a Justification's `second` when it has more than two antecedents


class ListSet(list):
    """A set of engine objects held as a list (8 bytes an entry), with a map from entry
    to place made at the first removal that is not of the last entry, so that each
    removal after it costs the same whatever the size (a removal moves the last entry
    into the gap: the order is not kept, and nothing reads it).

    What holds many nodes or justifications and must let one go at once: a node's
    `justs` and `uses` past 64 (maintenance.py), an index bucket past 16 (index.py). A
    dict or a set did both at 38-58 bytes an entry: over SUMO the inheritance axiom's
    772,000 justifications in `uses` past 64 were 29 MB of its peak, the index's 360,000
    nodes in buckets past 16 another 21; and the big writes, which only add, never
    remove. Removing entries one by one from a list alone would be quadratic
    (retracting what rests on a class's subclass statement); the map keeps it linear
    once a removal needs it.
    """

    __slots__ = ("places",)

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.places: dict[Any, int] | None = None

    def __reduce__(self) -> tuple:
        return (ListSet, (), None, iter(self))  # (`places` is remade when needed)

    def add(self, item: Any) -> None:
        if self.places is not None:
            self.places[item] = len(self)
        self.append(item)

    def discard(self, item: Any) -> None:
        """Take `item` out (it is held)."""
        places = self.places
        if places is None:
            if self[-1] is item:  # (an undo takes out the last added first)
                self.pop()
                return
            places = self.places = {x: i for i, x in enumerate(self)}
        at = places.pop(item)
        last = self.pop()
        if last is not item:
            self[at] = last
            places[last] = at


def node_of(row: Any) -> Node:
    """The Node of a stored sentex row (a store's `SentexRow`): its sentence parsed back
    from its canonical text, nothing checked again (it was checked when it was written)."""
    atom = parse(row.text)
    return Node(
        row.handle,
        atom,
        key_of(atom, row.text),
        row.context,
        row.positive,
        row.premise,
        row.strength,
        row.creator,
        row.created,
        row.extra,
    )


def justification_of(row: Any, by_handle: dict[int, Node]) -> Justification:
    """The Justification of a stored row (a `JustificationRow`), over the nodes it names."""
    return Justification(
        row.id,
        by_handle[row.conclusion],
        by_handle[row.rule],
        tuple(by_handle[h] for h in row.antecedents),
    )


@dataclass(frozen=True)
class Sentex:
    """A read-only snapshot of one stored sentex."""

    handle: int
    sentence: Term
    context: str
    polarity: bool  # True for a positive sentence, False for `(not …)`
    strength: str
    provenance: dict[str, Any] = field(compare=False)
    believed: bool
    derived: bool  # exists only by derivation (never asserted)

    @property
    def text(self) -> str:
        return show(self.sentence)

    @classmethod
    def of(cls, node: Node) -> Sentex:
        return cls(
            handle=node.handle,
            sentence=node.sentence,
            context=node.context,
            polarity=node.positive,
            strength=node.effective_strength(),
            provenance=node.provenance(),
            believed=node.believed,
            derived=not node.premise,
        )
