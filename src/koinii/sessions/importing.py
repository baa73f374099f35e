"""Importing agent transcripts: which files, which format, one report per file.

`import_paths(store, paths)` walks the paths (a folder is searched for `.jsonl` files),
tells each file's format from its first record — a Codex CLI rollout (`session_meta`,
`response_item`, … envelopes, or the older bare items) or else Claude Code — and hands
it to that format's importer (claude_code.py, codex.py). Sub-agent files (`agent-…`)
come last, so their parents are in the store to attach them to. A file that cannot be
read, or that the store refuses, fails alone: its report says why and the next file
goes on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from koinii.errors import Refused
from koinii.sessions import claude_code, codex, jsonl

Report = dict[str, Any]


def transcripts(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The `.jsonl` files named: files as given, folders searched recursively."""
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*.jsonl") if p.is_file()))
        else:
            out.append(path)
    return out


def format_of(path: Path) -> str:
    """`codex` or `claude-code`, from the first record that parses."""
    for _, record, _ in jsonl.records(path):
        if record is not None:
            return codex.SOURCE if codex.is_rollout(record) else claude_code.SOURCE
    return claude_code.SOURCE


def import_paths(
    store: Any,
    paths: Iterable[str | os.PathLike],
    *,
    on_start: Callable[[int], Any] | None = None,
    on_file: Callable[[Report], Any] | None = None,
) -> list[Report]:
    """Import every transcript under `paths` into `store` (a SessionStore).

    One report per file: `status` new, replaced, unchanged, empty or failed, with the
    session, its turns and the malformed lines. `on_start(total)` and `on_file(report)`
    drive a progress display.
    """
    # a sub-agent's own file (`agent-<id>.jsonl`) after the others: its parent session
    # is then imported already, and the child is attached to it
    files = sorted(transcripts(paths), key=lambda path: path.name.startswith("agent-"))
    if on_start is not None:
        on_start(len(files))
    summaries: dict[Path, dict[str, tuple[str, str]]] = {}  # Claude Code titles, per folder
    reports = []
    for path in files:
        try:
            if format_of(path) == codex.SOURCE:
                report = codex.import_file(store, path)
            else:
                if path.parent not in summaries:
                    summaries[path.parent] = claude_code.summaries_in(path.parent)
                report = claude_code.import_file(store, path, summaries[path.parent])
        except (OSError, Refused) as exc:
            message = exc.message if isinstance(exc, Refused) else str(exc)
            report = {"path": str(path), "status": "failed", "message": message, "turns": 0}
        reports.append(report)
        if on_file is not None:
            on_file(report)
    return reports
