"""An MCP agent's own session: what the session tools read by default, and where
`--record` writes each tool call."""

from __future__ import annotations

import json
import uuid
from typing import Any

from koinii.errors import Refused


class Sessions:
    """The agent's own session: the default target of the session tools, and where
    `--record` writes each tool call as a turn — through a `SessionRecorder`, so the
    calls are written in batches (sessions.md, "Recording in batches"): a session read
    and the server's end flush what is buffered.

    `--session NAME --record` starts the session NAME names when none does yet (issue
    39): a lead names its session before it starts, so its workers can file their wraps
    into it from the first minute. The name becomes the session's id where it is one (a
    lowercase UUID, such as a runtime's own session id), else its external id — either
    way the name resolves to it afterwards (reading.py `resolve`). It is written at once,
    not batched: others look it up by name as soon as the server is up."""

    def __init__(self, store: Any, session: str | None, record: bool, project: str | None) -> None:
        from koinii.sessions import Introspection, SessionStore

        self.store = SessionStore(store)
        self.recording = record
        self.recorder = self.store.recorder() if record else None
        if session is None and record:
            session = self.recorder.start_session(
                channel="mcp", title="an agent's tool calls", project_id=project
            )
        elif session is not None:
            found = self._named(session)
            if found is None and record:
                found = self._start_named(session, project)
            if found is None:
                raise Refused(
                    "koinii/no-session",
                    f"there is no session {session!r} to read: give the id of a stored "
                    "session, add --record to start one by that name, or leave --session out",
                    {"session": session},
                )
            session = found
        self.session = session
        self.reads = Introspection(self.store, current_session_id=session, enabled=True)

    def _named(self, name: str) -> str | None:
        """The id of the session `name` names (an id, a prefix, an external id), if any."""
        found = self.store.call("get_session", target=name)
        return found["id"] if found else None

    def _start_named(self, name: str, project: str | None) -> str | None:
        """Start the session `name` names; the id it has (another server started with
        the same name a moment before wins, and this one records into that one)."""
        try:
            as_id = str(uuid.UUID(name)) == name
        except ValueError:
            as_id = False
        named = {"id": name} if as_id else {"external_id": name}
        try:
            return self.store.call(
                "start_session", channel="mcp", title=name, project_id=project, **named
            )
        except Refused:
            found = self._named(name)
            if found is None:
                raise
            return found

    def target(self, target: str | None) -> str | None:
        """The session a read names (the agent's own by default), with what is recorded
        so far written first: a read sees every call before it."""
        self.flush()
        return target if target is not None else self.session

    def flush(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()

    def record(self, tool: str, arguments: dict[str, Any], result: Any, failed: bool) -> None:
        if self.session is None or self.recorder is None:
            return
        request = f"{tool}({json.dumps(arguments, default=str)})"
        turn = self.recorder.start_turn(self.session, request)
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        if failed:
            self.recorder.finish_turn(turn, "error", "error", error=text[:4000])
        else:
            self.recorder.finish_turn(turn, "done", "complete", answer=text[:4000])
