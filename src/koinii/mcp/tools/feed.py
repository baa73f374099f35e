"""The MCP tools that hear what changed: `recent_changes` (at once) and `wait_for_changes`
(a long wait that returns when something concerns the agent, instead of polling)."""

from __future__ import annotations

import math
from typing import Any

from koinii.channel.news import MAX_TOLD
from koinii.errors import Refused
from koinii.mcp.replies import MAX_WAIT_S, About, listed
from koinii.mcp.surface import Register, Surface


def register(tool: Register, the: Surface) -> None:
    """The feed's two tools."""
    feed = the.feed

    @tool
    def recent_changes(since: int = 0, limit: int = 100) -> dict[str, Any]:
        """What happened after change-log position `since`, told in words, oldest first.
        Pass the returned `cursor` as `since` next time: nothing is skipped or repeated.
        Example: recent_changes(since=0). Returns {changes, count, cursor}.
        To wait for news instead of polling, use wait_for_changes."""
        told, cursor = feed.read(since, min(max(limit, 1), MAX_TOLD), about=None)
        return listed("changes", told, "nothing changed after that cursor", cursor=cursor)

    @tool
    async def wait_for_changes(
        since: int | None = None, timeout_s: float = 20, about: About = "mine"
    ) -> dict[str, Any]:
        """Wait until something happens that concerns you, then return it — instead of
        sleeping and polling. `about`:
        - "mine" (default): answers to your questions, replies to your moves, rulings on your claims
        - "channel": any move on the channel
        - "questions": new or reopened questions
        `since`: a cursor from a previous reply (omit it to go on from the last one).
        `timeout_s`: at most 120 seconds; a longer wait stops at 120 and says so.
        Returns {changes, count, cursor}; after `timeout_s` with nothing, count is 0.
        Example: wait_for_changes(timeout_s=30)."""
        import anyio

        if not math.isfinite(timeout_s):
            raise Refused(
                "bad-option",
                f"timeout_s is a number of seconds, e.g. 30, not {timeout_s}",
                {"option": "timeout_s"},
            )
        seconds = min(max(float(timeout_s), 0.0), MAX_WAIT_S)
        told, cursor = await anyio.to_thread.run_sync(lambda: feed.wait(since, seconds, about))
        quiet = {
            "mine": "nothing that concerns you",
            "channel": "nothing on the channel",
            "questions": "no new questions",
        }[about]
        capped = (
            f" (asked {float(timeout_s):g} s: a wait stops at {MAX_WAIT_S:g} s; call again)"
            if timeout_s > MAX_WAIT_S
            else ""
        )
        return listed("changes", told, f"{quiet} within {seconds:g} s{capped}", cursor=cursor)
