"""A request's body decoded within a budget, in slices of the event loop, its capped
arrays counted as they are read (docs/security.md, "Budgets and caps").

One `json.loads` of a large body held the loop, and so every other client, for as long
as it took: a 9 MB edit 0.3-1.2 s before its first entry was refused, a 15 MB
`sessions/record_batch` up to 1.9 s, a `wraps/add` of 1.4 M ids up to 2.4 s — and then
the domain's cap (1,000 events, 10,000 ids) refused what had been decoded whole.

Invariants:
- A body of at most `SMALL` bytes is decoded in one call (a few milliseconds at most).
- A larger one is decoded by `_Decoder`, a generator the daemon steps on the loop: the C
  scanner decodes each value whose text fits a window (`WINDOWS`: a few milliseconds of
  work at worst), a run of plain scalars in an array one window at a time, and a larger
  container is walked here member by member. After each `slice_s` the loop is given
  back; after `budget_s` of the loop's time in all, the body is refused
  `budget-exhausted`. Nothing is decided from a window that does not hold a whole value:
  the result equals `json.loads` of the text for every body it takes, and what that
  refuses is refused `not-json`.
- A `Cap` names a top-level field holding an array and its limit: past the limit the body
  is refused with the cap's kind as soon as the item past it is read, and the rest is
  never decoded. The domain checks the same limit again on what it is given (`Cap`
  repeats the domain's number, never restates it: `caps_for` imports it).
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from json.decoder import scanstring
from json.scanner import make_scanner
from typing import Any

from koinii.errors import Refused
from koinii.sessions.batches import MAX_BATCH
from koinii.sessions.imports import MAX_PART_TURNS
from koinii.wraps.checks import MAX_CREATED_IDS

SMALL = 32 * 1024  # bytes decoded in one call: ~3 ms for the worst content
WINDOWS = (2 * 1024, 32 * 1024)  # the texts the C scanner is given in one call
UTF8_PIECE = 1 << 20  # bytes of UTF-8 checked and decoded per step
MAX_DEPTH = 64  # containers too large for a window, nested in one another

_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = (
    r'(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|"[^"\\\x00-\x1f]*"'
    r"|true|false|null)"
)
_RUN = re.compile(rf"(?:{_SCALAR}[ \t\n\r]*,[ \t\n\r]*)+")  # plain scalars, each with its comma
_SCAN = make_scanner(json.JSONDecoder())

Steps = Generator[None, None, Any]
Caps = Mapping[str, "Cap"]


@dataclass(frozen=True)
class Cap:
    """At most `limit` items in the array of the top-level `field`, else `kind`."""

    field: str
    limit: int
    kind: str
    items: str  # what the items are, for the message: "entries", "ids", "events"
    fix: str  # how to send them instead

    def refusal(self, at_least: int, whole: bool = False) -> Refused:
        """The refusal once `at_least` items were read: all of them (`whole`), or the
        first ones only — the rest of the body is then never decoded."""
        held = f"{at_least:,}" if whole else f"more than {self.limit:,} ({at_least:,} read)"
        return Refused(
            self.kind,
            f"{self.field} holds {held} {self.items}, over the limit of {self.limit:,} one "
            f"request may carry: {self.fix}",
            {"field": self.field, "limit": self.limit, "at_least": at_least},
        )


def not_json(problem: str = "", at: int | None = None) -> Refused:
    said = f": {problem}" if problem else ""
    return Refused(
        "not-json",
        f"the body is not valid JSON (UTF-8){said}",
        {} if at is None else {"offset": at},
    )


def _not_utf8(offset: int) -> Refused:
    return Refused(
        "not-json",
        f"the body is not UTF-8 (byte {offset}): send JSON encoded as UTF-8",
        {"offset": offset},
    )


async def decode(raw: bytes, caps: Mapping[str, Cap], slice_s: float, budget_s: float) -> Any:
    """The JSON value of `raw` (an empty body: {}), decoded in slices of at most about
    `slice_s` of the loop, within `budget_s` of it in all, `caps` counted as it goes."""
    if not raw:
        return {}
    if len(raw) <= SMALL:
        try:  # UTF-8 only: json.loads would take bytes in UTF-16 or UTF-32 too
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(exc.start) from None
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            raise not_json() from None
        _check_caps(body, caps)
        return body
    clock = _Clock(slice_s, budget_s)
    text = await _utf8(raw, clock)
    steps = _Decoder(text, caps).document()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        except RecursionError:
            raise not_json("nested too deep") from None
        if clock.due():
            await clock.pause()


def _check_caps(body: Any, caps: Mapping[str, Cap]) -> None:
    if not caps or not isinstance(body, dict):
        return
    for name, cap in caps.items():
        value = body.get(name)
        if isinstance(value, list) and len(value) > cap.limit:
            raise cap.refusal(len(value), whole=True)


class _Clock:
    """The loop's time a body's decoding has taken: a slice, then the loop's turn."""

    def __init__(self, slice_s: float, budget_s: float) -> None:
        self.slice_s = slice_s
        self.budget_s = budget_s
        self.spent = 0.0
        self.started = time.perf_counter()

    def due(self) -> bool:
        return time.perf_counter() - self.started >= self.slice_s

    async def pause(self) -> None:
        self.spent += time.perf_counter() - self.started
        if self.spent > self.budget_s:
            raise Refused(
                "budget-exhausted",
                f"decoding the body ran past its {self.budget_s:g} s budget and was "
                "stopped: send a smaller body (split the batch), with fewer, flatter values",
                {"budget_s": self.budget_s, "while": "decoding the body"},
            )
        await asyncio.sleep(0)
        self.started = time.perf_counter()


async def _utf8(raw: bytes, clock: _Clock) -> str:
    """`raw` as text, a piece at a time (UTF-8 only: a BOM-less UTF-16 body is refused)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pieces = []
    for at in range(0, len(raw), UTF8_PIECE):
        pending = len(decoder.getstate()[0])  # an incomplete sequence the last piece ended in
        try:
            pieces.append(decoder.decode(raw[at : at + UTF8_PIECE], at + UTF8_PIECE >= len(raw)))
        except UnicodeDecodeError as exc:
            raise _not_utf8(at - pending + exc.start) from None
        if clock.due():
            await clock.pause()
    return "".join(pieces)


class _Decoder:
    """`json.loads(text)`, as steps: each `yield` is a point where the loop may be given
    back, after a bounded piece of work."""

    def __init__(self, text: str, caps: Mapping[str, Cap]) -> None:
        self.text = text
        self.caps = caps

    def skip(self, pos: int) -> int:
        return _WS.match(self.text, pos).end()  # type: ignore[union-attr]

    def expect(self, pos: int, char: str) -> int:
        if self.text[pos : pos + 1] != char:
            raise not_json(f"expected {char!r} at character {pos}", pos)
        return self.skip(pos + 1)

    def document(self) -> Steps:
        text = self.text
        pos = self.skip(0)
        if text[pos : pos + 1] == "{":  # an operation's body: its capped fields counted
            value, pos = yield from self.members(pos, 1, self.caps)
        else:
            value, pos = yield from self.value(pos, 1)
        if self.skip(pos) != len(text):
            raise not_json("extra data after the value", pos)
        return value

    def value(self, pos: int, depth: int) -> Steps:
        text = self.text
        first = text[pos : pos + 1]
        try:
            if first == '"':  # a string is one object, however long: linear C work
                found = scanstring(text, pos + 1)
                yield
                return found
            if first not in ("[", "{"):  # a number or a literal
                found = _SCAN(text, pos)
                yield
                return found
        except StopIteration:
            raise not_json(f"no value at character {pos}", pos) from None
        except ValueError as exc:
            raise not_json(str(exc), pos) from None
        for window in WINDOWS:
            end = pos + window
            try:
                if end >= len(text):  # the rest fits in the window: the last try
                    found = _SCAN(text, pos)
                    yield
                    return found
                found, stop = _SCAN(text[pos:end], 0)
            except (StopIteration, ValueError, RecursionError):
                yield  # not whole in the window (or not JSON: the walk below says where)
                continue
            yield
            return found, pos + stop
        if depth > MAX_DEPTH:
            raise not_json(f"containers over {WINDOWS[-1]:,} bytes nest at most {MAX_DEPTH} deep")
        if first == "[":
            return (yield from self.items(pos, depth + 1, None))
        return (yield from self.members(pos, depth + 1, None))

    def items(self, pos: int, depth: int, cap: Cap | None) -> Steps:
        text = self.text
        out: list[Any] = []
        pos = self.expect(pos, "[")
        if text[pos : pos + 1] == "]":
            return out, pos + 1
        while True:
            run = _RUN.match(text, pos, min(len(text), pos + WINDOWS[-1]))
            if run is not None:  # plain scalars: decoded a window at a time, in C
                last = text.rindex(",", pos, run.end())
                out.extend(json.loads("[" + text[pos:last] + "]"))
                pos = self.skip(run.end())  # (the window may end before its spaces)
                yield
            else:
                item, pos = yield from self.value(pos, depth)
                out.append(item)
                pos = self.skip(pos)
                if text[pos : pos + 1] == "]":
                    if cap is not None and len(out) > cap.limit:
                        raise cap.refusal(len(out), whole=True)
                    return out, pos + 1
                pos = self.expect(pos, ",")
            if cap is not None and len(out) > cap.limit:
                raise cap.refusal(len(out))

    def members(self, pos: int, depth: int, caps: Mapping[str, Cap] | None) -> Steps:
        text = self.text
        out: dict[str, Any] = {}
        pos = self.expect(pos, "{")
        if text[pos : pos + 1] == "}":
            return out, pos + 1
        while True:
            if text[pos : pos + 1] != '"':
                raise not_json(f"expected a key at character {pos}", pos)
            try:
                key, pos = scanstring(text, pos + 1)
            except ValueError as exc:
                raise not_json(str(exc), pos) from None
            pos = self.expect(self.skip(pos), ":")
            cap = caps.get(key) if caps else None
            if cap is not None and text[pos : pos + 1] == "[":
                out[key], pos = yield from self.items(pos, depth + 1, cap)
            else:
                out[key], pos = yield from self.value(pos, depth)
            pos = self.skip(pos)
            if text[pos : pos + 1] == "}":
                return out, pos + 1
            pos = self.expect(pos, ",")


# --- the caps of each operation ------------------------------------------------------------

_WRAPS = "file what the session created in several wraps (each its own wrap_id)"
# The domains' caps, by operation: the numbers are the domains' own.
DOMAIN_CAPS: dict[str, dict[str, Cap]] = {
    "wraps.add": {"created_ids": Cap("created_ids", MAX_CREATED_IDS, "bad-wrap", "ids", _WRAPS)},
    "wraps.wrap_session": {
        name: Cap(name, MAX_CREATED_IDS, "bad-wrap", "entries", _WRAPS)
        for name in ("notes", "decisions", "conventions")
    },
    "sessions.record_batch": {
        "events": Cap(
            "events",
            MAX_BATCH,
            "bad-session",
            "events",
            "send them in several batches (a SessionRecorder does)",
        )
    },
    "sessions.import_part": {
        "turns": Cap(
            "turns",
            MAX_PART_TURNS,
            "bad-session",
            "turns",
            "send them in several parts (SessionStore.import_session does)",
        )
    },
}


def caps_for(op: str, agent: bool, agent_batch: int) -> dict[str, Cap]:
    """The capped arrays of operation `op`'s body for this caller (`agent`: an agent or
    arbiter token, whose edits add and remove at most `agent_batch` entries each)."""
    if op in ("edit", "check_edit"):
        if not agent:
            return {}
        fix = "send it in parts (an operator edits more at once)"
        return {
            name: Cap(name, agent_batch, "batch-too-large", "entries", fix)
            for name in ("add", "remove")
        }
    return DOMAIN_CAPS.get(op, {})
