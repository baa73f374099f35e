"""Koinii inside the agent runtimes people use: Claude Code and Codex CLI (docs/runtimes.md).

Modules: `settings` merges Koinii's hooks and its MCP server into a runtime's settings
file and takes them out again (`koinii hooks install|uninstall|status`); `hooks` is what
the runtime runs (`koinii hook claude EVENT`, `koinii hook codex`): the runtime's
session becomes a Koinii session, its transcript is imported as it grows, the agent is
told what concerns it, and a wrap is filed when it ends; `state` is what the hooks keep
between runs, under the Koinii state directory.

An interface, like the MCP server: it speaks to the daemon (or a store in-process) as a
client, through the sessions, wraps and conversation layers.
"""
