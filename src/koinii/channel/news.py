"""An agent's news: the change log told in words, filtered to what concerns it.

`Feed(agent)` reads the durable change log (`changes(since=seq)`, through the follower's
`log` core, koinii.channel.follow), tells it with the narrator and keeps what `about`
selects: "mine" (answers to the agent's questions, replies to its moves, rulings on what
it claimed, its claims taken away), "channel" (any move on its channel) or "questions"
(asked or reopened). The agent's own moves are never news to it.
The MCP server's `recent_changes` and `wait_for_changes` and the runtime hooks
(koinii.runtimes: what changed since an agent's last session, what to hand back at Stop)
read through it, so "what concerns you" means one thing everywhere.
"""

from __future__ import annotations

import threading
import time

from koinii import speech
from koinii.channel import follow
from koinii.channel.agent import Agent
from koinii.channel.narrator import Narrator, Told
from koinii.errors import Refused
from koinii.terms import parse

MAX_TOLD = 100  # changes per reply; the cursor says where the next read starts


class Feed:
    """The change log as this agent follows it: told in words, filtered by `about`."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.store = agent.store
        self.narrator = Narrator(self.store, me=agent.agent)
        self.cursor: int | None = None  # the last cursor returned, for `since` left out
        self._view: frozenset[str] | None = None
        self._lock = threading.Lock()

    def read(self, since: int, limit: int, about: str | None) -> tuple[list[dict], int]:
        """What the log holds after `since` (no wait), up to `limit` told changes."""
        told, cursor = self._collect(since, limit, about, wait_ms=0)
        with self._lock:
            self.cursor = cursor
        return told, cursor

    def wait(self, since: int | None, seconds: float, about: str) -> tuple[list[dict], int]:
        """Long-poll the log until a change concerns the agent, or `seconds` pass. The
        lock is not held while it waits: the agent's other calls go on meanwhile."""
        with self._lock:
            cursor = since if since is not None else self.cursor
        if cursor is None:
            cursor = self.store.seq
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            wait_ms = max(0, min(30_000, int(left * 1000)))
            told, cursor = self._collect(cursor, MAX_TOLD, about, wait_ms=wait_ms)
            if told or left <= 0:
                with self._lock:
                    self.cursor = cursor
                return told, cursor

    def _collect(
        self, since: int, limit: int, about: str | None, wait_ms: int
    ) -> tuple[list[dict], int]:
        """One read of the log after `since` (the follower's `log` core, one page; a log
        compacted past `since` is read on from its floor), told and filtered."""
        core = follow.Core(
            follow.log(since, follow=False, wait_ms=wait_ms, too_old="floor", pages=True)
        )
        page: list[dict] = []
        for item in follow.run(core, self.store):
            if type(item) is not follow.Page:
                page.append(item)
                continue
            if item.cursor > item.head:
                raise Refused(
                    "bad-cursor",
                    f"since={item.cursor} is past the end of the change log (its last "
                    f"position is {item.head}): pass the cursor a reply gave, or leave "
                    "since out",
                    {"since": item.cursor, "seq": item.head},
                )
            if not page:
                since = item.cursor  # where a log compacted past `since` put it
            break
        cursor = since
        told: list[dict] = []
        with self._lock:  # (the narrator and the view are this agent's, one call at a time)
            for entry in page:
                if follow.moves_hierarchy(entry):
                    self._view = None  # the hierarchy changed: so may what the channel sees
                for one in self.narrator.entry(entry):
                    if about is None or self._concerns(one, about):
                        told.append(one.to_dict())
                cursor = entry["seq"]
                if len(told) >= limit:
                    break
        return told, cursor

    def _concerns(self, told: Told, about: str) -> bool:
        me = self.agent.agent
        own = told.context == self.agent.context
        if told.added and (told.speaker == me or own):
            return False  # your own moves are no news to you
        if not told.added and told.reason == "retracted" and own:
            return False
        if about == "questions":  # asked, or reopened (its closing withdrawn)
            return told.move == "question" if told.added else told.move == "closing"
        if about == "channel":
            return told.kind != "structure" and told.context in self.view()
        # mine: replies to my moves, rulings on what I claimed, my claims defeated
        if not told.added and own:
            return True
        if told.target is not None:
            return told.target_context == self.agent.context
        if told.kind == "ruling":
            term = parse(told.sentence)
            for sentence in (term, speech.negation(term)):
                if self.store.sentexes_matching(sentence, self.agent.context):
                    return True
        return False

    def view(self) -> frozenset[str]:
        if self._view is None:
            self._view = frozenset(self.store.context_up(self.agent.channel))
        return self._view
