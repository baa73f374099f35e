"""The channel's roster: who is on it, in what role, in which session, and where to file
a wrap — one read, so a worker finds its coordinator's session without asking.

Each member (an agent whose own context the channel sees, conversation.members) comes
with its `role` (its token's, over a daemon: agent or arbiter; None in one process,
where there are no tokens), its `session` (the newest session it started or imported,
sessions.md) and its `coordinator_session` (where its wraps go: its session's parent,
else the session of the one active coordinator on the channel). The channel's active
coordinators are listed beside, each with its session.

The read runs on the single writer's loop (schedule "write", writing nothing): it reads
the session and coordinator tables, which a forked snapshot does not touch.
"""

from __future__ import annotations

from typing import Any

from koinii import identity
from koinii.channel import conversation
from koinii.kb.checks import context_name
from koinii.operations import operation
from koinii.sessions import schema as sessions_schema
from koinii.wraps import store as wraps_store

__all__ = ["roster"]


def roster(kb: Any, channel: Any) -> dict[str, Any]:
    """`{channel, members: [{agent, role, session, coordinator_session}], coordinators:
    [{coordinator, session, status}]}` (see the module docstring)."""
    names = conversation.members(kb, channel)
    roles = identity.principal_roles(kb)
    sessions_schema.ready(kb)
    wraps_store.ensure(kb)

    def read(db: Any) -> tuple[dict[str, tuple[str, str | None]], list[tuple[str, str, str]]]:
        latest: dict[str, tuple[str, str | None]] = {}
        for agent in names:
            row = db.execute(
                "SELECT s.id, p.id FROM session s LEFT JOIN session p "
                "ON p.n = s.parent_session_n WHERE s.owner = ? "
                "ORDER BY s.modified_at DESC, s.n DESC LIMIT 1",
                (agent,),
            ).fetchone()
            if row is not None:
                latest[agent] = (row[0], row[1])
        rows = db.execute(
            "SELECT coordinator_id, session_id, status FROM wrap_coordinator "
            "ORDER BY coordinator_id"
        ).fetchall()
        return latest, [tuple(r) for r in rows]

    latest, coordinators = kb.read_records(read)
    on_channel = [c for c in coordinators if c[0] in names and c[2] == "active"]
    lead = on_channel[0][1] if len(on_channel) == 1 else None
    members = []
    for agent in names:
        session, parent = latest.get(agent, (None, None))
        coordinator = parent if parent is not None else (lead if session != lead else None)
        members.append(
            {
                "agent": agent,
                "role": roles.get(agent),
                "session": session,
                "coordinator_session": coordinator,
            }
        )
    return {
        "channel": context_name(channel),
        "members": members,
        "coordinators": [{"coordinator": c, "session": s, "status": st} for c, s, st in on_channel],
    }


@operation(
    "conversation.roster",
    fields={"channel": ("string", True, "the channel context, e.g. CxTeam")},
    summary="who is on the channel: each member's role, session and coordinator's session",
)
def _roster(kb: Any, channel: Any = None) -> dict[str, Any]:
    return roster(kb, channel)
