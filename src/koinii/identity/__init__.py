"""Identity: who an agent is, which context it owns, and where it may write.

Invariants:
- An agent's own context is a function of its id (`context_for`): the write destination
  is fixed by identity, not chosen by the writer. So one context belongs to one principal:
  a set of principals in which two ids name the same context (`Atlas`, `AgentAtlas`) is
  refused wherever one is made (`check_one_context_each`: the token table, at `token add`
  and at the daemon's start).
- Which context belongs to an agent is a written fact — the mark
  `(agentContext CxAtlas AgentAtlas)`, asserted by join, never derived — never inferred
  from a name, because agent contexts and channels are spelled alike. Before its first
  join an agent's context is reserved for it by the daemon's token table; which ids a
  principal may hold at all is `koinii.identity.names`'s.
- An agent places only its own context: under a channel (`check_channel_parent`), over
  vocabulary (`check_own_super`) — so what it writes reaches no other agent's context,
  only what others see at a channel (docs/security.md, non-interference).
- A `Principal` is only as good as its grant: `authenticate` mints an HMAC-SHA256 grant
  over a fixed serialisation under the process key, and every check that matters
  (admin writes, attestation) verifies it in constant time. A hand-built or altered
  principal does not verify.
- In one process these checks are cooperative (they catch mistakes); across processes
  the daemon enforces the same boundaries from the token (docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import secrets
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from koinii.errors import Refused
from koinii.identity.declarations import check_system_sentences
from koinii.kb import Sentex
from koinii.speech import ACTS
from koinii.terms import Sym, Var, is_individual_name, parse, show

REGISTRY = "CxRegistry"
UNIVERSE_CONTEXT = "CxUniverse"
AGENT_CONTEXT = Sym("agentContext")
POLICIES = ("cooperative", "proof-tier")
# Argument 1 of each speech act is the acting agent (channel.md §2).
SPEECH_ACTS = frozenset(ACTS)

# --- contexts -----------------------------------------------------------------------------


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


def check_channel_parent(
    store: Any, agent_id: str, parent: str, reserved: Iterable[str] = ()
) -> None:
    """Refuse to place an agent's context under what is not a channel: a system context
    (the registry, CxDisputes, …), the agent's own, another principal's (marked, or reserved
    for one that has not joined: Atlas's claims would read as Dune's), or vocabulary another
    agent's context speaks (under CxSpeechActs, its claims would be in every agent's view)."""
    own = context_for(agent_id)
    owners = [] if parent == REGISTRY else owners_of(store, parent)
    contexts = principal_contexts(store, reserved)
    if parent == REGISTRY:
        why = "the registry"
    elif parent == own:
        why = "the agent's own context"
    elif any(owner != agent_id for owner in owners):
        why = f"{next(o for o in owners if o != agent_id)}'s own context"
    elif contexts.get(parent, agent_id) != agent_id:
        owners = [contexts[parent]]
        why = (
            f"{owners[0]}'s own context, reserved for it before its first join "
            f"({owners[0]} holds a token of this daemon)"
        )
    else:
        speakers = sorted(
            contexts[c] for c in store.context_down(parent) if c in contexts and c != own
        )
        if not speakers and parent not in SYSTEM_CONTEXTS:  # (CxDisputes: the daemon's)
            return
        owners, why = speakers, "one of the system's own contexts"
        if speakers:
            why = f"vocabulary {speakers[0]}'s own context speaks (it sees {parent}): under "
            why += f"it, your claims would appear in every context that speaks {parent}"
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


# --- names: which ids a principal may hold --------------------------------------------------

# The system's own contexts: a principal named for one would own it (AgentUniverse owns
# CxUniverse), write where every context reads, and be listed as the author of its
# vocabulary.
SYSTEM_CONTEXTS = frozenset(
    {
        "CxUniverse",
        "CxEverything",
        "CxCore",
        "CxSpeechActs",
        "CxRegistry",
        "CxDisputes",
        "CxHistory",
    }
)


# --- the process key, grants and attestations ---------------------------------------------

_key: bytes = secrets.token_bytes(32)


def set_attest_key(key: bytes | str) -> None:
    """Use `key` (>= 32 bytes) for grants and attestations in this process."""
    global _key
    _key = _checked_key(key)


def _checked_key(key: Any) -> bytes:
    raw = key.encode("utf-8") if isinstance(key, str) else key
    if not isinstance(raw, bytes) or len(raw) < 32:
        raise Refused(
            "koinii/bad-attest-key",
            "the attestation key must be at least 32 bytes",
            {"key_class": type(key).__name__},
        )
    return raw


def _mac(*parts: Any) -> str:
    message = json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hmac.new(_checked_key(_key), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Principal:
    """An authenticated (or cooperatively claimed) identity."""

    id: str
    context: str
    source: str | None
    policy: str
    authenticated: bool
    admin: bool
    grant: str | None = None

    def _claims(self) -> tuple:
        return (
            "grant",
            self.id,
            self.context,
            self.source,
            self.policy,
            self.authenticated,
            self.admin,
        )

    @property
    def minted(self) -> bool:
        """Was this principal made by `authenticate` under the current key, unaltered?"""
        return self.grant is not None and hmac.compare_digest(self.grant, _mac(*self._claims()))


def authenticate(
    request: dict[str, Any],
    policy: str | None = None,
    verify: Callable[..., bool] | None = None,
) -> Principal:
    """A principal from `request` (`claimed_id`, `credential`, `source`, `admin`).

    `cooperative` (the default) trusts the claimed id; `proof-tier` needs `verify` to
    prove it. An admin request always needs a verifier that takes the claims:
    `verify(claimed_id, credential, claims)`.
    """
    policy = policy or "cooperative"
    if policy not in POLICIES:
        raise Refused(
            "koinii/unknown-policy",
            f"unknown identity policy {policy!r}; policies: {', '.join(POLICIES)}",
            {"policy": policy, "known": list(POLICIES)},
        )
    claimed = request.get("claimed_id")
    context = context_for(claimed)
    admin = bool(request.get("admin"))
    needs_proof = admin or policy == "proof-tier"
    if needs_proof:
        claims = {"admin": admin, "source": request.get("source")}
        if not _verified(verify, claimed, request.get("credential"), claims, admin):
            raise Refused(
                "koinii/identity-unverified",
                f"the identity {claimed} could not be verified",
                {
                    "claimed_id": claimed,
                    "admin": admin,
                    "verifier": verify is not None,
                    "policy": policy,
                },
            )
    principal = Principal(
        id=claimed,
        context=context,
        source=request.get("source"),
        policy=policy,
        authenticated=needs_proof,
        admin=admin,
    )
    return replace(principal, grant=_mac(*principal._claims()))


def _verified(verify, claimed, credential, claims, admin: bool) -> bool:
    if verify is None:
        return False
    try:
        params = inspect.signature(verify).parameters.values()
        takes_claims = sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params
        ) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in params)
    except (TypeError, ValueError):
        takes_claims = True
    if takes_claims:
        return verify(claimed, credential, claims) is True
    if admin:
        return False  # an admin grant needs a verifier that sees the claims
    return verify(claimed, credential) is True


def _require_minted(principal: Any) -> None:
    if not isinstance(principal, Principal) or not principal.minted:
        raise Refused(
            "koinii/identity-unverified",
            "this principal was not minted by authenticate (or was altered)",
            {"minted": False},
        )


# --- write boundaries ---------------------------------------------------------------------


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
      (`koinii/foreign-mark`); a declaration names no system predicate (`declarations`).
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
    return store.assert_(sentence, ctx, **_ingest_options(principal, ctx, sentence))


def _ingest_options(principal: Principal, ctx: str, sentence: Any) -> dict[str, Any]:
    check_write_boundary(principal, ctx)
    if principal.authenticated or principal.admin:
        _require_minted(principal)
    provenance: dict[str, Any] = {
        "source": principal.source,
        "policy": principal.policy,
        "authenticated": principal.authenticated,
    }
    if principal.authenticated and principal.minted:
        text = show(parse(sentence) if isinstance(sentence, str) else sentence)
        provenance["attestation"] = _mac("attest", ctx, text, principal.id)
    return {"creator": principal.id, "provenance": provenance}


def attested_by(store: Any, handle: int) -> str | None:
    """The creator whose attestation of this sentex verifies, else None.

    Attested means: an in-process HMAC attestation bound to this sentex's context, text
    and creator (so it does not survive copying), or a `principal` recorded by an
    authenticated daemon that equals the creator.
    """
    sentex = store.sentex(handle)
    return None if sentex is None else attestor(sentex)


def attestor(sentex: Sentex) -> str | None:
    """`attested_by` of a sentex already read."""
    creator = sentex.provenance.get("creator")
    if creator is None:
        return None
    attestation = sentex.provenance.get("attestation")
    if isinstance(attestation, str) and hmac.compare_digest(
        attestation, _mac("attest", sentex.context, sentex.text, creator)
    ):
        return creator
    if sentex.provenance.get("principal") == creator:
        return creator
    return None


# --- the registry -------------------------------------------------------------------------


def register_agent(store: Any, admin: Principal, agent_id: str, name: str, trust: float) -> None:
    """Write the registry rows of an agent (admin only), in one edit."""
    context_for(agent_id)  # the id must be an id
    rows = [
        (Sym("registeredAgent"), Sym(agent_id)),
        (Sym("displayNameOf"), Sym(agent_id), name),
        (Sym("trustLevel"), Sym(agent_id), trust),
    ]
    store.edit(add=[(row, REGISTRY, _ingest_options(admin, REGISTRY, row)) for row in rows])


def set_trust(store: Any, admin: Principal, agent_id: str, value: float) -> None:
    """Replace the agent's trust level: the old rows go and the new one lands, in one edit."""
    row = (Sym("trustLevel"), Sym(agent_id), value)
    options = _ingest_options(admin, REGISTRY, row)
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
