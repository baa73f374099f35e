"""A body's decoding has a budget (issue 37; docs/security.md, "Budgets and caps").

One `json.loads` of a big body held the daemon's loop for all of it — a 9 MB edit 0.9-1.2 s
before its first entry was refused, a 15 MB `sessions/record_batch` up to 1.9 s, a
`wraps/add` of 1.4 M ids up to 2.4 s — and the caps (10,000 entries, 1,000 events, 10,000
ids) were counted only after the whole body was decoded. Now a big body is decoded in
slices of the loop (`server/bodies.py`), and a capped array is refused at the item past
its limit: `data.at_least` says how far the daemon read, never the whole count. How long
others wait meanwhile is the resilience benchmark's to measure (benchmarks/resilience.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koinii.errors import Refused
from koinii.server import bodies
from tests.conftest import refused


@pytest.fixture
def team(start_daemon):
    return start_daemon(principals={"AgentAtlas": "agent", "Ops": "operator"})


# --- over a daemon -------------------------------------------------------------------------


def test_an_agents_edit_past_its_cap_is_refused_at_the_entry_past_it(team):
    atlas = team.client("AgentAtlas", timeout=60)
    huge = [(f"(note N{i})", "CxAtlas") for i in range(150_000)]
    caught = refused(lambda: atlas.edit(add=huge))
    assert caught.kind == "batch-too-large"
    assert caught.data["limit"] == 10_000 and caught.data["field"] == "add"
    assert caught.data["at_least"] == 10_001  # the other 139,999 entries never decoded
    assert "10,000" in caught.message and "in parts" in caught.message
    assert atlas.sentexes_matching("(note ?n)", "CxAtlas") == []


def test_an_agents_edit_removes_at_most_the_cap_too(team):
    """Each removal is an access check: 200,000 of them were checked before the write's
    budget began."""
    atlas = team.client("AgentAtlas", timeout=60)
    mine = atlas.assert_("(note Kept)", "CxAtlas")
    caught = refused(lambda: atlas.edit(remove=[mine] * 200_000))
    assert (caught.kind, caught.data["field"], caught.data["limit"]) == (
        "batch-too-large",
        "remove",
        10_000,
    )
    assert [s.handle for s in atlas.sentexes_matching("(note ?n)", "CxAtlas")] == [mine]


def test_an_agents_dry_run_meets_the_cap_of_the_edit_it_tries(team):
    atlas = team.client("AgentAtlas", timeout=60)
    caught = refused(
        lambda: atlas.check_edit(add=[(f"(note N{i})", "CxAtlas") for i in range(20_000)])
    )
    assert caught.kind == "batch-too-large" and caught.data["at_least"] == 10_001


def test_an_operator_edits_past_the_agents_cap(team):
    ops = team.client("Ops", timeout=60)
    with ops.budget(60):
        ops.edit(add=[(f"(note N{i})", "CxOps") for i in range(12_000)])
    assert ops.stats()["sentexes"] >= 12_000


def test_a_wrap_of_more_ids_than_its_cap_is_refused_as_the_ids_are_read(team):
    atlas = team.client("AgentAtlas", timeout=60)
    ids = list(range(1, 1_400_001))
    caught = refused(lambda: atlas.invoke("wraps.add", wrap_id="w-big", created_ids=ids))
    assert (caught.kind, caught.data["field"], caught.data["limit"]) == (
        "bad-wrap",
        "created_ids",
        10_000,
    )
    # plain numbers are read a window at a time: a window's worth past the limit at most
    assert 10_000 < caught.data["at_least"] < 20_000
    assert atlas.invoke("wraps.list", include_processed=True) == []


def test_a_batch_of_more_events_than_its_cap_is_refused_as_the_events_are_read(team):
    atlas = team.client("AgentAtlas", timeout=60)
    events = [
        {"verb": "set_title", "fields": {"session_id": "s-1", "title": "x" * 60}}
        for _ in range(100_000)  # 12.5 MB
    ]
    caught = refused(lambda: atlas.invoke("sessions.record_batch", events=events))
    assert (caught.kind, caught.data["field"], caught.data["limit"]) == (
        "bad-session",
        "events",
        1_000,
    )
    assert caught.data["at_least"] == 1_001


def test_an_import_part_of_more_turns_than_its_cap_is_refused_as_the_turns_are_read(team):
    atlas = team.client("AgentAtlas", timeout=60)
    turns = [{"role": "user", "content": "hello " * 20} for _ in range(5_000)]
    caught = refused(
        lambda: atlas.invoke("sessions.import_part", external_id="e-1", part=0, turns=turns)
    )
    assert (caught.kind, caught.data["field"], caught.data["at_least"]) == (
        "bad-session",
        "turns",
        1_001,
    )


def test_a_big_body_within_the_caps_is_taken_whole(team):
    """Decoded in slices, a body within the caps means what it meant decoded at once."""
    atlas = team.client("AgentAtlas", timeout=60)
    text = "y" * 900
    with pytest.raises(Refused) as caught:  # 9 MB, refused at its first entry
        atlas.edit(
            add=[("(note First)", "CxOps")]
            + [(f'(note N{i} "{text}")', "CxAtlas") for i in range(9_000)]
        )
    assert caught.value.kind == "koinii/foreign-context" and caught.value.data["index"] == 0
    notes = [(f'(note N{i} "{text}")', "CxAtlas") for i in range(40)]  # 37 KB
    atlas.edit(add=notes)
    assert len(atlas.sentexes_matching("(note ?n ?t)", "CxAtlas")) == 40


# --- the decoder itself ----------------------------------------------------------------------


def _decode(raw: bytes, caps=None, budget_s: float = 10.0):
    return asyncio.run(bodies.decode(raw, caps or {}, 0.001, budget_s))


@pytest.fixture
def tiny_windows(monkeypatch):
    """Windows and pieces small enough that small bodies take every path of the walk."""
    monkeypatch.setattr(bodies, "SMALL", 0)
    monkeypatch.setattr(bodies, "WINDOWS", (16, 64))
    monkeypatch.setattr(bodies, "UTF8_PIECE", 7)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=60,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=JSON, ascii=st.booleans(), indent=st.sampled_from([None, 0, 2]))
def test_the_sliced_decoder_reads_what_json_loads_reads(tiny_windows, value, ascii, indent):
    text = json.dumps(value, ensure_ascii=ascii, indent=indent)
    raw = text.encode("utf-8", "surrogatepass")
    try:
        expected = ("value", json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError):
        expected = ("refused",)
    try:
        got = ("value", _decode(raw))
    except Refused as refusal:
        assert refusal.kind == "not-json"
        got = ("refused",)
    assert json.dumps(got) == json.dumps(expected)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=JSON, at=st.integers(min_value=0), junk=st.sampled_from(list(',]}"[{ 1x\\:')))
def test_the_sliced_decoder_refuses_what_json_loads_refuses(tiny_windows, value, at, junk):
    text = json.dumps(value)
    at %= len(text)
    broken = text[:at] + junk + text[at + 1 :]
    try:
        expected = ("value", json.dumps(json.loads(broken)))
    except ValueError:
        expected = ("refused",)
    try:
        got = ("value", json.dumps(_decode(broken.encode())))
    except Refused as refusal:
        assert refusal.kind == "not-json", refusal
        got = ("refused",)
    assert got == expected


def test_a_body_not_utf8_is_refused_at_its_byte(tiny_windows):
    for raw in (b'{"a": "' + "é".encode() * 5 + b'\xff"}', b'{"a": "abc\xc3"}'):
        caught = refused(lambda raw=raw: _decode(raw))
        assert caught.kind == "not-json"
        assert caught.data["offset"] == raw.index(b"\xff" if b"\xff" in raw else b"\xc3")


def test_decoding_gives_the_loop_back_between_slices():
    """While a 9 MB body is decoded, other tasks on the loop run: one call held it all."""
    entries = [
        {"sentence": f'(note N{i} "{"y" * 900}")', "context": "CxAtlas"} for i in range(9_000)
    ]
    raw = json.dumps({"add": entries}).encode()
    ticks = 0

    async def both():
        nonlocal ticks
        decoding = asyncio.ensure_future(bodies.decode(raw, {}, 0.001, 10.0))
        while not decoding.done():
            ticks += 1
            await asyncio.sleep(0)
        return decoding.result()

    assert asyncio.run(both()) == {"add": entries}
    assert ticks > 10


def test_decoding_past_its_budget_is_refused():
    raw = json.dumps([[i, [i], {"k": [i]}] for i in range(300_000)]).encode()
    caught = refused(lambda: _decode(raw, budget_s=0.001))
    assert caught.kind == "budget-exhausted" and caught.data["while"] == "decoding the body"


def test_big_containers_nest_at_most_max_depth(tiny_windows):
    raw = b"[" * 100 + b"1" * 70 + b"]" * 100
    caught = refused(lambda: _decode(raw))
    assert caught.kind == "not-json" and "nest" in caught.message
