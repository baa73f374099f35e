"""The session writer (sessions.md §1-2): every write durable through the single writer,
every bad input refused as `bad-session` naming its field, nothing half-written — on
SQLite and PostgreSQL, in-process and over the wire."""

import pytest

import koinii
from koinii import Refused
from koinii.kb.store.migrate import migrate
from koinii.operations import load_domains
from koinii.sessions import Introspection, SessionStore
from tests.conftest import pg_location


@pytest.fixture
def store(kb):
    return SessionStore(kb)


def refused(call) -> Refused:
    with pytest.raises(Refused) as caught:
        call()
    return caught.value


def counts(kb) -> dict:
    tables = ("session", "state", "turn", "turn_text", "attempt", "iteration", "block")
    tables += ("routing_event", "attachment")

    def read(db):
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}

    return kb.read_records(read)


def recorded(store) -> dict:
    """A small finished session: two turns, one iteration with two blocks."""
    sid = store.start_session(title="Fix the build", provider="anthropic", model="claude-x")
    first = store.start_turn(sid, "why does the build fail?", created_at="2026-01-01T10:00:00Z")
    it = store.record_iteration(
        first,
        thinking="the lockfile is stale",
        prose="Let me run the tests.",
        tokens={"input": 1000, "cached": 600, "cache_created": 100, "output": 50},
        cost_usd=0.02,
        blocks=[{"tool": "Bash", "code": "make test", "result": "1 failed"}],
    )
    store.record_block(it, code="import foo", error="ModuleNotFoundError: No module named 'foo'")
    store.finish_turn(first, "done", "complete", answer="Regenerate the lockfile.")
    second = store.start_turn(sid, "do it", created_at="2026-01-01T10:05:00Z")
    return {"session": sid, "turns": [first, second], "iteration": it}


# --- the lifecycle ---------------------------------------------------------------------


def test_a_recorded_session_reads_back_turn_by_turn(store):
    ids = recorded(store)
    read = Introspection(store).read_session(ids["session"])
    session = read["session"]
    assert session["title"] == "Fix the build" and session["model"] == "claude-x"
    assert [t["id"] for t in session["turns"]] == ids["turns"]
    assert session["turns"][0]["outcome"] == "complete"
    assert session["turns"][0]["answer"] == "Regenerate the lockfile."
    assert session["turns"][0]["total_cost"] == 0.02
    assert session["turns"][1]["outcome"] is None  # still running
    blocks = read["transcript"]["turns"][0]["iterations"][0]["blocks"]
    assert [(b["position"], b["tool"], b["code"]) for b in blocks] == [
        (1, "Bash", "make test"),
        (2, None, "import foo"),
    ]
    assert read["current_turn"]["id"] == ids["turns"][1]
    assert read["current_turn"]["status"] == "running"


def test_modified_at_is_the_newest_turn_time(store):
    sid = store.start_session(created_at="2026-01-01T09:00:00+01:00")
    row = Introspection(store).get_session(sid)
    assert row["created_at"] == row["modified_at"] == "2026-01-01T08:00:00.000Z"
    store.start_turn(sid, "hello", created_at="2026-01-02T00:00:00.5Z")
    assert Introspection(store).get_session(sid)["modified_at"] == "2026-01-02T00:00:00.500Z"


def test_iteration_tokens_and_cost_add_up_into_the_attempt_unless_finish_gives_totals(store):
    sid = store.start_session()
    turn = store.start_turn(sid, "count")
    store.record_iteration(turn, tokens={"input": 10, "output": 1}, cost_usd=0.5)
    store.record_iteration(turn, tokens={"input": 20, "output": 2, "reasoning": 3})
    store.finish_turn(turn, "done", "complete")
    usage = Introspection(store).read_session(sid)["usage"]
    assert usage["tokens"] == {
        "input": 30,
        "cached": 0,
        "uncached": 30,
        "cache_created": 0,
        "output": 3,
        "reasoning": 3,
    }
    assert usage["cost_usd"] == 0.5
    again = store.start_turn(sid, "totals")
    store.record_iteration(again, tokens={"input": 1})
    store.finish_turn(again, "done", "complete", tokens={"input": 99, "output": 9}, cost_usd=1.0)
    usage = Introspection(store).read_session(sid)["usage"]
    assert usage["tokens"]["input"] == 129 and usage["tokens"]["output"] == 12
    assert usage["cost_usd"] == 1.5


def test_a_retry_opens_the_next_attempt_and_keeps_the_earlier_ones(store):
    sid = store.start_session()
    turn = store.start_turn(sid, "deploy")
    store.finish_turn(turn, "error", "error", error="API Error: 529 overloaded")
    assert store.retry_turn(turn) == 1
    store.record_iteration(turn, prose="deployed")
    store.finish_turn(turn, "done", "complete", answer="deployed")
    assert store.retry_turn(turn) == 2
    read = Introspection(store).read_session(sid)
    attempts = read["turn_retries"][turn]
    assert [(a["attempt"], a["status"]) for a in attempts] == [
        (0, "error"),
        (1, "done"),
        (2, "running"),
    ]
    assert attempts[1]["iteration_count"] == 1
    assert read["current_turn"]["attempts"] == 3


def test_a_fork_keeps_the_first_turns_and_the_chain_follows_the_latest_state(store):
    sid = store.start_session(title="v0", model="m0")
    first = store.start_turn(sid, "one")
    store.finish_turn(first, "done", "complete")
    second = store.start_turn(sid, "two")
    store.finish_turn(second, "done", "complete")
    assert store.fork_session(sid, position=1, title="v1", model="m1") == 1
    third = store.start_turn(sid, "three")
    read = Introspection(store).read_session(sid)
    assert [t["id"] for t in read["session"]["turns"]] == [first, third]
    assert [t["position"] for t in read["session"]["turns"]] == [1, 2]
    assert read["session"]["title"] == "v1" and read["session"]["model"] == "m1"
    forks = read["session_forks"]
    assert [(f["version"], f["fork_position"], f["title"], f["is_current"]) for f in forks] == [
        (0, None, "v0", False),
        (1, 1, "v1", True),
    ]
    assert forks[1]["parent_state_id"] == forks[0]["id"]
    # a fork of the fork at 0 keeps nothing; its parent's chain is untouched in storage
    assert store.fork_session(sid, position=0) == 2
    assert Introspection(store).read_session(sid)["session"]["turns"] == []
    assert Introspection(store).get_session(sid)["turn_count"] == 0
    assert Introspection(store).read_session(sid)["session_forks"][2]["title"] == "v1"


def test_routing_events_and_attachments_are_recorded(store):
    sid = store.start_session()
    turn = store.start_turn(
        sid,
        "look",
        attachments=[{"filename": "shot.png", "media_type": "image/png", "size_bytes": 7}],
    )
    store.add_attachment(turn, filename="log.txt", sha256="ab" * 32)
    store.record_routing(
        sid, "fallback", turn_id=turn, provider="a", model="x", to_provider="b", to_model="y"
    )
    read = Introspection(store).read_session(sid)
    names = [a["filename"] for a in read["transcript"]["turns"][0]["attachments"]]
    assert names == ["shot.png", "log.txt"]
    assert read["usage"]["routing"]["events"] == {"fallback": 1}
    assert read["failures"][0]["classification"] == "provider_error"


def test_set_title_renames_the_session(store):
    sid = store.start_session(title="old")
    store.set_title(sid, "new")
    assert Introspection(store).get_session(sid)["title"] == "new"
    assert Introspection(store).list_sessions("new")[0]["id"] == sid


def test_a_child_session_is_hidden_from_the_index(store):
    parent = store.start_session(title="parent")
    child = store.start_session(title="child", parent_session_id=parent)
    assert [r["id"] for r in Introspection(store).list_sessions()] == [parent]
    assert Introspection(store).get_session(child)["title"] == "child"


def test_every_write_takes_one_seq(store, kb):
    sid = store.start_session()
    before = kb.seq
    store.start_turn(sid, "x")
    assert kb.seq == before + 1


# --- refusals: every bad input, store unchanged --------------------------------------------


BAD_WRITES = [
    ("start_session", {"channel": ""}, "channel"),
    ("start_session", {"title": 5}, "title"),
    ("start_session", {"created_at": "yesterday"}, "created_at"),
    ("start_session", {"parent_session_id": "nope"}, "parent_session_id"),
    ("set_title", {"session_id": "nope", "title": "t"}, "session_id"),
    ("set_title", {"session_id": "$S", "title": "  "}, "title"),
    ("start_turn", {"session_id": "nope", "user_request": "hi"}, "session_id"),
    ("start_turn", {"session_id": "$S", "user_request": None}, "user_request"),
    ("start_turn", {"session_id": "$S", "user_request": "x", "attachments": "a"}, "attachments"),
    (
        "start_turn",
        {"session_id": "$S", "user_request": "x", "attachments": [{"size_bytes": -1}]},
        "attachments[0].size_bytes",
    ),
    (
        "start_turn",
        {"session_id": "$S", "user_request": "x", "attachments": [{"colour": "red"}]},
        "attachments[0].colour",
    ),
    ("record_iteration", {"turn_id": "nope"}, "turn_id"),
    ("record_iteration", {"turn_id": "$T", "tokens": {"input": -1}}, "tokens.input"),
    ("record_iteration", {"turn_id": "$T", "tokens": {"inptu": 1}}, "tokens.inptu"),
    ("record_iteration", {"turn_id": "$T", "fallback": "yes"}, "fallback"),
    ("record_iteration", {"turn_id": "$T", "blocks": [{"code": 1}]}, "blocks[0].code"),
    ("record_iteration", {"turn_id": "$T", "blocks": [{"timeout": 1}]}, "blocks[0].timeout"),
    ("record_iteration", {"turn_id": "$DONE"}, "turn_id"),
    ("record_block", {"iteration_id": "nope"}, "iteration_id"),
    ("record_block", {"iteration_id": "$I", "duration_ms": 1.5}, "duration_ms"),
    ("finish_turn", {"turn_id": "$T", "status": "running", "outcome": "complete"}, "status"),
    ("finish_turn", {"turn_id": "$T", "status": "done", "outcome": "fine"}, "outcome"),
    ("finish_turn", {"turn_id": "$DONE", "status": "done", "outcome": "complete"}, "turn_id"),
    ("retry_turn", {"turn_id": "$T"}, "turn_id"),
    ("retry_turn", {"turn_id": None}, "turn_id"),
    ("fork_session", {"session_id": "$S", "position": 99}, "position"),
    ("fork_session", {"session_id": "$S", "position": -1}, "position"),
    ("record_routing", {"session_id": "$S", "kind": "sideways"}, "kind"),
    ("record_routing", {"session_id": "$S", "kind": "retry", "turn_id": "$OTHER"}, "turn_id"),
    ("add_attachment", {"turn_id": "$T", "sha256": "xyz"}, "sha256"),
    ("import_part", {"external_id": "e", "part": None}, "part"),
    ("import_part", {"external_id": "e", "part": 0, "session": []}, "session"),
    ("import_part", {"external_id": "e", "part": 1, "turns": []}, "external_id"),
    (
        "import_part",
        {"external_id": "e", "part": 0, "session": {}, "turns": [{"user_request": "x"}]},
        "turns[0].attempts",
    ),
    (
        "import_part",
        {
            "external_id": "e",
            "part": 0,
            "session": {},
            "turns": [{"user_request": "x", "attempts": [{"status": "odd"}]}],
        },
        "turns[0].attempts[0].status",
    ),
    ("import_part", {"external_id": "e", "part": 0, "session": {"meta": {"x": {1}}}}, "session"),
]


# Values no store holds the same on both backends: refused `bad-value`, as everywhere.
BAD_VALUES = [
    ("start_session", {"title": "x\x00y"}, "title"),
    ("start_session", {"title": "\ud800"}, "title"),
    (
        "import_part",
        {"external_id": "e", "part": 0, "session": {"meta": {"score": float("inf")}}},
        "session.meta.score",
    ),
    ("record_iteration", {"turn_id": "$T", "cost_usd": float("nan")}, "cost_usd"),
    ("record_iteration", {"turn_id": "$T", "cost_usd": float("-inf")}, "cost_usd"),
    ("record_block", {"iteration_id": "$I", "stdout": "binary\x00output"}, "stdout"),
]


@pytest.mark.parametrize("op, fields, field", BAD_WRITES, ids=lambda v: str(v)[:40])
def test_a_bad_write_is_refused_naming_the_field_and_changes_nothing(store, kb, op, fields, field):
    sid = store.start_session()
    other = store.start_turn(store.start_session(), "elsewhere")
    done = store.start_turn(sid, "finished")
    store.finish_turn(done, "done", "complete")
    turn = store.start_turn(sid, "running")
    iteration = store.record_iteration(turn)
    names = {"$S": sid, "$T": turn, "$DONE": done, "$I": iteration, "$OTHER": other}
    given = {k: names.get(v, v) if isinstance(v, str) else v for k, v in fields.items()}
    before, seq = counts(kb), kb.seq
    refusal = refused(lambda: store.call(op, **given))
    assert refusal.kind == "bad-session"
    assert refusal.data["field"].startswith(field), refusal.data
    assert field.split(".")[0].split("[")[0] in refusal.message
    assert counts(kb) == before and kb.seq == seq


@pytest.mark.parametrize("op, fields, field", BAD_VALUES, ids=lambda v: str(v)[:40])
def test_an_unstorable_value_is_refused_bad_value_and_changes_nothing(store, kb, op, fields, field):
    sid = store.start_session()
    turn = store.start_turn(sid, "running")
    iteration = store.record_iteration(turn)
    names = {"$S": sid, "$T": turn, "$I": iteration}
    given = {k: names.get(v, v) if isinstance(v, str) else v for k, v in fields.items()}
    before, seq = counts(kb), kb.seq
    refusal = refused(lambda: store.call(op, **given))
    assert refusal.kind == "bad-value"
    assert refusal.data["field"] == field and field in refusal.message
    assert counts(kb) == before and kb.seq == seq


def test_an_unknown_argument_is_refused_not_ignored(store):
    sid = store.start_session()
    turn = store.start_turn(sid, "x")
    assert refused(lambda: store.call("record_iteration", turn_id=turn, prose_="x")).data == {
        "field": "prose_"
    }


def test_an_external_id_names_one_session(store):
    store.start_session(external_id="tracker:1")
    refusal = refused(lambda: store.start_session(external_id="tracker:1"))
    assert refusal.kind == "bad-session" and refusal.data["field"] == "external_id"


# --- a path, and the wire ------------------------------------------------------------------


def test_a_store_opened_from_a_path_is_closed_by_close(tmp_path):
    path = tmp_path / "s.db"
    with SessionStore(path) as store:
        sid = store.start_session(title="on disk")
    with SessionStore(str(path)) as again:
        assert Introspection(again).get_session(sid)["title"] == "on disk"


def test_record_and_search_a_session_through_a_real_daemon(start_daemon):
    daemon = start_daemon()
    with daemon.client() as client:
        store = SessionStore(client)
        ids = recorded(store)
        reader = Introspection(client, current_session_id=ids["session"])
        found = reader.list_sessions("lockfil")
        assert [(r["id"], r["rank"]) for r in found] == [(ids["session"], 3)]
        assert reader.get_session()["is_current"] is True
        assert reader.read_session()["usage"]["tokens"]["cached"] == 600
        seq = client.seq
        refusal = refused(lambda: store.start_turn(ids["session"], 42))
        assert refusal.kind in ("bad-session", "bad-request")
        refusal = refused(lambda: store.finish_turn(ids["turns"][1], "done", "great"))
        assert (refusal.kind, refusal.data["field"]) == ("bad-session", "outcome")
        assert client.seq == seq


def test_over_the_wire_a_reader_reads_sessions_but_may_not_record_them(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent", "Auditor": "reader"})
    with daemon.client("AgentAtlas") as atlas, daemon.client("Auditor") as auditor:
        sid = SessionStore(atlas).start_session(title="atlas at work")
        assert Introspection(auditor).list_sessions("atlas")[0]["id"] == sid
        refusal = refused(lambda: SessionStore(auditor).start_turn(sid, "let me in"))
        assert refusal.kind == "forbidden"


# --- session parents and imports belong to their principal (issue 37) ------------------------


TWO_AGENTS = {"AgentBoreas": "agent", "AgentAtlas": "agent", "Ops": "operator"}


def test_an_agent_starts_a_child_session_only_under_a_session_it_started(start_daemon):
    daemon = start_daemon(principals=TWO_AGENTS)
    with daemon.client("AgentBoreas") as boreas, daemon.client("AgentAtlas") as atlas:
        victim = SessionStore(boreas).start_session(title="boreas leads")
        seq = atlas.seq
        attacker = SessionStore(atlas)
        recorder = attacker.recorder()
        recorder.start_session(title="mine under yours", parent_session_id=victim)
        for attack in (
            lambda: attacker.start_session(title="under boreas", parent_session_id=victim),
            recorder.flush,  # the same, batched
        ):
            refusal = refused(attack)
            assert refusal.kind == "koinii/foreign-session"
            assert refusal.data["field"] == "parent_session_id"
            assert (refusal.data["agent"], refusal.data["owner"]) == ("AgentAtlas", "AgentBoreas")
            assert "name one of yours as parent_session_id, or leave it out" in refusal.message
        assert atlas.seq == seq  # nothing was written
        assert Introspection(atlas).read_session(victim)["children"] == []
        # its own children, and an operator's placing, are still made
        own = attacker.start_session(title="atlas leads")
        assert attacker.start_session(title="atlas's worker", parent_session_id=own)
        SessionStore(daemon.client("Ops")).start_session(parent_session_id=victim)
        assert len(Introspection(boreas).read_session(victim)["children"]) == 1


def _import(store, external_id, **session):
    return store.call("import_part", external_id=external_id, part=0, session=session, done=True)


def test_an_import_naming_another_agents_import_as_parent_is_not_attached_under_it(
    start_daemon,
):
    """An import's parent is its importer's own import of `parent_external_id`: another
    principal's child is a session of its own, never placed under the victim's."""
    daemon = start_daemon(principals=TWO_AGENTS)
    with daemon.client("AgentBoreas") as boreas, daemon.client("AgentAtlas") as atlas:
        victim, attacker = SessionStore(boreas), SessionStore(atlas)
        lead = _import(victim, "claude-code:lead", title="boreas leads")
        planted = _import(
            attacker, "claude-code:planted", title="planted", parent_external_id="claude-code:lead"
        )
        assert planted["status"] == "new" and planted["parent_session_id"] is None
        assert Introspection(boreas).read_session(lead["session_id"])["children"] == []
        # the victim's own child attaches as before
        child = _import(victim, "claude-code:sub", parent_external_id="claude-code:lead")
        assert child["parent_session_id"] == lead["session_id"]


def test_an_agent_that_imports_the_victims_source_id_first_does_not_lock_it_out(start_daemon):
    """An import is keyed by its importer and the source's id: the squatter gets a
    session of its own, the victim's import is not refused and goes on as its own, and
    each reader's own import is the one the source id names."""
    daemon = start_daemon(principals=TWO_AGENTS)
    with daemon.client("AgentBoreas") as boreas, daemon.client("AgentAtlas") as atlas:
        victim, attacker = SessionStore(boreas), SessionStore(atlas)
        squat = _import(attacker, "claude-code:next", title="squatted")
        own = _import(victim, "claude-code:next", title="boreas's next")
        assert own["status"] == "new" and own["session_id"] != squat["session_id"]
        again = _import(victim, "claude-code:next", title="boreas's next, again")
        assert (again["status"], again["session_id"]) == ("replaced", own["session_id"])
        assert Introspection(boreas).get_session("claude-code:next")["id"] == own["session_id"]
        assert Introspection(atlas).get_session("next")["id"] == squat["session_id"]
        assert Introspection(boreas).get_session(squat["session_id"])["title"] == "squatted"
        # start_session's external id is its starter's too
        assert victim.start_session(title="boreas", external_id="shared:1")
        assert attacker.start_session(title="atlas", external_id="shared:1")
        refusal = refused(lambda: attacker.start_session(external_id="shared:1"))
        assert (refusal.kind, refusal.data["field"]) == ("bad-session", "external_id")


def test_a_batch_and_an_import_part_are_capped_before_any_of_their_work(start_daemon):
    """Issue 37: a batch's events and an import part's turns are counted first — a batch
    over the limit is refused for its size before any event is authorized or checked."""
    daemon = start_daemon(principals=TWO_AGENTS)
    with daemon.client("AgentBoreas") as boreas, daemon.client("AgentAtlas") as atlas:
        sid = SessionStore(boreas).start_session(title="boreas")
        seq = atlas.seq
        foreign = {"verb": "start_turn", "fields": {"session_id": sid, "user_request": "x"}}
        refusal = refused(lambda: SessionStore(atlas).record_batch([foreign] * 1_001))
        assert (refusal.kind, refusal.data["field"], refusal.data["limit"]) == (
            "bad-session",
            "events",
            1_000,
        )  # (the daemon counts them as it decodes the body: data.at_least, bodies.py)
        assert "1,001 events" in refusal.message and "several batches" in refusal.message
        turns = [{"user_request": f"turn {n}"} for n in range(1_001)]
        refusal = refused(
            lambda: SessionStore(atlas).call(
                "import_part", external_id="big", part=0, session={}, turns=turns
            )
        )
        assert (refusal.kind, refusal.data["field"], refusal.data["limit"]) == (
            "bad-session",
            "turns",
            1_000,
        )
        assert "several parts" in refusal.message
        assert atlas.seq == seq


def test_the_session_tables_move_between_stores_with_koinii_migrate(tmp_path, postgres):
    schemas: list[str] = []
    first, back = str(tmp_path / "first.db"), str(tmp_path / "back.db")
    try:
        there = pg_location(postgres, schemas)
        load_domains()
        with SessionStore(first) as store:
            ids = recorded(store)
            before = Introspection(store).read_session(ids["session"])
            del before["current_turn"]["elapsed_ms"]  # a running turn's clock keeps going
        migrate(first, there)
        migrate(there, back)
        for location in (there, back):
            with koinii.open_kb(location) as kb:
                reader = Introspection(kb)
                after = reader.read_session(ids["session"])
                del after["current_turn"]["elapsed_ms"]
                assert after == before
                assert [r["id"] for r in reader.list_sessions("lockfile")] == [ids["session"]]
                # new rows get numbers past the copied ones
                more = SessionStore(kb).start_turn(ids["session"], "after the move")
                assert reader.read_session(ids["session"])["session"]["turns"][-1]["id"] == more
    finally:
        for schema in schemas:
            postgres.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
