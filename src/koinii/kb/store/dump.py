"""The portable dump of a whole store (`koinii export`): one JSON object per line.

The format (docs/cli.md, "The export format"), in this order:

    {"koinii": "export", "format": 1, "version": …, "source": …,
     "next_handle": N, "seq": S, "log_floor": F, "domains": {"wraps": 2, …}}
    {"sentex": {"handle", "context", "positive", "text", "premise", "strength",
                "creator", "created", "extra"}}           every sentex, by handle
    {"justification": {"id", "conclusion", "rule", "antecedents"}}
    {"change": {"seq", "op", "at", "next_handle", "diff"}}   the change log, by seq
    {"table": NAME, "columns": [...]}                      a domain's record table,
    {"row": [...]}                                           then its rows
    {"end": {"sentexes": n, "justifications": n, "changes": n, NAME: n, …}}

Invariant: a dump holds exactly what `migrate` copies between stores — so reading one
back (`read_dump`) gives `migrate` the same parts a store would, and a store migrated from
a dump rebuilds the same handles, belief and seq as the store that was dumped. The last
line counts every part: a dump without it, or whose counts disagree, was cut short and is
refused (`not-an-export`) rather than read as a smaller store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from koinii.errors import Refused
from koinii.kb.store import JustificationRow, Loaded, SentexRow

FORMAT = 1


@dataclass
class Parts:
    """A whole store as `migrate` moves it: the core records and the domains' tables."""

    loaded: Loaded
    log: list[tuple]  # (seq, op, at, next_handle, diff text), as `export_log` gives them
    meta: dict[str, int]  # next_handle, seq, log_floor
    tables: dict[str, tuple[list[str], list[tuple]]] = field(default_factory=dict)
    domains: dict[str, int] = field(default_factory=dict)  # domain -> its schema version


def is_dump(location: Any) -> bool:
    """Does `location` name a dump file (by its name: `*.jsonl`)?"""
    return isinstance(location, str) and location.endswith(".jsonl")


def starts_a_dump(text: str) -> bool:
    """Does `text` open with a dump's header line (whatever the file is named)?"""
    first = text.split("\n", 1)[0]
    try:
        header = json.loads(first)
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("koinii") == "export"


def write_dump(parts: Parts, out: IO[str], source: str) -> dict[str, int]:
    """Write `parts` to `out` in the format above; returns the counts of the end line."""
    from koinii._version import __version__

    def line(value: dict[str, Any]) -> None:
        out.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n")

    line(
        {
            "koinii": "export",
            "format": FORMAT,
            "version": __version__,
            "source": source,
            **parts.meta,
            "domains": parts.domains,
        }
    )
    for row in parts.loaded.sentexes:
        line({"sentex": asdict(row)})
    for j in parts.loaded.justifications:
        line({"justification": {**asdict(j), "antecedents": list(j.antecedents)}})
    for seq, op, at, next_handle, diff in parts.log:
        line({"change": {"seq": seq, "op": op, "at": at, "next_handle": next_handle,
                         "diff": json.loads(diff)}})  # fmt: skip
    counts = {
        "sentexes": len(parts.loaded.sentexes),  # type: ignore[arg-type]
        "justifications": len(parts.loaded.justifications),  # type: ignore[arg-type]
        "changes": len(parts.log),
    }
    for table, (columns, rows) in parts.tables.items():
        line({"table": table, "columns": columns})
        for row in rows:
            line({"row": list(row)})
        counts[table] = len(rows)
    line({"end": counts})
    return counts


def read_dump(path: str) -> Parts:
    """The parts of the dump at `path`; refused `not-an-export` if it is not a whole one."""
    sentexes: list[SentexRow] = []
    justifications: list[JustificationRow] = []
    log: list[tuple] = []
    tables: dict[str, tuple[list[str], list[tuple]]] = {}
    header: dict[str, Any] | None = None
    end: dict[str, int] | None = None
    table: str | None = None
    if not os.path.isfile(path):
        raise Refused(
            "no-such-store", f"there is no export at {path}: check the path", {"location": path}
        )
    with open(path, encoding="utf-8") as source:
        for number, item in _lines(source, path):
            if header is None:
                if item.get("koinii") != "export" or item.get("format") != FORMAT:
                    raise _not_an_export(
                        path, number, f"it does not start with a format-{FORMAT} header"
                    )
                header = item
            elif end is not None:
                raise _not_an_export(path, number, "there is more after its end line")
            elif "sentex" in item:
                sentexes.append(SentexRow(**item["sentex"]))
            elif "justification" in item:
                j = item["justification"]
                justifications.append(
                    JustificationRow(**{**j, "antecedents": tuple(j["antecedents"])})
                )
            elif "change" in item:
                c = item["change"]
                diff = json.dumps(c["diff"], ensure_ascii=False, separators=(",", ":"))
                log.append((c["seq"], c["op"], c["at"], c["next_handle"], diff))
            elif "table" in item:
                table = item["table"]
                tables[table] = (list(item["columns"]), [])
            elif "row" in item and table is not None:
                tables[table][1].append(tuple(item["row"]))
            elif "end" in item:
                end = item["end"]
            else:
                raise _not_an_export(path, number, f"line {number} is not an export record")
    if header is None or end is None:
        raise _not_an_export(path, 0, "it has no end line: it was cut short")
    counts = {"sentexes": len(sentexes), "justifications": len(justifications), "changes": len(log)}
    counts.update({name: len(rows) for name, (_, rows) in tables.items()})
    if counts != end:
        raise _not_an_export(path, 0, f"its end line counts {end}, but it holds {counts}")
    meta = {key: header[key] for key in ("next_handle", "seq", "log_floor")}
    loaded = Loaded(sentexes, justifications, meta["next_handle"], meta["seq"], meta["log_floor"])
    return Parts(loaded, log, meta, tables, dict(header.get("domains") or {}))


def _lines(source: IO[str], path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in enumerate(source, 1):
        if not text.strip():
            continue
        try:
            item = json.loads(text)
        except ValueError as exc:
            raise _not_an_export(path, number, f"line {number} is not JSON ({exc})") from None
        if not isinstance(item, dict):
            raise _not_an_export(path, number, f"line {number} is not a JSON object")
        yield number, item


def _not_an_export(path: str, line: int, why: str) -> Refused:
    return Refused(
        "not-an-export",
        f"{path} is not a whole Koinii export: {why}; make one with `koinii export`",
        {"location": path, "line": line},
    )
