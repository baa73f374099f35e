"""Forward rules: `(implies A C)` compiled into literals the join can run.

Invariant: a compiled `Rule` is range-restricted (every consequent variable occurs in an
antecedent) and its consequent is one literal — a conjunctive consequent is split into one
rule sentence per conjunct before anything is stored, so each stored rule sentex derives
exactly one kind of conclusion.
"""

from __future__ import annotations

from koinii.errors import Refused
from koinii.kb import joins
from koinii.kb.index import Literal
from koinii.kb.sentex import NOT
from koinii.terms import CONNECTIVES, QUOTE, Sym, Term, Var, show, unsupported_connective, variables

IMPLIES = Sym("implies")
AND = Sym("and")
GENL_CX = Sym("genlCx")
EXCEPT = Sym("except")
SENTEX_HANDLE = Sym("sentexHandle")
CARRIES_CLAIM = Sym("carriesClaim")
RESERVED = frozenset({NOT, AND, IMPLIES, GENL_CX, EXCEPT, SENTEX_HANDLE, QUOTE})
# A rule may not conclude these: the hierarchy, masks and rules are never derived, so
# belief can be computed over a fixed hierarchy and a fixed set of rules.
NOT_DERIVABLE = frozenset({NOT, AND, IMPLIES, GENL_CX, EXCEPT, SENTEX_HANDLE, QUOTE})
# Nor these, the system's own sentences, each written by one named operation: a derived
# one would let an agent's rule decide who owns what, what sees what, or how everyone's
# writes are read (docs/security.md, non-interference). Refused `koinii/underivable` at
# write time (refused at load too would strand an old store: a stored one fires only in
# its own context, and `identity.owners_of` counts no derived mark); each says what
# writes it instead. (`genlCx` is refused with the structural ones above.)
UNDERIVABLE: dict[Sym, str] = {
    Sym("agentContext"): "an ownership mark is written by join, for the joining agent alone",
    Sym("arity"): "declarations are vocabulary, loaded by an operator",
    Sym("functional"): "declarations are vocabulary, loaded by an operator",
    Sym("singleValued"): "declarations are vocabulary, loaded by an operator",
    Sym("target_following_predicate"): "declarations are vocabulary, loaded by an operator",
    CARRIES_CLAIM: "declarations are vocabulary, loaded by an operator",
    Sym("speechAct"): "declarations are vocabulary, loaded by an operator",
    Sym("registeredAgent"): "registry rows are written by an admin (register_agent)",
    Sym("displayNameOf"): "registry rows are written by an admin (register_agent)",
    Sym("trustLevel"): "registry rows are written by an admin (set_trust)",
    Sym("disputeNotified"): "a dispute's lifecycle marks are written by the daemon",
    Sym("disputeStale"): "a dispute's lifecycle marks are written by the daemon",
}


def refuse_underivable(atom: tuple, what: str, sentence: str) -> None:
    """Refuse `atom` as the conclusion of `what` (a rule, a carried claim) if it is one of
    the system's own sentences (`UNDERIVABLE`)."""
    why = UNDERIVABLE.get(atom[0])
    if why is not None:
        name = atom[0].name
        raise Refused(
            "koinii/underivable",
            f"{what} cannot conclude ({name} …): {why}, never derived by a rule; "
            "conclude a predicate of your own instead",
            {"predicate": name, "sentence": sentence},
        )


class Rule:
    """A stored rule: antecedent literals and one consequent literal, with one prepared
    join per antecedent (joins.py). Pickled as its literals alone: the joins are made
    again when it is read back."""

    __slots__ = ("antecedents", "consequent", "joins")

    def __init__(self, antecedents: tuple[Literal, ...], consequent: Literal) -> None:
        self.antecedents = antecedents  # (positive, atom pattern) each
        self.consequent = consequent
        self.joins = joins.prepare(antecedents, consequent)

    def __reduce__(self) -> tuple:
        return (Rule, (self.antecedents, self.consequent))


def literal(term: Term, what: str) -> tuple[bool, tuple]:
    """`(not X)` → (False, X); `X` → (True, X); refuse what is not a literal."""
    positive = True
    if type(term) is tuple and term[0] is NOT:
        if len(term) != 2 or type(term[1]) is not tuple:
            raise Refused("not-well-formed", f"`not` takes one sentence in {what}", {})
        positive, term = False, term[1]
        if term[0] is NOT:
            raise Refused("not-well-formed", f"double negation in {what}", {})
    if type(term) is not tuple:
        raise Refused("not-well-formed", f"{what} must be a sentence, not {show(term)}", {})
    if term[0] in (AND, IMPLIES):
        raise Refused("not-well-formed", f"`{term[0].name}` cannot be nested in {what}", {})
    if type(term[0]) is Sym and term[0].name in CONNECTIVES:
        raise unsupported_connective(term[0].name)
    return positive, term


def split(sentence: tuple) -> list[tuple]:
    """One rule sentence per conjunct of the consequent (the sentence itself if one)."""
    if len(sentence) != 3:
        raise Refused(
            "not-well-formed",
            "`implies` takes an antecedent and a consequent",
            {"sentence": show(sentence)},
        )
    consequent = sentence[2]
    if type(consequent) is tuple and consequent[0] is AND:
        if len(consequent) < 2:
            raise Refused("not-well-formed", "`and` needs at least one conjunct", {})
        return [(IMPLIES, sentence[1], conjunct) for conjunct in consequent[1:]]
    return [sentence]


def compile_rule(sentence: tuple) -> Rule:
    """Check and compile one (already split) rule sentence."""
    antecedent = sentence[1]
    if type(antecedent) is tuple and antecedent[0] is AND:
        if len(antecedent) < 2:
            raise Refused("not-well-formed", "`and` needs at least one conjunct", {})
        parts = antecedent[1:]
    else:
        parts = (antecedent,)
    antecedents = tuple(literal(part, "a rule's antecedent") for part in parts)
    consequent = literal(sentence[2], "a rule's consequent")
    if consequent[1][0] in NOT_DERIVABLE:
        raise Refused(
            "not-well-formed",
            f"a rule cannot conclude `{consequent[1][0].name}`",
            {"sentence": show(sentence)},
        )
    bound = {v for _, atom in antecedents for v in variables(atom)}
    unbound = [v for v in variables(consequent[1]) if v not in bound]
    if unbound:
        names = ", ".join(v.text for v in unbound)
        raise Refused(
            "not-range-restricted",
            f"the consequent uses {names}, which no antecedent binds",
            {"variables": [v.text for v in unbound], "sentence": show(sentence)},
        )
    return Rule(antecedents, consequent)


def is_rule(atom: tuple) -> bool:
    return atom[0] is IMPLIES


__all__ = ["Rule", "compile_rule", "split", "literal", "is_rule", "Var"]
