"""The channel's roster: who is on it, in what role, in which session, and where to file
a wrap — one read, so a worker finds its coordinator's session without asking.

Each member (an agent whose own context the channel sees, conversation.members) comes
with its `role` (its token's, over a daemon: agent or arbiter; None in one process,
where there are no tokens), its `session` (the newest session it started or imported,
sessions.md) and its `coordinator_session` (where its wraps go: its session's parent,
else the session of the one active coordinator on the channel). The channel's active
coordinators are listed beside, each with its session.

Two reads, which the daemon runs as such (schedule "read_then_records", docs/daemon.md,
bounded work): who the members are and their roles, from the KB — a slice of the loop,
then a forked snapshot — then their sessions and the coordinators, from the record
tables on a thread, through a connection of its own (a snapshot does not touch them),
in one statement each (the members' sessions, 500 members a statement), within what is
left of the read budget. It ran whole on the loop, a statement per member that read
every session: 300 members and 20,000 sessions held everyone 0.7 s per roster (issue
37). The members' newest sessions are found by the index by owner, a probe per member;
the one statement that replaced those ranked every session by owner (300,000 sessions:
the roster's whole budget, whoever owned them).
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
    return with_sessions(kb, members_of(kb, channel))


def members_of(kb: Any, channel: Any) -> dict[str, Any]:
    """The KB's part: `{channel, members, roles}` (roles: of the members that have one)."""
    names = conversation.members(kb, channel)
    roles = identity.principal_roles(kb)
    return {
        "channel": context_name(channel),
        "members": names,
        "roles": {name: roles[name] for name in names if name in roles},
    }


def ready(kb: Any) -> None:
    """The record tables the roster reads, created if new (a write: on the loop)."""
    sessions_schema.ready(kb)
    wraps_store.ensure(kb)


def with_sessions(kb: Any, found: dict[str, Any]) -> dict[str, Any]:
    """The roster of `found` (`members_of`'s), from the record tables."""
    ready(kb)  # (done already, over a daemon: by its `prepare`, on the loop)
    names = found["members"]

    def read(db: Any) -> tuple[dict[str, tuple[str, str | None]], list[tuple[str, str, str]]]:
        latest: dict[str, tuple[str, str | None]] = {}
        for start in range(0, len(names), _PER_STATEMENT):
            some = names[start : start + _PER_STATEMENT]
            for owner, session, parent in db.execute(latest_of(len(some)), some):
                latest[owner] = (session, parent)
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
                "role": found["roles"].get(agent),
                "session": session,
                "coordinator_session": coordinator,
            }
        )
    return {
        "channel": found["channel"],
        "members": members,
        "coordinators": [{"coordinator": c, "session": s, "status": st} for c, s, st in on_channel],
    }


_PER_STATEMENT = 500  # members a statement looks up (a statement's parameters are capped)


def latest_of(owners: int) -> str:
    """The statement of `owners` owners' newest sessions and their parents' ids: one probe
    of the index by owner (`session_owner`, sessions schema version 5) per owner."""
    members = " UNION ALL ".join(["SELECT ? AS owner"] * owners)
    return (
        "SELECT s.owner, s.id, p.id FROM session s LEFT JOIN session p "
        "ON p.n = s.parent_session_n WHERE s.n IN (SELECT (SELECT t.n FROM session t "
        "WHERE t.owner = m.owner ORDER BY t.modified_at DESC, t.n DESC LIMIT 1) "
        f"FROM ({members}) AS m)"
    )


@operation(
    "conversation.roster",
    fields={"channel": ("string", True, "the channel context, e.g. CxTeam")},
    summary="who is on the channel: each member's role, session and coordinator's session",
    schedule="read_then_records",
    then=with_sessions,
    prepare=ready,
)
def _roster(kb: Any, channel: Any = None) -> dict[str, Any]:
    return members_of(kb, channel)
