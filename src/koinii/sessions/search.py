"""The session index and THE ranked session search (sessions.md §3, `list_sessions`).

A search ranks every top-level session by its best band:

    0  title     the search text is a case-insensitive substring of the current title
    1  request   a user request matches (full text)
    2  reply     an assistant reply (prose) matches
    3  thinking  the model's thinking matches
    4  tool      what a tool returned matches (a block's result, output or error)

Where `koinii[semantic]` is installed, the sessions closest in meaning to the search —
their titles and requests embedded (meaning.py) — are found too. By default
(`ranking="banded"`) they keep the seed's order: the bands as above, then the sessions
found by meaning alone as a band of their own, rank 5 (MEANING_BAND), newest first like
every band — the seed's callers "paint that order, never re-sort it" (004), so a search
never answers a worse band before a better one. `ranking="hybrid"` asks for the
reciprocal-rank fusion (`semantic.fuse`) of the banded rows and the closest ones
instead, in that fused order; `ranking="lexical"` leaves meaning out. Either way a row
says `is_by_meaning`, and one found by meaning alone has, as its request snippet, the
opening of the text that was closest.

Full text means: the search is cut into words the way the index cuts text (Unicode
letters and digits; case and diacritics folded), every word must occur in the same
field of the same turn, and the last word is also a prefix (`deplo` finds `deploy`).
Rows come best band first, newest (`modified_at`) first inside a band, then by id; the
caller paints them in this order and never re-sorts them. A row's snippets are windows
of about SNIPPET_TOKENS tokens around the matches in the newest matching turn, the
window that shows the most of the search's words.

Invariant: the ranking is one SQL statement. Each band yields (session, band, turn)
hits — a turn's rowid shifted right by TURN_BITS is its session's row number (schema.py),
so a full-text hit names its session without a lookup — and one GROUP BY keeps each
session's best band. The title band is a trigram index: FTS5's on SQLite (substring
matches of 3 characters or more; shorter ones scan the titles), pg_trgm's GIN index for
`LIKE` on PostgreSQL (a scan where the server lacks the extension: schema.py). Only the rows
returned are read for their snippets. PostgreSQL's text parser cuts some words
differently (`phx.server` stays one token there) and does not fold diacritics.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from koinii.errors import Refused
from koinii.kb import semantic
from koinii.sessions.schema import TURN_BITS

RANKINGS = ("banded", "lexical", "hybrid")  # the default first
MEANING_BAND = 5  # the band of a row found by meaning alone
SNIPPET_TOKENS = 20  # the width of a request/reply snippet window
ELLIPSIS = "…"
NO_LIMIT = 2**62
COLUMNS = ("request", "reply", "thinking", "tools")
_WORD = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer keeps as a token

INDEX_KEYS = ("id", "channel", "title", "turn_count", "created_at", "modified_at")
INDEX_COLUMNS = ", ".join(f"s.{key}" for key in INDEX_KEYS)

# Per dialect: the turns whose `{column}` matches a full-text query, and the sessions
# whose folded title contains a string (by index, or by scan).
_TURNS = {
    "sqlite": "SELECT rowid AS t FROM turn_search WHERE turn_search MATCH ?",
    "postgres": (
        "SELECT n AS t FROM turn_text "
        "WHERE to_tsvector('simple', coalesce({column}, '')) @@ to_tsquery('simple', ?)"
    ),
}
_TITLES = {
    "sqlite": "SELECT rowid AS s FROM session_title WHERE session_title MATCH ?",
    "sqlite-scan": "SELECT n AS s FROM session WHERE instr(title_fold, ?) > 0",
    "postgres": "SELECT n AS s FROM session WHERE title_fold LIKE ? ESCAPE '\\'",
}

_RANKED = """
WITH hit AS (
  SELECT s, 0 AS band, CAST(NULL AS BIGINT) AS turn FROM ({titles}) titled
  UNION ALL SELECT t >> {bits}, 1, max(t) FROM ({request}) h GROUP BY 1
  UNION ALL SELECT t >> {bits}, 2, max(t) FROM ({reply}) h GROUP BY 1
  UNION ALL SELECT DISTINCT t >> {bits}, 3, CAST(NULL AS BIGINT) FROM ({thinking}) h
  UNION ALL SELECT t >> {bits}, 4, max(t) FROM ({tools}) h GROUP BY 1
),
best AS (
  SELECT s, min(band) AS band,
    max(CASE WHEN band = 0 THEN 1 ELSE 0 END) AS in_title,
    max(CASE WHEN band = 1 THEN turn END) AS request_turn,
    max(CASE WHEN band = 2 THEN turn END) AS reply_turn,
    max(CASE WHEN band = 3 THEN 1 ELSE 0 END) AS in_thinking,
    max(CASE WHEN band = 4 THEN turn END) AS tool_turn
  FROM hit GROUP BY s
)
SELECT {columns}, best.band, best.in_title, best.request_turn, best.reply_turn,
  best.in_thinking, best.tool_turn
FROM best JOIN session s ON s.n = best.s
WHERE s.parent_session_n IS NULL
ORDER BY best.band, s.modified_at DESC, s.n DESC
LIMIT ?
"""

_TITLED = """
SELECT {columns}, 0, 1, NULL, NULL, 0, NULL FROM ({titles}) titled JOIN session s ON s.n = titled.s
WHERE s.parent_session_n IS NULL
ORDER BY s.modified_at DESC, s.n DESC
LIMIT ?
"""


def _statement(template: str, dialect: str, titles: str) -> str:
    turns = {c: _TURNS[dialect].format(column=c) for c in COLUMNS}
    return template.format(bits=TURN_BITS, columns=INDEX_COLUMNS, titles=titles, **turns)


_STATEMENTS = {
    (dialect, titles, name): _statement(template, dialect, _TITLES[titles])
    for dialect, titles in (
        ("sqlite", "sqlite"),
        ("sqlite", "sqlite-scan"),
        ("postgres", "postgres"),
    )
    for name, template in (("ranked", _RANKED), ("titled", _TITLED))
}


def index(db: Any, limit: int | None = None) -> list[dict[str, Any]]:
    """Every top-level session, newest first (at most `limit`)."""
    found = db.execute(
        f"SELECT {INDEX_COLUMNS} FROM session s WHERE s.parent_session_n IS NULL "
        "ORDER BY s.modified_at DESC, s.n DESC LIMIT ?",  # (n: the newer of a tie)
        (NO_LIMIT if limit is None else limit,),
    )
    return [index_row(row) for row in found]


def index_row(row: tuple) -> dict[str, Any]:
    return dict(zip(INDEX_KEYS, row))


def words(search: str) -> list[str]:
    return _WORD.findall(search)


def expression(dialect: str, column: str, terms: list[str]) -> str:
    """The full-text query: every term in `column`, the last one also as a prefix."""
    if dialect == "postgres":
        return " & ".join(f"'{term.casefold()}'" for term in terms) + ":*"
    quoted = [f'"{term}"' for term in terms]
    quoted[-1] += "*"
    return f"{{{column}}} : ({' '.join(quoted)})"


def ranking_of(ranking: Any) -> str:
    """The ranking a session search asked for, checked (module docstring): `banded` when
    left out — the seed's order, whatever is installed. Asking for `hybrid` where the
    semantic extra is missing is refused, saying how to install it."""
    if ranking is None:
        return "banded"
    if not isinstance(ranking, str) or ranking not in RANKINGS:
        raise Refused(
            "bad-option",
            f"ranking is one of {', '.join(RANKINGS)} (or left out for banded, the seed's "
            f"order), not {ranking!r:.40}",
            {"option": "ranking", "allowed": list(RANKINGS)},
        )
    if ranking == "hybrid":
        semantic.ranking_of(ranking)
    return ranking


def ranked(
    db: Any, search: str, limit: int | None = None, *, vectors: Any = None, fused: bool = False
) -> list[dict[str, Any]]:
    """THE ranked search (module docstring). A blank search is the plain index. With
    the sessions' `vectors` (meaning.py) the sessions found by meaning alone follow the
    bands as a band of their own; `fused`, the rows come in the fused order instead."""
    search = search.strip()
    if not search:
        return index(db, limit)
    if vectors is None:
        return _banded(db, search, limit)
    if fused:
        return _fused(db, search, limit, vectors)
    return _then_by_meaning(db, search, limit, vectors)


def _then_by_meaning(db: Any, search: str, limit: int | None, vectors: Any) -> list[dict[str, Any]]:
    """The bands, then the meaning band, newest first inside it as inside every band. A
    full page of banded rows leaves no room for it (the bands are never cut for it)."""
    banded = _banded(db, search, limit)
    most = NO_LIMIT if limit is None else limit
    depth = None if limit is None else max(semantic.DEPTH, limit)
    _, alone = _by_meaning(db, banded, vectors.nearest(db, search, depth))
    alone.sort(key=lambda found: (found[1]["modified_at"], found[0]), reverse=True)
    return banded + [row for _, row in alone[: max(0, most - len(banded))]]


def _fused(db: Any, search: str, limit: int | None, vectors: Any) -> list[dict[str, Any]]:
    depth = None if limit is None else max(semantic.DEPTH, limit)  # each side's, at most
    banded = _banded(db, search, depth)
    closest, alone = _by_meaning(db, banded, vectors.nearest(db, search, depth))
    rows = {row["id"]: row for row in banded} | {row["id"]: row for _, row in alone}
    fused = semantic.fuse([row["id"] for row in banded], closest)
    return [rows[session_id] for session_id, _ in fused[: NO_LIMIT if limit is None else limit]]


def _by_meaning(
    db: Any, banded: list[dict[str, Any]], near: list[tuple[int, str]]
) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    """What the sessions `near` in meaning add to the `banded` rows: each banded one among
    them is marked `is_by_meaning` (in place); returns the near sessions' ids, nearest
    first, and a row for each one found by meaning alone, with its session's n."""
    if not near:
        return [], []
    marks = ", ".join("?" for _ in near)
    found = db.execute(
        f"SELECT s.n, {INDEX_COLUMNS} FROM session s WHERE s.n IN ({marks})",
        [n for n, _ in near],
    ).fetchall()
    ids = {n: index_row(rest) for n, *rest in found}
    rows = {row["id"]: row for row in banded}
    closest: list[str] = []
    alone: list[tuple[int, dict[str, Any]]] = []
    for n, text in near:
        if n not in ids:
            continue
        session_id = ids[n]["id"]
        closest.append(session_id)
        if session_id in rows:
            rows[session_id]["is_by_meaning"] = True
        else:
            alone.append((n, {**ids[n], **_BY_MEANING_ONLY, "request_snippet": _opening(text)}))
    return closest, alone


_BY_MEANING_ONLY = {
    "rank": MEANING_BAND,
    "is_by_meaning": True,
    "is_in_title": False,
    "is_in_request": False,
    "is_in_reply": False,
    "is_in_thinking": False,
    "is_in_tool": False,
    "request_snippet": None,
    "reply_snippet": None,
    "tool_snippet": None,
}


def _opening(text: str) -> str:
    """A meaning-only hit's snippet: the first SNIPPET_TOKENS tokens of its closest text."""
    tokens = list(_WORD.finditer(text))
    if len(tokens) <= SNIPPET_TOKENS:
        return text.strip()
    return text[: tokens[SNIPPET_TOKENS - 1].end()].strip() + ELLIPSIS


def _banded(db: Any, search: str, limit: int | None) -> list[dict[str, Any]]:
    dialect = getattr(db, "dialect", "sqlite")
    title = search.casefold()
    titles = dialect
    if dialect == "sqlite":
        if len(title) >= 3:
            title = '"' + title.replace('"', '""') + '"'  # a trigram phrase: a substring
        else:
            titles = "sqlite-scan"
    else:
        escaped = title.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        title = f"%{escaped}%"
    terms = words(search)
    most = NO_LIMIT if limit is None else limit
    if terms:
        queries = [expression(dialect, column, terms) for column in COLUMNS]
        found = db.execute(_STATEMENTS[dialect, titles, "ranked"], (title, *queries, most))
    else:
        found = db.execute(_STATEMENTS[dialect, titles, "titled"], (title, most))
    rows = found.fetchall()
    texts = _texts(db, rows)
    out = []
    for row in rows:
        band, in_title, request_turn, reply_turn, in_thinking, tool_turn = row[len(INDEX_KEYS) :]
        entry = index_row(row)
        entry.update(
            {
                "rank": band,
                "is_by_meaning": False,
                "is_in_title": bool(in_title),
                "is_in_request": request_turn is not None,
                "is_in_reply": reply_turn is not None,
                "is_in_thinking": bool(in_thinking),
                "is_in_tool": tool_turn is not None,
                "request_snippet": _snippet(texts, request_turn, 0, terms),
                "reply_snippet": _snippet(texts, reply_turn, 1, terms),
                "tool_snippet": _snippet(texts, tool_turn, 2, terms),
            }
        )
        out.append(entry)
    return out


def _texts(db: Any, rows: list[tuple]) -> dict[int, tuple[str | None, ...]]:
    """turn rowid → (request, reply, tools) for the turns whose snippets the rows show."""
    at = len(INDEX_KEYS)
    wanted = sorted({t for row in rows for t in row[at + 2 : at + 4] + row[at + 5 :] if t})
    if not wanted:
        return {}
    marks = ", ".join("?" for _ in wanted)
    found = db.execute(
        f"SELECT n, request, reply, tools FROM turn_text WHERE n IN ({marks})", wanted
    )
    return {n: texts for n, *texts in found}


def _snippet(texts: dict, turn: int | None, column: int, terms: list[str]) -> str | None:
    if turn is None or turn not in texts or not texts[turn][column]:
        return None
    return window(texts[turn][column], terms)


def _folded(word: str) -> str:
    """Case and diacritics folded, as the full-text index folds them."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _term_of(terms: list[str]):
    """Which search term a token matches (its index), or None: a term exactly, or the
    last term as a prefix — the rule of the full-text query."""
    folded = [_folded(term) for term in terms]
    exact = {term: i for i, term in enumerate(folded[:-1])}
    prefix = folded[-1] if folded else None

    def term_of(token: str) -> int | None:
        if prefix is None:
            return None
        word = _folded(token)
        if word in exact:
            return exact[word]
        return len(folded) - 1 if word.startswith(prefix) else None

    return term_of


def _matcher(terms: list[str]):
    """Does a token match the search (any of its terms)?"""
    term_of = _term_of(terms)
    return lambda token: term_of(token) is not None


def marked(text: str, search: str) -> list[tuple[str, bool]]:
    """`text` cut into pieces, each with whether it is a word the search matches (by
    the rule that chose the snippet): what a reader highlights."""
    matches = _matcher(words(search))
    pieces: list[tuple[str, bool]] = []
    at = 0
    for token in _WORD.finditer(text):
        if matches(token.group()):
            if token.start() > at:
                pieces.append((text[at : token.start()], False))
            pieces.append((token.group(), True))
            at = token.end()
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def window(text: str, terms: list[str]) -> str:
    """SNIPPET_TOKENS tokens of `text` around the matches, `…` where the text was cut.

    The window is the one that shows the most distinct search terms (the earliest of
    those), opened a little before its first match, so a multi-word search shows its
    words together where the text has them together, and always at least one of them
    when the text has any."""
    term_of = _term_of(terms)
    tokens = list(_WORD.finditer(text))
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
