"""Which ids a principal may hold (docs/security.md, "Principals own their names"):
never one that names a system context or a system id in another role
(`check_reserved_name`), never one whose context the store already gives another
(`check_names_in_store`, run by the daemon), and `token add` warns on look-alikes of an
existing principal (`lookalikes`: case, 0/O, 1/l/I, rn/m)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from koinii.errors import Refused
from koinii.identity.contexts import context_for, owned_contexts

__all__ = [
    "SYSTEM_CONTEXTS",
    "SYSTEM_IDS",
    "check_names_in_store",
    "check_reserved_name",
    "lookalikes",
    "skeleton",
]

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

# Ids the system speaks as, each held only in its role: the majority's rulings are made
# as AgentMajority (disputes.majority.MAJORITY_ARBITER), by the adjudicator's arbiter token.
SYSTEM_IDS = {"AgentMajority": "arbiter"}


def check_reserved_name(principal: str, role: str) -> None:
    """Refuse an id that names a system context, or a system id in another role
    (`koinii/reserved-name`, saying why and what to do instead)."""
    ctx = context_for(principal)
    if ctx in SYSTEM_CONTEXTS:
        why = f"it would own {ctx}, one of the system's contexts"
    elif principal in SYSTEM_IDS and role != SYSTEM_IDS[principal]:
        why = (
            f"the system speaks as {principal}; only its {SYSTEM_IDS[principal]} token "
            "(the adjudicator's) may hold it"
        )
    elif ctx in {context_for(i) for i in SYSTEM_IDS} and principal not in SYSTEM_IDS:
        why = f"it would own {ctx}, the context the system rules in"
    else:
        return
    raise Refused(
        "koinii/reserved-name",
        f"{principal} is reserved: {why}. Reserved: the ids owning "
        f"{', '.join(sorted(SYSTEM_CONTEXTS))}, and "
        + ", ".join(f"{i} (role {r} only)" for i, r in sorted(SYSTEM_IDS.items()))
        + f". Choose an id of the agent's own, e.g. Agent{principal.removeprefix('Agent')}Bot",
        {"principal": principal, "role": role, "context": ctx},
    )


_CONFUSABLE = (("rn", "m"), ("0", "o"), ("1", "l"), ("i", "l"), ("|", "l"))


def skeleton(principal: str) -> str:
    """What an id looks like to a reader who cannot tell case, 0 from O, 1 from l from I,
    or rn from m: two ids with one skeleton are look-alikes."""
    text = context_for(principal).casefold()
    for seen, like in _CONFUSABLE:
        text = text.replace(seen, like)
    return text


def lookalikes(principal: str, existing: Iterable[str]) -> list[str]:
    """The ids in `existing` (other than `principal`) that look like `principal`."""
    mine = skeleton(principal)
    return sorted({e for e in existing if e != principal and skeleton(e) == mine})


def check_names_in_store(store: Any, agents: Iterable[str], table: str = "FILE") -> None:
    """Refuse agent ids whose context the store already gives to another: marked as
    another agent's own (a revoked principal's, say), a channel (it sees agents' own
    contexts: `AgentTeam` would own `CxTeam` and write as the channel), or vocabulary
    agents speak. Run by the daemon at its start and on each reload of its table: `token
    add` sees the table alone, and the store is its daemon's (locked while it runs)."""
    owned = owned_contexts(store)
    known = store.context_counts()
    for principal in agents:
        ctx = context_for(principal)
        owner = owned.get(ctx)
        if owner == principal or (owner is None and ctx not in known):
            continue
        members = sorted({owned[c] for c in store.context_up(ctx) if c in owned} - {owner})
        speakers = sorted({owned[c] for c in store.context_down(ctx) if c in owned} - {owner})
        if owner is not None:
            why = f"marked in the store as {owner}'s own"
        elif members:
            why = f"a channel in the store (it sees the contexts of {', '.join(members)})"
        elif speakers:
            why = f"vocabulary {', '.join(speakers)} speak in the store"
        else:
            continue
        raise Refused(
            "koinii/context-taken",
            f"{principal} would own {ctx}, which is {why}: a principal owns its context "
            f"alone. Give {principal} an id of its own, or revoke it (koinii token revoke "
            f"{principal} --tokens {table})",
            {"context": ctx, "principal": principal, "owner": owner, "members": members},
        )
