"""The MCP server's tools, a module per concern; each module's `register(tool, the)`
adds its tools to the server (`koinii.mcp.server.build_server`)."""

from koinii.mcp.tools import feed, moves, reads, sessions, wraps

MODULES = (moves, reads, feed, wraps, sessions)
