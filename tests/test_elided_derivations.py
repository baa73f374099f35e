"""A conclusion derived again by a rule it holds a justification of keeps one: the rest
are elided, and found again when they are needed (firing.py `_derive`, maintenance.py
`rederive_elided`).

Over a deep, many-parent taxonomy each conclusion is derived five times over, and keeping
every derivation was most of the memory SUMO's inheritance axiom took. What is elided is
a function of the stored nodes, so belief must not tell it was: a conclusion outlives the
loss of the derivation it kept while another stands, is believed where only an elided one
is whole, is monotonic through one once its rule is — after a write, after a reopen from
the rows or from a checkpoint alike.
"""

from __future__ import annotations

import pytest

import koinii

INHERITANCE = "(implies (and (subclass ?x ?y) (instance ?z ?x)) (instance ?z ?y))"
TWO_WAYS = [  # (instance Rex Animal) through Dog and through Puppy
    "(subclass Dog Animal)",
    "(subclass Puppy Animal)",
    "(instance Rex Dog)",
    "(instance Rex Puppy)",
]


def _node(kb: koinii.KB, text: str, ctx: str = "CxZoo"):
    found = [s for s in kb.sentexes_matching(text, "CxEverything") if s.context == ctx]
    return found[0] if found else None


def _kept(kb: koinii.KB, text: str, ctx: str = "CxZoo") -> list[list[str]]:
    """The antecedents of each justification `text` holds."""
    why = kb.why(_node(kb, text, ctx).handle)
    return [[a["sentence"] for a in j["antecedents"]] for j in why["justifications"]]


def _two_ways(kb: koinii.KB) -> None:
    kb.assert_(INHERITANCE, "CxZoo")
    kb.edit(add=[(fact, "CxZoo") for fact in TWO_WAYS])


def _handle(kb: koinii.KB, text: str, ctx: str = "CxZoo") -> int:
    return _node(kb, text, ctx).handle


def test_a_conclusion_keeps_one_justification_per_rule_and_outlives_losing_it(kb):
    _two_ways(kb)
    (kept,) = _kept(kb, "(instance Rex Animal)")  # derived twice, one kept
    assert kb.stats()["justifications"] == 1
    subclass = next(a for a in kept if a.startswith("(subclass"))
    kb.retract(_handle(kb, subclass))  # the derivation it kept goes: the other stands
    rex = _node(kb, "(instance Rex Animal)")
    assert rex is not None and rex.believed
    (found,) = _kept(kb, "(instance Rex Animal)")
    assert subclass not in found
    other = next(a for a in found if a.startswith("(subclass"))
    kb.retract(_handle(kb, other))  # no derivation left
    assert _node(kb, "(instance Rex Animal)") is None


def test_a_conclusion_is_believed_where_only_an_elided_derivation_is_unmasked(kb):
    _two_ways(kb)
    (kept,) = _kept(kb, "(instance Rex Animal)")
    instance = next(a for a in kept if a.startswith("(instance"))
    kb.assert_(f"(except (sentexHandle {_handle(kb, instance)}))", "CxZoo")
    rex = _node(kb, "(instance Rex Animal)")
    assert rex.believed  # the other derivation is whole, and unmasked
    assert len(_kept(kb, "(instance Rex Animal)")) == 2  # found again to tell


@pytest.mark.parametrize("order", ["default first", "monotonic first"])
def test_a_conclusion_is_monotonic_where_only_an_elided_derivation_is(kb, order):
    """A rule that can make nothing monotonic has its derivations elided; asserted
    monotonic after, the conclusions it made are monotonic through whichever derivation
    of theirs is, held or elided."""
    kb.assert_(INHERITANCE, "CxZoo")
    default = [("(subclass Dog Animal)", "CxZoo"), ("(instance Rex Dog)", "CxZoo")]
    strong = [
        (fact, "CxZoo", {"strength": "monotonic"})
        for fact in ("(subclass Puppy Animal)", "(instance Rex Puppy)")
    ]
    contrary = [("(not (instance Rex Animal))", "CxZoo")]
    kb.edit(add=contrary + (default + strong if order == "default first" else strong + default))
    assert len(_kept(kb, "(instance Rex Animal)")) == 1
    kb.assert_(INHERITANCE, "CxZoo", strength="monotonic")
    rex = _node(kb, "(instance Rex Animal)")
    assert rex.believed and rex.strength == "monotonic"
    assert not _node(kb, "(not (instance Rex Animal))").believed  # defeated


def test_a_monotonic_rule_elides_nothing(kb):
    kb.assert_(INHERITANCE, "CxZoo", strength="monotonic")
    kb.edit(add=[(fact, "CxZoo") for fact in TWO_WAYS])
    assert len(_kept(kb, "(instance Rex Animal)")) == 2


@pytest.mark.parametrize("reopen", ["from rows", "from a checkpoint and its tail"])
def test_what_a_write_elided_is_found_again_after_a_reopen(tmp_path, reopen):
    path = tmp_path / "zoo.db"
    with koinii.open_kb(path) as kb:
        kb.assert_(INHERITANCE, "CxZoo")
        if reopen != "from rows":
            kb.checkpoint()
        kb.edit(add=[(fact, "CxZoo") for fact in TWO_WAYS])  # (the tail)
        (kept,) = _kept(kb, "(instance Rex Animal)")
    with koinii.open_kb(path, checkpoints=reopen != "from rows") as kb:
        assert kb.opened["from"] == ("rows" if reopen == "from rows" else "checkpoint")
        assert _kept(kb, "(instance Rex Animal)") == [kept]
        subclass = next(a for a in kept if a.startswith("(subclass"))
        kb.retract(_handle(kb, subclass))
        assert _node(kb, "(instance Rex Animal)").believed
        instance = next(a for a in _kept(kb, "(instance Rex Animal)")[0] if "Rex" in a)
        kb.assert_(f"(except (sentexHandle {_handle(kb, instance)}))", "CxZoo")
        assert not _node(kb, "(instance Rex Animal)").believed  # none left unmasked


def test_a_rule_retracted_takes_every_conclusion_it_elided_along(kb):
    rule = kb.assert_(INHERITANCE, "CxZoo")
    kb.edit(add=[(fact, "CxZoo") for fact in TWO_WAYS])
    kb.retract(rule)
    assert _node(kb, "(instance Rex Animal)") is None
    assert kb.stats()["justifications"] == 0


@pytest.mark.parametrize("order", ["across contexts first", "in one context first"])
def test_a_conclusion_outlives_an_edge_that_took_the_derivation_it_kept(kb, order):
    """Re-placed after a `genlCx` edge went (firing.py `place_again`), the derivation the
    conclusion kept is no longer placed where it is; one it elided still is."""
    kb.edit(
        add=[
            ("(genlCx CxFarm CxZoo)", "CxUniverse"),
            ("(genlCx CxPets CxZoo)", "CxUniverse"),
            ("(genlCx CxFarm CxPets)", "CxUniverse"),
        ]
    )
    kb.assert_(INHERITANCE, "CxZoo")
    across = [("(subclass Dog Animal)", "CxPets"), ("(instance Rex Dog)", "CxFarm")]
    within = [("(subclass Puppy Animal)", "CxFarm"), ("(instance Rex Puppy)", "CxFarm")]
    kb.edit(add=across + within if order == "in one context first" else within + across)
    assert _node(kb, "(instance Rex Animal)", "CxFarm").believed
    kb.retract(_handle(kb, "(genlCx CxFarm CxPets)", "CxUniverse"))
    rex = _node(kb, "(instance Rex Animal)", "CxFarm")
    assert rex is not None and rex.believed
    (found,) = _kept(kb, "(instance Rex Animal)", "CxFarm")
    assert "(subclass Puppy Animal)" in found


@pytest.mark.parametrize("order", ["the cycle first", "the other first"])
def test_a_conclusion_outlives_the_loss_of_a_derivation_that_rested_on_itself(kb, order):
    """A premise retracted that a symmetric rule derives back from its own conclusion
    rests on itself, and goes with what rested only on it (`_delete_unfounded`) — not
    with what another derivation, elided, still founds."""
    kb.assert_("(implies (near ?x ?y) (near ?y ?x))", "CxMap")
    kb.assert_("(implies (near ?x ?y) (close ?x))", "CxMap")
    cycle, other = ("(near Pier Quay)", "CxMap"), ("(near Pier Zoo)", "CxMap")
    kb.edit(add=[cycle, other] if order == "the other first" else [other, cycle])
    assert len(_kept(kb, "(close Pier)", "CxMap")) == 1
    kb.retract(_handle(kb, "(near Pier Quay)", "CxMap"))
    assert _node(kb, "(near Pier Quay)", "CxMap") is None  # (it rested on itself)
    close = _node(kb, "(close Pier)", "CxMap")
    assert close is not None and close.believed
    assert _kept(kb, "(close Pier)", "CxMap") == [["(near Pier Zoo)"]]
