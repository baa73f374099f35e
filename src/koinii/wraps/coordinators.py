"""The coordinator registry: which coordinator runs which session, and is it alive.

A coordinator registers its session here so the daemon can tell whose wraps are whose:
a wrap that permeates into a registered coordinator's session is consumed by that
coordinator only (wraps.md §3, §4).

Invariants:
- A coordinator id is also the principal it runs as (e.g. `AgentCoordA`), and a session
  belongs to at most one coordinator (registering another's session is refused), so
  "the coordinator of this wrap" is always one principal. Over the daemon an agent
  registers only a session it owns (access.py `check_coordinator_session`).
- Status moves `active` → `stale` (no heartbeat for a while) → `active` again on a
  heartbeat; `terminated` is set explicitly and a heartbeat does not revive it.
- Calls on an unknown id return None and write nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from koinii.errors import Refused
from koinii.kb import KB
from koinii.operations import Caller, invoker, operation
from koinii.wraps import access, checks, store

STALE_AFTER_MS = 120_000  # a coordinator silent this long is stale (cleanup_stale's default)
_ID = {"coordinator_id": ("any", False, "the coordinator, which is also its principal id")}


def _row(connection: store.Records, coordinator_id: str) -> dict[str, Any] | None:
    row = connection.execute(
        f"SELECT {store.COORDINATOR_COLUMNS} FROM wrap_coordinator WHERE coordinator_id = ?",
        (coordinator_id,),
    ).fetchone()
    return None if row is None else store.coordinator_of(row)


def _authorize_own(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    access.require_writer(caller, "change the coordinator registry")
    access.require_own_coordinator(caller, fields.get("coordinator_id"))


# --- writes -----------------------------------------------------------------------------


def _authorize_register(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    access.require_writer(caller, "register a coordinator")
    access.require_self(caller, fields.get("coordinator_id"), "coordinator_id")
    access.check_coordinator_session(kb, caller, fields.get("session_id"))


@operation(
    "wraps.coordinators.register",
    fields={
        **_ID,
        "project_id": ("any", False, "the project it coordinates (required)"),
        "session_id": ("any", False, "its session, which its lings' wraps permeate into"),
        "pid": ("any", False, "its process id"),
    },
    summary="register (or re-register) a coordinator as active",
    authorize=_authorize_register,
)
def _register(
    kb: KB,
    coordinator_id: Any = None,
    project_id: Any = None,
    session_id: Any = None,
    pid: Any = None,
) -> dict[str, Any]:
    coordinator_id = checks.identifier(coordinator_id, "coordinator_id", "bad-coordinator")
    project_id = checks.identifier(project_id, "project_id", "bad-coordinator")
    session_id = checks.identifier(session_id, "session_id", "bad-coordinator")
    pid = checks.pid(pid)

    def records(connection: store.Records, _handles: list[Any]) -> dict[str, Any]:
        holder = connection.execute(
            "SELECT coordinator_id FROM wrap_coordinator WHERE session_id = ?", (session_id,)
        ).fetchone()
        if holder is not None and holder[0] != coordinator_id:
            raise Refused(
                "bad-coordinator",
                f"session {session_id!r} belongs to coordinator {holder[0]}",
                {"field": "session_id", "value": session_id, "holder": holder[0]},
            )
        now = store.now_ms()
        connection.execute(
            "INSERT INTO wrap_coordinator (coordinator_id, project_id, pid, session_id, status, "
            "registered_at, heartbeat_at) VALUES (?, ?, ?, ?, 'active', ?, ?) "
            "ON CONFLICT (coordinator_id) DO UPDATE SET project_id = excluded.project_id, "
            "pid = excluded.pid, session_id = excluded.session_id, status = 'active', "
            "heartbeat_at = excluded.heartbeat_at",
            (coordinator_id, project_id, pid, session_id, now, now),
        )
        return _row(connection, coordinator_id)

    result, _ = store.write(
        kb,
        "wraps.coordinators.register",
        records,
        summary={"coordinator_id": coordinator_id, "status": "active"},
    )
    return result


def _change(kb: KB, op: str, coordinator_id: Any, sql: str, params: tuple[Any, ...]) -> Any:
    """Run `sql` on a known coordinator and return its record after; None if unknown."""
    coordinator_id = checks.identifier(coordinator_id, "coordinator_id", "bad-coordinator")

    def records(connection: store.Records, _handles: list[Any]) -> dict[str, Any]:
        if _row(connection, coordinator_id) is None:
            raise store.Unchanged(None)
        connection.execute(sql, (*params, coordinator_id))
        return _row(connection, coordinator_id)

    result, _ = store.write(kb, op, records, summary={"coordinator_id": coordinator_id})
    return result


@operation(
    "wraps.coordinators.heartbeat",
    fields=_ID,
    summary="record that a coordinator is alive (a stale one becomes active)",
    authorize=_authorize_own,
)
def _heartbeat(kb: KB, coordinator_id: Any = None) -> dict[str, Any] | None:
    return _change(
        kb,
        "wraps.coordinators.heartbeat",
        coordinator_id,
        "UPDATE wrap_coordinator SET heartbeat_at = ?, "
        "status = CASE status WHEN 'stale' THEN 'active' ELSE status END "
        "WHERE coordinator_id = ?",
        (store.now_ms(),),
    )


@operation(
    "wraps.coordinators.set_status",
    fields={**_ID, "status": ("any", False, "active | stale | terminated (required)")},
    summary="set a coordinator's status",
    authorize=_authorize_own,
)
def _set_status(kb: KB, coordinator_id: Any = None, status: Any = None) -> dict[str, Any] | None:
    status = checks.status(status)
    return _change(
        kb,
        "wraps.coordinators.set_status",
        coordinator_id,
        "UPDATE wrap_coordinator SET status = ? WHERE coordinator_id = ?",
        (status,),
    )


@operation(
    "wraps.coordinators.remove",
    fields=_ID,
    summary="remove a coordinator's record; returns it, or null if unknown",
    authorize=_authorize_own,
)
def _remove(kb: KB, coordinator_id: Any = None) -> dict[str, Any] | None:
    coordinator_id = checks.identifier(coordinator_id, "coordinator_id", "bad-coordinator")

    def records(connection: store.Records, _handles: list[Any]) -> dict[str, Any]:
        record = _row(connection, coordinator_id)
        if record is None:
            raise store.Unchanged(None)
        connection.execute(
            "DELETE FROM wrap_coordinator WHERE coordinator_id = ?", (coordinator_id,)
        )
        return record

    result, _ = store.write(
        kb, "wraps.coordinators.remove", records, summary={"coordinator_id": coordinator_id}
    )
    return result


def _authorize_cleanup(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    # Any writer may apply the staleness rule: it changes only a status, and a
    # heartbeat from a live coordinator sets it back. An agent applies the rule as it
    # stands: with threshold_ms=0 it marked every live coordinator stale, and a stale
    # lead's next permeate no longer found the session it holds (issue 37).
    access.require_writer(caller, "mark coordinators stale")
    threshold_ms = fields.get("threshold_ms")
    if caller.is_agent and type(threshold_ms) is int and threshold_ms < STALE_AFTER_MS:
        raise Refused(
            "bad-option",
            f"an agent marks coordinators stale after {STALE_AFTER_MS} ms without a "
            f"heartbeat, not {threshold_ms}: a shorter threshold would mark live "
            "coordinators stale. Leave threshold_ms out (an operator may choose one)",
            {"option": "threshold_ms", "value": threshold_ms, "least": STALE_AFTER_MS},
        )


@operation(
    "wraps.coordinators.cleanup_stale",
    fields={"threshold_ms": ("any", False, "heartbeat age that makes one stale (120000)")},
    summary="mark active coordinators without a recent heartbeat stale; returns their ids",
    authorize=_authorize_cleanup,
)
def _cleanup_stale(kb: KB, threshold_ms: Any = None) -> list[str]:
    threshold_ms = checks.threshold(STALE_AFTER_MS if threshold_ms is None else threshold_ms)

    def records(connection: store.Records, _handles: list[Any]) -> list[str]:
        cutoff = store.now_ms() - threshold_ms
        ids = [
            row[0]
            for row in connection.execute(
                "SELECT coordinator_id FROM wrap_coordinator "
                "WHERE status = 'active' AND heartbeat_at < ? ORDER BY coordinator_id",
                (cutoff,),
            )
        ]
        if not ids:
            raise store.Unchanged([])
        connection.executemany(
            "UPDATE wrap_coordinator SET status = 'stale' WHERE coordinator_id = ?",
            [(i,) for i in ids],
        )
        return ids

    result, _ = store.write(
        kb, "wraps.coordinators.cleanup_stale", records, summary={"threshold_ms": threshold_ms}
    )
    return result


# --- reads ------------------------------------------------------------------------------


@operation(
    "wraps.coordinators.get",
    fields=_ID,
    summary="one coordinator, or null",
    schedule="records_read",
    prepare=store.ensure,
)
def _get(kb: KB, coordinator_id: Any = None) -> dict[str, Any] | None:
    coordinator_id = checks.identifier(coordinator_id, "coordinator_id", "bad-coordinator")
    return store.read(kb, lambda connection: _row(connection, coordinator_id))


@operation(
    "wraps.coordinators.list",
    fields={
        "status": ("any", False, "only this status: active | stale | terminated"),
        "project_id": ("any", False, "only this project"),
    },
    summary="coordinators, by registration time",
    schedule="records_read",  # as many as were registered: off the loop
    prepare=store.ensure,
)
def _list(kb: KB, status: Any = None, project_id: Any = None) -> list[dict[str, Any]]:
    where, params = [], []
    if status is not None:
        where.append("status = ?")
        params.append(checks.status(status))
    if project_id is not None:
        where.append("project_id = ?")
        params.append(checks.identifier(project_id, "project_id", "bad-option"))
    sql = f"SELECT {store.COORDINATOR_COLUMNS} FROM wrap_coordinator"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY registered_at, coordinator_id"
    return store.read(
        kb, lambda connection: [store.coordinator_of(r) for r in connection.execute(sql, params)]
    )


# --- the registry -----------------------------------------------------------------------


class Coordinators:
    """The coordinator registry of a `KB` or, through the daemon, of a `Client` (§3)."""

    def __init__(self, source: Any) -> None:
        self._call = invoker(source)

    def register(
        self,
        coordinator_id: str,
        *,
        project_id: str,
        pid: int | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Register as `active` (again: a new run). The session id defaults to a uuid4,
        chosen here so that a resent request registers the same session."""
        return self._call(
            "wraps.coordinators.register",
            coordinator_id=coordinator_id,
            project_id=project_id,
            pid=pid,
            session_id=str(uuid.uuid4()) if session_id is None else session_id,
        )

    def heartbeat(self, coordinator_id: str) -> dict[str, Any] | None:
        return self._call("wraps.coordinators.heartbeat", coordinator_id=coordinator_id)

    def get(self, coordinator_id: str) -> dict[str, Any] | None:
        return self._call("wraps.coordinators.get", coordinator_id=coordinator_id)

    def list(
        self, status: str | None = None, project_id: str | None = None
    ) -> list[dict[str, Any]]:
        return self._call("wraps.coordinators.list", status=status, project_id=project_id)

    def mark_stale(self, coordinator_id: str) -> dict[str, Any] | None:
        return self._call(
            "wraps.coordinators.set_status", coordinator_id=coordinator_id, status="stale"
        )

    def mark_terminated(self, coordinator_id: str) -> dict[str, Any] | None:
        return self._call(
            "wraps.coordinators.set_status", coordinator_id=coordinator_id, status="terminated"
        )

    def remove(self, coordinator_id: str) -> dict[str, Any] | None:
        """Forget a coordinator; returns its last record. Its wraps stay in the queue."""
        return self._call("wraps.coordinators.remove", coordinator_id=coordinator_id)

    def cleanup_stale(self, threshold_ms: int = STALE_AFTER_MS) -> list[str]:
        """Active coordinators whose last heartbeat is older than `threshold_ms` → stale."""
        return self._call("wraps.coordinators.cleanup_stale", threshold_ms=threshold_ms)
