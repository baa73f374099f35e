"""Sessions in depth (issue 19): sub-agents as child sessions, rewinds kept as forks,
task notifications, Codex web searches, tool results as a search band, every attempt
of a retry, snippets that show the words, a transcript's own id, and the CLI's `--json`
and piped tables — on the small samples in tests/data/sessions/depth (synthetic, in the
real formats), and on the real transcripts in ../shared/data/transcripts when present.
What a file holds is counted here independently, with plain json."""

import json
import pathlib

import pytest
from click.testing import CliRunner

from koinii import Refused
from koinii.cli import main
from koinii.sessions import Introspection, SessionStore, schema
from koinii.sessions.importing import import_paths
from koinii.sessions.search import SNIPPET_TOKENS, window, words
from tests.test_sessions_import import readable

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

DEPTH = pathlib.Path(__file__).parent / "data" / "sessions" / "depth"
PROJECT = DEPTH / "claude" / "-home-dev-shop-services-checkout"
PARENT_ID = "5f0c2d1e-7a4b-4c1d-9e2f-3a6b8c0d1e2f"
PARENT = PROJECT / f"{PARENT_ID}.jsonl"
AGENT = PROJECT / PARENT_ID / "subagents" / "agent-a1b2c3d.jsonl"
INTERLEAVED = PROJECT / "9c1e4b2a-3d5f-4e6a-8b7c-0d1e2f3a4b5c.jsonl"
ROLLOUT = next((DEPTH / "codex").glob("rollout-*.jsonl"))
REAL = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
REAL_FILES = sorted(REAL.glob("*.jsonl")) if REAL.is_dir() else []


@pytest.fixture
def store(kb):
    return SessionStore(kb)


def records_of(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def raw_tokens(records):
    """Once per message id, the largest value of each usage field (FORMAT.md §1.4)."""
    best = {}
    for r in records:
        if r.get("type") == "assistant":
            usage = r["message"].get("usage") or {}
            fields = best.setdefault(r["message"]["id"], {})
            for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
                fields[key] = max(fields.get(key, 0), usage.get(key, 0) or 0)
            key = "cache_creation_input_tokens"
            fields[key] = max(fields.get(key, 0), usage.get(key, 0) or 0)
    total = {
        k: sum(f[k] for f in best.values())
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    }
    return {
        "input": total["input_tokens"]
        + total["cache_read_input_tokens"]
        + total["cache_creation_input_tokens"],
        "output": total["output_tokens"],
    }


def tokens(read):
    return {k: read["usage"]["tokens"][k] for k in ("input", "output")}


def blocks(read):
    return [b for t in read["transcript"]["turns"] for it in t["iterations"] for b in it["blocks"]]


# --- sub-agents ---------------------------------------------------------------------------


def test_a_sub_agent_file_is_a_child_session_of_its_parent(store):
    reports = {pathlib.Path(r["path"]).name: r for r in import_paths(store, [DEPTH / "claude"])}
    parent, child = reports[PARENT.name], reports[AGENT.name]
    assert (parent["status"], child["status"]) == ("new", "new")
    assert child["parent_session_id"] == parent["session_id"]
    reader = Introspection(store)
    read = reader.read_session(parent["session_id"])
    (listed,) = read["children"]
    assert (listed["id"], listed["agent_id"], listed["tool_use_id"]) == (
        child["session_id"],
        "a1b2c3d",
        "toolu_T1",
    )
    assert listed["title"] == "Find the failing assertion in the checkout tests"
    own = reader.read_session(child["session_id"])
    assert own["session"]["parent_session_id"] == parent["session_id"]
    assert tokens(own) == raw_tokens(records_of(AGENT))
    assert [b["tool"] for b in blocks(own)] == ["Grep"]
    # a child is not a session of its own in the index
    assert child["session_id"] not in [r["id"] for r in reader.list_sessions()]


def test_sidechain_records_in_the_parent_file_are_a_child_session(store):
    (report,) = import_paths(store, [INTERLEAVED])
    records = records_of(INTERLEAVED)
    assert report["sidechain"] == sum(bool(r.get("isSidechain")) for r in records)
    (child,) = report["children"]
    assert (child["agent_id"], child["parent_session_id"]) == ("b7e8f9a0", report["session_id"])
    reader = Introspection(store)
    main_side = [r for r in records if not r.get("isSidechain")]
    assert tokens(reader.read_session(report["session_id"])) == raw_tokens(main_side)
    side = [r for r in records if r.get("isSidechain")]
    assert tokens(reader.read_session(child["session_id"])) == raw_tokens(side)


def test_a_child_imported_before_its_parent_is_attached_once_the_parent_is_in(store):
    (alone,) = import_paths(store, [AGENT])
    assert alone["status"] == "new" and alone["parent_session_id"] is None
    assert "not imported" in alone["message"]
    reader = Introspection(store)
    assert alone["session_id"] in [r["id"] for r in reader.list_sessions()]
    (parent,) = import_paths(store, [PARENT])
    (again,) = import_paths(store, [AGENT])
    assert (again["session_id"], again["parent_session_id"]) == (
        alone["session_id"],
        parent["session_id"],
    )
    assert [c["id"] for c in reader.read_session(parent["session_id"])["children"]] == [
        alone["session_id"]
    ]
    assert import_paths(store, [AGENT])[0]["status"] == "unchanged"


# --- rewinds, notifications, web searches -------------------------------------------------


def test_a_rewound_branch_is_kept_as_a_fork_of_the_live_conversation(store):
    (report,) = import_paths(store, [PARENT])
    assert (report["forks"], report["abandoned"]) == (1, 2)
    read = Introspection(store).read_session(report["session_id"])
    assert [t["user_request"] for t in read["session"]["turns"]] == [
        "Why do the checkout tests fail?",
        "Fix the rounding with Decimal instead",
    ]
    branch, live = read["session_forks"]
    assert live["is_current"] and not branch["is_current"]
    assert (branch["parent_state_id"], branch["fork_position"]) == (live["id"], 1)
    assert [(t["position"], t["user_request"]) for t in branch["turns"]] == [
        (2, "Fix the rounding")
    ]
    # every response in the file was spent, the branch's too
    assert tokens(read) == raw_tokens(records_of(PARENT))


def test_a_task_notification_is_a_block_of_the_turn_not_a_turn(store):
    (report,) = import_paths(store, [PARENT])
    read = Introspection(store).read_session(report["session_id"])
    assert all("<task-notification>" not in t["user_request"] for t in read["session"]["turns"])
    (notice,) = [b for b in blocks(read) if b["tool"] == "task-notification"]
    assert notice["code"] == "bash_1" and notice["error"] is None
    assert notice["result"].startswith('Background command "pytest tests/checkout -q" completed')


def test_codex_web_searches_are_recorded_as_blocks(store):
    records = records_of(ROLLOUT)
    searches = [
        r["payload"]
        for r in records
        if r["type"] == "response_item" and r["payload"]["type"] == "web_search_call"
    ]
    calls = [
        r
        for r in records
        if r["type"] == "response_item" and r["payload"]["type"] in ("function_call",)
    ]
    (report,) = import_paths(store, [ROLLOUT])
    found = blocks(Introspection(store).read_session(report["session_id"]))
    assert len(found) == len(searches) + len(calls)
    web = [b for b in found if b["tool"] == "web_search"]
    assert [b["code"] for b in web] == [s["action"]["query"] for s in searches]
    assert [b["error"] is not None for b in web] == [s["status"] != "completed" for s in searches]


# --- the tool band, snippets ----------------------------------------------------------------


def test_tool_results_are_found_in_a_band_of_their_own_after_thinking(store):
    import_paths(store, [DEPTH])
    reader = Introspection(store)
    (hit,) = reader.list_sessions("banker rounding")
    assert (hit["title"], hit["rank"], hit["is_in_tool"]) == (
        "Fix VAT rounding in checkout",
        4,
        True,
    )
    assert {"banker", "rounding"} <= {w.casefold() for w in words(hit["tool_snippet"])}
    # a command's output, live: a request match ranks above a tool match
    sid = store.start_session(title="live")
    turn = store.start_turn(sid, "deploy it")
    it = store.record_iteration(turn, prose="on it")
    store.record_block(it, tool="Bash", code="make deploy", stdout="deployed build 7f3a")
    other = store.start_session(title="other")
    store.finish_turn(turn, "done", "complete")
    store.start_turn(other, "which build 7f3a?")
    assert [(r["id"], r["rank"]) for r in reader.list_sessions("build 7f3a")] == [
        (other, 1),
        (sid, 4),
    ]
    assert reader.list_sessions("build 7f3a")[1]["tool_snippet"] == "deployed build 7f3a"


def test_a_multi_word_snippet_shows_the_words_where_they_are_together():
    text = "deploy " + "filler " * 40 + "the deploy lock is held by pid 42 " + "tail " * 40
    snippet = window(text, ["deploy", "lock"])
    assert "deploy lock" in snippet
    # the old window (the first match of any word) showed only "deploy"
    assert "lock" not in text[: len("deploy ") + SNIPPET_TOKENS * len("filler ")]
    assert window("nothing here matches", ["zebra"]).startswith("nothing")


@pytest.mark.backends("sqlite", "postgres")
def test_a_search_snippet_holds_every_word_it_matched(store):
    sid = store.start_session(title="s")
    reply = "Rollout " + "notes " * 30 + "the rollout plan for friday " + "more " * 30
    turn = store.start_turn(sid, "status?")
    store.record_iteration(turn, prose=reply)
    (hit,) = Introspection(store).list_sessions("rollout plan")
    assert {"rollout", "plan"} <= {w.casefold() for w in words(hit["reply_snippet"])}


# --- retries -------------------------------------------------------------------------------


def test_a_retry_keeps_every_attempt_with_its_iterations_and_blocks(store):
    sid = store.start_session(title="retry")
    turn = store.start_turn(sid, "build it")
    store.record_iteration(
        turn, prose="first try", blocks=[{"tool": "Bash", "code": "make", "error": "exit 2"}]
    )
    store.finish_turn(turn, "error", "error", error="make failed")
    store.retry_turn(turn)
    store.record_iteration(turn, prose="second try", blocks=[{"tool": "Bash", "code": "make -j1"}])
    store.finish_turn(turn, "done", "complete", answer="built")
    first, second = Introspection(store).read_session(sid)["turn_retries"][turn]
    assert [it["prose"] for it in first["iterations"]] == ["first try"]
    assert [(b["code"], b["error"]) for b in first["iterations"][0]["blocks"]] == [
        ("make", "exit 2")
    ]
    assert [it["prose"] for it in second["iterations"]] == ["second try"]
    assert (first["error"], second["answer"]) == ("make failed", "built")


# --- a transcript's own id, the CLI ---------------------------------------------------------


def test_show_and_read_session_resolve_a_transcripts_own_session_id(store, kb):
    (report,) = import_paths(store, [PARENT])
    reader = Introspection(store)
    for target in (PARENT_ID, f"claude-code:{PARENT_ID}", f"  vis_session_id#{PARENT_ID} "):
        assert reader.read_session(target)["session"]["id"] == report["session_id"]
        assert reader.get_session(target)["id"] == report["session_id"]
    assert reader.get_session(PARENT_ID[:8]) is None  # a transcript id is whole, not a prefix


def test_import_prints_json_and_piped_tables_keep_whole_names(tmp_path):
    db = str(tmp_path / "team.db")
    runner = CliRunner()
    out = runner.invoke(main, ["sessions", "import", str(DEPTH), "--json", "--db", db])
    assert out.exit_code == 0, out.output
    reports = json.loads(out.output)
    assert sorted(r["status"] for r in reports) == ["new"] * 4
    again = runner.invoke(main, ["sessions", "import", str(DEPTH), "--db", db])
    assert again.exit_code == 0
    for name in (PARENT.name, AGENT.name, ROLLOUT.name):  # piped: no name cut short
        assert name in again.output
    shown = runner.invoke(main, ["sessions", "show", PARENT_ID, "--db", db])
    assert shown.exit_code == 0 and "Fix VAT rounding in checkout" in shown.output
    assert "child: " in shown.output and "(agent a1b2c3d)" in shown.output
    assert "fork: version 0 after turn 1, 1 turn(s) of its own" in shown.output
    listed = runner.invoke(main, ["sessions", "search", "banker rounding", "--db", db])
    assert "tool" in listed.output and "banker" in listed.output


# --- storage -----------------------------------------------------------------------------------


@pytest.mark.backends("sqlite", "postgres")
def test_the_title_band_has_its_trigram_index_and_matches_literally(store, kb, backend):
    assert kb.read_records(schema.has_title_trigrams)
    odd = store.start_session(title="100% done_now")
    store.start_session(title="100 percent donexnow")
    found = Introspection(store).list_sessions("0% done_n", ranking="lexical")
    assert [r["id"] for r in found] == [odd]


@pytest.mark.backends("sqlite", "postgres")
def test_an_older_store_gains_the_tool_band_with_its_rows_indexed(new_location):
    import koinii

    location = new_location()
    with koinii.open_kb(location) as kb:
        older = {dialect: scripts[:2] for dialect, scripts in schema.MIGRATIONS.items()}
        kb.ensure_schema(schema.DOMAIN, older)
        kb.transact(
            "test.older",
            lambda db, handles: [
                db.execute(sql, params)
                for sql, params in (
                    (
                        "INSERT INTO session (n, id, channel, title, title_fold, created_at, "
                        "modified_at, turn_count, turn_seq) VALUES (1, 'old', 'cli', 'Old', "
                        "'old', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 1, 1)",
                        (),
                    ),
                    (
                        "INSERT INTO turn_text (n, request, reply) VALUES (?, 'a request', "
                        "'the quarterly numbers')",
                        ((1 << schema.TURN_BITS) | 1,),
                    ),
                )
            ],
        )
    with koinii.open_kb(location) as kb:
        reader = Introspection(SessionStore(kb))
        assert [r["id"] for r in reader.list_sessions("quarterly")] == ["old"]
        assert kb.read_records(lambda db: db.execute("SELECT tools FROM turn_text").fetchall()) == [
            (None,)
        ]


# --- the real samples, when present -----------------------------------------------------------


def typed_prompts(records):
    out = []
    for r in records:
        if r.get("type") != "user" or r.get("isMeta") or r.get("isSidechain"):
            continue
        content = r["message"]["content"]
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            continue
        text = content if isinstance(content, str) else ""
        text = text or "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        if text.strip().startswith(("[Request interrupted", "<local-command-", "<task-notif")):
            continue
        out.append(text)
    return out


@pytest.mark.skipif(not REAL_FILES, reason=f"no real transcripts at {REAL} (optional samples)")
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name[:40])
def test_a_real_transcript_keeps_every_turn_and_token_across_forks_and_children(store, path):
    records = readable(path)
    (report,) = import_paths(store, [path])
    reader = Introspection(store)
    sessions = [report["session_id"], *(c["session_id"] for c in report.get("children", ()))]
    reads = [reader.read_session(s) for s in sessions]
    own_turns = sum(len(f["turns"]) for read in reads for f in read["session_forks"])
    assert own_turns == report["turns"] + sum(c["turns"] for c in report.get("children", ()))
    assert report["turns"] == len(typed_prompts(records))
    total = {"input": 0, "output": 0}
    for read in reads:
        for key, value in tokens(read).items():
            total[key] += value
    assert total == raw_tokens(records)


# --- live recording, batched -----------------------------------------------------------------


def record_a_turn(writer, session_id):
    turn = writer.start_turn(session_id, "deploy it")
    it = writer.record_iteration(turn, prose="on it", blocks=[{"tool": "Bash", "code": "make"}])
    writer.record_block(it, tool="Bash", code="make deploy", stdout="deployed build 7f3a")
    writer.finish_turn(turn, "done", "complete", answer="deployed")
    return turn, it


def test_a_recorder_buffers_until_it_flushes_and_names_the_rows_it_will_write(store):
    reader = Introspection(store)
    recorder = store.recorder()
    sid = recorder.start_session(title="batched")
    turn, it = record_a_turn(recorder, sid)
    assert recorder.buffered == 5
    assert reader.get_session(sid) is None  # buffered: not written, and not said to be
    results = recorder.flush()
    assert recorder.buffered == 0 and results[:2] == [sid, turn]
    read = reader.read_session(sid)
    (recorded,) = read["transcript"]["turns"]
    assert (recorded["id"], recorded["answer"]) == (turn, "deployed")
    assert recorded["iterations"][0]["id"] == it
    assert [b["code"] for b in recorded["iterations"][0]["blocks"]] == ["make", "make deploy"]
    assert reader.list_sessions("7f3a")[0]["id"] == sid  # its search text, written once


def test_a_recorder_flushes_by_count_and_on_close_even_after_an_exception(store):
    reader = Introspection(store)
    recorder = store.recorder(batch_events=3)
    sid = recorder.start_session(title="counted")
    recorder.start_turn(sid, "one")
    assert recorder.buffered == 2
    recorder.start_turn(sid, "two")  # the third event: a batch
    assert recorder.buffered == 0 and reader.get_session(sid)["turn_count"] == 2
    with pytest.raises(RuntimeError), store.recorder() as recorder:
        later = recorder.start_session(title="left by an exception")
        raise RuntimeError("the agent crashed")
    assert reader.get_session(later)["title"] == "left by an exception"


@pytest.mark.backends("sqlite", "postgres")
def test_a_refused_batch_writes_nothing_and_names_the_event(store, kb):
    sid = store.start_session(title="s")
    recorder = store.recorder()
    recorder.start_turn(sid, "fine")
    recorder.record_iteration("no-such-turn", prose="x")
    seq = kb.seq
    with pytest.raises(Refused) as refused_batch:
        recorder.flush()
    refusal = refused_batch.value
    assert (refusal.kind, refusal.data) == ("bad-session", {"field": "turn_id", "event": 1})
    assert "nothing of the batch was written" in refusal.message
    assert kb.seq == seq and Introspection(store).get_session(sid)["turn_count"] == 0
    assert recorder.buffered == 0
    for events, field in (
        ([], "events"),
        ([{"verb": "drop_table"}], "events[0].verb"),
        ([{"verb": "start_turn", "fields": {"sesion_id": sid}}], "events[0].fields.sesion_id"),
        ([{"verb": "start_session", "fields": {"id": "NOT-A-UUID"}}], "id"),
    ):
        with pytest.raises(Refused) as bad:
            store.record_batch(events)
        assert bad.value.data["field"] == field
    taken = [{"verb": "start_session", "fields": {"id": sid}}]
    with pytest.raises(Refused, match="exists already"):
        store.record_batch(taken)


def test_recording_through_a_daemon_is_batched_and_authorized_per_event(start_daemon):
    daemon = start_daemon(principals={"AgentBoreas": "agent", "AgentAtlas": "agent"})
    with daemon.client("AgentBoreas") as boreas, daemon.client("AgentAtlas") as atlas:
        own = SessionStore(boreas)
        seq = boreas.seq
        with own.recorder() as recorder:
            sid = recorder.start_session(title="boreas, batched")
            record_a_turn(recorder, sid)
        assert boreas.seq == seq + 1  # five events, one write
        read = Introspection(boreas).read_session(sid)
        assert read["session"]["turns"][0]["answer"] == "deployed"
        intruder = SessionStore(atlas).recorder()
        intruder.start_turn(sid, "mine now")
        with pytest.raises(Refused) as refused_batch:
            intruder.flush()
        assert refused_batch.value.kind == "koinii/foreign-session"
        assert refused_batch.value.data["event"] == 0
        assert Introspection(boreas).get_session(sid)["turn_count"] == 1


# --- projects -----------------------------------------------------------------------------------


def test_an_imported_session_carries_the_project_of_its_directory(store, tmp_path):
    reports = {pathlib.Path(r["path"]).name: r for r in import_paths(store, [DEPTH])}
    reader = Introspection(store)
    # the samples' directories are not on this machine: known by their names
    assert reader.read_session(reports[PARENT.name]["session_id"])["session"]["project_id"] == (
        "checkout"
    )
    assert reader.read_session(reports[ROLLOUT.name]["session_id"])["session"]["project_id"] == (
        "shop"
    )
    # a transcript of a directory this machine has: its repository and the folders below
    (tmp_path / "shop" / ".git").mkdir(parents=True)
    here = tmp_path / "shop" / "services" / "checkout"
    here.mkdir(parents=True)
    lines = [json.loads(line) for line in PARENT.read_text().splitlines()]
    for line in lines:
        if "cwd" in line:
            line["cwd"] = str(here)
        if "sessionId" in line:
            line["sessionId"] = "6a1d3e2f-8b5c-4d2e-af30-4b7c9d1e2f30"
    copy = tmp_path / "6a1d3e2f-8b5c-4d2e-af30-4b7c9d1e2f30.jsonl"
    copy.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (report,) = import_paths(store, [copy])
    assert reader.get_session(report["session_id"]) is not None
    read = reader.read_session(report["session_id"])
    assert read["session"]["project_id"] == "shop:services:checkout"
