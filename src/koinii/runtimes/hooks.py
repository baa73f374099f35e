"""What a runtime runs: `koinii hook claude EVENT` (Claude Code's command hooks, the event's
JSON on stdin) and `koinii hook codex` (Codex CLI's `notify`, the JSON as the last
argument). docs/runtimes.md says what each does; the formats are Claude Code's hooks
reference (code.claude.com/docs/en/hooks: `session_id`, `transcript_path`, `cwd`,
`hook_event_name`; Stop's `stop_hook_active`; SubagentStop's `agent_id`,
`agent_transcript_path`, `last_assistant_message`) and Codex's notify payload
(`type: agent-turn-complete`, `thread-id`, `turn-id`, `cwd`, `input-messages`,
`last-assistant-message`; its rollout under `$CODEX_HOME/sessions/…/rollout-…-<thread
id>.jsonl`).

- **SessionStart**: the runtime's session becomes a Koinii session under the same id
  (external id `claude-code:<id>`, as the importer keys it, so every later import lands
  in it), and the agent is told, as additional context, its channel and session, its
  open questions, the disputes on its claims, and what concerned it since its last
  session.
- **Stop** (Codex: each notify): the transcript is imported again when it grew since the
  last import. The importers are idempotent by the session's external id (an unchanged
  file writes nothing; a grown one replaces the earlier import under the same id), and
  the file's size — the offset imported up to — is recorded only after the import
  succeeded: a hook killed mid-import leaves the offset where it was, and the next Stop
  imports again, so nothing is lost and nothing is doubled. With `--handback` (off by
  default), what concerns the agent since it was last told (an answer to its question,
  a dispute of its claim, a ruling) is handed back to it with `{"decision": "block",
  "reason": …}` — never while `stop_hook_active` (the agent is already going on because
  a Stop hook said so), and at most MAX_HANDBACKS times a session, so it cannot loop.
- **SubagentStop / SessionEnd** (Codex: each turn of a worker): the transcript is
  imported (a sub-agent's as a child of its parent's session) and a wrap is filed: the
  session, its parent (the coordinator's session: the Claude session that ran the
  sub-agent, or `--parent-session`), the project of the directory, the handles the
  agent wrote on the change log during the session, and the agent's last message as
  its summary (lines starting `Decision:` or `Convention:` filed as those).

Hooks never break the agent: each stops within BUDGET_S (the installed timeout is
longer), exits 0 whatever Koinii's trouble (a daemon down is logged to
`<state dir>/hooks.log`, and what was not done is done at the next hook), and prints
only what it means the agent to read.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from koinii.channel import follow
from koinii.errors import Refused
from koinii.identity import context_for
from koinii.projects import project_of
from koinii.runtimes import state

BUDGET_S = 20  # a hook's whole run; the runtime's timeout (settings.HOOK_TIMEOUT_S) is longer
CLIENT_TIMEOUT_S = 5.0
MAX_HANDBACKS = 10  # Stop hands news back at most this often in one session
LISTED = 10  # questions, disputes and changes told at session start, each
SUMMARY_CHARS = 4_000
CLAUDE = "claude-code"  # the importer's source name, the prefix of its external ids
CODEX = "codex"


@dataclass(frozen=True)
class Config:
    """Where the hook finds Koinii: the same names `koinii mcp` reads (KOINII_URL,
    KOINII_TOKEN, KOINII_DB, KOINII_CHANNEL, KOINII_AGENT, KOINII_PROJECT), plus the
    coordinator's session a worker's wraps go to (KOINII_PARENT_SESSION) and Stop's
    hand-back (KOINII_HANDBACK)."""

    channel: str | None = None
    agent: str | None = None
    url: str | None = None
    token: str | None = None
    db: str | None = None
    project: str | None = None
    parent_session: str | None = None
    handback: bool = False


class _OutOfTime(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise _OutOfTime in the hook once `seconds` pass (main thread only; elsewhere the
    client's own timeouts bound it; on Windows, which has no SIGALRM, too)."""
    try:
        previous = signal.signal(signal.SIGALRM, _out_of_time)
    except (ValueError, AttributeError):  # not the main thread, or no SIGALRM
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _out_of_time(signum: int, frame: Any) -> None:
    raise _OutOfTime(f"the hook ran out of its {BUDGET_S} s")


def run(runtime: str, event: str | None, raw: str, config: Config) -> str:
    """Run one hook; returns what to print (often nothing). Never raises: Koinii's
    trouble is logged, and the agent goes on. A hook that comes once (SubagentStop,
    SessionEnd, a Codex turn) and fails is kept, and the next hook that reaches Koinii
    runs it again (its work is idempotent: a wrap is filed once)."""
    try:
        with _deadline(BUDGET_S):
            out = _handle(runtime, event, raw, config)
            try:
                _retry_kept(config)
            except Exception as exc:  # the hook's own work is done: say so all the same
                state.log(f"retrying kept hooks: {type(exc).__name__}: {exc}")
            return out
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return ""
        state.log(f"{runtime} {event or ''}: {type(exc).__name__}: {exc}")
        # what Koinii refused will be refused again: only trouble reaching it is kept
        if (event if runtime == "claude" else "codex") in COMES_ONCE and not isinstance(
            exc, Refused
        ):
            state.keep(runtime, event, raw, {**asdict(config), "token": None})
        return ""


COMES_ONCE = ("SubagentStop", "SessionEnd", "codex")
RETRIED_PER_RUN = 3
TRIES = 20  # a kept hook that failed this often is dropped (and the log says so)


def _handle(runtime: str, event: str | None, raw: str, config: Config) -> str:
    payload = json.loads(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        raise ValueError("the hook's input is not a JSON object")
    hook = _Hook(config, CODEX if runtime == "codex" else CLAUDE, payload)
    with hook.locked(), contextlib.closing(hook):
        if runtime == "codex":
            return hook.codex_turn()
        handler = {
            "SessionStart": hook.session_start,
            "Stop": hook.stop,
            "SubagentStop": hook.subagent_stop,
            "SessionEnd": hook.session_end,
        }.get(event or payload.get("hook_event_name") or "")
        return handler() if handler is not None else ""


def _retry_kept(config: Config) -> None:
    """Run again the oldest hooks kept when they failed, while Koinii answers."""
    for path, kept in state.kept()[:RETRIED_PER_RUN]:
        # what the agent was (its channel, id, coordinator) as kept; where Koinii is, now
        where = {"url": config.url, "db": config.db, "token": config.token}
        again = Config(**{**kept["config"], **where})
        try:
            _handle(kept["runtime"], kept["event"], kept["raw"], again)
        except Exception as exc:
            tries = kept.get("tries", 0) + 1
            if tries >= TRIES:
                state.log(f"dropped a kept {kept['runtime']} {kept['event']} after {tries} tries")
                path.unlink(missing_ok=True)
            else:
                state.write_json(path, {**kept, "tries": tries})
                state.log(f"kept {kept['runtime']} {kept['event']}: {type(exc).__name__}: {exc}")
            return
        path.unlink(missing_ok=True)
        state.log(f"ran the kept {kept['runtime']} {kept['event']}")


def koinii_id(external_id: str, runtime_id: str | None = None) -> str:
    """The Koinii session id of a runtime's session: the runtime's own id where it is a
    lowercase UUID (Claude Code's and Codex's are), else one derived from the external id
    — the same every time, so every hook of a session names one session."""
    if runtime_id:
        try:
            if str(uuid.UUID(runtime_id)) == runtime_id:
                return runtime_id
        except ValueError:
            pass
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"koinii:{external_id}"))


def split_summary(text: str | None) -> dict[str, list[str]]:
    """An agent's last message as a wrap's memory: `Decision:` and `Convention:` lines
    as those, the rest one note."""
    if not text or not text.strip():
        return {"notes": [], "decisions": [], "conventions": []}
    decisions, conventions, rest = [], [], []
    for line in text.strip().splitlines():
        bare = line.strip().lstrip("-* ").strip()
        head, _, tail = bare.partition(":")
        if head.lower() == "decision" and tail.strip():
            decisions.append(tail.strip()[:SUMMARY_CHARS])
        elif head.lower() == "convention" and tail.strip():
            conventions.append(tail.strip()[:SUMMARY_CHARS])
        else:
            rest.append(line)
    note = "\n".join(rest).strip()
    if len(note) > SUMMARY_CHARS:
        note = note[: SUMMARY_CHARS - 1] + "…"
    return {"notes": [note] if note else [], "decisions": decisions, "conventions": conventions}


class _Hook:
    """One hook run: the payload, the store, the session's state file."""

    def __init__(self, config: Config, source: str, payload: dict[str, Any]) -> None:
        self.config = config
        self.source = source
        self.payload = payload
        key = "thread-id" if source == CODEX else "session_id"
        runtime_id = payload.get(key)
        if not isinstance(runtime_id, str) or not runtime_id:
            raise ValueError(f"the payload has no {key}")
        self.runtime_id = runtime_id
        self.external_id = f"{source}:{runtime_id}"
        self.session_id = koinii_id(self.external_id, runtime_id)
        self.cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
        self.state_path = state.session_path(source, runtime_id)
        self.state: dict[str, Any] = {}
        self._store: Any = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The session's state, read and written by one hook at a time (two sub-agents
        stopping at once run their hooks at once)."""
        with state.locked(self.state_path):
            self.state = state.read_json(self.state_path)
            self.state.setdefault("imported", {})
            yield

    # --- where things are -------------------------------------------------------------------

    @property
    def agent(self) -> str:
        """The agent's id: --agent / KOINII_AGENT, else one derived from the runtime's
        session (AgentClaude1af7fc5e), so each session speaks as itself."""
        if self.config.agent:
            return self.config.agent
        hexes = "".join(c for c in self.runtime_id if c.isalnum())[:8]
        return f"Agent{'Codex' if self.source == CODEX else 'Claude'}{hexes}"

    @property
    def project(self) -> str | None:
        return self.config.project or os.environ.get("KOINII_PROJECT") or project_of(self.cwd)

    @property
    def store(self) -> Any:
        if self._store is None:
            if self.config.db:
                from koinii.kb import open_kb

                self._store = open_kb(self.config.db, create=True)
            else:
                from koinii.client.sync import connect

                self._store = connect(self.config.url, self.config.token, timeout=CLIENT_TIMEOUT_S)
        return self._store

    def save(self) -> None:
        state.write_json(self.state_path, self.state)

    def wrap_id(self, *parts: str) -> str:
        """A wrap id no other agent foresees (the first filer's, and the session id is in
        every session list: issue 37); its nonce saved first, so a retry is an upsert."""
        nonce = self.state.setdefault("wrap_nonce", uuid.uuid4().hex[:16])
        self.save()
        return "-".join(["wrap", self.source, self.runtime_id, *parts, nonce])

    def close(self) -> None:
        """Close the store if one was opened (a KB in-process writes its last pages)."""
        if self._store is not None:
            self._store.close()
            self._store = None

    # --- the session and its transcript --------------------------------------------------------

    def ensure_session(
        self, session_id: str, external_id: str, parent: str | None = None, title: str | None = None
    ) -> str:
        """The Koinii session `session_id`, started (under `external_id`, the importer's
        key) if it is not there yet; the id it has."""
        from koinii.sessions import SessionStore

        sessions = SessionStore(self.store)
        if sessions.call("get_session", target=session_id) is not None:
            return session_id
        try:
            return sessions.call(
                "start_session",
                id=session_id,
                external_id=external_id,
                channel=self.source,
                title=title,
                project_id=self.project,
                parent_session_id=parent,
            )
        except Refused:
            found = sessions.call("get_session", target=external_id)
            if found is None:
                raise
            return found["id"]

    def import_transcript(self, path: Any) -> dict[str, Any] | None:
        """Import the transcript again if it grew since the last import (None: it did not,
        or it is not there)."""
        from koinii.sessions import SessionStore, claude_code, codex
        from koinii.sessions.importing import format_of

        if not isinstance(path, str) or not path:
            return None
        file = Path(path).expanduser()
        try:
            seen = file.stat()
        except OSError:
            return None
        offset = [seen.st_size, seen.st_mtime_ns]
        if self.state["imported"].get(str(file)) == offset:
            return None
        sessions = SessionStore(self.store)
        if format_of(file) == codex.SOURCE:
            report = codex.import_file(sessions, file)
        else:  # no sibling scan for summary titles: a folder can hold hundreds of sessions
            report = claude_code.import_file(sessions, file, {})
        if report.get("status") == "failed":
            raise RuntimeError(f"importing {file}: {report.get('message')}")
        self.state["imported"][str(file)] = offset  # only now: a crash above redoes it
        self.save()
        return report

    # --- the conversation -----------------------------------------------------------------------

    def joined(self) -> Any:
        from koinii.channel import agent as channel

        medium = channel.local(self.store) if self.config.db else channel.wire(self.store)
        return channel.join(medium, self.config.channel, self.agent)

    def news(self, since: int) -> tuple[list[dict[str, Any]], int]:
        """What concerns the agent after change-log position `since`, and the new position."""
        from koinii.channel.news import MAX_TOLD, Feed

        return Feed(self.joined()).read(since, MAX_TOLD, about="mine")

    def created_since(self, seq: int | None) -> list[int]:
        """The handles the agent wrote in its own context after `seq`, still there."""
        if seq is None:
            return []
        mine = context_for(self.agent)
        handles: list[int] = []
        removed: set[int] = set()
        # the log after `seq`, to its end (follow.log, not following); compacted past
        # `seq`, nothing (as before the follower: what the log dropped is not told)
        core = follow.Core(follow.log(seq, follow=False, wait_ms=0, too_old="head"))
        for entry in follow.run(core, self.store):
            handles += [c["handle"] for c in entry["added"] if c.get("context") == mine]
            removed |= {c["handle"] for c in entry["removed"] if c.get("context") == mine}
        return [h for h in dict.fromkeys(handles) if type(h) is int and h not in removed]

    def file_wrap(
        self, wrap_id: str, session_id: str, parent: str | None, summary: str | None, since: Any
    ) -> dict[str, Any]:
        """The session's wrap: its memory from the summary, then the handles it wrote."""
        from koinii.wraps import WrapQueue, wrap_session

        parent = self.resolved(parent)
        agent = _Speaker(self.agent, self.store)
        wrap = wrap_session(
            agent,
            session_id=session_id,
            parent_session_id=parent if parent != session_id else None,
            project_id=self.project,
            wrap_id=wrap_id,
            **split_summary(summary),
        )
        created = [h for h in self.created_since(since) if h not in wrap["created_ids"]]
        if created:
            WrapQueue(self.store).add_wrap_notification(
                wrap_id,
                agent_id=self.agent,
                session_id=session_id,
                project_id=self.project,
                parent_session_id=wrap["parent_session_id"],
                created_ids=created,
            )
        return wrap

    def resolved(self, name: str | None) -> str | None:
        """A session named by id, prefix or external id, as its id (as given when none)."""
        if not name:
            return None
        from koinii.sessions import SessionStore

        found = SessionStore(self.store).call("get_session", target=name)
        return found["id"] if found else name

    # --- Claude Code's events ------------------------------------------------------------------

    def session_start(self) -> str:
        self.ensure_session(self.session_id, self.external_id)
        now = self.store.seq
        first = "start_seq" not in self.state
        self.state.setdefault("start_seq", now)
        self.state.setdefault("seen", now)
        self.save()
        lines = [
            f"Koinii: your session is {self.session_id} and you are {self.agent}"
            + (f" on the channel {self.config.channel}." if self.config.channel else ".")
        ]
        parent = self.config.parent_session
        if parent:
            lines.append(f"Your coordinator's session is {parent}: your wrap goes to it.")
        lines.append(
            "Workers you start file their wraps into your session when they are started "
            f"with KOINII_PARENT_SESSION={self.session_id}; permeate(session_id="
            f'"{self.session_id}") collects them.'
        )
        if self.config.channel:
            lines += self._coordination(first)
        if self.payload.get("source") not in (None, "startup") and not first:
            lines.append("(The session goes on: what is above is as of now.)")
        return json.dumps(
            {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": "\n".join(lines),
                }
            }
        )

    def _coordination(self, first: bool) -> list[str]:
        me = self.joined()
        lines: list[str] = []
        mine = [q for q in me.questions("unsettled") if q.get("speaker") == self.agent]
        if mine:
            lines.append(f"Your open questions ({len(mine)}):")
            lines += [
                f"- #{q['handle']} {q['question']}: {q['state']}, {q['answer_count']} answer(s)"
                for q in mine[-LISTED:]
            ]
        disputed = [
            d for d in me.disputes("open") if (d.get("target") or {}).get("speaker") == self.agent
        ]
        if disputed:
            lines.append(f"Disputes on your claims ({len(disputed)}):")
            for d in disputed[-LISTED:]:
                by = ", ".join(r["speaker"] for r in d.get("raised_by") or [])
                target = d["target"]
                lines.append(f"- #{target['handle']} {target['sentence']}: disputed by {by}")
        last = state.read_json(state.agent_path(self.agent)).get("seq")
        if isinstance(last, int) and first:
            told, _ = self.news(last)
            if told:
                lines.append(f"Since your last session ({len(told)} change(s) concern you):")
                lines += [f"- {t['text']}" for t in told[-LISTED:]]
        if len(lines) == 0:
            lines.append("Nothing on the channel waits for you.")
        return lines

    def stop(self) -> str:
        self.ensure_session(self.session_id, self.external_id)
        self.import_transcript(self.payload.get("transcript_path"))
        message = self.payload.get("last_assistant_message")
        if isinstance(message, str) and message.strip():
            self.state["summary"] = message[:SUMMARY_CHARS]
        now = self.store.seq
        self.state["stop_seq"] = now
        self.state.setdefault("start_seq", now)
        out = ""
        if self.config.handback and self.config.channel:
            out = self._handback(now)
        self.save()
        return out

    def _handback(self, now: int) -> str:
        seen = self.state.get("seen")
        if not isinstance(seen, int):
            self.state["seen"] = now  # told nothing yet: start from here
            return ""
        if self.payload.get("stop_hook_active") or self.state.get("handbacks", 0) >= MAX_HANDBACKS:
            return ""
        told, cursor = self.news(seen)
        self.state["seen"] = cursor
        if not told:
            return ""
        self.state["handbacks"] = self.state.get("handbacks", 0) + 1
        reason = "\n".join(
            [
                f"Koinii: {len(told)} change(s) on {self.config.channel} concern you since you "
                "last looked; deal with them (reply, accept, dispute, vote) before you stop:",
                *[
                    f"- {t['text']}" + (f" (#{t['handle']})" if t.get("handle") else "")
                    for t in told[-LISTED:]
                ],
            ]
        )
        return json.dumps({"decision": "block", "reason": reason})

    def subagent_stop(self) -> str:
        agent_id = self.payload.get("agent_id")
        if not isinstance(agent_id, str) or not agent_id:
            return self.stop_quietly()
        parent = self.ensure_session(self.session_id, self.external_id)
        external = f"{self.external_id}/agent-{agent_id}"
        child = self.ensure_session(koinii_id(external), external, parent=parent)
        self.import_transcript(self.payload.get("agent_transcript_path"))
        done = self.state.setdefault("wrapped", [])
        if agent_id not in done:
            self.file_wrap(
                self.wrap_id("agent", agent_id),
                child,
                parent,
                self.payload.get("last_assistant_message"),
                self.state.get("stop_seq", self.state.get("start_seq")),
            )
            done.append(agent_id)
            self.save()
        return ""

    def stop_quietly(self) -> str:
        self.stop()
        return ""

    def session_end(self) -> str:
        self.ensure_session(self.session_id, self.external_id)
        self.import_transcript(self.payload.get("transcript_path"))
        if not self.state.get("ended"):
            self.file_wrap(
                self.wrap_id(),
                self.session_id,
                self.config.parent_session,
                self.state.get("summary"),
                self.state.get("start_seq"),
            )
            self.state["ended"] = True
            self.save()
        state.write_json(state.agent_path(self.agent), {"seq": self.store.seq})
        return ""

    # --- Codex CLI ------------------------------------------------------------------------------

    def codex_turn(self) -> str:
        if self.payload.get("type") != "agent-turn-complete":
            return ""
        first = "start_seq" not in self.state
        self.ensure_session(self.session_id, self.external_id)
        if first:
            self.state["start_seq"] = self.store.seq
            self.save()
        self.import_transcript(self.rollout())
        turn = self.payload.get("turn-id")
        wrapped = self.state.setdefault("wrapped", [])
        if self.config.parent_session and isinstance(turn, str) and turn not in wrapped:
            self.file_wrap(
                self.wrap_id(turn),
                self.session_id,
                self.config.parent_session,
                self.payload.get("last-assistant-message"),
                self.state.get("wrap_seq", self.state.get("start_seq")),
            )
            wrapped.append(turn)
        self.state["wrap_seq"] = self.store.seq
        self.save()
        state.write_json(state.agent_path(self.agent), {"seq": self.store.seq})
        return ""

    def rollout(self) -> str | None:
        """The thread's rollout file: where it was found before, else the newest
        `rollout-…-<thread id>.jsonl` under $CODEX_HOME/sessions."""
        known = self.state.get("rollout")
        if isinstance(known, str) and os.path.exists(known):
            return known
        from koinii.runtimes.settings import codex_home

        pattern = os.path.join(
            glob.escape(str(codex_home() / "sessions")),
            "**",
            f"rollout-*{glob.escape(self.runtime_id)}.jsonl",
        )
        found = sorted(glob.glob(pattern, recursive=True), key=os.path.getmtime)
        if not found:
            return None
        self.state["rollout"] = found[-1]
        return found[-1]


@dataclass(frozen=True)
class _Speaker:
    """What `wraps.wrap_session` needs of an agent: its id and its store (no join: a
    wrap names no channel)."""

    agent: str
    store: Any
