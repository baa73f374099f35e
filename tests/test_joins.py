"""A rule's compiled join derives exactly what the general join does (kb/joins.py).

Flat rules of one or two literals are compiled (`_Flat`: probes, checks, an itemgetter);
every other rule joins through `index.solve` (`_General`). A hypothesis property drives
the same writes — facts with values Python calls equal (1, 1.0, true), function terms,
negations, and flat rules with constants and repeated variables, in any order, across
two contexts — through a KB with the compiled joins and through one where every rule
joins generally, and the two must hold the same sentexes, beliefs and justifications.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import koinii
from koinii.kb import joins

VALUES = ["Ann", "Bob", "1", "true", "1.0", "(SizeFn 3)"]
VARIABLES = ["?x", "?y"]
PREDICATES = {"likes": 2, "big": 1}
CONTEXTS = ["CxA", "CxB"]  # CxB sees CxA

# few values and variables, so that joins meet: repeated variables, values equal but of
# another type, a node filling both antecedents of a rule
arguments = st.sampled_from(VARIABLES * 3 + VALUES[:2])
values = st.sampled_from(VALUES[:3] * 3 + VALUES[3:])


@st.composite
def literals(draw) -> str:
    predicate = draw(st.sampled_from(sorted(PREDICATES)))
    args = [draw(arguments) for _ in range(PREDICATES[predicate])]
    atom = f"({predicate} {' '.join(args)})"
    return atom if draw(st.integers(0, 3)) else f"(not {atom})"


@st.composite
def rules(draw) -> str:
    body = draw(st.lists(literals(), min_size=1, max_size=2))
    bound = sorted({a for lit in body for a in lit.replace(")", " ").split() if a[0] == "?"})
    predicate = draw(st.sampled_from(sorted(PREDICATES)))
    pool = st.sampled_from(VALUES[:3] + bound)
    head = f"({predicate} {' '.join(draw(pool) for _ in range(PREDICATES[predicate]))})"
    antecedent = body[0] if len(body) == 1 else f"(and {' '.join(body)})"
    return f"(implies {antecedent} {head})"


@st.composite
def facts(draw) -> str:
    predicate = draw(st.sampled_from(sorted(PREDICATES)))
    atom = f"({predicate} {' '.join(draw(values) for _ in range(PREDICATES[predicate]))})"
    return atom if draw(st.booleans()) else f"(not {atom})"


# each write an edit of one or more sentences, so several new nodes wait to fire at once
writes = st.lists(
    st.lists(st.tuples(st.one_of(rules(), facts(), facts()), st.sampled_from(CONTEXTS)),
             min_size=1, max_size=5),
    min_size=1,
    max_size=10,
)  # fmt: skip


def _general(antecedents, consequent):
    return tuple(joins._General(antecedents, consequent, i) for i in range(len(antecedents)))


def _held(kb: koinii.KB) -> tuple[set, list]:
    """What the KB holds, by content; the justifications as a sorted list, so that one
    made twice shows."""
    nodes = {
        (n.full_text, n.context, n.premise, n.believed)
        for n in kb._index.by_handle.values()
        if n.context != "CxCore"
    }
    justifications = sorted(
        (j.conclusion.full_text, j.conclusion.context, j.rule.text,
         tuple(a.full_text for a in j.antecedents))
        for n in kb._index.by_handle.values()
        for j in n.justs or ()
    )  # fmt: skip
    return nodes, justifications


def _run(sequence) -> tuple[set, list]:
    kb = koinii.open_kb()
    kb.assert_("(genlCx CxB CxA)", "CxUniverse")
    for batch in sequence:
        try:
            kb.edit(add=batch)
        except koinii.Refused as refusal:  # (a rule with an unbound consequent variable)
            assert refusal.kind == "not-range-restricted", refusal
    return _held(kb)


@settings(max_examples=200, deadline=None)
@given(sequence=writes)
def test_a_compiled_join_derives_what_the_general_join_derives(sequence):
    compiled = _run(sequence)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(joins, "prepare", _general)
        general = _run(sequence)
    assert compiled == general


def test_flat_rules_of_one_or_two_literals_are_compiled_and_others_not():
    def kinds(rule: str) -> list[str]:
        kb = koinii.open_kb()
        handle = kb.assert_(rule, "CxA")
        [compiled] = [r for n, r in kb._rules.items() if n.handle == handle]
        return [type(j).__name__ for j in compiled.joins]

    assert kinds("(implies (and (likes ?x ?y) (owns ?y ?z)) (owns ?x ?z))") == ["_Flat"] * 2
    assert kinds("(implies (big ?x) (likes ?x Ann))") == ["_Flat"]
    assert kinds("(implies (likes ?x (SizeFn ?y)) (big ?x))") == ["_General"]
    three = "(implies (and (likes ?x ?y) (likes ?y ?z) (likes ?z ?x)) (big ?x))"
    assert kinds(three) == ["_General"] * 3


# --- what each part of a compiled join is for ---------------------------------------------


def _justifications(kb: koinii.KB, sentence: str, ctx: str = "CxA") -> int:
    found = kb.sentexes_matching(sentence, ctx)
    return sum(len(kb.why(s.handle)["justifications"]) for s in found)


def test_two_new_facts_that_fill_a_rule_together_fire_it_once(kb):
    kb.assert_("(implies (and (likes ?x ?y) (likes ?y ?x)) (big ?x))", "CxA")
    kb.edit(add=[("(likes Ann Bob)", "CxA"), ("(likes Bob Ann)", "CxA")])
    assert _justifications(kb, "(big Ann)") == 1 and _justifications(kb, "(big Bob)") == 1


def test_a_fact_that_fills_both_antecedents_fires_the_rule_once(kb):
    kb.assert_("(implies (and (likes ?x ?y) (likes ?y ?x)) (big ?x))", "CxA")
    kb.assert_("(likes Ann Ann)", "CxA")
    assert _justifications(kb, "(big Ann)") == 1


def test_a_candidate_must_agree_with_every_bound_argument(kb):
    kb.assert_("(implies (and (likes ?x ?y) (likes ?y ?x)) (big ?x))", "CxA")
    kb.edit(add=[("(likes Ann Bob)", "CxA"), ("(likes Bob Carl)", "CxA")])
    assert kb.query("(big ?x)", "CxA") == []


def test_a_variable_repeated_in_the_joined_literal_binds_one_value(kb):
    kb.assert_("(implies (and (big ?x) (likes ?y ?y)) (likes ?x ?y))", "CxA")
    kb.edit(add=[("(big Ann)", "CxA"), ("(likes Bob Carl)", "CxA"), ("(likes 1 true)", "CxA")])
    assert kb.query("(likes Ann ?y)", "CxA") == []


def test_a_variable_repeated_in_the_new_nodes_literal_binds_one_value(kb):
    kb.assert_("(implies (likes ?x ?x) (big ?x))", "CxA")
    kb.edit(add=[("(likes Ann Bob)", "CxA"), ("(likes 1 true)", "CxA"), ("(likes 1 1.0)", "CxA")])
    assert kb.query("(big ?x)", "CxA") == []


def test_a_constant_matches_only_its_own_type(kb):
    kb.assert_("(implies (likes ?x 1) (big ?x))", "CxA")
    kb.edit(add=[("(likes Ann true)", "CxA"), ("(likes Bob 1.0)", "CxA"), ("(likes Cy 1)", "CxA")])
    assert kb.query("(big ?x)", "CxA") == [{"?x": koinii.Sym("Cy")}]
