"""Identity: which context an agent owns, and who a speech act names as its speaker.

Invariant: an agent's own context is a function of its id (`context_for`), so the write
destination is fixed by identity, not chosen by the writer. Agent contexts and channels
are spelled alike, so which context belongs to an agent is a written fact — the mark
`(agentContext CxAtlas AgentAtlas)` — never inferred from the name.
"""

from __future__ import annotations

from koinii.errors import Refused
from koinii.terms import Sym, Var, is_individual_name

REGISTRY = "CxRegistry"
AGENT_CONTEXT = Sym("agentContext")
# Argument 1 of each speech act is the acting agent (channel.md §2).
SPEECH_ACTS = frozenset(
    Sym(name)
    for name in (
        "queries",
        "answers",
        "endorses",
        "justifies",
        "disputes",
        "votesFor",
        "votesAgainst",
        "notUnderstood",
        "refuse",
    )
)


def context_for(agent_id: str) -> str:
    """`AgentAtlas` → `CxAtlas`; `Atlas` → `CxAtlas`."""
    if not isinstance(agent_id, str) or not is_individual_name(agent_id):
        raise Refused(
            "naming",
            f"{agent_id!r} is not an agent id: ids are CapitalCamelCase, e.g. AgentAtlas",
            {"symbol": str(agent_id), "role": "individual"},
        )
    bare = agent_id[5:] if agent_id.startswith("Agent") and len(agent_id) > 5 else agent_id
    return "Cx" + bare


def agent_context_mark(ctx: str, agent: str) -> tuple:
    """`(agentContext CxAtlas AgentAtlas)`; with agent "?agent" it is the read-back pattern."""
    who = Var(agent) if agent.startswith("?") else Sym(agent)
    return (AGENT_CONTEXT, Sym(ctx), who)


def speaker_of_sentence(sentence: tuple) -> str | None:
    """The agent a speech-act sentence names as its speaker (None if not a speech act)."""
    if sentence and sentence[0] in SPEECH_ACTS and len(sentence) > 1:
        speaker = sentence[1]
        return speaker.name if type(speaker) is Sym else str(speaker)
    return None
