"""The view's live updates: ONE reader of the change log for every open page.

Every open page holds a server-sent-events stream (`LiveFeed.stream`). None of them
takes a subscription: the feed follows the durable change log itself, once for all of
them — after each commit, the first stream to wake reads the new entries, the narrator
tells them and the lines are rendered once into a shared ring; each stream then sends
the lines of its own channel after its own cursor. So a hundred open pages cost one log
read and one rendering per write, and no agent's subscription quota or slot.

Invariants:
- Only what is durable is told: the feed reads the log up to the last seq a commit
  listener reported (`committed`), never a write of a group still open.
- The ring holds every line after `floor`, in seq order; a stream whose cursor is below
  it (a page left open for very long) is told `reload`, and reloads the page.
- A stream's cursor moves only past what it has sent: to the seq told when it read the
  ring, never to where another page's stream has told since — its sends may wait for a
  page that reads slowly, and the lines told meanwhile are sent after.
- A stream parks between writes on the daemon's commit wait (`Subscriptions.next_commit`),
  counted as parked like a long poll, so an open page does not make writes group-commit.
  The daemon's stop wakes those waits with nothing committed: a stream that wakes early
  with nothing new ends, so an open page never holds up a shutdown.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from koinii.narrator import Narrator
from koinii.server.web.moves import Line, told

RING = 5_000  # lines kept for streams that are behind
BEHIND = 2_000  # log entries the feed reads back at most when it starts following again
HEARTBEAT_S = 15.0  # a comment this often keeps proxies from closing an idle stream


class LiveFeed:
    """The change log, told once for all open pages (see the module docstring)."""

    def __init__(self, daemon, render: Callable[[Line], str]) -> None:
        self.daemon = daemon
        self.kb = daemon.kb
        self.render = render
        self.narrator = Narrator(self.kb)
        self.seq = self.floor = self.committed = self.kb.seq
        self.ring: deque[tuple[Line, str]] = deque(maxlen=RING)
        self.kb.on_commit(self._committed)

    def _committed(self, seq: int, op: str) -> None:
        self.committed = max(self.committed, seq)

    def catch_up(self) -> None:
        """Tell what the log holds after `seq`, up to `committed` (once per write,
        however many streams ask)."""
        if self.committed - self.seq > BEHIND:  # nobody was following: start near the end
            self.ring.clear()
            self.seq = self.floor = self.committed - BEHIND
        while self.seq < self.committed:
            reply = self.kb.changes(since=self.seq, limit=1000)
            if reply["too_old"]:
                self.ring.clear()
                self.seq = self.floor = reply["floor"]
                continue
            entries = [e for e in reply["entries"] if e["seq"] <= self.committed]
            if not entries:
                break
            for entry in entries:
                for line in told(self.narrator, entry):
                    if len(self.ring) == self.ring.maxlen:
                        self.floor = self.ring[0][0].seq
                    self.ring.append((line, self.render(line)))
            self.seq = entries[-1]["seq"]

    def after(self, cursor: int, visible: frozenset[str]) -> list[tuple[Line, str]] | None:
        """The rendered lines after seq `cursor` in `visible` contexts; None when the
        ring no longer reaches back to `cursor`."""
        if cursor < self.floor:
            return None
        return [
            (line, html)
            for line, html in self.ring
            if line.seq > cursor and line.context in visible
        ]

    async def stream(self, channel: str, since: int) -> AsyncIterator[str]:
        """The server-sent events of one page: each new line of `channel` after `since`
        as a `move` event (its id the line's seq), `reload` when the page fell behind,
        a comment every HEARTBEAT_S; it ends when the daemon stops."""
        loop = asyncio.get_running_loop()
        yield "retry: 1000\n\n"
        cursor = since
        while True:
            before = self.committed
            self.catch_up()
            told = self.seq  # this turn's lines end here
            lines = self.after(cursor, self.kb.context_up(channel))
            if lines is None:
                yield "event: reload\ndata: behind\n\n"
                return
            for line, html in lines:
                data = "".join(f"data: {part}\n" for part in html.splitlines())
                yield f"id: {line.seq}\nevent: move\n{data}\n"
            # not `self.seq`: a send may have waited for a slow page while another page's
            # stream told more, which this page has not been sent
            cursor = max(cursor, told)
            if self.committed != before or self.seq != told:
                continue  # committed or told while these lines were sent: send it now
            started = loop.time()
            await self.daemon.subs.next_commit(HEARTBEAT_S)
            if self.committed == before:
                if loop.time() - started < HEARTBEAT_S * 0.9:
                    return  # woken with nothing committed: the daemon is stopping
                yield ": ping\n\n"
