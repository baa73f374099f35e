"""What the session writer accepts: one check per kind of field, one refusal per rule.

Every value a writer hands in (in-process, or as JSON over the wire) passes one of these
checks before any SQL runs. A value that fails is refused with kind `bad-session`, a
message that names the field (its full path for nested input, e.g.
`turns[2].iterations[0].blocks[1].code`), and `data = {"field": path}`; nothing is
written — except a value no store can hold the same on both backends (a NaN or
infinite number, a lone surrogate, a NUL), refused `bad-value` like everywhere else
(`koinii.kb.values`). Timestamps are normalised here, once, to ISO-8601 UTC with milliseconds and a
`Z` (`2026-02-10T21:11:56.846Z`), so that every stored time sorts as text.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NoReturn

from koinii.errors import Refused
from koinii.kb import values

KIND = "bad-session"
MAX_TEXT = 8 * 1024 * 1024  # one text field (a request, an answer, a tool result)
MAX_NAME = 1024  # short fields: titles, names, providers, models, ids

STATUSES = ("running", "done", "error", "interrupted")
OUTCOMES = ("complete", "cancelled", "error")
TOKEN_KINDS = ("input", "cached", "cache_created", "output", "reasoning")


def refuse(field: str, message: str, **data: Any) -> NoReturn:
    """Refuse a write because of `field`; the message says what was wrong with it."""
    raise Refused(KIND, f"{field}: {message}", {"field": field, **data})


def text(
    field: str, value: Any, *, required: bool = False, limit: int = MAX_TEXT, blank: bool = True
) -> str | None:
    """A string (None allowed unless required; an empty one only when `blank`)."""
    if value is None:
        if required:
            refuse(field, "is required")
        return None
    if not isinstance(value, str):
        refuse(field, f"must be a string, not {type(value).__name__}")
    if not blank and not value.strip():
        refuse(field, "must not be blank")
    if len(value) > limit:
        refuse(field, f"is longer than {limit} characters", limit=limit)
    return values.check_text(field, value)


def name(field: str, value: Any, *, required: bool = False) -> str | None:
    """A short, non-blank string: a title, a channel, a provider, a model, an id."""
    return text(field, value, required=required, limit=MAX_NAME, blank=False)


def choice(field: str, value: Any, allowed: Iterable[str], *, default: str | None = None) -> str:
    allowed = tuple(allowed)
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or value not in allowed:
        refuse(field, f"must be one of {', '.join(allowed)}", allowed=list(allowed))
    return value


def count(field: str, value: Any, *, default: int | None = None) -> int | None:
    """A non-negative integer (booleans are not integers here)."""
    if value is None:
        return default
    if type(value) is not int or value < 0:
        refuse(field, "must be a non-negative integer")
    if value > 2**62:
        refuse(field, "is too large")
    return value


def money(field: str, value: Any) -> float | None:
    """A non-negative, finite amount of US dollars."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        refuse(field, "must be a number")
    if values.check_number(field, value) < 0:
        refuse(field, "must be a non-negative number")
    return float(value)


def flag(field: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        refuse(field, "must be true or false")
    return value


def mapping(field: str, value: Any, *, required: bool = False) -> dict[str, Any]:
    if value is None:
        if required:
            refuse(field, "is required")
        return {}
    if not isinstance(value, dict):
        refuse(field, f"must be an object, not {type(value).__name__}")
    return value


def listing(field: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        refuse(field, f"must be a list, not {type(value).__name__}")
    return list(value)


def at(field: str, key: str) -> str:
    """The path of `key` inside `field` (a top-level argument when `field` is empty)."""
    return f"{field}.{key}" if field else key


def known(field: str, value: dict[str, Any], allowed: Iterable[str]) -> None:
    """Refuse keys a nested object does not define (a typo must not vanish silently)."""
    extra = sorted(set(value) - set(allowed))
    if extra:
        refuse(at(field, str(extra[0])), "is not a known field")


def tokens(field: str, value: Any) -> dict[str, int]:
    """`{input, cached, cache_created, output, reasoning}` token counts (missing → 0)."""
    given = mapping(field, value)
    known(field, given, TOKEN_KINDS)
    return {kind: count(at(field, kind), given.get(kind), default=0) for kind in TOKEN_KINDS}


def timestamp(field: str, value: Any, *, default: str | None = None) -> str | None:
    """ISO-8601 in, ISO-8601 UTC with milliseconds out (naive times are taken as UTC)."""
    if value is None:
        return default
    if not isinstance(value, str) or len(value) > 64:
        refuse(field, "must be an ISO-8601 timestamp string")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        refuse(field, f"{value!r} is not an ISO-8601 timestamp")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return iso(moment)


def iso(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def now() -> str:
    return iso(datetime.now(UTC))


def millis_between(start: str | None, end: str | None) -> int | None:
    """Whole milliseconds from one stored timestamp to another (None if either is unknown)."""
    if not start or not end:
        return None
    delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return max(0, round(delta.total_seconds() * 1000))


class Given:
    """One object of input, read key by key: each read is checked and, when it fails,
    refused under the key's full path (`turns[2].attempts[0].status`)."""

    def __init__(self, field: str, value: Any, allowed: Iterable[str]) -> None:
        self.field = field
        self.value = mapping(field or "input", value, required=True)
        known(field, self.value, allowed)

    def path(self, key: str) -> str:
        return at(self.field, key)

    def get(self, key: str) -> Any:
        return self.value.get(key)

    def text(self, key: str, **options: Any) -> str | None:
        return text(self.path(key), self.value.get(key), **options)

    def name(self, key: str, **options: Any) -> str | None:
        return name(self.path(key), self.value.get(key), **options)

    def count(self, key: str, **options: Any) -> int | None:
        return count(self.path(key), self.value.get(key), **options)

    def money(self, key: str) -> float | None:
        return money(self.path(key), self.value.get(key))

    def flag(self, key: str) -> bool:
        return flag(self.path(key), self.value.get(key))

    def choice(self, key: str, allowed: Iterable[str], **options: Any) -> str:
        return choice(self.path(key), self.value.get(key), allowed, **options)

    def timestamp(self, key: str, **options: Any) -> str | None:
        return timestamp(self.path(key), self.value.get(key), **options)

    def tokens(self, key: str) -> dict[str, int]:
        return tokens(self.path(key), self.value.get(key))

    def mapping(self, key: str) -> dict[str, Any]:
        return mapping(self.path(key), self.value.get(key))

    def each(self, key: str) -> list[tuple[str, Any]]:
        """The items of a list field, each with its path (`blocks[3]`)."""
        return [
            (self.path(f"{key}[{i}]"), item)
            for i, item in enumerate(listing(self.path(key), self.value.get(key)))
        ]
