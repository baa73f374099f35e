"""The registry (`CxRegistry`): the agents an admin registered, their display names and
trust levels, written by a verified admin only.
"""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.identity.boundaries import write_options
from koinii.identity.contexts import REGISTRY, context_for
from koinii.identity.grants import Principal
from koinii.terms import Sym


def register_agent(store: Any, admin: Principal, agent_id: str, name: str, trust: float) -> None:
    """Write the registry rows of an agent (admin only), in one edit."""
    context_for(agent_id)  # the id must be an id
    rows = [
        (Sym("registeredAgent"), Sym(agent_id)),
        (Sym("displayNameOf"), Sym(agent_id), name),
        (Sym("trustLevel"), Sym(agent_id), trust),
    ]
    store.edit(add=[(row, REGISTRY, write_options(admin, REGISTRY, row)) for row in rows])


def set_trust(store: Any, admin: Principal, agent_id: str, value: float) -> None:
    """Replace the agent's trust level: the old rows go and the new one lands, in one edit."""
    row = (Sym("trustLevel"), Sym(agent_id), value)
    options = write_options(admin, REGISTRY, row)
    old = [s.handle for s in store.sentexes_matching(f"(trustLevel {agent_id} ?t)", REGISTRY)]
    store.edit(add=[(row, REGISTRY, options)], remove=old)


def _single(store: Any, predicate: str, agent_id: str) -> Any:
    rows = store.sentexes_matching(f"({predicate} {agent_id} ?v)", REGISTRY)
    if len(rows) > 1:
        raise Refused(
            "koinii/registry-not-functional",
            f"{agent_id} has {len(rows)} believed {predicate} rows; expected one",
            {"agent": agent_id, "predicate": predicate, "handles": [r.handle for r in rows]},
        )
    return rows[0].sentence[2] if rows else None


def trust_of(store: Any, agent_id: str) -> Any:
    return _single(store, "trustLevel", agent_id)


def display_name_of(store: Any, agent_id: str) -> Any:
    return _single(store, "displayNameOf", agent_id)


def registered_agents(store: Any) -> list[str]:
    rows = store.sentexes_matching("(registeredAgent ?a)", REGISTRY)
    return sorted({r.sentence[1].name for r in rows if type(r.sentence[1]) is Sym})


def co_attribution(store: Any, sentence: Any) -> list[str]:
    """The contexts that assert `sentence` (believed), sorted."""
    return sorted({s.context for s in store.sentexes_matching(sentence, "?ctx")})
