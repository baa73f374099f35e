"""The full-text index over stored sentexes: what a sentence reads as, and its tables.

A sentence is indexed as words (`document`): each symbol split at its case and digit
boundaries (`postgresMajorVersion` → "postgres major version", `PostgreSQL16` →
"postgre sql 16", plus "postgresql" — a symbol's letters run together, so the name typed
in lower case finds it too), strings verbatim (answers' free text, grounds, wrap notes),
numbers as written; variables are not words. A row holds two texts: `words`, what a
reader recognises (snippets are cut from it), and `extra`, the forms only a search needs
(joined symbols, a string's camelCase tokens split). A search text is cut the same way
(`query_words`), so `ProdCluster` in a search finds "prod cluster" in a claim.

Invariant: the table `sentex_words` holds one row per stored sentex — written in the
same transaction as the sentex's row and deleted with it. A sentex's text never changes,
so it is indexed once, when it is new: a store writes index rows only for handles above
the highest it has indexed (`fresh`) — handles are never reused, and a sentex written
again (its provenance changed) was indexed when it was new.

On PostgreSQL the search structure is part of that row: a generated `tsvector` column
(the `english` configuration: stemming, stop words) under a GIN index. On SQLite it is
an FTS5 index over the rows (porter stemming, unicode61; external content: the text is
stored once), brought up to date from `sentex_words` by the writer (`sqlite_catch_up`):
before every search in one process, in bounded slices by a daemon (which a search
waits for: server/searching.py); the rows above `koinii_meta.fts_top` are added to it
in one transaction. Kept in every write's own transaction instead, FTS5 writes a new segment
per commit — measured, it made a single durable assert four times slower — while a
search, run by the same single writer, always catches up first, so it never sees less
than what is committed. A sentex deleted after it was added to FTS5 is taken out of it
in the deleting transaction (`SQLITE_UNINDEX`, for handles at or below the mark); one
deleted before is simply never added. A store opened from before the index existed gets
it by schema migrations (the rows backfilled, FTS5 filled at the first search).

Ranking: SQLite's `bm25()`; PostgreSQL's `ts_rank` normalised by document length (it
has no BM25). Either way a row matching more of the words ranks first (on SQLite rarer
words also count more); ties go to the older sentex (lower handle). Scores are the
backend's own: only their order means anything.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from koinii.errors import Refused
from koinii.terms import Sym, Var, parse

MAX_WORDS = 32  # words a search may hold
MAX_SEARCH_TEXT = 1000  # characters a search text may hold
SNIPPET_TOKENS = 16
MAX_WHOLE = 24  # a mixed run longer than this (a hash, an id) is not also kept whole
# Keep a run that mixes letters and digits whole as well as split (`k8s`). A switch only
# so that benchmarks/recall.py can measure the index as it was before, in the same run.
WHOLE_RUNS = True

Ranked = tuple[int, float, "str | None"]  # (handle, score, snippet or None)

_CHUNK = re.compile(r"[^\W_]+")  # what unicode61 keeps as a token: letters and digits
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_DIGITS = re.compile(r"[0-9]+|[^0-9]+")
_MIXED = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")  # k8s, p99, ec2

# Words too common to search by: dropped from a search (PostgreSQL's `english`
# configuration drops these and more from documents too), so both stores answer alike.
# fmt: off
STOP_WORDS = frozenset({
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for",
    "from", "has", "have", "how", "i", "in", "into", "is", "it", "its", "me", "my", "of", "on",
    "or", "our", "that", "the", "their", "there", "they", "this", "to", "us", "was", "we",
    "were", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
})
# fmt: on


@functools.lru_cache(maxsize=65536)
def _split(chunk: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A run of letters and digits as its words, lower case, and — when it split — the
    forms it is also found by: its letters run together (`ProdCluster`: "prod",
    "cluster"; "prodcluster") and, where it mixes letters and digits, the whole run
    (`k8s`: "k", "8", "s"; "ks", "k8s"), and each such run between case boundaries
    (`k8sNamespace`: "k8s"; `latencyP99Ms`: "p99") — so `k8s`, `s3` or `ec2` is one word
    too."""
    if chunk.isascii():
        parts = _CAMEL.findall(chunk)
    else:  # no case boundaries outside ASCII: letters and digits apart
        parts = _DIGITS.findall(chunk)
    words = tuple(p.lower() for p in parts)
    if len(words) <= 1:
        return words, ()
    forms: list[str] = []
    letters = "".join(p for p in words if not p.isdigit())
    if letters and letters not in words:
        forms.append(letters)
    if WHOLE_RUNS and not chunk.isalpha() and not chunk.isdigit():
        # the runs of letters and digits between case boundaries, and the whole chunk
        for run in [*_MIXED.findall(chunk), chunk] if chunk.isascii() else [chunk]:
            whole = run.lower()
            if (
                not whole.isalpha()
                and not whole.isdigit()
                and len(whole) <= MAX_WHOLE
                and whole not in words
                and whole not in forms
            ):
                forms.append(whole)
    return words, tuple(forms)


@functools.lru_cache(maxsize=65536)
def _symbol_words(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A symbol's words and its joined forms (cached: the same symbols recur in every
    write, and the index row is computed on the writer's path)."""
    words: list[str] = []
    joined: list[str] = []
    for chunk in _CHUNK.findall(name):
        parts, forms = _split(chunk)
        words.extend(parts)
        joined.extend(forms)
    return tuple(words), tuple(joined)


def text_words(text: str) -> list[str]:
    """The words of free text or a symbol's name: each run split, then its joined forms."""
    out: list[str] = []
    for chunk in _CHUNK.findall(text):
        words, forms = _split(chunk)
        out.extend(words)
        out.extend(forms)
    return out


def document(term: Any) -> tuple[str, str]:
    """What the index holds for a sentence (its positive atom), as two texts: the words
    a reader recognises — the symbols' words, then the strings — which snippets are cut
    from; and the forms only a search needs (joined symbols, split string tokens)."""
    symbols: list[str] = []
    strings: list[str] = []
    extra: list[str] = []
    _collect(term, symbols, strings, extra)
    for text in strings:
        # a camelCase or digit-joined token inside a string is also found by its parts
        for chunk in _CHUNK.findall(text):
            words, forms = _split(chunk)
            if len(words) > 1:
                extra.extend(words)
            extra.extend(forms)
    parts = [" ".join(symbols)] if symbols else []
    parts.extend(strings)
    return " · ".join(parts), " ".join(extra)


def _collect(term: Any, symbols: list[str], strings: list[str], extra: list[str]) -> None:
    cls = type(term)
    if cls is tuple:
        for part in term:
            _collect(part, symbols, strings, extra)
    elif cls is Sym:
        words, joined = _symbol_words(term.name)
        symbols.extend(words)
        extra.extend(joined)
    elif cls is str:  # a NUL is no word, and PostgreSQL's text refuses it
        strings.append(term.replace("\x00", " "))
    elif cls is Var:
        return
    elif cls is bool:
        symbols.append("true" if term else "false")
    else:  # int, float
        symbols.append(str(term))


def query_words(text: str) -> list[str]:
    """The distinct words a search looks for, stop words left out (may be empty)."""
    seen = dict.fromkeys(w for w in text_words(text) if w not in STOP_WORDS)
    return list(seen)


def row(handle: int, atom: Any) -> tuple[int, str, str]:
    return (handle, *document(atom))


def rows_of_text(handles_and_texts: Iterable[tuple[int, str]]) -> list[tuple[int, str, str]]:
    """Index rows for stored (handle, atom text) pairs (the migration and imports)."""
    return [(h, *document(parse(text))) for h, text in handles_and_texts]


INSERT_WORDS = "INSERT INTO sentex_words (handle, words, extra) VALUES (?, ?, ?)"
DELETE_WORDS = "DELETE FROM sentex_words WHERE handle = ?"
TOP = "SELECT COALESCE(MAX(handle), 0) FROM sentex_words"


def fresh(nodes: Sequence[Any], top: int) -> tuple[list[Any], int]:
    """The `nodes` not indexed yet (handles above `top`), and the new top: their rows are
    made (`row`) as the statement binds them, not held all at once."""
    new = [n for n in nodes if n.handle > top]
    return new, max(top, max((n.handle for n in new), default=top))


# --- SQLite (and the in-memory store's SQLite) -------------------------------------------

SQLITE_WORDS = """
CREATE TABLE IF NOT EXISTS sentex_words (
    handle INTEGER PRIMARY KEY, words TEXT NOT NULL, extra TEXT NOT NULL
);
"""
# The FTS5 index; dropping one made by an earlier build of this schema first (triggers
# kept it then), so every store starts the index afresh: the first search fills it.
SQLITE_FTS = """
DROP TRIGGER IF EXISTS sentex_words_inserted;
DROP TRIGGER IF EXISTS sentex_words_deleted;
DROP TABLE IF EXISTS sentex_fts;
CREATE VIRTUAL TABLE sentex_fts USING fts5 (
    words, extra, content = 'sentex_words', content_rowid = 'handle',
    tokenize = 'porter unicode61'
);
"""
SQLITE_INDEX = (INSERT_WORDS,)  # in the write's transaction; FTS5 catches up at search
SQLITE_FTS_ADD = "INSERT INTO sentex_fts (rowid, words, extra) VALUES (?, ?, ?)"
# For handles at or below the FTS5 mark (the rest were never added to it): in order.
SQLITE_UNINDEX = (
    "INSERT INTO sentex_fts (sentex_fts, rowid, words, extra) "
    "SELECT 'delete', handle, words, extra FROM sentex_words WHERE handle = ?",
    DELETE_WORDS,
)
POSTGRES_INDEX = (INSERT_WORDS,)
POSTGRES_UNINDEX = (DELETE_WORDS,)


SQLITE_BEHIND = "SELECT 1 FROM sentex_words WHERE handle > ? LIMIT 1"  # anything to add?


def sqlite_catch_up(db: Any, top: int, limit: int | None = None) -> tuple[int, int]:
    """Add the `sentex_words` rows above `top` to FTS5 — the first `limit` of them, or
    all — inside the caller's transaction; returns the new mark (recorded in
    `koinii_meta.fts_top`) and how many rows it added."""
    rows = db.execute(
        "SELECT handle, words, extra FROM sentex_words WHERE handle > ? ORDER BY handle LIMIT ?",
        (top, -1 if limit is None else limit),
    ).fetchall()
    if not rows:
        return top, 0
    db.executemany(SQLITE_FTS_ADD, rows)
    top = rows[-1][0]
    db.execute(
        "INSERT INTO koinii_meta (key, value) VALUES ('fts_top', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (top,),
    )
    return top, len(rows)


def sqlite_match(words: Sequence[str]) -> str:
    """An FTS5 query matching any of `words` (each quoted: no word is syntax)."""
    return " OR ".join(f'"{w}"' for w in words)


_SQLITE_SNIPPET = f"snippet(sentex_fts, 0, '[', ']', '…', {SNIPPET_TOKENS})"


def sqlite_ranked(db: Any, words: Sequence[str], limit: int | None) -> list[Ranked]:
    """(handle, score, snippet) of the rows matching any word, best first; score: higher
    is better. With a `limit` each row comes with its snippet — computed, inside the one
    query, for the rows returned only (a second MATCH for them would cost the search
    again); without one (every match), the snippets are None: ask `sqlite_snippets`."""
    match = sqlite_match(words)
    if limit is None:
        found = db.execute(
            "SELECT rowid, rank, NULL FROM sentex_fts WHERE sentex_fts MATCH ? "
            "ORDER BY rank, rowid",
            (match,),
        ).fetchall()
    else:
        found = db.execute(
            f"SELECT rowid, rank, {_SQLITE_SNIPPET} FROM sentex_fts WHERE sentex_fts MATCH ? "
            "ORDER BY rank, rowid LIMIT ?",
            (match, limit),
        ).fetchall()
    return [(h, -r, snippet) for h, r, snippet in found]


def sqlite_snippets(db: Any, words: Sequence[str], handles: Sequence[int]) -> dict[int, str]:
    """Each row's window of about SNIPPET_TOKENS readable words (the first column) around
    its matches, `[`marked`]` (its first words when only the extra forms matched)."""
    if not handles:
        return {}
    marks = ", ".join("?" for _ in handles)
    found = db.execute(
        f"SELECT rowid, {_SQLITE_SNIPPET} "
        f"FROM sentex_fts WHERE sentex_fts MATCH ? AND rowid IN ({marks})",
        (sqlite_match(words), *handles),
    ).fetchall()
    return dict(found)


def sqlite_create(db: Any) -> None:
    """Create the index's tables on an SQLite connection (inside the caller's transaction)."""
    from koinii.kb.store import _statements

    for statement in _statements(SQLITE_WORDS + SQLITE_FTS):
        db.execute(statement)


def sqlite_fts(db: Any) -> None:
    """The SQLite store's migration to the FTS5 index: made empty, filled at the first
    search (its mark back to 0)."""
    from koinii.kb.store import _statements

    for statement in _statements(SQLITE_FTS):
        db.execute(statement)
    db.execute("DELETE FROM koinii_meta WHERE key = 'fts_top'")


def sqlite_backfill(db: Any) -> None:
    """The words table (the SQLite store's migration), filled from the sentex rows already
    stored; `SQLITE_FTS` (the next migration) makes the FTS5 index over it."""
    db.execute(SQLITE_WORDS)
    backfill(db.execute("SELECT handle, text FROM sentex"), db.executemany, SQLITE_INDEX)


def sqlite_reindex(db: Any) -> None:
    """The SQLite store's migration to the words as `document` cuts them now (mixed runs
    such as `k8s` kept whole too): every row made again from the stored sentexes, and the
    FTS5 index afresh over them (filled at the first search)."""
    db.execute("DELETE FROM sentex_words")
    backfill(db.execute("SELECT handle, text FROM sentex"), db.executemany, SQLITE_INDEX)
    sqlite_fts(db)


def backfill(stored: Any, run_many: Any, statements: Sequence[str], batch: int = 10_000) -> None:
    """Index rows for every (handle, text) of `stored`, written `batch` at a time."""
    while True:
        chunk = stored.fetchmany(batch)
        if not chunk:
            return
        rows = rows_of_text(chunk)
        for statement in statements:
            run_many(statement, rows)


# --- PostgreSQL ------------------------------------------------------------------------

POSTGRES_SCHEMA = """
CREATE TABLE IF NOT EXISTS sentex_words (
    handle BIGINT PRIMARY KEY,
    words TEXT NOT NULL,
    extra TEXT NOT NULL,
    doc tsvector GENERATED ALWAYS AS (to_tsvector('english', words || ' ' || extra)) STORED
);
CREATE INDEX IF NOT EXISTS sentex_words_doc ON sentex_words USING gin (doc);
"""


def postgres_query(words: Sequence[str]) -> str:
    """A `to_tsquery` text matching any of `words` (each quoted: no word is syntax). A
    phrase of numbers (a date, "2026 04") is written with hyphens, as dates are stored:
    PostgreSQL's parser reads "2026-04-09" as 2026, -04, -09."""
    return " | ".join(f"'{_dashed(w)}'" for w in words)


def _dashed(word: str) -> str:
    parts = word.split(" ")
    return "-".join(parts) if len(parts) > 1 and all(p.isdigit() for p in parts) else word


_POSTGRES_HEADLINE = (
    "ts_headline('english', words, q, "
    f"'StartSel=[, StopSel=], MaxWords={SNIPPET_TOKENS}, MinWords=4, MaxFragments=1, "
    "FragmentDelimiter=…')"
)
# With a limit, PostgreSQL computes the headline after the sort, for the rows returned.
POSTGRES_RANKED = (
    f"SELECT handle, ts_rank(doc, q, 1) AS score, {_POSTGRES_HEADLINE} "
    "FROM sentex_words, to_tsquery('english', %s) q WHERE doc @@ q "
    "ORDER BY score DESC, handle LIMIT %s"
)
POSTGRES_ALL = (
    "SELECT handle, ts_rank(doc, q, 1) AS score, NULL "
    "FROM sentex_words, to_tsquery('english', %s) q WHERE doc @@ q "
    "ORDER BY score DESC, handle"
)
POSTGRES_SNIPPETS = (
    f"SELECT handle, {_POSTGRES_HEADLINE} "
    "FROM sentex_words, to_tsquery('english', %s) q WHERE handle = ANY(%s)"
)


def postgres_ranked(conn: Any, words: Sequence[str], limit: int | None) -> list[Ranked]:
    """`sqlite_ranked`, on PostgreSQL (snippets computed for the rows returned only)."""
    query = postgres_query(words)
    if limit is None:
        found = conn.execute(POSTGRES_ALL, (query,)).fetchall()
    else:
        found = conn.execute(POSTGRES_RANKED, (query, limit)).fetchall()
    return [(h, float(score), snippet) for h, score, snippet in found]


def postgres_snippets(conn: Any, words: Sequence[str], handles: Sequence[int]) -> dict[int, str]:
    """`sqlite_snippets`, on PostgreSQL."""
    if not handles:
        return {}
    return dict(conn.execute(POSTGRES_SNIPPETS, (postgres_query(words), list(handles))).fetchall())


class IndexReader:
    """The index read through a connection of its own (`Store.reader`), for a server
    that answers a search's asks on another thread while its writer goes on
    (server/searching.py). It sees what is committed; one thread uses it at a time."""

    def __init__(self, conn: Any, dialect: str, errors: tuple, location: str) -> None:
        self._conn = conn
        self._sqlite = dialect == "sqlite"
        self._errors = errors
        self._location = location

    def search(self, words: Sequence[str], limit: int | None) -> list[Ranked]:
        ranked = sqlite_ranked if self._sqlite else postgres_ranked
        with self._translated():
            return ranked(self._conn, words, limit)

    def snippets(self, words: Sequence[str], handles: Sequence[int]) -> dict[int, str]:
        snippets = sqlite_snippets if self._sqlite else postgres_snippets
        with self._translated():
            return snippets(self._conn, words, handles)

    def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._conn.close()

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except self._errors as exc:
            raise Refused(
                "store-error", f"the search failed: {exc}", {"location": self._location}
            ) from exc
