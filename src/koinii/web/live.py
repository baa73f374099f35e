"""The view's live updates: ONE reader of the change log for every open page.

Every open page holds a server-sent-events stream (`LiveFeed.stream`). None of them
takes a subscription: the feed follows the durable change log itself, once for all of
them — after each commit, the first stream to wake reads the new entries, the narrator
tells them into a shared ring, and each stream then sends the lines of its own channel
after its own cursor, each line rendered once, when a stream first sends it. So a
hundred open pages cost one log read and one telling per write, and no agent's
subscription quota or slot.

What the feed tells on the loop is bounded by the ring, not by the writes: it tells no
write whose lines the ring could not keep (the newest RING changes are told, what came
before them is skipped, and a page behind them reloads, as it would have), and a feed
nobody followed starts at the page that opens it, not at what was written meanwhile (a
page open after a bulk load of 55,000 sentences held every request 3.5 s, telling
lines no page was to see).

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

from koinii.channel.narrator import Narrator
from koinii.web.moves import Line, told

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
        self.ring: deque[list] = deque(maxlen=RING)  # [line, its html once rendered]
        self.following = 0  # streams open
        self.kb.on_commit(self._committed)

    def _committed(self, seq: int, op: str) -> None:
        self.committed = max(self.committed, seq)

    def catch_up(self) -> None:
        """Tell what the log holds after `seq`, up to `committed` (once per write,
        however many streams ask)."""
        if self.committed - self.seq > BEHIND:  # nobody was following: start near the end
            self._skip_to(self.committed - BEHIND)
        while self.seq < self.committed:
            reply = self.kb.changes(since=self.seq, limit=1000)
            if reply["too_old"]:
                self._skip_to(reply["floor"])
                continue
            entries = [e for e in reply["entries"] if e["seq"] <= self.committed]
            if not entries:
                break
            kept = _newest(entries, RING)
            dropped = len(entries) - len(kept)
            if dropped:  # their lines would leave the ring as the newest came in
                self._skip_to(entries[dropped - 1]["seq"])
            for entry in kept:
                for line in told(self.narrator, entry):
                    if len(self.ring) == self.ring.maxlen:
                        self.floor = self.ring[0][0].seq
                    self.ring.append([line, None])
            self.seq = entries[-1]["seq"]

    def _skip_to(self, seq: int) -> None:
        """Follow on from `seq`, telling nothing before it: a stream behind it reloads."""
        if seq > self.seq:
            self.ring.clear()
            self.seq = self.floor = seq

    def after(self, cursor: int, visible: frozenset[str]) -> list[tuple[Line, str]] | None:
        """The rendered lines after seq `cursor` in `visible` contexts; None when the
        ring no longer reaches back to `cursor`."""
        if cursor < self.floor:
            return None
        out = []
        for item in self.ring:
            line = item[0]
            if line.seq > cursor and line.context in visible:
                if item[1] is None:
                    item[1] = self.render(line)
                out.append((line, item[1]))
        return out

    async def stream(self, channel: str, since: int) -> AsyncIterator[str]:
        """The server-sent events of one page: each new line of `channel` after `since`
        as a `move` event (its id the line's seq), `reload` when the page fell behind,
        a comment every HEARTBEAT_S; it ends when the daemon stops."""
        loop = asyncio.get_running_loop()
        yield "retry: 1000\n\n"
        cursor = since
        if not self.following:  # nobody followed: nothing before this page is wanted
            self._skip_to(min(since, self.committed))
        self.following += 1
        try:
            async for event in self._events(channel, cursor, loop):
                yield event
        finally:
            self.following -= 1

    async def _events(
        self, channel: str, cursor: int, loop: asyncio.AbstractEventLoop
    ) -> AsyncIterator[str]:
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


def _newest(entries: list[dict], most: int) -> list[dict]:
    """The newest of `entries` (seq order) whose changes number at most `most` together:
    the lines of those before them could not all stay in a ring of `most` lines."""
    count, start = 0, len(entries)
    while start:
        entry = entries[start - 1]
        count += len(entry["added"]) + len(entry["removed"])
        if count > most:
            break
        start -= 1
    return entries[start:]
