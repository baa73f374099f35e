"""Finding what is stored without knowing its predicate: ranked full-text `search`, and
the `vocabulary` in use (docs/search.md).

One concept: the search, as one object the KB holds (`Search`) — its steps, the two
rankings it fuses, the thread rule over the ranked list, and the word counts and vectors
it keeps caught up; what it draws on (word forms, dates, entities, the model) are modules
of their own.

Invariant: what a search or a vocabulary read returns is visible at its context exactly
as a `query` there would see it — the same acceptor (`Reads.acceptor`): believed,
stored in a context the given one sees (inheritance respected), not masked there;
`CxEverything` sees every stored sentex, believed or not — the shipped vocabulary's own
sentences (`mark_shipped`) left out of both: they say what Koinii ships, not what the
team knows. The store ranks by words (its full-text index, `store.fulltext`); ranked
hybrid, the engine also ranks by meaning (`semantic`: the vectors of the stored
sentences, kept in memory beside the index and caught up at each search) and fuses the
two, weighing the words by how much of the search the best word hit holds; either way
the engine decides visibility, so a store never needs to know belief or the hierarchy,
and a hit the reader cannot see is never returned, only skipped. The search's words
stand for the forms the store holds of them (`terms_of_search`: compounds, typos,
abbreviations), and a date they name for the sentences holding or recorded in it
(`dates_of_search`). Over the ranked list, two rules about what was said rather than
how: a question-answer thread is one (an answer and the claim it carries are one hit,
the answer; a question's answers come before it), and the facts about the entities the
best hits name follow the hit that names each (`entities_of_search`). Every list a
search ranks looks at no more than MAX_EXAMINED matches, so matches hidden from the
reader cost bounded work.

A read never changes the KB. The one exception in kind: the indexes kept lazily — the
in-memory store's and SQLite's FTS5, the vectors and the stored words' counts — take in
the writes since the last search before it answers.

Inside an open group commit (`begin_group`) the store's index holds only what was
committed before the group: the daemon commits an open group before it searches, so a
search over the wire always sees every write acknowledged before it.

A search is written as steps (`search_steps`: a generator yielding each ask of the
store's word index), so that a server may answer the asks off its event loop, through a
connection of their own, and run the steps between on it (server/searching.py). There,
other operations run between two steps: a hit is one visible at the search's context
when the step that looked at it ran, and a write acknowledged before the search began
is seen by every step (the server indexes what was written before it asks: `index_words`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from koinii.errors import Refused
from koinii.kb import checks, entities_of_search, semantic, terms_of_search
from koinii.kb.rules import CARRIES_CLAIM
from koinii.kb.sentex import Node, Sentex
from koinii.kb.store import fulltext
from koinii.kb.store.fulltext import MAX_SEARCH_TEXT, MAX_WORDS, query_words, text_words
from koinii.terms import Sym, Var

if TYPE_CHECKING:
    import threading

    from koinii.kb.index import Index
    from koinii.kb.ledger import Ledger
    from koinii.kb.store import Store

MAX_HITS = 100  # hits a search returns, at most
MAX_TERMS = 64  # terms a search asks the store for (its words, forms, compounds, typos)
# matches a search looks at for visible ones, at most: past them, the rest are another
# context's (a search must not scan every hidden match: issue 37's 0.4-0.6 s)
MAX_EXAMINED = 4_000
TERMS_PER_SEARCH = 5_000  # sentexes whose words a search counts first, at most (~75 ms)
# how much a full word match weighs in the fusion beyond the meaning side's 1: the word
# ranking's weight is 1 + FUSION_WEIGHT x the share of the search its best hit holds
FUSION_WEIGHT = 2.0
FUSION_POWER = 2.0
ANSWERS_PER_QUESTION = 3  # a question's answers placed before it, at most
COVERAGE_FIRST = True  # word hits holding more of the typed words first (a benchmark switch)
THREADS = True  # an answer and its claim one hit, before the question (a benchmark switch)
ENTITIES = True  # pull in the facts about the best hits' entities (a benchmark switch)

# A question and an answer, as the engine sees them (koinii.speech names the moves; the
# engine sits below it).
QUERIES = Sym("queries")
ANSWERS = Sym("answers")
HANDLE = Sym("sentexHandle")
DEFAULT_HITS = 10
# of the backlog a hybrid search embeds first, at most (0.1-0.3 s: it holds the writer)
EMBED_PER_SEARCH = 2_000
EMBED_BATCH = 500  # sentences embedded at a time (between budget ticks)


# Whether a search's reader sees a node (a handle no longer stored has none: not seen).
Visible = Callable[[Node | None], TypeGuard[Node]]

# An ask of the store's word index, as a search's steps yield it: ("search", words, n)
# or ("snippets", words, handles) — answered by `Store.search` / `Store.snippets`.
Ask = tuple[str, list[str], Any]


@dataclass(frozen=True)
class Hit:
    """One search result: the sentex, who wrote it, where the words matched, how well."""

    sentex: Sentex
    author: str | None  # the creator (else the principal the daemon attributed it to)
    snippet: str  # the indexed text around the matched words, each match in [ ]
    score: float  # the relevance: higher is better; only the order means anything
    # by its "words", its "meaning" (hybrid), "words+meaning", "answer" (the answer to a
    # question that matched) or "linked" (a fact about an entity a best hit names)
    matched: str = "words"


class Searched(Protocol):
    """What a search reads of the KB around it, asked at each use: what a reader at a
    context sees (`Reads.acceptor`), and the running operation's budget (`spend` once per
    match looked at; `bounded`, with the KB's `query_budget_s`, for a search or a
    vocabulary read that runs outside one)."""

    query_budget_s: float | None

    def acceptor(self, ctx: str) -> Callable[[Node, dict], dict | None]: ...

    def spend(self) -> None: ...

    def bounded(self, seconds: float | None, what: str) -> AbstractContextManager[Any]: ...


class Search:
    """`search` and `vocabulary` (see the module docstring): an object of its own, which
    `KB` holds and delegates to (engine.py).

    Its state is its own: the stored words' counts and the sentences' vectors (each made
    at the first search that needs it, or the vectors a checkpoint kept), how far the
    words are indexed, and how many matches the last search looked at. What it reads is
    given to it, and it changes none of it: the KB's lock, the store (its word index),
    the stored nodes' index (maintenance's), the ledger (the last handle given out:
    writes'), the shipped vocabulary's handles (writes': replaced whole by
    `mark_shipped`, so asked for at each use), the clock (a search's dates are relative
    to it) and the KB itself for what a reader sees and the budget (`Searched`)."""

    __slots__ = (
        "_kb",
        "_lock",
        "_store",
        "_index",
        "_ledger",
        "_shipped",
        "_clock",
        "_vectors_kept",
        "_terms_counted",
        "_words_indexed",
        "last_examined",
        "_closed",
    )

    def __init__(
        self,
        kb: Searched,
        *,
        lock: threading.RLock,
        store: Store,
        index: Index,
        ledger: Ledger,
        shipped: Callable[[], frozenset[int]],
        clock: Callable[[], int],
        vectors: semantic.Vectors | None = None,
    ) -> None:
        self._kb = kb
        self._lock = lock
        self._store = store
        self._index = index
        self._ledger = ledger
        self._shipped = shipped
        self._clock = clock
        # the stored sentences' vectors: a checkpoint's (what was written since it is
        # embedded as it is searched), else made at the first hybrid search
        self._vectors_kept = vectors
        self._terms_counted: terms_of_search.Terms | None = None  # made at the first search
        self._words_indexed = 0  # every sentex below this handle is indexed by its words
        self.last_examined = 0  # matches (by words and by meaning) the last search looked at
        self._closed = False  # the KB closed its store: nothing more is indexed (`close`)

    def close(self) -> None:
        """The KB has closed (its store with it): from now on the indexing calls a
        server's keeper may still make (`index_words`, …) index nothing."""
        self._closed = True

    @property
    def vectors(self) -> semantic.Vectors | None:
        """The stored sentences' vectors, if any were made: what a checkpoint keeps."""
        return self._vectors_kept

    def search(
        self, text: Any, ctx: Any, *, limit: int = DEFAULT_HITS, ranking: str | None = None
    ) -> list[Hit]:
        """The sentexes visible at `ctx` whose words — or, ranked hybrid, whose meaning —
        match `text`, best first.

        Any word of `text` may match (stop words such as "the" are left out); a sentex
        matching more of them, or rarer ones, ranks higher. Symbols are searched by
        their words: `postgres version` finds `(postgresMajorVersion ProdCluster 16)`;
        a compound typed joined or split, or a longer word mistyped, by the stored words
        it stands for (`terms_of_search`). `ranking="hybrid"` (the default where
        `koinii[semantic]` is installed) fuses that rank with the sentences' closeness in
        meaning, weighing the words more the better the best word match covers the
        search; `"lexical"` ranks by words alone. An answer and the claim it carries are
        one hit (the answer), placed before a question it answers; the facts about an
        entity the best hit names follow it. The shipped vocabulary's own sentences are
        not searched: what the team stored is.
        """
        kb = self._kb
        with self._lock, kb.bounded(kb.query_budget_s, "the search"):
            steps = self.search_steps(text, ctx, limit=limit, ranking=ranking, catch_up=True)
            self._store.catch_up()
            return self.answer(steps)

    def answer(self, steps: Steps) -> list[Hit]:
        """Run a search's steps to its hits, each ask answered by the store, here."""
        with self._lock:
            return _answered(self._store, steps)

    def index_reader(self) -> Any:
        """A reader of the store's word index for another thread (`Store.reader`: a
        connection of its own, closed by the caller), or None where there is none."""
        return self._store.reader()

    def search_steps(
        self,
        text: Any,
        ctx: Any,
        *,
        limit: int = DEFAULT_HITS,
        ranking: str | None = None,
        catch_up: bool = False,
    ) -> Steps:
        """`search` as steps, its arguments checked now: a generator that yields each
        ask of the store's word index — `("search", words, n)`, `("snippets", words,
        handles)` —, is sent the answer (`answer` sends the store's), and returns the
        hits. A server answers each ask off its event loop and runs the steps between
        on it (server/searching.py). `catch_up`: count the stored words and embed the
        sentences written since the last search first; without it, the caller keeps
        the indexes caught up (`index_words`, `index_meaning`)."""
        _search_words(text)
        if type(limit) is not int or not 1 <= limit <= MAX_HITS:
            raise Refused(
                "bad-option",
                f"limit is an integer from 1 to {MAX_HITS}, not {limit!r:.40}",
                {"option": "limit", "max": MAX_HITS},
            )
        ranking = semantic.ranking_of(ranking)
        ctx_name = _one_context(ctx, "search")
        return self._steps(text, ctx_name, limit, ranking, catch_up)

    def _steps(self, text: str, ctx_name: str, limit: int, ranking: str, catch_up: bool) -> Steps:
        self.last_examined = 0
        query = self._query_of(text, catch_up)
        if not query.words and ranking == "lexical":
            return []
        accept, spend = self._kb.acceptor(ctx_name), self._kb.spend
        shipped = self._shipped()

        def visible(node: Node | None) -> TypeGuard[Node]:
            spend()
            return node is not None and node.handle not in shipped and accept(node, {}) is not None

        depth = max(limit, semantic.DEPTH)  # each side's hits brought to the ranking
        lexical = (yield from self._by_words(query.words, depth, visible)) if query.words else []
        if COVERAGE_FIRST:
            lexical = _more_of_the_search_first(query, lexical)
        snippets = {node.handle: snippet for node, _, snippet in lexical}
        matched: dict[int, str] = {}
        if ranking == "lexical":
            ranked = [(node, score) for node, score, _ in lexical]
            matched = dict.fromkeys(snippets, "words")
        else:
            meaning = self._by_meaning(text, depth, visible, catch_up)
            nodes = {node.handle: node for node, _, _ in lexical} | meaning
            held = self._best_word_hit_holds(query, lexical)
            fused = semantic.fuse(
                [n.handle for n, _, _ in lexical],
                list(meaning),
                lexical_weight=1.0 + FUSION_WEIGHT * held**FUSION_POWER,
            )
            ranked = [(nodes[handle], score) for handle, score in fused]
            if held == 1.0 and FUSION_WEIGHT and lexical[0][0] is not ranked[0][0]:
                # the best word hit holds every typed word: it keeps the first place
                first = lexical[0][0]
                ranked = [(first, ranked[0][1])] + [r for r in ranked if r[0] is not first]
            for handle in nodes:
                if handle not in snippets:
                    matched[handle] = "meaning"
                else:
                    matched[handle] = "words+meaning" if handle in meaning else "words"
        if ENTITIES:
            ranked = yield from entities_of_search.linked(self, query, ranked, visible, matched)
        if THREADS:
            ranked = self._threads(ranked, visible, matched)
        out = [(node, score, snippets.get(node.handle)) for node, score in ranked[:limit]]
        return (yield from self._hits(query.words, out, matched))

    def _query_of(self, text: str, catch_up: bool) -> terms_of_search.Query:
        """The search's terms, its compounds and typos looked up in the stored words
        (`catch_up`: counted first for what was written since the last search, a
        bounded slice)."""
        if catch_up:
            self._count_terms(TERMS_PER_SEARCH)
        query = terms_of_search.expand(text, self._terms(), self._clock())
        query.words = query.words[:MAX_TERMS]
        return query

    def _terms(self) -> terms_of_search.Terms:
        if self._terms_counted is None:
            self._terms_counted = terms_of_search.Terms()
        return self._terms_counted

    def _count_terms(self, limit: int | None) -> int:
        """Count the words of up to `limit` stored sentexes not counted yet, oldest
        first (its slices tick the budget); how many."""
        terms = self._terms()
        by_handle = self._index.by_handle
        shipped = self._shipped()
        counted = 0
        handle = terms.top
        last = self._ledger.next_handle - 1  # the last handle given out
        texts: list[str] = []
        while handle < last and (limit is None or counted < limit):
            handle += 1
            node = by_handle.get(handle)
            if node is not None and handle not in shipped:
                texts.append(" ".join(fulltext.document(node.atom)).lower())
                counted += 1
                if len(texts) == EMBED_BATCH:  # counted with its mark: a stop loses none
                    terms.add(texts)
                    terms.top, texts = handle, []
                    self._kb.spend()
        terms.add(texts)
        terms.top = handle
        return counted

    def _best_word_hit_holds(
        self, query: terms_of_search.Query, lexical: list[tuple[Node, float, str | None]]
    ) -> float:
        """The word ranking's evidence: the share of the search's typed words its best
        hit holds (`coverage`; 0 without word hits)."""
        if not lexical or not query.groups:
            return 0.0
        return terms_of_search.held_by(query, lexical[0][0])

    def _by_words(
        self, words: list[str], limit: int, visible: Visible
    ) -> Generator[Ask, Any, list[tuple[Node, float, str | None]]]:
        """The store's best `limit` visible matches of `words`: (node, score, snippet).

        The store ranks every match; the engine checks visibility. It asks for a few
        more than wanted (some may not be visible here), then for pages eight times
        larger (without snippets), and looks at MAX_EXAMINED matches at most: a search
        whose best matches are all hidden from it — another team's — costs a bounded
        amount of work, never a scan of every match (`last_examined` says how many)."""
        by_handle = self._index.by_handle
        found: list[tuple[Node, float, str | None]] = []
        asked = limit * 3 // 2 + 8
        seen = 0
        while True:
            ranked = yield ("search", words, asked)
            for handle, score, snippet in ranked[seen:]:
                node = by_handle.get(handle)
                if visible(node):
                    found.append((node, score, snippet))
                    if len(found) == limit:
                        break
            self.last_examined += len(ranked) - seen
            if len(found) == limit or len(ranked) < asked or asked >= MAX_EXAMINED:
                return found
            seen = len(ranked)
            asked = min(asked * 8, MAX_EXAMINED)

    def _threads(
        self, ranked: list[tuple[Node, float]], visible: Visible, matched: dict[int, str]
    ) -> list[tuple[Node, float]]:
        """The ranking with each question-answer thread as one: an answer and the claim
        it carries are one hit, the answer (where the claim ranked, if higher); a
        question's visible answers come right before it (`matched`: "answer")."""
        out: list[tuple[Node, float]] = []
        placed: set[int] = set()
        for node, score in ranked:
            unit = self._carrier(node, visible) or node
            if unit is not node and unit.handle not in matched:
                matched[unit.handle] = matched.get(node.handle, "words")
            if unit.atom and unit.atom[0] is QUERIES and node.positive:
                for answer in self._answers(unit, visible):
                    if answer.handle not in placed:
                        placed.add(answer.handle)
                        out.append((answer, score))
                        matched.setdefault(answer.handle, "answer")
            if unit.handle not in placed:
                placed.add(unit.handle)
                out.append((unit, score))
        return out

    def _carrier(self, node: Node, visible: Visible) -> Node | None:
        """The visible answer whose carried claim `node` is (and nothing else holds it
        up: a claim also asserted by itself stays its own hit)."""
        if node.premise or not node.justs:
            return None
        for j in node.justs:
            rule = j.rule
            if rule.atom[0] is CARRIES_CLAIM and rule.atom[1] is ANSWERS:
                answer = j.first
                if type(answer) is Node and visible(answer):
                    return answer
        return None

    def _answers(self, question: Node, visible: Visible) -> list[Node]:
        """The visible standing answers to `question`, oldest first (at most 3)."""
        target = (HANDLE, question.handle)
        pattern = (ANSWERS, Var("who"), Var("what"), target)
        found = [
            node
            for node in self._index.candidates(pattern, {})
            if node.positive and node.atom[-1] == target and visible(node)
        ]
        return sorted(found, key=lambda n: n.handle)[:ANSWERS_PER_QUESTION]

    def _by_meaning(
        self, text: str, depth: int, visible: Visible, catch_up: bool
    ) -> dict[int, Node]:
        """The visible sentexes closest in meaning to `text` (at least
        `semantic.MIN_SIMILARITY`), nearest first, at most `depth`: handle → node.
        `catch_up`: embeds first what was written since the last search (at most
        EMBED_PER_SEARCH of it; the rest is found by its words until embedded). Like the
        words, looks at MAX_EXAMINED close sentexes at most."""
        if catch_up:
            self._embed_written(EMBED_PER_SEARCH)
        by_handle = self._index.by_handle
        near: dict[int, Node] = {}
        for examined, (handle, _) in enumerate(self._vectors().nearest(text), 1):
            self.last_examined += 1
            node = by_handle.get(handle)
            if visible(node):
                near[handle] = node
                if len(near) == depth:
                    break
            if examined == MAX_EXAMINED:
                break  # the rest lie past many this context does not see (see _by_words)
        return near

    def _vectors(self) -> semantic.Vectors:
        if self._vectors_kept is None:
            self._vectors_kept = semantic.Vectors()
        return self._vectors_kept

    def _embed_written(self, limit: int | None) -> int:
        """Embed up to `limit` of the stored sentexes not embedded yet, oldest first;
        how many. Its slices tick the budget, so a search's catch-up is bounded too."""
        vectors = self._vectors()
        by_handle = self._index.by_handle
        shipped = self._shipped()
        added = 0
        batch: list[tuple[int, str]] = []
        handle = vectors.top
        last = self._ledger.next_handle - 1  # the last handle given out
        while handle < last and (limit is None or added + len(batch) < limit):
            handle += 1
            node = by_handle.get(handle)
            if node is not None and handle not in shipped:
                batch.append((handle, fulltext.document(node.atom)[0]))
                if len(batch) == EMBED_BATCH:
                    self._kb.spend()
                    added += vectors.add(batch, handle)
                    batch = []
        return added + vectors.add(batch, handle)

    def _hits(
        self, words: list[str], found: list[tuple[Node, float, str | None]], matched: dict
    ) -> Generator[Ask, Any, list[Hit]]:
        """The hits, each with its snippet: the store's window around the matched words
        (asked for now where the ranking did not bring one), else the sentence's words."""
        missing = [
            node.handle
            for node, _, snippet in found
            if snippet is None and matched.get(node.handle) != "meaning"
        ]
        late = (yield ("snippets", words, missing)) if missing and words else {}
        return [
            Hit(
                Sentex.of(node),
                _author(node),
                snippet if snippet is not None else late.get(node.handle) or _opening(node),
                score,
                matched.get(node.handle, "words"),
            )
            for node, score, snippet in found
        ]

    def index_for_search(self, limit: int | None = None) -> int:
        """Index for search, now, up to `limit` of the sentexes written since the last
        search (a store that indexes lazily — SQLite's FTS5, the in-memory store — would
        do it at the next search), and, where the semantic extra is installed, embed as
        many; returns how many were indexed. After a bulk load, so no search has a long
        backlog to catch up on."""
        with self._lock:
            if self._closed:
                return 0
            indexed = self._store.catch_up(limit)
            self._count_terms(limit)
            if semantic.installed():
                self._embed_written(limit)
            return indexed

    def index_words(self, limit: int) -> tuple[int, int]:
        """Index by their words (the store's full-text index, the stored words' counts)
        up to `limit` of the sentexes not indexed yet, oldest first: a bounded slice, for
        a server that keeps the index caught up itself (`search_steps` without
        `catch_up`). Returns (indexed, written): every sentex below the handle
        `indexed` is indexed by its words, and every one written is below `written`."""
        with self._lock:
            written = self._ledger.next_handle
            if self._closed:
                return written, written
            if self._store.catch_up(limit) < limit and self._count_terms(limit) < limit:
                self._words_indexed = written
            return self._words_indexed, written

    def index_meaning(self, limit: int) -> int:
        """Embed up to `limit` of the sentences not embedded yet (a bounded slice; none
        without the semantic extra); how many."""
        with self._lock:
            if self._closed or not semantic.installed():
                return 0
            return self._embed_written(limit)

    def vocabulary(self, ctx: Any) -> list[dict[str, Any]]:
        """The predicates of the sentexes visible at `ctx`, most used first: each with
        how many sentexes use it and one of them (the oldest) as an example.

        The shipped vocabulary's own sentences (CxCore's declarations) are not counted:
        this is what the team uses, not what Koinii ships.
        """
        ctx_name = _one_context(ctx, "vocabulary")
        kb = self._kb
        with self._lock, kb.bounded(kb.query_budget_s, "the vocabulary"):
            accept, spend = kb.acceptor(ctx_name), kb.spend
            shipped = self._shipped()
            counts: Counter[str] = Counter()
            example: dict[str, Node] = {}
            for functor, findex in self._index.by_functor.items():
                name = functor.name
                for node in findex.every():
                    spend()
                    if node.handle in shipped or accept(node, {}) is None:
                        continue
                    counts[name] += 1
                    oldest = example.get(name)
                    if oldest is None or node.handle < oldest.handle:
                        example[name] = node
            return [
                {
                    "predicate": name,
                    "count": count,
                    "example": {
                        "handle": example[name].handle,
                        "sentence": example[name].full_text,
                        "context": example[name].context,
                    },
                }
                for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            ]


Steps = Generator[Ask, Any, list[Hit]]


def _answered(store: Any, steps: Steps) -> list[Hit]:
    answer = None
    try:
        while True:
            kind, words, arg = steps.send(answer)
            answer = store.search(words, arg) if kind == "search" else store.snippets(words, arg)
    except StopIteration as done:
        return done.value


def _one_context(ctx: Any, what: str) -> str:
    """The context `what` reads at: one named context, or CxEverything — not a variable
    (a query's "anywhere"), since a hit must be visible somewhere in particular."""
    name = checks.context_name(ctx, query=True)
    if name.startswith("?"):
        raise Refused(
            "read-only-context",
            f"{what} reads at one context (or CxEverything), not the variable {name}",
            {"context": name},
        )
    return name


def _search_words(text: Any) -> list[str]:
    """The words to look for, or the refusal that says what to send instead."""
    if type(text) is not str or not text.strip():
        raise Refused(
            "bad-search",
            f"search for words, e.g. search('postgres version'), not {text!r:.40}",
            {"text": repr(text)[:40]},
        )
    if len(text) > MAX_SEARCH_TEXT:
        raise Refused(
            "bad-search",
            f"a search is at most {MAX_SEARCH_TEXT} characters, not {len(text)}: "
            "search for the few words that matter",
            {"length": len(text), "max": MAX_SEARCH_TEXT},
        )
    if not text_words(text):
        raise Refused(
            "bad-search",
            f"{text!r:.40} holds no words (letters or digits) to search for",
            {"text": text[:40]},
        )
    words = query_words(text)
    if len(words) > MAX_WORDS:
        raise Refused(
            "bad-search",
            f"a search looks for at most {MAX_WORDS} words, not {len(words)}: "
            "search for the few that matter",
            {"words": len(words), "max": MAX_WORDS},
        )
    return words


def _more_of_the_search_first(
    query: terms_of_search.Query, lexical: list[tuple[Node, float, str | None]]
) -> list[tuple[Node, float, str | None]]:
    """The word hits, those holding more of the typed words first, then in the store's
    order: BM25 adds the words' weights, so one rare word can outrank two common ones,
    and a compound's forms ("roll", "back", "rollback") count as one typed word here. A
    hit holding only the time a question asks for ("when": any date) is no hit."""
    held = [terms_of_search.covered_by(query, [node]) for node, _, _ in lexical]
    keep = [i for i in range(len(lexical)) if not query.asked or held[i] - query.asked]
    order = sorted(keep, key=lambda i: -len(held[i]))
    return [lexical[i] for i in order]


def _opening(node: Node) -> str:
    """A meaning-only hit's snippet: the first words of what its sentence reads as."""
    words = fulltext.document(node.atom)[0].split(" ")
    cut = len(words) > fulltext.SNIPPET_TOKENS
    return " ".join(words[: fulltext.SNIPPET_TOKENS]) + (" …" if cut else "")


def _author(node: Node) -> str | None:
    """Who said it: its creator, else the principal whose token wrote it; for a sentex a
    vocabulary rule derives from one author's move (an answer's claim, carried by the
    answer), that move's author."""
    if node.creator is not None:
        return node.creator
    principal = (node.extra or {}).get("principal")
    if isinstance(principal, str):
        return principal
    justs = node.justs
    if not justs:
        return None
    carried = {a.creator for j in justs if j.rule.creator is None for a in j.antecedents}
    return carried.pop() if len(carried) == 1 and None not in carried else None
