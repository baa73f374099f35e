"""The shapes of the MCP tools' arguments and replies, shared by every tool module: a
move's handle, the states a read filters by, one object per reply (a list inside it beside
its count, an empty one saying so), the windows long lists come in, texts cut to fit a
model's context, and refusals as `kind: message Fix: …` with the refusal as data."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ValidationError

from koinii import speech
from koinii.channel.narrator import STRUCTURE, WRAP_NOTES
from koinii.errors import DEFAULT_FIX, KINDS, KoiniiError, Refused
from koinii.terms import parse, show

# What to do about each refusal a tool can return, in words a model can act on: the
# catalogue's fixes (koinii.errors.KINDS), where every kind has one.
REFUSAL_FIXES: dict[str, str] = {name: kind.fix for name, kind in KINDS.items()}

About = Literal["mine", "channel", "questions"]
QuestionState = Literal["unsettled", "open", "answered", "contested", "settled", "closed", "all"]
DisputeState = Literal[
    "open",
    "notified",
    "stale",
    "resolved",
    "ended",
    "ruled",
    "withdrawn",
    "conceded",
    "superseded",
    "all",
]
Stance = Literal["for", "against"]


def not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # (JSON true would pass as 1, the first sentex)
        raise ValueError(f"a handle is the integer a move returned, not {str(value).lower()}")
    return value


# A move's handle: an integer, and not a boolean.
Handle = Annotated[int, BeforeValidator(not_a_bool)]
MAX_WAIT_S = 120.0
# Questions, disputes, solutions, predicates or sessions per reply: a long channel's whole
# list would fill a model's context; `older` says where the window before starts, `more`
# that there is more.
MAX_LISTED = 100
# The longest text a session read shows whole (read_session cuts the rest), and the
# most characters of JSON one read_session reply holds (it shows fewer turns to fit).
TEXT_SHOWN = 2_000
READ_SHOWN = 40_000


def refusal_text(error: KoiniiError) -> tuple[str, str, dict[str, Any]]:
    """(kind, `kind: message Fix: …`, data) for a refusal or a transport failure."""
    if isinstance(error, Refused):
        kind, message, data = error.kind, error.message, error.data
    else:
        kind, message, data = "unavailable", str(error), {}
    fix = REFUSAL_FIXES.get(kind, DEFAULT_FIX)
    return kind, f"{kind}: {message.rstrip('.')}. Fix: {fix}", data


def tool_error(error: KoiniiError) -> Any:
    from mcp.types import CallToolResult, TextContent

    kind, text, data = refusal_text(error)
    fix = REFUSAL_FIXES.get(kind, DEFAULT_FIX)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structuredContent={"error": {"kind": kind, "message": text, "fix": fix, "data": data}},
        isError=True,
    )


# The tools' arguments that name a move by its handle: a wrong one is `bad-handle`.
HANDLE_ARGUMENTS = frozenset({"handle", "target", "question", "answer"})


def argument_refusal(tool: str, error: ValidationError) -> Refused:
    """The refusal of a call whose arguments do not fit the tool's schema (the SDK's
    validation error, in the words and shape of every other refusal)."""
    wrongs = []
    for found in error.errors():
        where = ".".join(str(part) for part in found["loc"])
        said = found["msg"].removeprefix("Input ").removeprefix("Value error, ")
        quiet = found["type"] in ("missing", "value_error")  # (these say what was given)
        given = "" if quiet else f", not {found.get('input')!r:.60}"
        wrongs.append(f"{where}: {said}{given}")
    first = str(error.errors()[0]["loc"][0])
    kind = "bad-handle" if first in HANDLE_ARGUMENTS else "bad-option"
    return Refused(kind, f"{tool}: {'; '.join(wrongs)}", {"tool": tool, "option": first})


# Predicates no agent claims in: the store's plumbing, the moves (each has a tool), what
# a free-text answer claims, and a wrap's notes (wrap_session writes them).
NOT_CLAIMED = frozenset(p.name for p in (*STRUCTURE, *speech.ACTS, speech.ANSWER_TO, *WRAP_NOTES))


def listed(name: str, items: list[Any], empty: str, **extra: Any) -> dict[str, Any]:
    """A list as one object: the items, their count, and words when there are none."""
    out: dict[str, Any] = {name: items, "count": len(items), **extra}
    if not items:
        out["note"] = empty
    return out


def window_of(limit: int) -> int:
    """How many items of a list one reply shows: `limit`, from 1 to MAX_LISTED."""
    return min(max(limit, 1), MAX_LISTED)


def newest(found: list[dict], window: int, cursor: str) -> tuple[list[dict], dict]:
    """The newest `window` of `found` (read one more than shown, oldest first), and
    `{"older": …}` — the first shown item's `cursor` field — when there are older ones."""
    if len(found) <= window:
        return found, {}
    found = found[1:]
    return found, {"older": found[0][cursor]}


def clipped(value: Any) -> Any:
    """`value` with every string past TEXT_SHOWN characters cut, saying how much more
    there was: one tool result or system prompt can be longer than a model's context."""
    if isinstance(value, str):
        if len(value) <= TEXT_SHOWN:
            return value
        return f"{value[:TEXT_SHOWN]}… [{len(value) - TEXT_SHOWN:,} more characters]"
    if isinstance(value, dict):
        return {key: clipped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clipped(item) for item in value]
    return value


def once(read: dict[str, Any]) -> dict[str, Any]:
    """A session read with each turn shown once, in `transcript.turns`: the session's
    turn list, the dialog and the forks' turn lists repeat what those hold, and a
    model's context pays for every copy."""
    session = {k: v for k, v in read["session"].items() if k != "turns"}
    forks = [{k: v for k, v in fork.items() if k != "turns"} for fork in read["session_forks"]]
    turns = (read["transcript"] or {}).get("turns", [])
    return {**read, "session": session, "session_forks": forks, "transcript": {"turns": turns}}


def within_reply(read: dict[str, Any]) -> dict[str, Any]:
    """A session read cut, oldest turn first, to READ_SHOWN characters of JSON (one
    turn at least), `older` saying where the turns it left out end."""
    turns = read["transcript"]["turns"]
    while len(turns) > 1 and len(json.dumps(read)) > READ_SHOWN:
        gone = turns.pop(0)["id"]
        read["failures"] = [f for f in read["failures"] if f.get("turn_id") != gone]
        read["turn_retries"].pop(gone, None)
        read["older"] = turns[0]["position"]
    return read


def term_or_text(value: str) -> str:
    """What a model typed, as the text of one term: itself where it reads as one (a
    sentence, a symbol, a number, a "quoted string"), else free text, quoted here — the
    channel reads a string as a term's text. Only what opens like a sentence, "(", and
    does not read as one is refused, as the sentence it was meant to be."""
    try:
        parse(value)
    except Refused:
        if value.lstrip().startswith("("):
            raise
        return show(value)
    return value


def move_reply(reply: dict[str, Any], note: str, *keep: str) -> dict[str, Any]:
    """A move's reply as the tool returns it: what it wrote, what it adds, and a note."""
    return {
        "handle": reply["handle"],
        "sentence": reply["sentence"],
        **{key: reply.get(key) for key in keep},
        "note": note,
    }
