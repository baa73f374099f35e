"""`koinii mcp` introduces itself as Koinii at Koinii's version (the MCP SDK gave its
own: "koinii 1.30.0"), over the SDK's own stdio client against a real daemon."""

from __future__ import annotations

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import koinii


def test_koinii_mcp_reports_koiniis_version_not_the_sdks(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "koinii", "mcp", "--agent", "AgentAtlas", "--channel", "CxTeam"],
        env={**os.environ, "KOINII_URL": daemon.url, "KOINII_TOKEN": daemon.tokens["AgentAtlas"]},
    )

    async def introduced():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return (await session.initialize()).serverInfo

    server = asyncio.run(introduced())
    assert (server.name, server.version) == ("koinii", koinii.__version__)
