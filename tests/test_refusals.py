"""Refusals: every bad input of engine.md is refused with its kind and changes nothing.

"Changes nothing" is checked the same way everywhere: `kb.stats()` and `kb.seq` are
equal before and after, the change log has no entry past the old seq, and a watcher
registered for every change saw no event (engine.md §4, §8, §11).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap

import pytest

import koinii
from koinii import Refused, Sym, Var

KIB = 1024


# --- fixtures and helpers -----------------------------------------------------------------


# A refusal is the engine's, above the store: in memory and on SQLite; that a refused
# edit leaves the store as it was is also checked on PostgreSQL (its own transactions).
pytestmark = pytest.mark.backends("memory", "sqlite")
ROLLBACK = pytest.mark.backends("memory", "sqlite", "postgres")


@pytest.fixture
def kb(new_location):
    """A KB with a small hierarchy, an arity declaration and one fact.

    CxC sees CxB sees CxA; CxA declares `(arity likes 2)`; CxOther sees none of them.
    """
    with koinii.open_kb(new_location()) as opened:
        opened.edit(
            add=[
                ("(genlCx CxB CxA)", "CxUniverse"),
                ("(genlCx CxC CxB)", "CxUniverse"),
                ("(arity likes 2)", "CxA"),
                ("(likes Alice Bob)", "CxA"),
            ]
        )
        yield opened


def state(kb) -> tuple:
    return kb.stats(), kb.seq


def refused_unchanged(kb, kind: str, call, *args, **kwargs) -> Refused:
    """Run `call`, expect a refusal of `kind`, and check that nothing changed."""
    before = state(kb)
    events = []
    token = kb.watch(events.append)
    try:
        with pytest.raises(Refused) as caught:
            call(*args, **kwargs)
    finally:
        kb.unwatch(token)
    assert caught.value.kind == kind, caught.value
    assert state(kb) == before
    assert kb.changes(before[1])["entries"] == []
    assert events == []
    return caught.value


def nested(depth: int) -> str:
    return "(f " * depth + "1" + ")" * depth


def stored(kb, pattern: str) -> list:
    """Every stored sentex matching `pattern`, believed or not, in any context."""
    return kb.sentexes_matching(pattern, "CxEverything")


# --- the bad inputs -----------------------------------------------------------------------

# (sentence, context, kind): each must be refused by assert_, check, edit and check_edit.
BAD_SENTENCES = [
    pytest.param("(likes Alice Bob", "CxA", "parse", id="unclosed-paren"),
    pytest.param("(likes Alice Bob))", "CxA", "parse", id="extra-close-paren"),
    pytest.param("likes Alice Bob)", "CxA", "parse", id="close-without-open"),
    pytest.param("(likes Alice #Bob)", "CxA", "parse", id="garbage"),
    pytest.param("()", "CxA", "shape", id="empty-list"),
    pytest.param("(likes Alice ())", "CxA", "shape", id="empty-list-inside"),
    pytest.param("(note " + nested(64) + ")", "CxA", "shape", id="nesting-65"),
    pytest.param('(note "' + "x" * (1024 * KIB) + '")', "CxA", "shape", id="1MiB-string"),
    pytest.param('("likes" Alice Bob)', "CxA", "shape", id="string-functor"),
    pytest.param("(42 Alice Bob)", "CxA", "shape", id="number-functor"),
    pytest.param("(?p Alice Bob)", "CxA", "shape", id="variable-functor"),
    pytest.param("((likes) Alice Bob)", "CxA", "shape", id="list-functor"),
    pytest.param("(Likes Alice Bob)", "CxA", "naming", id="CapitalCamel-functor"),
    pytest.param("(physical_object Alice Bob)", "CxA", "naming", id="type-with-two-args"),
    pytest.param("(likes Alice Bob)", "deploy", "naming", id="context-lowercase"),
    pytest.param("(likes Alice Bob)", "Deploy", "naming", id="context-without-Cx"),
    pytest.param("(likes ?who Bob)", "CxA", "not-ground", id="variable-in-fact"),
    pytest.param("(not (likes ?who Bob))", "CxA", "not-ground", id="variable-in-negated-fact"),
    pytest.param("(genlCx CxD CxD)", "CxUniverse", "not-well-formed", id="genlCx-self-edge"),
    pytest.param("(genlCx CxA CxB)", "CxUniverse", "not-well-formed", id="genlCx-2-cycle"),
    pytest.param("(genlCx CxA CxC)", "CxUniverse", "not-well-formed", id="genlCx-3-cycle"),
    pytest.param(
        "(genlCx CxUniverse CxX)", "CxUniverse", "not-well-formed", id="genlCx-under-universe"
    ),
    pytest.param(
        "(about (sentexHandle 99999) Alice)", "CxA", "unknown-handle", id="unknown-sentexHandle"
    ),
    pytest.param("(except (sentexHandle 99999))", "CxA", "unknown-handle", id="unknown-except"),
    pytest.param("(likes Alice Bob Carol)", "CxA", "arity", id="arity-where-declared"),
    pytest.param("(likes Alice Bob Carol)", "CxC", "arity", id="arity-seen-through-genlCx"),
    pytest.param(
        "(implies (likes ?x ?y) (friends ?x ?z))",
        "CxA",
        "not-range-restricted",
        id="unbound-consequent",
    ),
    pytest.param(
        "(implies (likes ?x ?y) (and (friends ?x ?y) (knows ?y ?z)))",
        "CxA",
        "not-range-restricted",
        id="unbound-in-second-conjunct",
    ),
    pytest.param("(likes Carol Dave)", "CxEverything", "read-only-context", id="CxEverything"),
    pytest.param("(likes Carol Dave)", "?ctx", "read-only-context", id="variable-context"),
    pytest.param("(likes Carol Dave)", Var("ctx"), "read-only-context", id="Var-context"),
]

# Python terms (not text) that break the shape limits.
BAD_TERMS = [
    pytest.param((), "shape", id="empty-tuple"),
    pytest.param(("likes", Sym("Alice")), "shape", id="str-functor"),
    pytest.param((1.5, Sym("Alice")), "shape", id="float-functor"),
    pytest.param((Var("p"), Sym("Alice")), "shape", id="Var-functor"),
    pytest.param(((Sym("likes"),), Sym("Alice")), "shape", id="tuple-functor"),
    pytest.param((Sym("note"), "x" * (1024 * KIB)), "shape", id="1MiB-str"),
]


@pytest.mark.parametrize(("sentence", "context", "kind"), BAD_SENTENCES)
def test_assert_refuses_a_bad_sentence_and_stores_nothing(kb, sentence, context, kind):
    refused_unchanged(kb, kind, kb.assert_, sentence, context)


@pytest.mark.parametrize(("term", "kind"), BAD_TERMS)
def test_assert_refuses_a_bad_term_and_stores_nothing(kb, term, kind):
    refused_unchanged(kb, kind, kb.assert_, term, "CxA")


@pytest.mark.parametrize(("sentence", "context", "kind"), BAD_SENTENCES)
def test_check_reports_the_same_kind_and_stores_nothing(kb, sentence, context, kind):
    before = state(kb)
    problems = kb.check(sentence, context)
    assert [(p["kind"], p["in"], p["index"]) for p in problems] == [(kind, "add", 0)]
    assert isinstance(problems[0]["message"], str) and problems[0]["message"]
    assert state(kb) == before


@ROLLBACK
@pytest.mark.parametrize(("sentence", "context", "kind"), BAD_SENTENCES)
def test_an_edit_with_one_bad_entry_stores_none_of_it(kb, sentence, context, kind):
    add = [
        ("(likes Carol Dave)", "CxA"),
        ("(likes Erin Frank)", "CxB"),
        (sentence, context),
        ("(likes Gina Hal)", "CxC"),
    ]
    refusal = refused_unchanged(kb, kind, kb.edit, add=add)
    assert refusal.data["rolled_back"] is True
    assert refusal.data["in"] == "add"
    assert refusal.data["index"] == 2
    for who in ("Carol", "Erin", "Gina"):
        assert stored(kb, f"(likes {who} ?y)") == []


@pytest.mark.parametrize(("sentence", "context", "kind"), BAD_SENTENCES)
def test_an_edit_of_terms_refuses_what_an_edit_of_text_does(kb, sentence, context, kind):
    from koinii.terms import parse

    try:
        term = parse(sentence)
    except Refused:
        pytest.skip("refused as text already, by the parser")
    # the same predicate and contexts written as terms first: a bulk load's short way
    # (`checks.plain`) is taken from then on, and must refuse all the same
    for where in ("CxA", "CxC", context):
        with contextlib.suppress(Refused):  # (a context no one may write to)
            kb.edit(add=[((Sym("likes"), Sym("Carol"), Sym("Dave")), where)])
    refused_unchanged(kb, kind, kb.edit, add=[(term, context)])


@pytest.mark.parametrize(("sentence", "context", "kind"), BAD_SENTENCES)
def test_check_edit_reports_the_bad_entry_by_index(kb, sentence, context, kind):
    before = state(kb)
    problems = kb.check_edit(
        add=[("(likes Carol Dave)", "CxA"), ("(likes Erin Frank)", "CxB"), (sentence, context)]
    )
    assert [(p["kind"], p["in"], p["index"]) for p in problems] == [(kind, "add", 2)]
    assert state(kb) == before
    assert stored(kb, "(likes Carol ?y)") == []


# --- naming: the message names the symbol and the role -------------------------------------


def test_a_naming_refusal_names_the_symbol():
    with koinii.open_kb(None) as kb:
        refusal = refused_unchanged(
            kb, "naming", kb.assert_, "(UsesDatabase ProdCluster Pg)", "CxA"
        )
        assert "UsesDatabase" in refusal.message
        refusal = refused_unchanged(
            kb, "naming", kb.assert_, "(usesDatabase ProdCluster Pg)", "Deploy"
        )
        assert "Deploy" in refusal.message


def test_argument_symbols_may_take_any_role():
    with koinii.open_kb(None) as kb:
        handle = kb.assert_("(mentions CxDeploy ProdCluster usesDatabase physical_object)", "CxA")
        assert kb.believed(handle)


def test_a_type_with_one_argument_is_accepted():
    with koinii.open_kb(None) as kb:
        assert kb.believed(kb.assert_("(physical_object Rock)", "CxA"))


# --- genlCx ---------------------------------------------------------------------------------


def test_a_cycle_made_inside_one_batch_is_refused(kb):
    refusal = refused_unchanged(
        kb,
        "not-well-formed",
        kb.edit,
        add=[("(genlCx CxD CxE)", "CxUniverse"), ("(genlCx CxE CxD)", "CxUniverse")],
    )
    assert refusal.data["index"] == 1
    assert not kb.sees("CxD", "CxE")


def test_an_acyclic_edge_beside_the_chain_is_accepted(kb):
    kb.assert_("(genlCx CxC CxA)", "CxUniverse")  # redundant, not a cycle
    assert kb.sees("CxC", "CxA")


# --- arity ----------------------------------------------------------------------------------


def test_arity_is_not_enforced_where_the_declaration_is_not_seen(kb):
    handle = kb.assert_("(likes Alice Bob Carol)", "CxOther")
    assert kb.sentex(handle).context == "CxOther"
    assert kb.believed(handle)


def test_the_declared_arity_is_accepted(kb):
    assert kb.believed(kb.assert_("(likes Carol Dave)", "CxC"))


# --- edit: where the refusal is --------------------------------------------------------------


def test_an_edit_refusal_names_the_index_of_the_bad_add(kb):
    refusal = refused_unchanged(
        kb,
        "not-ground",
        kb.edit,
        add=[
            ("(likes Carol Dave)", "CxA"),
            ("(likes Erin Frank)", "CxA"),
            ("(likes Gina Hal)", "CxA"),
            ("(likes ?x Hal)", "CxA"),
            ("(likes Ida Jon)", "CxA"),
        ],
    )
    assert refusal.data == {**refusal.data, "rolled_back": True, "in": "add", "index": 3}


@ROLLBACK
def test_a_bad_remove_entry_rolls_back_the_adds(kb):
    (fact,) = [s.handle for s in kb.sentexes_matching("(likes Alice Bob)", "CxA")]
    refusal = refused_unchanged(
        kb, "bad-handle", kb.edit, add=[("(likes Carol Dave)", "CxA")], remove=[fact, -3]
    )
    assert refusal.data["rolled_back"] is True
    assert refusal.data["in"] == "remove"
    assert refusal.data["index"] == 1
    assert stored(kb, "(likes Carol Dave)") == []
    assert kb.believed(fact)


@pytest.mark.parametrize("handle", [-3, 0, "7", 1.5, None])
def test_check_edit_reports_a_bad_remove_entry(kb, handle):
    before = state(kb)
    problems = kb.check_edit(add=[("(likes Carol Dave)", "CxA")], remove=[handle])
    assert [(p["kind"], p["in"], p["index"]) for p in problems] == [("bad-handle", "remove", 0)]
    assert state(kb) == before


def test_an_unknown_option_in_an_edit_entry_is_refused(kb):
    refusal = refused_unchanged(
        kb,
        "unknown-option",
        kb.edit,
        add=[
            ("(likes Carol Dave)", "CxA"),
            ("(likes Erin Frank)", "CxA", {"strenght": "monotonic"}),
        ],
    )
    assert refusal.data["rolled_back"] is True
    assert refusal.data["in"] == "add"
    assert refusal.data["index"] == 1
    assert stored(kb, "(likes Carol Dave)") == []


def test_check_edit_reports_an_unknown_option(kb):
    before = state(kb)
    problems = kb.check_edit(add=[("(likes Carol Dave)", "CxA", {"colour": "red"})])
    assert [(p["kind"], p["in"], p["index"]) for p in problems] == [("unknown-option", "add", 0)]
    assert state(kb) == before


def test_known_options_in_an_edit_entry_are_accepted(kb):
    edited = kb.edit(
        add=[
            (
                "(likes Carol Dave)",
                "CxA",
                {"strength": "monotonic", "creator": "me", "provenance": {"via": "test"}},
            )
        ]
    )
    (handle,) = edited.handles
    sentex = kb.sentex(handle)
    assert sentex.strength == "monotonic"
    assert sentex.provenance["creator"] == "me"
    assert sentex.provenance["via"] == "test"


def test_check_edit_lists_every_problem_of_the_batch(kb):
    problems = kb.check_edit(
        add=[
            ("(likes Carol Dave)", "CxA"),
            ("(Likes Carol Dave)", "CxA"),
            ("(likes ?x Dave)", "CxA"),
        ],
        remove=[0],
    )
    assert [(p["kind"], p["in"], p["index"]) for p in problems] == [
        ("naming", "add", 1),
        ("not-ground", "add", 2),
        ("bad-handle", "remove", 0),
    ]


# --- dry runs of good input -------------------------------------------------------------------


def test_check_returns_nothing_for_good_input_and_stores_nothing(kb):
    before = state(kb)
    assert kb.check("(likes Carol Dave)", "CxC") == []
    assert kb.check("(implies (likes ?x ?y) (knows ?x ?y))", "CxA") == []
    assert kb.check("(genlCx CxD CxC)", "CxUniverse") == []
    assert state(kb) == before
    assert stored(kb, "(likes Carol Dave)") == []
    assert not kb.sees("CxD", "CxC")


def test_check_edit_returns_nothing_for_a_good_batch_and_stores_nothing(kb):
    (fact,) = [s.handle for s in kb.sentexes_matching("(likes Alice Bob)", "CxA")]
    before = state(kb)
    assert (
        kb.check_edit(
            add=[("(likes Carol Dave)", "CxA"), ("(likes Erin Frank)", "CxB")], remove=[fact]
        )
        == []
    )
    assert state(kb) == before
    assert kb.believed(fact)
    assert stored(kb, "(likes Carol Dave)") == []


def test_check_judges_against_the_kb_as_it_stands(kb):
    # the declaration is what makes the 3-argument sentence bad, not the sentence itself
    assert kb.check("(likes Alice Bob Carol)", "CxOther") == []
    assert [p["kind"] for p in kb.check("(likes Alice Bob Carol)", "CxC")] == ["arity"]


# --- writes to query contexts ----------------------------------------------------------------


@pytest.mark.parametrize("context", ["CxEverything", Sym("CxEverything"), "?ctx", Var("where")])
def test_a_write_to_a_query_context_is_refused(kb, context):
    refused_unchanged(kb, "read-only-context", kb.assert_, "(likes Carol Dave)", context)
    refused_unchanged(kb, "read-only-context", kb.edit, add=[("(likes Carol Dave)", context)])


# --- retract ----------------------------------------------------------------------------------


@pytest.mark.parametrize("handle", ["x", 0, -3, 1.5, None, "12"])
def test_retract_of_something_that_is_not_a_handle_is_bad_handle(kb, handle):
    refused_unchanged(kb, "bad-handle", kb.retract, handle)


def test_retract_of_a_handle_never_issued_is_unknown_handle(kb):
    refusal = refused_unchanged(kb, "unknown-handle", kb.retract, 10**9)
    assert refusal.data == {"handle": 10**9, "issued": False}
    assert "handles come from assert" in refusal.message


def test_retract_sent_again_after_it_landed_is_unknown_handle_saying_it_was_issued(kb):
    handle = kb.assert_("(likes Carol Dave)", "CxA")
    kb.retract(handle)
    refusal = refused_unchanged(kb, "unknown-handle", kb.retract, handle)
    assert refusal.data == {"handle": handle, "issued": True}


@ROLLBACK
def test_an_edit_removing_an_unknown_handle_is_refused_and_rolled_back(kb):
    refusal = refused_unchanged(
        kb, "unknown-handle", kb.edit, add=[("(likes Carol Dave)", "CxA")], remove=[10**9]
    )
    assert refusal.data["rolled_back"] is True and refusal.data["index"] == 0
    assert stored(kb, "(likes Carol Dave)") == []
    assert [p["kind"] for p in kb.check_edit(remove=[10**9])] == ["unknown-handle"]


def test_an_edit_may_name_one_handle_twice_or_what_its_removals_took(kb):
    fact = kb.assert_("(likes Carol Dave)", "CxA")
    rule = kb.assert_("(implies (likes ?x ?y) (knows ?x ?y))", "CxA")
    derived = kb.sentexes_matching("(knows Carol Dave)", "CxA")[0].handle
    edited = kb.edit(remove=[fact, fact, derived])  # the derived one went with its fact
    assert edited.removed_sentexes == 2
    assert kb.sentex(rule) is not None


# --- provenance -------------------------------------------------------------------------------


def test_a_provenance_naming_principal_is_refused(kb):
    refused_unchanged(
        kb,
        "reserved-provenance",
        kb.assert_,
        "(likes Carol Dave)",
        "CxA",
        provenance={"principal": "Mallory"},
    )
    refusal = refused_unchanged(
        kb,
        "reserved-provenance",
        kb.edit,
        add=[
            ("(likes Erin Frank)", "CxA"),
            ("(likes Carol Dave)", "CxA", {"provenance": {"principal": "M"}}),
        ],
    )
    assert refusal.data["index"] == 1
    assert stored(kb, "(likes Erin Frank)") == []


# --- one writer per SQLite file ----------------------------------------------------------------

CHILD_OPEN = textwrap.dedent(
    """
    import sys
    import koinii
    try:
        kb = koinii.open_kb(sys.argv[1])
    except koinii.Refused as refusal:
        print("refused", refusal.kind, flush=True)
        sys.exit(0)
    print("opened", flush=True)
    if len(sys.argv) > 2:      # hold the store until the parent closes our stdin
        sys.stdin.read()
    kb.close()
    """
)


def test_a_second_writer_in_the_same_process_is_store_locked(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as first:
        first.assert_("(likes Alice Bob)", "CxA")
        before = state(first)
        with pytest.raises(Refused) as caught:
            koinii.open_kb(path)
        assert caught.value.kind == "store-locked"
        assert state(first) == before
        assert first.believed(first.assert_("(likes Carol Dave)", "CxA"))  # still the writer
    with koinii.open_kb(path) as again:  # closed: the store can be opened again
        assert again.sentexes_matching("(likes ?x ?y)", "CxA") != []


def test_a_second_writer_in_another_process_is_store_locked(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as first:
        first.assert_("(likes Alice Bob)", "CxA")
        before = state(first)
        child = subprocess.run(
            [sys.executable, "-c", CHILD_OPEN, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.stdout.split() == ["refused", "store-locked"], child.stderr
        assert state(first) == before
    child = subprocess.run(
        [sys.executable, "-c", CHILD_OPEN, str(path)], capture_output=True, text=True, timeout=60
    )
    assert child.stdout.split() == ["opened"], child.stderr


def test_this_process_is_store_locked_while_another_process_writes(tmp_path):
    path = tmp_path / "kb.sqlite"
    with koinii.open_kb(path) as kb:
        kb.assert_("(likes Alice Bob)", "CxA")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_OPEN, str(path), "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().split() == ["opened"]
        with pytest.raises(Refused) as caught:
            koinii.open_kb(path)
        assert caught.value.kind == "store-locked"
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    with koinii.open_kb(path) as kb:
        assert [s.text for s in kb.sentexes_matching("(likes ?x ?y)", "CxA")] == [
            "(likes Alice Bob)"
        ]
