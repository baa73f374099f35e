"""Who may change the wrap queue and the coordinator registry (wraps.md §4).

Over the daemon these rules run as each operation's `authorize`, on the authenticated
caller, before the operation touches the store; in one process the caller is an
operator (`IN_PROCESS`) and only the cooperative rule of `check_wrap_owner` applies.

- an operator may do anything;
- an agent files wraps as itself, registers, heartbeats and retires itself as a
  coordinator, and marks a wrap processed unless it permeates into another registered
  coordinator's session;
- a reader or an admin only reads (`forbidden`).

The rule the design exists for: a wrap whose `parent_session_id` is the session of a
registered coordinator is consumed only by that coordinator's principal (the
coordinator id IS the principal id) or an operator — so two coordinators in one project
never consume each other's lings' wraps, even by mistake (`koinii/foreign-context`).

What makes that rule hold against an agent that means harm (issue 37):
- A coordinator session is registered only by the principal that owns it
  (`check_coordinator_session`), else anyone could register a lead's session first —
  it is readable in `wraps/list` — take its workers' wraps and lock the lead out. A
  session's owner is known when the session store holds it (its id, or its name: the
  external id of the first stored session given it, as `koinii mcp --session NAME
  --record` starts it): that principal. A free tag the store does not hold has no
  owner to ask; the safest rule that keeps a lead able to name one is: it is the first
  registrant's while nobody else's wraps name it yet, and nobody's once they do (the
  lead registers before its workers wrap — its first permeate at its start — or uses
  a stored session). Since a session can be given an id or a name after it is seen in
  `wraps/list`, a stored session is its owner's only if no other agent's wraps named
  it before the row was stored (`stored_ms`, the session writer's clock: rows.py).
- A wrap's `created_ids` are its filer's own sentexes (`check_created_ids`), else a
  coordinator's permeate would absorb other agents' sentences as its worker's.
"""

from __future__ import annotations

import json
from typing import Any

from koinii.errors import Refused
from koinii.kb import KB
from koinii.operations import Caller
from koinii.wraps import checks, store


def require_writer(caller: Caller, what: str) -> None:
    """Readers read; admins write the registry only. Neither changes the queue."""
    if caller.role in ("reader", "admin"):
        raise Refused(
            "forbidden",
            f"a{'n' if caller.role == 'admin' else ''} {caller.role} may not {what}",
            {"principal": caller.id, "role": caller.role},
        )


def require_self(caller: Caller, named: Any, field: str) -> None:
    """An agent files and registers only as itself (an operator as anyone)."""
    if caller.is_agent and named != caller.id:
        raise Refused(
            "koinii/creator-mismatch",
            f"{caller.id} may not act as {named!r}: give {field}={caller.id!r}",
            {"agent": caller.id, "creator": named, "field": field},
        )


def require_own_coordinator(caller: Caller, coordinator_id: Any) -> None:
    """An agent heartbeats, retires and removes only its own coordinator record."""
    if caller.is_agent and coordinator_id != caller.id:
        raise Refused(
            "koinii/foreign-context",
            f"{caller.id} may change only its own coordinator record, not {coordinator_id!r}",
            {"agent": caller.id, "coordinator_id": coordinator_id},
        )


def check_wrap_owner(connection: store.Records, wrap_id: str, agent_id: Any) -> None:
    """A wrap another agent filed stays its own: filing the same id as `agent_id` is refused.

    Runs inside the write that would file it (so nothing can slip in between the check
    and the write), and in-process too: reusing another agent's wrap id is a mistake.
    """
    row = connection.execute(
        "SELECT agent_id FROM wrap_notification WHERE wrap_id = ?", (wrap_id,)
    ).fetchone()
    if row is not None and row[0] != agent_id:
        raise Refused(
            "koinii/creator-mismatch",
            f"wrap {wrap_id!r} was filed by {row[0]!r}; {agent_id!r} may not file it again",
            {"agent": agent_id, "creator": row[0], "wrap_id": wrap_id},
        )


def check_marking(kb: KB, caller: Caller, wrap_id: Any) -> None:
    """Only the coordinator a wrap permeates into (or an operator) marks it processed —
    the registered one, or before any registers, the owner of the stored session it
    permeates into (`session_owner`): a lead's workers' wraps are not anyone's to take
    while the lead has not permeated yet."""
    require_writer(caller, "mark wraps processed")
    if caller.role == "operator":
        return
    wrap_id = checks.identifier(wrap_id, "wrap_id", "bad-wrap")

    def coordinator(c: store.Records) -> str | None:
        row = c.execute(
            "SELECT w.parent_session_id, c.coordinator_id FROM wrap_notification w "
            "LEFT JOIN wrap_coordinator c ON c.session_id = w.parent_session_id "
            "WHERE w.wrap_id = ?",
            (wrap_id,),
        ).fetchone()
        if row is None or row[1] is not None or row[0] is None:
            return None if row is None else row[1]
        return session_owner(c, row[0])  # not registered yet: its owner's, where known

    holder = store.read(kb, coordinator)
    if holder is not None and holder != caller.id:
        raise Refused(
            "koinii/foreign-context",
            f"wrap {wrap_id!r} permeates into coordinator {holder}'s session; "
            f"{caller.id} may not consume it",
            {"agent": caller.id, "wrap_id": wrap_id, "coordinator_id": holder},
        )


def check_created_ids(kb: KB, caller: Caller, created_ids: Any) -> None:
    """An agent's wrap lists only sentexes it wrote (by the daemon's attribution): a
    handle of another principal's sentex, or of none yet, is refused, all of them named."""
    if not caller.is_agent:
        return
    checks.created_ids_of(created_ids)  # a malformed or too long list first: `bad-wrap`
    foreign = []
    for handle in created_ids or ():
        if type(handle) is not int:
            continue  # an id that is not a handle names no sentex: permeate reads none
        sentex = kb.sentex(handle)
        if sentex is None or sentex.provenance.get("principal") != caller.id:
            foreign.append(handle)
    if foreign:
        shown = ", ".join(str(h) for h in foreign[:20]) + (" …" if len(foreign) > 20 else "")
        raise Refused(
            "koinii/foreign-sentex",
            f"created_ids name {len(foreign)} handle(s) that are not sentexes {caller.id} "
            f"wrote: {shown}. A wrap lists only what its filer created: leave them out "
            "(wrap_session lists the entries it writes for you)",
            {"agent": caller.id, "field": "created_ids", "handles": foreign[:100]},
        )


def check_coordinator_session(kb: KB, caller: Caller, session_id: Any) -> None:
    """An agent registers as its coordinator session only one it owns (module docstring).
    A session it already holds passes (a re-registration is a new run); one another
    coordinator holds passes here and is refused by the registration (`bad-coordinator`)."""
    if not caller.is_agent or not isinstance(session_id, str):
        return

    def find(connection: store.Records) -> tuple[str, Any]:
        held = connection.execute(
            "SELECT coordinator_id FROM wrap_coordinator WHERE session_id = ?", (session_id,)
        ).fetchone()
        if held is not None:
            return "held", held[0]
        owner = session_owner(connection, session_id)
        if owner is not None and owner != caller.id:
            return "stored", owner
        if owner == caller.id:
            return "named", []
        filers = connection.execute(
            "SELECT DISTINCT coalesce(agent_id, '') FROM wrap_notification "
            "WHERE parent_session_id = ? AND (agent_id IS NULL OR agent_id <> ?)",
            (session_id, caller.id),
        ).fetchall()
        return "named", sorted(row[0] or "(no agent)" for row in filers)

    how, who = store.read(kb, find)
    if how == "held" or (how == "named" and not who):
        return
    if how == "stored":
        started = f"was started by {who}" if who else "has no owner (recorded in-process)"
        problem = f"session {session_id!r} {started}"
        data = {"owner": who}
    else:
        listed = ", ".join(who[:5]) + (" …" if len(who) > 5 else "")
        problem = (
            f"wraps of {listed} permeate into {session_id!r}, which is no session of yours "
            "in the session store (or was made one only after they did), so whose "
            "coordinator it is cannot be told"
        )
        data = {"wrapped_by": who[:20]}
    raise Refused(
        "koinii/foreign-session",
        f"{caller.id} may coordinate only a session it owns: {problem}. Coordinate a "
        "session you started (koinii mcp --session NAME --record starts one by that name), "
        "or register your session before your workers wrap into it",
        {"agent": caller.id, "field": "session_id", "session_id": session_id, **data},
    )


def session_owner(connection: store.Records, session_id: str) -> str | None:
    """The principal a session id or name belongs to, where that can be told: the
    owner of the first stored session given it (by id, or by external id), if no other
    principal's wraps named it before that session was stored (else the row came after
    the name was seen in wraps/list, and says nothing). None: a free tag, or unknown."""
    if not connection.execute("SELECT 1 FROM koinii_schema WHERE domain = 'sessions'").fetchone():
        return None
    stored = connection.execute(
        "SELECT owner, meta FROM session WHERE id = ? OR external_id = ? ORDER BY n LIMIT 1",
        (session_id, session_id),
    ).fetchone()
    if stored is None or stored[0] is None:
        return None
    before = _stored_ms(stored[1])
    earlier = connection.execute(
        "SELECT 1 FROM wrap_notification WHERE parent_session_id = ? "
        "AND (agent_id IS NULL OR agent_id <> ?) AND created_at < ? LIMIT 1",
        (session_id, stored[0], 2**62 if before is None else before),
    ).fetchone()
    return None if earlier else stored[0]


def _stored_ms(meta: Any) -> int | None:
    """When a session row was first written (its meta's `stored_ms`, by the session
    writer's clock); None when unknown (a row from before it was kept)."""
    try:
        found = json.loads(meta).get("stored_ms") if meta else None
    except (ValueError, AttributeError):
        return None
    return found if type(found) is int else None
