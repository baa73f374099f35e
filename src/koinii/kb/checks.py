"""What a written sentence must satisfy before anything is stored.

`prepare` runs every check that needs no state — shape, naming roles, the placement of
reserved functors, groundness, rule well-formedness — and turns one (sentence, context)
into the `Entry` (or entries, for a rule with a conjunctive consequent) the engine stores.
The checks that need the store (arity declarations, unknown handles, cycles) live in the
engine, beside the state they read. Each refusal is raised from exactly one place here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from koinii.errors import Refused
from koinii.kb.contexts import EVERYTHING, UNIVERSE
from koinii.kb.rules import (
    AND,
    EXCEPT,
    GENL_CX,
    IMPLIES,
    SENTEX_HANDLE,
    Rule,
    compile_rule,
    refuse_underivable,
    split,
)
from koinii.kb.sentex import MAX_HANDLE, NOT, key_of
from koinii.terms import (
    CONNECTIVES,
    MAX_TEXT,
    QUOTE,
    Sym,
    Term,
    Var,
    is_context_name,
    is_function_name,
    is_predicate_name,
    is_type_name,
    parse,
    read_flat,
    show,
    unsupported_connective,
)


@dataclass(slots=True)
class Entry:
    """One sentence ready to store: polarity split off, checked.

    Its canonical text is shown when first asked for (`text`) where the atom is a tuple of
    symbols given as terms — valid as it is, and keyed by itself — so that a bulk load of
    terms into memory never shows them (a sixth of its time): a SQL store shows the text
    for its row, from the node, as it writes it."""

    positive: bool
    atom: tuple
    shown: str | None  # the atom's canonical text, if shown yet
    context: str
    rule: Rule | None = None
    split: bool = False  # one of the rules a conjunctive consequent was split into
    handles: tuple[int, ...] = ()  # ground (sentexHandle N) inside

    @property
    def text(self) -> str:
        """The atom's canonical text."""
        if self.shown is None:
            self.shown = show(self.atom)
        return self.shown

    @property
    def key(self) -> tuple | str:
        """The atom's key in the index (`sentex.key_of`)."""
        return self.atom if self.shown is None else key_of(self.atom, self.shown)


_WRITABLE: dict[str, str] = {}  # context names already found writable (every write asks)


def context_name(context: Any, *, query: bool = False) -> str:
    """The context's name. Only a read (`query=True`) may name a variable or CxEverything."""
    if type(context) is str:
        known = _WRITABLE.get(context)
        if known is not None:
            return known
    name = context.name if type(context) is Sym else context
    if type(context) is Var or (isinstance(name, str) and name.startswith("?")):
        text = context.text if type(context) is Var else name
        if not query:
            raise Refused(
                "read-only-context",
                f"{text} is a query context; this needs one named context",
                {"context": text},
            )
        return Var(text).text
    if not isinstance(name, str) or not is_context_name(name):
        raise Refused(
            "naming",
            f"{name!r} is not a context name: contexts are Cx + CapitalCamelCase (CxDeploy)",
            {"symbol": str(name), "role": "context"},
        )
    if name == EVERYTHING:
        if not query:
            raise Refused(
                "read-only-context",
                "CxEverything is the audit view for reads; this needs a real context",
                {"context": name},
            )
    elif len(_WRITABLE) < 100_000:
        _WRITABLE[name] = name
    return name


def prepare(sentence: Term | str, context: Any) -> list[Entry]:
    """Check one written sentence; return what to store (several for a split rule)."""
    if type(sentence) is str:
        flat = read_flat(sentence)
        term = parse(sentence) if flat is None else flat
    else:
        flat, term = None, sentence  # (checked as it is shown, or walked)
    ctx = context_name(context)
    if type(term) is not tuple:
        raise Refused(
            "shape",
            f"a sentence is a list such as (usesDatabase ProdCluster Postgres), not {show(term)}",
            {},
        )
    # a flat sentence is its own canonical text; showing any other also checks the shape
    # limits of terms handed in as Python values — but for a tuple of symbols, valid as it
    # is, which is shown only when its text is asked for (`Entry`)
    if flat is not None:
        text = sentence
    else:
        text = None if _symbols_only(term) else show(term)
    positive = True
    while term[0] is NOT:
        if len(term) != 2 or type(term[1]) is not tuple:
            raise Refused("not-well-formed", "`not` takes exactly one sentence", {})
        positive, term = not positive, term[1]
        text = None if _symbols_only(term) else ""
    functor = term[0]
    if functor is IMPLIES:
        if not positive:
            raise Refused("not-well-formed", "a rule cannot be negated", {})
        entries = []
        parts = split(term)
        for part in parts:
            rule = compile_rule(part)
            refuse_underivable(rule.consequent[1], "a rule", show(part))
            entry = Entry(True, part, show(part), ctx, rule, split=parts[0] is not term)
            _walk(part, entry, top=True, in_rule=True)
            entries.append(entry)
        return entries
    entry = Entry(positive, term, show(term) if text == "" else text, ctx)
    if text is not None or functor in _WALKED or not _FUNCTORS.get((functor, len(term) - 1)):
        _walk(term, entry, top=True, in_rule=False)
    # (else a tuple of symbols under a predicate known good: nothing in it to walk, and
    # a bulk load of terms is mostly these — 6 % of it went to walking them)
    if functor is GENL_CX:
        _check_genl_cx(entry)
    elif functor is EXCEPT:
        _check_except(entry)
    elif functor is SINGLE_VALUED and positive:
        _check_single_valued(entry)
    return [entry]


def plain(sentence: Any, context: Any) -> Entry | None:
    """The entry of a plain fact handed in as terms — a tuple of symbols under a
    predicate already found good, in a context already written to — with nothing to
    check that `prepare` would not find the same way; None for any other (`prepare`'s).
    A bulk load is mostly these: it skips `prepare`'s questions, a tenth of its time."""
    ctx = _WRITABLE.get(context) if type(context) is str else None
    if ctx is None or not _symbols_only(sentence):
        return None
    functor = sentence[0]
    if functor in _WALKED or functor in _OWN_SENTENCES or functor is SINGLE_VALUED:
        return None
    if not _FUNCTORS.get((functor, len(sentence) - 1)):
        return None
    return Entry(True, sentence, None, ctx)


def _symbols_only(term: Any) -> bool:
    """Is `term` a tuple of symbols within the length of a sentence: valid as it is?"""
    if type(term) is not tuple or not term:
        return False
    for x in term:  # (a loop: faster than a set's `issuperset` of the types, for so few)
        if type(x) is not Sym:
            return False
    count = len(term)  # (the text adds the parentheses and the spaces between)
    if count * (Sym.longest + 1) + 1 <= MAX_TEXT:  # (known without reading the names)
        return True
    return count + 1 + sum(len(x.name) for x in term) <= MAX_TEXT


_FUNCTORS: dict[tuple[Sym, int], bool] = {}


def _functor_ok(functor: Sym, arity: int, nested: bool = False) -> bool:
    """Is `functor` a predicate (or a type, of one argument) — or, nested inside a
    sentence, a function term's `XxxFn` (Cyc's `(MeasureFn 3 Meter)`)? A logical
    connective the engine does not implement is refused by name."""
    found = _FUNCTORS.get((functor, arity))
    if found is None:
        name = functor.name
        if name in CONNECTIVES:
            raise unsupported_connective(name)
        found = is_predicate_name(name) or (arity == 1 and is_type_name(name))
        _FUNCTORS[(functor, arity)] = found
    return found or (nested and is_function_name(functor.name))


_CONNECTIVES = frozenset({NOT, AND, IMPLIES})  # (a set: `in` a tuple compares each)
_WALKED = _CONNECTIVES | {QUOTE, SENTEX_HANDLE}  # functors `_walk` has more to say of
_OWN_SENTENCES = frozenset({GENL_CX, EXCEPT})
SINGLE_VALUED = Sym("singleValued")  # a declaration read by kb/clashes.py


def _walk(term: tuple, entry: Entry, *, top: bool, in_rule: bool) -> None:
    functor = term[0]
    arity = len(term) - 1
    if functor is QUOTE:
        if top:
            raise Refused(
                "not-well-formed",
                "(quote S) is a term, not a sentence: use it as an argument, e.g. "
                "(queries AgentAtlas (quote (usesDatabase ProdCluster ?db)))",
                {"sentence": entry.text},
            )
        _walk_quoted(term, entry)
        return
    if functor is SENTEX_HANDLE:
        if top:
            raise Refused(
                "not-well-formed", "(sentexHandle N) names a sentex; it is not a sentence", {}
            )
        handle = term[1] if arity == 1 else None
        if type(handle) is Var and in_rule:
            return
        if type(handle) is not int or not 0 < handle <= MAX_HANDLE:
            raise Refused(
                "bad-handle",
                f"{show(term)} must name a handle: a positive 64-bit integer",
                {"term": show(term)},
            )
        entry.handles += (handle,)
        return
    connective = functor in _CONNECTIVES
    if connective and not (top and in_rule):
        raise Refused(
            "not-well-formed",
            f"`{functor.name}` cannot appear inside a sentence",
            {"sentence": entry.text},
        )
    if not top and functor in _OWN_SENTENCES:
        raise Refused(
            "not-well-formed",
            f"`{functor.name}` is a sentence of its own, not an argument",
            {"sentence": entry.text},
        )
    if not connective and not _functor_ok(functor, arity, not top):
        name = functor.name
        if is_type_name(name):
            expected = "a type (snake_case) takes exactly one argument"
        elif is_function_name(name):
            expected = (
                f"{name} names a function term, which stands inside a sentence, e.g. "
                f"(lengthOf Rod ({name} 3 Meter)); a sentence's functor is a predicate"
            )
        else:
            expected = (
                "predicates are lowerCamelCase (usesDatabase), types snake_case (dog), "
                "function terms CapitalCamelCase ending in Fn (MeasureFn)"
            )
        raise Refused(
            "naming",
            f"{name!r} cannot be a functor here: {expected}",
            {"symbol": name, "role": "predicate", "arity": arity},
        )
    structural = in_rule and connective
    for arg in term:  # (the functor, a symbol, is neither)
        cls = type(arg)
        if cls is tuple:
            _walk(arg, entry, top=structural, in_rule=in_rule)
        elif cls is Var and not in_rule:
            raise Refused(
                "not-ground",
                f"{arg.text} is a variable; only rules may hold variables",
                {"variable": arg.text, "sentence": entry.text},
            )


def _walk_quoted(term: tuple, entry: Entry) -> None:
    """A quotation holds one literal — a sentence or `(not S)` — whose variables are data.

    Its naming is checked like any sentence's, so a quoted pattern can later be matched
    against claims; but nothing in it is live: no variable must be bound, and a
    `(sentexHandle N)` inside names nothing the engine tracks.
    """
    quoted = term[1] if len(term) == 2 else None
    if type(quoted) is tuple and quoted[0] is NOT and len(quoted) == 2:
        quoted = quoted[1]
    if type(quoted) is not tuple:
        raise Refused(
            "not-well-formed",
            "quote takes one sentence, e.g. (quote (usesDatabase ProdCluster ?db))",
            {"sentence": entry.text},
        )
    _walk_data(quoted, entry)


def _walk_data(term: tuple, entry: Entry, nested: bool = False) -> None:
    functor = term[0]
    if functor is QUOTE:
        _walk_quoted(term, entry)
        return
    if functor is SENTEX_HANDLE:
        if len(term) != 2 or not (type(term[1]) is Var or (type(term[1]) is int and term[1] > 0)):
            raise Refused(
                "bad-handle",
                f"{show(term)} must name a positive integer handle (or a variable, quoted)",
                {"term": show(term)},
            )
        return
    if functor in (NOT, AND, IMPLIES, GENL_CX, EXCEPT) or not _functor_ok(
        functor, len(term) - 1, nested=nested
    ):
        raise Refused(
            "naming",
            f"{functor.name!r} cannot be the functor of a quoted sentence: quote a claim "
            "such as (quote (usesDatabase ProdCluster ?db))",
            {"symbol": functor.name, "role": "predicate", "arity": len(term) - 1},
        )
    for arg in term[1:]:
        if type(arg) is tuple:
            _walk_data(arg, entry, nested=True)


def _check_genl_cx(entry: Entry) -> None:
    atom = entry.atom
    if not entry.positive:
        raise Refused("not-well-formed", "a genlCx edge cannot be negated", {})
    if len(atom) != 3 or not all(type(a) is Sym and is_context_name(a.name) for a in atom[1:]):
        raise Refused(
            "naming",
            "genlCx takes two context names: (genlCx CxSub CxSuper)",
            {"sentence": entry.text, "role": "context"},
        )
    if entry.context != UNIVERSE:
        raise Refused(
            "not-well-formed",
            f"genlCx edges live in CxUniverse, not {entry.context}",
            {"sentence": entry.text, "context": entry.context},
        )
    if atom[1].name == UNIVERSE:
        raise Refused(
            "not-well-formed",
            "CxUniverse is the root: it cannot see another context",
            {"sentence": entry.text},
        )
    if EVERYTHING in (atom[1].name, atom[2].name):
        raise Refused("not-well-formed", "CxEverything is a read view, not a context to place", {})


def _check_single_valued(entry: Entry) -> None:
    """`(singleValued P N)`: a predicate and the number of its argument (1 for the
    first) that takes one value: anything else would declare nothing, silently."""
    atom = entry.atom
    if len(atom) != 3 or type(atom[1]) is not Sym or type(atom[2]) is not int or atom[2] < 1:
        raise Refused(
            "not-well-formed",
            "singleValued takes a predicate and the number of its argument that takes one "
            "value, counted from 1: (singleValued poolSize 2)",
            {"sentence": entry.text},
        )


def _check_except(entry: Entry) -> None:
    atom = entry.atom
    if not entry.positive:
        raise Refused("not-well-formed", "a mask cannot be negated; retract it instead", {})
    if len(atom) != 2 or type(atom[1]) is not tuple or atom[1][0] is not SENTEX_HANDLE:
        raise Refused(
            "not-well-formed",
            "except takes one (sentexHandle N): (except (sentexHandle 42))",
            {"sentence": entry.text},
        )
