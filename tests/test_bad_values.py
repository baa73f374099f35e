"""Values no store holds the same on both backends — NaN, ±Infinity, lone surrogates, NUL —
are refused `bad-value` naming the field, in-process and over the wire, on SQLite and
PostgreSQL, leaving the store unchanged; a store that already holds one (written by an
older version) still serves every read."""

from __future__ import annotations

import http.client
import json
import sqlite3

import pytest

import koinii
from koinii.sessions import Introspection, SessionStore
from koinii.wraps import WrapQueue
from tests.conftest import refused

NAN, INF = float("nan"), float("inf")

BAD_PROVENANCE = [
    ({"confidence": NAN}, "provenance.confidence", "nan"),
    ({"confidence": INF}, "provenance.confidence", "infinity"),
    ({"confidence": -INF}, "provenance.confidence", "-infinity"),
    ({"scores": [0.5, NAN]}, "provenance.scores[1]", "nan"),
    ({"by": "half a pair \ud83d"}, "provenance.by", "lone-surrogate"),
    ({"note": "bin\x00ary"}, "provenance.note", "nul"),
    ({"deep": {"er": {"still": "\udc00"}}}, "provenance.deep.er.still", "lone-surrogate"),
]
BAD_KEY = ({"\udc00": 1}, "lone-surrogate")


# --- in-process ------------------------------------------------------------------------------


def unchanged(kb):
    return kb.seq, kb.stats()


@pytest.mark.parametrize("fields, field, problem", BAD_PROVENANCE, ids=lambda v: str(v)[:30])
def test_every_write_path_refuses_an_unstorable_provenance_value(kb, fields, field, problem):
    h = kb.assert_("(usesDb Prod Pg)", "CxAtlas", provenance={"ok": 1})
    before = unchanged(kb)
    writes = [
        lambda: kb.assert_("(usesDb Prod My)", "CxAtlas", provenance=fields),
        lambda: kb.assert_("(usesDb Prod Pg)", "CxAtlas", provenance=fields),  # a merge
        lambda: kb.edit(add=[("(p a)", "CxAtlas"), ("(p b)", "CxAtlas", {"provenance": fields})]),
        lambda: kb.add_provenance(h, fields),
    ]
    for write in writes:
        refusal = refused(write)
        assert refusal.kind == "bad-value"
        assert refusal.data["field"] == field and refusal.data["problem"] == problem
        assert field in refusal.message and ";" in refusal.message  # what, then how to fix
    assert unchanged(kb) == before and kb.provenance(h) == {
        **kb.provenance(h),
        "ok": 1,
    }
    assert [p["kind"] for p in kb.check("(p c)", "CxAtlas", provenance=fields)] == ["bad-value"]


def test_a_key_is_text_too(kb):
    refusal = refused(lambda: kb.assert_("(p a)", "CxAtlas", provenance=BAD_KEY[0]))
    assert (refusal.kind, refusal.data["problem"]) == ("bad-value", BAD_KEY[1])


@pytest.mark.parametrize("creator", ["Agent\x00Atlas", "Agent\ud800"])
def test_a_creator_is_storable_text(kb, creator):
    seq = kb.seq
    refusal = refused(lambda: kb.assert_("(p a)", "CxAtlas", creator=creator))
    assert (refusal.kind, refusal.data["field"]) == ("bad-value", "creator")
    assert kb.seq == seq


def test_a_sentence_with_a_lone_surrogate_is_bad_value_and_a_nul_in_a_string_is_escaped(kb):
    refusal = refused(lambda: kb.assert_('(note Atlas "half \ud83d")', "CxAtlas"))
    assert (refusal.kind, refusal.data["field"]) == ("bad-value", "sentence")
    h = kb.assert_('(note Atlas "a\x00b")', "CxAtlas")  # stored as the escape \u0000
    assert kb.sentex(h).text == '(note Atlas "a\\u0000b")'


def test_add_provenance_with_infinity_is_refused_and_commits_nothing(new_location):
    location = new_location()
    with koinii.open_kb(location) as kb:
        h = kb.assert_("(p a)", "CxAtlas", provenance={"score": 1})
        seq = kb.seq
        assert refused(lambda: kb.add_provenance(h, {"score2": INF})).kind == "bad-value"
        assert kb.seq == seq and "score2" not in kb.provenance(h)
    with koinii.open_kb(location) as again:
        assert again.seq == seq and "score2" not in again.provenance(h)


# --- over the wire -------------------------------------------------------------------------


def post(daemon, path, body: bytes, token: str | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, body, headers)
    response = conn.getresponse()
    raw = response.read()
    return response.status, json.loads(raw)  # every answer is a JSON envelope


def wire_seq(daemon):
    return post(daemon, "/v1/stats", b"{}")[1]["result"]["seq"]


# JSON text as a client might send it: Python's json writes NaN and Infinity; "\ud800"
# and "\u0000" are valid JSON escapes that decode to a lone surrogate and a NUL.
WIRE_VALUES = [
    (b"NaN", "nan"),
    (b"Infinity", "infinity"),
    (b"-Infinity", "-infinity"),
    (b"1e400", "infinity"),  # a float too large is infinity once decoded
    (b'"\\ud800"', "lone-surrogate"),
    (b'"a\\u0000b"', "nul"),
]


@pytest.mark.parametrize("value, problem", WIRE_VALUES, ids=[p for _, p in WIRE_VALUES])
def test_the_daemon_refuses_unstorable_values_on_every_write_path(daemon, value, problem):
    status, reply = post(
        daemon, "/v1/assert", b'{"sentence": "(p a)", "context": "CxA", "provenance": {}}'
    )
    handle = reply["result"]
    seq = wire_seq(daemon)
    bodies = [
        (b"/v1/assert", b'{"sentence": "(p b)", "context": "CxA", "provenance": {"x": %s}}'),
        (
            b"/v1/edit",
            b'{"add": [{"sentence": "(p c)", "context": "CxA", "provenance": {"x": %s}}]}',
        ),
        (b"/v1/add_provenance", b'{"handle": %d, "fields": {"x": %%s}}' % handle),
        (b"/v1/assert", b'{"sentence": "(p d)", "context": "CxA", "creator": %s}'),
    ]
    for path, template in bodies:
        if b"creator" in template and problem not in ("lone-surrogate", "nul"):
            continue  # a creator is a string: a number is refused as bad-option first
        status, reply = post(daemon, path.decode(), template % value)
        assert status == 400, reply
        error = reply["error"]
        assert error["kind"] == "bad-value" and error["data"]["problem"] == problem
        assert error["data"]["field"] in ("provenance.x", "creator")
    assert wire_seq(daemon) == seq
    assert "x" not in post(daemon, "/v1/provenance", b'{"handle": %d}' % handle)[1]["result"]


def test_a_session_write_over_the_wire_refuses_nan(daemon):
    with daemon.client() as client:
        store = SessionStore(client)
        turn = store.start_turn(store.start_session(), "hello")
        seq = client.seq
        refusal = refused(lambda: store.record_iteration(turn, cost_usd=NAN))
        assert (refusal.kind, refusal.data["field"]) == ("bad-value", "cost_usd")
        assert client.seq == seq


NOT_UTF8 = [
    json.dumps({"sentence": "(p a)", "context": "CxA"}).encode("utf-16"),
    json.dumps({"sentence": "(p a)", "context": "CxA"}).encode("utf-32"),
    '{"sentence": "(note A \\"caf\u00e9\\")", "context": "CxA"}'.encode("latin-1"),
    b'{"sentence": "(note A \\"\xed\xa0\x80\\")", "context": "CxA"}',  # an encoded surrogate
]


def test_a_body_that_is_not_utf8_is_refused_not_json(daemon):
    seq = wire_seq(daemon)
    for body in NOT_UTF8:
        status, reply = post(daemon, "/v1/assert", body)
        assert (status, reply["error"]["kind"]) == (400, "not-json"), body
        assert "UTF-8" in reply["error"]["message"]
    assert wire_seq(daemon) == seq


def test_every_refusal_is_a_json_envelope_whatever_its_data_holds(daemon):
    # the unknown field's name is quoted back in the refusal's data
    status, reply = post(
        daemon, "/v1/assert", b'{"sentence": "(p a)", "context": "CxA", "\\ud800": NaN}'
    )
    assert status == 400 and reply["ok"] is False
    assert reply["error"]["kind"] == "unknown-option"
    assert reply["error"]["data"]["option"] == "\ufffd"
    status, reply = post(daemon, "/v1/sessions/start_session", b'{"\\udc00x": 1}')
    assert status == 400 and reply["error"]["kind"] == "unknown-option"


# --- a store an older version poisoned -----------------------------------------------------


POISON = (
    '{"confidence": NaN, "up": Infinity, "down": -Infinity, "by": "\\ud800", "nul": "a\\u0000b"}'
)
REPAIRED = {
    "confidence": "NaN",
    "up": "Infinity",
    "down": "-Infinity",
    "by": "\ufffd",
    "nul": "a\ufffdb",
}


def poison(location: str, statements: list[tuple[str, tuple]]) -> None:
    """Write `statements` with raw SQL, as a version without the checks could have."""
    if location.startswith("postgresql:"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            for sql, params in statements:
                conn.execute(sql.replace("?", "%s"), params)
    else:
        with sqlite3.connect(location) as conn:
            for sql, params in statements:
                conn.execute(sql, params)


def test_a_poisoned_store_serves_every_read(start_daemon, new_location):
    location = new_location()
    with koinii.open_kb(location) as kb:
        h = kb.assert_("(usesDb Prod Pg)", "CxBoreas", provenance={"ok": 1})
        kb.assert_("(genlCx CxTeam CxBoreas)", "CxUniverse", strength="monotonic")
        store = SessionStore(kb)
        turn = store.start_turn(store.start_session(title="poisoned"), "hi")
        store.finish_turn(turn, "done", "complete", cost_usd=0.5)
        WrapQueue(kb).add_wrap_notification("w1", project_id="p", stats={"notes": 1})
    infinite = "Infinity" if location.startswith("postgresql:") else 9e999
    poison(
        location,
        [
            ("UPDATE sentex SET extra = ? WHERE handle = ?", (POISON, h)),
            ("UPDATE attempt SET cost_usd = ?", (infinite,)),
            ("UPDATE wrap_notification SET stats = ?", ('{"notes": NaN}',)),
            ("UPDATE change_log SET diff = ? WHERE seq = 1", ('{"added": [NaN], "removed": []}',)),
        ],
    )
    daemon = start_daemon(db=location)
    with daemon.client() as client:
        sid = Introspection(client).list_sessions("poisoned")[0]["id"]
        reads = {
            "provenance": lambda: client.provenance(h),
            "sentex": lambda: client.sentex(h).provenance,
            "matching": lambda: (
                client.sentexes_matching("(usesDb ?x ?y)", "CxBoreas")[0].provenance
            ),
            "query": lambda: client.query("(usesDb ?x ?y)", "CxTeam"),
            "why": lambda: client.why(h),
            "changes": lambda: client.changes(0)["entries"][0]["added"],
            "session": lambda: Introspection(client).read_session(sid)["usage"],
            "wraps": lambda: WrapQueue(client).get_unprocessed_wraps()[0]["stats"],
        }
        got = {name: read() for name, read in reads.items()}  # none answers 500
        assert {k: got["provenance"][k] for k in REPAIRED} == REPAIRED
        assert got["sentex"]["confidence"] == got["matching"]["confidence"] == "NaN"
        assert got["changes"] == ["NaN"] and got["wraps"] == {"notes": "NaN"}
        # the poisoned sentex can still be written, and the repair is stored with it
        client.add_provenance(h, {"checked": True})
    assert daemon.stop() == 0
    with koinii.open_kb(location) as kb:
        assert {k: kb.provenance(h)[k] for k in REPAIRED} == REPAIRED
