"""Which context is whose: an agent's own context is a function of its id
(`context_for`), ownership is the mark join writes in the context itself (`owners_of`),
the daemon's token table reserves a principal's context before its first join, and an
agent places only its own context (`check_channel_parent`, `check_own_super`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

from koinii.errors import Refused
from koinii.speech import ACTS
from koinii.terms import Sym, Var, is_individual_name, show

REGISTRY = "CxRegistry"
UNIVERSE_CONTEXT = "CxUniverse"
AGENT_CONTEXT = Sym("agentContext")
POLICIES = ("cooperative", "proof-tier")
# Argument 1 of each speech act is the acting agent (channel.md §2).
SPEECH_ACTS = frozenset(ACTS)


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


# An agent's belief context: what it believes (koinii.channel.belief), named for it here so
# that no other agent places its own context under it (`check_channel_parent`).
BELIEF_PREFIX = "CxAgent"


def agent_of_belief_context(ctx: str) -> str | None:
    """The agent whose belief context `ctx` is (`CxAgentAgentAtlas` → `AgentAtlas`), or None."""
    if isinstance(ctx, str) and ctx.startswith(BELIEF_PREFIX) and len(ctx) > len(BELIEF_PREFIX):
        return ctx[len(BELIEF_PREFIX) :]
    return None


def check_one_context_each(principals: Iterable[str], table: str = "FILE") -> None:
    """Refuse principals of which two distinct ids own one context (`Atlas` and
    `AgentAtlas` both own `CxAtlas`, so each could write as the other). In each clash the
    later id is named as the one to change: the newcomer, or the later entry of a table."""
    owner: dict[str, str] = {}
    for principal in principals:
        ctx = context_for(principal)
        first = owner.setdefault(ctx, principal)
        if first != principal:
            raise Refused(
                "koinii/context-taken",
                f"{principal} would own {ctx}, which belongs to {first}: one context belongs "
                f"to one principal (AgentX and X both own CxX). Give {principal} an id of its "
                f"own, or revoke it (koinii token revoke {principal} --tokens {table})",
                {"context": ctx, "principal": principal, "owner": first},
            )


def agent_context_mark(ctx: str, agent: str) -> tuple:
    """`(agentContext CxAtlas AgentAtlas)`; with agent "?agent" it is the read-back pattern."""
    who = Var(agent) if agent.startswith("?") else Sym(agent)
    return (AGENT_CONTEXT, Sym(ctx), who)


def owners_of(store: Any, ctx: str) -> list[str]:
    """The agents whose own context `ctx` is, read from the marks asserted in `ctx` itself
    (sorted): a mark another context holds claims nothing (check_meaning), and a derived
    one claims nothing either — ownership is written by join, never concluded by a rule
    (a rule concluding a mark is refused `koinii/underivable`; one stored before that was
    refused may still fire)."""
    found = store.sentexes_matching(agent_context_mark(ctx, "?agent"), ctx)
    return sorted(
        {s.sentence[2].name for s in found if type(s.sentence[2]) is Sym and not s.derived}
    )


def owned_contexts(store: Any) -> dict[str, str]:
    """Every context some agent owns, to its owner: the marks asserted in the context
    they name (`owners_of`, for all contexts at once; the first owner of a context kept)."""
    owned: dict[str, str] = {}
    for mark in store.sentexes_matching((AGENT_CONTEXT, Var("?ctx"), Var("?agent")), "?in"):
        ctx, agent = mark.sentence[1], mark.sentence[2]
        mine = type(ctx) is Sym and type(agent) is Sym and mark.context == ctx.name
        if mine and not mark.derived:  # (ownership is asserted by join, never concluded)
            owned.setdefault(ctx.name, agent.name)
    return owned


def principal_contexts(store: Any, reserved: Iterable[str] = ()) -> dict[str, str]:
    """The contexts of every principal, to its id: those marked as an agent's own, and —
    before their first join — those of the principals `reserved` names (the daemon's
    token table): a principal's context is its own from the moment it has a token."""
    contexts = owned_contexts(store)
    for principal in reserved:
        contexts.setdefault(context_for(principal), principal)
    return contexts


# The principals each daemon's store serves, from its token table (read again on SIGHUP):
# their contexts are theirs before their first join. Keyed by the store, so every write
# path on it — the access check of a plain write, and the join move — has them.
_PRINCIPALS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def reserve_principals(store: Any, table: Any) -> None:
    """Reserve, for the writes to `store`, the context of every agent in `table` (a
    `TokenTable`, whose `agents` follow its reloads)."""
    _PRINCIPALS[store] = table


def reserved_principals(store: Any) -> frozenset[str]:
    """The ids of the agents (and arbiters) holding a token of the daemon serving `store`:
    the principals that own a context (a reader's or an operator's name reserves none)."""
    table = _PRINCIPALS.get(store)
    return frozenset() if table is None else table.agents


def principal_roles(store: Any) -> dict[str, str]:
    """Each principal's role in the token table of the daemon serving `store` (empty in
    one process, where there are no tokens)."""
    table = _PRINCIPALS.get(store)
    return {} if table is None else dict(getattr(table, "roles", {}))


def _believer(store: Any, parent: str, agent_id: str, principals: Iterable[str]) -> bool:
    """Is `parent` another principal's belief context: of a principal the daemon knows
    (before it links it), or one already linked to its owner's own context?"""
    believer = agent_of_belief_context(parent)
    if believer is None or believer == agent_id or not is_individual_name(believer):
        return False
    return believer in principals or context_for(believer) in store.context_up(parent)


def check_channel_parent(
    store: Any, agent_id: str, parent: str, reserved: Iterable[str] = ()
) -> None:
    """Refuse to place an agent's context under something that is not a channel: the
    registry or another of the system's contexts (CxDisputes, CxHistory, …: under
    CxDisputes an agent's claims read as the daemon's marks), the agent's own context,
    another principal's own context (marked, or reserved before its first join for a
    principal of the daemon, or for the system's own voice AgentMajority: placed under
    another agent's context, Atlas's claims and declarations would read as Dune's) or its
    belief context (Boreas believed Atlas's claims), or
    vocabulary another agent's context speaks (placed under CxSpeechActs, an agent's
    claims would appear in every context that speaks it)."""
    from koinii.identity.names import SYSTEM_CONTEXTS, SYSTEM_IDS  # (names reads this module)

    own = context_for(agent_id)
    owners = [] if parent == REGISTRY else owners_of(store, parent)
    # the system's own voices are reserved with or without a token: CxMajority, squatted
    # as a channel, kept the adjudicator's AgentMajority out of every token table after
    contexts = principal_contexts(store, [*reserved, *SYSTEM_IDS])
    if parent == REGISTRY:
        why = "the registry"
    elif parent == own:
        why = "the agent's own context"
    elif any(owner != agent_id for owner in owners):
        why = f"{next(o for o in owners if o != agent_id)}'s own context"
    elif _believer(store, parent, agent_id, contexts.values()):
        owners = [parent[len(BELIEF_PREFIX) :]]
        why = (
            f"{owners[0]}'s belief context, what {owners[0]} believes: under it, your claims "
            f"would be {owners[0]}'s beliefs"
        )
    elif contexts.get(parent, agent_id) != agent_id:
        owners = [contexts[parent]]
        why = f"{owners[0]}'s own context, reserved for it before its first join " + (
            f"(the system speaks as {owners[0]})"
            if owners[0] in SYSTEM_IDS
            else f"({owners[0]} holds a token of this daemon)"
        )
    else:
        speakers = sorted(
            contexts[c] for c in store.context_down(parent) if c in contexts and c != own
        )
        if not speakers and parent not in SYSTEM_CONTEXTS:
            return
        owners, why = speakers, "one of the system's own contexts"
        if speakers:
            why = (
                f"vocabulary {speakers[0]}'s own context speaks (it sees {parent}): under it, "
                f"your claims would appear in every context that speaks {parent}"
            )
    raise Refused(
        "koinii/not-a-channel",
        f"{parent} is not a channel: it is {why}. Join a channel of its own name instead, "
        f"e.g. (genlCx CxTeam {own})",
        {"agent": agent_id, "parent": parent, "owners": owners},
    )


def check_own_super(store: Any, agent_id: str, sup: str, reserved: Iterable[str] = ()) -> None:
    """An agent's own context sees only vocabulary: CxUniverse, or a context holding
    sentences (loaded by an operator: no agent writes there) that is no principal's
    context and sees none. Seeing a channel or another agent's context (`(genlCx CxAtlas
    CxOther)`) would make every channel Atlas's context is in show CxOther's questions and
    disputes as its own; an empty context would become a channel later, pulled in the same
    way. (To take part in a channel, join it: the channel sees you, not you it.)"""
    if sup == UNIVERSE_CONTEXT:
        return
    own = context_for(agent_id)
    contexts = principal_contexts(store, reserved)
    seen = sorted(c for c in store.context_up(sup) if c in contexts and c != own)
    if sup in contexts and contexts[sup] != agent_id:
        why = f"{contexts[sup]}'s own context"
    elif seen:
        why = f"a channel (it sees {', '.join(seen)})"
    elif not store.context_counts().get(sup):
        why = "empty: no vocabulary has been loaded there"
    else:
        return
    raise Refused(
        "koinii/not-vocabulary",
        f"{own} may see only vocabulary (CxUniverse, or a context an operator loaded that "
        f"sees no agent's context); {sup} is {why}. To take part in {sup}, join it — "
        f"(genlCx {sup} {own}), the channel sees you — and speak loaded vocabulary such "
        "as CxSpeechActs",
        {"agent": agent_id, "context": sup, "own": own, "sees": seen},
    )


def place_agent_context(
    write: Callable[[Any, str, dict[str, Any]], Any], parent: str, agent_id: str, roots: str
) -> str:
    """The one placement routine: the channel sees the agent's context, which sees `roots`,
    and the context is marked as the agent's own. Three monotonic, idempotent writes."""
    own = context_for(agent_id)
    monotonic = {"strength": "monotonic"}
    write((Sym("genlCx"), Sym(parent), Sym(own)), "CxUniverse", monotonic)
    write((Sym("genlCx"), Sym(own), Sym(roots)), "CxUniverse", monotonic)
    write(agent_context_mark(own, agent_id), own, {**monotonic, "creator": agent_id})
    return own


def speaker_of_sentence(sentence: Any) -> str | None:
    """The agent a speech-act sentence names as its speaker (None if not a speech act)."""
    if type(sentence) is tuple and sentence and sentence[0] in SPEECH_ACTS and len(sentence) > 1:
        speaker = sentence[1]
        return speaker.name if type(speaker) is Sym else show(speaker)
    return None
