"""Declarations belong to who declares them, and the system's sentences to the system.

A declaration (`arity`, `functional`, `singleValued`, `carriesClaim`, `speechAct`,
`target_following_predicate`) changes how the writes of the contexts that see it are
read. An agent may declare the predicates of its own, in its own context (docs/security.md,
the non-interference property); the predicates of the system's vocabulary — `genlCx`,
`agentContext`, the speech acts, the declarations themselves, the registry's rows, a
dispute's marks — are declared once, by the vocabulary an operator loads, and an agent's
declaration of one is refused `koinii/system-vocabulary`.

Nor does an agent deny a sentence of the system's vocabulary — by a claim, a rule's
conclusion, the claim an answer carries, or any sentence it quotes (a `carriesClaim` of
its own would carry it): `(not (disputes AgentBoreas (sentexHandle
7)))` in an agent's own context listed Boreas's dispute (and its ballots, questions,
answers) as a contradiction in every channel the agent was in, for a majority to rule
against. A move is taken back by its speaker's `withdraw` and challenged by `dispute`
(`koinii/use-the-move`); an ownership mark is the join's (`koinii/foreign-mark`); any
other system sentence is the system's (`koinii/system-vocabulary`).
"""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.identity.names import SYSTEM_CONTEXTS
from koinii.kb.rules import UNDERIVABLE
from koinii.speech import ACTS
from koinii.terms import Sym, Var, quoted, show

_NOT = Sym("not")
_QUERIES = Sym("queries")
_AND = Sym("and")
_IMPLIES = Sym("implies")
_ARITY = Sym("arity")
# The declarations: each changes how the writes of the contexts that see it are read.
DECLARATIONS = frozenset(
    Sym(name)
    for name in (
        "arity",
        "functional",
        "singleValued",
        "carriesClaim",
        "speechAct",
        "target_following_predicate",
    )
)


def system_declarer(store: Any, predicate: Sym) -> str | None:
    """The system context whose vocabulary declares `predicate` (its `arity` is there:
    `genlCx`, `agentContext`, the speech acts, the declarations themselves, the registry's
    rows, a dispute's marks), or None for a predicate of the agents' own."""
    for ctx in sorted(SYSTEM_CONTEXTS - {"CxEverything"}):
        if store.sentexes_matching((_ARITY, predicate, Var("n")), ctx):
            return ctx
    return None


def check_system_sentences(store: Any, agent: str, sentence: Any) -> None:
    """Refuse an agent's declaration of a system predicate, or its denial of a system
    sentence (the module docstring)."""
    for carried in quoted_sentences(sentence):  # an answer's claim is its author's claim too
        if carried[0] is _NOT and len(carried) == 2:
            check_system_sentences(store, agent, carried)
    if sentence[0] is _NOT and len(sentence) == 2 and type(sentence[1]) is tuple:
        if sentence[1][0] not in DECLARATIONS:  # (a declaration's own check names it)
            _check_denial(store, agent, sentence[1])
    elif sentence[0] is _IMPLIES and len(sentence) == 3:  # what the rule would conclude
        for literal in conclusions(sentence[2]):
            denied = literal[1] if literal[0] is _NOT and len(literal) == 2 else None
            # (an underivable conclusion the engine refuses itself: koinii/underivable)
            if type(denied) is tuple and denied and denied[0] not in UNDERIVABLE:
                _check_denial(store, agent, denied)
    check_not_system_vocabulary(store, agent, sentence)


def quoted_sentences(sentence: Any) -> list[tuple]:
    """The sentences `sentence` quotes as arguments, at any depth of quoting, its
    conclusions' if it is a rule: each a claim where a `(carriesClaim P N)` is seen — an
    answer's, or one an agent declared for a predicate of its own, which carried a denial
    of another agent's dispute (and a move, `moves.check_not_a_move`)."""
    if type(sentence) is not tuple or not sentence or sentence[0] is _QUERIES:
        return []  # (a question's pattern is asked, never carried)
    rule = sentence[0] is _IMPLIES and len(sentence) == 3
    found = []
    for literal in conclusions(sentence[2]) if rule else [sentence]:
        for argument in literal[1:]:
            if quoted(argument) and type(argument[1]) is tuple and argument[1]:
                found += [argument[1], *quoted_sentences(argument[1])]
    return found


def conclusions(consequent: Any) -> list[tuple]:
    """The literals a rule's consequent concludes: each conjunct of an `(and …)`, else it."""
    if type(consequent) is not tuple or not consequent:
        return []
    if consequent[0] is _AND:
        return [c for c in consequent[1:] if type(c) is tuple and c]
    return [consequent]


def _check_denial(store: Any, agent: str, atom: tuple) -> None:
    denied = f"(not {show(atom)})"
    if atom and atom[0] in ACTS:
        raise Refused(
            "koinii/use-the-move",
            f"{agent} may not write {denied}: it denies a move, which only its speaker takes "
            f"back (withdraw(handle)); to challenge another's move, dispute(handle) it",
            {"move": "withdraw" if _speaker(atom) == agent else "dispute", "kind": ACTS[atom[0]]},
        )
    if atom and atom[0] is Sym("agentContext"):
        raise Refused(
            "koinii/foreign-mark",
            f"{agent} may not write {denied}: an ownership mark is the join's, and no agent "
            "denies one; claim facts instead",
            {"agent": agent, "mark": denied},
        )
    declarer = system_declarer(store, atom[0]) if atom and type(atom[0]) is Sym else None
    if declarer is not None:
        raise Refused(
            "koinii/system-vocabulary",
            f"{agent} may not write {denied}: {atom[0].name} is the system's vocabulary, "
            f"declared in {declarer}, and its sentences are the system's to write and "
            "retract; deny a claim of an agent's instead (dispute it)",
            {"agent": agent, "predicate": atom[0].name, "declared_in": declarer},
        )


def _speaker(atom: tuple) -> str | None:
    return atom[1].name if len(atom) > 1 and type(atom[1]) is Sym else None


def check_not_system_vocabulary(store: Any, agent: str, sentence: Any) -> None:
    """Refuse an agent's declaration about a predicate of the system's vocabulary:
    `(functional genlCx)` in an agent's own context made every channel it was in list its
    members' placements as a dispute of differing values, and `(arity queries 1)` listed
    the vocabulary's own declaration as contested, beside everyone's questions. The
    system's predicates are declared once, by the vocabulary an operator loads; an
    agent declares the predicates of its own."""
    atom = sentence[1] if sentence[0] is _NOT and len(sentence) == 2 else sentence
    if type(atom) is not tuple or len(atom) < 2 or atom[0] not in DECLARATIONS:
        return
    predicate = atom[1]
    declarer = system_declarer(store, predicate) if type(predicate) is Sym else None
    if declarer is not None:
        raise Refused(
            "koinii/system-vocabulary",
            f"{agent} may not declare {show(atom)}: {predicate.name} is the system's "
            f"vocabulary, declared once in {declarer}, and a declaration of it would change "
            "how every agent's writes of it are read; declare a predicate of your own",
            {"agent": agent, "predicate": predicate.name, "declared_in": declarer},
        )
