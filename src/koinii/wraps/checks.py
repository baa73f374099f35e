"""What a well-formed wrap, coordinator and read filter are; everything else is refused.

One function per rule, each raising a named refusal before anything is stored:
`bad-wrap` (wraps.md §1), `bad-coordinator` (§3) and `bad-option` (a read's filter or a
wait's timeout). Every value is checked as a JSON value, so the same input is refused
with the same kind in-process and over the wire, and what passes is safe to bind into
SQL (integers within SQLite's 64 bits; text without lone surrogates or NUL, refused
`bad-value` as everywhere: `koinii.kb.values`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koinii.errors import Refused
from koinii.kb import values

SQL_MAX = 2**63 - 1  # the largest integer an SQLite column holds
STATUSES = ("active", "stale", "terminated")
MAX_WAIT_S = 30
# Ids one wrap lists (its `created_ids`, and a wrap_session's entries): a wrap reports a
# session's notes, decisions and conventions — dozens — and every `wraps/list` returns
# them all, so one 1.4-million-id wrap slowed every later read (issue 37).
MAX_CREATED_IDS = 10_000


def _text(value: Any, field: str) -> str | None:
    """Why `value` is not a usable non-empty string, or None when it is one (text no
    store can hold — a lone surrogate, a NUL — is refused `bad-value` here)."""
    if not isinstance(value, str):
        return f"is {type(value).__name__}, not a string"
    if not value:
        return "is empty"
    values.check_text(field, value)
    return None


def _integer(value: Any, lowest: int) -> str | None:
    if type(value) is not int:
        return f"is {type(value).__name__}, not an integer"
    if not lowest <= value <= SQL_MAX:
        return f"is out of range ({lowest} to 2**63-1)"
    return None


def _refuse(kind: str, field: str, problem: str, value: Any) -> Refused:
    # `bad-option` names its option as the engine's and the daemon's do; the others a field
    name = "option" if kind == "bad-option" else "field"
    return Refused(kind, f"{field} {problem}", {name: field, "value": repr(value)[:80]})


# --- wraps ------------------------------------------------------------------------------


def identifier(value: Any, field: str, kind: str) -> str:
    """A required id (wrap_id, coordinator_id): a non-empty string."""
    problem = _text(value, field)
    if problem:
        raise _refuse(kind, field, problem, value)
    return value


def optional_identifier(value: Any, field: str, kind: str) -> str | None:
    return None if value is None else identifier(value, field, kind)


def wrap(
    wrap_id: Any,
    *,
    agent_id: Any = None,
    session_id: Any = None,
    project_id: Any = None,
    created_ids: Any = None,
    stats: Any = None,
    parent_session_id: Any = None,
    depth: Any = None,
) -> dict[str, Any]:
    """The checked fields of a wrap to file (None: not given); refuses `bad-wrap`.

    A wrap without a parent session is a top-level coordinator's own; a session is never
    its own parent.
    """
    if parent_session_id == "":
        raise Refused(
            "bad-wrap",
            "parent_session_id is empty: leave it out for a top-level session (one no "
            "coordinator spawned), or give the session id of the coordinator that spawned you",
            {"field": "parent_session_id", "value": "''"},
        )
    if parent_session_id is not None and parent_session_id == session_id:
        raise Refused(
            "bad-wrap",
            f"parent_session_id is the wrap's own session {session_id!r}: a session cannot "
            "be its own parent; leave parent_session_id out for a top-level session",
            {"field": "parent_session_id", "value": repr(parent_session_id)[:80]},
        )
    return {
        "wrap_id": identifier(wrap_id, "wrap_id", "bad-wrap"),
        "agent_id": optional_identifier(agent_id, "agent_id", "bad-wrap"),
        "session_id": optional_identifier(session_id, "session_id", "bad-wrap"),
        "project_id": optional_identifier(project_id, "project_id", "bad-wrap"),
        "parent_session_id": optional_identifier(
            parent_session_id, "parent_session_id", "bad-wrap"
        ),
        "depth": _depth(depth),
        "created_ids": created_ids_of(created_ids),
        "stats": _stats(stats),
    }


def too_many_ids(count: int, field: str = "created_ids") -> None:
    """Refuse a wrap that would list more than MAX_CREATED_IDS ids, saying the limit."""
    if count > MAX_CREATED_IDS:
        raise Refused(
            "bad-wrap",
            f"{field} would list {count:,} ids, over the limit of {MAX_CREATED_IDS:,} a wrap "
            "holds: file what the session created in several wraps (each its own wrap_id)",
            {"field": field, "limit": MAX_CREATED_IDS, "count": count},
        )


def created_ids_of(value: Any) -> list[Any]:
    """A list of memory-entry ids (handles or non-empty strings), in order, at most
    MAX_CREATED_IDS (counted before any is looked at)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise _refuse("bad-wrap", "created_ids", "must be a list of ids", value)
    too_many_ids(len(value))
    for i, item in enumerate(value):
        if isinstance(item, str):
            problem = _text(item, f"created_ids[{i}]")
        else:
            problem = _integer(item, -SQL_MAX)
        if problem:
            raise _refuse("bad-wrap", f"created_ids[{i}]", problem, item)
    return list(value)


def _stats(value: Any) -> dict[str, int] | None:
    """A map of counts, str -> int (`{"notes": 2, "decisions": 1, ...}`)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _refuse("bad-wrap", "stats", "must be a map of str to int", value)
    for key, count in value.items():
        problem = _text(key, "stats key")
        if problem:
            raise _refuse("bad-wrap", "stats key", problem, key)
        problem = _integer(count, -SQL_MAX)
        if problem:
            raise _refuse("bad-wrap", f"stats[{key!r}]", problem, count)
    return dict(value)


def _depth(value: Any) -> int | None:
    if value is None:
        return None
    problem = _integer(value, 0)
    if problem:
        raise _refuse("bad-wrap", "depth", problem, value)
    return value


def texts(value: Any, field: str) -> list[str]:
    """The texts of memory entries (notes, decisions, conventions): a list of strings."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise _refuse("bad-wrap", field, "must be a list of strings", value)
    for i, item in enumerate(value):
        # an empty entry is still an entry
        problem = _text(item, f"{field}[{i}]") if item != "" else None
        if problem:
            raise _refuse("bad-wrap", f"{field}[{i}]", problem, item)
    return list(value)


# --- read filters -----------------------------------------------------------------------


def flag(value: Any, field: str) -> bool:
    if value is None:
        return False
    if type(value) is not bool:
        raise _refuse("bad-option", field, "must be true or false", value)
    return value


def timeout(value: Any) -> float:
    """A wait's seconds: a number from 0 to 30 (the daemon's long-poll bound)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse("bad-option", "timeout_s", "must be a number of seconds", value)
    if not 0 <= value <= MAX_WAIT_S:
        raise _refuse("bad-option", "timeout_s", f"must be from 0 to {MAX_WAIT_S}", value)
    return float(value)


# --- coordinators -----------------------------------------------------------------------


def pid(value: Any) -> int | None:
    if value is None:
        return None
    problem = _integer(value, 0)
    if problem:
        raise _refuse("bad-coordinator", "pid", problem, value)
    return value


def status(value: Any) -> str:
    if not isinstance(value, str) or value not in STATUSES:
        raise Refused(
            "bad-coordinator",
            f"unknown status {value!r}: a coordinator is one of {', '.join(STATUSES)}",
            {"field": "status", "value": repr(value)[:80], "known": list(STATUSES)},
        )
    return value


def threshold(value: Any) -> int:
    problem = _integer(value, 0)
    if problem:
        raise _refuse("bad-option", "threshold_ms", problem, value)
    return value
