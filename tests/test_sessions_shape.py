"""Each session operation's shape is written once (issue 43): the function that runs it.
Its declaration (the route's fields, their order, which are required), the field check
every caller meets and `SessionStore`'s method all come from that signature."""

import inspect

import pytest

from koinii import Refused
from koinii.operations import load_domains
from koinii.sessions import SessionStore, batches


@pytest.fixture
def store(kb):
    return SessionStore(kb)


def test_each_store_method_takes_its_operations_fields_in_their_order():
    operations = load_domains()
    for verb in (*batches.BATCHED, "record_batch"):
        fields = list(operations[f"sessions.{verb}"].fields)
        method = inspect.signature(getattr(SessionStore, verb))
        assert list(method.parameters)[1:] == fields, verb
        required = [name for name in fields if operations[f"sessions.{verb}"].fields[name][1]]
        without_default = [
            name for name, p in method.parameters.items() if p.default is p.empty and name != "self"
        ]
        assert without_default == required, verb


def test_every_write_can_be_batched_and_is_listed_in_the_event_schema():
    assert batches.BATCHED == (
        "start_session",
        "set_title",
        "start_turn",
        "record_iteration",
        "record_block",
        "finish_turn",
        "retry_turn",
        "fork_session",
        "record_routing",
        "add_attachment",
    )
    assert batches.EVENT_SCHEMA["properties"]["verb"]["enum"] == list(batches.BATCHED)


def test_an_unknown_field_is_refused_by_name_in_one_process_too(store):
    with pytest.raises(Refused) as refused:
        store.call("start_session", title="t", colour="red")
    assert refused.value.kind == "bad-session" and refused.value.data["field"] == "colour"
    assert store.call("start_session", title="t")  # nothing was written by the refusal


def test_a_required_field_left_out_is_refused_by_name(store):
    sid = store.start_session(title="t")
    with pytest.raises(Refused) as refused:
        store.call("start_turn", session_id=sid)
    assert refused.value.kind == "bad-session" and refused.value.data["field"] == "user_request"


def test_a_store_method_sends_the_operation_what_its_caller_gave(store):
    sid = store.start_session(title="t", channel="api")
    turn = store.start_turn(sid, "hello")
    store.finish_turn(turn, "done", "complete", "hi")  # answer by position, as before
    assert store.retry_turn(turn) == 1
    with pytest.raises(TypeError):
        store.start_turn(sid)  # a Python caller leaving out a required field: Python says so


def test_the_old_import_paths_keep_working():
    from koinii.sessions.store import MAX_BATCH, MAX_PART_TURNS, may_record, record_batch

    assert (MAX_BATCH, MAX_PART_TURNS) == (1000, 1000)
    assert callable(may_record) and callable(record_batch)
