"""Transcript files as the importers read them: JSON Lines, a line at a time, never fatal.

A line that is not a JSON object (garbage, a torn last line of a file still being
written) comes back as None with its number, for the importer to count and report; the
rest of the file still reads. Strings are made storable here, once: JSON may escape NUL
characters and lone surrogates, which the store refuses, so NULs are dropped and lone
surrogates replaced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from koinii.errors import Refused
from koinii.sessions import checks

TITLE_LENGTH = 200
REPORTED_LINES = 20  # malformed line numbers listed in a report (all are counted)


def records(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, bool]]:
    """(line number, the record or None when the line is not a JSON object, last line?)."""
    with open(path, "rb") as f:
        number = 0
        for raw in f:
            number += 1
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if b"\\u0000" in raw or b"\\ud" in raw.lower():
                record = cleaned(record)
            yield number, record if isinstance(record, dict) else None, not raw.endswith(b"\n")


def cleaned(value: Any) -> Any:
    """The value with NULs dropped and lone surrogates replaced."""
    if isinstance(value, str):
        return value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [cleaned(item) for item in value]
    if isinstance(value, dict):
        return {key: cleaned(item) for key, item in value.items()}
    return value


def timestamp(value: Any) -> str | None:
    """A stored timestamp, or None when the value is not one."""
    try:
        return checks.timestamp("timestamp", value)
    except Refused:
        return None


def one_line(text: str) -> str:
    """The first line, trimmed to a title's length."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "…"


def fingerprint(importer_version: int, records: int, malformed: int, last: Any) -> str:
    """What an imported transcript looked like: re-importing an unchanged file adds nothing."""
    text = f"{importer_version}|{records}|{malformed}|{last}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def store_transcript(
    store: Any,
    report: dict[str, Any],
    *,
    source: str,
    source_id: str,
    session: dict[str, Any],
    turns: Iterable[Any],
    orphans: Callable[[], int],
) -> dict[str, Any]:
    """Store one parsed transcript (idempotent by `source:source_id`) and complete its
    report; the importers share this last step."""
    external_id = f"{source}:{source_id}"
    result = store.import_session(external_id, session, turns)
    report.update(
        {
            "status": result["status"],
            "session_id": result["session_id"],
            "external_id": external_id,
            "title": session["title"],
            "turns": result["turns"],
            "orphan_results": orphans(),  # counted while the turns were read
        }
    )
    if session.get("parent_external_id"):
        report["parent_session_id"] = result.get("parent_session_id")
        if report["parent_session_id"] is None:
            report["message"] = (
                f"its parent {session['parent_external_id']} is not imported: a session of "
                "its own until it is (import the parent, then this file again)"
            )
    return report
