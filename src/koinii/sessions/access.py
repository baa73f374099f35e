"""Who may write which session (over the wire, each operation's `authorize`; docs/security.md).

A session is written only by the principal that started it — its `owner`, recorded from
the daemon's attribution — and by operators; readers and admins record no sessions
(`forbidden`), and an agent writing another's session is refused
`koinii/foreign-session`. Session parents belong to the principal that created them
(issue 37): an agent starts a child session (`parent_session_id`) only under a session
it started itself — the store records one owner per session and no delegation, so "a
session created for it" by a coordinator is its coordinator's, not its own, and is
refused the same way. Imports need no rule here: an import is keyed by its importer and
the source's id (imports.py), so it never finds another principal's session.

A session these rules cannot find passes: the operation itself refuses it by name
(`bad-session`), inside its transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koinii.errors import Refused
from koinii.identity import REGISTRY
from koinii.kb import KB
from koinii.operations import Caller
from koinii.sessions import schema


def may_record(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    """Agents and operators record sessions; a reader only reads them, and an admin
    writes the registry only."""
    if caller.role in ("reader", "admin"):
        raise Refused(
            "forbidden",
            f"a{'n' if caller.role == 'admin' else ''} {caller.role} may not record sessions"
            + (f" (an admin writes {REGISTRY} only)" if caller.role == "admin" else ""),
            {"principal": caller.id, "role": caller.role},
        )


def _owned_by(
    locate: Callable[[Any, dict[str, Any]], tuple[str, Any, int | None]],
    fix: str = "Start a session of your own (an operator may write any)",
):
    """The `authorize` of an operation that writes an existing session (or, for a
    child, names one as its parent): `locate(db, fields)` finds it — (field, value,
    session n or None) — and only its owner or an operator may. A session that cannot be
    found passes: the operation itself refuses it by name (`bad-session`)."""

    def authorize(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
        may_record(kb, caller, fields)
        if caller.role == "operator":
            return
        schema.ready(kb)

        def owner(db: Any) -> tuple[str, Any, int | None, str | None]:
            field, value, session_n = locate(db, fields)
            if session_n is None:
                return field, value, None, None
            row = db.execute("SELECT owner FROM session WHERE n = ?", (session_n,)).fetchone()
            return field, value, session_n, row[0] if row else None

        field, value, session_n, started_by = kb.read_records(owner)
        if session_n is not None and started_by != caller.id:
            who = f"was started by {started_by}" if started_by else "has no recorded owner"
            raise Refused(
                "koinii/foreign-session",
                f"{caller.id} writes only the sessions it started; the session of {field} "
                f"{value!r} {who}. {fix}",
                {"agent": caller.id, "field": field, "owner": started_by},
            )

    return authorize


def _found(db: Any, sql: str, value: Any) -> Any:
    if not isinstance(value, str):
        return None
    row = db.execute(sql, (value,)).fetchone()
    return row[0] if row else None


def _by_session(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("session_id")
    return "session_id", value, _found(db, "SELECT n FROM session WHERE id = ?", value)


def _by_turn(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("turn_id")
    turn_n = _found(db, "SELECT n FROM turn WHERE id = ?", value)
    return "turn_id", value, None if turn_n is None else schema.session_of(turn_n)


def _by_iteration(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("iteration_id")
    turn_n = _found(
        db,
        "SELECT a.turn_n FROM iteration i JOIN attempt a ON a.n = i.attempt_n WHERE i.id = ?",
        value,
    )
    return "iteration_id", value, None if turn_n is None else schema.session_of(turn_n)


def _by_parent(db: Any, fields: dict[str, Any]) -> tuple[str, Any, int | None]:
    value = fields.get("parent_session_id")
    return "parent_session_id", value, _found(db, "SELECT n FROM session WHERE id = ?", value)


writes_session = _owned_by(_by_session)
writes_turn = _owned_by(_by_turn)
writes_iteration = _owned_by(_by_iteration)
starts_session = _owned_by(
    _by_parent,
    "A child session goes under a session you started: name one of yours as "
    "parent_session_id, or leave it out to start a top-level session",
)
