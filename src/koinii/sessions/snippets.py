"""A search hit's snippets: the words a search matched, in a window of their text.

A snippet is about SNIPPET_TOKENS tokens of one field of one turn (the newest matching
turn, or the best one when the search ranks by relevance), `…` where the text was cut:
the window that shows the most distinct search terms (`window`). A turn's fields can be
megabytes (everything its tools returned), and cutting all of it into words took most of
a search's time (issue 42); so only the field that matched is read, and a long one is
windowed only around its matches (`region`): the first HITS_PER_TERM places of each
term, found by plain substring search, choose the REGION_CHARS holding the most distinct
terms, and only that region is cut into words. `marked` cuts a snippet into the pieces
a reader highlights.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

SNIPPET_TOKENS = 20  # the width of a request/reply/tool snippet window
REGION_CHARS = 1_000  # a long text's region around its matches, windowed
HITS_PER_TERM = 50  # places of each term a long text's region is chosen among
ELLIPSIS = "…"
WORD = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer keeps as a token
_SPACE = re.compile(r"\s")


def snippets(db: Any, wanted: dict[str, list[int]], terms: list[str]) -> dict[tuple[int, str], str]:
    """(turn, field) → its snippet, for the `wanted` turns of each field (`request`,
    `reply`, `tools` of turn_text): the matched fields alone are read."""
    found = {}
    for field, turns in wanted.items():
        marks = ", ".join("?" for _ in turns)
        rows = db.execute(f"SELECT n, {field} FROM turn_text WHERE n IN ({marks})", turns)
        for turn, text in rows:
            if text:
                found[turn, field] = snippet(text, terms)
    return found


def snippet(text: str, terms: list[str]) -> str:
    """The `window` of `text`, looked for only in the region of its matches when it is
    long (module docstring), `…` where the text was cut."""
    if len(text) <= 4 * REGION_CHARS:
        return window(text, terms)
    start, end = region(text, terms)
    chosen = window(text[start:end], terms)
    if start > 0 and not chosen.startswith(ELLIPSIS):
        chosen = ELLIPSIS + chosen
    if end < len(text) and not chosen.endswith(ELLIPSIS):
        chosen += ELLIPSIS
    return chosen


def region(text: str, terms: list[str]) -> tuple[int, int]:
    """[start, end) of the REGION_CHARS of `text` that hold the most distinct `terms`
    among the first HITS_PER_TERM places of each (case folded; a term missed this way,
    e.g. by its diacritics, leaves the region at the text's start), cut at white space."""
    lowered = text.lower()
    if len(lowered) != len(text):  # (a few characters lower into two): places would shift
        lowered = text
    hits = []
    for number, term in enumerate(terms):
        needle = term.lower()
        at, count = lowered.find(needle), 0
        while at >= 0 and count < HITS_PER_TERM:
            hits.append((at, number))
            at, count = lowered.find(needle, at + len(needle)), count + 1
    hits.sort()
    best, first = 0, 0
    for at, (place, _) in enumerate(hits):
        seen = {term for later, term in hits[at:] if later < place + REGION_CHARS // 2}
        if len(seen) > best:
            best, first = len(seen), place
    start = max(0, first - REGION_CHARS // 4)
    end = min(len(text), start + REGION_CHARS)
    if start > 0:
        space = _SPACE.search(text, start, end)
        start = space.end() if space else start
    if end < len(text):
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
        end = cut if cut > start else end
    return start, end


def window(text: str, terms: list[str]) -> str:
    """SNIPPET_TOKENS tokens of `text` around the matches, `…` where the text was cut.

    The window is the one that shows the most distinct search terms (the earliest of
    those), opened a little before its first match, so a multi-word search shows its
    words together where the text has them together, and always at least one of them
    when the text has any."""
    term_of = _term_of(terms)
    tokens = list(WORD.finditer(text))
    hits = [(i, t) for i, token in enumerate(tokens) if (t := term_of(token.group())) is not None]
    first = last = 0
    best = 0
    for at, (i, _) in enumerate(hits):
        seen, end = set(), i
        for j, t in hits[at:]:
            if j >= i + SNIPPET_TOKENS:
                break
            seen.add(t)
            end = j
        if len(seen) > best:
            best, first, last = len(seen), i, end
            if best == len(terms):
                break
    lead = max(0, min(SNIPPET_TOKENS // 4, SNIPPET_TOKENS - 1 - (last - first)))
    start = max(0, min(first - lead, len(tokens) - SNIPPET_TOKENS))
    chosen = tokens[start : start + SNIPPET_TOKENS]
    if not chosen:
        return text.strip()
    head = 0 if start == 0 else chosen[0].start()
    tail = len(text) if start + SNIPPET_TOKENS >= len(tokens) else chosen[-1].end()
    return (
        (ELLIPSIS if head else "")
        + text[head:tail].strip()
        + (ELLIPSIS if tail < len(text) else "")
    )


def opening(text: str) -> str:
    """The first SNIPPET_TOKENS tokens of `text` (a hit by meaning alone shows this)."""
    tokens = list(WORD.finditer(text))
    if len(tokens) <= SNIPPET_TOKENS:
        return text.strip()
    return text[: tokens[SNIPPET_TOKENS - 1].end()].strip() + ELLIPSIS


def marked(text: str, terms: list[str]) -> list[tuple[str, bool]]:
    """`text` cut into pieces, each with whether it is a word the search's `terms` match
    (by the rule that chose the snippet): what a reader highlights."""
    term_of = _term_of(terms)
    pieces: list[tuple[str, bool]] = []
    at = 0
    for token in WORD.finditer(text):
        if term_of(token.group()) is not None:
            if token.start() > at:
                pieces.append((text[at : token.start()], False))
            pieces.append((token.group(), True))
            at = token.end()
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def folded(word: str) -> str:
    """Case and diacritics folded, as the full-text index folds them."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def forms(word: str) -> list[str]:
    """A (case folded) word and its English forms, which a search for it finds: its base
    (`failing`, `fails`, `failed` → `fail`; `retries` → `retry`; `running` → `run`) with
    the endings s or es, ed and ing, spelled as English spells them (`invoice` →
    `invoiced`, `invoicing`; `retry` → `retries`; `run` → `running`). A base too short,
    or without a vowel (`string`), is the word itself."""
    base = word
    if word.endswith("ies") and len(word) > 4:
        base = word[:-3] + "y"
    elif word.endswith(("ing", "ed")) and len(word) >= 5:
        base = word[: -3 if word.endswith("ing") else -2]
        if base[-1] == base[-2] and base[-1] not in "lsz":
            base = base[:-1]  # running → run, stopped → stop
        elif word.endswith("ed"):
            base += " "  # created → creat: create too (marked here, taken off below)
    elif word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        base = word[:-2]
    elif word.endswith("s") and not word.endswith("ss") and len(word) >= 4:
        base = word[:-1]
    silent_e, base = base.endswith(" "), base.rstrip()
    if len(base) < 3 or not any(vowel in base for vowel in "aeiouy"):
        base, silent_e = word, False
    plural = "es" if base.endswith(("s", "x", "z", "ch", "sh")) else "s"
    found = [word, base]
    if len(base) < 3:
        return list(dict.fromkeys([*found, base + plural]))
    if base.endswith("e"):
        found += [base + "s", base + "d", base[:-1] + "ing"]
    elif base.endswith("y") and base[-2] not in "aeiou":
        found += [base[:-1] + "ies", base[:-1] + "ied", base + "ing"]
    else:
        found += [base + plural, base + "ed", base + "ing"]
    if silent_e:
        found += [base + "e", base + "es"]
    vowels = [letter in "aeiou" for letter in base[-3:]]
    if vowels == [False, True, False] and base[-1] not in "wxy":
        found += [base + base[-1] + "ing", base + base[-1] + "ed"]  # run → running
    return list(dict.fromkeys(found))


def _term_of(terms: list[str]) -> Callable[[str], int | None]:
    """Which search term a token matches (its index), or None: one of a term's forms,
    or the last term as a prefix — the rule of the full-text query (search.py)."""
    exact: dict[str, int] = {}
    for number, term in enumerate(terms):
        for form in forms(folded(term)):
            exact.setdefault(form, number)
    prefix = folded(terms[-1]) if terms else None

    def term_of(token: str) -> int | None:
        word = folded(token)
        if word in exact:
            return exact[word]
        return len(terms) - 1 if prefix is not None and word.startswith(prefix) else None

    return term_of
