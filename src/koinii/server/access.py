"""Who may write where: the daemon's server-side write boundaries (wire.md §4).

Invariant: every write the daemon performs has passed `check_add` / `check_remove` for
the authenticated caller first, and is then attributed to the caller (`principal` in
provenance, set by the engine from `KB.attributed_to`, never from the request). The
client library may check the same rules earlier; this is where they are enforced.

| role     | may write                                                   | may retract       |
| agent    | its own context, plus genlCx edges that place its own context | what it created   |
| arbiter  | as an agent, and monotonic claims (rulings) in its own context | what it created   |

An agent (or arbiter) writes and removes speech acts only through their moves
(`koinii.channel.moves`, which keep the conversation's rules on the writer): a plain write or
removal of one is refused `koinii/use-the-move`, and so are the removal of a rebuttal
while the agent's dispute stands on it and a mask over a move (it would hide the move
from the moves' own reads). The records of what the moves took back (`CxHistory`) are
written as the agent, and no agent removes or amends one (`koinii/foreign-context`).
The provenance fields that carry a meaning only the system gives (a ruling's
`adjudication` tag; the writer, which the daemon records) are refused to agents
(`reserved-provenance`), on a write and on `add_provenance`; an arbiter's rulings carry
the tag.
| admin    | CxRegistry                                                   | registry rows     |
| operator | anything, and load vocabulary                                | anything          |
| reader   | nothing                                                      | nothing           |
"""

from __future__ import annotations

from typing import Any

from koinii.channel.history import HISTORY
from koinii.channel.moves import (
    check_not_a_move,
    check_system_fields,
    disputes_resting_on,
    rebuttal_stands,
    use_the_move,
)
from koinii.errors import Refused
from koinii.identity import (
    REGISTRY,
    check_channel_parent,
    check_creator,
    check_meaning,
    check_own_super,
    check_registry_write,
    check_speaker,
    check_write_boundary,
    context_for,
    reserved_principals,
)
from koinii.kb import KB
from koinii.kb.checks import prepare
from koinii.kb.rules import GENL_CX
from koinii.kb.sentex import NOT
from koinii.server.tokens import Caller
from koinii.speech import carried_claim, move_kind

UNIVERSE = "CxUniverse"


def check_add(kb: KB, caller: Caller, sentence: Any, context: Any, opts: dict[str, Any]) -> None:
    """Refuse a write the caller's role does not allow (before anything is stored)."""
    if caller.role == "operator":
        return
    if caller.role == "reader":
        raise Refused("forbidden", "a reader may not write", {"principal": caller.id})
    entries = prepare(sentence, context)  # shape and naming first: the same refusals as in-process
    ctx = entries[0].context
    if caller.role == "admin":
        if ctx != REGISTRY:
            raise Refused(
                "koinii/admin-off-registry",
                f"an admin writes {REGISTRY} only, not {ctx}",
                {"principal": caller.id, "context": ctx},
            )
        check_system_fields(opts.get("provenance"))  # an admin makes no rulings either
        for entry in entries:
            _check_admin_entry(caller, entry.atom)
        return
    agent = caller.id
    check_registry_write(agent, ctx)  # the order of the checks is channel.md's
    check_creator(agent, opts.get("creator"))
    own = context_for(agent)
    strength = None if caller.role == "arbiter" else opts.get("strength")
    if caller.role != "arbiter":  # an arbiter's ruling carries its adjudication tag
        check_system_fields(opts.get("provenance"))
    for entry in entries:
        if ctx == UNIVERSE and entry.atom[0] is GENL_CX:
            _check_placement(kb, agent, own, entry.atom)
            continue
        check_write_boundary(agent, ctx)
        check_speaker(agent, entry.atom)
        check_meaning(kb, agent, entry.atom if entry.positive else (NOT, entry.atom), strength)
        claim = carried_claim(entry.atom) if entry.positive else None
        if claim is not None:  # an answer's claim is its author's claim too
            check_speaker(agent, claim[1] if claim[0] is NOT else claim)
        if entry.positive:
            check_not_a_move(entry.atom, kb=kb, agent=agent)


def _check_admin_entry(caller: Caller, atom: tuple) -> None:
    """An admin makes no moves, so it writes no speech act in the registry — stated,
    denied (`atom` is a denial's sentence) or concluded by a rule: `(answers AgentAtlas …)`
    there was read as Atlas's answer by the reads across contexts."""
    try:
        check_not_a_move(atom)
    except Refused as refusal:
        kind = refusal.data["kind"]
        article = "an" if kind[0] in "aeiou" else "a"
        raise Refused(
            "forbidden",
            f"an admin writes registry rows, not speech acts: {article} {kind} is made by an "
            "agent's own move, with an agent token",
            {"principal": caller.id, "kind": kind},
        ) from None


def _check_placement(kb: KB, agent: str, own: str, atom: tuple) -> None:
    """An agent may place its own context: under a channel, or over the vocabulary it
    speaks — never another principal's context, joined yet or not (the daemon knows them
    all from its token table), and never over a channel or another agent's context."""
    sub, sup = atom[1].name, atom[2].name
    if own not in (sub, sup):
        raise Refused(
            "koinii/foreign-context",
            f"{agent} may only place its own context {own}",
            {"agent": agent, "context": UNIVERSE, "own": own},
        )
    reserved = reserved_principals(kb)
    if sup == own:  # (genlCx channel own): the channel must be a channel
        check_channel_parent(kb, agent, sub, reserved)
    else:  # (genlCx own vocabulary): own sees only vocabulary
        check_own_super(kb, agent, sup, reserved)


def check_remove(kb: KB, caller: Caller, handle: Any) -> None:
    """Refuse a retract of what the caller may not retract (an unknown handle passes: the
    engine refuses it, `unknown-handle`)."""
    if caller.role == "operator":
        return
    if caller.role == "reader":
        raise Refused("forbidden", "a reader may not retract", {"principal": caller.id})
    if type(handle) is not int:
        return  # the engine refuses it by name
    sentex = kb.sentex(handle)
    if sentex is None:
        return
    if caller.role == "admin":
        if sentex.context != REGISTRY:
            raise Refused(
                "koinii/admin-off-registry",
                f"an admin retracts registry rows only; sentex {handle} is in {sentex.context}",
                {"principal": caller.id, "handle": handle},
            )
        return
    if sentex.provenance.get("principal") != caller.id:
        raise Refused(
            "koinii/foreign-sentex",
            f"{caller.id} may retract only what it wrote; sentex {handle} is not its own",
            {"agent": caller.id, "handle": handle},
        )
    if sentex.context == HISTORY:
        raise Refused(
            "koinii/foreign-context",
            f"#{handle} is a record in {HISTORY}, which the moves write and no agent removes "
            "or amends: it keeps what was taken back from standing clean. To take back a "
            "move, withdraw(handle=…) it (POST /v1/moves/withdraw); its record is kept",
            {"agent": caller.id, "handle": handle, "context": HISTORY},
        )
    kind = move_kind(sentex.sentence)
    if kind != "claim":
        raise use_the_move(kind, "withdrawn")
    resting = [d.handle for d in disputes_resting_on(kb, caller.id, sentex)]
    if resting:
        raise rebuttal_stands(handle, resting, "remove")


def check_add_provenance(kb: KB, caller: Caller, handle: Any, fields: Any) -> None:
    """Refuse provenance added where the caller may not retract (`check_remove`), or a
    ruling's tag in it from a caller that makes no rulings: `add_provenance` on an agent's
    own claim took `adjudication`, and the claim read as a ruling."""
    check_remove(kb, caller, handle)
    if caller.role not in ("operator", "arbiter"):
        check_system_fields(fields)


def check_operator(caller: Caller, what: str) -> None:
    if caller.role != "operator":
        raise Refused("forbidden", f"only an operator may {what}", {"principal": caller.id})
