"""What a tool module is given to register its tools: the server's joined agent and what
it was started with (`Surface`), and the decorator that adds a tool (`Register`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from koinii.channel.agent import Agent
from koinii.channel.news import Feed
from koinii.mcp.sessions import Sessions

# `@tool`: register the function as a tool, its docstring its description (server.py).
Register = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class Surface:
    """One MCP server's agent and settings, as its tools see them."""

    agent: Agent  # joined to `channel`: every move and read is one call on it
    agent_id: str
    channel: str
    project: str  # the project its wraps and recorded session carry by default
    session: str | None  # its own session (--session), if any
    feed: Feed
    sessions: Sessions | None  # its session store, when introspection or --record is on
    introspection: bool  # the session tools are on
