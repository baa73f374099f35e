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
        for n in kb._maintenance.index.by_handle.values()
        if n.context != "CxCore"
    }
    justifications = sorted(
        (j.conclusion.full_text, j.conclusion.context, j.rule.text,
         tuple(a.full_text for a in j.antecedents))
        for n in kb._maintenance.index.by_handle.values()
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
        [compiled] = [r for n, r in kb._maintenance.rules.items() if n.handle == handle]
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


# --- what a new node is joined with: only what it can match (issue 41) -------------------


def _counting_joins(monkeypatch) -> list:
    """Every join asked for its firings, as (rule's consequent, position)."""
    asked: list = []
    for cls in (joins._General, joins._Flat):
        original = cls.firings

        def firings(
            self, index, node, waiting, budget, only_way=False, fits=None, _original=original
        ):
            asked.append(self.position)
            return _original(self, index, node, waiting, budget, only_way, fits)

        monkeypatch.setattr(cls, "firings", firings)
    return asked


def test_a_new_node_is_joined_only_with_the_rule_literals_it_can_fill(kb, monkeypatch):
    """SUMO's Merge.kif has a thousand rule literals of `instance`, most with a constant
    class: each new `instance` node was matched against all of them (3.9 million head
    matches, most of a 38 s firing). Now only those whose constants it holds are asked,
    with those of no constant and those of a function term of its shape."""
    rules = [f"(implies (instance ?x C{k}) (tagged ?x T{k}))" for k in range(50)]
    rules += [
        "(implies (and (instance ?x ?c) (likes ?x ?c)) (fond ?x))",  # no constant: always
        "(implies (instance ?q (MeasureFn ?n Meter)) (length ?q))",  # filed by its constant
        "(implies (instance ?q (PairFn ?a ?b)) (paired ?q))",  # by its function term's shape
    ]
    kb.edit(add=[(r, "CxA") for r in rules])
    asked = _counting_joins(monkeypatch)
    kb.assert_("(instance Ann C7)", "CxA")
    assert len(asked) == 2  # C7's rule and the one with no constant
    assert kb.query("(tagged Ann ?t)", "CxA") == [{"?t": koinii.Sym("T7")}]
    asked.clear()
    kb.assert_("(instance Q1 (PairFn 1 2))", "CxA")
    assert len(asked) == 2 and kb.query("(paired ?q)", "CxA") == [{"?q": koinii.Sym("Q1")}]
    asked.clear()
    kb.edit(add=[("(instance Q2 (MeasureFn 3 Meter))", "CxA"), ("(instance Q3 1)", "CxA")])
    assert len(asked) == 3 and kb.query("(length ?q)", "CxA") == [{"?q": koinii.Sym("Q2")}]
    kb.assert_("(implies (instance ?x 1.0) (float ?x))", "CxA")  # 1.0 is not 1
    kb.assert_("(instance Q4 1.0)", "CxA")
    assert kb.query("(float ?x)", "CxA") == [{"?x": koinii.Sym("Q4")}]


def test_a_function_term_not_yet_ground_finds_its_candidates_by_its_shape(kb):
    """(instance ?w (WeekFn ?n ?y)) joined after (instance ?yi ?y) bound ?y: the function
    term is not ground, so no argument table named it, and every `instance` node was a
    candidate (SUMO's Merge.kif: 64 s of a 118 s firing, for no conclusion)."""
    kb.edit(add=[(f"(instance I{k} C{k % 7})", "CxA") for k in range(300)])
    kb.edit(add=[("(instance W1 (WeekFn 1 Y2026))", "CxA"), ("(instance W2 (DayFn 1))", "CxA")])
    pattern = (
        koinii.Sym("instance"),
        koinii.Var("w"),
        (koinii.Sym("WeekFn"), koinii.Var("n"), koinii.Var("y")),
    )
    assert len(list(kb._maintenance.index.candidates(pattern, {}))) == 1
    bound = {koinii.Var("y"): koinii.Sym("Y2026")}
    assert len(list(kb._maintenance.index.candidates(pattern, bound))) == 1
    assert (
        list(
            kb._maintenance.index.candidates(
                pattern[:2] + ((koinii.Sym("YearFn"), koinii.Var("n")),), {}
            )
        )
        == []
    )
    kb.assert_(
        "(implies (and (instance ?yi ?y) (instance ?w (WeekFn ?n ?y))) (during ?w ?yi))", "CxA"
    )
    kb.assert_("(instance Now Y2026)", "CxA")
    assert kb.query("(during ?w Now)", "CxA") == [{"?w": koinii.Sym("W1")}]
    kb.retract(kb.sentexes_matching("(instance W1 ?c)", "CxA")[0].handle)
    assert len(list(kb._maintenance.index.candidates(pattern, {}))) == 0
