"""A channel's moves as lines: the change log told by the narrator, read in windows.

A line is one told change (`narrator.Told`) on a channel — who moved, the kind of move,
what it replies to, the narrator's words — with the seq and time of its write. The page
and the live stream show the same lines, told by the same narrator (`koinii.channel.narrator`),
so a move reads the same in the view as in `koinii tail`.

Invariants:
- A channel's lines are the changes stored in the contexts the channel sees now
  (`kb.context_up(channel)`), in seq order, without the store's plumbing (vocabularies,
  context edges, marks: the narrator's `structure`) and without what no context holds.
- A window is read backwards from the newest seq in chunks, and stops once it holds
  `size` lines or has examined `SCAN` log entries: opening a channel costs its window,
  never the channel's length. A window holds whole writes (all the lines of a seq, or
  none), so the next window, `before` its first seq, repeats and drops nothing. It is
  read a log entry at a time (`window_steps`): the daemon gives the loop back between
  two.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from koinii.channel.narrator import Narrator
from koinii.kb import KB

# The most log entries read at once, going back (a window starts with `size`): the read
# is one step of `window_steps`, 4 ms for 500 at load average 5 (7.5 ms for 1,000).
CHUNK = 500
SCAN = 20_000  # log entries one window examines at most


@dataclass(frozen=True)
class Line:
    """One move (or withdrawal, defeat, ruling) as the view shows it."""

    seq: int
    at: int  # epoch ms of the write
    kind: str  # question, answer, endorsement, …, claim, ruling, withdrawal, defeat
    speaker: str | None
    handle: int
    target: int | None  # what the move replies to
    context: str
    text: str  # the narrator's words
    added: bool


def told(narrator: Narrator, entry: dict[str, Any]) -> list[Line]:
    """The lines of one change-log entry (every context's: filter with `visible`)."""
    return [
        Line(
            seq=entry["seq"],
            at=entry["at"],
            kind=one.kind,
            speaker=one.speaker,
            handle=one.handle,
            target=one.target,
            context=one.context,
            text=one.text,
            added=one.added,
        )
        for one in narrator.entry(entry)
        if one.context
    ]


def window(
    kb: KB, channel: str, *, before: int | None = None, size: int = 200
) -> tuple[list[Line], int | None]:
    """The newest `size` lines of `channel` (at least; whole writes) with a seq below
    `before`, oldest first, and the seq to pass as `before` for the window before them
    (None when the log holds nothing earlier)."""
    steps = window_steps(kb, channel, before=before, size=size)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def window_steps(
    kb: KB, channel: str, *, before: int | None = None, size: int = 200
) -> Generator[None, None, tuple[list[Line], int | None]]:
    """`window`, a log entry at a time: it yields after each, so that the daemon may
    give the loop back between two (`Daemon.in_turns`; the change log is read from the
    store, which no snapshot may touch). What it has read is the durable log, which no
    write changes. An entry with no change in a context the channel sees is not told."""
    visible = kb.context_up(channel)
    narrator = Narrator(kb)
    high = kb.seq if before is None else min(before - 1, kb.seq)
    chunks: list[list[Line]] = []
    count = scanned = 0
    floor = 0
    chunk_size = size + 8  # most writes tell one line: a busy channel needs one read
    while high > floor and count < size and scanned < SCAN:
        low = max(floor, high - chunk_size)
        chunk_size = min(CHUNK, chunk_size * 2)
        reply = kb.changes(since=low, limit=high - low)
        if reply["too_old"]:  # compacted: the log starts later than we went back
            floor = reply["floor"]
            continue
        floor = max(floor, reply["floor"])
        chunk: list[Line] = []
        for entry in reply["entries"]:
            if entry["seq"] <= high and _seen_in(entry, visible):
                chunk.extend(line for line in told(narrator, entry) if line.context in visible)
            yield
        chunks.append(chunk)
        count += len(chunk)
        scanned += high - low
        high = low
    lines = [line for chunk in reversed(chunks) for line in chunk]
    if len(lines) > size:  # trim to whole writes: the next window starts at the cut
        first = lines[-size].seq
        lines = [line for line in lines if line.seq >= first]
        return lines, first
    return lines, (high + 1 if high > floor else None)  # the log below `high` is unread


def _seen_in(entry: dict[str, Any], visible: frozenset[str]) -> bool:
    return any(change["context"] in visible for change in (*entry["added"], *entry["removed"]))
