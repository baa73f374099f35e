"""The speech acts as sentences: how each move is written, and how to read one back.

One module owns the forms (channel.md §2), so the channel that writes moves, the
conversation reads that interpret them, the adjudication that counts ballots and the
narrator that tells people about them agree on every shape:

| move | sentence |
| --- | --- |
| question | `(queries A Q)`: Q is `(quote S)` (a pattern or a yes/no S), a string or a symbol |
| answer | `(answers A (quote C) (sentexHandle Q))`: C is the answer's claim |
| endorsement | `(endorses A (sentexHandle T))` |
| justification | `(justifies A ground (sentexHandle T))` |
| dispute | `(disputes A (sentexHandle T))`, beside the rebuttal `(not S)` |
| ballot | `(votesFor A (sentexHandle T))`, `(votesAgainst A (sentexHandle T))` |
| acceptance | `(accepts Asker (sentexHandle Answer))` |
| closing | `(closes Asker (sentexHandle Q))` |
| error acts | `(notUnderstood A (sentexHandle T))`, `(refuse A (sentexHandle T))` |

An answer's claim C is the instance of a pattern question, the sentence or its negation
for a yes/no question, and `(answerTo (sentexHandle Q) Content)` for a free-text or
symbol question. `answer_claim` is the one place that builds it, refusing content that
does not answer the question (`koinii/answer-mismatch`).

Invariant: everything here is a pure function of terms — no store, no transport.
"""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.kb.index import match
from koinii.terms import (
    QUOTE,
    Sym,
    Term,
    Var,
    is_ground,
    parse,
    quoted,
    show,
    substitute,
    variables,
)

__all__ = [
    "ACTS",
    "STANCES",
    "answer_claim",
    "answer_content",
    "bindings_of",
    "carried_claim",
    "move_kind",
    "negation",
    "question_form",
    "question_kind",
    "ref",
    "speaker",
    "target_of",
]

NOT = Sym("not")
HANDLE = Sym("sentexHandle")
QUERIES = Sym("queries")
ANSWERS = Sym("answers")
ENDORSES = Sym("endorses")
JUSTIFIES = Sym("justifies")
DISPUTES = Sym("disputes")
VOTES_FOR = Sym("votesFor")
VOTES_AGAINST = Sym("votesAgainst")
NOT_UNDERSTOOD = Sym("notUnderstood")
REFUSE = Sym("refuse")
ACCEPTS = Sym("accepts")
CLOSES = Sym("closes")
ANSWER_TO = Sym("answerTo")

STANCES = {"for": VOTES_FOR, "against": VOTES_AGAINST}

# functor -> the kind of move, as readers name it
ACTS: dict[Sym, str] = {
    QUERIES: "question",
    ANSWERS: "answer",
    ENDORSES: "endorsement",
    JUSTIFIES: "justification",
    DISPUTES: "dispute",
    VOTES_FOR: "ballot",
    VOTES_AGAINST: "ballot",
    ACCEPTS: "acceptance",
    CLOSES: "closing",
    NOT_UNDERSTOOD: "error",
    REFUSE: "error",
}


def ref(handle: int) -> tuple:
    """`(sentexHandle N)`."""
    return (HANDLE, handle)


def negation(sentence: Term) -> Term:
    """`(not S)` for S; S for `(not S)`."""
    if type(sentence) is tuple and sentence[0] is NOT:
        return sentence[1]
    return (NOT, sentence)


def move_kind(sentence: Term) -> str:
    """`question`, `answer`, `endorsement`, …, or `claim` for any other sentence."""
    if type(sentence) is tuple and sentence:
        return ACTS.get(sentence[0], "claim")
    return "claim"


def speaker(sentence: Term) -> str | None:
    """Who made the move (argument 1 of a speech act); None for a plain claim."""
    if move_kind(sentence) == "claim" or len(sentence) < 2:
        return None
    who = sentence[1]
    return who.name if type(who) is Sym else show(who)


def target_of(sentence: Term) -> int | None:
    """The handle a reply is on (its last `(sentexHandle N)` argument), else None."""
    if move_kind(sentence) in ("claim", "question"):
        return None
    last = sentence[-1]
    if type(last) is tuple and len(last) == 2 and last[0] is HANDLE and type(last[1]) is int:
        return last[1]
    return None


# --- questions ---------------------------------------------------------------------------


def question_form(question: Any) -> Term:
    """What `(queries A ·)` stores for a question: a sentence — a pattern with variables
    or a yes/no sentence — is quoted; free text (a str term) and a symbol are kept."""
    term = parse(question) if isinstance(question, str) else question
    if type(term) is tuple and not quoted(term):
        if term[0] is Sym("and") or term[0] is Sym("implies"):
            raise Refused(
                "koinii/bad-question",
                "a question is one sentence (a pattern or a yes/no sentence), a string or a "
                "symbol; ask one thing at a time, e.g. (usesDatabase ProdCluster ?db)",
                {"question": show(term)},
            )
        return (QUOTE, term)
    return term


def question_kind(question: Term) -> str:
    """`pattern` (a quoted sentence with variables), `yes-no` (a ground quoted
    sentence), `free-text` (a string), `symbol`, or `term` (anything else)."""
    if quoted(question):
        return "pattern" if variables(question[1]) else "yes-no"
    if type(question) is str:
        return "free-text"
    if type(question) is Sym:
        return "symbol"
    return "term"


def answer_claim(question: Term, query: int, content: Any) -> Term:
    """The claim an answer with `content` makes to the question `query` asked as
    `question` (what `(queries A ·)` stores). Refused `koinii/answer-mismatch` when the
    content does not answer it, with the pattern and the offered content as data.

    - pattern: a binding map (`{"?db": "PostgreSQL16"}`; text values are read as terms)
      or a ground instance of the pattern; a pattern with one variable also takes the
      value alone (`"PostgreSQL16"`);
    - yes/no: the sentence or its negation (`true` / `false` name them too);
    - free text, symbol: any ground term, claimed as `(answerTo (sentexHandle Q) C)`.
    """
    kind = question_kind(question)
    if kind in ("pattern", "yes-no"):
        sentence = question[1]
        if kind == "pattern":
            return _instance(sentence, content)
        return _yes_no(sentence, content)
    value = _term(content)
    if not is_ground(value):
        raise Refused(
            "koinii/answer-mismatch",
            f"an answer is ground; {show(value)} holds variables. Answer with a value, "
            'e.g. "PostgreSQL 16" or PostgreSQL16',
            {"question": show(question), "offered": show(value)},
        )
    return (ANSWER_TO, ref(query), value)


def _term(content: Any) -> Term:
    return parse(content) if isinstance(content, str) else content


def _instance(pattern: Term, content: Any) -> Term:
    wanted = variables(pattern)
    names = " ".join(v.text for v in wanted)
    if isinstance(content, dict):
        binding: dict[Var, Term] = {}
        for name, value in content.items():
            try:
                var = Var(name) if isinstance(name, str) else None
            except Refused:
                var = None
            if var is None or var not in wanted:
                raise _mismatch(
                    pattern,
                    content,
                    f"{name!r} is not a variable of the question; it asks for {names}",
                )
            binding[var] = _term(value)
        missing = [v.text for v in wanted if v not in binding]
        if missing:
            raise _mismatch(
                pattern, content, f"the answer leaves {', '.join(missing)} unbound", missing
            )
        instance = substitute(pattern, binding)
    else:
        offered = _term(content)
        if type(offered) is not tuple and len(wanted) == 1:
            instance = substitute(pattern, {wanted[0]: offered})
        else:
            instance = offered
    if not is_ground(instance) or bindings_of(pattern, instance) is None:
        raise _mismatch(pattern, content, f"it is not an instance of {show(pattern)}")
    return instance


# The words for a yes/no answer besides the sentence itself (true/false read as booleans).
_YES_NO = {"yes": True, "no": False}


def _yes_no(sentence: Term, content: Any) -> Term:
    offered = _term(content)
    if type(offered) is Sym and offered.name.lower() in _YES_NO:
        offered = _YES_NO[offered.name.lower()]
    if type(offered) is bool:
        return sentence if offered else negation(sentence)
    if _same(offered, sentence) or _same(offered, negation(sentence)):
        return offered
    raise Refused(
        "koinii/answer-mismatch",
        f"a yes/no question is answered yes (or true, or {show(sentence)} itself) or no "
        f"(or false, or {show(negation(sentence))})",
        {"question": show(sentence), "offered": _shown(content)},
    )


def _mismatch(pattern: Term, content: Any, why: str, missing: list[str] | None = None) -> Refused:
    names = " ".join(v.text for v in variables(pattern))
    data: dict[str, Any] = {"pattern": show(pattern), "offered": _shown(content)}
    if missing:
        data["missing"] = missing
    return Refused(
        "koinii/answer-mismatch",
        f"{_shown(content)} does not answer {show(pattern)}: {why}. Answer with a binding "
        f"for {names} (e.g. {{{', '.join(repr(v.text) + ': …' for v in variables(pattern))}}}) "
        "or a ground instance of the pattern",
        data,
    )


def _shown(content: Any) -> str:
    if isinstance(content, dict):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in content.items()) + "}"
    if isinstance(content, str):
        return content
    try:
        return show(content)
    except Refused:
        return repr(content)[:200]


def _same(a: Term, b: Term) -> bool:
    try:
        return show(a) == show(b)
    except Refused:
        return False


def bindings_of(pattern: Term, instance: Term) -> dict[str, Term] | None:
    """The bindings that make `pattern` equal `instance` ({"?db": value}), or None."""
    found = match(pattern, instance, {})
    if found is None:
        return None
    return {var.text: value for var, value in found.items()}


# --- answers -------------------------------------------------------------------------------


def carried_claim(sentence: Term) -> Term | None:
    """The claim an answer carries (its quoted argument 2); None for a legacy answer
    whose content is a bare term, and for anything that is not an answer."""
    if type(sentence) is tuple and sentence[0] is ANSWERS and len(sentence) == 4:
        content = sentence[2]
        if quoted(content):
            return content[1]
    return None


def answer_content(sentence: Term) -> Term:
    """What an answer says, as its author would put it: the claim of a pattern or
    yes/no answer, the content of a free-text one, the bare term of a legacy one."""
    claim = carried_claim(sentence)
    if claim is None:
        return sentence[2]
    if type(claim) is tuple and claim[0] is ANSWER_TO and len(claim) == 3:
        return claim[2]
    return claim
