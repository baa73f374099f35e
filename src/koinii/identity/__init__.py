"""Identity: who an agent is, which context it owns, and where it may write.

One module per concern — `contexts` (which context is whose), `names` (which ids a
principal may hold), `grants` (principals, grants, attestations), `boundaries` (where a
principal may write, and what its writes may mean), `declarations` (the system's
vocabulary is the system's), `registry` (`CxRegistry`) — and the
package re-exports their names, so `identity.context_for` reads as it always has.

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

from koinii.identity.boundaries import (
    check_creator,
    check_meaning,
    check_registry_write,
    check_speaker,
    check_write_boundary,
    ingest,
    ingest_into,
    write_options,
)
from koinii.identity.contexts import (
    AGENT_CONTEXT,
    BELIEF_PREFIX,
    POLICIES,
    REGISTRY,
    SPEECH_ACTS,
    UNIVERSE_CONTEXT,
    agent_context_mark,
    agent_of_belief_context,
    check_channel_parent,
    check_one_context_each,
    check_own_super,
    context_for,
    owned_contexts,
    owners_of,
    place_agent_context,
    principal_contexts,
    principal_roles,
    reserve_principals,
    reserved_principals,
    speaker_of_sentence,
)
from koinii.identity.grants import (
    Principal,
    attestation,
    attested_by,
    attestor,
    authenticate,
    require_minted,
    set_attest_key,
)
from koinii.identity.names import (
    SYSTEM_CONTEXTS,
)
from koinii.identity.registry import (
    co_attribution,
    display_name_of,
    register_agent,
    registered_agents,
    set_trust,
    trust_of,
)

__all__ = [
    "AGENT_CONTEXT",
    "BELIEF_PREFIX",
    "POLICIES",
    "Principal",
    "REGISTRY",
    "SPEECH_ACTS",
    "SYSTEM_CONTEXTS",
    "UNIVERSE_CONTEXT",
    "agent_context_mark",
    "agent_of_belief_context",
    "attestation",
    "attested_by",
    "attestor",
    "authenticate",
    "check_channel_parent",
    "check_creator",
    "check_meaning",
    "check_one_context_each",
    "check_own_super",
    "check_registry_write",
    "check_speaker",
    "check_write_boundary",
    "co_attribution",
    "context_for",
    "display_name_of",
    "ingest",
    "ingest_into",
    "owned_contexts",
    "owners_of",
    "place_agent_context",
    "principal_contexts",
    "principal_roles",
    "register_agent",
    "registered_agents",
    "require_minted",
    "reserve_principals",
    "reserved_principals",
    "set_attest_key",
    "set_trust",
    "speaker_of_sentence",
    "trust_of",
    "write_options",
]
