"""OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl`) → sessions.

The format is described in shared/data/transcripts/FORMAT.md §2; what this importer
makes of it:

- **Lines.** Newer files wrap each item as `{timestamp, type, payload}`; older ones
  ("bare") write the items themselves, after a first `{id, timestamp, instructions}`
  line. `{"record_type": "state"}` lines and unknown kinds are skipped.
- **Turns.** Each `event_msg/user_message` (what the person typed) starts a turn. A
  file with none (the bare era) starts one at each `response_item` user message that is
  not injected context (`<environment_context>`, `<user_instructions>`, AGENTS.md, …).
- **Iterations.** One per model round trip: the reasoning, messages and tool calls the
  model emits until the next tool output comes back. Reasoning summaries are the
  thinking, assistant `output_text` the prose; `function_call`, `custom_tool_call` and
  `local_shell_call` become blocks (code = their arguments or input), paired with their
  outputs by `call_id`. A `web_search_call` (a server-side search, with no output item)
  is a `web_search` block whose code is the query. The `event_msg` mirrors
  (`agent_message`, `agent_reasoning`, `web_search_end`) are not read twice.
- **Tokens.** `token_count` totals are cumulative for the session, so a turn's tokens
  are how much the total grew during it (duplicated events change nothing). Codex counts
  cached tokens inside `input` (as the store does) and reasoning inside `output`; the
  store keeps reasoning apart, so `output` here is output minus reasoning.
- **Outcome.** `task_complete` → done; `turn_aborted` → interrupted (cancelled); an
  `event_msg/error` → error.
- **Project:** the `project_id` of `session_meta.cwd` (koinii/projects.py); the cwd is
  kept in the session's meta.
- **Title:** the last `thread_name_updated`, else the first prompt: its request alone
  when an IDE extension wrote a preamble above it (`# Files mentioned by the user:` or
  `# Context from my IDE setup:`, then `## My request for Codex:`), the next prompt when
  it holds none. **Model:** from `turn_context`; **provider:**
  `session_meta.model_provider`.
- **Idempotent** by `codex:<session id>`, with a fingerprint of the records read, the
  malformed lines and the last timestamp; malformed lines are counted, never fatal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koinii.projects import project_of_recorded
from koinii.sessions import checks, jsonl

SOURCE = "codex"
IMPORTER_VERSION = 3  # 2: web searches are blocks; 3: no IDE preamble as the title
WRAPPED = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
ITEMS = (
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
)
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
INJECTED = ("<environment_context", "<user_instructions", "# AGENTS.md", "<permissions")
# What Codex's IDE extensions write above a person's words (the files and tabs they point
# at), and the heading their words follow.
IDE_PREAMBLES = ("# Context from my IDE setup:", "# Files mentioned by the user:")
IDE_REQUEST = "## My request for Codex:"
_TOKEN_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def is_rollout(record: dict[str, Any]) -> bool:
    """Does this first record open a Codex rollout (either era)?"""
    if record.get("type") in WRAPPED and isinstance(record.get("payload"), dict):
        return True
    return "instructions" in record and "id" in record and "type" not in record


def envelope(record: dict[str, Any] | None) -> tuple[str | None, dict[str, Any], str | None]:
    """(kind, payload, timestamp) of a line of either era; kind None: skip it."""
    if record is None or "record_type" in record:
        return None, {}, None
    if isinstance(record.get("payload"), dict) and record.get("type") in WRAPPED:
        return record["type"], record["payload"], jsonl.timestamp(record.get("timestamp"))
    if record.get("type") in ITEMS:
        return "response_item", record, None
    if "instructions" in record and "id" in record:
        return "session_meta", record, jsonl.timestamp(record.get("timestamp"))
    return None, {}, None


def _texts(content: Any, kinds: tuple[str, ...]) -> str:
    parts = []
    for block in content if isinstance(content, list) else ():
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and block.get("type") in kinds:
            parts.append(text)
    return "\n".join(parts).strip()


def _injected(text: str) -> bool:
    return not text or text.lstrip().startswith(INJECTED)


def request_of(text: str) -> str | None:
    """What a person asked in a prompt: the words after an IDE extension's preamble (None
    when the preamble holds no request), else the prompt itself."""
    text = text.strip()
    if not text.startswith(IDE_PREAMBLES):
        return text or None
    _, marker, request = text.partition(IDE_REQUEST)
    return request.strip() or None if marker else None


def _total(payload: dict[str, Any]) -> dict[str, int] | None:
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return None
    return {k: total[k] if type(total.get(k)) is int else 0 for k in _TOKEN_KEYS}


# --- pass 1 -------------------------------------------------------------------------------


@dataclass
class Scan:
    records: int = 0
    malformed: list[int] = field(default_factory=list)
    torn: bool = False
    session_id: str | None = None
    started: str | None = None
    last: str | None = None
    cwd: str | None = None
    provider: str | None = None
    model: str | None = None
    version: str | None = None
    originator: str | None = None
    branch: str | None = None
    thread_name: str | None = None
    first_prompt: str | None = None
    typed_prompts: bool = False  # event_msg/user_message seen: they mark the turns


def scan(path: Path) -> Scan:
    found = Scan()
    for number, record, last in jsonl.records(path):
        if record is None:
            found.malformed.append(number)
            found.torn = found.torn or last
            continue
        found.records += 1
        kind, payload, moment = envelope(record)
        if moment:
            found.started = found.started or moment
            found.last = moment
        if kind == "session_meta" and found.session_id is None:
            _note_meta(found, payload)
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            found.model = payload["model"]
        elif kind == "event_msg":
            what = payload.get("type")
            if what == "user_message" and isinstance(payload.get("message"), str):
                found.typed_prompts = True
                found.first_prompt = found.first_prompt or request_of(payload["message"])
            elif what == "thread_name_updated" and isinstance(payload.get("thread_name"), str):
                found.thread_name = payload["thread_name"]
        elif kind == "response_item" and payload.get("role") == "user" and not found.typed_prompts:
            text = _texts(payload.get("content"), ("input_text",))
            if not _injected(text):
                found.first_prompt = found.first_prompt or request_of(text)
    return found


def _note_meta(found: Scan, meta: dict[str, Any]) -> None:
    if isinstance(meta.get("id"), str):
        found.session_id = meta["id"]
    found.started = jsonl.timestamp(meta.get("timestamp")) or found.started
    for key, attr in (
        ("cwd", "cwd"),
        ("model_provider", "provider"),
        ("cli_version", "version"),
        ("originator", "originator"),
    ):
        if isinstance(meta.get(key), str) and meta[key]:
            setattr(found, attr, meta[key])
    git = meta.get("git")
    if isinstance(git, dict) and isinstance(git.get("branch"), str):
        found.branch = git["branch"]


# --- pass 2 -------------------------------------------------------------------------------


@dataclass
class _Turn:
    request: str
    created_at: str | None
    start_total: dict[str, int] | None
    end_total: dict[str, int] | None = None
    finished_at: str | None = None
    iterations: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    after_output: bool = False
    done: bool = False
    aborted: bool = False
    error: str | None = None


class _TurnBuilder:
    def __init__(self, found: Scan) -> None:
        self.found = found
        self.model = found.model
        self.total: dict[str, int] | None = None
        self.orphan_outputs = 0

    def turns(self, path: Path) -> Iterator[dict[str, Any]]:
        turn: _Turn | None = None
        for _, record, _ in jsonl.records(path):
            kind, payload, moment = envelope(record)
            if kind is None:
                continue
            if turn is not None and moment:
                turn.finished_at = moment
            if kind == "turn_context" and isinstance(payload.get("model"), str):
                self.model = payload["model"]
            elif kind == "event_msg":
                started = self._event(turn, payload, moment)
                if started is not None:
                    if turn is not None:
                        yield self.document(turn)
                    turn = started
            elif kind == "response_item":
                prompt = self._prompt(payload)
                if prompt is not None:
                    if turn is not None:
                        yield self.document(turn)
                    turn = _Turn(prompt, moment, self.total)
                elif payload.get("type") != "message" or payload.get("role") == "assistant":
                    if turn is None:  # the model's items; injected user/developer text is not
                        turn = _Turn("", moment, self.total)
                    self._item(turn, payload, moment)
        if turn is not None:
            yield self.document(turn)

    def _event(self, turn: _Turn | None, payload: dict[str, Any], moment) -> _Turn | None:
        """Note an event; returns the new turn a typed prompt starts."""
        what = payload.get("type")
        if what == "user_message" and isinstance(payload.get("message"), str):
            return _Turn(payload["message"].strip(), moment, self.total)
        if what == "token_count":
            total = _total(payload)
            if total is not None:
                self.total = total
                if turn is not None:
                    turn.end_total = total
        elif turn is None:
            return None
        elif what == "task_complete":
            turn.done = True
        elif what == "turn_aborted":
            turn.aborted = True
        elif what == "error":
            message = payload.get("message")
            turn.error = message if isinstance(message, str) else json.dumps(payload)
        return None

    def _prompt(self, payload: dict[str, Any]) -> str | None:
        """The request a bare-era user message makes (typed prompts come as events)."""
        if self.found.typed_prompts or payload.get("type") != "message":
            return None
        if payload.get("role") != "user":
            return None
        text = _texts(payload.get("content"), ("input_text",))
        return None if _injected(text) else text

    def _iteration(self, turn: _Turn, moment: str | None) -> dict[str, Any]:
        if not turn.iterations or turn.after_output:
            turn.after_output = False
            turn.iterations.append(
                {
                    "thinking": [],
                    "prose": [],
                    "model": self.model,
                    "started_at": moment,
                    "blocks": [],
                }
            )
        return turn.iterations[-1]

    def _item(self, turn: _Turn, payload: dict[str, Any], moment: str | None) -> None:
        what = payload.get("type")
        if what == "reasoning":
            summary = payload.get("summary")
            text = _texts(summary, ("summary_text",))
            if not text and isinstance(payload.get("content"), str):
                text = payload["content"].strip()
            if text:
                self._iteration(turn, moment)["thinking"].append(text)
        elif what == "message" and payload.get("role") == "assistant":
            text = _texts(payload.get("content"), ("output_text",))
            if text:
                self._iteration(turn, moment)["prose"].append(text)
        elif what in CALLS:
            code = payload.get("arguments", payload.get("input", payload.get("action")))
            block = {
                "tool": str(payload.get("name") or what),
                "code": code if isinstance(code, str) else json.dumps(code, ensure_ascii=False),
            }
            self._iteration(turn, moment)["blocks"].append(block)
            if isinstance(payload.get("call_id"), str):
                turn.calls[payload["call_id"]] = block
        elif what == "web_search_call":
            # a server-side search: no output item follows; the action holds the query
            action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
            query = action.get("query")
            block = {
                "tool": "web_search",
                "code": query if isinstance(query, str) else json.dumps(action, ensure_ascii=False),
            }
            if isinstance(payload.get("status"), str) and payload["status"] != "completed":
                block["error"] = f"the search ended {payload['status']}"
            self._iteration(turn, moment)["blocks"].append(block)
        elif what in OUTPUTS:
            turn.after_output = True
            block = turn.calls.get(payload.get("call_id"))
            if block is None:
                self.orphan_outputs += 1
                return
            output = payload.get("output")
            block["result"] = (
                output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            )

    def document(self, turn: _Turn) -> dict[str, Any]:
        """The turn as `import_part` takes it (rows.py `checked_turn`)."""
        iterations = [
            {
                "thinking": "\n\n".join(it["thinking"]) or None,
                "prose": "\n\n".join(it["prose"]) or None,
                "provider": self.found.provider,
                "model": it["model"],
                "started_at": it["started_at"],
                "blocks": it["blocks"],
            }
            for it in turn.iterations
        ]
        answer = next((it["prose"] for it in reversed(iterations) if it["prose"]), None)
        if turn.error is not None:
            status, outcome = "error", "error"
        elif turn.aborted:
            status, outcome = "interrupted", "cancelled"
        else:
            status, outcome = "done", "complete"
        return {
            "user_request": turn.request,
            "created_at": turn.created_at,
            "attempts": [
                {
                    "status": status,
                    "outcome": outcome,
                    "answer": answer,
                    "error": turn.error,
                    "duration_ms": checks.millis_between(turn.created_at, turn.finished_at),
                    "tokens": _grown(turn.start_total, turn.end_total),
                    "created_at": turn.created_at,
                    "finished_at": turn.finished_at or turn.created_at,
                    "iterations": iterations,
                }
            ],
        }


def _grown(start: dict[str, int] | None, end: dict[str, int] | None) -> dict[str, int]:
    if end is None:
        return {}
    start = start or dict.fromkeys(_TOKEN_KEYS, 0)
    grew = {k: max(0, end[k] - start[k]) for k in _TOKEN_KEYS}
    return {
        "input": grew["input_tokens"],
        "cached": min(grew["cached_input_tokens"], grew["input_tokens"]),
        "output": max(0, grew["output_tokens"] - grew["reasoning_output_tokens"]),
        "reasoning": grew["reasoning_output_tokens"],
    }


# --- one file -------------------------------------------------------------------------------


def import_file(store: Any, path: Path) -> dict[str, Any]:
    """Import one rollout; returns its report (a bad line never stops it)."""
    path = Path(path)
    found = scan(path)
    report: dict[str, Any] = {
        "path": str(path),
        "session_id": None,
        "turns": 0,
        "records": found.records,
        "malformed": len(found.malformed),
        "malformed_lines": found.malformed[: jsonl.REPORTED_LINES],
        "torn_last_line": found.torn,
    }
    if found.session_id is None:
        return {**report, "status": "empty", "message": "no session_meta record"}
    source_id = found.session_id
    title = found.thread_name or found.first_prompt
    title = jsonl.one_line(title) if title else None
    fingerprint = jsonl.fingerprint(
        IMPORTER_VERSION, found.records, len(found.malformed), found.last
    )
    session = {
        "channel": SOURCE,
        "title": title or None,
        "project_id": project_of_recorded(found.cwd),
        "provider": found.provider,
        "model": found.model,
        "created_at": found.started,
        "fingerprint": fingerprint,
        "meta": {
            "source": SOURCE,
            "source_session_id": source_id,
            "cwd": found.cwd,
            "path": os.path.abspath(path),
            "version": found.version,
            "originator": found.originator,
            "git_branch": found.branch,
            "records": found.records,
            "malformed_lines": len(found.malformed),
        },
    }
    builder = _TurnBuilder(found)
    return jsonl.store_transcript(
        store,
        report,
        source=SOURCE,
        source_id=source_id,
        session=session,
        turns=builder.turns(path),
        orphans=lambda: builder.orphan_outputs,
    )
