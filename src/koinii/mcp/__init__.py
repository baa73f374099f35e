"""An MCP server that lets an LLM agent (Claude Code, Cursor, any MCP client) be a Koinii
agent: join a channel, hold the conversation, wait for news, wrap and permeate sessions.

Built on the official `mcp` Python SDK (FastMCP) over stdio. The server is one joined
`Agent`: every tool is one call on it (or on the wraps / sessions layer), written for a
model to read — what it does, when to use it, an example call, what comes back.

Where each part lives: the assembly and the tools' registration (`server`), what a model
is told when it connects (`instructions`), the tools by concern (`tools/`: moves, reads,
feed, wraps, sessions), the shapes of their arguments and replies (`replies`), the
agent's feed (`feed`) and own session (`sessions`).

Invariants:
- Every tool returns ONE JSON object (structured content, and the same JSON as text): a
  move's handle and what happened, or a read's result — a list always inside an object
  beside its `count`, and an empty result saying so in `note`.
- Every refusal comes back as a tool error whose text is `kind: message Fix: …` — the
  fix from `REFUSAL_FIXES`, in words a model can act on — with the refusal as data.
- `wait_for_changes` and `recent_changes` return a `cursor` that is the seq of the last
  change-log entry they looked at, so following it skips nothing and repeats nothing.
- The session tools (`read_session`, `get_session`, `list_sessions`) exist only when
  introspection is on (off by default, sessions.md §3); `--session` names the agent's
  own session, which they read by default and `--record` writes each tool call into.
- The server has a project (`--project`, else the git repository of its working
  directory: koinii/projects.py): `wrap_session` files under it unless told another.
"""

from koinii.mcp.instructions import INSTRUCTIONS
from koinii.mcp.replies import REFUSAL_FIXES, refusal_text
from koinii.mcp.server import build_server, run

__all__ = ["INSTRUCTIONS", "REFUSAL_FIXES", "build_server", "refusal_text", "run"]
