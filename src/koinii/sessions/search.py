"""The session index and THE ranked session search (sessions.md §3, `list_sessions`).

A search ranks every top-level session by its best band:

    0  title     the search text is a case-insensitive substring of the current title
    1  request   a user request matches (full text)
    2  reply     an assistant reply (prose) matches
    3  thinking  the model's thinking matches
    4  tool      what a tool returned matches (a block's result, output or error)
    5  some      half the search's words or more (and two), each anywhere in what the
                 session's turns or its sub-agents' said (request, reply, thinking)

The fifth band is not the seed's: a question in a person's words seldom has all of its
words in one field of one turn ("switch the VAT rounding to Decimal" over two turns), so
every ranking but `lexical` (the seed's bands alone) adds it after them, asked for only
when they leave room on the page (a second statement: a full-text query per word and
field, over the newest SOME_TURNS turns holding it), newest first, or holding more of
the words first under relevance.

Where `koinii[semantic]` is installed, the sessions closest in meaning to the search —
their titles and requests embedded (meaning.py) — are found too. By default
(`ranking="banded"`) they keep the seed's order: the bands as above, then the sessions
found by meaning alone as a band of their own, rank 6 (MEANING_BAND), newest first like
every band — the seed's callers "paint that order, never re-sort it" (004), so a search
never answers a worse band before a better one. `ranking="hybrid"` asks for the
reciprocal-rank fusion (`semantic.fuse`) of the banded rows (in relevance order inside
each band: the fusion reads a place as how good a match is) and the closest ones
instead, in that fused order; `ranking="lexical"` leaves meaning out. Either way a row
says `is_by_meaning`, and one found by meaning alone has, as its request snippet, the
opening of the text that was closest.

Full text means: the search is cut into words the way the index cuts text (Unicode
letters and digits; case and diacritics folded); its stop words ("where", "did", "we",
STOP_WORDS) are left out, and every other word must occur in the same field of the same
turn, as one of its English forms (`snippets.forms`: "failing" finds "fails"), the last
one also as a prefix (`deplo` finds `deploy`). Rows come best band first, newest
(`modified_at`) first inside a band, then by id; the caller paints them in this order
and never re-sorts them. `ranking="relevance"` keeps the bands in that order but puts
the best match first inside each (a session's best turn in its band, by BM25 on SQLite
and `ts_rank` on PostgreSQL; the title band stays newest first, the meaning band comes
nearest first). A row's snippets come from the turn that placed it (the newest matching
one; under relevance the best), read from the matched fields alone and windowed around
their matches (snippets.py).

Invariant: the seed's bands are one SQL statement (the fifth, when asked for, another).
Each band yields (session, band, turn) hits — a turn's rowid shifted right by TURN_BITS
is its session's row number (schema.py), so a full-text hit names its session without a
lookup — and one GROUP BY keeps each
session's best band (under relevance, two window functions keep each band's best turn and
the session's best score). The title band is a trigram index: FTS5's on SQLite (substring
matches of 3 characters or more; shorter ones scan the titles), pg_trgm's GIN index for
`LIKE` on PostgreSQL (a scan where the server lacks the extension: schema.py). Only the
rows returned get snippets. PostgreSQL's text parser
cuts some words differently (`phx.server` stays one token there) and does not fold diacritics.
"""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.kb import semantic
from koinii.sessions import snippets
from koinii.sessions.schema import TURN_BITS
from koinii.sessions.snippets import SNIPPET_TOKENS, WORD, folded, forms, window

__all__ = ["SNIPPET_TOKENS", "marked", "ranked", "search_terms", "window", "words"]

RANKINGS = ("banded", "lexical", "hybrid", "relevance")  # the default first
SOME_WORDS_BAND = 5  # the band of a row holding some of the words, not in one field
MEANING_BAND = 6  # the band of a row found by meaning alone
NO_LIMIT = 2**62
COLUMNS = ("request", "reply", "thinking", "tools")
# where the band of some of the words looks: what was said, not what tools returned
# (megabytes of output hold a few of any search's words)
SOME_COLUMNS = ("request", "reply", "thinking")
# the newest turns holding a word in a field the fifth band looks at, at most: its work
# is bounded however common the word (the seed's bands look at every match)
SOME_TURNS = 2_000
# Words a question is made of that say nothing of what it asks ("where did we fix the
# deploy?"): left out of the band match, so the words that remain must occur together,
# not these. A search of stop words alone searches them.
_STOP_WORDS = """
    a about after again all am an and any are as at be been before being but by can could d
    did didn do does doesn doing don done for from had has have having he her here how i if
    in into is isn it its ll m me my of on or our please re s she should so some t than
    that the their them then there these they this those to us ve was wasn we were what
    when where which who whom whose why will with won would you your
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())

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
# The same, with each turn's full-text score (lower is better): the relevance ranking.
_SCORED = {
    "sqlite": (
        "SELECT rowid AS t, bm25(turn_search) AS score FROM turn_search WHERE turn_search MATCH ?"
    ),
    "postgres": (
        "SELECT n AS t, -ts_rank(to_tsvector('simple', coalesce({column}, '')), q) AS score "
        "FROM turn_text, to_tsquery('simple', ?) q "
        "WHERE to_tsvector('simple', coalesce({column}, '')) @@ q"
    ),
}
_TITLES = {
    "sqlite": "SELECT rowid AS s FROM session_title WHERE session_title MATCH ?",
    "sqlite-scan": "SELECT n AS s FROM session WHERE instr(title_fold, ?) > 0",
    "postgres": "SELECT n AS s FROM session WHERE title_fold LIKE ? ESCAPE '\\'",
}

# Each session's row, from its best band (`best`): best band first, then `{within}` (the
# order inside a band: none, or relevance), then newest first.
_ROWS = """
SELECT {columns}, best.band, best.in_title, best.request_turn, best.reply_turn,
  best.in_thinking, best.tool_turn
FROM best JOIN session s ON s.n = best.s
WHERE s.parent_session_n IS NULL
ORDER BY best.band, {within}s.modified_at DESC, s.n DESC
LIMIT ?
"""

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
""" + _ROWS.replace("{within}", "")

# Relevance inside a band: the same bands, a session's place in its band by the score of
# its best turn there (the title band: newest first), and its snippets from that turn.
_RELEVANT = """
WITH hit AS (
  SELECT s, 0 AS band, CAST(NULL AS BIGINT) AS turn, CAST(NULL AS DOUBLE PRECISION) AS score
  FROM ({titles}) titled
  UNION ALL SELECT t >> {bits}, 1, t, score FROM ({request}) h
  UNION ALL SELECT t >> {bits}, 2, t, score FROM ({reply}) h
  UNION ALL SELECT t >> {bits}, 3, t, score FROM ({thinking}) h
  UNION ALL SELECT t >> {bits}, 4, t, score FROM ({tools}) h
),
placed AS (
  SELECT s, band, turn, score,
    row_number() OVER (PARTITION BY s, band ORDER BY score, turn DESC) AS in_band,
    row_number() OVER (PARTITION BY s ORDER BY band, score, turn DESC) AS in_session
  FROM hit
),
best AS (
  SELECT s, min(band) AS band,
    max(CASE WHEN band = 0 THEN 1 ELSE 0 END) AS in_title,
    max(CASE WHEN band = 1 AND in_band = 1 THEN turn END) AS request_turn,
    max(CASE WHEN band = 2 AND in_band = 1 THEN turn END) AS reply_turn,
    max(CASE WHEN band = 3 THEN 1 ELSE 0 END) AS in_thinking,
    max(CASE WHEN band = 4 AND in_band = 1 THEN turn END) AS tool_turn,
    min(CASE WHEN in_session = 1 THEN score END) AS score
  FROM placed GROUP BY s
)
""" + _ROWS.replace("{within}", "best.score, ")

_TITLED = """
SELECT {columns}, 0, 1, NULL, NULL, 0, NULL FROM ({titles}) titled JOIN session s ON s.n = titled.s
WHERE s.parent_session_n IS NULL
ORDER BY s.modified_at DESC, s.n DESC
LIMIT ?
"""


# Some of the words: the sessions holding at least `?` of the search's terms anywhere in
# their turns or their sub-agents' (each term found on its own, in any field said),
# where the bands found none; each with how many it holds and the turn and field
# holding the most (its snippet).
_SOME = """
WITH hit AS ({hits}),
owned AS (
  SELECT coalesce(p.parent_session_n, p.n) AS s, h.t, h.term, h.field, h.score
  FROM hit h JOIN session p ON p.n = h.t >> {bits}
),
term_best AS (SELECT s, term, min(score) AS score FROM owned GROUP BY s, term),
held AS (
  SELECT s, count(*) AS held, sum(score) AS score FROM term_best GROUP BY s
  HAVING count(*) >= ?
),
chosen AS (
  SELECT held.s, held.held, held.score, s.modified_at FROM held JOIN session s ON s.n = held.s
  WHERE s.parent_session_n IS NULL
  ORDER BY {within}s.modified_at DESC, s.n DESC
  LIMIT ?
),
turn_field AS (
  SELECT s, t, field, count(DISTINCT term) AS n, sum(score) AS score
  FROM owned WHERE s IN (SELECT s FROM chosen) GROUP BY s, t, field
),
placed AS (
  SELECT s, t, field,
    row_number() OVER (PARTITION BY s ORDER BY n DESC, score, t DESC) AS in_session
  FROM turn_field
)
SELECT {columns}, held.held, placed.t, placed.field
FROM chosen held JOIN placed ON placed.s = held.s AND placed.in_session = 1
JOIN session s ON s.n = held.s
ORDER BY {within}s.modified_at DESC, s.n DESC
"""


def _some_statement(dialect: str, count: int, relevance: bool) -> str:
    """`_SOME` for a search of `count` terms: a full-text query per term and field (scored
    under relevance only: a score costs FTS5 about as much as the match)."""
    newest = "rowid" if dialect == "sqlite" else "n"  # (FTS5 walks it in index order)
    turns = _SCORED if relevance else _TURNS
    score = "score" if relevance else "0 AS score"
    hits = " UNION ALL ".join(
        f"SELECT t, {term} AS term, '{column}' AS field, {score} "
        f"FROM ({turns[dialect].format(column=column)} "
        f"ORDER BY {newest} DESC LIMIT {SOME_TURNS}) h{term}_{column}"
        for term in range(count)
        for column in SOME_COLUMNS
    )
    within = "held.held DESC, held.score, " if relevance else ""
    return _SOME.format(hits=hits, bits=TURN_BITS, columns=INDEX_COLUMNS, within=within)


def _statement(template: str, dialect: str, titles: str) -> str:
    turns = _SCORED if template is _RELEVANT else _TURNS
    by_column = {c: turns[dialect].format(column=c) for c in COLUMNS}
    return template.format(bits=TURN_BITS, columns=INDEX_COLUMNS, titles=titles, **by_column)


_STATEMENTS = {
    (dialect, titles, name): _statement(template, dialect, _TITLES[titles])
    for dialect, titles in (
        ("sqlite", "sqlite"),
        ("sqlite", "sqlite-scan"),
        ("postgres", "postgres"),
    )
    for name, template in (("ranked", _RANKED), ("relevant", _RELEVANT), ("titled", _TITLED))
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
    """The search cut into words the way the index cuts text."""
    return WORD.findall(search)


def search_terms(search: str) -> list[str]:
    """The words of a search that must match, case folded: its words but the stop words
    (every word, when all of them are stop words). Each matches its English forms too
    (`snippets.forms`), the last one also as a prefix."""
    return [word.casefold() for word in _content_words(search)]


def _content_words(search: str) -> list[str]:
    found = words(search)
    return [word for word in found if folded(word) not in STOP_WORDS] or found


def expression(dialect: str, column: str, terms: list[str], prefix: bool = True) -> str:
    """The full-text query: every term in `column`, as one of its forms, the last one
    also as a prefix (unless not `prefix`)."""
    alternatives = [forms(term) for term in terms]
    last = terms[-1]  # (its forms that begin with it are found as its prefix)
    if prefix:
        alternatives[-1] = [form for form in alternatives[-1] if not form.startswith(last)]
    if dialect == "postgres":
        each = [[f"'{form}'" for form in group] for group in alternatives]
        if prefix:
            each[-1].insert(0, f"'{last}':*")
        return " & ".join(f"({' | '.join(group)})" for group in each)
    each = [[f'"{form}"' for form in group] for group in alternatives]
    if prefix:
        each[-1].insert(0, f'"{last}"*')
    either = " AND ".join("(" + " OR ".join(group) + ")" for group in each)
    return f"{{{column}}} : ({either})"


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
    db: Any,
    search: str,
    limit: int | None = None,
    *,
    vectors: Any = None,
    fused: bool = False,
    relevance: bool = False,
    some_words: bool = False,
) -> list[dict[str, Any]]:
    """THE ranked search (module docstring). A blank search is the plain index. With
    the sessions' `vectors` (meaning.py) the sessions found by meaning alone follow the
    bands as a band of their own; `fused`, the rows come in the fused order instead.
    `relevance` orders each band by relevance instead of newest first; `some_words`
    adds the band of the sessions holding some of the words after the seed's bands."""
    search = search.strip()
    if not search:
        return index(db, limit)
    if vectors is None:
        return _banded(db, search, limit, relevance, some_words)
    if fused:
        return _fused(db, search, limit, vectors, some_words)
    return _then_by_meaning(db, search, limit, vectors, relevance, some_words)


def _then_by_meaning(
    db: Any, search: str, limit: int | None, vectors: Any, relevance: bool, some_words: bool
) -> list[dict[str, Any]]:
    """The bands, then the meaning band, newest first inside it as inside every band (under
    relevance, nearest first). A full page of banded rows leaves no room for it (the bands
    are never cut for it)."""
    banded = _banded(db, search, limit, relevance, some_words)
    most = NO_LIMIT if limit is None else limit
    depth = None if limit is None else max(semantic.DEPTH, limit)
    _, alone = _by_meaning(db, banded, vectors.nearest(db, search, depth))
    if not relevance:  # (under relevance, the nearest first, as `nearest` gives them)
        alone.sort(key=lambda found: (found[1]["modified_at"], found[0]), reverse=True)
    return banded + [row for _, row in alone[: max(0, most - len(banded))]]


def _fused(
    db: Any, search: str, limit: int | None, vectors: Any, some_words: bool
) -> list[dict[str, Any]]:
    depth = None if limit is None else max(semantic.DEPTH, limit)  # each side's, at most
    # the bands in relevance order inside each: the fusion reads a place as how good
    banded = _banded(db, search, depth, True, some_words)
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
            alone.append(
                (n, {**ids[n], **_BY_MEANING_ONLY, "request_snippet": snippets.opening(text)})
            )
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


def _banded(
    db: Any, search: str, limit: int | None, relevance: bool, some_words: bool = False
) -> list[dict[str, Any]]:
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
    terms = search_terms(search)
    most = NO_LIMIT if limit is None else limit
    if terms:
        queries = [expression(dialect, column, terms) for column in COLUMNS]
        statement = _STATEMENTS[dialect, titles, "relevant" if relevance else "ranked"]
        found = db.execute(statement, (title, *queries, most))
    else:
        found = db.execute(_STATEMENTS[dialect, titles, "titled"], (title, most))
    rows = found.fetchall()
    at = len(INDEX_KEYS)
    wanted: dict[str, list[int]] = {}
    for row in rows:
        for field, turn in zip(_SNIPPETS, (row[at + 2], row[at + 3], row[at + 5])):
            if turn is not None:
                wanted.setdefault(field, []).append(turn)
    room = most - len(rows) if some_words else 0
    some = _some_words(db, dialect, terms, room, {row[0] for row in rows}, relevance)
    for turn, field in some.values():
        if field in _SNIPPETS:
            wanted.setdefault(field, []).append(turn)
    shown = snippets.snippets(db, wanted, terms)
    out = []
    for row in rows:
        band, in_title, request_turn, reply_turn, in_thinking, tool_turn = row[at:]
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
                "request_snippet": shown.get((request_turn, "request")),
                "reply_snippet": shown.get((reply_turn, "reply")),
                "tool_snippet": shown.get((tool_turn, "tools")),
            }
        )
        out.append(entry)
    for row, (turn, field) in some.items():
        entry = index_row(row)
        entry.update(
            {
                **_BY_MEANING_ONLY,
                "rank": SOME_WORDS_BAND,
                "is_by_meaning": False,
                f"is_in_{field}": True,  # (a field said: request, reply, thinking)
                f"{field}_snippet": shown.get((turn, field)),
            }
        )
        entry.pop("thinking_snippet", None)
        out.append(entry)
    return out


def _some_words(
    db: Any, dialect: str, terms: list[str], room: int, banded: set[str], relevance: bool
) -> dict[tuple, tuple[int, str]]:
    """The sessions holding some of the search's words (SOME_WORDS_BAND) where the bands
    left `room` on the page: at least half its terms (and two), each anywhere in the
    session's turns — a question in a person's words seldom has all of its words in one
    field of one turn. Newest first (under `relevance`, those holding more first, then
    by their terms' best scores); each row (an index row's values) → the turn and field
    holding the most of them."""
    if len(terms) < 2 or room <= 0:
        return {}
    distinct = list(dict.fromkeys(terms))
    queries = [
        expression(dialect, column, [term], prefix=term == terms[-1])
        for term in distinct
        for column in SOME_COLUMNS
    ]
    statement = _some_statement(dialect, len(distinct), relevance)
    least = max(2, (len(distinct) + 1) // 2)
    found = db.execute(statement, (*queries, least, room + len(banded))).fetchall()
    at = len(INDEX_KEYS)
    out: dict[tuple, tuple[int, str]] = {}
    for row in found:
        if row[0] not in banded and len(out) < room:
            out[tuple(row[:at])] = (row[at + 1], row[at + 2])
    return out


_SNIPPETS = ("request", "reply", "tools")  # the fields a row shows snippets of


def marked(text: str, search: str) -> list[tuple[str, bool]]:
    """`text` cut into pieces, each with whether it is a word the search matches (by
    the rule that chose the snippet): what a reader highlights."""
    return snippets.marked(text, search_terms(search))
