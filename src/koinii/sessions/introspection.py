"""The three reads an agent uses on its own and past sessions, and their gate.

One concept: reading sessions back; its size is `read_session`'s sections, each guarded
so a read never raises.

`list_sessions(search=None)`, `get_session(target=None)` and `read_session(target=None)`
(sessions.md §3) are pure reads that never raise: a failure is logged and degrades to
None, [] or {} — in `read_session`, section by section, so one unreadable table costs
only the sections built from it. Results are plain string-keyed dicts and lists (ISO-8601
times), ready for ordinary Python filtering.

Each read is also a wire operation (`sessions.list_sessions`, …), so `Introspection`
reads the same way from a `KB` or through a `Client`.

The gate: introspection is a toggle, OFF by default. An agent-facing surface (an MCP
server, the CLI's `koinii sessions agent` commands) offers these reads only while it is
on — `Introspection(..., enabled=True)`, or `KOINII_INTROSPECTION=1` in the environment
for every object built without `enabled`. `agent_tools()` is how a surface asks: it is
empty while the toggle is off. The reads themselves work either way, for people and
programs that are not agents (the CLI's `list`, `search`, `show`).
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from koinii.errors import Refused
from koinii.kb import KB, semantic
from koinii.operations import invoker, operation
from koinii.sessions import checks, failures, meaning, schema
from koinii.sessions.reading import REQUEST_PREVIEW, SessionRows, resolve, tokens_of
from koinii.sessions.search import INDEX_KEYS, index, ranked, ranking_of
from koinii.sessions.store import SessionStore

log = logging.getLogger("koinii.sessions")

ENVIRONMENT_TOGGLE = "KOINII_INTROSPECTION"
TARGET_NAMES = ("target", "session_id", "id")
SEARCH_NAMES = ("search", "query")

AGENT_PROMPT = """\
Session introspection (read-only; results are plain dicts and lists — filter them in Python):
- list_sessions(search=None) -> newest-first index {id, channel, title, turn_count,
  created_at, modified_at}. With search, ranked by the server: title (rank 0), request (1),
  reply (2), thinking (3), tool results (4); best band first, newest first inside a band —
  keep that order. Matches add rank, is_in_title/is_in_request/is_in_reply/is_in_thinking/
  is_in_tool, is_by_meaning and request_snippet/reply_snippet/tool_snippet. Sessions
  holding half the words or more across their turns follow the bands (rank 5; not with
  ranking="lexical"), then, where the server has semantic ranking installed, those found
  by meaning alone (rank 6, is_by_meaning); ranking="relevance" puts the best match
  first inside each band, ranking="hybrid" asks for a fused order instead.
- get_session(target=None) -> ONE session's descriptor (no transcript), the current one
  by default; None when nothing matches.
- read_session(target=None) -> {session, current_turn, failures, diagnosis,
  session_forks, children, turn_retries, usage, transcript}. Usage tool rows overlap:
  never sum them. read_session(target, turns=5) reads the last 5 turns (the summaries
  stay whole); `older` in it is the position to pass as before= for the 5 before.
A target is an id, an unambiguous id prefix, or a copied vis_session_id#<uuid> marker.
"""

EMPTY_READ: dict[str, Any] = {
    "session": None,
    "current_turn": None,
    "failures": [],
    "diagnosis": {},
    "session_forks": [],
    "children": [],
    "turn_retries": {},
    "usage": {},
    "transcript": {},
}


def enabled_by_default() -> bool:
    """The process-wide toggle: `KOINII_INTROSPECTION` set to 1/on/true/yes."""
    value = os.environ.get(ENVIRONMENT_TOGGLE, "")
    return value.strip().lower() in ("1", "on", "true", "yes")


# --- sections of read_session (each a function of SessionRows) ------------------------


def _cost(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return round(sum(known), 6) if known else None


def _attempt(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "attempt": row["version"],
        "status": row["status"],
        "outcome": row["outcome"],
        "iteration_count": row["iteration_count"],
        "duration_ms": row["duration_ms"],
        "tokens": tokens_of(row),
        "cost_usd": row["cost_usd"],
        "answer": row["answer"],
        "error": row["error"],
        "created_at": row["created_at"],
        "finished_at": row["finished_at"],
    }


def _provider_model(provider: str | None, model: str | None) -> str | None:
    if provider and model:
        return f"{provider}/{model}"
    return provider or model


def _current_state(rows: SessionRows) -> dict[str, Any]:
    return rows.states[-1] if rows.states else {}


def section_session(rows: SessionRows) -> dict[str, Any]:
    session = rows.session
    state = _current_state(rows)
    turns = []
    for turn in rows.chain:
        attempts = rows.attempts.get(turn["n"], [])
        latest = attempts[-1] if attempts else {}
        turns.append(
            {
                "id": turn["id"],
                "position": turn["position"],
                "outcome": latest.get("outcome"),
                "iteration_count": latest.get("iteration_count", 0),
                "user_request": turn["user_request"],
                "answer": latest.get("answer"),
                "total_cost": _cost([a["cost_usd"] for a in attempts]),
                "created_at": turn["created_at"],
            }
        )
    return {
        "id": session["id"],
        "channel": session["channel"],
        "title": session["title"],
        "provider": state.get("provider") or session["provider"],
        "model": state.get("model") or session["model"],
        "project_id": session["project_id"],
        "external_id": session["external_id"],
        "parent_session_id": rows.parent_id,
        "created_at": session["created_at"],
        "modified_at": session["modified_at"],
        "turn_count": len(turns),
        "turns": turns,
    }


def session_failures(rows: SessionRows) -> list[dict[str, Any]]:
    """Every failure in the session, oldest first."""
    found: list[tuple[str, int, dict[str, Any]]] = []
    order = 0
    for turn in rows.turns:
        for attempt in rows.attempts.get(turn["n"], []):
            for it in rows.iterations.get(attempt["n"], []):
                for block in rows.blocks.get(it["n"], []):
                    if block["error"] or block["timeout"]:
                        kind = failures.classify_block(block["error"], bool(block["timeout"]))
                        at = it["started_at"] or attempt["created_at"]
                        item = failures.failure(
                            kind,
                            block["error"] or "the block timed out",
                            at=at,
                            turn_id=turn["id"],
                            attempt=attempt["version"],
                            iteration_id=it["id"],
                            block_id=block["id"],
                            tool=block["tool"],
                        )
                        found.append((at or "", order := order + 1, item))
            kind = failures.classify_attempt(
                attempt["status"], attempt["outcome"], attempt["error"]
            )
            if kind is not None:
                at = attempt["finished_at"] or attempt["created_at"]
                message = attempt["error"] or f"the turn ended {attempt['outcome']}"
                item = failures.failure(
                    kind, message, at=at, turn_id=turn["id"], attempt=attempt["version"]
                )
                found.append((at or "", order := order + 1, item))
    for event in rows.routing:
        route = _provider_model(event["provider"], event["model"]) or "the provider"
        message = event["reason"] or f"{event['kind']} from {route}"
        item = failures.failure(
            "provider_error", message, at=event["created_at"], turn_id=event["turn_id"]
        )
        found.append((event["created_at"] or "", order := order + 1, item))
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return [item for _, _, item in found]


def section_current_turn(rows: SessionRows) -> dict[str, Any] | None:
    if not rows.chain:
        return None
    turn = rows.chain[-1]
    attempts = rows.attempts.get(turn["n"], [])
    latest = attempts[-1] if attempts else {}
    elapsed = latest.get("duration_ms")
    if latest.get("status") == "running":
        started = datetime.fromisoformat(latest["created_at"])
        elapsed = max(0, round((datetime.now(UTC) - started).total_seconds() * 1000))
    failed = [f for f in session_failures(rows) if f["turn_id"] == turn["id"]]
    return {
        "id": turn["id"],
        "user_request": turn["user_request"],
        "status": latest.get("status"),
        "attempts": len(attempts),
        "failures": len(failed),
        "cost": _cost([a["cost_usd"] for a in attempts]),
        "elapsed_ms": elapsed,
    }


def section_forks(rows: SessionRows) -> list[dict[str, Any]]:
    """Every state, oldest version first, each with the turns it holds itself (a fork's
    own turns — an imported rewind's branch — stay readable after the fork)."""
    latest = rows.states[-1]["n"] if rows.states else None
    own: dict[int, list[dict[str, Any]]] = {}
    for turn in rows.turns:
        own.setdefault(turn["state_n"], []).append(
            {"id": turn["id"], "position": turn["position"], "user_request": turn["user_request"]}
        )
    return [
        {
            "id": state["id"],
            "version": state["version"],
            "parent_state_id": state["parent_state_id"],
            "fork_position": state["fork_position"],
            "title": state["title"],
            "system_prompt": state["system_prompt"],
            "provider": state["provider"],
            "model": state["model"],
            "created_at": state["created_at"],
            "is_current": state["n"] == latest,
            "turns": sorted(own.get(state["n"], []), key=lambda turn: turn["position"]),
        }
        for state in rows.states
    ]


def section_children(rows: SessionRows) -> list[dict[str, Any]]:
    """The child sessions (a sub-agent's transcript, attached to its parent's)."""
    calls = _meta(rows.session["meta"]).get("agent_calls") or {}
    out = []
    for child in rows.children:
        meta = _meta(child.pop("meta"))
        agent = meta.get("agent_id")
        call = meta.get("tool_use_id") or (calls.get(agent) if isinstance(calls, dict) else None)
        out.append({**child, "agent_id": agent, "tool_use_id": call})
    return out


def _meta(text: str | None) -> dict[str, Any]:
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def section_retries(rows: SessionRows) -> dict[str, list[dict[str, Any]]]:
    """Every attempt of each retried turn, with its own iterations and blocks: a retry
    keeps what the failed attempts did, not only their error."""
    return {
        turn["id"]: [
            {
                **_attempt(a),
                "iterations": [_iteration(rows, i) for i in rows.iterations.get(a["n"], [])],
            }
            for a in rows.attempts[turn["n"]]
        ]
        for turn in rows.turns
        if len(rows.attempts.get(turn["n"], [])) > 1
    }


def section_usage(rows: SessionRows) -> dict[str, Any]:
    buckets = dict.fromkeys(checks.TOKEN_KINDS, 0)
    costs, outcomes, errors = [], Counter(), 0
    for turn in rows.turns:
        attempts = rows.attempts.get(turn["n"], [])
        for attempt in attempts:
            for kind, value in tokens_of(attempt).items():
                buckets[kind] += value
            costs.append(attempt["cost_usd"])
            errors += attempt["error"] is not None
        if attempts:
            outcomes[attempts[-1]["outcome"] or attempts[-1]["status"]] += 1
    tools: dict[str, dict[str, int]] = {}
    models: Counter[str] = Counter()
    for iterations in rows.iterations.values():
        for it in iterations:
            actual = _provider_model(
                it["actual_provider"] or it["provider"], it["actual_model"] or it["model"]
            )
            if actual:
                models[actual] += 1
            for block in rows.blocks.get(it["n"], []):
                counts = tools.setdefault(
                    block["tool"] or "code", {"calls": 0, "errors": 0, "timeouts": 0}
                )
                counts["calls"] += 1
                counts["errors"] += block["error"] is not None
                counts["timeouts"] += bool(block["timeout"])
    uncached = buckets["input"] - buckets["cached"] - buckets["cache_created"]
    return {
        "tokens": {
            "input": buckets["input"],
            "cached": buckets["cached"],
            "uncached": max(0, uncached),
            "cache_created": buckets["cache_created"],
            "output": buckets["output"],
            "reasoning": buckets["reasoning"],
        },
        "cost_usd": _cost(costs),
        "outcomes": dict(outcomes),
        "errors": errors,
        "tools": tools,
        "routing": {
            "events": dict(Counter(event["kind"] for event in rows.routing)),
            "models": dict(models.most_common()),
        },
    }


def _block(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "position": row["position"],
        "tool": row["tool"],
        "code": row["code"],
        "result": row["result"],
        "stdout": row["stdout"],
        "error": row["error"],
        "duration_ms": row["duration_ms"],
        "timeout": bool(row["timeout"]),
    }


def _iteration(rows: SessionRows, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "position": row["position"],
        "thinking": row["thinking"],
        "prose": row["prose"],
        "provider": row["provider"],
        "model": row["model"],
        "actual_provider": row["actual_provider"],
        "actual_model": row["actual_model"],
        "fallback": bool(row["fallback"]),
        "tokens": tokens_of(row),
        "cost_usd": row["cost_usd"],
        "started_at": row["started_at"],
        "duration_ms": row["duration_ms"],
        "first_token_ms": row["first_token_ms"],
        "blocks": [_block(b) for b in rows.blocks.get(row["n"], [])],
    }


def section_transcript(rows: SessionRows) -> dict[str, Any]:
    dialog, turns = [], []
    for turn in rows.chain:
        latest = rows.latest_attempt(turn) or {}
        iterations = [_iteration(rows, it) for it in rows.iterations.get(latest.get("n"), [])]
        reply = latest.get("answer") or "\n".join(it["prose"] for it in iterations if it["prose"])
        dialog.append({"role": "user", "turn_id": turn["id"], "content": turn["user_request"]})
        if reply:
            dialog.append({"role": "assistant", "turn_id": turn["id"], "content": reply})
        turns.append(
            {
                "id": turn["id"],
                "position": turn["position"],
                "user_request": turn["user_request"],
                "created_at": turn["created_at"],
                "attempt": latest.get("version"),
                "status": latest.get("status"),
                "outcome": latest.get("outcome"),
                "answer": latest.get("answer"),
                "error": latest.get("error"),
                "attachments": [
                    {k: a[k] for k in ("id", "filename", "media_type", "size_bytes", "sha256")}
                    for a in rows.attachments.get(turn["n"], [])
                ],
                "iterations": iterations,
            }
        )
    return {"dialog": dialog, "turns": turns}


SECTIONS: dict[str, Callable[[SessionRows], Any]] = {
    "session": section_session,
    "current_turn": section_current_turn,
    "failures": session_failures,
    "diagnosis": lambda rows: failures.diagnosis(session_failures(rows)),
    "session_forks": section_forks,
    "children": section_children,
    "turn_retries": section_retries,
    "usage": section_usage,
    "transcript": section_transcript,
}


# --- the reads, as operations (they run on a KB, in-process or in the daemon) ----------


def _guarded(what: str, default: Any, compute: Callable[[], Any], *, budget: bool = True) -> Any:
    """Run a read; a failure is logged, never raised, and gives `default` — but for its
    `budget` running out (`budget-exhausted`, the daemon's), which refuses the
    operation: it must not answer as if there were nothing. (`Introspection`'s methods,
    which never raise, pass budget=False.)"""
    try:
        return compute()
    except Exception as failed:
        if budget and isinstance(failed, Refused) and failed.kind == "budget-exhausted":
            raise
        log.exception("session introspection: %s failed; answering %r", what, default)
        return default


def _positive(option: str, value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise Refused("bad-option", f"{option} is a positive integer, e.g. 5", {"option": option})
    return value


def _descriptor(db: Any, session: dict[str, Any], current: str | None) -> dict[str, Any]:
    rows = SessionRows(db, session)
    state = _current_state(rows)
    provider = state.get("provider") or session["provider"]
    model = state.get("model") or session["model"]
    last_turn = None
    if rows.chain:
        turn = rows.chain[-1]
        latest = rows.latest_attempt(turn) or {}
        request = turn["user_request"]
        if len(request) > REQUEST_PREVIEW:
            request = request[:REQUEST_PREVIEW] + "..."
        last_turn = {"id": turn["id"], "outcome": latest.get("outcome"), "user_request": request}
    row = {key: session[key] for key in INDEX_KEYS}
    row.update(
        {
            "is_current": session["id"] == current,
            "provider": provider,
            "model": model,
            "provider_model": _provider_model(provider, model),
            "last_turn": last_turn,
        }
    )
    return row


@operation(
    "sessions.list_sessions",
    fields={
        "search": ("string", False, "THE ranked search (none: the newest-first index)"),
        "limit": ("integer", False, "at most this many rows"),
        "ranking": (
            "string",
            False,
            "banded (the default: the bands best first, newest first in each, then the "
            "sessions holding some of the words, then those found by meaning alone where "
            "koinii[semantic] is installed), lexical (the seed's bands only), relevance "
            "(as banded, the best match first in each band) "
            "or hybrid (fused with meaning, in the fused order; needs koinii[semantic])",
        ),
    },
    summary="the session index, or the ranked search",
    schedule="records_read",  # its SQL and embedding off the daemon's loop
    prepare=schema.ready,
)
def list_sessions(
    kb: KB, search: Any = None, limit: Any = None, ranking: Any = None
) -> list[dict[str, Any]]:
    if search is not None and not isinstance(search, str):
        raise Refused("bad-option", "search is a string", {"option": "search"})
    most = _positive("limit", limit)
    chosen = ranking_of(ranking)
    by_meaning = chosen == "hybrid" or (chosen != "lexical" and semantic.installed())
    vectors = meaning.for_kb(kb) if by_meaning else None
    schema.ready(kb)

    def read(db: Any) -> list[dict[str, Any]]:
        if search is None:
            return index(db, most)
        return ranked(
            db,
            search,
            most,
            vectors=vectors,
            fused=chosen == "hybrid",
            relevance=chosen == "relevance",
            some_words=chosen != "lexical",
        )

    return _guarded("list_sessions", [], lambda: kb.read_records(read))


@operation(
    "sessions.get_session",
    fields={
        "target": ("string", False, "an id, an unambiguous prefix, or vis_session_id#<id>"),
        "current_session_id": ("string", False, "the reader's own session (the default target)"),
    },
    summary="one session's descriptor, or null",
    schedule="records_read",  # a prefix the input gives is resolved in SQL: off the loop
    prepare=schema.ready,
)
def get_session(kb: KB, target: Any = None, current_session_id: Any = None) -> dict | None:
    schema.ready(kb)
    reader = kb.principal  # (its own import is the one a source id names: reading.py)

    def read(db: Any) -> dict[str, Any] | None:
        session = resolve(db, target if target is not None else current_session_id, reader)
        return None if session is None else _descriptor(db, session, current_session_id)

    return _guarded("get_session", None, lambda: kb.read_records(read))


@operation(
    "sessions.read_session",
    fields={
        "target": ("string", False, "an id, an unambiguous prefix, or vis_session_id#<id>"),
        "current_session_id": ("string", False, "the reader's own session (the default target)"),
        "turns": ("integer", False, "only the last this many turns of the active chain"),
        "before": ("integer", False, "with turns: the last ones before this turn position"),
    },
    summary="one session's canonical data: transcript, failures, diagnosis, usage, …",
    schedule="records_read",  # a whole session, as long as its writer made it: off the loop
    prepare=schema.ready,
)
def read_session(
    kb: KB,
    target: Any = None,
    current_session_id: Any = None,
    turns: Any = None,
    before: Any = None,
) -> dict[str, Any]:
    """The whole session, or with `turns` a window of it: see `window`."""
    shown = _positive("turns", turns)
    if _positive("before", before) is not None and shown is None:
        raise Refused(
            "bad-option",
            "before pages a window of turns: give turns too, e.g. turns=5, before=40",
            {"option": "before"},
        )
    schema.ready(kb)
    reader = kb.principal

    def read(db: Any) -> dict[str, Any]:
        session = _guarded(
            "read_session(target)",
            None,
            lambda: resolve(db, target if target is not None else current_session_id, reader),
        )
        if session is None:
            return dict(EMPTY_READ)
        rows = SessionRows(db, session)
        return {
            name: _guarded(f"read_session[{name}]", EMPTY_READ[name], lambda s=section: s(rows))
            for name, section in SECTIONS.items()
        }

    found = _guarded("read_session", dict(EMPTY_READ), lambda: kb.read_records(read))
    if shown is None:
        return found
    return _guarded("read_session(window)", found, lambda: window(found, shown, before))


def window(read: dict[str, Any], turns: int, before: int | None = None) -> dict[str, Any]:
    """A read cut to the last `turns` turns of the active chain (before position
    `before`): a long session — an agent's recorded tool calls are a turn each — is read
    a window at a time. The session's turn list, the transcript, the retries, the forks'
    turns and the failures keep the window's turns; the summaries (current turn,
    diagnosis, usage, counts) stay the whole session's. `older` is the position of the
    window's first turn when there are earlier ones: pass it as `before` to read them."""
    session = read.get("session")
    if not session:
        return read
    chain = [t for t in session["turns"] if before is None or t["position"] < before]
    kept = chain[-turns:]
    ids = {t["id"] for t in kept}
    low = kept[0]["position"] if kept else None
    high = kept[-1]["position"] if kept else None
    transcript = read.get("transcript") or {}
    out = {
        **read,
        "session": {**session, "turns": kept},
        "failures": [f for f in read["failures"] if f.get("turn_id") in ids],
        "session_forks": [
            {
                **fork,
                "turns": [t for t in fork["turns"] if kept and low <= t["position"] <= high],
            }
            for fork in read["session_forks"]
        ],
        "turn_retries": {k: v for k, v in read["turn_retries"].items() if k in ids},
        "transcript": {
            "dialog": [d for d in transcript.get("dialog", []) if d["turn_id"] in ids],
            "turns": [t for t in transcript.get("turns", []) if t["id"] in ids],
        },
    }
    if len(chain) > len(kept):
        out["older"] = low
    return out


# --- the reader ---------------------------------------------------------------------------


def _argument(
    method: str,
    args: tuple,
    kwargs: dict[str, Any],
    names: tuple[str, ...],
    options: tuple[str, ...] = (),
) -> Any:
    """The one argument of a read, positional or under any of its names (beside the
    read's `options`); anything else is ignored, with a warning."""
    value = args[0] if args else None
    for name in names:
        if kwargs.get(name) is not None:
            value = kwargs[name]
            break
    ignored = [k for k in kwargs if k not in names and k not in options] + (
        ["…"] if args[1:] else []
    )
    if ignored:
        log.warning("%s ignores the arguments %s", method, ignored)
    return value


class Introspection:
    """`list_sessions`, `get_session`, `read_session` over a session store (a
    `SessionStore`, `KB`, `Client` or path); they never raise."""

    def __init__(
        self,
        store: Any,
        current_session_id: str | None = None,
        *,
        enabled: bool | None = None,
    ) -> None:
        if not isinstance(store, SessionStore):
            store = SessionStore(store)
        self.store = store
        self._call = invoker(store.source)
        self.current_session_id = current_session_id
        self.enabled = enabled_by_default() if enabled is None else bool(enabled)

    def list_sessions(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """The newest-first index; with `search` (or `query`), THE ranked search."""

        def run() -> list[dict[str, Any]]:
            text = _argument("list_sessions", args, kwargs, SEARCH_NAMES, ("limit", "ranking"))
            if text is not None and not isinstance(text, str):
                text = str(text)
            return self._call(
                "sessions.list_sessions",
                search=text,
                limit=kwargs.get("limit"),
                ranking=kwargs.get("ranking"),
            )

        return _guarded("list_sessions", [], run, budget=False)

    def get_session(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        """One session's descriptor (no transcript); the current session by default."""

        def run() -> dict[str, Any] | None:
            target = self._target("get_session", args, kwargs)
            return self._call(
                "sessions.get_session",
                target=target,
                current_session_id=self.current_session_id,
            )

        return _guarded("get_session", None, run, budget=False)

    def read_session(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Everything about one session, section by section; the current one by default.
        `turns` (and `before`) read a window of a long one (`window`)."""

        def run() -> dict[str, Any]:
            target = self._target("read_session", args, kwargs, ("turns", "before"))
            found = self._call(
                "sessions.read_session",
                target=target,
                current_session_id=self.current_session_id,
                turns=kwargs.get("turns"),
                before=kwargs.get("before"),
            )
            return {**EMPTY_READ, **found} if isinstance(found, dict) else dict(EMPTY_READ)

        return _guarded("read_session", dict(EMPTY_READ), run, budget=False)

    def _target(
        self, method: str, args: tuple, kwargs: dict[str, Any], options: tuple[str, ...] = ()
    ) -> str | None:
        target = _argument(method, args, kwargs, TARGET_NAMES, options)
        if isinstance(target, dict):
            target = target.get("id")
        if target is not None and not isinstance(target, str):
            raise TypeError(f"{method}: a target is a string, not {type(target).__name__}")
        return target

    def agent_tools(self) -> dict[str, Callable[..., Any]]:
        """The reads to offer an agent: all three while the toggle is on, none while off."""
        if not self.enabled:
            return {}
        return {
            "list_sessions": self.list_sessions,
            "get_session": self.get_session,
            "read_session": self.read_session,
        }

    def agent_prompt(self) -> str:
        """What to tell an agent about its tools ("" while the toggle is off)."""
        return AGENT_PROMPT if self.enabled else ""
