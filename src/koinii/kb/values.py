"""What a stored value may be: JSON that means the same on SQLite, on PostgreSQL and on
the wire.

Invariants:
- Every value a writer hands in to be stored as data — a provenance field, a creator, a
  domain record's field — is JSON whose numbers are finite and whose strings are valid
  Unicode without NUL, or it is refused `bad-value` naming the field (`check`) before
  anything is stored. JSON has no NaN or Infinity (Python's json writes them anyway,
  and no other reader takes them back), a lone surrogate has no UTF-8 encoding, and
  PostgreSQL cannot hold a NUL in text: each would be stored on one backend and not the
  other, or stored and then unreadable. The daemon runs the same checks on what it
  decodes, so the refusal is the same in-process and over the wire.
- A store written before these checks may still hold such a value. `repaired` turns it
  into one that serves — a non-finite number becomes its name as a string ("NaN",
  "Infinity", "-Infinity"), a lone surrogate or a NUL becomes U+FFFD — so no read ever
  fails on stored data; whoever repairs on a read logs it.

(A NUL inside a sentence's string is not refused: the canonical text escapes it, as
`"\\u0000"`, so both backends store the same text.)
"""

from __future__ import annotations

import math
import re
from typing import Any, NoReturn

from koinii.errors import Refused

KIND = "bad-value"
REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")

_FIXES = {
    "nan": "JSON numbers are finite: send a number, or null (or a string) for 'unknown'",
    "infinity": "JSON numbers are finite: send a number, or null (or a string) for 'unbounded'",
    "-infinity": "JSON numbers are finite: send a number, or null (or a string) for 'unbounded'",
    "lone-surrogate": "text must be valid Unicode (UTF-8): pair the surrogate or replace it "
    "with U+FFFD",
    "nul": "PostgreSQL cannot store NUL in text: drop it, or send binary data encoded (base64)",
}


def _refuse(field: str, problem: str, shown: str) -> NoReturn:
    raise Refused(
        KIND,
        f"{field} {shown}; {_FIXES[problem]}",
        {"field": field, "problem": problem},
    )


def check_text(field: str, value: str, *, nul: bool = False) -> str:
    """`value` itself, if it is text both backends store; else refused `bad-value`.
    With `nul`, a NUL passes (text that is stored escaped, such as a sentence)."""
    if not nul and "\x00" in value:
        _refuse(field, "nul", f"holds a NUL character (at index {value.index(chr(0))})")
    if not value.isascii():
        found = _SURROGATE.search(value)
        if found is not None:
            _refuse(
                field,
                "lone-surrogate",
                f"holds a lone surrogate (\\u{ord(found.group()):04x} at index {found.start()})",
            )
    return value


def check_number(field: str, value: float) -> float:
    """`value` itself, if it is a finite number; else refused `bad-value`."""
    if not math.isfinite(value):
        name = "nan" if math.isnan(value) else "infinity" if value > 0 else "-infinity"
        shown = {"nan": "NaN", "infinity": "Infinity", "-infinity": "-Infinity"}[name]
        _refuse(field, name, f"is {shown}")
    return value


def check(field: str, value: Any) -> Any:
    """`value` itself, if every number in it is finite and every string (keys too) is
    storable text; else refused `bad-value`, naming the path (`provenance.score`,
    `turns[2].tags[0]`). Other types pass: the caller's own checks judge them."""
    stack = [(field, value)]
    while stack:
        path, item = stack.pop()
        cls = type(item)
        if cls is str:
            check_text(path, item)
        elif cls is float:
            check_number(path, item)
        elif cls is dict:
            for key, inner in item.items():
                if type(key) is str:
                    check_text(f"{path} key {key[:40]!r}", key)
                stack.append((f"{path}.{key}", inner))
        elif cls is list or cls is tuple:
            stack.extend((f"{path}[{i}]", inner) for i, inner in enumerate(item))
    return value


def repaired(value: Any) -> tuple[Any, bool]:
    """`value` with what `check` refuses made servable, and whether anything changed
    (the original is returned, untouched, when nothing did)."""
    cls = type(value)
    if cls is str:
        if "\x00" not in value and (value.isascii() or _UNSTORABLE.search(value) is None):
            return value, False
        return _UNSTORABLE.sub(REPLACEMENT, value), True
    if cls is float:
        if math.isfinite(value):
            return value, False
        return ("NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"), True
    if cls is dict:
        changed = False
        out = {}
        for key, inner in value.items():
            new_key, key_changed = repaired(key)
            new_inner, inner_changed = repaired(inner)
            out[new_key] = new_inner
            changed = changed or key_changed or inner_changed
        return (out, True) if changed else (value, False)
    if cls is list or cls is tuple:
        items = [repaired(inner) for inner in value]
        if not any(changed for _, changed in items):
            return value, False
        return cls(item for item, _ in items), True
    return value, False
