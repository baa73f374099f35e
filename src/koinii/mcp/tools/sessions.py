"""The MCP tools that read past sessions (introspection, off by default): read_session,
get_session, list_sessions — the agent's own session by default."""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.mcp.replies import clipped, listed, once, window_of, within_reply
from koinii.mcp.surface import Register, Surface


def register(tool: Register, the: Surface) -> None:
    """The session tools, when introspection is on."""

    sessions = the.sessions
    if not the.introspection or sessions is None:
        return
    reads = sessions.reads

    @tool
    def read_session(
        target: str | None = None, turns: int = 5, before: int | None = None
    ) -> dict[str, Any]:
        """One session — your own by default: its last `turns` turns (at most 100;
        each of your tool calls is a turn), each once, in transcript.turns, with their
        failures, and the whole session's summaries (current turn, diagnosis, usage).
        A text longer than 2,000 characters is cut, saying how much more there was,
        and a reply past 40,000 characters shows fewer turns.
        Example: read_session(turns=3). Returns that object, and `older` when there are
        earlier turns: read_session(turns=3, before=older) reads the ones before."""
        if before is not None and before < 1:
            raise Refused(
                "bad-option",
                "before is a turn's position, a positive integer: pass the `older` "
                "a read_session reply gave",
                {"option": "before"},
            )
        window = window_of(turns)
        found = reads.read_session(sessions.target(target), turns=window, before=before)
        if found["session"] is None:
            none = (
                "no session matches that target: list_sessions() shows them"
                if target is not None
                else "you have no session of your own (start koinii mcp with --session ID "
                "or --record); name one as target"
            )
            return {**found, "note": none}
        return within_reply(clipped(once(found)))

    @tool
    def get_session(target: str | None = None) -> dict[str, Any]:
        """One session's descriptor — your own by default: id, title, turn count, model.
        Example: get_session(target="3f2a"). Returns {session} (null when none matches)."""
        found = reads.get_session(sessions.target(target))
        return {"session": found, **({} if found else {"note": "no such session"})}

    @tool
    def list_sessions(search: str | None = None, limit: int = 20) -> dict[str, Any]:
        """Past sessions, newest first — the first `limit` (at most 100); with
        `search`, ranked by where the words appear (title, request, reply, thinking,
        tool results) and, where the server ranks by meaning, by closeness in meaning
        too (is_by_meaning) — keep the order given.
        Example: list_sessions(search="flaky test"). Returns {sessions, count}, and
        `more` when there are others (search narrows them)."""
        sessions.flush()
        window = window_of(limit)
        found = reads.list_sessions(search, limit=window + 1)
        more = {"more": True} if len(found) > window else {}
        empty = "no sessions match" if search else "no sessions"
        return listed("sessions", found[:window], empty, **more)
