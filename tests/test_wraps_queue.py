"""The wrap queue, row by row of wraps.md §1, on each backend. Over the daemon it answers
alike (tests/test_wire_contract.py); what only the daemon does is tested at its end."""

import time

import pytest

import koinii
from koinii.wraps import WrapQueue
from koinii.wraps.queue import wraps_query
from tests.conftest import refused


@pytest.fixture
def source(kb):
    """The queue's store, in process on each backend: its rules are the operations', which
    the daemon runs alike (tests/test_wire_contract.py)."""
    return kb


@pytest.fixture
def queue(source):
    return WrapQueue(source)


def ids(wraps):
    return [w["wrap_id"] for w in wraps]


def file_projects(queue, projects):
    for n, project in enumerate(projects):
        queue.add_wrap_notification(f"w{n:02d}", project_id=project)


# --- add ----------------------------------------------------------------------------------


def test_a_wrap_is_filed_unprocessed_with_its_fields_and_the_write_takes_a_seq(queue, source):
    before = time.time_ns() // 1_000_000
    receipt = queue.add_wrap_notification(
        "wrap-1",
        agent_id="AgentLingOne",
        session_id="session:2026-01-14:ling-123",
        project_id="hive:api",
        created_ids=[41, 42],
        stats={"notes": 1, "decisions": 1, "conventions": 0},
        parent_session_id="session:coord-a",
        depth=1,
    )
    assert receipt == {"wrap_id": "wrap-1", "seq": source.seq}
    [wrap] = queue.get_unprocessed_wraps()
    assert before <= wrap.pop("created_at") <= time.time_ns() // 1_000_000
    assert wrap == {
        "wrap_id": "wrap-1",
        "agent_id": "AgentLingOne",
        "session_id": "session:2026-01-14:ling-123",
        "project_id": "hive:api",
        "parent_session_id": "session:coord-a",
        "depth": 1,
        "created_ids": [41, 42],
        "stats": {"notes": 1, "decisions": 1, "conventions": 0},
        "processed": False,
    }


def test_missing_optional_fields_read_back_as_none_empty_list_and_empty_map(queue):
    queue.add_wrap_notification("bare")
    [wrap] = queue.get_unprocessed_wraps()
    assert {k: v for k, v in wrap.items() if k != "created_at"} == {
        "wrap_id": "bare",
        "agent_id": None,
        "session_id": None,
        "project_id": None,
        "parent_session_id": None,
        "depth": None,
        "created_ids": [],
        "stats": {},
        "processed": False,
    }


def test_a_wrap_write_is_an_entry_in_the_kbs_own_change_log(source):
    WrapQueue(source).add_wrap_notification("wrap-1", project_id="hive")
    [entry] = source.changes(since=source.seq - 1)["entries"]
    assert entry["op"] == "wraps.add" and entry["records"] == {"wrap_id": "wrap-1"}


def test_re_adding_an_id_resets_processed_overwrites_what_is_given_and_unions_ids_in_order(
    queue,
):
    queue.add_wrap_notification(
        "w", agent_id="AgentOne", project_id="hive", created_ids=[3, 1], stats={"notes": 2}
    )
    [first] = queue.get_unprocessed_wraps()
    queue.mark_wrap_processed("w")
    queue.add_wrap_notification("w", project_id="hive:api", created_ids=[1, 7, "entry-9", 7])
    [again] = queue.get_unprocessed_wraps()
    assert again["processed"] is False
    assert again["created_ids"] == [3, 1, 7, "entry-9"]
    assert again["project_id"] == "hive:api"  # given: overwritten
    assert again["agent_id"] == "AgentOne" and again["stats"] == {"notes": 2}  # kept
    assert again["created_at"] == first["created_at"]


def test_duplicate_created_ids_in_one_add_are_kept_once_in_order(queue):
    queue.add_wrap_notification("w", created_ids=[5, 2, 5, "x", 2])
    assert queue.get_unprocessed_wraps()[0]["created_ids"] == [5, 2, "x"]


BAD_WRAPS = [
    ({"wrap_id": ""}, "wrap_id"),
    ({"wrap_id": None}, "wrap_id"),
    ({"wrap_id": 7}, "wrap_id"),
    ({"depth": -1}, "depth"),
    ({"depth": 1.5}, "depth"),
    ({"depth": True}, "depth"),
    ({"depth": "1"}, "depth"),
    ({"depth": 2**63}, "depth"),
    ({"stats": {"notes": "2"}}, "stats['notes']"),
    ({"stats": {"notes": 1.0}}, "stats['notes']"),
    ({"stats": {"notes": False}}, "stats['notes']"),
    ({"stats": [1, 2]}, "stats"),
    ({"created_ids": "abc"}, "created_ids"),
    ({"created_ids": [1, 1.5]}, "created_ids[1]"),
    ({"created_ids": [None]}, "created_ids[0]"),
    ({"created_ids": [True]}, "created_ids[0]"),
    ({"created_ids": [""]}, "created_ids[0]"),
    ({"agent_id": 5}, "agent_id"),
    ({"project_id": ""}, "project_id"),
    ({"parent_session_id": ["s"]}, "parent_session_id"),
    ({"session_id": {}}, "session_id"),
]


# Text no store holds the same on both backends: refused `bad-value`, as everywhere.
BAD_VALUES = [
    ({"wrap_id": "bad\ud800"}, "wrap_id"),
    ({"project_id": "nul\x00"}, "project_id"),
    ({"created_ids": ["ok", "x\x00"]}, "created_ids[1]"),
    ({"stats": {"no\udc00tes": 1}}, "stats key"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_VALUES, ids=[f for _, f in BAD_VALUES])
def test_an_unstorable_value_in_a_wrap_is_refused_bad_value(source, fields, field):
    queue = WrapQueue(source)
    seq = source.seq
    fields = {"wrap_id": "w", **fields}
    refusal = refused(lambda: queue.add_wrap_notification(fields.pop("wrap_id"), **fields))
    assert refusal.kind == "bad-value" and refusal.data["field"] == field
    assert source.seq == seq and queue.get_unprocessed_wraps() == []


@pytest.mark.parametrize(("fields", "field"), BAD_WRAPS, ids=[f for _, f in BAD_WRAPS])
def test_a_bad_wrap_is_refused_as_bad_wrap_and_nothing_is_written(source, fields, field):
    queue = WrapQueue(source)
    seq = source.seq
    fields = {"wrap_id": "w", **fields}
    refusal = refused(lambda: queue.add_wrap_notification(fields.pop("wrap_id"), **fields))
    assert refusal.kind == "bad-wrap" and refusal.data["field"] == field
    assert source.seq == seq and queue.get_unprocessed_wraps() == []


def test_the_daemon_itself_refuses_every_bad_wrap_as_bad_wrap(start_daemon):
    # WrapQueue checks before it sends; the daemon must not rely on that.
    with start_daemon().client() as client:
        seq = client.seq
        for fields, field in BAD_WRAPS:
            body = {"wrap_id": "w", **fields}
            refusal = refused(lambda body=body: client.invoke("wraps.add", **body))
            assert (refusal.kind, refusal.data["field"]) == ("bad-wrap", field), fields
        assert client.seq == seq and WrapQueue(client).get_unprocessed_wraps() == []


# --- reads --------------------------------------------------------------------------------


def test_every_read_is_ordered_by_created_at_then_wrap_id(queue):
    for wrap_id in ("m", "c", "x", "a", "q"):
        queue.add_wrap_notification(wrap_id, project_id="hive", parent_session_id="s")
    for read in (
        queue.get_unprocessed_wraps(),
        queue.get_unprocessed_wraps_for_project("hive"),
        queue.get_unprocessed_wraps_for_hierarchy("hive"),
        queue.get_unprocessed_wraps_for_session("s"),
    ):
        assert len(read) == 5
        assert read == sorted(read, key=lambda w: (w["created_at"], w["wrap_id"]))


def test_none_and_global_mean_every_unprocessed_wrap_with_or_without_a_project(queue):
    file_projects(queue, ["hive", "hive:api", "other", None])
    everything = ids(queue.get_unprocessed_wraps())
    assert everything == ["w00", "w01", "w02", "w03"]
    for read in (
        queue.get_unprocessed_wraps_for_project,
        queue.get_unprocessed_wraps_for_hierarchy,
    ):
        assert ids(read(None)) == everything
        assert ids(read("global")) == everything


def test_the_project_read_is_an_exact_match(queue):
    file_projects(queue, ["hive", "hive:api", "hive-mcp", "hivemind"])
    assert ids(queue.get_unprocessed_wraps_for_project("hive")) == ["w00"]
    assert ids(queue.get_unprocessed_wraps_for_project("hive:api")) == ["w01"]
    assert queue.get_unprocessed_wraps_for_project("hive:web") == []


def test_the_hierarchy_read_takes_the_project_and_its_children_and_not_hive_mcp(queue):
    file_projects(
        queue,
        ["hive", "hive:api", "hive:api:v2", "hive-mcp", "hivemind", "hive;x", "hiv", "a:hive"],
    )
    assert ids(queue.get_unprocessed_wraps_for_hierarchy("hive")) == ["w00", "w01", "w02"]
    assert ids(queue.get_unprocessed_wraps_for_hierarchy("hive:api")) == ["w01", "w02"]
    assert ids(queue.get_unprocessed_wraps_for_hierarchy("hive-mcp")) == ["w03"]


def test_a_wrap_without_a_project_never_matches_a_named_project(queue):
    queue.add_wrap_notification("no-project", parent_session_id="s")
    assert queue.get_unprocessed_wraps_for_project("hive") == []
    assert queue.get_unprocessed_wraps_for_hierarchy("hive") == []
    assert ids(queue.get_unprocessed_wraps_for_session("s")) == ["no-project"]


def test_the_session_read_returns_that_sessions_wraps_and_none_for_a_falsy_session(queue):
    queue.add_wrap_notification("a1", parent_session_id="session:coord-a", project_id="hive")
    queue.add_wrap_notification("b1", parent_session_id="session:coord-b", project_id="hive")
    queue.add_wrap_notification("none", project_id="hive")
    assert ids(queue.get_unprocessed_wraps_for_session("session:coord-a")) == ["a1"]
    assert queue.get_unprocessed_wraps_for_session("session:nobody") == []
    for falsy in (None, ""):
        assert queue.get_unprocessed_wraps_for_session(falsy) is None


@pytest.mark.parametrize(
    ("read", "argument", "field"),
    [
        ("get_unprocessed_wraps_for_project", 5, "project_id"),
        ("get_unprocessed_wraps_for_project", "", "project_id"),
        ("get_unprocessed_wraps_for_hierarchy", ["hive"], "project_id"),
        ("get_unprocessed_wraps_for_session", 7, "parent_session_id"),
    ],
)
def test_a_bad_read_filter_is_refused_as_bad_option(queue, read, argument, field):
    refusal = refused(lambda: getattr(queue, read)(argument))
    assert refusal.kind == "bad-option" and refusal.data["option"] == field


# --- marking ------------------------------------------------------------------------------


def test_marking_returns_the_seq_and_is_idempotent_without_writing_again(queue, source):
    queue.add_wrap_notification("w", project_id="hive")
    marked = queue.mark_wrap_processed("w")
    assert marked == {"wrap_id": "w", "seq": source.seq}
    seq = source.seq
    assert queue.mark_wrap_processed("w") == marked
    assert source.seq == seq


def test_marking_an_unknown_wrap_returns_none_and_writes_nothing(queue, source):
    seq = source.seq
    assert queue.mark_wrap_processed("no-such-wrap") is None
    assert source.seq == seq
    assert refused(lambda: queue.mark_wrap_processed("")).kind == "bad-wrap"


def test_a_processed_wrap_is_never_offered_again_and_never_deleted(queue):
    queue.add_wrap_notification("done", project_id="hive:api", parent_session_id="s")
    queue.add_wrap_notification("open", project_id="hive:api", parent_session_id="s")
    queue.mark_wrap_processed("done")
    assert ids(queue.get_unprocessed_wraps()) == ["open"]
    assert ids(queue.get_unprocessed_wraps_for_project("hive:api")) == ["open"]
    assert ids(queue.get_unprocessed_wraps_for_hierarchy("hive")) == ["open"]
    assert ids(queue.get_unprocessed_wraps_for_session("s")) == ["open"]
    history = queue.wraps(include_processed=True)
    assert [(w["wrap_id"], w["processed"]) for w in history] == [("done", True), ("open", False)]


# --- the reads are indexed ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "plan"),
    [
        (wraps_query(), ["SCAN wrap_notification USING INDEX wrap_unprocessed"]),
        (
            wraps_query(parent_session_id="s"),
            ["SEARCH wrap_notification USING INDEX wrap_unprocessed_by_session"],
        ),
        (
            wraps_query(project_id="hive"),
            ["SEARCH wrap_notification USING INDEX wrap_unprocessed_by_project"],
        ),
        (
            wraps_query(project_id="hive", include_children=True),
            ["SEARCH wrap_notification USING INDEX wrap_unprocessed_by_project"] * 2,
        ),
    ],
    ids=["all", "session", "project", "hierarchy"],
)
def test_every_unprocessed_read_walks_a_partial_index_never_the_table(query, plan):
    # The partial indexes hold only unprocessed wraps: even the read of all of them
    # walks that index, and never touches the processed history.
    with koinii.open_kb(None) as kb:
        WrapQueue(kb).add_wrap_notification("w", project_id="hive")
        sql, params = query
        steps = kb.read_records(
            lambda c: [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + sql, params)]
        )
    accesses = [s for s in steps if s.startswith(("SEARCH", "SCAN"))]
    assert [s.split(" (")[0] for s in accesses] == plan
