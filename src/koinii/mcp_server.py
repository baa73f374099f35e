"""An MCP server that lets an LLM agent (Claude Code, Cursor, any MCP client) be a Koinii
agent: join a channel, make moves, read the conversation, wrap and permeate sessions.

Built on the official `mcp` Python SDK (FastMCP) over stdio. The server is one joined
`Agent`: every tool is one call on it (or on the wraps / sessions layer), and a refusal
comes back as a tool error whose text starts with the refusal's kind, so the model can
read what went wrong and correct itself.

Invariant: the session tools (`read_session`, `get_session`, `list_sessions`) exist
only when introspection is switched on (off by default, sessions.md §3).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from koinii.channel import Agent, answer_content, join, local, speaker_of, wire
from koinii.errors import KoiniiError, Refused
from koinii.kb import Sentex
from koinii.terms import show

INSTRUCTIONS = """\
You are an agent on a Koinii channel: a shared knowledge base where every claim, question
and reply is a sentence stored with its author. Sentences are s-expressions:
  (usesDatabase ProdCluster Postgres)      a claim: predicate first, then arguments
  (not (ready Release))                    a negation
Naming: predicates lowerCamelCase (usesDatabase), individuals CapitalCamelCase
(ProdCluster, AgentAtlas), contexts Cx + CapitalCamelCase (CxDeploy), strings in double
quotes ("any text"), numbers as is. Variables in queries start with ? (?db).
Replies name their target by its handle (an integer every write returns). You write only
your own context; your moves are visible to everyone on the channel. A refused call
returns an error starting with its kind (e.g. naming, koinii/speaker-mismatch): fix the
input and call again."""


def _describe(sentex: Sentex) -> dict[str, Any]:
    return {"handle": sentex.handle, "sentence": sentex.text, "context": sentex.context}


def _refusals_as_tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A refusal becomes the tool error `kind: message` (the SDK marks it isError)."""
    from mcp.server.fastmcp.exceptions import ToolError

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Refused as refusal:
            raise ToolError(f"{refusal.kind}: {refusal.message}") from None
        except KoiniiError as error:
            raise ToolError(f"unavailable: {error}") from None

    return call


def build_server(
    agent_id: str,
    channel: str,
    *,
    url: str | None = None,
    token: str | None = None,
    db: str | None = None,
    introspection: bool = False,
):
    """The FastMCP server for one agent (joined now, so a bad channel fails at start)."""
    from mcp.server.fastmcp import FastMCP

    import koinii

    if url is not None:
        medium = wire(koinii.connect(url, token=token))
    else:
        medium = local(koinii.open_kb(db))
    agent: Agent = join(medium, channel, agent_id)
    store = agent.store
    server = FastMCP("koinii", instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
        return server.tool()(_refusals_as_tool_errors(fn))

    @tool
    def claim(sentence: str) -> int:
        """State a claim in your own context, e.g. (usesDatabase ProdCluster Postgres).
        Returns its handle."""
        return agent.assert_(sentence)

    @tool
    def pose_query(question: str) -> int:
        """Ask the channel a question: a symbol naming it, e.g. WhichDbProdClusterUses.
        Others answer it by its handle, which this returns."""
        return agent.pose_query(question)

    @tool
    def answer(content: str, target: int) -> int:
        """Answer the query with handle `target`; content is a term, e.g. PostgreSQL14 or
        "free text in quotes"."""
        return agent.answer(content, target)

    @tool
    def endorse(target: int) -> int:
        """Stand behind the claim with handle `target`."""
        return agent.endorse(target)

    @tool
    def justify(ground: str, target: int) -> int:
        """Offer `ground` (a term, e.g. ReleaseNotesSayPg14) as a reason for claim `target`."""
        return agent.justify(ground, target)

    @tool
    def dispute(target: int) -> int:
        """Challenge the claim with handle `target`: stores its negation and the dispute."""
        return agent.dispute(target)

    @tool
    def vote(stance: str, target: int) -> int:
        """Vote "for" or "against" the claim with handle `target` (one ballot per stance)."""
        return agent.vote(stance, target)

    @tool
    def open_queries() -> list[dict[str, Any]]:
        """Every question on the channel: handle, who asked, the question."""
        return [
            {**_describe(s), "speaker": speaker_of(s), "question": show(s.sentence[2])}
            for s in agent.open_queries()
        ]

    @tool
    def answers_to(query: int) -> list[dict[str, Any]]:
        """The answers to the query with handle `query`: who answered and what."""
        return [
            {**_describe(s), "speaker": speaker_of(s), "content": show(answer_content(s))}
            for s in agent.answers_to(query)
        ]

    @tool
    def endorsements_of(target: int) -> list[dict[str, Any]]:
        """Who stands behind the claim with handle `target`."""
        return [{**_describe(s), "speaker": speaker_of(s)} for s in agent.endorsements_of(target)]

    @tool
    def query(goal: str, context: str | None = None) -> list[dict[str, str]]:
        """Solutions of a goal with ?variables, e.g. (usesDatabase ?cluster ?db), read
        through the channel (or `context`). Each solution maps variables to values."""
        solutions = agent.query(goal, context or channel)
        return [{name: show(value) for name, value in s.items()} for s in solutions]

    @tool
    def recent_changes(since: int = 0, limit: int = 100) -> dict[str, Any]:
        """What changed after global seq `since`: entries of added/removed sentences.
        Keep the returned `seq` and pass it as `since` next time."""
        return store.changes(since=since, limit=limit)

    @tool
    def wrap_session(
        session_id: str,
        parent_session_id: str,
        notes: list[str] | None = None,
        decisions: list[str] | None = None,
        conventions: list[str] | None = None,
        project_id: str | None = None,
    ) -> dict[str, Any]:
        """At the end of your session: record your notes, decisions and conventions and
        file a wrap for your coordinator's session (`parent_session_id`)."""
        from koinii.wraps import wrap_session as wrap

        return wrap(
            agent,
            session_id=session_id,
            parent_session_id=parent_session_id,
            project_id=project_id,
            notes=notes or (),
            decisions=decisions or (),
            conventions=conventions or (),
        )

    @tool
    def permeate(session_id: str | None = None, project_id: str | None = None) -> dict[str, Any]:
        """As a coordinator: collect the unprocessed wraps of your session (or project),
        mark them processed, and return what your workers recorded."""
        from koinii.wraps import permeate as collect

        result = collect(agent, session_id=session_id, project_id=project_id)
        return {**result, "entries": [_describe(s) for s in result["entries"]]}

    if introspection:
        from koinii.sessions import Introspection, SessionStore

        reads = Introspection(SessionStore(store))

        @server.tool()
        def read_session(target: str | None = None) -> dict[str, Any]:
            """One session in full (default: the current one): turns, failures, usage."""
            return reads.read_session(target)

        @server.tool()
        def get_session(target: str | None = None) -> dict[str, Any] | None:
            """One session's descriptor: id, title, turn count, model, last turn."""
            return reads.get_session(target)

        @server.tool()
        def list_sessions(search: str | None = None) -> list[dict[str, Any]]:
            """Past sessions, newest first; with `search`, ranked: title, request, reply,
            thinking. Keep the order given."""
            return reads.list_sessions(search)

    return server


def run(agent_id: str, channel: str, **options: Any) -> None:
    """Serve over stdio until the client closes the pipe."""
    build_server(agent_id, channel, **options).run(transport="stdio")
