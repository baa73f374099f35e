"""What crosses the wire: the JSON forms of terms, sentexes, results and events.

Invariant: terms always travel as their canonical text (engine.md §1), so the daemon and
the client agree byte for byte; `encode_*` and `decode_*` are inverses. Both the daemon
(`koinii.server`) and the clients (through `koinii.client.protocol`) import this module and
nothing else about each other.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from koinii.kb import Edited, Event, Hit, Retracted, Sentex, values
from koinii.terms import parse, show

API = "/v1"  # the prefix of every operation route
# A `stream` with no events writes a line of none this often, so a client knows the
# daemon is there (and waits for a line at most this long past its timeout).
STREAM_KEEPALIVE_S = 15.0
log = logging.getLogger("koinii.wire")
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


class RawJSON(bytes):
    """A value already rendered as JSON (a poll's events, encoded once for every
    subscription that receives them): the reply splices it in as it is."""


def render(content: Any) -> bytes:
    """`content` as UTF-8 JSON. What no JSON holds (a NaN, a lone surrogate) is never
    accepted now (`koinii.kb.values`), but a store written before may hold it, and a
    refusal may quote it: such a value is rendered repaired (`values.repaired`)."""
    try:
        return _encode(content).encode("utf-8")
    except ValueError:  # UnicodeEncodeError is one
        fixed, changed = values.repaired(content)
        if not changed:
            raise
        log.warning("a reply held a value JSON cannot carry; served it repaired")
        return _encode(fixed).encode("utf-8")


def encode_bindings(binding: dict[str, Any]) -> dict[str, str]:
    return {name: show(value) for name, value in binding.items()}


def decode_bindings(binding: dict[str, str]) -> dict[str, Any]:
    return {name: parse(text) for name, text in binding.items()}


def encode_sentex(sentex: Sentex | None) -> dict[str, Any] | None:
    if sentex is None:
        return None
    return {
        "handle": sentex.handle,
        "sentence": sentex.text,
        "context": sentex.context,
        "polarity": sentex.polarity,
        "strength": sentex.strength,
        "provenance": sentex.provenance,
        "believed": sentex.believed,
        "derived": sentex.derived,
    }


def decode_sentex(data: dict[str, Any] | None) -> Sentex | None:
    if data is None:
        return None
    return Sentex(
        handle=data["handle"],
        sentence=parse(data["sentence"]),
        context=data["context"],
        polarity=data["polarity"],
        strength=data["strength"],
        provenance=data["provenance"],
        believed=data["believed"],
        derived=data["derived"],
    )


def encode_hit(hit: Hit) -> dict[str, Any]:
    return {
        "sentex": encode_sentex(hit.sentex),
        "author": hit.author,
        "snippet": hit.snippet,
        "score": hit.score,
        "matched": hit.matched,
    }


def decode_hit(data: dict[str, Any]) -> Hit:
    return Hit(
        decode_sentex(data["sentex"]),
        data["author"],
        data["snippet"],
        data["score"],
        data.get("matched", "words"),
    )


def encode_change(change: dict[str, Any]) -> dict[str, Any]:
    if "bindings" not in change:
        return change
    return {**change, "bindings": encode_bindings(change["bindings"])}


def decode_change(change: dict[str, Any]) -> dict[str, Any]:
    if "bindings" not in change:
        return change
    return {**change, "bindings": decode_bindings(change["bindings"])}


def encode_event(event: Event, number: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": event.seq,
        "added": [encode_change(c) for c in event.added],
        "removed": [encode_change(c) for c in event.removed],
    }
    if number is not None:
        out["n"] = number
    return out


def decode_event(data: dict[str, Any]) -> Event:
    return Event(
        data["seq"],
        [decode_change(c) for c in data["added"]],
        [decode_change(c) for c in data["removed"]],
    )


def encode_retracted(result: Retracted) -> dict[str, Any]:
    return {
        "removed_sentexes": result.removed_sentexes,
        "removed_justifications": result.removed_justifications,
        "seq": result.seq,
    }


def decode_retracted(data: dict[str, Any]) -> Retracted:
    return Retracted(data["removed_sentexes"], data["removed_justifications"], data["seq"])


def encode_edited(result: Edited) -> dict[str, Any]:
    out = {
        "handles": result.handles,
        "removed_sentexes": result.removed_sentexes,
        "removed_justifications": result.removed_justifications,
        "seq": result.seq,
    }
    if result.problems:
        out["problems"] = result.problems
    return out


def decode_edited(data: dict[str, Any]) -> Edited:
    return Edited(
        data["handles"],
        data["removed_sentexes"],
        data["removed_justifications"],
        data["seq"],
        data.get("problems") or [],
    )
