"""Real files load (docs/engine.md, loading): line by line where asked, every bad
statement reported with its line and column, in process and over the wire."""

from __future__ import annotations

import pytest

from koinii import Refused

FILE = """; an ontology with bad lines in it
(subclass Dog Mammal)
(instance Rex Dog)
(or (barks Rex) (howls Rex))
(Bad predicate)
(unclosed (thing
(arity likes 2)
(likes Ann)
(likes Ann Bob)
(lengthOf Rod (MeasureFn 3 Meter))
"""


@pytest.fixture(params=["local", "wire"])
def store(request, kb, start_daemon):
    if request.param == "local":
        return kb
    return start_daemon().client()


def test_a_report_loads_what_is_valid_and_names_every_bad_statement(store):
    loaded = store.load_text(FILE, "CxOnto", on_error="report")
    assert [(p["line"], p["column"], p["kind"]) for p in loaded.problems] == [
        (4, 1, "unsupported-connective"),
        (5, 1, "naming"),
        (6, 11, "parse"),
        (8, 1, "arity"),
    ]
    assert all(p["message"] for p in loaded.problems)
    assert len(loaded.handles) == 5
    assert store.query("(instance ?x Dog)", "CxOnto") == [
        {"?x": store.sentex(loaded.handles[1]).sentence[1]}
    ]
    assert store.query("(likes Ann ?who)", "CxOnto")


def test_all_or_nothing_stays_the_default_and_names_the_line(store):
    seq = store.seq
    with pytest.raises(Refused) as refusal:
        store.load_text(FILE, "CxOnto")
    assert refusal.value.kind == "parse" and refusal.value.data["line"] == 6
    assert store.seq == seq
    with pytest.raises(Refused) as refusal:
        store.load_text("(p a)\n(or (p b) (q b))\n", "CxOnto")
    assert refusal.value.kind == "unsupported-connective" and store.seq == seq


def test_an_unknown_error_mode_is_refused(store):
    with pytest.raises(Refused) as refusal:
        store.load_text("(p a)", "CxOnto", on_error="skip")
    assert refusal.value.kind == "bad-option" and refusal.value.data["known"] == [
        "refuse",
        "report",
    ]
