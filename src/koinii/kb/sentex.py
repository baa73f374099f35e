"""Sentexes as the engine holds them (`Node`, `Justification`) and as readers see them.

A `Node` is the one in-memory record of a stored sentex: the positive atom, its canonical
text, the context, polarity, whether it was asserted (a premise) and with what strength,
its provenance, the justifications that derive it, and the belief flags the labeller
keeps. Readers never get a Node: they get a frozen `Sentex` snapshot, so nothing outside
the engine can change belief by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from sys import intern
from typing import Any

from koinii.terms import Sym, Term, parse, show

NOT = Sym("not")
DEFAULT, MONOTONIC = 0, 1
STRENGTHS = {"default": DEFAULT, "monotonic": MONOTONIC}
STRENGTH_NAMES = ("default", "monotonic")
MAX_HANDLE = 2**63 - 1  # handles live in a store's signed 64-bit column


class Node:
    """One stored sentex (engine-internal, mutable, identity-hashed)."""

    __slots__ = (
        "handle",
        "atom",  # the sentence without `not`
        "text",  # canonical text of `atom`
        "context",
        "positive",
        "premise",  # asserted by a writer (else it exists only by derivation)
        "strength",  # the premise's strength (DEFAULT / MONOTONIC)
        "creator",
        "created",  # epoch ms
        "extra",  # other provenance fields, or None
        "justs",  # justifications concluding this node: None, a list, or a dict (a set)
        "uses",  # justifications this node is an antecedent (or the rule) of, likewise
        "believed",
        "mono",  # believed at monotonic strength
        "defeated",
    )

    def __init__(
        self,
        handle: int,
        atom: tuple,
        text: str,
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
        self.text = text
        self.context = intern(context)  # a few contexts, a million nodes: one str each
        self.positive = positive
        self.premise = premise
        self.strength = strength
        self.creator = creator
        self.created = created
        self.extra = extra
        self.justs: list[Justification] | dict[Justification, None] | None = None
        self.uses: list[Justification] | dict[Justification, None] | None = None
        self.believed = False
        self.mono = False
        self.defeated = False

    @property
    def full_text(self) -> str:
        return self.text if self.positive else "(not " + self.text + ")"

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
    """`conclusion` holds while `rule` and every antecedent are believed and unmasked."""

    __slots__ = ("id", "conclusion", "rule", "antecedents")

    def __init__(self, id: int, conclusion: Node, rule: Node, antecedents: tuple[Node, ...]):
        self.id = id
        self.conclusion = conclusion
        self.rule = rule
        self.antecedents = antecedents

    def supports(self) -> tuple[Node, ...]:
        """What the conclusion rests on: the rule and the antecedents."""
        return (self.rule, *self.antecedents)


def node_of(row: Any) -> Node:
    """The Node of a stored sentex row (a store's `SentexRow`): its sentence parsed back
    from its canonical text, nothing checked again (it was checked when it was written)."""
    return Node(
        row.handle,
        parse(row.text),
        row.text,
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
