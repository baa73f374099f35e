"""The wrap queue: lings file wraps, coordinators read the unprocessed ones and mark them.

`WrapQueue(source)` runs the same operations on a `KB` (directly) or a `Client` (through
the daemon), so a coordinator's code does not care where the store is (wraps.md §1).

Invariants:
- Nothing is ever deleted: marking sets `processed`; re-adding an id resets it, keeps
  its `created_at`, overwrites the fields given and unions `created_ids` in order.
- A wrap is read unprocessed until it is marked, so a consumer that fails half-way
  loses nothing: what it did not mark is offered again.
- Every read is ordered by `created_at`, then `wrap_id`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from koinii.kb import KB
from koinii.operations import Caller, invoker, operation
from koinii.wraps import access, checks, store

GLOBAL = "global"  # as a project filter: every project, and wraps with none

_WRAP_FIELDS = {
    "wrap_id": ("any", False, "the wrap's id: a non-empty string (required)"),
    "agent_id": ("any", False, "the ling that wrapped (over the wire: the caller)"),
    "session_id": ("any", False, "the ling's session, e.g. session:2026-01-14:ling-123"),
    "project_id": ("any", False, "the project, e.g. hive:api (':' separates levels)"),
    "parent_session_id": ("any", False, "the coordinator session this wrap permeates into"),
    "depth": ("any", False, "the wrapping session's depth: an integer >= 0"),
    "created_ids": ("any", False, "the memory entries it created: a list of handles or ids"),
    "stats": ("any", False, "counts: a map of string to integer, e.g. {notes: 2}"),
}
_FILTER_FIELDS = {
    "parent_session_id": ("any", False, "only wraps that permeate into this session"),
    "project_id": ("any", False, "only this project (null or 'global': every project)"),
    "include_children": ("any", False, "with project_id: its children too (project:child)"),
    "include_processed": ("any", False, "processed wraps too (default: unprocessed only)"),
}


# --- reads ------------------------------------------------------------------------------


def wraps_query(
    *,
    parent_session_id: str | None = None,
    project_id: str | None = None,
    include_children: bool = False,
    include_processed: bool = False,
) -> tuple[str, tuple[Any, ...]]:
    """The SQL and parameters of a wrap read (public so benchmarks run the same statement).

    Unprocessed reads name `processed = 0`, which selects the partial indexes. The
    hierarchy of `p` is `p` itself plus the range [`p:`, `p;`) — every id that starts
    with `p:` (';' is the byte after ':'), so `hive` never matches `hive-mcp` — read as
    two index searches joined by UNION ALL (an OR of the two is planned as a scan).
    """
    base = f"SELECT {store.WRAP_COLUMNS} FROM wrap_notification"
    where: list[str] = [] if include_processed else ["processed = 0"]
    params: list[Any] = []
    if parent_session_id is not None:
        where.append("parent_session_id = ?")
        params.append(parent_session_id)
    project = None if project_id == GLOBAL else project_id
    order = " ORDER BY created_at, wrap_id"
    if project is None:
        return base + _where(where) + order, tuple(params)
    if not include_children:
        return base + _where([*where, "project_id = ?"]) + order, (*params, project)
    sql = (
        base
        + _where([*where, "project_id = ?"])
        + " UNION ALL "
        + base
        + _where([*where, "project_id >= ?", "project_id < ?"])
        + order
    )
    return sql, (*params, project, *params, project + ":", project + ";")


def _where(conditions: list[str]) -> str:
    return " WHERE " + " AND ".join(conditions) if conditions else ""


def _read_wraps(kb: KB, query: tuple[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    sql, params = query
    return store.read(kb, lambda c: [store.wrap_of(row) for row in c.execute(sql, params)])


def wrap_headers(kb: KB, *, include_processed: bool = False) -> list[dict[str, Any]]:
    """Every wrap (unprocessed unless asked) as `wraps.list` lists it, oldest first, but
    without its `created_ids`: a listing that shows a window of them (the web view's wraps
    page) counts them all and reads out only what it shows (`wraps_named`). Read whole,
    one 1.4-million-id wrap cost every later listing 0.6-0.9 s (issue 37)."""
    sql, params = wraps_query(include_processed=include_processed)
    columns = store.WRAP_COLUMNS.replace("created_ids", "'[]'")
    sql = sql.replace(store.WRAP_COLUMNS, columns)
    return _read_wraps(kb, (sql, params))


def wraps_named(kb: KB, wrap_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The wraps `wrap_ids` name, whole, in that order (an unknown id: left out)."""
    wanted = list(dict.fromkeys(wrap_ids))
    found: dict[str, dict[str, Any]] = {}
    for at in range(0, len(wanted), 500):  # within any store's limit of parameters
        part = wanted[at : at + 500]
        sql = (
            f"SELECT {store.WRAP_COLUMNS} FROM wrap_notification "
            f"WHERE wrap_id IN ({', '.join('?' * len(part))})"
        )
        found.update((w["wrap_id"], w) for w in _read_wraps(kb, (sql, tuple(part))))
    return [found[i] for i in wanted if i in found]


@operation(
    "wraps.list",
    fields=_FILTER_FIELDS,
    summary="wraps, unprocessed unless asked: all, by coordinator session, project or hierarchy",
    schedule="records_read",  # as many wraps as were filed, each with its ids: off the loop
    prepare=store.ensure,
)
def _list(
    kb: KB,
    parent_session_id: Any = None,
    project_id: Any = None,
    include_children: Any = None,
    include_processed: Any = None,
) -> list[dict[str, Any]]:
    query = wraps_query(
        parent_session_id=checks.optional_identifier(
            parent_session_id, "parent_session_id", "bad-option"
        ),
        project_id=checks.optional_identifier(project_id, "project_id", "bad-option"),
        include_children=checks.flag(include_children, "include_children"),
        include_processed=checks.flag(include_processed, "include_processed"),
    )
    return _read_wraps(kb, query)


# --- writes -----------------------------------------------------------------------------


def file_wrap(connection: store.Records, wrap: dict[str, Any]) -> dict[str, Any]:
    """Insert or re-add a checked wrap (inside a write); returns the wrap as stored."""
    row = connection.execute(
        f"SELECT {store.WRAP_COLUMNS} FROM wrap_notification WHERE wrap_id = ?",
        (wrap["wrap_id"],),
    ).fetchone()
    if row is None:
        stored = {
            **wrap,
            "created_ids": _union([], wrap["created_ids"]),
            "stats": wrap["stats"] or {},
            "processed": False,
            "created_at": store.now_ms(),
        }
    else:
        old = store.wrap_of(row)
        stored = {key: old[key] if value is None else value for key, value in wrap.items()}
        stored["created_ids"] = _union(old["created_ids"], wrap["created_ids"])
        checks.too_many_ids(len(stored["created_ids"]))  # filed again and again: still capped
        stored["processed"] = False
        stored["created_at"] = old["created_at"]
    connection.execute(
        "INSERT INTO wrap_notification (wrap_id, agent_id, session_id, project_id, "
        "parent_session_id, depth, created_ids, stats, processed, processed_seq, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, ?) ON CONFLICT (wrap_id) DO UPDATE SET "
        "agent_id = excluded.agent_id, session_id = excluded.session_id, "
        "project_id = excluded.project_id, parent_session_id = excluded.parent_session_id, "
        "depth = excluded.depth, created_ids = excluded.created_ids, stats = excluded.stats, "
        "processed = 0, processed_seq = NULL",
        (
            stored["wrap_id"],
            stored["agent_id"],
            stored["session_id"],
            stored["project_id"],
            stored["parent_session_id"],
            stored["depth"],
            json.dumps(stored["created_ids"]),
            json.dumps(stored["stats"]),
            stored["created_at"],
        ),
    )
    return {key: stored[key] for key in store.WRAP_COLUMNS.split(", ")}


def _union(old: Sequence[Any], new: Sequence[Any]) -> list[Any]:
    """`old` then each item of `new` not seen yet, in order (ids are ints or strings)."""
    seen = set(old)
    out = list(old)
    for item in new:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _authorize_add(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    access.require_writer(caller, "file wraps")
    access.require_self(caller, fields.get("agent_id"), "agent_id")
    if caller.is_agent:
        wrap_id = checks.identifier(fields.get("wrap_id"), "wrap_id", "bad-wrap")
        store.read(kb, lambda c: access.check_wrap_owner(c, wrap_id, caller.id))
        access.check_created_ids(kb, caller, fields.get("created_ids"))


@operation(
    "wraps.add",
    fields=_WRAP_FIELDS,
    summary="file a wrap notification; the same id again resets processed and unions ids",
    authorize=_authorize_add,
)
def _add(kb: KB, wrap_id: Any = None, **fields: Any) -> dict[str, Any]:
    wrap = checks.wrap(wrap_id, **fields)
    _, edited = store.write(
        kb,
        "wraps.add",
        lambda connection, _handles: file_wrap(connection, wrap),
        summary={"wrap_id": wrap["wrap_id"]},
    )
    return {"wrap_id": wrap["wrap_id"], "seq": edited.seq}


@operation(
    "wraps.mark_processed",
    fields={"wrap_id": ("any", False, "the wrap to mark processed (required)")},
    summary="mark a wrap processed (idempotent); null for an unknown id",
    authorize=lambda kb, caller, fields: access.check_marking(kb, caller, fields.get("wrap_id")),
)
def _mark_processed(kb: KB, wrap_id: Any = None) -> dict[str, Any] | None:
    wrap_id = checks.identifier(wrap_id, "wrap_id", "bad-wrap")

    def records(connection: store.Records, _handles: list[Any]) -> dict[str, Any]:
        row = connection.execute(
            "SELECT processed, processed_seq FROM wrap_notification WHERE wrap_id = ?",
            (wrap_id,),
        ).fetchone()
        if row is None:
            raise store.Unchanged(None)
        if row[0]:  # marked before: the same answer, and no new write
            raise store.Unchanged({"wrap_id": wrap_id, "seq": row[1]})
        seq = store.next_seq(kb)
        connection.execute(
            "UPDATE wrap_notification SET processed = 1, processed_seq = ? WHERE wrap_id = ?",
            (seq, wrap_id),
        )
        return {"wrap_id": wrap_id, "seq": seq}

    result, _ = store.write(
        kb, "wraps.mark_processed", records, summary={"wrap_id": wrap_id, "processed": True}
    )
    return result


# --- waiting ----------------------------------------------------------------------------


@operation(
    "wraps.wait",
    fields={
        "parent_session_id": ("any", False, "wait for wraps into this coordinator session"),
        "project_prefix": ("any", False, "wait for wraps of this project or its children"),
        "timeout_s": ("any", False, "seconds to wait, 0 to 30"),
    },
    summary="long poll: the matching unprocessed wraps, as soon as there are any",
    wait_field="timeout_s",
    schedule="records_read",  # each look on a thread, the loop waiting only between two
    prepare=store.ensure,
)
def _wait(
    kb: KB, parent_session_id: Any = None, project_prefix: Any = None, timeout_s: Any = None
) -> list[dict[str, Any]]:
    """The matching wraps now; with a timeout, in-process, block until there are some.

    The daemon runs this with timeout 0 after each write instead, on its records thread
    (a long poll that parks no thread between two looks), so with 0 it must return at
    once.
    """
    query = wraps_query(
        parent_session_id=checks.optional_identifier(
            parent_session_id, "parent_session_id", "bad-option"
        ),
        project_id=checks.optional_identifier(project_prefix, "project_prefix", "bad-option"),
        include_children=True,
    )
    seconds = checks.timeout(timeout_s)
    found = _read_wraps(kb, query)
    if found or seconds <= 0:
        return found
    return _after_writes(kb, lambda: _read_wraps(kb, query), seconds)


def _after_writes(kb: KB, look: Callable[[], list[Any]], seconds: float) -> list[Any]:
    """Re-run `look` after each durable write until it finds something or time is up.

    The commit listener runs on the writer's thread under the KB's lock, so it only bumps
    a counter; `look` (which takes the KB's lock) runs here, never inside the condition.
    """
    changed = threading.Condition()
    writes = 0

    def on_commit(seq: int, op: str) -> None:
        nonlocal writes
        with changed:
            writes += 1
            changed.notify_all()

    token = kb.on_commit(on_commit)
    deadline = time.monotonic() + seconds
    try:
        while True:
            with changed:
                seen = writes
            found = look()
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            with changed:
                changed.wait_for(lambda seen=seen: writes != seen, remaining)
    finally:
        kb.off_commit(token)


# --- the queue --------------------------------------------------------------------------


class WrapQueue:
    """The wrap queue of a `KB` or, through the daemon, of a `Client` (wraps.md §1)."""

    def __init__(self, source: Any) -> None:
        self._call = invoker(source)

    def add_wrap_notification(
        self,
        wrap_id: str,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        project_id: str | None = None,
        created_ids: Sequence[Any] = (),
        stats: dict[str, int] | None = None,
        parent_session_id: str | None = None,
        depth: int | None = None,
    ) -> dict[str, Any]:
        """File a wrap (`processed` False); returns `{wrap_id, seq}`.

        The same id again overwrites the fields given, resets `processed` and adds the
        new `created_ids` after the old ones. Checked here too, so a bad wrap is refused
        (`bad-wrap`) before a round trip, and the daemon checks it again.
        """
        wrap = checks.wrap(
            wrap_id,
            agent_id=agent_id,
            session_id=session_id,
            project_id=project_id,
            created_ids=created_ids,
            stats=stats,
            parent_session_id=parent_session_id,
            depth=depth,
        )
        return self._call("wraps.add", **wrap)

    def get_unprocessed_wraps(self) -> list[dict[str, Any]]:
        return self._call("wraps.list")

    def get_unprocessed_wraps_for_project(self, project_id: str | None) -> list[dict[str, Any]]:
        """Exactly this project; None or "global" → every unprocessed wrap."""
        return self._call("wraps.list", project_id=project_id)

    def get_unprocessed_wraps_for_hierarchy(self, prefix: str | None) -> list[dict[str, Any]]:
        """The project and its children (`prefix` or `prefix:…`); None or "global" → all."""
        return self._call("wraps.list", project_id=prefix, include_children=True)

    def get_unprocessed_wraps_for_session(
        self, parent_session_id: str | None
    ) -> list[dict[str, Any]] | None:
        """The wraps that permeate into this coordinator session (None for a falsy one).

        The read a coordinator should use: a project cannot tell two coordinators in the
        same project apart, a session can.
        """
        if not parent_session_id:
            return None
        return self._call("wraps.list", parent_session_id=parent_session_id)

    def wraps(
        self,
        *,
        parent_session_id: str | None = None,
        project_id: str | None = None,
        include_children: bool = False,
        include_processed: bool = False,
    ) -> list[dict[str, Any]]:
        """The general read behind the four above; `include_processed` lists history too."""
        return self._call(
            "wraps.list",
            parent_session_id=parent_session_id,
            project_id=project_id,
            include_children=include_children,
            include_processed=include_processed,
        )

    def mark_wrap_processed(self, wrap_id: str) -> dict[str, Any] | None:
        """`{wrap_id, seq}` (the seq it was marked at, however often it is marked again),
        or None for an unknown id."""
        return self._call("wraps.mark_processed", wrap_id=wrap_id)

    def wait(
        self,
        parent_session_id: str | None = None,
        project_prefix: str | None = None,
        timeout_s: float = 30,
    ) -> list[dict[str, Any]]:
        """Block until matching unprocessed wraps exist (returned) or `timeout_s` passes ([]).

        Both filters None: any unprocessed wrap; both given: wraps matching both.
        `timeout_s` is 0 to 30 seconds (the daemon's long-poll bound).
        """
        return self._call(
            "wraps.wait",
            parent_session_id=parent_session_id,
            project_prefix=project_prefix,
            timeout_s=checks.timeout(timeout_s),
        )
