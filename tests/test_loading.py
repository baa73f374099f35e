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
(bad (thing #2))
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
        (6, 13, "parse"),
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


NESTED = """(p a)
(holds Thing
  (bad #)
(q b)
  (r c))
(s d)
"""


def test_nothing_inside_a_bad_statement_loads_and_the_next_one_does(store):
    """Issue 41: a sub-expression of a bad statement that starts a line, like `(q b)`
    above, was read as a fact of its own; reading resumes after the whole statement."""
    loaded = store.load_text(NESTED, "CxOnto", on_error="report")
    assert [(p["line"], p["column"], p["kind"]) for p in loaded.problems] == [(3, 8, "parse")]
    assert len(loaded.handles) == 2
    assert store.query("(p a)", "CxOnto") == [{}] and store.query("(s d)", "CxOnto") == [{}]
    assert store.query("(q b)", "CxOnto") == [] and store.query("(r c)", "CxOnto") == []


CLEAN = """(subclass Dog Mammal)
(implies (and (subclass ?x ?y) (instance ?z ?x)) (instance ?z ?y))
(implies (instance ?z Dog) (and (barks ?z) (pet ?z)))
(instance Rex Dog)
(not (instance Rex Cat))
(lengthOf Rod (MeasureFn 3 Meter))
(instance Rex Dog)
"""


def _everything(kb) -> list[tuple]:
    return sorted(
        (s.text, s.context, s.derived, kb.believed(s.handle))
        for ctx in ("CxOnto",)
        for s in kb.sentexes_in(ctx, limit=1000)
    )


def test_report_and_all_or_nothing_make_the_same_store_of_a_clean_file(new_location):
    import koinii

    with koinii.open_kb(new_location()) as one, koinii.open_kb(new_location()) as other:
        whole = one.load_text(CLEAN, "CxOnto")
        reported = other.load_text(CLEAN, "CxOnto", on_error="report")
        assert reported.problems == [] and reported.handles == whole.handles
        assert _everything(one) == _everything(other) and len(_everything(one)) > 8
        assert one.stats() == other.stats()


def test_a_report_leaves_out_a_rule_that_derives_past_the_limit_and_loads_the_rest(
    new_location,
):
    """A refusal that comes only when the whole write settles (`derivation-limit`) is
    not one sentence's: the load is undone, the facts loaded, then each rule alone — and
    the refusal names the rule that was firing when the limit ran out."""
    import koinii

    with koinii.open_kb(new_location(), max_derivations=50) as kb:
        text = "\n".join(f"(n N{i})" for i in range(60)) + "\n(implies (n ?x) (m ?x))\n(k Z)\n"
        loaded = kb.load_text(text, "CxOnto", on_error="report")
        assert [(p["line"], p["kind"]) for p in loaded.problems] == [(61, "derivation-limit")]
        assert "while firing the rule (implies (n ?x) (m ?x))" in loaded.problems[0]["message"]
        assert kb.query("(k Z)", "CxOnto") == [{}] and kb.query("(m ?x)", "CxOnto") == []
        assert len(kb.query("(n ?x)", "CxOnto")) == 60


def test_a_limit_run_out_while_a_rule_fires_names_the_rule(kb):
    kb.edit(add=[(f"(n N{i})", "CxOnto") for i in range(30)])
    kb.assert_("(implies (n ?x) (m ?x))", "CxOnto")
    kb.max_derivations = 10
    with pytest.raises(Refused) as refusal:
        kb.edit(add=[(f"(n M{i})", "CxOnto") for i in range(30)])
    assert refusal.value.kind == "derivation-limit"
    assert refusal.value.data["rule_text"] == "(implies (n ?x) (m ?x))"
    assert "while firing the rule (implies (n ?x) (m ?x))" in refusal.value.message
    # which join, and how far the rule got: no budget here, so no candidates counted
    assert refusal.value.data["join"] == {"from": "(n ?x)", "with": [], "firings": 11}
