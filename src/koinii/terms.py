"""Terms: the sentence syntax, its Python model, canonical text and naming roles.

One concept: text in and out of terms — one reader (with its recovery, for reading a
real file a statement at a time, and KIF's few tokens) and one printer, which must agree
on every limit, so they live together.

Invariant: `show` is the one printer and `parse` the one reader, and for every term t
that either accepts, `parse(show(t)) == t` and `show(parse(text))` is the canonical text.
Both refuse what the limits forbid (kind `shape`) so no other layer has to re-check
depth, size, empty lists or functors.

Model: `Sym` (a symbol), `Var` (a variable), `str`, `int`, `float`, `bool`, and tuples
for compounds, whose first element is a `Sym` functor. `Sym` and `Var` are interned (one
object per name), so equality is identity and they never collide with strings.

Quoting: `(quote S)` is a term whose content is data, not logic — its variables are
inert. `is_ground`, `variables` and `substitute` do not look inside it, so a question
`(queries AgentAtlas (quote (usesDatabase ProdCluster ?db)))` is a ground fact, and a
rule or a goal matches a quote only literally (Cyc's `Quote` is the model).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator
from typing import Any, Union

from koinii.errors import Refused

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT",
    "MAX_INT_DIGITS",
    "MAX_TEXT",
    "Sym",
    "Var",
    "Term",
    "brief",
    "parse",
    "parse_all",
    "show",
    "is_ground",
    "variables",
    "substitute",
    "quoted",
    "QUOTE",
    "CONNECTIVES",
    "is_context_name",
    "is_function_name",
    "statements",
    "unsupported_connective",
    "is_individual_name",
    "is_predicate_name",
    "is_type_name",
]

MAX_DEPTH = 64  # deepest list nesting a sentence may have
MAX_TEXT = 64 * 1024  # longest canonical text of a sentence, in UTF-8 bytes
# Most digits an integer may have: Python's own int/str conversion limit (its default),
# so reading and printing a term never raise ValueError, and never take quadratic time.
MAX_INT_DIGITS = 4300
# Longest text `parse` reads, in characters, checked before any tokenising: a sentence at
# the limit with room for spacing and comments. Work on input is bounded by its size.
MAX_INPUT = 4 * MAX_TEXT
_INT_BOUND = 10**MAX_INT_DIGITS

_SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_CONTEXT = re.compile(r"Cx[A-Z][A-Za-z0-9]*\Z")
_INDIVIDUAL = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
_PREDICATE = re.compile(r"[a-z][A-Za-z0-9]*\Z")
_TYPE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*\Z")
_FUNCTION = re.compile(r"[A-Z][A-Za-z0-9]*Fn\Z")

# The logical connectives of KIF (SUO-KIF, CycL) the engine does not implement: each is
# refused by name with what to write instead, never taken for a predicate.
CONNECTIVES = {
    "or": "Koinii has no disjunction: state each alternative as its own claim, and split a "
    "rule (implies (or A B) C) into (implies A C) and (implies B C)",
    "forall": "a rule's ?variables are universal already: write (implies A C)",
    "exists": "Koinii has no existential: name the individual (a constant such as "
    "ProdCluster) and state the claim about it",
    "=>": "write the rule as (implies A C), or load the file as KIF (format 'kif'), "
    "which reads => as implies",
    "<=>": "write both directions as rules: (implies A B) and (implies B A), or load the "
    "file as KIF (format 'kif'), which does that for you",
}


def unsupported_connective(name: str, data: dict[str, Any] | None = None) -> Refused:
    """The refusal of a KIF connective the engine does not implement (CONNECTIVES)."""
    return Refused(
        "unsupported-connective",
        f"`{name}` is a logical connective Koinii does not implement: {CONNECTIVES[name]}",
        {"connective": name, **(data or {})},
    )


def is_context_name(name: str) -> bool:
    """`Cx` + CapitalCamelCase, e.g. `CxDeploy`."""
    return _CONTEXT.match(name) is not None


def is_individual_name(name: str) -> bool:
    """CapitalCamelCase, e.g. `ProdCluster`."""
    return _INDIVIDUAL.match(name) is not None


def is_predicate_name(name: str) -> bool:
    """lowerCamelCase, e.g. `usesDatabase`."""
    return _PREDICATE.match(name) is not None


def is_function_name(name: str) -> bool:
    """CapitalCamelCase ending in Fn, e.g. `MeasureFn`: a function term's functor (Cyc's
    convention), allowed inside a sentence, never as one."""
    return _FUNCTION.match(name) is not None


def is_type_name(name: str) -> bool:
    """snake_case, e.g. `physical_object`; a type takes exactly one argument."""
    return _TYPE.match(name) is not None


_LONGEST_LOCK = threading.Lock()


class Sym:
    """A symbol. Interned: `Sym("a") is Sym("a")`, and `Sym("a") != "a"`."""

    __slots__ = ("name", "__weakref__")
    _interned: dict[str, Sym] = {}
    # The length of the longest name a symbol has had: n symbols show in at most
    # n * (longest + 1) + 1 characters, known without reading each name (a bulk load's
    # check of its sentences' length read a million names from all over memory).
    longest = 0
    name: str

    def __new__(cls, name: str) -> Sym:
        sym = cls._interned.get(name)
        if sym is not None:
            return sym
        if not isinstance(name, str) or not _SYMBOL.match(name) or name in ("true", "false"):
            raise Refused(
                "shape",
                f"{name!r} is not a symbol: a symbol is a letter then letters, digits, _ or -",
                {"symbol": repr(name)},
            )
        return cls._intern(name)

    @classmethod
    def _intern(cls, name: str) -> Sym:
        """A new symbol for a name already checked (by `__new__`, or by `read_flat`'s
        pattern, which admits only symbol names)."""
        sym = object.__new__(cls)
        object.__setattr__(sym, "name", name)
        if len(name) > cls.longest:
            cls._note_length(name)
        return cls._interned.setdefault(name, sym)  # two threads interning at once: one wins

    @classmethod
    def _note_length(cls, name: str) -> None:
        with _LONGEST_LOCK:  # (two threads at once: the longer one stays)
            cls.longest = max(cls.longest, len(name))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Sym is immutable")

    def __reduce__(self):
        return (Sym, (self.name,))

    def __repr__(self) -> str:
        return f"Sym({self.name!r})"

    def __str__(self) -> str:
        return self.name


class Var:
    """A variable, written `?name`. `Var("db")` and `Var("?db")` are the same object."""

    __slots__ = ("name", "text", "__weakref__")
    _interned: dict[str, Var] = {}
    name: str
    text: str

    def __new__(cls, name: str) -> Var:
        var = cls._interned.get(name)
        if var is not None:
            return var
        bare = name[1:] if isinstance(name, str) and name.startswith("?") else name
        if not isinstance(bare, str) or not _SYMBOL.match(bare):
            raise Refused(
                "shape",
                f"{name!r} is not a variable: a variable is ? then a symbol, e.g. ?db",
                {"variable": repr(name)},
            )
        var = cls._interned.get(bare)
        if var is None:
            var = object.__new__(cls)
            object.__setattr__(var, "name", bare)
            object.__setattr__(var, "text", "?" + bare)
            cls._interned[bare] = var
        cls._interned[name] = var
        return var

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Var is immutable")

    def __reduce__(self):
        return (Var, (self.name,))

    def __repr__(self) -> str:
        return f"Var({self.name!r})"

    def __str__(self) -> str:
        return self.text


Term = Union[Sym, Var, str, int, float, bool, tuple]

QUOTE = Sym("quote")


def quoted(term: Term) -> bool:
    """Is `term` a quotation `(quote S)`, whose content is inert data?"""
    return type(term) is tuple and len(term) == 2 and term[0] is QUOTE


# --- printing ---------------------------------------------------------------------------


def show(term: Term) -> str:
    """The canonical text of `term`; refuses (kind `shape`) what is not a valid term."""
    text = _show(term, 0)
    if len(text) > MAX_TEXT // 4 and len(text.encode("utf-8")) > MAX_TEXT:
        raise Refused(
            "shape",
            f"the sentence is {len(text.encode('utf-8'))} bytes; the limit is {MAX_TEXT}",
            {"limit": MAX_TEXT},
        )
    return text


def _show(term: Any, depth: int) -> str:
    cls = type(term)
    if cls is Sym:
        return term.name
    if cls is tuple:
        depth += 1
        if depth > MAX_DEPTH:
            raise Refused("shape", f"nesting deeper than {MAX_DEPTH} lists", {"limit": MAX_DEPTH})
        if not term:
            raise Refused("shape", "an empty list is not a term", {})
        if type(term[0]) is not Sym:
            raise Refused(
                "shape",
                f"the functor must be a symbol, not {_describe(term[0])}",
                {"functor": _describe(term[0])},
            )
        # a symbol, the commonest item, without a call
        return "(" + " ".join([x.name if type(x) is Sym else _show(x, depth) for x in term]) + ")"
    if cls is str:
        try:
            term.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused("shape", "a string holds an unpaired surrogate", {}) from None
        return json.dumps(term, ensure_ascii=False)
    if cls is int:
        if -_INT_BOUND < term < _INT_BOUND:
            return str(term)
        raise _too_many_digits(int(term.bit_length() * 0.30103) + 1, {})
    if cls is bool:
        return "true" if term else "false"
    if cls is Var:
        return term.text
    if cls is float:
        if not math.isfinite(term):
            raise Refused("shape", f"{term!r} is not a finite number", {})
        return repr(term)
    raise Refused("shape", f"{_describe(term)} is not a term", {"type": type(term).__name__})


def _too_many_digits(digits: int, data: dict[str, Any]) -> Refused:
    return Refused(
        "shape",
        f"an integer of {digits} digits; the limit is {MAX_INT_DIGITS} "
        "(write a bigger number as a string)",
        {"limit": MAX_INT_DIGITS, **data},
    )


def _describe(value: Any) -> str:
    if type(value) in (Sym, Var):
        return f"the {type(value).__name__.lower()} {value}"
    return f"a {type(value).__name__} ({brief(value)})"


def brief(value: Any) -> str:
    """`repr(value)` cut to 40 characters, for messages (a huge integer by its size: its
    repr would cost quadratic time, or raise past the conversion limit)."""
    if type(value) is int and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    return f"{value!r:.40}"


# --- reading ----------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|;[^\n]*)
  | (?P<open>\()
  | (?P<close>\))
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>-?\d+(?P<frac>\.\d+)?(?P<exp>[eE][+-]?\d+)?)(?![A-Za-z0-9_.?-])
  | (?P<var>\?[A-Za-z][A-Za-z0-9_-]*)(?![^\s();"])
  | (?P<symbol>[A-Za-z][A-Za-z0-9_-]*)(?![^\s();"])
  | (?P<kif>(?:<=>|=>|@[A-Za-z][A-Za-z0-9_-]*)(?![^\s();"]))
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)


# The commonest sentence, a flat list of symbols in canonical spacing such as
# (usesDatabase ProdCluster Postgres), is read without the tokenizer: every write parses.
_WORD = re.compile(r'[^\s()"]+')  # (what a bad token was meant to be, for its refusal)
_FLAT = re.compile(r"\(([A-Za-z][A-Za-z0-9_-]*(?: [A-Za-z][A-Za-z0-9_-]*)+)\)\Z")


def read_flat(text: str) -> tuple | None:
    """`text` read as a flat list of symbols, if it is one in canonical form (then `text`
    is its canonical text too); None for any other text, which `parse` reads in full."""
    flat = _FLAT.match(text) if len(text) <= MAX_TEXT else None
    if flat is None:
        return None
    names = flat.group(1).split(" ")
    if "true" in names or "false" in names:  # those read as booleans
        return None
    interned = Sym._interned
    return tuple([interned.get(name) or Sym._intern(name) for name in names])


def parse(text: str) -> Term:
    """Read exactly one term from `text` (kind `parse` with the offset on bad syntax)."""
    if type(text) is str:
        if len(text) > MAX_INPUT:
            raise Refused(
                "shape",
                f"the text is {len(text)} characters; one sentence is read from at most "
                f"{MAX_INPUT} (its canonical text at most {MAX_TEXT} bytes)",
                {"limit": MAX_INPUT},
            )
        flat = read_flat(text)
        if flat is not None:
            return flat
    terms = [term for term, _, _ in _located(text, _read(text))]
    if len(terms) != 1:
        raise _at(
            text,
            Refused(
                "parse",
                "expected one term, found " + ("nothing" if not terms else f"{len(terms)}"),
                {"offset": 0 if not terms else len(text)},
            ),
        )
    return terms[0]


def parse_all(text: str, *, kif: bool = False) -> list[Term]:
    """Read every term in `text` (a vocabulary file: sentences, `;` comments); a refusal
    names the line and column of what it refuses. `kif=True` reads KIF's own tokens
    too (see `IFF`)."""
    return [term for term, _, _ in _located(text, _read(text, 0, kif))]


def statements(text: str, *, kif: bool = False) -> Iterator[tuple[int, int, Term | Refused]]:
    """Every top-level statement of `text` as `(line, column, term)`, or `(line, column,
    refusal)` for one that does not read — and reading goes on after a bad statement at
    the next top-level one: the bad one is skipped whole, to where its parentheses
    balance from its start (strings and `;` comments respected), never into its middle,
    so no sub-expression of it is ever read as a statement of its own. A statement whose
    parentheses never balance runs to the end of the text. For loading real files a
    statement at a time; each line number costs only the text since the last one."""
    if not isinstance(text, str):
        raise Refused("parse", f"expected text, got {type(text).__name__}", {"offset": 0})
    lines = _Lines(text)
    position = 0
    while position < len(text):
        try:
            for term, start, end in _read(text, position, kif):
                position = end
                line, column = lines.at(start)
                yield line, column, term
            return
        except Refused as refusal:
            start = _GAP.match(text, position).end()  # where the bad statement begins
            offset = refusal.data.get("offset")
            line, column = lines.at(offset if type(offset) is int else start)
            yield line, column, _at(text, refusal, (line, column))
            position = _statement_end(text, start)


# What lies between statements, and the tokens that matter for skipping a bad one: its
# parentheses, outside strings and comments (the same string and comment syntax `_read`
# reads, so the skip and the reader agree on where a statement ends).
_GAP = re.compile(r"(?:\s+|;[^\n]*)*")
_SKIP = re.compile(r'\s+|;[^\n]*|"(?:[^"\\]|\\.)*"|[()]|[^\s;"()]+|.', re.DOTALL)


def _statement_end(text: str, start: int) -> int:
    """Where the statement that begins at `start` ends: after the `)` that balances its
    first `(` (or after its one token, if it is not a list; or the text's end)."""
    depth = 0
    for match in _SKIP.finditer(text, start):
        token = match.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth <= 0:
                return match.end()
        elif depth == 0 and not token.isspace() and token[0] != ";":
            return match.end()
    return len(text)


class _Lines:
    """Line and column of offsets met in increasing order, each counted from the last
    (counting from the text's start for each statement made loading a file quadratic:
    34,502 statements of a 3.9 MB file spent most of their time counting newlines)."""

    __slots__ = ("text", "offset", "line")

    def __init__(self, text: str) -> None:
        self.text, self.offset, self.line = text, 0, 1

    def at(self, offset: int) -> tuple[int, int]:
        if offset < self.offset:
            self.offset, self.line = 0, 1
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line, offset - self.text.rfind("\n", 0, offset)


def _located(text: str, read: Iterator[tuple[Term, int, int]]) -> Iterator[tuple[Term, int, int]]:
    """`read`, its refusals given the line and column of their offset."""
    try:
        yield from read
    except Refused as refusal:
        raise _at(text, refusal) from None


def _at(text: str, refusal: Refused, place: tuple[int, int] | None = None) -> Refused:
    offset = refusal.data.get("offset")
    if type(offset) is not int or "line" in refusal.data or not isinstance(text, str):
        return refusal
    line, column = place or _line_column(text, offset)
    return Refused(
        refusal.kind,
        f"{refusal.message} (line {line}, column {column})",
        {**refusal.data, "line": line, "column": column},
    )


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - text.rfind("\n", 0, offset)


# KIF's own tokens, read with `kif=True` (koinii.kb.kif maps what they mean): `=>` reads
# as `implies`, `<=>` as this symbol, which no text can name otherwise, and a list may
# begin with a ?variable (a quantifier's variable list). A row variable (`@ROW`) is
# refused by name. Without `kif`, each is refused as before: not Koinii's syntax.
IFF = Sym._intern("<=>")
_IMPLIES = Sym("implies")


def _kif_token(token: str, kif: bool, offset: int) -> Sym:
    if token.startswith("@"):
        if not kif:
            raise Refused("parse", "unexpected '@'", {"offset": offset})
        raise Refused(
            "row-variable",
            f"{token} is a row variable (a variable for any number of arguments), which "
            "Koinii does not implement: write the statement once for each number of "
            "arguments you need, with a ?variable for each",
            {"offset": offset, "variable": token},
        )
    if not kif:
        raise unsupported_connective(token, {"offset": offset})
    return _IMPLIES if token == "=>" else IFF


def _read(text: str, position: int = 0, kif: bool = False) -> Iterator[tuple[Term, int, int]]:
    """Each top-level term from `position` on, with the offsets it starts and ends at."""
    if not isinstance(text, str):
        raise Refused("parse", f"expected text, got {type(text).__name__}", {"offset": 0})
    stack: list[list[Any]] = []
    starts: list[int] = []
    for match in _TOKEN.finditer(text, position):
        kind = match.lastgroup
        if kind == "space":
            continue
        offset = match.start()
        if kind == "open":
            if len(stack) >= MAX_DEPTH:
                raise Refused(
                    "shape",
                    f"nesting deeper than {MAX_DEPTH} lists",
                    {"limit": MAX_DEPTH, "offset": offset},
                )
            stack.append([])
            starts.append(offset)
            continue
        if kind == "close":
            if not stack:
                raise Refused("parse", "unbalanced ')'", {"offset": offset})
            items = stack.pop()
            start = starts_of_top = starts.pop()
            if not items:
                raise Refused("shape", "an empty list is not a term", {"offset": start})
            if type(items[0]) is not Sym and not (kif and type(items[0]) is Var):
                raise Refused(
                    "shape",
                    f"the functor must be a symbol, not {_describe(items[0])}",
                    {"offset": start, "functor": _describe(items[0])},
                )
            value: Any = tuple(items)
        elif kind == "symbol":
            name = match.group()
            value = True if name == "true" else False if name == "false" else Sym(name)
        elif kind == "var":
            value = Var(match.group())
        elif kind == "kif":
            value = _kif_token(match.group(), kif, offset)
        elif kind == "number":
            token = match.group()
            if match.group("frac") is None and match.group("exp") is None:
                digits = len(token) - (token[0] == "-")
                if digits > MAX_INT_DIGITS:
                    raise _too_many_digits(digits, {"offset": offset})
                value = int(token)
            else:
                value = float(token)
                if not math.isfinite(value):
                    raise Refused("parse", f"{token} is out of range", {"offset": offset})
        elif kind == "string":
            try:
                value = json.loads(match.group(), strict=False)
                value.encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                raise Refused("parse", "bad escape in a string", {"offset": offset}) from None
        else:
            word = _WORD.match(text, offset)
            if word is not None and not word.group().isascii():
                raise Refused(
                    "parse",
                    f"{word.group()!r} is not a symbol: symbols are ASCII (letters, digits, "
                    f'- and _); quote text with other characters: "{word.group()}"',
                    {"offset": offset},
                )
            what = "an unterminated string" if match.group() == '"' else repr(match.group())
            raise Refused("parse", f"unexpected {what}", {"offset": offset})
        if stack:
            stack[-1].append(value)
        else:
            start = starts_of_top if kind == "close" else offset
            span = match.end() - start
            if span > MAX_TEXT // 4 and len(text[start : match.end()].encode("utf-8")) > MAX_TEXT:
                raise Refused(
                    "shape",
                    f"the sentence is over {MAX_TEXT} bytes",
                    {"limit": MAX_TEXT, "offset": start},
                )
            yield value, start, match.end()
    if stack:
        raise Refused("parse", "unbalanced '(': the list is never closed", {"offset": starts[-1]})


# --- structure --------------------------------------------------------------------------


def is_ground(term: Term) -> bool:
    """True when `term` holds no variable outside a quotation."""
    if type(term) is tuple:
        return term[0] is QUOTE or all(is_ground(x) for x in term)
    return type(term) is not Var


def variables(term: Term) -> list[Var]:
    """The variables of `term` outside quotations, each once, in order of first appearance."""
    seen: dict[Var, None] = {}
    _collect_variables(term, seen)
    return list(seen)


def _collect_variables(term: Term, seen: dict[Var, None]) -> None:
    cls = type(term)
    if cls is Var:
        seen[term] = None
    elif cls is tuple and term[0] is not QUOTE:
        for x in term:
            cls = type(x)
            if cls is Var:
                seen[x] = None
            elif cls is tuple:
                _collect_variables(x, seen)


def substitute(term: Term, bindings: dict[Var, Term]) -> Term:
    """`term` with each bound variable outside quotations replaced by its value."""
    cls = type(term)
    if cls is Var:
        return bindings.get(term, term)
    if cls is tuple:
        if term[0] is QUOTE:
            return term
        return tuple([substitute(x, bindings) for x in term])
    return term
