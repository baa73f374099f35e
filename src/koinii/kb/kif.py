"""KIF in: a SUO-KIF statement mapped to the Koinii sentences it says, or refused by name.

A reader, not a second engine: what KIF says that Koinii's rules can say is rewritten
into them, soundly; the rest is refused with a kind that names the construct and says
what to write instead. The tokens (`=>` read as `implies`, `<=>` as `terms.IFF`, a
quantifier's `(?X ?Y)` variable list, `@ROW` refused `row-variable`) are read by
`terms` with `kif=True`; this module gives them their meaning:

- `(=> A C)` is the rule `(implies A C)`; KIF's free variables are universal, as a rule's.
- `(<=> A B)` is both rules, `(implies A B)` and `(implies B A)`; a direction that cannot
  be read is refused alone, the other still loads.
- `(forall (?X) S)` around a statement or a conclusion is dropped: a rule's variables are
  universal already. In an antecedent it is not a Horn rule: `nested-quantifier`.
- `(exists (?Y) B)` in an antecedent is B with ?Y renamed apart: "if some ?Y makes B
  true then C" is "for every ?Y, if B then C" when ?Y is nowhere else. As a statement or
  in a conclusion it asserts an unnamed individual, which Koinii's forward rules do not
  invent: `existential`. Under `not`, or inside a sentence's argument: `nested-quantifier`.
- A rule's conclusion may nest: `(=> A (=> B C))` is `(implies (and A B) C)`, and
  `(=> A (and B C))` one rule per conjunct.

What remains is checked as any sentence is (`or` refused by name, a variable in a fact
`not-ground`, a conclusion's unbound variable `not-range-restricted`).
"""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.terms import IFF, Sym, Term, Var, show, statements, substitute

__all__ = ["read_sentences", "translate"]

IMPLIES = Sym("implies")
AND = Sym("and")
NOT = Sym("not")
FORALL = Sym("forall")
EXISTS = Sym("exists")
_QUANTIFIERS = (FORALL, EXISTS)


def translate(term: Term) -> list[Term | Refused]:
    """The Koinii sentences one KIF statement says, in order: one for a fact or a rule,
    two for `<=>` (or one and the refusal of the direction that cannot be read), more
    for a rule whose conclusion is a conjunction. Raises `Refused` for a statement none
    of which can be read."""
    fresh = _Fresh(term)
    body = _drop_forall(term)
    if type(body) is not tuple:
        return [body]
    functor = body[0]
    if functor is IFF:
        left, right = _operands(body, "<=>")
        said: list[Term | Refused] = []
        for a, c in ((left, right), (right, left)):
            try:
                said.extend(_rules(a, c, fresh))
            except Refused as refusal:
                said.append(refusal)
        if all(isinstance(s, Refused) for s in said):
            raise said[0]  # type: ignore[misc]
        return said
    if functor is IMPLIES:
        return list(_rules(*_operands(body, "=>"), fresh))
    if functor is EXISTS:
        raise _existential(body, "a statement")
    _plain(body)
    return [body]


def read_sentences(
    text: str, kif: bool, problems: list[dict[str, Any]]
) -> list[tuple[int, int, Term]]:
    """Every sentence of `text` with the line and column of its statement (a KIF
    statement's each, `kif` true); each statement or direction that does not read is
    appended to `problems` instead, `{line, column, kind, message}`."""
    read: list[tuple[int, int, Term]] = []
    for line, column, term in statements(text, kif=kif):
        if isinstance(term, Refused):
            problems.append(_problem(line, column, term.kind, term.message))
            continue
        if not kif:
            read.append((line, column, term))
            continue
        try:
            said = translate(term)
        except Refused as refusal:
            said = [refusal]
        for sentence in said:
            if isinstance(sentence, Refused):
                message = f"{sentence.message} (line {line}, column {column})"
                problems.append(_problem(line, column, sentence.kind, message))
            else:
                read.append((line, column, sentence))
    return read


def _problem(line: int, column: int, kind: str, message: str) -> dict[str, Any]:
    return {"line": line, "column": column, "kind": kind, "message": message}


def _rules(antecedent: Term, consequent: Term, fresh: _Fresh) -> list[Term]:
    body = _antecedent(antecedent, fresh)
    rules: list[Term] = []
    for extra, conclusion in _conclusions(consequent, fresh):
        parts = body + extra
        premise = parts[0] if len(parts) == 1 else (AND, *parts)
        rules.append((IMPLIES, premise, conclusion))
    return rules


def _antecedent(term: Term, fresh: _Fresh) -> list[Term]:
    """The literals of an antecedent: conjunctions flattened, existentials opened."""
    if type(term) is not tuple:
        return [term]
    functor = term[0]
    if functor is AND:
        return [literal for part in term[1:] for literal in _antecedent(part, fresh)]
    if functor is EXISTS:
        names, body = _quantified(term)
        return _antecedent(substitute(body, {v: fresh(v) for v in names}), fresh)
    if functor is FORALL:
        raise _nested(
            term,
            "in a rule's antecedent (a condition that must hold for every "
            "value is not a rule Koinii can fire)",
        )
    _plain(term)
    return [term]


def _conclusions(term: Term, fresh: _Fresh) -> list[tuple[list[Term], Term]]:
    """(extra antecedents, one conclusion) for each conclusion a consequent holds."""
    term = _drop_forall(term)
    if type(term) is not tuple:
        return [([], term)]
    functor = term[0]
    if functor is AND:
        return [c for part in term[1:] for c in _conclusions(part, fresh)]
    if functor is IMPLIES:
        inner, consequent = _operands(term, "=>")
        extra = _antecedent(inner, fresh)
        return [(extra + more, c) for more, c in _conclusions(consequent, fresh)]
    if functor is IFF:
        left, right = _operands(term, "<=>")
        said = []
        for a, c in ((left, right), (right, left)):
            extra = _antecedent(a, fresh)
            said += [(extra + more, x) for more, x in _conclusions(c, fresh)]
        return said
    if functor is EXISTS:
        raise _existential(term, "a rule's conclusion")
    _plain(term)
    return [([], term)]


def _plain(term: tuple) -> None:
    """Refuse a KIF form left inside a sentence, where no rewriting reaches it."""
    if term[0] is IFF:
        raise Refused(
            "not-well-formed",
            f"`<=>` cannot stand here ({show_kif(term)}): state each direction as a rule "
            "of its own",
            {"sentence": show_kif(term)},
        )
    for arg in term:
        if type(arg) is tuple:
            if arg[0] in _QUANTIFIERS:
                raise _nested(arg, "inside a sentence")
            _plain(arg)
    if type(term[0]) is not Sym:
        raise Refused(
            "variable-predicate",
            f"({term[0]} …) has a variable where its predicate goes, which Koinii's "
            "rules do not match (a list of ?variables follows forall or exists, nowhere "
            "else): write the rule once for each predicate it is meant for",
            {"variable": str(term[0]), "sentence": show_kif(term)},
        )


def _drop_forall(term: Term) -> Term:
    while type(term) is tuple and term[0] is FORALL:
        term = _quantified(term)[1]
    return term


def _quantified(term: tuple) -> tuple[tuple[Var, ...], Term]:
    names = term[1] if len(term) == 3 else None
    if type(names) is not tuple or not all(type(v) is Var for v in names):
        raise Refused(
            "shape",
            f"({term[0].name} …) takes a list of ?variables and one sentence, e.g. "
            f"({term[0].name} (?x ?y) (knows ?x ?y)); not {show_kif(term)}",
            {"sentence": show_kif(term)},
        )
    return names, term[2]


def _operands(term: tuple, name: str) -> tuple[Term, Term]:
    if len(term) != 3:
        raise Refused(
            "not-well-formed",
            f"`{name}` takes two sentences, not {len(term) - 1}: {show_kif(term)}",
            {"sentence": show_kif(term)},
        )
    return term[1], term[2]


def _existential(term: tuple, where: str) -> Refused:
    return Refused(
        "existential",
        f"(exists …) as {where} says some individual exists without naming it, which "
        "Koinii does not do (its rules conclude about the individuals they are given): "
        "name the individual and state the claim about it, or in a rule conclude about a "
        "function term of the rule's variables, e.g. (=> (instance ?x Human) "
        "(mother ?x (MotherFn ?x)))",
        {"sentence": show_kif(term)},
    )


def _nested(term: tuple, where: str) -> Refused:
    name = term[0].name
    return Refused(
        "nested-quantifier",
        f"({name} …) {where} cannot be read as a fact or a rule: a rule's ?variables are "
        "universal already, and an (exists …) is read only around a rule's conditions; "
        "restate it as a rule (=> conditions conclusion) without the quantifier",
        {"quantifier": name, "sentence": show_kif(term)},
    )


def show_kif(term: Term) -> str:
    """`term` printed for a message (the KIF tokens `show` does not know included)."""
    if type(term) is tuple:
        return "(" + " ".join(show_kif(x) for x in term) + ")"
    if term is IFF:
        return "<=>"
    return show(term)


class _Fresh:
    """New variables for a statement, named apart from every variable it holds."""

    def __init__(self, term: Term) -> None:
        self.taken: set[str] = set()
        self._collect(term)

    def _collect(self, term: Term) -> None:
        if type(term) is Var:
            self.taken.add(term.name)
        elif type(term) is tuple:
            for x in term:
                self._collect(x)

    def __call__(self, var: Var) -> Var:
        n = 1
        while f"{var.name}_{n}" in self.taken:
            n += 1
        name = f"{var.name}_{n}"
        self.taken.add(name)
        return Var(name)
