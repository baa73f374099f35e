"""KIF in (issue 41): SUO-KIF's own forms read where the engine can say them, and each
form it cannot refused by a kind that names it — in process and over the wire, in both
error modes, and from the CLI. The samples are written here in SUMO's style (SUMO itself
is not shipped: its licence and size)."""

from __future__ import annotations

import pytest

from koinii import Refused, Sym

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

# Every construct the reader maps, each with a fact it should fire on.
MAPPED = """; SUMO's style: => and <=> rules, quantifiers, comments
(subclass Human Animal)
(=> (instance ?X Human) (instance ?X Animal))
(<=> (parent ?X ?Y) (child ?Y ?X))
(forall (?X) (=> (instance ?X Dog) (instance ?X Animal)))
(=>
   (and
      (instance ?X Human)
      (exists (?Y) (parent ?X ?Y)))
   (hasParent ?X))
(=> (parent ?X ?Y) (=> (instance ?X Human) (instance ?Y Human)))
(=> (instance ?X Dog) (and (barks ?X) (forall (?Z) (likes ?X ?X))))
(instance Ann Human)
(instance Rex Dog)
(parent Ann Bob)
(child Cid Dan)
"""

# One statement of each form the engine cannot say, with the kind it is refused by.
REFUSED = [
    ("(=> (instance ?X Human) (exists (?M) (mother ?X ?M)))", "existential"),
    ("(exists (?T) (instance ?T Thing))", "existential"),
    ("(=> (forall (?Y) (p ?Y)) (q Ann))", "nested-quantifier"),
    ("(=> (not (exists (?Y) (p ?X ?Y))) (lonely ?X))", "nested-quantifier"),
    ("(holdsDuring Now (exists (?Y) (p ?Y)))", "nested-quantifier"),
    ("(=> (instance ?R Relation) (holds ?R @ROW))", "row-variable"),
    ("(=> (instance ?R Symmetric) (?R ?X ?Y))", "variable-predicate"),
    ("(=> (or (p ?X) (q ?X)) (r ?X))", "unsupported-connective"),
    ("(forall ?X (p ?X))", "shape"),
    ("(=> (p ?X) (q ?Y))", "not-range-restricted"),
    ("(equal (SineFn (ArcSineFn ?X)) ?X)", "not-ground"),
]


@pytest.fixture
def store(request, kb, start_daemon):
    """The KB, or (where a test asks for "wire") a client of a daemon: the reader runs in the
    engine either way, and each refusal kind crosses the wire intact (tests/test_wire.py)."""
    if getattr(request, "param", "local") == "local":
        return kb
    return start_daemon().client()


@pytest.mark.parametrize("store", ["local", "wire"], indirect=True)
def test_kifs_rules_quantifiers_and_nesting_are_read_and_fire(store):
    loaded = store.load_text(MAPPED, "CxSumo", format="kif")
    assert loaded.problems == []
    assert {b["?c"] for b in store.query("(instance Ann ?c)", "CxSumo")} == {
        Sym("Human"),
        Sym("Animal"),
    }
    assert store.query("(instance Rex Animal)", "CxSumo") == [{}]  # forall dropped
    assert store.query("(child Bob Ann)", "CxSumo") == [{}]  # <=>, one way
    assert store.query("(parent Dan Cid)", "CxSumo") == [{}]  # and the other
    assert store.query("(hasParent ?x)", "CxSumo") == [{"?x": Sym("Ann")}]  # exists opened
    assert store.query("(instance Bob Human)", "CxSumo") == [{}]  # nested => curried
    assert store.query("(barks Rex)", "CxSumo") == [{}]  # a conjunctive conclusion
    assert store.query("(likes Rex Rex)", "CxSumo") == [{}]
    handles = [h for x in loaded.handles for h in (x if isinstance(x, list) else [x])]
    texts = {store.sentex(h).text for h in handles}
    assert "(implies (parent ?X ?Y) (child ?Y ?X))" in texts
    assert "(implies (child ?Y ?X) (parent ?X ?Y))" in texts
    assert "(implies (and (instance ?X Human) (parent ?X ?Y_1)) (hasParent ?X))" in texts
    assert "(implies (and (parent ?X ?Y) (instance ?X Human)) (instance ?Y Human))" in texts


@pytest.mark.parametrize("statement, kind", REFUSED)
def test_each_form_the_engine_cannot_say_is_refused_by_name(store, statement, kind):
    seq = store.seq
    with pytest.raises(Refused) as refusal:
        store.load_text("(p Ann)\n" + statement + "\n", "CxSumo", format="kif")
    assert refusal.value.kind == kind, refusal.value.message
    assert store.seq == seq and store.query("(p Ann)", "CxSumo") == []
    loaded = store.load_text(
        "(p Ann)\n" + statement + "\n(q Bob)\n", "CxSumo", format="kif", on_error="report"
    )
    assert [(p["line"], p["kind"]) for p in loaded.problems] == [(2, kind)]
    assert store.query("(p Ann)", "CxSumo") == [{}] and store.query("(q Bob)", "CxSumo") == [{}]


def test_a_refusal_says_what_to_write_instead(kb):
    loaded = kb.load_text(
        "\n".join(s for s, _ in REFUSED[:7]), "CxSumo", format="kif", on_error="report"
    )
    messages = {p["kind"]: p["message"] for p in loaded.problems}
    assert "(mother ?x (MotherFn ?x))" in messages["existential"]
    assert "restate it as a rule" in messages["nested-quantifier"]
    assert "once for each number of arguments" in messages["row-variable"]
    assert "once for each predicate" in messages["variable-predicate"]
    assert all("(line " in m for m in messages.values())


def test_one_direction_of_a_biconditional_loads_when_the_other_cannot(kb):
    """(<=> A (exists …)): A ⇒ ∃ is refused, ∃ ⇒ A is a rule (its ?Y renamed apart)."""
    loaded = kb.load_text(
        "(<=> (married ?X) (exists (?Y) (spouse ?X ?Y)))\n(spouse Ann Bob)\n",
        "CxSumo",
        format="kif",
        on_error="report",
    )
    assert [(p["line"], p["kind"]) for p in loaded.problems] == [(1, "existential")]
    assert kb.query("(married ?x)", "CxSumo") == [{"?x": Sym("Ann")}]


def test_without_the_kif_format_kifs_forms_stay_refused_and_say_how_to_read_them(kb):
    loaded = kb.load_text(
        "(=> (p ?X) (q ?X))\n(<=> (p ?X) (q ?X))\n(p @ROW)\n", "CxSumo", on_error="report"
    )
    assert [p["kind"] for p in loaded.problems] == [
        "unsupported-connective",
        "unsupported-connective",
        "parse",
    ]
    assert "format 'kif'" in loaded.problems[0]["message"]
    for bad in ("owl", ["kif"], 5):
        with pytest.raises(Refused) as refusal:
            kb.load_text("(p a)", "CxSumo", format=bad)
        assert refusal.value.kind == "bad-option"
        assert refusal.value.data["known"] == ["kif", "koinii"]


def test_the_cli_loads_kif(tmp_path):
    from click.testing import CliRunner

    from koinii.cli import main

    path = tmp_path / "sample.kif"
    path.write_text(MAPPED + "(exists (?T) (instance ?T Thing))\n", encoding="utf-8")
    db = str(tmp_path / "k.db")
    env = {"KOINII_URL": None, "KOINII_DB": None, "KOINII_TOKEN": None}
    cli = CliRunner()
    loaded = cli.invoke(
        main, ["load", str(path), "-c", "CxSumo", "--format", "kif", "--db", db], env=env
    )
    assert loaded.exit_code == 1, loaded.output  # one statement refused
    assert f"{path}:17:1: existential: " in loaded.stdout
    found = cli.invoke(
        main, ["query", "(hasParent ?x)", "-c", "CxSumo", "--json", "--db", db], env=env
    )
    assert found.exit_code == 0 and "Ann" in found.stdout


def test_a_bad_format_over_the_wire_is_refused_not_a_crash(start_daemon):
    client = start_daemon().client()
    for bad in ("owl", ["kif"], 5):
        with pytest.raises(Refused) as refusal:
            client.load_text("(p a)", "CxSumo", format=bad)
        assert refusal.value.kind in ("bad-option", "bad-request"), refusal.value
    assert client.query("(p a)", "CxSumo") == []
