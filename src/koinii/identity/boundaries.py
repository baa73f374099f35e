"""Where a principal may write, and what its writes may mean: its own context only (an
admin the registry only), as itself (creator and speaker), and nothing that acts on
another agent's claims from inside its own context — a mask of another's sentex, a mark
of another context, a monotonic claim (docs/security.md, non-interference). Every write
in one process goes through `ingest`; the daemon enforces the same from the token.
"""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.identity.contexts import (
    AGENT_CONTEXT,
    REGISTRY,
    agent_context_mark,
    context_for,
    speaker_of_sentence,
)
from koinii.identity.declarations import check_system_sentences
from koinii.identity.grants import Principal, attestation, require_minted
from koinii.terms import Sym, parse, show


def check_registry_write(who: Any, ctx: str) -> None:
    """Only a minted admin principal writes the registry."""
    if ctx == REGISTRY and not (isinstance(who, Principal) and who.admin and who.minted):
        name = who.id if isinstance(who, Principal) else who
        raise Refused(
            "koinii/registry-forbidden",
            f"{REGISTRY} is written only by a verified admin",
            {"agent": name, "context": ctx, "minted": isinstance(who, Principal) and who.minted},
        )


def check_creator(agent: str, creator: Any) -> None:
    """A writer names no creator but itself (its own id is redundant, and allowed)."""
    if creator is not None and creator != agent:
        raise Refused(
            "koinii/creator-mismatch",
            f"{agent} cannot assert as {creator}: every write is attributed to its writer, "
            f"so leave `creator` out (or name {agent} itself)",
            {"agent": agent, "creator": creator},
        )


def check_speaker(agent: str, sentence: Any) -> None:
    """A speech act names its writer as its speaker (argument 1)."""
    named = speaker_of_sentence(sentence)
    if named is not None and named != agent:
        raise Refused(
            "koinii/speaker-mismatch",
            f"{agent} cannot speak as {named}: argument 1 of ({sentence[0].name} …) is its "
            f"speaker, and you speak only as {agent} — write ({sentence[0].name} {agent} …); "
            f"to challenge {named}'s move, dispute it",
            {"agent": agent, "named": named, "act": sentence[0].name},
        )


_EXCEPT = Sym("except")
_HANDLE = Sym("sentexHandle")


def check_meaning(store: Any, agent: str, sentence: Any, strength: str | None) -> None:
    """The rules that keep one agent's writes from acting on another's claims, though
    each write is in the agent's own context (docs/security.md):

    - a mask `(except (sentexHandle T))` hides only the agent's own sentex T — masking
      another's claim would hide it from the whole channel (`koinii/foreign-mask`);
    - an agent's claims are defaults: a monotonic claim would defeat another agent's
      contrary claim silently instead of standing beside it as a visible contradiction
      (`koinii/strength-forbidden`); rulings are made by arbiters (docs/disputes.md);
    - an agent-context mark `(agentContext C A)` names only the agent and its own context
      — another context marked as one's own would stop agents joining it
      (`koinii/foreign-mark`);
    - a declaration names a predicate of the agent's own, and no write denies a move or a
      system sentence (`koinii.identity.declarations`).
    """
    term = parse(sentence) if isinstance(sentence, str) else sentence
    if type(term) is not tuple or not term:
        return
    check_system_sentences(store, agent, term)
    functor = term[0]
    own = context_for(agent)
    if functor is _EXCEPT and len(term) == 2 and type(term[1]) is tuple:
        target = term[1][1] if len(term[1]) == 2 and term[1][0] is _HANDLE else None
        found = store.sentex(target) if type(target) is int and target > 0 else None
        if found is not None and found.context != own:
            owner = found.provenance.get("creator") or found.context
            raise Refused(
                "koinii/foreign-mask",
                f"{agent} may mask only its own sentexes; #{target} is {owner}'s, and a mask "
                f"would hide it from everyone who sees {own}: to challenge it, "
                f"dispute({target})",
                {"agent": agent, "handle": target, "owner": owner},
            )
    if functor is AGENT_CONTEXT:
        if term != agent_context_mark(own, agent):
            raise Refused(
                "koinii/foreign-mark",
                f"{agent} marks only its own context: (agentContext {own} {agent}), which "
                "join writes; any other mark would claim a context that is not yours",
                {"agent": agent, "mark": show(term)},
            )
        return  # the join's own mark is monotonic
    if strength == "monotonic":
        raise Refused(
            "koinii/strength-forbidden",
            f"{agent} writes default claims only: a monotonic claim would defeat other "
            "agents' contrary claims silently instead of standing beside them as a "
            "contradiction; leave strength out, and let an arbiter or a majority rule",
            {"agent": agent, "strength": strength},
        )


def check_write_boundary(principal: Any, ctx: str) -> None:
    """A principal writes its own context; a minted admin writes only the registry."""
    check_registry_write(principal, ctx)
    if ctx == REGISTRY:
        return
    if isinstance(principal, Principal) and principal.admin and principal.minted:
        raise Refused(
            "koinii/admin-off-registry",
            f"an admin writes {REGISTRY} only, not {ctx}",
            {"principal": principal.id, "context": ctx},
        )
    own = principal.context if isinstance(principal, Principal) else context_for(principal)
    if ctx != own:
        name = principal.id if isinstance(principal, Principal) else principal
        raise Refused(
            "koinii/foreign-context",
            f"{name} writes its own context {own}, not {ctx}",
            {"agent": name, "context": ctx, "own": own},
        )


def ingest(store: Any, principal: Principal, sentence: Any) -> int:
    """Write `sentence` into the principal's own context, attributed to it."""
    return ingest_into(store, principal, principal.context, sentence)


def ingest_into(store: Any, principal: Principal, ctx: str, sentence: Any) -> int:
    """Write through the boundary: creator = principal id, provenance {source, policy,
    authenticated}; a minted proof-tier principal's write is attested."""
    return store.assert_(sentence, ctx, **write_options(principal, ctx, sentence))


def write_options(principal: Principal, ctx: str, sentence: Any) -> dict[str, Any]:
    check_write_boundary(principal, ctx)
    if principal.authenticated or principal.admin:
        require_minted(principal)
    provenance: dict[str, Any] = {
        "source": principal.source,
        "policy": principal.policy,
        "authenticated": principal.authenticated,
    }
    if principal.authenticated and principal.minted:
        text = show(parse(sentence) if isinstance(sentence, str) else sentence)
        provenance["attestation"] = attestation(ctx, text, principal.id)
    return {"creator": principal.id, "provenance": provenance}
