"""Declarations belong to who declares them, and the system's predicates to the system.

A declaration (`arity`, `functional`, `singleValued`, `carriesClaim`, `speechAct`,
`target_following_predicate`) changes how the writes of the contexts that see it are
read. An agent may declare the predicates of its own, in its own context (docs/security.md,
the non-interference property); the predicates of the system's vocabulary — `genlCx`,
`agentContext`, the speech acts, the declarations themselves, the registry's rows, a
dispute's marks — are declared once, by the vocabulary an operator loads, and an agent's
declaration of one is refused `koinii/system-vocabulary`.
"""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.terms import Sym, Var, show

_NOT = Sym("not")
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
    from koinii.identity import SYSTEM_CONTEXTS  # (this module is imported by it, lazily)

    for ctx in sorted(SYSTEM_CONTEXTS - {"CxEverything"}):
        if store.sentexes_matching((_ARITY, predicate, Var("n")), ctx):
            return ctx
    return None


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
