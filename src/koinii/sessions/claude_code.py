"""Claude Code session transcripts (`~/.claude/projects/<dir>/<session>.jsonl`) → sessions.

One concept: one runtime's transcript format, read into sessions; its size is the
format's many record kinds.

The format is described in shared/data/transcripts/FORMAT.md; what this importer makes
of it:

- **Turns.** A turn starts at each user record a person typed: its content is a string
  or text blocks, it is not `isMeta`, not a tool result, not a harness note (`[Request
  interrupted by user…]`), not local-command output (`<local-command-…>`) and not a
  `<task-notification>` (the harness saying a background task ended: a
  `task-notification` block of the running iteration, code = the task id, result — or
  error, when it failed — = its summary). A slash
  command (`<command-name>/init</command-name>`) is a turn whose request is `/init` plus
  its arguments. Records before the first prompt (a resumed file) open a turn with an
  empty request. `system` records are events, never turns.
- **Iterations.** One per API response (`message.id`): the streaming split writes one
  line per content block, and they are put back together here. `text` blocks are the
  prose, `thinking` blocks the thinking, `tool_use` blocks become blocks (tool = name,
  code = the input as JSON) paired with their `tool_result` by id (`is_error` → error).
- **Tokens** are counted once per message id, taking the largest value of each field
  seen on its lines. `input` = input + cache reads + cache writes; `cached` = cache reads;
  `cache_created` = cache writes (schema.py).
- **The conversation is a tree** (`uuid`/`parentUuid`). The live conversation is the
  chain from the last record up to the root: the session's current state. A branch
  hanging off it that starts with a new prompt or a different response (a rewind, an
  edit, a regenerated answer) is kept as an earlier state (a fork), in the order the
  branches were written, forked from the live state after the turns it shares (a
  regenerated answer re-answers the turn it left); branches inside such a branch are
  folded into it. Branches of the same response (parallel tool calls) are one turn.
  Records are imported in file order.
- **Sub-agents.** Sidechain records (`isSidechain`) are a sub-agent's conversation: a
  child session of the file's session (`parent_session_id`), one per `agentId` (or per
  `agent-<id>.jsonl` file), keyed `claude-code:<sessionId>/agent-<id>`, with the Task
  call that started it when the parent says (`toolUseResult.agentId`, `agent_progress`).
- **Project:** the `project_id` of the first prompt's `cwd` (koinii/projects.py: the
  repository's name and the folders below it, where this machine has the directory;
  else its name); the cwd itself is kept in the session's meta.
- **Title:** `custom-title` > `ai-title` > a `summary` record whose `leafUuid` is in this
  conversation — found in any `.jsonl` file of the same folder — > the first real prompt
  > the first slash command.
- **Idempotent and streaming.** The session is keyed `claude-code:<sessionId>`; its
  fingerprint (the records read and the last record's uuid) makes a re-import of an
  unchanged file write nothing, and a grown file replace the earlier import. The file
  is read twice, a line at a time: once for the tree (a few ids per record are kept),
  once to build turns, which are written in parts as they are built.
- **Never fatal.** A line that is not a JSON object (a torn last line, garbage) is
  counted and reported by number, and the rest is imported.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koinii.projects import project_of_recorded
from koinii.sessions import checks, jsonl

SOURCE = "claude-code"
IMPORTER_VERSION = 2  # part of the fingerprint: a new importer re-imports
CONVERSATION = ("user", "assistant", "system", "progress", "attachment")
INTERRUPTED = "[Request interrupted by user"
LOCAL_OUTPUT = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>")
NOTIFICATION = "<task-notification>"  # the harness reporting a background task's end
NOTIFICATION_TOOL = "task-notification"
FAILED_TASK = ("failed", "killed", "error", "cancelled")


log = logging.getLogger("koinii.sessions")


# --- reading records ---------------------------------------------------------------------


def _text_of(content: Any) -> str:
    """The readable text of a message content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "image":
            parts.append("[image]")
    return "\n".join(parts)


def _command(text: str) -> str | None:
    """`/name args` for a slash-command wrapper, else None."""
    if "<command-name>" not in text:
        return None
    name = text.split("<command-name>", 1)[1].split("</command-name>", 1)[0].strip()
    args = ""
    if "<command-args>" in text:
        args = text.split("<command-args>", 1)[1].split("</command-args>", 1)[0].strip()
    return f"{name} {args}".strip()


def prompt_of(record: dict[str, Any]) -> str | None:
    """The request a user record makes, or None when it is not a typed prompt."""
    if record.get("type") != "user" or record.get("isMeta") or record.get("isCompactSummary"):
        return None
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        kinds = {b.get("type") for b in content if isinstance(b, dict)}
        if "tool_result" in kinds or not kinds & {"text", "image"}:
            return None
    elif not isinstance(content, str):
        return None
    text = _text_of(content).strip()
    if text.startswith((INTERRUPTED, NOTIFICATION)) or text.startswith(LOCAL_OUTPUT):
        return None
    command = _command(text)
    return command if command is not None else text


def summaries_in(folder: Path) -> dict[str, tuple[str, str]]:
    """leafUuid → (summary, file) over every `.jsonl` file of a project folder."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        try:
            with open(path, "rb") as f:
                for raw in f:
                    if b'"summary"' not in raw:
                        continue
                    try:
                        record = jsonl.cleaned(json.loads(raw))
                    except ValueError:
                        continue  # a malformed line is reported when its own file imports
                    if (
                        isinstance(record, dict)
                        and record.get("type") == "summary"
                        and isinstance(record.get("summary"), str)
                        and isinstance(record.get("leafUuid"), str)
                    ):
                        found[record["leafUuid"]] = (record["summary"], path.name)
        except OSError as exc:  # an unreadable sibling costs only the titles it may hold
            log.warning("cannot read %s for session titles: %s", path, exc)
    return found


# --- pass 1: the tree and what is known about the whole file ------------------------------


@dataclass
class Scan:
    """What the first pass keeps: a few ids per record, and file-wide facts."""

    records: int = 0
    malformed: list[int] = field(default_factory=list)
    torn: bool = False
    parent: dict[str, str | None] = field(default_factory=dict)
    line_of: dict[str, int] = field(default_factory=dict)
    starts_turn: set[str] = field(default_factory=set)
    message_of: dict[str, str] = field(default_factory=dict)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    session_ids: dict[str, int] = field(default_factory=dict)
    sidechain: int = 0
    duplicates: int = 0
    leaf: str | None = None
    custom_title: str | None = None
    ai_title: str | None = None
    first_prompt: str | None = None
    first_command: str | None = None
    cwd: str | None = None
    version: str | None = None
    git_branch: str | None = None
    slug: str | None = None
    model: str | None = None
    started: str | None = None
    agent: str | None = None  # the sub-agent this scan is of (None: the main conversation)
    agents: dict[str, int] = field(default_factory=dict)  # sidechain records per sub-agent
    agent_calls: dict[str, str] = field(default_factory=dict)  # agent id → its Task call id
    talk: set[str] = field(default_factory=set)  # user/assistant/system records (not meta)
    _tree: Tree | None = None

    def tree(self) -> Tree:
        """The live conversation and the branches left off it (computed once)."""
        if self._tree is None:
            self._tree = self._grown()
        return self._tree

    def kept(self) -> set[str]:
        """The uuids of the live conversation and the branches of its responses."""
        return self.tree().live

    def _grown(self) -> Tree:
        chain: set[str] = set()
        node = self.leaf
        while node is not None and node not in chain:
            chain.add(node)
            node = self.parent.get(node)
        messages = {self.message_of[u] for u in chain if u in self.message_of}
        children: dict[str, list[str]] = {}
        for uuid, parent in self.parent.items():
            if parent is not None:
                children.setdefault(parent, []).append(uuid)
        roots = [
            uuid
            for uuid, parent in self.parent.items()
            if uuid not in chain
            and parent in chain
            and (
                uuid in self.starts_turn
                or (uuid in self.message_of and self.message_of[uuid] not in messages)
            )
        ]
        roots.sort(key=lambda uuid: self.line_of[uuid])
        branch_of: dict[str, int] = {}
        for number, root in enumerate(roots):
            stack = [root]
            while stack:
                node = stack.pop()
                if node not in branch_of:
                    branch_of[node] = number
                    stack.extend(children.get(node, ()))
        live = set(self.parent) - set(branch_of)
        # the live turn each kept record is in, counted as the builder counts turns: one per
        # prompt, and one opened by conversation before the first prompt
        turn_at: dict[str, int] = {}
        count = 0
        for uuid in sorted(live, key=lambda u: self.line_of[u]):
            if uuid in self.starts_turn or (count == 0 and uuid in self.talk):
                count += 1
            turn_at[uuid] = count
        branches = []
        for root in roots:
            at = turn_at.get(self.parent[root], 0)
            if root in self.starts_turn or at == 0:
                branches.append(Branch(root, at, None))
            else:  # a regenerated response: the branch goes on with the turn it left
                branches.append(Branch(root, at - 1, at))
        return Tree(live, branch_of, branches)


@dataclass
class Branch:
    """A branch left off the live conversation (a rewind, an edit, a regenerated answer):
    kept as an earlier state of the session, forked after `fork_position` live turns;
    `continues` is the live turn it answers again (its request is that turn's)."""

    root: str
    fork_position: int
    continues: int | None


@dataclass
class Tree:
    live: set[str]
    branch_of: dict[str, int]  # uuid → its branch's index, for the records left off
    branches: list[Branch]


def agent_of(record: dict[str, Any], path: Path) -> str:
    """Which sub-agent a sidechain record belongs to: its `agentId` (2.x), else the file's
    (`agent-<id>.jsonl`), else the file's stem."""
    agent = record.get("agentId")
    if isinstance(agent, str) and agent:
        return agent
    return path.stem.removeprefix("agent-")


def scan(path: Path, agent: str | None = None) -> Scan:
    """The first pass over the main conversation of a file, or (`agent`) over the
    sidechain records of one of its sub-agents."""
    found = Scan(agent=agent)
    for number, record, last in jsonl.records(path):
        if record is None:
            found.malformed.append(number)
            found.torn = found.torn or last
            continue
        found.records += 1
        kind = record.get("type")
        if agent is None:
            _note_file(found, record, kind)
        uuid = record.get("uuid")
        if kind not in CONVERSATION or not isinstance(uuid, str):
            continue
        if record.get("isSidechain"):
            key = agent_of(record, path)
            if agent is None:
                found.sidechain += 1
                found.agents[key] = found.agents.get(key, 0) + 1
                continue
            if key != agent:
                continue
        elif agent is not None:
            continue
        if uuid in found.parent:
            found.duplicates += 1
            continue
        parent = record.get("parentUuid") or record.get("logicalParentUuid")
        found.parent[uuid] = parent if isinstance(parent, str) else None
        found.line_of[uuid] = number
        found.leaf = uuid
        if kind in ("user", "assistant", "system") and not record.get("isMeta"):
            found.talk.add(uuid)
        _note_session(found, record)
        if kind == "user":
            _note_prompt(found, uuid, record)
        elif kind == "assistant":
            _note_response(found, uuid, record)
    return found


def _note_file(found: Scan, record: dict[str, Any], kind: Any) -> None:
    """What the main scan notes of any record: titles, and which Task call started which
    sub-agent (a Task result's `toolUseResult.agentId`, or an `agent_progress` record)."""
    if kind == "custom-title" and isinstance(record.get("customTitle"), str):
        found.custom_title = record["customTitle"]
    elif kind == "ai-title" and isinstance(record.get("aiTitle"), str):
        found.ai_title = record["aiTitle"]
    elif kind == "progress" and isinstance(record.get("data"), dict):
        data, call = record["data"], record.get("parentToolUseID")
        agent = data.get("agentId")
        if (
            data.get("type") == "agent_progress"
            and isinstance(agent, str)
            and isinstance(call, str)
        ):
            found.agent_calls.setdefault(agent, call)
    elif kind == "user" and isinstance(record.get("toolUseResult"), dict):
        agent = record["toolUseResult"].get("agentId")
        message = record.get("message") if isinstance(record.get("message"), dict) else {}
        content = message.get("content")
        for block in content if isinstance(agent, str) and isinstance(content, list) else ():
            if isinstance(block, dict) and isinstance(block.get("tool_use_id"), str):
                found.agent_calls.setdefault(agent, block["tool_use_id"])


def _note_session(found: Scan, record: dict[str, Any]) -> None:
    session_id = record.get("sessionId")
    if isinstance(session_id, str):
        found.session_ids[session_id] = found.session_ids.get(session_id, 0) + 1
    moment = jsonl.timestamp(record.get("timestamp"))
    if moment and (found.started is None or moment < found.started):
        found.started = moment
    for key, attr in (("version", "version"), ("gitBranch", "git_branch"), ("slug", "slug")):
        if isinstance(record.get(key), str) and record[key]:
            setattr(found, attr, record[key])


def _note_prompt(found: Scan, uuid: str, record: dict[str, Any]) -> None:
    if found.cwd is None and isinstance(record.get("cwd"), str):
        found.cwd = record["cwd"]
    prompt = prompt_of(record)
    if prompt is None:
        return
    found.starts_turn.add(uuid)
    if prompt.startswith("/") and _command(_text_of(record["message"]["content"])):
        found.first_command = found.first_command or prompt
    elif prompt:
        found.first_prompt = found.first_prompt or prompt


_USAGE = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _note_response(found: Scan, uuid: str, record: dict[str, Any]) -> None:
    message = record.get("message")
    if not isinstance(message, dict):
        return
    key = message.get("id") or record.get("requestId") or uuid
    if not isinstance(key, str):
        return
    found.message_of[uuid] = key
    model = message.get("model")
    if isinstance(model, str) and model and model != "<synthetic>":
        found.model = model
    usage = message.get("usage")
    if isinstance(usage, dict):
        best = found.usage.setdefault(key, dict.fromkeys(_USAGE, 0))
        for name in _USAGE:
            value = usage.get(name)
            if type(value) is int and value > best[name]:
                best[name] = value


# --- pass 2: turns ---------------------------------------------------------------------


@dataclass
class _Iteration:
    key: str
    started_at: str | None
    model: str | None = None
    thinking: list[str] = field(default_factory=list)
    prose: list[str] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Turn:
    request: str
    created_at: str | None
    finished_at: str | None = None
    iterations: dict[str, _Iteration] = field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    routing: list[dict[str, Any]] = field(default_factory=list)
    command: bool = False
    output: list[str] = field(default_factory=list)
    interrupted: bool = False
    api_error: str | None = None
    duration_ms: int | None = None
    notices: list[dict[str, Any]] = field(default_factory=list)  # before any iteration


class _TurnBuilder:
    """Folds kept records, in file order, into turn documents for `import_part`."""

    def __init__(self, found: Scan) -> None:
        self.found = found
        self.counted: set[str] = set()  # message ids whose tokens are in a turn already
        self.orphan_results = 0

    def turns(self, path: Path) -> Iterator[dict[str, Any]]:
        """The turns, live and of the branches left off it, each as soon as it is whole."""
        tree = self.found.tree()
        live = len(tree.branches)  # the live state's version: the last
        seen: set[str] = set()
        open_turns: dict[int, _Turn] = {}  # state version → its turn being built
        requests: list[tuple[str, str | None]] = []  # the live turns' (request, time)
        for _, record, _ in jsonl.records(path):
            uuid = record.get("uuid") if record else None
            if record is None or uuid in seen or not isinstance(uuid, str):
                continue
            version = tree.branch_of.get(uuid, live)
            if version == live and uuid not in tree.live:
                continue  # another conversation's record (a sub-agent's, or the main one's)
            seen.add(uuid)
            turn = open_turns.get(version)
            moment = jsonl.timestamp(record.get("timestamp"))
            if uuid in self.found.starts_turn:
                if turn is not None:
                    yield self.document(turn, version)
                text = _text_of(record["message"]["content"]).strip()
                turn = _Turn(prompt_of(record) or "", moment, command=_command(text) is not None)
                open_turns[version] = turn
                if version == live:
                    requests.append((turn.request, moment))
                self._attachments(turn, record, moment)
                continue
            kind = record.get("type")
            if kind not in ("user", "assistant", "system") or record.get("isMeta"):
                continue
            if turn is None:
                again = tree.branches[version].continues if version != live else None
                request, at = requests[again - 1] if again else ("", moment)
                turn = open_turns[version] = _Turn(request, at)
                if version == live:
                    requests.append(("", moment))
            if moment:
                turn.finished_at = moment
            if kind == "assistant":
                self._response(turn, uuid, record, moment)
            elif kind == "user":
                self._user(turn, record)
            else:
                self._system(turn, record, moment)
        for version, turn in open_turns.items():
            yield self.document(turn, version)

    def _attachments(self, turn: _Turn, record: dict[str, Any], moment: str | None) -> None:
        content = record["message"]["content"]
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "image":
                source = block.get("source") if isinstance(block.get("source"), dict) else {}
                data = source.get("data") if isinstance(source.get("data"), str) else None
                raw = _decoded(data)
                turn.attachments.append(
                    {
                        "filename": None,
                        "media_type": source.get("media_type")
                        if isinstance(source.get("media_type"), str)
                        else None,
                        "size_bytes": len(raw) if raw is not None else None,
                        "sha256": hashlib.sha256(raw).hexdigest() if raw is not None else None,
                        "created_at": moment,
                    }
                )

    def _response(self, turn: _Turn, uuid: str, record: dict[str, Any], moment) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            return
        if record.get("isApiErrorMessage"):
            turn.api_error = _text_of(message.get("content")) or "API error"
            return
        key = self.found.message_of.get(uuid, uuid)
        it = turn.iterations.get(key)
        if it is None:
            it = turn.iterations[key] = _Iteration(key, moment)
            it.blocks.extend(turn.notices)
            turn.notices.clear()
        model = message.get("model")
        if isinstance(model, str) and model != "<synthetic>":
            it.model = model
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                it.prose.append(block["text"].strip())
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                if block["thinking"].strip():
                    it.thinking.append(block["thinking"].strip())
            elif kind in ("tool_use", "server_tool_use"):
                call = {
                    "tool": str(block.get("name") or kind),
                    "code": json.dumps(block.get("input"), ensure_ascii=False),
                }
                it.blocks.append(call)
                if isinstance(block.get("id"), str):
                    turn.calls[block["id"]] = call
            elif kind == "web_search_tool_result":
                call = turn.calls.get(block.get("tool_use_id"))
                if call is not None:
                    call["result"] = json.dumps(block.get("content"), ensure_ascii=False)

    def _user(self, turn: _Turn, record: dict[str, Any]) -> None:
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        text = _text_of(content).strip()
        if text.startswith(INTERRUPTED):
            turn.interrupted = True
        elif text.startswith(LOCAL_OUTPUT[:2]) and turn.command:
            turn.output.append(_unwrapped(text))
        elif text.startswith(NOTIFICATION):
            self._notification(turn, text)
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                self._result(turn, block, record.get("toolUseResult"))

    def _notification(self, turn: _Turn, text: str) -> None:
        """A `<task-notification>`: a block of the iteration that is running (the one that
        started the task, usually), or of the next one when none has begun."""
        status = _tag(text, "status")
        summary = _tag(text, "summary") or text
        block = {"tool": NOTIFICATION_TOOL, "code": _tag(text, "task-id")}
        block["error" if status in FAILED_TASK else "result"] = summary
        if turn.iterations:
            next(reversed(turn.iterations.values())).blocks.append(block)
        else:
            turn.notices.append(block)

    def _result(self, turn: _Turn, block: dict[str, Any], detail: Any) -> None:
        call = turn.calls.get(block.get("tool_use_id"))
        if call is None:
            self.orphan_results += 1
            return
        text = _text_of(block.get("content"))
        if block.get("is_error"):
            call["error"] = text or (detail if isinstance(detail, str) else "error")
        else:
            call["result"] = text
        if isinstance(detail, dict):
            if isinstance(detail.get("stdout"), str):
                call["stdout"] = detail["stdout"]
            if type(detail.get("durationMs")) is int and detail["durationMs"] >= 0:
                call["duration_ms"] = detail["durationMs"]

    def _system(self, turn: _Turn, record: dict[str, Any], moment: str | None) -> None:
        subtype = record.get("subtype")
        if subtype == "turn_duration" and type(record.get("durationMs")) is int:
            turn.duration_ms = max(0, record["durationMs"])
        elif subtype == "api_error":
            error = record.get("error")
            reason = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
            turn.routing.append(
                {"kind": "retry", "provider": "anthropic", "reason": reason, "created_at": moment}
            )
        elif subtype == "local_command" and turn.command and not turn.iterations:
            content = record.get("content")
            if isinstance(content, str) and content.startswith(LOCAL_OUTPUT[:2]):
                turn.output.append(_unwrapped(content))

    def document(self, turn: _Turn, version: int) -> dict[str, Any]:
        """The turn as `import_part` takes it (sessions/rows.py `checked_turn`), in the
        state of that version (the live one, or a branch's)."""
        if turn.notices:  # notified before the model answered anything in this turn
            turn.iterations["notices"] = _Iteration("notices", turn.created_at, blocks=turn.notices)
        iterations = [self._iteration(it) for it in turn.iterations.values()]
        answer = next((it["prose"] for it in reversed(iterations) if it["prose"]), None)
        if answer is None and turn.output:
            answer = "\n".join(turn.output)
        if turn.api_error is not None:
            status, outcome = "error", "error"
        elif turn.interrupted:
            status, outcome = "interrupted", "cancelled"
        else:
            status, outcome = "done", "complete"
        duration = turn.duration_ms
        if duration is None:
            duration = checks.millis_between(turn.created_at, turn.finished_at)
        return {
            "user_request": turn.request,
            "state": version,
            "created_at": turn.created_at,
            "attachments": turn.attachments,
            "routing": turn.routing,
            "attempts": [
                {
                    "status": status,
                    "outcome": outcome,
                    "answer": answer,
                    "error": turn.api_error,
                    "duration_ms": duration,
                    "created_at": turn.created_at,
                    "finished_at": turn.finished_at or turn.created_at,
                    "iterations": iterations,
                }
            ],
        }

    def _iteration(self, it: _Iteration) -> dict[str, Any]:
        usage = self.found.usage.get(it.key) if it.key not in self.counted else None
        self.counted.add(it.key)
        usage = usage or dict.fromkeys(_USAGE, 0)
        return {
            "thinking": "\n\n".join(it.thinking) or None,
            "prose": "\n\n".join(it.prose) or None,
            "provider": "anthropic",
            "model": it.model,
            "started_at": it.started_at,
            "tokens": {
                "input": usage["input_tokens"]
                + usage["cache_read_input_tokens"]
                + usage["cache_creation_input_tokens"],
                "cached": usage["cache_read_input_tokens"],
                "cache_created": usage["cache_creation_input_tokens"],
                "output": usage["output_tokens"],
            },
            "blocks": it.blocks,
        }


def _tag(text: str, name: str) -> str | None:
    """The text inside `<name>…</name>`, if any."""
    opened = f"<{name}>"
    if opened not in text:
        return None
    return text.split(opened, 1)[1].split(f"</{name}>", 1)[0].strip() or None


def _unwrapped(text: str) -> str:
    for tag in ("local-command-stdout", "local-command-stderr"):
        text = text.replace(f"<{tag}>", "").replace(f"</{tag}>", "")
    return text.strip()


def _decoded(data: str | None) -> bytes | None:
    if data is None:
        return None
    try:
        return base64.b64decode(data, validate=False)
    except ValueError:
        return None


# --- one file, many files ----------------------------------------------------------------


def session_id_of(path: Path, found: Scan) -> str | None:
    """The file's own session: its stem when records carry it, else the most common id."""
    if path.stem in found.session_ids:
        return path.stem
    if not found.session_ids:
        return None
    return max(found.session_ids.items(), key=lambda item: item[1])[0]


def title_of(found: Scan, summaries: dict[str, tuple[str, str]], kept: set[str]) -> str | None:
    if found.custom_title:
        return jsonl.one_line(found.custom_title) or None
    if found.ai_title:
        return jsonl.one_line(found.ai_title) or None
    leaves = [leaf for leaf in summaries if leaf in kept]
    if leaves:
        return jsonl.one_line(summaries[max(leaves, key=lambda u: found.line_of[u])][0]) or None
    for candidate in (found.first_prompt, found.first_command):
        if candidate:
            return jsonl.one_line(candidate)
    return None


def import_file(
    store: Any, path: Path, summaries: dict[str, tuple[str, str]] | None = None
) -> dict[str, Any]:
    """Import one transcript; returns its report (never raises for a bad transcript).

    The file's main conversation is one session; each sub-agent whose sidechain records
    it holds (2.0.x writes them into the parent's file) is a child session of it, in the
    report's `children`. A sub-agent's own file (`agent-<id>.jsonl`: only sidechain
    records) is a child of the session its records name; the report is the child's."""
    path = Path(path)
    found = scan(path)
    source_id = session_id_of(path, found)
    if found.leaf is None and found.agents:
        reports = [_import_agent(store, path, agent, found, summaries) for agent in found.agents]
        if len(reports) > 1:
            reports[0]["children"] = reports[1:]
        return reports[0]
    report = _report(path, found)
    if source_id is None or found.leaf is None:
        return {**report, "status": "empty", "message": "no conversation"}
    if summaries is None:
        summaries = summaries_in(path.parent)
    report = _import_conversation(store, path, found, source_id, summaries, report)
    children = [_import_agent(store, path, agent, found, summaries) for agent in found.agents]
    if children:
        report["children"] = children
    return report


def _report(path: Path, found: Scan) -> dict[str, Any]:
    tree = found.tree()
    return {
        "path": str(path),
        "session_id": None,
        "turns": 0,
        "records": found.records,
        "malformed": len(found.malformed),
        "malformed_lines": found.malformed[: jsonl.REPORTED_LINES],
        "torn_last_line": found.torn,
        "sidechain": found.sidechain,
        "duplicates": found.duplicates,
        "abandoned": len(tree.branch_of),
        "forks": len(tree.branches),
    }


def _import_agent(
    store: Any, path: Path, agent: str, main: Scan, summaries: dict | None
) -> dict[str, Any]:
    """One sub-agent's sidechain records of a file, as a child session of its parent."""
    found = scan(path, agent)
    report = {**_report(path, found), "agent_id": agent, "sidechain": 0}
    source_id = session_id_of(path, found)
    if source_id is None or found.leaf is None:
        return {**report, "status": "empty", "message": "no conversation"}
    return _import_conversation(
        store, path, found, source_id, summaries or {}, report, call=main.agent_calls.get(agent)
    )


def _import_conversation(
    store: Any,
    path: Path,
    found: Scan,
    source_id: str,
    summaries: dict[str, tuple[str, str]],
    report: dict[str, Any],
    call: str | None = None,
) -> dict[str, Any]:
    tree = found.tree()
    title = title_of(found, summaries if found.agent is None else {}, tree.live)
    fingerprint = jsonl.fingerprint(
        IMPORTER_VERSION, found.records, len(found.malformed), found.leaf
    )
    session = {
        "channel": SOURCE,
        "title": title,
        "project_id": project_of_recorded(found.cwd),
        "provider": "anthropic",
        "model": found.model,
        "created_at": found.started,
        "fingerprint": fingerprint,
        "forks": [branch.fork_position for branch in tree.branches],
        "meta": {
            "source": SOURCE,
            "source_session_id": source_id,
            "cwd": found.cwd,
            "path": os.path.abspath(path),
            "version": found.version,
            "git_branch": found.git_branch,
            "slug": found.slug,
            "records": found.records,
            "malformed_lines": len(found.malformed),
        },
    }
    if found.agent_calls:
        session["meta"]["agent_calls"] = found.agent_calls  # read_session links children by it
    key = source_id
    if found.agent is not None:
        key = f"{source_id}/agent-{found.agent}"
        session["parent_external_id"] = f"{SOURCE}:{source_id}"
        session["meta"].update({"agent_id": found.agent, "tool_use_id": call})
    builder = _TurnBuilder(found)
    return jsonl.store_transcript(
        store,
        report,
        source=SOURCE,
        source_id=key,
        session=session,
        turns=builder.turns(path),
        orphans=lambda: builder.orphan_results,
    )
