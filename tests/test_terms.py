"""Terms: the sentence syntax, its Python model and canonical text (engine.md §1).

Each test pins one promise of the spec: what `parse` reads, what `show` prints, that
the two are inverses, and which inputs are refused with which kind.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koinii import Refused, Sym, Var, parse, show
from koinii.terms import parse_all

KIB = 1024


def refusal(call, *args) -> Refused:
    with pytest.raises(Refused) as caught:
        call(*args)
    return caught.value


def same_term(a, b) -> bool:
    """Equality that, unlike `==`, keeps `1`, `1.0` and `True` apart (and -0.0 from 0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(same_term(x, y) for x, y in zip(a, b))
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def nested(depth: int) -> str:
    """`depth` lists, one inside the other: (f (f … (f 1) …))."""
    return "(f " * depth + "1" + ")" * depth


# --- the syntax elements ------------------------------------------------------------------


def test_a_list_is_a_tuple_whose_first_element_is_the_functor():
    assert parse("(usesDatabase ProdCluster Postgres)") == (
        Sym("usesDatabase"),
        Sym("ProdCluster"),
        Sym("Postgres"),
    )


def test_a_list_of_one_element_is_a_functor_alone():
    assert parse("(ping)") == (Sym("ping"),)


@pytest.mark.parametrize(
    "name", ["a", "Z", "dog", "ProdCluster", "usesDatabase", "x1", "a_b", "a-b", "physical_object"]
)
def test_a_symbol_reads_as_sym(name):
    term = parse(name)
    assert type(term) is Sym
    assert term is Sym(name)
    assert show(term) == name


@pytest.mark.parametrize("name", ["db", "x1", "Big", "a_b-c"])
def test_a_variable_is_a_question_mark_then_a_symbol(name):
    term = parse("?" + name)
    assert type(term) is Var
    assert term is Var(name)
    assert term is Var("?" + name)
    assert show(term) == "?" + name


def test_a_string_is_double_quoted():
    assert parse('"hello world"') == "hello world"
    assert type(parse('"hello world"')) is str


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (r'"say \"hi\""', 'say "hi"'),
        (r'"back\\slash"', "back\\slash"),
        (r'"line\nbreak"', "line\nbreak"),
        (r'"tab\there"', "tab\there"),
        (r'"\u00e9t\u00e9"', "été"),
        (r'"\ud83d\ude00"', "\U0001f600"),  # a surrogate pair is one character
        (r'"\/"', "/"),
        (r'"\r\b\f"', "\r\b\f"),
    ],
)
def test_a_string_takes_json_escapes(text, value):
    assert parse(text) == value


@pytest.mark.parametrize("value", ["été", "日本語", "\U0001f600 emoji", "Ωμέγα", "\u2028", "\x00"])
def test_a_string_holds_any_unicode(value):
    assert parse(show(value)) == value
    assert parse(show((Sym("note"), value))) == (Sym("note"), value)


@pytest.mark.parametrize(
    "value", [0, 1, -1, 42, 2**63, -(2**63) - 1, 10**100, -(10**300), 2**1000 + 1]
)
def test_an_integer_of_any_size_is_read_exactly(value):
    term = parse(str(value))
    assert type(term) is int
    assert term == value
    assert show(term) == str(value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5", 1.5),
        ("-2.25", -2.25),
        ("0.0", 0.0),
        ("1e10", 1e10),
        ("2.5E-3", 2.5e-3),
        ("-1.0e+2", -100.0),
    ],
)
def test_a_float_is_read_as_float(text, value):
    term = parse(text)
    assert type(term) is float
    assert term == value


def test_true_and_false_are_booleans_not_symbols():
    assert parse("true") is True
    assert parse("false") is False
    assert parse("(flag true false)") == (Sym("flag"), True, False)
    assert type(parse("(flag true)")[1]) is bool


def test_a_compound_in_argument_position_is_a_term():
    term = parse("(about (sentexHandle 42) (pair A (pair B C)))")
    assert term == (
        Sym("about"),
        (Sym("sentexHandle"), 42),
        (Sym("pair"), Sym("A"), (Sym("pair"), Sym("B"), Sym("C"))),
    )


def test_every_element_mixed_in_one_sentence():
    term = parse('(p Sym ?v "s" 7 -7.5 true false (f ?w))')
    assert term == (Sym("p"), Sym("Sym"), Var("v"), "s", 7, -7.5, True, False, (Sym("f"), Var("w")))


# --- canonical text -----------------------------------------------------------------------


def test_show_normalises_whitespace():
    assert show(parse("  (likes\n\tAlice   (pair  B  C)\r\n )  ")) == "(likes Alice (pair B C))"


def test_show_normalises_floats():
    assert show(parse("(weight 1.50)")) == "(weight 1.5)"
    assert show(parse("(weight 1.0e1)")) == "(weight 10.0)"


def test_show_normalises_escapes():
    assert show(parse(r'(note "\u0041\u00e9")')) == '(note "Aé")'
    assert show(parse(r'(note "\/")')) == '(note "/")'
    assert show(parse(r'(note "a\"b\\c\nd\te")')) == r'(note "a\"b\\c\nd\te")'


def test_canonical_text_is_a_fixed_point():
    text = '( p   "x\\u00e9"  1.50 ( q  ?y ) )'
    canonical = show(parse(text))
    assert show(parse(canonical)) == canonical


def test_show_keeps_one_and_one_point_zero_and_true_apart():
    assert show(1) == "1"
    assert show(1.0) == "1.0"
    assert show(True) == "true"
    assert show((Sym("p"), 1)) != show((Sym("p"), 1.0)) != show((Sym("p"), True))
    assert type(parse(show(1.0))) is float
    assert type(parse(show(1))) is int
    assert type(parse(show(True))) is bool


def test_a_string_and_a_symbol_print_differently():
    assert show("a") == '"a"'
    assert show(Sym("a")) == "a"
    assert parse(show("true")) == "true"
    assert type(parse(show("true"))) is str


# --- the Python model ---------------------------------------------------------------------


def test_symbols_are_interned():
    assert Sym("a") is Sym("a")
    assert parse("(p a)")[1] is Sym("a")


def test_a_symbol_first_met_in_a_flat_sentence_is_the_interned_one():
    first = parse("(p FirstSeenInAFlatSentence)")[1]  # read by read_flat, not the tokenizer
    assert first is Sym("FirstSeenInAFlatSentence")
    assert parse("(q (r FirstSeenInAFlatSentence))")[1][1] is first  # the tokenizer's too


def test_a_symbol_is_not_equal_to_its_name():
    assert Sym("a") != "a"
    assert "a" != Sym("a")  # noqa: SIM300 - the reflected comparison too
    assert not isinstance(Sym("a"), str)


def test_symbols_and_strings_do_not_collide_as_dict_keys():
    table = {Sym("a"): "symbol", "a": "string"}
    assert len(table) == 2
    assert table[Sym("a")] == "symbol"
    assert table["a"] == "string"


def test_variables_are_interned_and_are_not_strings():
    assert Var("x") is Var("?x")
    assert Var("x") != "?x"
    assert Var("x") != Sym("x")
    assert len({Var("x"): 1, "?x": 2, Sym("x"): 3}) == 3


# --- refusals: parse ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("(likes Alice Bob", 0),
        ("(a (b c)", 0),
        ("likes)", 5),
        ("(a b))", 5),
    ],
)
def test_unbalanced_parentheses_are_a_parse_error_with_the_offset(text, offset):
    refused = refusal(parse, text)
    assert refused.kind == "parse"
    assert isinstance(refused.data["offset"], int)
    assert refused.data["offset"] == offset


@pytest.mark.parametrize(
    "text",
    ["(a # b)", "(a [b])", '(a "open)', "(a 'b)", "(a {b})", "@", "(a ?)", "(a 1x)", '(a "\\q")'],
)
def test_garbage_is_a_parse_error_with_the_offset(text):
    refused = refusal(parse, text)
    assert refused.kind == "parse"
    assert isinstance(refused.data["offset"], int)
    assert 0 <= refused.data["offset"] <= len(text)


def test_the_parse_offset_points_at_the_bad_character():
    refused = refusal(parse, "(likes Alice #Bob)")
    assert refused.kind == "parse"
    assert refused.data["offset"] == 13


# --- refusals: shape ----------------------------------------------------------------------


def test_an_empty_list_is_refused_as_shape():
    assert refusal(parse, "()").kind == "shape"
    assert refusal(parse, "(p ())").kind == "shape"
    assert refusal(show, ()).kind == "shape"
    assert refusal(show, (Sym("p"), ())).kind == "shape"


@pytest.mark.parametrize(
    "text", ['("s" 1)', "(1 2)", "(1.5 a)", "(true a)", "(?x a)", "((p) a)", "(p (?f a))"]
)
def test_a_non_symbol_functor_in_text_is_refused_as_shape(text):
    assert refusal(parse, text).kind == "shape"


@pytest.mark.parametrize(
    "functor",
    ["s", 1, 1.5, True, Var("x"), (Sym("p"),)],
    ids=["string", "int", "float", "bool", "variable", "list"],
)
def test_a_non_symbol_functor_in_a_term_is_refused_as_shape(functor):
    assert refusal(show, (functor, Sym("A"))).kind == "shape"
    assert refusal(show, (Sym("p"), (functor, Sym("A")))).kind == "shape"


def test_nesting_64_deep_is_fine():
    term = parse(nested(64))
    assert show(term) == nested(64)


def test_nesting_65_deep_is_refused_as_shape():
    assert refusal(parse, nested(65)).kind == "shape"
    term = 1
    for _ in range(65):
        term = (Sym("f"), term)
    assert refusal(show, term).kind == "shape"
    assert show(term[1]) == nested(64)


def test_a_sentence_just_under_64_kib_is_fine():
    text = '(note "' + "x" * (63 * KIB) + '")'
    assert show(parse(text)) == text


def test_a_sentence_over_64_kib_is_refused_as_shape_when_parsed():
    text = '(note "' + "x" * (1024 * KIB) + '")'
    assert refusal(parse, text).kind == "shape"


def test_a_sentence_over_64_kib_is_refused_as_shape_when_shown():
    assert refusal(show, (Sym("note"), "x" * (1024 * KIB))).kind == "shape"


def test_the_size_limit_counts_utf8_bytes_when_shown():
    # 40,000 three-byte characters are 120,000 bytes of text: over the limit
    assert refusal(show, (Sym("note"), "€" * 40_000)).kind == "shape"


def test_the_size_limit_counts_utf8_bytes_when_parsed():
    # what parse accepts, show must print: both measure the same 64 KiB
    assert refusal(parse, '(note "' + "€" * 40_000 + '")').kind == "shape"


# --- properties ---------------------------------------------------------------------------

SYMBOL_NAMES = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_-]{0,12}\Z").filter(
    lambda name: name not in ("true", "false")
)

ATOMS = st.one_of(
    SYMBOL_NAMES.map(Sym),
    SYMBOL_NAMES.map(Var),
    st.text(max_size=40),
    st.integers(),
    st.integers(min_value=-(10**60), max_value=10**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


def compounds(children):
    return st.tuples(SYMBOL_NAMES.map(Sym), st.lists(children, max_size=5)).map(
        lambda parts: (parts[0], *parts[1])
    )


TERMS = st.recursive(ATOMS, compounds, max_leaves=40)

PROPERTY_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(TERMS)
def test_parse_inverts_show(term):
    read = parse(show(term))
    assert read == term
    assert same_term(read, term)


@PROPERTY_SETTINGS
@given(TERMS)
def test_show_of_parse_of_show_is_show(term):
    text = show(term)
    assert show(parse(text)) == text


@PROPERTY_SETTINGS
@given(SYMBOL_NAMES)
def test_every_symbol_name_interns_to_one_object(name):
    assert Sym(name) is Sym(name)
    assert parse(name) is Sym(name)
    assert Sym(name) != name


@given(st.lists(SYMBOL_NAMES | st.sampled_from(["true", "false"]), min_size=1, max_size=6))
def test_a_flat_list_of_symbols_reads_as_the_tokenizer_reads_it(names):
    from koinii.terms import _read  # parse reads this commonest shape without it

    text = "(" + " ".join(names) + ")"
    try:
        ((expected, _, _),) = _read(text)
    except Refused as slow:
        assert refusal(parse, text).kind == slow.kind
    else:
        assert parse(text) == expected and show(expected) == text


# --- real files: where a refusal is, function terms, connectives ---------------------------


def test_a_parse_refusal_names_its_line_and_column():
    with pytest.raises(Refused) as refusal:
        parse_all('(p a)\n(q "unterminated)\n')
    assert (refusal.value.data["line"], refusal.value.data["column"]) == (2, 4)
    assert "(line 2, column 4)" in refusal.value.message
    with pytest.raises(Refused) as refusal:
        parse("(p a))")
    assert refusal.value.data["line"] == 1 and refusal.value.data["column"] == 6


def test_statements_read_on_past_a_bad_one():
    from koinii.terms import statements

    read = list(statements("(p a)\n(q b))\n(r c)\n(bad #)\n(s d)\n"))
    good = [(line, show(term)) for line, _, term in read if not isinstance(term, Refused)]
    bad = [(line, term.kind) for line, _, term in read if isinstance(term, Refused)]
    assert good == [(1, "(p a)"), (2, "(q b)"), (3, "(r c)"), (5, "(s d)")]
    assert bad == [(2, "parse"), (4, "parse")]


def test_after_a_bad_statement_reading_resumes_after_it_whole_never_inside():
    """Issue 41: recovery skipped to the next line starting with `(`, so three valid
    statements were reported as unbalanced `)`, and a sub-expression of a bad statement
    that starts a line was read as a statement of its own. Now the bad one is skipped to
    where its parentheses balance, a `)` in its strings and comments not counted."""
    from koinii.terms import statements

    text = (
        "(p a)\n"
        "(bad #\n"  # a bad token: the statement is (bad # (s d …) (t e))
        '(s d "a ) in a string" ; a ) in a comment\n'
        "(t e)))\n"
        "(u f)\n"
        "(v g))\n"  # a stray `)`: only it is skipped
        "(w h)\n"
        "(unclosed (x\n"  # never closed: what follows is inside it
        "(y i)\n"
    )
    read = list(statements(text))
    good = [(line, show(term)) for line, _, term in read if not isinstance(term, Refused)]
    bad = [(line, column, term.kind) for line, column, term in read if isinstance(term, Refused)]
    assert good == [(1, "(p a)"), (5, "(u f)"), (6, "(v g)"), (7, "(w h)")]
    assert bad == [(2, 6, "parse"), (6, 6, "parse"), (8, 11, "parse")]


def test_function_terms_in_cycs_convention_are_terms_not_sentences(kb):
    kb.assert_("(lengthOf Rod (MeasureFn 3 Meter))", "CxA")
    kb.assert_("(implies (birthYear ?p (YearFn ?y)) (bornIn ?p ?y))", "CxA")
    kb.assert_("(birthYear Ann (YearFn 1990))", "CxA")
    assert kb.query("(lengthOf Rod (MeasureFn ?n ?unit))", "CxA") == [
        {"?n": 3, "?unit": Sym("Meter")}
    ]
    assert kb.query("(bornIn Ann ?y)", "CxA") == [{"?y": 1990}]
    with pytest.raises(Refused) as refusal:
        kb.assert_("(MeasureFn 3 Meter)", "CxA")
    assert refusal.value.kind == "naming" and "stands inside a sentence" in refusal.value.message


@pytest.mark.parametrize(
    "sentence, connective",
    [
        ("(or (raining Today) (snowing Today))", "or"),
        ("(implies (or (p ?x) (q ?x)) (r ?x))", "or"),
        ("(forall ?x (p ?x))", "forall"),
        ("(exists ?x (p ?x))", "exists"),
        ("(holds (or (p a) (q a)))", "or"),
        ("(=> (p ?x) (q ?x))", "=>"),
        ("(<=> (p ?x) (q ?x))", "<=>"),
    ],
)
def test_connectives_the_engine_does_not_implement_are_refused_by_name(kb, sentence, connective):
    seq = kb.seq
    with pytest.raises(Refused) as refusal:
        kb.assert_(sentence, "CxA")
    assert refusal.value.kind == "unsupported-connective"
    assert refusal.value.data["connective"] == connective
    assert "write" in refusal.value.message or "state" in refusal.value.message  # the fix
    assert kb.seq == seq


def test_a_goal_with_a_connective_is_refused_too(kb):
    with pytest.raises(Refused) as refusal:
        kb.query("(or (p ?x) (q ?x))", "CxA")
    assert refusal.value.kind == "unsupported-connective"


@pytest.mark.parametrize("word", ["Rédis", "naïve", "Zürich"])
def test_a_word_with_other_than_ascii_is_refused_as_text_to_quote(word):
    with pytest.raises(Refused) as refused:
        parse(f"(usesCache ProdCluster {word})")
    assert refused.value.kind == "parse"
    assert f"{word!r} is not a symbol" in refused.value.message
    assert f'"{word}"' in refused.value.message  # how to write it instead
    assert parse(f'(usesCache ProdCluster "{word}")')[2] == word
