"""The three reads (sessions.md §3), rule by rule, on recorded sessions: the ranked search
(bands, order, flags, snippets), target resolution, never raising, each section of
read_session degrading on its own, failures and loops, and the gate."""

import logging

import pytest

import koinii
from koinii.kb import semantic
from koinii.sessions import Introspection, SessionStore
from koinii.sessions.failures import ADVICE, LOOP_AT
from koinii.sessions.introspection import AGENT_PROMPT, EMPTY_READ


@pytest.fixture
def store(kb):
    return SessionStore(kb)


def session(store, title=None, *, request="", reply=None, thinking=None, at="2026-01-01"):
    """A session whose one turn (started at `at`) says `request`, `reply`, `thinking`."""
    sid = store.start_session(title=title, created_at=f"{at}T00:00:00Z")
    turn = store.start_turn(sid, request, created_at=f"{at}T01:00:00Z")
    if reply is not None or thinking is not None:
        store.record_iteration(turn, prose=reply, thinking=thinking)
    store.finish_turn(turn, "done", "complete", answer=reply)
    return sid


# --- list_sessions: the index ----------------------------------------------------------------


def test_the_index_is_every_top_level_session_newest_first(store):
    old = session(store, "old", at="2026-01-01")
    new = session(store, "new", at="2026-03-01")
    mid = session(store, "mid", at="2026-02-01")
    store.start_session(title="child", parent_session_id=new)
    rows = Introspection(store).list_sessions()
    assert [r["id"] for r in rows] == [new, mid, old]
    assert rows[0] == {
        "id": new,
        "channel": "cli",
        "title": "new",
        "turn_count": 1,
        "created_at": "2026-03-01T00:00:00.000Z",
        "modified_at": "2026-03-01T01:00:00.000Z",
    }
    assert [r["id"] for r in Introspection(store).list_sessions(limit=2)] == [new, mid]


# --- list_sessions(search): THE ranked search -------------------------------------------------


@pytest.fixture
def bands(store):
    """One session per band for the search 'rollout plan', plus near misses."""
    return {
        "title_old": session(store, "Rollout Plan for Q3", request="nothing here", at="2026-01-02"),
        "title_new": session(
            store, "the ROLLOUT PLAN", request="the rollout plan again", at="2026-01-05"
        ),
        "request": session(store, "a", request="write the rollout plan today", at="2026-01-09"),
        "reply": session(
            store, "b", request="hm", reply="Here is a rollout planning doc", at="2026-01-08"
        ),
        "thinking": session(
            store, "c", request="hm", thinking="they want a rollout plan", at="2026-01-07"
        ),
        "split": session(store, "d", request="rollout", reply="plan", at="2026-01-10"),
        "none": session(store, "e", request="unrelated", at="2026-01-11"),
    }


def test_the_search_ranks_title_request_reply_thinking_then_newest_first(store, bands):
    rows = Introspection(store).list_sessions("rollout plan", ranking="lexical")
    assert [(r["rank"], r["id"]) for r in rows] == [
        (0, bands["title_new"]),
        (0, bands["title_old"]),
        (1, bands["request"]),
        (2, bands["reply"]),
        (3, bands["thinking"]),
    ]


def test_each_row_flags_every_band_it_matched(store, bands):
    found = Introspection(store).list_sessions("rollout plan", ranking="lexical")
    rows = {r["id"]: r for r in found}
    flags = ("is_in_title", "is_in_request", "is_in_reply", "is_in_thinking")
    assert [rows[bands["title_new"]][f] for f in flags] == [True, True, False, False]
    assert [rows[bands["title_old"]][f] for f in flags] == [True, False, False, False]
    assert [rows[bands["request"]][f] for f in flags] == [False, True, False, False]
    assert [rows[bands["reply"]][f] for f in flags] == [False, False, True, False]
    assert [rows[bands["thinking"]][f] for f in flags] == [False, False, False, True]
    assert set(rows[bands["request"]]) == {
        "id",
        "channel",
        "title",
        "turn_count",
        "created_at",
        "modified_at",
        "rank",
        *flags,
        "is_in_tool",
        "is_by_meaning",
        "request_snippet",
        "reply_snippet",
        "tool_snippet",
    }


def test_search_words_must_all_be_in_one_field_and_the_last_is_a_prefix(store, bands):
    reader = Introspection(store)

    def ids(search: str) -> list[str]:
        return [r["id"] for r in reader.list_sessions(search, ranking="lexical")]

    assert bands["split"] not in ids("rollout plan")
    assert bands["reply"] in ids("rollout plan")  # planning
    assert ids("rollou plan") == []  # only the last word is a prefix
    assert ids("  WRITE the ROLL ") == [bands["request"]]


def test_the_title_band_is_a_case_insensitive_substring_of_the_current_title(store):
    sid = session(store, "Straße Deploy", request="x")
    assert Introspection(store).list_sessions("STRASSE dep")[0]["id"] == sid  # casefold
    assert Introspection(store).list_sessions("e dep")[0]["rank"] == 0
    assert Introspection(store).list_sessions("!!")[:1] == []
    punct = session(store, "v1.2: fix!!", request="x")
    assert [r["id"] for r in Introspection(store).list_sessions("fix!!")] == [punct]


def test_a_child_session_never_appears_in_a_search(store):
    parent = session(store, "parent", request="x")
    child = store.start_session(title="unique child title", parent_session_id=parent)
    reader = Introspection(store)
    assert reader.list_sessions("unique child", ranking="lexical") == []
    if semantic.installed():  # by meaning, a child's title counts for its parent
        assert [r["id"] for r in reader.list_sessions("unique child")] == [parent]
    assert child not in [r["id"] for r in reader.list_sessions("unique child")]


def test_snippets_are_windows_around_the_match_with_ellipses_at_cut_ends(store):
    words = [f"w{i}" for i in range(80)]
    words[40] = "needle"
    sid = session(store, "t", request=" ".join(words), reply="short needle reply")
    row = Introspection(store).list_sessions("needle")[0]
    assert row["id"] == sid and row["rank"] == 1
    request = row["request_snippet"]
    assert request.startswith("…") and request.endswith("…") and "needle" in request
    assert 15 <= len(request.strip("…").split()) <= 20
    assert row["reply_snippet"] == "short needle reply"
    assert Introspection(store).list_sessions("w0")[0]["request_snippet"].startswith("w0 w1")


def test_a_snippet_comes_from_the_newest_matching_turn(store):
    sid = store.start_session(title="t")
    for text in ("first marker turn", "second marker turn"):
        turn = store.start_turn(sid, text)
        store.finish_turn(turn, "done", "complete")
    row = Introspection(store).list_sessions("marker")[0]
    assert row["request_snippet"] == "second marker turn" and row["reply_snippet"] is None


def test_a_search_keyword_and_a_positional_search_are_the_same(store, bands):
    reader = Introspection(store)
    expected = reader.list_sessions("rollout plan")
    assert reader.list_sessions(search="rollout plan") == expected
    assert reader.list_sessions(query="rollout plan") == expected
    assert reader.list_sessions("   ") == reader.list_sessions()


# --- targets ---------------------------------------------------------------------------------


def test_a_target_is_trimmed_and_loses_its_marker_in_any_case(store):
    sid = session(store, "marked", request="x")
    reader = Introspection(store)
    for target in (
        sid,
        f"  {sid}\n",
        f"vis_session_id#{sid}",
        f"VIS_SESSION_ID#{sid}",
        f"  Vis_Session_Id#{sid.upper()}  ",
        f"vis_session_id#{sid[:8]}",
    ):
        assert reader.get_session(target)["id"] == sid, target
        assert reader.read_session(target)["session"]["id"] == sid, target


def test_a_prefix_names_a_session_only_when_it_is_unambiguous(store):
    ids = [store.start_session(title=str(i)) for i in range(17)]  # two share a first digit
    reader = Introspection(store)
    first = ids[0]
    unique = next(first[:n] for n in range(1, 37) if sum(i.startswith(first[:n]) for i in ids) == 1)
    assert reader.get_session(unique)["id"] == first
    shared = next(
        i[0] for i in ids if sum(j.startswith(i[0]) for j in ids) > 1
    )  # pigeonhole: 17 ids, 16 hex digits
    assert reader.get_session(shared) is None
    assert reader.read_session(shared) == EMPTY_READ
    assert reader.get_session("ffffffff-ffff") is None or "ffffffff-ffff" in ids
    assert reader.get_session("not-an-id") is None
    assert reader.get_session("") is None
    assert reader.read_session("vis_session_id#") == EMPTY_READ


def test_the_target_may_be_positional_or_named_target_session_id_or_id(store):
    sid = session(store, "named", request="x")
    reader = Introspection(store)
    expected = reader.get_session(sid)
    assert reader.get_session(target=sid) == expected
    assert reader.get_session(session_id=sid) == expected
    assert reader.get_session(id=sid) == expected
    assert reader.get_session({"id": sid, "title": "a row from list_sessions"}) == expected
    assert reader.read_session(session_id=sid)["session"]["id"] == sid


def test_the_default_target_is_the_current_session(store):
    current = session(store, "me", request="my request")
    other = session(store, "other", request="x")
    reader = Introspection(store, current_session_id=current)
    assert reader.get_session()["id"] == current
    assert reader.get_session()["is_current"] is True
    assert reader.get_session(other)["is_current"] is False
    assert reader.read_session()["session"]["id"] == current
    assert Introspection(store).get_session() is None
    assert Introspection(store).read_session() == EMPTY_READ


# --- get_session --------------------------------------------------------------------------------


def test_get_session_is_the_row_plus_provider_model_and_last_turn(store):
    sid = store.start_session(title="desc", provider="openai", model="gpt-x")
    turn = store.start_turn(sid, "y" * 300)
    store.finish_turn(turn, "error", "error", error="boom")
    row = Introspection(store, current_session_id=sid).get_session()
    assert set(row) == {
        "id",
        "channel",
        "title",
        "turn_count",
        "created_at",
        "modified_at",
        "is_current",
        "provider",
        "model",
        "provider_model",
        "last_turn",
    }
    assert row["provider_model"] == "openai/gpt-x"
    assert row["last_turn"] == {"id": turn, "outcome": "error", "user_request": "y" * 200 + "..."}
    assert "transcript" not in row
    empty = store.start_session()
    assert Introspection(store).get_session(empty)["last_turn"] is None


# --- read_session ---------------------------------------------------------------------------------


def test_read_session_has_every_section(store):
    sid = session(store, "all", request="hello", reply="hi", thinking="greet")
    read = Introspection(store).read_session(sid)
    assert list(read) == list(EMPTY_READ)
    assert read["transcript"]["dialog"] == [
        {"role": "user", "turn_id": read["session"]["turns"][0]["id"], "content": "hello"},
        {"role": "assistant", "turn_id": read["session"]["turns"][0]["id"], "content": "hi"},
    ]
    iteration = read["transcript"]["turns"][0]["iterations"][0]
    assert (iteration["thinking"], iteration["prose"]) == ("greet", "hi")
    assert read["session_forks"][0]["version"] == 0
    assert read["turn_retries"] == {}
    assert read["failures"] == [] and read["diagnosis"]["failure_count"] == 0


def test_a_long_session_is_read_a_window_of_turns_at_a_time(store, kb):
    sid = store.start_session(title="long")
    for n in range(12):
        turn = store.start_turn(sid, f"request {n}")
        if n % 4 == 0:
            store.record_iteration(turn, blocks=[{"code": f"step {n}", "error": "boom"}])
        store.finish_turn(turn, "done", "complete", answer=f"answer {n}")
    reader = Introspection(store)
    whole = reader.read_session(sid)
    last = reader.read_session(sid, turns=5)
    requests = [t["user_request"] for t in last["transcript"]["turns"]]
    assert requests == [f"request {n}" for n in range(7, 12)]
    assert [t["user_request"] for t in last["session"]["turns"]] == requests
    assert [d["content"] for d in last["transcript"]["dialog"]][:2] == ["request 7", "answer 7"]
    assert [f["message"] for f in last["failures"]] == ["boom"]  # turn 8's, not 0's or 4's
    assert [t["position"] for t in last["session_forks"][0]["turns"]] == list(range(8, 13))
    # the summaries stay the whole session's
    for name in ("current_turn", "diagnosis", "usage"):
        assert last[name] == whole[name], name
    assert last["session"]["turn_count"] == 12 and last["older"] == 8  # positions from 1

    before = reader.read_session(sid, turns=5, before=last["older"])
    assert [t["user_request"] for t in before["session"]["turns"]] == [
        f"request {n}" for n in range(2, 7)
    ]
    first = reader.read_session(sid, turns=5, before=before["older"])
    assert [t["position"] for t in first["session"]["turns"]] == [1, 2]
    assert "older" not in first and "older" not in whole

    read = koinii.operations.invoker(kb)
    for options, option in (({"turns": 0}, "turns"), ({"before": 3}, "before")):
        with pytest.raises(koinii.Refused) as refused:
            read("sessions.read_session", target=sid, **options)
        assert (refused.value.kind, refused.value.data["option"]) == ("bad-option", option)


def _break(kb, backend, breakage):
    """Damage the stored data the way `breakage` names (engine's public transact)."""
    statements = {
        "attachments": ["DROP TABLE attachment"],
        "routing": ["DROP TABLE routing_event"],
        "states": ["DROP TABLE state"],
        "attempt tokens": (
            ["UPDATE attempt SET output_tokens = 'many'"]
            if backend == "sqlite"
            else [
                "ALTER TABLE attempt ALTER COLUMN output_tokens DROP NOT NULL",
                "UPDATE attempt SET output_tokens = NULL",
            ]
        ),
    }[breakage]

    def damage(db, handles):
        for statement in statements:
            db.execute(statement)

    kb.transact("test.break", damage)


@pytest.mark.parametrize(
    "breakage, degraded",
    [
        ("attachments", {"transcript"}),
        ("routing", {"current_turn", "failures", "diagnosis", "usage"}),
        ("states", {"session", "current_turn", "session_forks", "transcript"}),
        ("attempt tokens", {"turn_retries", "usage"}),
    ],
)
def test_each_section_of_read_session_degrades_on_its_own(
    store, kb, backend, caplog, breakage, degraded
):
    sid = store.start_session(title="fragile")
    turn = store.start_turn(sid, "go", attachments=[{"filename": "a.txt"}])
    store.record_iteration(turn, prose="going", blocks=[{"code": "x", "error": "boom"}])
    store.finish_turn(turn, "error", "error", error="boom")
    store.retry_turn(turn)
    store.record_routing(sid, "retry", turn_id=turn, reason="overloaded")
    reader = Introspection(store)
    intact = reader.read_session(sid)
    _break(kb, backend, breakage)
    with caplog.at_level(logging.ERROR, logger="koinii.sessions"):
        damaged = reader.read_session(sid)
    assert list(damaged) == list(EMPTY_READ)
    for name in EMPTY_READ:
        if name in degraded:
            assert damaged[name] == EMPTY_READ[name], name
        elif name != "current_turn":
            assert damaged[name] == intact[name], name
    failed = {
        r.getMessage().split("[")[1].split("]")[0] for r in caplog.records if "[" in r.getMessage()
    }
    assert failed == degraded  # each degraded section was logged, never swallowed silently


def test_failures_are_classified_with_advice_oldest_first(store):
    sid = store.start_session()
    turn = store.start_turn(sid, "work", created_at="2026-01-01T00:00:00Z")
    store.record_iteration(
        turn,
        started_at="2026-01-01T00:00:01Z",
        blocks=[
            {"tool": "python", "code": "foo()", "error": "NameError: name 'foo' is not defined"},
            {"code": "1/0", "error": "ZeroDivisionError: division by zero"},
            {"code": "sleep(99)", "timeout": True},
            {"tool": "Bash", "code": "rm -rf /", "error": "Permission to use Bash was denied"},
            {"code": "fine", "result": "ok"},
        ],
    )
    store.finish_turn(
        turn, "error", "error", error="429 rate limit exceeded", finished_at="2026-01-01T00:00:02Z"
    )
    store.retry_turn(turn, created_at="2026-01-01T00:00:05Z")
    store.finish_turn(turn, "error", "error", error="boom", finished_at="2026-01-01T00:00:06Z")
    store.retry_turn(turn, created_at="2026-01-01T00:00:07Z")
    store.finish_turn(turn, "interrupted", "cancelled", finished_at="2026-01-01T00:00:08Z")
    store.record_routing(sid, "fallback", created_at="2026-01-01T00:00:09Z", reason="overloaded")
    found = Introspection(store).read_session(sid)["failures"]
    assert [f["classification"] for f in found] == [
        "unresolved_symbol",
        "code_execution_error",
        "execution_timeout",
        "tool_rejected",
        "provider_error",
        "turn_error",
        "turn_cancelled",
        "provider_error",
    ]
    assert all(f["advice"] == ADVICE[f["classification"]] for f in found)
    assert [f["attempt"] for f in found[:7]] == [0, 0, 0, 0, 0, 1, 2]
    assert found[0]["tool"] == "python" and found[0]["block_id"] and found[0]["turn_id"] == turn
    assert found == sorted(found, key=lambda f: f["at"])
    current = Introspection(store).read_session(sid)["current_turn"]
    assert current["failures"] == 7 and current["attempts"] == 3


def test_a_signature_repeated_five_times_is_a_repetition_loop(store):
    sid = store.start_session()
    turn = store.start_turn(sid, "loop")
    for line in range(LOOP_AT):
        store.record_iteration(
            turn, blocks=[{"code": "x", "error": f"File 'a.py', line {line}: KeyError: {line}"}]
        )
    store.record_iteration(turn, blocks=[{"code": "y", "error": "other failure"}])
    store.record_iteration(turn, blocks=[{"code": "y", "error": "other failure"}])
    diagnosis = Introspection(store).read_session(sid)["diagnosis"]
    assert diagnosis["failure_count"] == LOOP_AT + 2
    assert diagnosis["by_classification"] == {"code_execution_error": LOOP_AT + 2}
    assert diagnosis["repetition_loop"] is True
    loop, pair = diagnosis["repetition_clusters"]
    assert (loop["count"], loop["is_loop"], loop["turn_ids"]) == (LOOP_AT, True, [turn])
    assert (pair["count"], pair["is_loop"]) == (2, False)
    assert diagnosis["next_actions"][0].startswith("Stop repeating")


def test_four_repeats_are_a_cluster_but_not_a_loop(store):
    sid = store.start_session()
    turn = store.start_turn(sid, "almost")
    for _ in range(LOOP_AT - 1):
        store.record_iteration(turn, blocks=[{"code": "x", "error": "ValueError: bad"}])
    diagnosis = Introspection(store).read_session(sid)["diagnosis"]
    assert diagnosis["repetition_loop"] is False
    assert diagnosis["repetition_clusters"][0]["count"] == LOOP_AT - 1


def test_usage_counts_tools_per_outcome_overlapping_and_models(store):
    sid = store.start_session()
    turn = store.start_turn(sid, "tools")
    store.record_iteration(
        turn,
        provider="anthropic",
        model="small",
        actual_provider="anthropic",
        actual_model="big",
        fallback=True,
        blocks=[
            {"tool": "Bash", "code": "a", "result": "ok"},
            {"tool": "Bash", "code": "b", "error": "exit 1"},
            {"tool": "Bash", "code": "c", "error": "killed", "timeout": True},
            {"code": "print(1)", "stdout": "1"},
        ],
    )
    store.finish_turn(turn, "done", "complete")
    usage = Introspection(store).read_session(sid)["usage"]
    assert usage["tools"] == {
        "Bash": {"calls": 3, "errors": 2, "timeouts": 1},
        "code": {"calls": 1, "errors": 0, "timeouts": 0},
    }
    assert usage["routing"]["models"] == {"anthropic/big": 1}
    assert usage["outcomes"] == {"complete": 1}


# --- never raise ----------------------------------------------------------------------------------


def test_the_reads_never_raise(store, kb, caplog):
    sid = session(store, "x", request="y")
    reader = Introspection(store)
    with caplog.at_level(logging.WARNING, logger="koinii.sessions"):
        assert reader.get_session(12345) is None
        assert reader.read_session(object()) == EMPTY_READ
        assert reader.list_sessions(limit=-3) == []
        assert reader.list_sessions("x", "extra", colour="red")[0]["id"] == sid
    assert caplog.records  # each degradation is logged
    kb.close()
    assert reader.list_sessions() == []
    assert reader.get_session(sid) is None
    assert reader.read_session(sid) == EMPTY_READ


def test_the_reads_never_raise_when_the_daemon_is_gone(start_daemon):
    daemon = start_daemon()
    client = daemon.client()
    reader = Introspection(client)
    assert reader.list_sessions() == []
    daemon.kill()
    assert reader.list_sessions("x") == []
    assert reader.get_session("x") is None
    assert reader.read_session("x") == EMPTY_READ


def test_results_are_plain_json_values(store):
    import json

    sid = session(store, "plain", request="a", reply="b", thinking="c")
    read = Introspection(store).read_session(sid)
    assert json.loads(json.dumps(read)) == read


# --- the gate ----------------------------------------------------------------------------------


def test_introspection_is_off_for_agents_by_default(store, monkeypatch):
    monkeypatch.delenv("KOINII_INTROSPECTION", raising=False)
    reader = Introspection(store)
    assert reader.enabled is False
    assert reader.agent_tools() == {} and reader.agent_prompt() == ""
    sid = session(store, "still readable", request="x")
    assert reader.get_session(sid)["id"] == sid  # people and programs still read


def test_introspection_turns_on_per_object_or_for_the_process(store, monkeypatch):
    monkeypatch.delenv("KOINII_INTROSPECTION", raising=False)
    on = Introspection(store, enabled=True)
    assert sorted(on.agent_tools()) == ["get_session", "list_sessions", "read_session"]
    assert on.agent_prompt() == AGENT_PROMPT
    monkeypatch.setenv("KOINII_INTROSPECTION", "1")
    assert Introspection(store).enabled is True
    assert Introspection(store, enabled=False).agent_tools() == {}


def test_introspection_reads_a_path_too(tmp_path):
    path = tmp_path / "s.db"
    with SessionStore(path) as store:
        sid = store.start_session(title="by path")
    with koinii.open_kb(path) as kb:
        assert Introspection(kb).get_session(sid)["title"] == "by path"
