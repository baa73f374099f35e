"""The two flows over the queue: a ling wraps its session, a coordinator permeates.

`wrap_session` writes a ling's memory entries — `(memoryNote A "text")`,
`(memoryDecision A "text")`, `(memoryConvention A "text")` in its own context, created
by it — and files the wrap naming them, as ONE write (one operation, one `KB.transact`,
in-process or in the daemon): the entries and the wrap land together or not at all.

`permeate` reads a coordinator's unprocessed wraps and the entries they name, and marks
each wrap processed only after its entries were read: if it fails half-way, what it did
not mark is offered again, and nothing is lost (wraps.md §2).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from koinii.errors import Refused
from koinii.identity import context_for
from koinii.kb import KB
from koinii.operations import Caller, invoker, operation
from koinii.terms import Sym
from koinii.wraps import access, checks, queue, store
from koinii.wraps.queue import WrapQueue

# what each kind of memory entry is asserted as, and counted as in the wrap's stats
MEMORY_PREDICATES = {
    "notes": "memoryNote",
    "decisions": "memoryDecision",
    "conventions": "memoryConvention",
}


def _authorize_wrap_session(kb: KB, caller: Caller, fields: dict[str, Any]) -> None:
    # The entries go to context_for(agent_id), so an agent that is its own agent_id
    # writes only its own context: the daemon's write rule holds without a second check.
    access.require_writer(caller, "file wraps")
    access.require_self(caller, fields.get("agent_id"), "agent_id")


@operation(
    "wraps.wrap_session",
    fields={
        "agent_id": ("any", False, "the ling (over the wire: the caller) (required)"),
        "wrap_id": ("any", False, "the wrap's id (required)"),
        "session_id": ("any", False, "the ling's session"),
        "parent_session_id": ("any", False, "the coordinator session it permeates into"),
        "project_id": ("any", False, "the project"),
        "depth": ("any", False, "the ling's depth: an integer >= 0 (default: derived)"),
        "notes": ("any", False, "memory notes: a list of strings"),
        "decisions": ("any", False, "memory decisions: a list of strings"),
        "conventions": ("any", False, "memory conventions: a list of strings"),
    },
    summary="a ling's memory entries and its wrap, in one write",
    authorize=_authorize_wrap_session,
)
def _wrap_session(
    kb: KB,
    agent_id: Any = None,
    wrap_id: Any = None,
    session_id: Any = None,
    parent_session_id: Any = None,
    project_id: Any = None,
    depth: Any = None,
    notes: Any = None,
    decisions: Any = None,
    conventions: Any = None,
) -> dict[str, Any]:
    agent = checks.identifier(agent_id, "agent_id", "bad-wrap")
    context = context_for(agent)  # refuses (naming) an id that is not CapitalCamelCase
    given = {"notes": notes, "decisions": decisions, "conventions": conventions}
    texts = {kind: checks.texts(given[kind], kind) for kind in MEMORY_PREDICATES}
    checks.too_many_ids(sum(map(len, texts.values())), "notes, decisions and conventions")
    wrap = checks.wrap(
        wrap_id,
        agent_id=agent,
        session_id=session_id,
        project_id=project_id,
        parent_session_id=parent_session_id,
        depth=depth,
        stats={kind: len(items) for kind, items in texts.items()},
    )
    if wrap["depth"] is None:
        wrap["depth"] = _derived_depth(kb, wrap["parent_session_id"])
    add = [
        ((Sym(MEMORY_PREDICATES[kind]), Sym(agent), text), context, {"creator": agent})
        for kind, items in texts.items()
        for text in items
    ]

    def records(connection: store.Records, handles: list[Any]) -> dict[str, Any]:
        access.check_wrap_owner(connection, wrap["wrap_id"], agent)
        return queue.file_wrap(connection, {**wrap, "created_ids": handles})

    result, _ = store.write(
        kb, "wraps.wrap_session", records, add=add, summary={"wrap_id": wrap["wrap_id"]}
    )
    return result


def _derived_depth(kb: KB, parent_session_id: str | None) -> int:
    """A wrap's depth when none is given: 0 for a top-level session, else one below the
    parent session's own wrap (1 when the parent has filed none)."""
    if parent_session_id is None:
        return 0
    [parent] = store.read(
        kb,
        lambda c: c.execute(
            "SELECT MAX(depth) FROM wrap_notification WHERE session_id = ?", (parent_session_id,)
        ).fetchone(),
    )
    return (parent if type(parent) is int else 0) + 1


def store_of(agent: Any) -> Any:
    """The KB or Client a joined agent writes through.

    `koinii.channel.agent.Agent` exposes it as `.store` (its `.medium` is the channel medium
    wrapping it); anything else with a `.medium` that is itself a KB or a Client works too.
    """
    source = getattr(agent, "store", None)
    return agent.medium if source is None else source


def wrap_session(
    agent: Any,
    *,
    session_id: str,
    parent_session_id: str | None = None,
    project_id: str | None = None,
    depth: int | None = None,
    notes: Sequence[str] = (),
    decisions: Sequence[str] = (),
    conventions: Sequence[str] = (),
    wrap_id: str | None = None,
) -> dict[str, Any]:
    """Write a joined agent's memory entries and file its wrap, together; returns the wrap.

    `created_ids` are the entries' handles and `stats` their counts. The wrap id
    defaults to `wrap-<uuid4>`, chosen here, so a resent request files the same wrap.
    Without `parent_session_id` the wrap is a top-level coordinator's own; `depth`
    defaults to one below the parent session's wrap (0 at the top).
    """
    fields = {
        "notes": checks.texts(notes, "notes"),
        "decisions": checks.texts(decisions, "decisions"),
        "conventions": checks.texts(conventions, "conventions"),
    }
    return invoker(store_of(agent))(
        "wraps.wrap_session",
        agent_id=agent.agent,
        wrap_id=f"wrap-{uuid.uuid4()}" if wrap_id is None else wrap_id,
        session_id=session_id,
        parent_session_id=parent_session_id,
        project_id=project_id,
        depth=depth,
        **fields,
    )


def permeate(
    agent: Any,
    *,
    session_id: str | None = None,
    project_id: str | None = None,
    include_children: bool = True,
) -> dict[str, Any]:
    """Absorb a coordinator's unprocessed wraps: read their entries, then mark each.

    `agent` is a joined Agent (see `store_of`); only its store is used: over the wire the
    daemon knows who the coordinator is from the token. Wraps are chosen by `session_id`
    when given (preferred: it tells two coordinators of one project apart), else by
    project — with its children unless `include_children` is False. A wrap the caller
    may not consume (`koinii/foreign-context`: another coordinator's) is left in the
    queue, listed under `skipped`, and its entries are not returned.

    Returns `{processed, agent_ids, wraps, entries, skipped}`: the count of wraps marked
    here, their agents in order, the wraps, and the entries' Sentexes in wrap order.
    """
    source = store_of(agent)
    wraps = WrapQueue(source)
    if session_id:
        pending = wraps.get_unprocessed_wraps_for_session(session_id)
    elif include_children:
        pending = wraps.get_unprocessed_wraps_for_hierarchy(project_id)
    else:
        pending = wraps.get_unprocessed_wraps_for_project(project_id)
    absorbed: list[dict[str, Any]] = []
    entries: list[Any] = []
    skipped: list[str] = []
    for wrap in pending:
        found = [source.sentex(h) for h in wrap["created_ids"] if type(h) is int]
        try:
            wraps.mark_wrap_processed(wrap["wrap_id"])
        except Refused as refusal:
            if refusal.kind != "koinii/foreign-context":
                raise
            skipped.append(wrap["wrap_id"])
            continue
        absorbed.append({**wrap, "processed": True})
        entries.extend(sentex for sentex in found if sentex is not None)
    return {
        "processed": len(absorbed),
        "agent_ids": list(dict.fromkeys(w["agent_id"] for w in absorbed if w["agent_id"])),
        "wraps": absorbed,
        "entries": entries,
        "skipped": skipped,
    }


def coordinate(
    agent: Any,
    coordinator_id: str,
    *,
    session_id: str | None = None,
    default_session: str | None = None,
    project_id: str | None = None,
) -> dict[str, Any]:
    """A coordinator's permeate, as every surface makes it (the MCP tool, `koinii wraps
    permeate`): one coordinator, one session. Its first permeate registers it as the
    coordinator of that session (`session_id`, else `default_session`: its own); from
    then on it collects that session's wraps only (`koinii/not-your-session` for another
    while it is active), and each permeate is its heartbeat. A session another
    coordinator holds is left to it, with a `note` saying whose it is.

    Returns `permeate`'s result, its entries as `{handle, sentence, context}`, and a
    `note` when nothing was collected."""
    from koinii.wraps.coordinators import Coordinators

    registry = Coordinators(store_of(agent))
    held = registry.get(coordinator_id)
    held = held["session_id"] if held and held["status"] == "active" else None
    session_id = session_id or held or default_session
    if session_id is None:
        raise Refused(
            "bad-option",
            "permeate needs your coordinator session: permeate(session_id=...) with the "
            "parent_session_id your workers' wraps name",
            {"option": "session_id"},
        )
    if held is not None and session_id != held:
        raise Refused(
            "koinii/not-your-session",
            f"you coordinate session {held!r} (your first permeate made it yours), not "
            f"{session_id!r}: permeate(session_id={held!r}) collects your workers' wraps; "
            "another session's are its own coordinator's",
            {"session_id": session_id, "yours": held},
        )
    holder = None
    try:  # (again for the session it holds: a heartbeat)
        registry.register(
            coordinator_id, project_id=project_id or queue.GLOBAL, session_id=session_id
        )
    except Refused as refusal:
        if refusal.kind != "bad-coordinator" or "holder" not in refusal.data:
            raise
        holder = refusal.data["holder"]
    result = permeate(agent, session_id=session_id)
    entries = [
        {"handle": s.handle, "sentence": s.text, "context": s.context} for s in result["entries"]
    ]
    out = {**result, "entries": entries}
    if holder is not None:
        out["note"] = (
            f"session {session_id} belongs to coordinator {holder}: its wraps are left for it"
        )
    elif not result["processed"]:
        out["note"] = "no unprocessed wraps"
    return out
