"""Matching a pattern against a stored sentence (kb/index.py): the matcher a large scan
prepares once answers exactly as `match` does, binding for binding and in the same order."""

from hypothesis import given, settings
from hypothesis import strategies as st

from koinii import Sym, Var
from koinii.kb.index import match, matcher

SYMBOLS = [Sym("p"), Sym("A"), Sym("B")]
VARIABLES = [Var("x"), Var("y"), Var("z")]
VALUES = [*SYMBOLS, 1, 1.0, True, "A", (Sym("f"), Sym("A")), Var("x")]

patterns = st.lists(st.sampled_from(SYMBOLS + VARIABLES), min_size=0, max_size=4).map(
    lambda rest: (Sym("p"), *rest)
)
values = st.one_of(
    st.lists(st.sampled_from(VALUES), min_size=0, max_size=4).map(lambda rest: (Sym("p"), *rest)),
    st.sampled_from([Sym("A"), 1, (Sym("q"), Sym("A"))]),
)
bindings = st.dictionaries(st.sampled_from(VARIABLES), st.sampled_from(VALUES), max_size=2)


def shaped_like(pattern):
    """Sentences of the pattern's length: each symbol kept or not, any value elsewhere."""
    items = [st.sampled_from([p, *VALUES] if type(p) is Sym else VALUES) for p in pattern[1:]]
    return st.tuples(st.just(Sym("p")), *items)


@settings(max_examples=500, deadline=None)
@given(patterns, bindings, st.data())
def test_a_prepared_matcher_is_match(pattern, binding, data):
    candidates = data.draw(st.lists(st.one_of(values, shaped_like(pattern)), max_size=8))
    prepared = matcher(pattern, binding)
    for value in candidates:
        expected = match(pattern, value, binding)
        got = prepared(value)
        if expected is None:
            assert got is None
        else:
            assert got is not None
            assert list(got.items()) == list(expected.items())
            assert (got is binding) == (expected is binding)
            assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


def test_a_pattern_with_a_compound_or_a_quotation_is_left_to_match():
    quoted = (Sym("p"), (Sym("quote"), (Sym("q"), Var("x"))))
    compound = (Sym("p"), (Sym("f"), Var("x")))
    assert matcher(quoted, {})(quoted) == {}
    assert matcher(compound, {})((Sym("p"), (Sym("f"), Sym("A")))) == {Var("x"): Sym("A")}


ATOMS = ["(p)", "(p a)", "(p b)", "(p a b)", "(p b a)", "(q a)"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(ATOMS)), max_size=24))
def test_a_whole_functor_scan_finds_its_nodes_of_every_arity(steps):
    """A functor's index keeps no set of all its nodes (index.py, `FunctorIndex`): a
    pattern that binds nothing walks the first argument's table, and the nodes with no
    argument are held apart. Whatever was added and retracted, the scan finds exactly
    what is stored."""
    import koinii

    kb = koinii.open_kb(None)
    stored: dict[str, int] = {}
    for add, text in steps:
        if add and text not in stored:
            stored[text] = kb.assert_(text, "CxA")
        elif not add and text in stored:
            kb.retract(stored.pop(text))
    findex = kb._maintenance.index.by_functor.get(Sym("p"))
    mine = {t for t in stored if t.startswith("(p")}
    assert (findex.count if findex else 0) == len(mine)
    if findex is not None:
        assert sorted(n.handle for n in findex.every()) == sorted(stored[t] for t in mine)
    for pattern, arity in (("(p)", 0), ("(p ?x)", 1), ("(p ?x ?y)", 2)):
        found = {s.text for s in kb.sentexes_matching(pattern, "CxA")}
        assert found == {t for t in mine if len(t[1:-1].split()) - 1 == arity}


HUB_ATOMS = [f"(q A{i} B{j})" for i in range(4) for j in range(4)] + ["(q A0)", "(q)"]
HUB_CONTEXTS = ["CxA", "CxB", "CxC"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([True, True, True, False]),
            st.booleans(),
            st.sampled_from(HUB_CONTEXTS),
            st.sampled_from(HUB_ATOMS),
        ),
        min_size=60,
        max_size=200,
    )
)
def test_an_atoms_nodes_are_found_through_its_arguments(steps):
    """There is no table by atom (index.py, `Index`): an atom's nodes are found in its
    narrowest argument bucket — here each argument's buckets often hold more than SMALL
    nodes (a set). Whatever was added and retracted, in either polarity and context,
    `find`, `same_atom` and the atoms stored with both polarities agree with a walk over
    every stored node."""
    import koinii

    kb = koinii.open_kb(None)
    stored: dict[tuple, int] = {}
    for add, positive, ctx, text in steps:
        step = (positive, ctx, text)
        if add and step not in stored:
            stored[step] = kb.assert_(text if positive else f"(not {text})", ctx)
        elif not add and step in stored:
            kb.retract(stored.pop(step))
    index = kb._maintenance.index
    nodes = [n for n in index.by_handle.values() if n.atom[0] is Sym("q")]
    for text in HUB_ATOMS:
        atom = koinii.parse(text)
        mine = {n.handle for n in nodes if n.atom == atom}
        assert {n.handle for n in index.same_atom(atom, atom)} == mine
        for positive in (True, False):
            for ctx in HUB_CONTEXTS:
                found = index.find(atom, atom, ctx, positive)
                assert (found and found.handle) == stored.get((positive, ctx, text))
        sides = {n.positive for n in nodes if n.atom == atom}
        assert (atom in index.two_sided) == (sides == {True, False}), text
