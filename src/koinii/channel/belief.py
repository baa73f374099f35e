"""Agent belief: what one agent holds, read from its own context; and reversible
self-disregard.

Each agent has a belief context, `CxAgent` + its id (`AgentAtlas` → `CxAgentAgentAtlas`;
the prefix makes the mapping a bijection, read back by `convened_agents`). Asking what
an agent believes reads only that context and what it sees, never the asker's, so two
agents may hold contrary beliefs without the knowledge base contradicting itself.
`believe_own` links the belief context to the agent's own (written) context; `convene`
gives several belief contexts a common reader, where their clashes surface as
`disagreements`.

Invariants:
- Nothing here links one agent's context to another's: that would merge belief sets.
- `disregard` masks only the agent's OWN statements (`koinii/not-own-statement`
  otherwise): a mask takes a claim out of view, and hiding another agent's claim would
  hide the very clash argumentation needs to see. Cross-agent disagreement is a dispute.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from koinii import disputes, identity, speech
from koinii.errors import Refused
from koinii.identity import BELIEF_PREFIX, agent_of_belief_context
from koinii.kb import KB, Retracted, Sentex
from koinii.operations import operation
from koinii.terms import Sym, Var, show

__all__ = [
    "BELIEF_PREFIX",
    "agent_of_belief_context",
    "believe_own",
    "belief_context",
    "convene",
    "convened_agents",
    "disagreements",
    "disregard",
    "disregards",
    "project",
    "defeaters",
    "restore",
    "why_not",
    "would_believe",
]

_GENL_CX = Sym("genlCx")
_EXCEPT = Sym("except")
_HANDLE = Sym("sentexHandle")
_MONOTONIC = {"strength": "monotonic"}


def belief_context(agent: str) -> str:
    """The context an agent's beliefs are read in: `CxAgent` + the agent id."""
    identity.context_for(agent)  # an agent id, or refused by name
    return BELIEF_PREFIX + agent


# --- projection -------------------------------------------------------------------------------


def believe_own(kb: Any, agent: str) -> str:
    """Link the agent's belief context to its own context, so it believes what it said.

    One monotonic, idempotent edge; returns the belief context."""
    ctx = belief_context(agent)
    kb.assert_((_GENL_CX, Sym(ctx), Sym(identity.context_for(agent))), "CxUniverse", **_MONOTONIC)
    return ctx


def would_believe(kb: Any, agent: str, sentence: Any) -> bool:
    """Does the agent hold `sentence`? Read in the agent's belief context only."""
    return bool(kb.query(sentence, belief_context(agent), limit=1))


def project(kb: Any, agent: str, goal: Any) -> list[dict[str, Any]]:
    """The bindings of `goal` that the agent believes (read in its belief context)."""
    return kb.query(goal, belief_context(agent))


# --- convening --------------------------------------------------------------------------------


def convene(kb: Any, spec_ctx: str, agents: Iterable[str]) -> str:
    """Make `spec_ctx` see each agent's belief context, so their clashes meet there.

    One edit of monotonic, idempotent edges; returns `spec_ctx`. Retract an edge
    (`(genlCx spec_ctx CxAgent…)` in CxUniverse) to dismiss an agent."""
    edges = [
        ((_GENL_CX, Sym(spec_ctx), Sym(belief_context(agent))), "CxUniverse", _MONOTONIC)
        for agent in agents
    ]
    if edges:
        kb.edit(add=edges)
    return spec_ctx


def convened_agents(kb: Any, spec_ctx: str) -> list[str]:
    """The agents whose belief contexts `spec_ctx` sees, sorted."""
    found = (agent_of_belief_context(ctx) for ctx in kb.context_up(spec_ctx))
    return sorted(agent for agent in found if agent is not None)


def disagreements(kb: Any, spec_ctx: str) -> list[dict[str, Any]]:
    """The disputes `spec_ctx` observes whose every side a convened agent holds — stored
    in its belief context or its own context — as `{between, sides: [{agent, sentence,
    handle}]}` (`between`: the agents, sorted)."""
    holder: dict[str, str] = {}
    for agent in convened_agents(kb, spec_ctx):
        holder[belief_context(agent)] = agent
        holder[identity.context_for(agent)] = agent
    out = []
    for entry in disputes.disputes_in(kb, spec_ctx):
        if not all(side["context"] in holder for side in entry["sides"]):
            continue
        sides = [
            {
                "agent": holder[side["context"]],
                "sentence": side["sentence"],
                "handle": side["handle"],
            }
            for side in entry["sides"]
        ]
        out.append({"between": sorted({side["agent"] for side in sides}), "sides": sides})
    return out


# --- disregard --------------------------------------------------------------------------------


def disregard(kb: Any, agent: str, handle: int) -> int:
    """The agent withdraws its OWN statement, reversibly: `(except (sentexHandle H))` in
    its own context hides H there and below, keeping it stored. Returns the mask's handle.

    Refused: a statement another agent made (`koinii/not-own-statement`, with `agent` and
    `creator`), a handle naming nothing (`koinii/no-such-handle`)."""
    provenance = kb.provenance(handle)
    if provenance is None:
        raise Refused(
            "koinii/no-such-handle", f"there is no sentex {handle} to disregard", {"handle": handle}
        )
    creator = provenance.get("creator")
    if creator != agent:
        raise Refused(
            "koinii/not-own-statement",
            f"{agent} may disregard only its own statements; sentex {handle} is {creator}'s",
            {"agent": agent, "creator": creator, "handle": handle},
        )
    return kb.assert_(
        (_EXCEPT, (_HANDLE, handle)),
        identity.context_for(agent),
        strength="monotonic",
        creator=agent,
    )


def restore(kb: Any, mask: int) -> Retracted:
    """Undo a disregard: retract its mask, so the statement counts again.

    Refused (`koinii/not-a-disregard`) for a handle that is not an `except` mask, so a
    slip cannot retract a claim instead."""
    sentex = kb.sentex(mask)
    if sentex is None or sentex.sentence[0] is not _EXCEPT:
        raise Refused(
            "koinii/not-a-disregard",
            f"sentex {mask} is not a disregard (an except mask)",
            {"handle": mask},
        )
    return kb.retract(mask)


def disregards(kb: Any, agent: str) -> list[Sentex]:
    """The agent's standing disregards: the masks in its own context (they outlive a
    retracted target: `except` does not follow its target)."""
    return kb.sentexes_matching((_EXCEPT, Var("target")), identity.context_for(agent))


# --- why not: what defeats a claim ---------------------------------------------------------


def defeaters(kb: Any, handle: int) -> list[Sentex]:
    """What defeats the sentex `handle`: the believed monotonic sentexes, anywhere, that
    say the opposite (a ruling, an arbiter's or an operator's monotonic claim). A default
    claim that clashes with another default one is not defeated: the two stand, as a
    contradiction to settle."""
    sentex = kb.sentex(handle)
    if sentex is None:
        return []
    contrary = show(speech.negation(sentex.sentence))
    return [
        other
        for other in kb.sentexes_matching(contrary, "CxEverything")
        if other.believed and other.strength == "monotonic"
    ]


def why_not(kb: KB, handle: Any, context: Any = None) -> dict[str, Any]:
    """Why the sentex `handle` is not believed (at `context`): the engine's reason and,
    when it is defeated, what defeats it — each with its handle, sentence, context,
    strength and author, so the reader knows whom to ask."""
    reason = kb.why_not(handle, context)
    found = defeaters(kb, handle) if reason == "defeated" else []
    return {
        "handle": handle,
        "context": context,
        "believed": reason is None,
        "reason": reason,
        "defeated_by": [
            {
                "handle": s.handle,
                "sentence": s.text,
                "context": s.context,
                "strength": s.strength,
                "author": s.provenance.get("creator") or s.provenance.get("principal"),
            }
            for s in found
        ],
    }


@operation(
    "belief.why_not",
    fields={
        "handle": ("integer", True, "the sentex's handle"),
        "context": ("string", False, "read at this context (visible, unmasked)"),
    },
    summary="why a sentex is not believed, and what defeats it",
    schedule="read",
)
def _why_not(kb: KB, handle: Any = None, context: Any = None) -> dict[str, Any]:
    return why_not(kb, handle, context)
