"""What a search text looks for: its typed words, each with the other forms that stand for
it — a compound joined or split, a typo's nearest stored word — found in the words the
store holds (`Terms`), and how strongly a ranked list's best hit matched them (docs/search.md).

Invariants:
- A typed word is a *group*: the word and its forms (`k8s` also as `k8s` whole, `ProdCluster`
  also as "prodcluster"), its joins with the next word ("roll back" → "rollback", "log
  in" → "login") and its splits ("rollback" → the phrase "roll back"), the joins and
  splits only where the store holds the words they make. A hit matches a group when it
  holds any of its terms; `coverage` is the share of groups a hit matches.
- An abbreviation in a short general list (`pg`, `k8s`, `db`, `prod`, …) stands for its
  long form too, and the long form for it.
- A typo is corrected only where the typed word is stored nowhere, nor a variant of it
  ("reviews" where "review" is): a word the store holds is never searched as another, so
  a rare word is not turned into a common one. The correction is one edit away (a
  letter left out, added, changed, or two swapped) for words of at least
  TYPO_ANY_EDIT_LETTERS letters; a word of TYPO_MIN_LETTERS up to that, which has more
  stored neighbours, is corrected only for the commonest slips — a letter left out
  ("dunnig" → "dunning") or two swapped; the most used first, at most TYPO_CANDIDATES.
- A compound joined from two typed words stands for its abbreviation too ("data base"
  → "database" → "db").
- A date the search names ("april", "2026-04-09": `dates_of_search`) is one typed word,
  its group the date's words and year-first phrases; a sentence recorded in it matches
  that group too (`coverage` given its `created`).
- A question word asking for a time ("when", "how often", "how long":
  `dates_of_search.asked_in`) is one typed word too, its group what such an answer
  holds; `Query.asked` names these groups (a hit holding only them holds nothing asked).
- `Terms` counts the words of what was indexed (handles up to its `top`, each once); it is
  never told of a retraction, so a count may include a sentex no longer stored — a
  correction or a split that then matches nothing costs one more term in the query.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from koinii.kb.dates_of_search import Date, asked_in, dates_in
from koinii.kb.store.fulltext import _CHUNK, STOP_WORDS, _split, document

TYPO_MIN_LETTERS = 6  # shorter words have too many stored neighbours one edit away
TYPO_ANY_EDIT_LETTERS = 7  # below: only a letter left out or two swapped
TYPO_MAX_LETTERS = 30  # a longer "word" (a hash, a pasted token) is not corrected
TYPO_CANDIDATES = 2  # stored words a typo is searched as, at most
SPLIT_MIN_PART = 2  # "log in": the shorter part of a split may be two letters
COMPOUNDS = True  # joins, splits and typos (a switch for benchmarks/recall.py's "before")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"

# The abbreviations every engineer types, each searched as its long form too (and the
# long form as the abbreviation): a short, general list — a team's own jargon is not
# guessed. A typed word that is stored is still searched as itself first.
# fmt: off
_ABBREVIATIONS = {
    "pg": "postgres", "k8s": "kubernetes", "db": "database", "prod": "production",
    "env": "environment", "auth": "authentication", "repo": "repository",
    "config": "configuration", "infra": "infrastructure", "msg": "message",
    "perf": "performance", "deps": "dependencies", "dev": "development",
}
# fmt: on
ABBREVIATIONS = {**_ABBREVIATIONS, **{long: short for short, long in _ABBREVIATIONS.items()}}


class Terms:
    """How many indexed sentexes hold each word (lower case, unstemmed), for the joins,
    splits and typos of `expand`. Caught up by handle like the vectors (see search.py)."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.stems: set[str] = set()  # the words' crude stems: a stored word's variant
        self.top = 0  # the highest handle whose words were counted

    def add(self, texts: Iterable[str]) -> None:
        count = self.count
        for text in texts:
            for word in set(_CHUNK.findall(text)):
                if word not in count:
                    count[word] = 0
                    self.stems.add(_stem(word))
                count[word] += 1

    def __contains__(self, word: str) -> bool:
        return word in self.count


@dataclass
class Query:
    """A search text as terms: `words`, what the store is asked for (words, forms,
    phrases), and `groups`, each typed word's terms (see the module docstring)."""

    words: list[str]
    groups: list[frozenset[str]] = field(default_factory=list)
    dates: dict[int, Date] = field(default_factory=dict)  # group index → the date it is
    asked: set[int] = field(default_factory=set)  # groups of a time the search asks for

    def without_asked(self) -> list[str]:
        """`words` less the terms only a time the search asks for holds: a narrower ask
        where the hits are known already (an entity's facts), since a year's or a
        weekday's name is held by many sentences, each of which the store would rank."""
        if not self.asked:
            return self.words
        kept = {w for i, g in enumerate(self.groups) if i not in self.asked for w in g}
        only = {w for i in self.asked for w in self.groups[i]} - kept
        return [w for w in self.words if w not in only]


def plain(text: str) -> Query:
    """The search's own words and forms, nothing looked up (the words the store is
    asked for when it has no `Terms`; the groups for `coverage`)."""
    return _query(text, None, None)


def expand(text: str, terms: Terms, now_ms: int | None = None) -> Query:
    """`plain`, with each group's joins, splits and typo corrections found in `terms`,
    and the dates it names (a month without a year: around `now_ms`)."""
    return _query(text, terms if COMPOUNDS else None, now_ms)


def _query(text: str, terms: Terms | None, now_ms: int | None) -> Query:
    chunks = [c for c in _CHUNK.findall(text)]
    groups: list[set[str]] = []
    lowered = [c.lower() for c in chunks]
    named = {d.first: d for d in dates_in(chunks, now_ms)} if now_ms is not None else {}
    wanted = asked_in(lowered, now_ms) if now_ms is not None else {}
    dates: dict[int, Date] = {}
    asked: set[int] = set()
    past = 0  # the chunks up to here are a date's
    for i, chunk in enumerate(chunks):
        if i in named:
            dates[len(groups)] = named[i]
            groups.append(set(named[i].terms))
            past = named[i].past
        if i < past:
            continue
        if i in wanted:
            asked.add(len(groups))
            groups.append(set(wanted[i]))
            continue
        parts, forms = _split(chunk)
        whole = forms[-1] if forms and forms[-1] == lowered[i] else None
        group = {p for p in parts if whole is None or len(p) > 1} | set(forms)
        group -= STOP_WORDS
        if terms is not None and lowered[i] in ABBREVIATIONS:
            group.add(ABBREVIATIONS[lowered[i]])
        if terms is not None and lowered[i].isalpha():
            word = lowered[i]
            if i + 1 < len(chunks) and lowered[i + 1].isalpha():
                joined = word + lowered[i + 1]
                if joined in terms:
                    group.add(joined)  # "roll back" → "rollback" (the next word's too)
                    group.update(_abbreviated(joined))
            if i > 0 and lowered[i - 1].isalpha() and lowered[i - 1] + word in terms:
                group.add(lowered[i - 1] + word)
                group.update(_abbreviated(lowered[i - 1] + word))
            if word not in STOP_WORDS:
                group.update(_splits(word, terms))
                if (
                    TYPO_MIN_LETTERS <= len(word) <= TYPO_MAX_LETTERS
                    and word not in terms
                    and _stem(word) not in terms.stems  # "reviews" where "review" is stored
                ):
                    group.update(_corrections(word, terms))
        if group:
            groups.append(group)
    words = list(dict.fromkeys(w for g in groups for w in sorted(g, key=_typed_first(g))))
    return Query(words, [frozenset(g) for g in groups], dates, asked)


def _typed_first(group: set[str]):  # keeps the store's query text stable
    return lambda w: (" " in w, w)


def _splits(word: str, terms: Terms) -> list[str]:
    """The phrases a compound splits into where the store holds both parts ("rollback" →
    "roll back"); the most used parts first, at most two."""
    found = []
    for cut in range(SPLIT_MIN_PART, len(word) - SPLIT_MIN_PART + 1):
        head, tail = word[:cut], word[cut:]
        if min(len(head), len(tail)) < 3 and max(len(head), len(tail)) < 4:
            continue
        if head in terms and tail in terms:
            found.append((min(terms.count[head], terms.count[tail]), f"{head} {tail}"))
    return [phrase for _, phrase in sorted(found, reverse=True)[:2]]


def _abbreviated(word: str) -> tuple[str, ...]:
    return (ABBREVIATIONS[word],) if word in ABBREVIATIONS else ()


def _corrections(word: str, terms: Terms) -> list[str]:
    """The stored words one edit from `word`, the most used first (TYPO_CANDIDATES); for
    a shorter word only those it misses a letter of, or has two letters of swapped."""
    near: set[str] = set()
    any_edit = len(word) >= TYPO_ANY_EDIT_LETTERS
    for i in range(len(word) + 1):
        head, tail = word[:i], word[i:]
        if tail:
            if any_edit:
                near.add(head + tail[1:])  # a letter typed too many
            if len(tail) > 1:
                near.add(head + tail[1] + tail[0] + tail[2:])  # two swapped
        for letter in _LETTERS:
            near.add(head + letter + tail)  # a letter left out
            if tail and any_edit:
                near.add(head + letter + tail[1:])  # one changed
    near.discard(word)
    found = [(terms.count[w], w) for w in near if w in terms.count and w not in STOP_WORDS]
    return [w for _, w in sorted(found, reverse=True)[:TYPO_CANDIDATES]]


def covered_by(query: Query, nodes: Sequence[Any]) -> set[int]:
    """The indexes of the query's groups that the sentexes `nodes` (engine nodes: an
    `atom` and a `created` stamp) hold between them."""
    text = " ".join(" ".join(document(node.atom)) for node in nodes)
    return covered(query.groups, text, [node.created for node in nodes], query.dates)


def held_by(query: Query, node: Any) -> float:
    """The share of the query's typed words the sentex `node` holds (0 for no groups)."""
    return len(covered_by(query, [node])) / len(query.groups) if query.groups else 0.0


def coverage(
    groups: Sequence[frozenset[str]],
    document: str,
    created: Sequence[int] = (),
    dates: dict[int, Date] | None = None,
) -> float:
    """The share of `groups` that `document` (an index row's two texts) matches (see
    `covered`)."""
    return len(covered(groups, document, created, dates)) / len(groups) if groups else 0.0


def covered(
    groups: Sequence[frozenset[str]],
    document: str,
    created: Sequence[int] = (),
    dates: dict[int, Date] | None = None,
) -> set[int]:
    """The indexes of the `groups` that `document` (an index row's two texts, or several
    rows' joined) matches, each word compared by a crude stem (the store stems; this only
    has to tell a strong match from a weak one); a date's group also by a sentence
    recorded in it (`created`: the documents' epoch-ms stamps)."""
    tokens = _CHUNK.findall(document.lower())
    held = set(tokens)
    stems = {_stem(w) for w in held}
    text = None
    matched: set[int] = set()
    for index, group in enumerate(groups):
        for term in group:
            if " " in term:
                if text is None:
                    text = " " + " ".join(tokens) + " "
                if f" {term} " in text:
                    break
            elif term in held or _stem(term) in stems:
                break
        else:
            date = dates.get(index) if dates else None
            if date is None or not any(date.holds(stamp) for stamp in created):
                continue
        matched.add(index)
    return matched


_SUFFIXES = (
    *("ations", "ation", "ings", "ing", "edly", "ers", "er", "ed", "es", "s", "e", "ity"),
    "y",
)


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A crude stem (one common suffix off): enough to see "caused" and "cause",
    "renders" and "render", or "severe" and "severity" as one word — `coverage` only
    has to tell a strong match from a weak one; the store's own stemmer ranks."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word
