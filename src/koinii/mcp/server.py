"""The MCP server, assembled: one joined `Agent`, its feed and session, and the tools of
`koinii.mcp.tools` registered on the official SDK's FastMCP server over stdio.

Every tool is registered through `tool` here: its docstring dedented as its description,
a refusal returned as a tool error (`kind: message Fix: …`, the refusal as data), and the
call recorded into the agent's session when `--record` is on. A call whose arguments do
not fit a tool's schema is refused the same way (`_Server`).
"""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Callable
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import ValidationError

from koinii._version import __version__
from koinii.channel.agent import Agent, join, local, wire
from koinii.channel.news import Feed
from koinii.errors import KoiniiError
from koinii.mcp import tools
from koinii.mcp.instructions import INSTRUCTIONS, SESSION_INSTRUCTIONS
from koinii.mcp.replies import argument_refusal, refusal_text, tool_error
from koinii.mcp.sessions import Sessions
from koinii.mcp.surface import Surface
from koinii.projects import project_of


class _Server(FastMCP):
    """The SDK's server, with a call whose arguments do not fit a tool's schema refused
    as every other call is (`kind: message Fix: …`, with structured data), where the SDK
    answers with its validator's report; and introducing itself at Koinii's version,
    where the SDK gives its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mcp_server.version = __version__

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                return tool_error(argument_refusal(name, error.__cause__))
            raise


def build_server(
    agent_id: str,
    channel: str,
    *,
    url: str | None = None,
    token: str | None = None,
    db: str | None = None,
    introspection: bool = False,
    session: str | None = None,
    record: bool = False,
    project: str | None = None,
    directory: str | None = None,
):
    """The FastMCP server for one agent (joined now, so a bad channel fails at start).

    Its project — the `project_id` its wraps and its recorded session carry unless a
    call names one — is `project`, else the one `directory` (default: the server's
    working directory) belongs to, by the rule of koinii/projects.py."""
    from koinii.client.sync import connect
    from koinii.kb import open_kb

    if url is not None:
        medium = wire(connect(url, token=token))
    else:
        medium = local(open_kb(db))
    agent: Agent = join(medium, channel, agent_id)
    store = agent.store
    if project is None:
        project = project_of(directory if directory is not None else os.getcwd())
    sessions = Sessions(store, session, record, project) if (introspection or record) else None
    instructions = INSTRUCTIONS.format(agent=agent_id, channel=channel)
    if introspection:
        instructions += SESSION_INSTRUCTIONS
    server = _Server("koinii", instructions=instructions, log_level="WARNING")
    feed = Feed(agent)

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register `fn` with its docstring dedented, refusals as tool errors, and each
        call recorded into the agent's session when --record is on."""
        name = fn.__name__
        description = inspect.cleandoc(fn.__doc__ or "")

        def record(arguments: dict[str, Any], result: Any, failed: bool) -> None:
            if sessions is not None and sessions.recording:
                sessions.record(name, arguments, result, failed)

        if inspect.iscoroutinefunction(fn):

            async def call_async(**arguments: Any) -> Any:
                try:
                    result = await fn(**arguments)
                except KoiniiError as error:
                    record(arguments, refusal_text(error)[1], True)
                    return tool_error(error)
                record(arguments, result, False)
                return result

            call: Callable[..., Any] = call_async
        else:

            def call_sync(**arguments: Any) -> Any:
                try:
                    result = fn(**arguments)
                except KoiniiError as error:
                    record(arguments, refusal_text(error)[1], True)
                    return tool_error(error)
                record(arguments, result, False)
                return result

            call = call_sync
        # resolved, validators and all: the SDK builds its schemas from them
        hints = typing.get_type_hints(fn, include_extras=True)
        signature = inspect.signature(fn)
        call.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[
                p.replace(annotation=hints.get(p.name, p.annotation))
                for p in signature.parameters.values()
            ],
            return_annotation=hints.get("return", signature.return_annotation),
        )
        call.__annotations__ = hints
        call.__name__ = name
        server.add_tool(call, name=name, description=description, structured_output=True)
        return fn

    the = Surface(
        agent=agent,
        agent_id=agent_id,
        channel=channel,
        project=project,
        session=session,
        feed=feed,
        sessions=sessions,
        introspection=introspection,
    )
    for module in tools.MODULES:
        module.register(tool, the)

    # what `run` calls when the server ends: the recorded tool calls still buffered
    server.koinii_flush = sessions.flush if sessions is not None else lambda: None
    return server


def run(agent_id: str, channel: str, **options: Any) -> None:
    """Serve over stdio until the client closes the pipe; then write what `--record`
    has buffered."""
    server = build_server(agent_id, channel, **options)
    try:
        server.run(transport="stdio")
    finally:
        server.koinii_flush()
