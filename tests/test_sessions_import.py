"""Importing Claude Code transcripts: what the file holds — counted here independently,
with plain json — is what the store holds; a re-import adds nothing; a torn or corrupted
copy imports what is readable and reports the rest.

The samples are the repository's own (tests/data/sessions, written in the real formats),
and, when the workspace has them, the real third-party transcripts in
../shared/data/transcripts beside the repository: every sample test runs on those too,
and says it skipped them when they are not there."""

import json
import pathlib
import shutil

import pytest
from click.testing import CliRunner

from koinii.cli import main
from koinii.sessions import Introspection, SessionStore
from koinii.sessions.importing import import_paths

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

SAMPLES = pathlib.Path(__file__).parent / "data" / "sessions"
OURS = sorted(SAMPLES.glob("claude-code_*.jsonl"))
SHORT = SAMPLES / "claude-code_v2.1.38_sample.jsonl"  # one turn, one tool call
TOOLS = SAMPLES / "claude-code_v2.1.38_sample_tools.jsonl"  # three turns, thinking, a failed edit
SHORT_SESSION = "5d1e0c3a-7b2f-4e6a-9c41-0a8b3d2e6f10"
SHORT_LEAF = "00000000-0000-4000-8000-000000000005"  # its last record
SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
THEIRS = sorted(SHARED.glob("*.jsonl"))
NO_SHARED = (
    "the real third-party transcripts are not here (../shared/data/transcripts beside "
    "the repository): only the repository's own samples ran"
)
FILES = OURS + THEIRS
SAMPLE_PARAMS = [
    *(pytest.param(p, id=p.name[:40]) for p in FILES),
    *([] if THEIRS else [pytest.param(None, id="shared", marks=pytest.mark.skip(NO_SHARED))]),
]


# --- an independent reading of a transcript (the rules of FORMAT.md, nothing shared) ----------


def readable(path):
    records = []
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def text_of(content):
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def typed_prompts(records):
    """User records a person typed: not meta, not tool results, not harness notes."""
    out = []
    for r in records:
        if r.get("type") != "user" or r.get("isMeta"):
            continue
        content = r["message"]["content"]
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            continue
        text = text_of(content).strip()
        if text.startswith("[Request interrupted") or text.startswith("<local-command-"):
            continue
        out.append(text)
    return out


def expected_title(records):
    prompts = typed_prompts(records)
    plain = [p for p in prompts if "<command-name>" not in p]
    if plain:
        return plain[0].splitlines()[0]
    name = prompts[0].split("<command-name>")[1].split("</command-name>")[0]
    return name


def expected_tokens(records):
    """Once per message id, the largest value of each usage field."""
    best = {}
    for r in records:
        if r.get("type") != "assistant":
            continue
        message = r["message"]
        usage = message.get("usage") or {}
        fields = best.setdefault(message["id"], {})
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
            fields[key] = max(fields.get(key, 0), usage.get(key, 0))
        key = "cache_creation_input_tokens"
        fields[key] = max(fields.get(key, 0), usage.get(key, 0))
    total = {k: sum(f[k] for f in best.values()) for k in next(iter(best.values()))}
    return {
        "input": total["input_tokens"]
        + total["cache_read_input_tokens"]
        + total["cache_creation_input_tokens"],
        "cached": total["cache_read_input_tokens"],
        "cache_created": total["cache_creation_input_tokens"],
        "output": total["output_tokens"],
    }


def expected_tools(records):
    """tool_use ids by name, and which of them have a (failed) result."""
    calls, results, errors = {}, set(), set()
    for r in records:
        content = (
            r.get("message", {}).get("content") if isinstance(r.get("message"), dict) else None
        )
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_use":
                calls[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                results.add(block["tool_use_id"])
                if block.get("is_error"):
                    errors.add(block["tool_use_id"])
    return calls, results, errors


def imported(store, report):
    return Introspection(store).read_session(report["session_id"])


@pytest.fixture
def store(kb):
    return SessionStore(kb)


# --- every sample ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", SAMPLE_PARAMS)
def test_a_sample_imports_what_the_file_holds(store, path):
    records = readable(path)
    (report,) = import_paths(store, [path])
    assert report["status"] == "new" and report["malformed"] == 0
    read = imported(store, report)
    prompts = typed_prompts(records)
    assert read["session"]["turn_count"] == report["turns"] == len(prompts)
    assert read["session"]["title"] == expected_title(records)
    tokens = read["usage"]["tokens"]
    assert {k: tokens[k] for k in ("input", "cached", "cache_created", "output")} == (
        expected_tokens(records)
    )
    calls, results, errors = expected_tools(records)
    blocks = [
        b for turn in read["transcript"]["turns"] for it in turn["iterations"] for b in it["blocks"]
    ]
    assert sorted(b["tool"] for b in blocks) == sorted(calls.values())
    assert sum(b["result"] is not None or b["error"] is not None for b in blocks) == len(results)
    assert sum(b["error"] is not None for b in blocks) == len(errors)
    by_tool = {}
    for name in calls.values():
        by_tool[name] = by_tool.get(name, 0) + 1
    assert {k: v["calls"] for k, v in read["usage"]["tools"].items()} == by_tool
    sessions = {r["sessionId"] for r in records if "sessionId" in r}
    assert read["session"]["external_id"] in {f"claude-code:{s}" for s in sessions}
    assert read["session"]["channel"] == "claude-code"


@pytest.mark.parametrize("path", SAMPLE_PARAMS)
def test_thinking_is_kept_and_requests_are_searchable(store, path):
    records = readable(path)
    (report,) = import_paths(store, [path])
    read = imported(store, report)
    thinking = [
        b["thinking"]
        for r in records
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "thinking"
    ]
    kept = [it["thinking"] for t in read["transcript"]["turns"] for it in t["iterations"]]
    assert [k for k in kept if k] == [t.strip() for t in thinking if t.strip()]
    last = typed_prompts(records)[-1].split()[0]
    if "<" not in last:
        assert report["session_id"] in [r["id"] for r in Introspection(store).list_sessions(last)]


@pytest.mark.backends("sqlite", "postgres")
def test_a_reimport_adds_nothing(store, kb):
    first = import_paths(store, FILES)
    seq = kb.seq
    before = [Introspection(store).read_session(r["session_id"]) for r in first]
    again = import_paths(store, FILES)
    assert [r["status"] for r in again] == ["unchanged"] * len(FILES)
    assert [r["session_id"] for r in again] == [r["session_id"] for r in first]
    assert kb.seq == seq
    assert len(Introspection(store).list_sessions()) == len(FILES)
    after = [Introspection(store).read_session(r["session_id"]) for r in first]
    assert after == before


@pytest.mark.backends("sqlite", "postgres")
def test_a_grown_transcript_replaces_its_earlier_import_under_the_same_id(store, tmp_path):
    lines = TOOLS.read_bytes().splitlines(keepends=True)
    second_prompt = next(i for i, line in enumerate(lines) if b'"now run the tests"' in line)
    copy = tmp_path / TOOLS.name
    copy.write_bytes(b"".join(lines[:second_prompt]))
    (early,) = import_paths(store, [copy])
    assert early["turns"] == 1
    copy.write_bytes(b"".join(lines))
    (later,) = import_paths(store, [copy])
    assert (later["status"], later["session_id"], later["turns"]) == (
        "replaced",
        early["session_id"],
        3,
    )
    assert len(Introspection(store).list_sessions()) == 1


def test_a_torn_and_corrupted_copy_imports_what_is_readable_and_reports_the_rest(store, tmp_path):
    lines = TOOLS.read_bytes().splitlines(keepends=True)
    lines[11] = b'{"type": "assistant", "message": {"content": [\n'  # line 12: garbage
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # a torn last line, mid-write
    copy = tmp_path / TOOLS.name
    copy.write_bytes(b"".join(lines))
    (report,) = import_paths(store, [copy])
    assert report["status"] == "new"
    assert report["malformed"] == 2 and report["malformed_lines"] == [12, len(lines)]
    assert report["torn_last_line"] is True
    records = readable(copy)
    read = imported(store, report)
    assert read["session"]["turn_count"] == len(typed_prompts(records)) == 3
    tokens = read["usage"]["tokens"]
    assert tokens["output"] == expected_tokens(records)["output"]
    assert read["session"]["title"] == expected_title(records)


def test_progress_is_reported_file_by_file(store):
    seen = []
    reports = import_paths(store, FILES, on_start=seen.append, on_file=seen.append)
    assert seen == [len(FILES), *reports]


def test_a_file_of_garbage_is_reported_not_fatal(store, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n\x00\xff\n[1, 2]\n")
    good = tmp_path / "good.jsonl"
    shutil.copy(SHORT, good)
    reports = import_paths(store, [bad, good, tmp_path / "missing.jsonl"])
    assert [r["status"] for r in reports] == ["empty", "new", "failed"]
    assert reports[0]["malformed"] == 3


# --- titles -------------------------------------------------------------------------------------


SUMMARY = "Flaky due-date test: the clock rolls over at midnight"


def test_a_summary_in_a_sibling_file_of_the_project_titles_the_session(store, tmp_path):
    project = tmp_path / "-home-dev-projects-billing"
    project.mkdir()
    name = f"{SHORT_SESSION}.jsonl"
    shutil.copy(SHORT, project / name)
    summary = {"type": "summary", "summary": SUMMARY, "leafUuid": SHORT_LEAF}
    (project / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl").write_text(
        json.dumps(summary)
        + "\n"
        + json.dumps({"type": "summary", "summary": "x", "leafUuid": "y"})
    )
    reports = import_paths(store, [project / name])
    assert reports[0]["title"] == SUMMARY
    assert Introspection(store).get_session(reports[0]["session_id"])["title"] == SUMMARY
    assert Introspection(store).list_sessions("clock rolls over")[0]["rank"] == 0


def test_custom_title_beats_ai_title_beats_the_first_prompt(store, tmp_path):
    source = SHORT.read_text()
    ai = json.dumps(
        {"type": "ai-title", "aiTitle": "Phoenix will not start", "sessionId": SHORT_SESSION}
    )
    custom = json.dumps(
        {"type": "custom-title", "customTitle": "My title", "sessionId": SHORT_SESSION}
    )
    first = tmp_path / "a.jsonl"
    first.write_text(source + ai + "\n")
    assert import_paths(store, [first])[0]["title"] == "Phoenix will not start"
    first.write_text(source + ai + "\n" + custom + "\n")
    assert import_paths(store, [first])[0]["title"] == "My title"


# --- the tree ----------------------------------------------------------------------------------


def record(kind, uuid, parent, content, **extra):
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message.update({"id": extra.pop("message_id"), "model": "m", "usage": {"output_tokens": 1}})
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s-1",
        "timestamp": f"2026-01-01T00:00:{int(uuid[1:]):02d}Z",
        "message": message,
        **extra,
    }


def test_a_rewound_branch_is_kept_as_a_fork_and_parallel_tool_calls_are_kept(store, tmp_path):
    tool = {"type": "tool_use", "id": "t1", "name": "Glob", "input": {}}
    tool2 = {"type": "tool_use", "id": "t2", "name": "Read", "input": {}}
    lines = [
        record("user", "u1", None, "first question"),
        record("assistant", "u2", "u1", [{"type": "text", "text": "answer one"}], message_id="m1"),
        record("user", "u3", "u2", "a question I take back"),
        record("assistant", "u4", "u3", [{"type": "text", "text": "lost"}], message_id="m2"),
        record("user", "u5", "u2", "the edited question"),  # rewound: a sibling of u3
        record("assistant", "u6", "u5", [tool], message_id="m3"),
        record("assistant", "u7", "u6", [tool2], message_id="m3"),
        record("user", "u8", "u6", [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]),
        record("user", "u9", "u7", [{"type": "tool_result", "tool_use_id": "t2", "content": "b"}]),
        record("assistant", "u10", "u9", [{"type": "text", "text": "done"}], message_id="m4"),
    ]
    path = tmp_path / "s-1.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (report,) = import_paths(store, [path])
    assert report["abandoned"] == 2
    read = imported(store, report)
    assert [t["user_request"] for t in read["session"]["turns"]] == [
        "first question",
        "the edited question",
    ]
    blocks = read["transcript"]["turns"][1]["iterations"][0]["blocks"]
    assert [(b["tool"], b["result"]) for b in blocks] == [("Glob", "a"), ("Read", "b")]
    assert read["session"]["turns"][1]["answer"] == "done"
    assert read["usage"]["tokens"]["output"] == 4  # m2, on the branch, was spent too
    (branch, current) = read["session_forks"]
    assert (branch["fork_position"], branch["parent_state_id"]) == (1, current["id"])


# --- over the wire, and the CLI -------------------------------------------------------------------


def test_import_through_a_real_daemon(start_daemon):
    daemon = start_daemon()
    with daemon.client() as client:
        store = SessionStore(client)
        reports = import_paths(store, FILES)
        assert [r["status"] for r in reports] == ["new"] * len(FILES)
        assert [r["status"] for r in import_paths(store, FILES)] == ["unchanged"] * len(FILES)
        found = Introspection(client).list_sessions("backoff")
        assert found and found[0]["channel"] == "claude-code"


def test_the_cli_imports_lists_searches_and_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KOINII_DB", "koinii.db")
    runner = CliRunner()
    done = runner.invoke(main, ["sessions", "import", *map(str, FILES)])
    assert done.exit_code == 0, done.output
    assert f"{len(FILES)} file(s): {len(FILES)} new; 0 malformed line(s) skipped" in done.output
    again = runner.invoke(main, ["sessions", "import", *map(str, FILES), "--quiet"])
    assert f"{len(FILES)} unchanged" in again.output
    listed = runner.invoke(main, ["sessions", "list", "--json"])
    rows = json.loads(listed.output)
    assert len(rows) == len(FILES)
    table = runner.invoke(main, ["sessions", "list"])
    assert "add a retry with backoff" in table.output
    found = runner.invoke(main, ["sessions", "search", "backoff", "--json"])
    hit = json.loads(found.output)[0]
    assert hit["is_in_request"] is True
    shown = runner.invoke(main, ["sessions", "show", hit["id"][:8]])
    assert shown.exit_code == 0 and "backoff" in shown.output and "tokens:" in shown.output
    missing = runner.invoke(main, ["sessions", "show", "zzzz"])
    assert missing.exit_code == 1 and "no session matches" in missing.output


def test_the_cli_agent_reads_are_offered_only_while_introspection_is_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KOINII_DB", "koinii.db")
    monkeypatch.delenv("KOINII_INTROSPECTION", raising=False)
    runner = CliRunner()
    runner.invoke(main, ["sessions", "import", *map(str, FILES), "--quiet"])
    off = runner.invoke(main, ["sessions", "agent", "list"])
    assert off.exit_code == 1 and "introspection-off" in off.output
    monkeypatch.setenv("KOINII_INTROSPECTION", "1")
    on = runner.invoke(main, ["sessions", "agent", "list", "flaky"])
    assert on.exit_code == 0 and json.loads(on.output)[0]["rank"] == 0
    sid = json.loads(on.output)[0]["id"]
    read = runner.invoke(main, ["sessions", "agent", "read", "--session", sid])
    assert json.loads(read.output)["session"]["id"] == sid
    got = runner.invoke(main, ["sessions", "agent", "get", f"VIS_SESSION_ID#{sid[:8]}"])
    assert json.loads(got.output)["id"] == sid


def test_the_cli_refuses_to_read_a_store_that_is_not_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KOINII_DB", "koinii.db")
    result = CliRunner().invoke(main, ["sessions", "list"])
    assert result.exit_code != 0 and "no store at koinii.db" in result.output


# --- Codex CLI rollouts ----------------------------------------------------------------------

ROLLOUTS = sorted(SAMPLES.glob("codex_*.jsonl"))


def test_a_codex_rollout_imports_turns_tokens_blocks_and_its_thread_name(store):
    (path,) = ROLLOUTS
    records = readable(path)
    (report,) = import_paths(store, [path])
    assert report["status"] == "new" and report["external_id"].startswith("codex:")
    read = imported(store, report)
    prompts = [
        r["payload"]["message"]
        for r in records
        if r.get("type") == "event_msg" and r["payload"]["type"] == "user_message"
    ]
    assert [t["user_request"] for t in read["session"]["turns"]] == prompts
    names = [
        r["payload"]["thread_name"]
        for r in records
        if r.get("type") == "event_msg" and r["payload"]["type"] == "thread_name_updated"
    ]
    assert read["session"]["title"] == names[-1]
    last = [
        r["payload"]["info"]["total_token_usage"]
        for r in records
        if r.get("type") == "event_msg"
        and r["payload"]["type"] == "token_count"
        and r["payload"]["info"]
    ][-1]
    tokens = read["usage"]["tokens"]
    assert tokens["input"] == last["input_tokens"]
    assert tokens["cached"] == last["cached_input_tokens"]
    assert tokens["output"] + tokens["reasoning"] == last["output_tokens"]
    assert tokens["reasoning"] == last["reasoning_output_tokens"]
    calls = {
        r["payload"]["call_id"]: r["payload"]["name"]
        for r in records
        if r.get("type") == "response_item"
        and r["payload"]["type"] in ("function_call", "custom_tool_call")
    }
    blocks = [
        b for t in read["transcript"]["turns"] for it in t["iterations"] for b in it["blocks"]
    ]
    assert sorted(b["tool"] for b in blocks) == sorted(calls.values())
    assert all(b["result"] for b in blocks)
    assert [t["outcome"] for t in read["session"]["turns"]] == ["complete", "cancelled"]
    first = read["transcript"]["turns"][0]["iterations"]
    assert first[0]["thinking"] == "Run the test suite to see failures."
    assert first[-1]["prose"] == "Two tests fail: test_push and test_retry."
    assert read["session"]["model"] == "gpt-5.3-codex"
    assert import_paths(store, [path])[0]["status"] == "unchanged"


def test_a_bare_era_rollout_starts_turns_at_typed_user_messages(store, tmp_path):
    lines = [
        {"id": "bare-1", "timestamp": "2025-08-01T10:00:00Z", "instructions": "be brief"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context><cwd>/x</cwd></environment_context>",
                }
            ],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"record_type": "state"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "bye"}]},
    ]
    path = tmp_path / "rollout-bare.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "{torn")
    (report,) = import_paths(store, [path])
    assert (report["status"], report["turns"], report["malformed_lines"]) == ("new", 2, [7])
    read = imported(store, report)
    assert [t["user_request"] for t in read["session"]["turns"]] == ["hi", "bye"]
    assert read["session"]["turns"][0]["answer"] == "hello"
    assert read["session"]["title"] == "hi"
