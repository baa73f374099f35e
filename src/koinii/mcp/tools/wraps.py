"""The MCP tools of wraps: a worker files its wrap at the end of its session, a
coordinator permeates its workers' wraps (the one-session rule lives in `koinii.wraps`)."""

from __future__ import annotations

from typing import Any

from koinii.mcp.surface import Register, Surface


def register(tool: Register, the: Surface) -> None:
    """wrap_session and permeate."""
    agent, agent_id, project, session = the.agent, the.agent_id, the.project, the.session

    @tool
    def wrap_session(
        session_id: str,
        parent_session_id: str | None = None,
        notes: list[str] | None = None,
        decisions: list[str] | None = None,
        conventions: list[str] | None = None,
        project_id: str | None = None,
    ) -> dict[str, Any]:
        """At the end of your session: record your notes, decisions and conventions and
        file a wrap for the coordinator that spawned you (`parent_session_id`: its
        session). A top-level coordinator leaves parent_session_id out to wrap its own.
        project_id defaults to this server's project (its --project, or the git
        repository it runs in, e.g. shop:services:checkout).
        Example: wrap_session(session_id="s-42", parent_session_id="s-lead",
        notes=["Prod runs PostgreSQL 16"]). Returns the wrap."""
        from koinii.wraps import wrap_session as wrap

        return wrap(
            agent,
            session_id=session_id,
            parent_session_id=parent_session_id,
            project_id=project_id if project_id is not None else project,
            notes=notes or (),
            decisions=decisions or (),
            conventions=conventions or (),
        )

    @tool
    def permeate(session_id: str | None = None) -> dict[str, Any]:
        """As a coordinator: collect the unprocessed wraps filed into your session (the
        parent_session_id your workers gave), mark them processed, and return what your
        workers recorded. Your first permeate makes that session yours — you coordinate
        one session, and no other agent can take its wraps; your own --session by
        default. Example: permeate(session_id="s-lead"). Returns {processed, wraps,
        entries, …}."""
        from koinii.wraps import coordinate

        return coordinate(
            agent, agent_id, session_id=session_id, default_session=session, project_id=project
        )
