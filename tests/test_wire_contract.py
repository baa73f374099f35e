"""Every domain operation answers over the wire as it does in process.

The domain suites (moves, conversation reads, wraps, sessions, history, backups) run in
process, on the local medium: the rules they test live in the operations, which run the
same whichever medium called them (operations.py). What the wire adds — the daemon's
routes, field checks, JSON on the way in and out — is checked here, once per operation: one
script calls every registered operation through `invoker(kb)` and through
`invoker(client)` of a daemon, on two fresh stores, and the two must observe the same.
A new operation fails `test_the_script_calls_every_operation` until it is added here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

import koinii
from koinii import operations
from koinii.operations import invoker

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

TIME = re.compile(r"(^|_)(at|ms|created|time|finished|started|until|when)$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT")
MINTED = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

S1, S2 = "6f1c0e55-0000-4000-8000-000000000001", "6f1c0e55-0000-4000-8000-000000000002"
T1, I1, B1 = (f"6f1c0e55-0000-4000-8000-00000000001{n}" for n in range(3))

# One step per call: (operation, fields), where a field given as a function of what the
# earlier steps returned is worked out as the script runs.
Step = tuple[str, dict[str, Any]]


def _steps() -> list[Step]:
    def r(key: str, *path: Any) -> Callable[[dict[str, Any]], Any]:
        def look(seen: dict[str, Any]) -> Any:
            value = seen[key]
            for part in path:
                value = value[part]
            return value

        return look

    atlas, boreas = {"agent": "AgentAtlas"}, {"agent": "AgentBoreas"}
    return [
        ("moves.join", {**atlas, "channel": "CxTeam"}),
        ("moves.join", {**boreas, "channel": "CxTeam", "speaks": "CxCore"}),
        ("conversation.channels", {}),
        ("conversation.members", {"channel": "CxTeam"}),
        ("moves.ask", {**atlas, "question": "(poolSize Billing ?n)"}),
        (
            "moves.answer",
            {**boreas, "question": r("moves.ask", "handle"), "content": "(poolSize Billing 500)"},
        ),
        ("moves.claim", {**atlas, "sentence": "(leaks BillingWorker)"}),
        ("moves.endorse", {**boreas, "target": r("moves.claim", "handle")}),
        (
            "moves.justify",
            {**boreas, "target": r("moves.claim", "handle"), "ground": '"the heap grows"'},
        ),
        ("moves.not_understood", {**atlas, "target": r("moves.justify", "handle")}),
        ("moves.refuse", {**atlas, "target": r("moves.endorse", "handle")}),
        (
            "moves.reply_many",
            {**atlas, "sentences": ["(uses Billing Postgres)", "(owns Ops Billing)"]},
        ),
        ("moves.dispute", {**boreas, "target": r("moves.reply_many", "handles", 0)}),
        ("moves.vote", {**atlas, "target": r("moves.reply_many", "handles", 0), "stance": "for"}),
        ("belief.why_not", {"handle": r("moves.claim", "handle"), "context": "CxTeam"}),
        ("conversation.questions", {"channel": "CxTeam"}),
        ("conversation.thread", {"handle": r("moves.ask", "handle"), "channel": "CxTeam"}),
        ("conversation.disputes", {"channel": "CxTeam"}),
        (
            "moves.accept",
            {**atlas, "answer": r("moves.answer", "handle"), "reason": "it matches the config"},
        ),
        ("moves.close", {**atlas, "question": r("moves.ask", "handle"), "reason": "settled"}),
        (
            "moves.concede",
            {**atlas, "target": r("moves.reply_many", "handles", 0), "reason": "it is MySQL"},
        ),
        ("moves.withdraw", {**atlas, "handle": r("moves.claim", "handle")}),
        ("conversation.roster", {"channel": "CxTeam"}),
        (
            "conversation.thread",
            {"handle": r("moves.claim", "handle"), "channel": "CxTeam", "as_of": 12},
        ),
        ("history.forget", {"before_seq": 1}),
        ("sessions.start_session", {"id": S1, "title": "pool", "channel": "CxTeam"}),
        ("sessions.set_title", {"session_id": S1, "title": "the pool size"}),
        ("sessions.start_turn", {"id": T1, "session_id": S1, "user_request": "size?"}),
        ("sessions.add_attachment", {"turn_id": T1, "filename": "pool.txt", "size_bytes": 3}),
        ("sessions.record_iteration", {"id": I1, "turn_id": T1, "prose": "reading"}),
        ("sessions.record_block", {"id": B1, "iteration_id": I1, "tool": "sh", "code": "ls"}),
        ("sessions.finish_turn", {"turn_id": T1, "status": "done", "outcome": "complete"}),
        ("sessions.retry_turn", {"turn_id": T1}),
        ("sessions.record_routing", {"session_id": S1, "kind": "fallback", "reason": "busy"}),
        ("sessions.fork_session", {"session_id": S1, "title": "a fork"}),
        (
            "sessions.record_batch",
            {"events": [{"verb": "start_session", "fields": {"id": S2, "title": "batch"}}]},
        ),
        (
            "sessions.import_part",
            {
                "external_id": "ext-1",
                "part": 0,
                "session": {"title": "x"},
                "turns": [],
                "done": True,
            },
        ),
        ("sessions.get_session", {"target": S1}),
        ("sessions.read_session", {"target": S1, "turns": 5}),
        ("sessions.list_sessions", {"search": "pool", "limit": 5}),
        (
            "wraps.add",
            {
                "wrap_id": "w-1",
                "agent_id": "AgentBoreas",
                "session_id": S1,
                "parent_session_id": "lead-1",
                "project_id": "shop",
            },
        ),
        (
            "wraps.wrap_session",
            {
                "agent_id": "AgentAtlas",
                "wrap_id": "w-2",
                "session_id": S2,
                "parent_session_id": "lead-1",
                "notes": ["the pool is 500"],
            },
        ),
        ("wraps.list", {"parent_session_id": "lead-1"}),
        ("wraps.wait", {"parent_session_id": "lead-1", "timeout_s": 0}),
        ("wraps.mark_processed", {"wrap_id": "w-1"}),
        (
            "wraps.coordinators.register",
            {"coordinator_id": "c-1", "project_id": "shop", "session_id": "lead-1", "pid": 4242},
        ),
        ("wraps.coordinators.heartbeat", {"coordinator_id": "c-1"}),
        ("wraps.coordinators.set_status", {"coordinator_id": "c-1", "status": "stale"}),
        ("wraps.coordinators.get", {"coordinator_id": "c-1"}),
        ("wraps.coordinators.list", {"project_id": "shop"}),
        ("wraps.coordinators.cleanup_stale", {"threshold_ms": 3_600_000}),
        ("wraps.coordinators.remove", {"coordinator_id": "c-1"}),
        ("store.backup", {}),
        ("store.backup_part", {"id": r("store.backup", "id"), "offset": 0}),
        ("store.backup_done", {"id": r("store.backup", "id")}),
    ]


def _run(source: Any) -> list[tuple[str, Any]]:
    call = invoker(source)
    seen: dict[str, Any] = {}
    observed = []
    for name, fields in _steps():
        given = {k: v(seen) if callable(v) else v for k, v in fields.items()}
        try:
            result = call(name, **given)
        except koinii.Refused as refusal:
            result = {"refused": refusal.kind}
        seen.setdefault(name, result)
        observed.append((name, _comparable(name, result)))
    return observed


def _comparable(name: str, value: Any, key: str = "") -> Any:
    """What two runs must agree on: times, the ids the store mints, and a backup's bytes
    differ between runs."""
    if name.startswith("store.backup") and key in ("id", "data", "sha256", "bytes"):
        return "<bytes>"
    if TIME.search(key) or (isinstance(value, str) and ISO.match(value)):
        return "<time>"
    if isinstance(value, str) and MINTED.match(value) and not value.startswith("6f1c0e55"):
        return "<minted id>"
    if isinstance(value, dict):
        return {k: _comparable(name, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_comparable(name, v, key) for v in value]
    return value


def test_the_script_calls_every_operation():
    served = {name for name, op in operations.load_domains().items() if op.on == "kb"}
    assert served == {name for name, _ in _steps()}


def test_every_operation_answers_over_the_wire_as_in_process(tmp_path, start_daemon):
    with koinii.open_kb(tmp_path / "here.db") as kb:
        local = _run(kb)
    with start_daemon().client() as client:
        remote = _run(client)
    for (name, here), (_, there) in zip(local, remote, strict=True):
        assert here == there, name
    assert not [name for name, seen in local if isinstance(seen, dict) and "refused" in seen]
