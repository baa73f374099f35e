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
"""

from __future__ import annotations

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
    """Only the coordinator a wrap permeates into (or an operator) marks it processed."""
    require_writer(caller, "mark wraps processed")
    if caller.role == "operator":
        return
    wrap_id = checks.identifier(wrap_id, "wrap_id", "bad-wrap")
    row = store.read(
        kb,
        lambda c: c.execute(
            "SELECT c.coordinator_id FROM wrap_notification w "
            "JOIN wrap_coordinator c ON c.session_id = w.parent_session_id "
            "WHERE w.wrap_id = ?",
            (wrap_id,),
        ).fetchone(),
    )
    if row is not None and row[0] != caller.id:
        raise Refused(
            "koinii/foreign-context",
            f"wrap {wrap_id!r} permeates into coordinator {row[0]}'s session; "
            f"{caller.id} may not consume it",
            {"agent": caller.id, "wrap_id": wrap_id, "coordinator_id": row[0]},
        )
