"""Finding what is stored without knowing its predicate: ranked full-text `search`, and
the `vocabulary` in use (docs/search.md).

Invariant: what a search or a vocabulary read returns is visible at its context exactly
as a `query` there would see it — the same acceptor (`Reads._acceptor`): believed,
stored in a context the given one sees (inheritance respected), not masked there;
`CxEverything` sees every stored sentex, believed or not — the shipped vocabulary's own
sentences (`mark_shipped`) left out of both: they say what Koinii ships, not what the
team knows. The store ranks by words (its full-text index, `store.fulltext`); ranked
hybrid, the engine also ranks by meaning (`semantic`: the vectors of the stored
sentences, kept in memory beside the index and caught up at each search) and fuses the
two; either way the engine decides visibility, so a store never needs to know belief or
the hierarchy, and a hit the reader cannot see is never returned, only skipped.

A read never changes the KB. The one exception in kind: the indexes kept lazily — the
in-memory store's and SQLite's FTS5, and the vectors — take in the writes since the
last search before it answers.

Inside an open group commit (`begin_group`) the store's index holds only what was
committed before the group: the daemon commits an open group before it searches, so a
search over the wire always sees every write acknowledged before it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from koinii.errors import Refused
from koinii.kb import checks, semantic
from koinii.kb.sentex import Node, Sentex
from koinii.kb.state import State
from koinii.kb.store import fulltext
from koinii.kb.store.fulltext import MAX_SEARCH_TEXT, MAX_WORDS, query_words, text_words

MAX_HITS = 100  # hits a search returns, at most
DEFAULT_HITS = 10
# of the backlog a hybrid search embeds first, at most (0.1-0.3 s: it holds the writer)
EMBED_PER_SEARCH = 2_000
EMBED_BATCH = 500  # sentences embedded at a time (between budget ticks)


@dataclass(frozen=True)
class Hit:
    """One search result: the sentex, who wrote it, where the words matched, how well."""

    sentex: Sentex
    author: str | None  # the creator (else the principal the daemon attributed it to)
    snippet: str  # the indexed text around the matched words, each match in [ ]
    score: float  # the relevance: higher is better; only the order means anything
    matched: str = "words"  # by its "words", its "meaning" (hybrid), or "words+meaning"


class Search(State):
    """`search` and `vocabulary` (see the module docstring); beside `Reads` in `KB`,
    whose acceptor (`_acceptor`) decides what a context sees."""

    _acceptor: Any  # Reads._acceptor

    def search(
        self, text: Any, ctx: Any, *, limit: int = DEFAULT_HITS, ranking: str | None = None
    ) -> list[Hit]:
        """The sentexes visible at `ctx` whose words — or, ranked hybrid, whose meaning —
        match `text`, best first.

        Any word of `text` may match (stop words such as "the" are left out); a sentex
        matching more of them, or rarer ones, ranks higher. Symbols are searched by
        their words: `postgres version` finds `(postgresMajorVersion ProdCluster 16)`.
        `ranking="hybrid"` (the default where `koinii[semantic]` is installed) fuses that
        rank with the sentences' closeness in meaning, so `which database` finds it too;
        `"lexical"` ranks by words alone. The shipped vocabulary's own sentences are not
        searched: what the team stored is.
        """
        words = _search_words(text)
        if type(limit) is not int or not 1 <= limit <= MAX_HITS:
            raise Refused(
                "bad-option",
                f"limit is an integer from 1 to {MAX_HITS}, not {limit!r:.40}",
                {"option": "limit", "max": MAX_HITS},
            )
        ranking = semantic.ranking_of(ranking)
        ctx_name = _one_context(ctx, "search")
        if not words and ranking == "lexical":
            return []
        with self._lock, self._bounded(self.query_budget_s, "the search"):
            accept = self._acceptor(ctx_name)
            shipped = self._shipped

            def visible(node: Node | None) -> bool:
                self._spend()
                return (
                    node is not None and node.handle not in shipped and accept(node, {}) is not None
                )

            if ranking == "lexical":
                found = self._by_words(words, limit, visible)
                return self._hits(words, found, {})
            depth = max(limit, semantic.DEPTH)  # each side's hits brought to the fusion
            lexical = self._by_words(words, depth, visible) if words else []
            meaning = self._by_meaning(text, depth, visible)
            by_handle = {node.handle: (node, snippet) for node, _, snippet in lexical}
            fused = semantic.fuse([n.handle for n, _, _ in lexical], list(meaning))
            out: list[tuple[Node, float, str | None]] = []
            matched: dict[int, str] = {}
            for handle, score in fused[:limit]:
                node, snippet = by_handle.get(handle) or (meaning[handle], None)
                if handle not in by_handle:
                    matched[handle] = "meaning"
                else:
                    matched[handle] = "words+meaning" if handle in meaning else "words"
                out.append((node, score, snippet))
            return self._hits(words, out, matched)

    def _by_words(
        self, words: list[str], limit: int, visible: Any
    ) -> list[tuple[Node, float, str | None]]:
        """The store's best `limit` visible matches of `words`: (node, score, snippet)."""
        by_handle = self._index.by_handle
        found: list[tuple[Node, float, str | None]] = []
        # Ask the store for a few more than wanted (some may not be visible here);
        # only when that was not enough, for every match (then without snippets).
        first = limit * 3 // 2 + 8
        seen = 0
        for asked in (first, None):
            ranked = self._store.search(words, asked)
            for handle, score, snippet in ranked[seen:]:
                node = by_handle.get(handle)
                if visible(node):
                    found.append((node, score, snippet))
                    if len(found) == limit:
                        break
            if len(found) == limit or len(ranked) < first:
                break
            seen = len(ranked)
        return found

    def _by_meaning(self, text: str, depth: int, visible: Any) -> dict[int, Node]:
        """The visible sentexes closest in meaning to `text` (at least
        `semantic.MIN_SIMILARITY`), nearest first, at most `depth`: handle → node.
        Embeds first what was written since the last search (at most EMBED_PER_SEARCH
        of it; the rest is found by its words until embedded)."""
        self._embed_written(EMBED_PER_SEARCH)
        by_handle = self._index.by_handle
        near: dict[int, Node] = {}
        for handle, _ in self._vectors().nearest(text):
            node = by_handle.get(handle)
            if visible(node):
                near[handle] = node
                if len(near) == depth:
                    break
        return near

    def _vectors(self) -> semantic.Vectors:
        if self._search_vectors is None:
            self._search_vectors = semantic.Vectors()
        return self._search_vectors

    def _embed_written(self, limit: int | None) -> int:
        """Embed up to `limit` of the stored sentexes not embedded yet, oldest first;
        how many. Its slices tick the budget, so a search's catch-up is bounded too."""
        vectors = self._vectors()
        by_handle = self._index.by_handle
        shipped = self._shipped
        added = 0
        batch: list[tuple[int, str]] = []
        handle = vectors.top
        while handle < self._next_handle - 1 and (limit is None or added + len(batch) < limit):
            handle += 1
            node = by_handle.get(handle)
            if node is not None and handle not in shipped:
                batch.append((handle, fulltext.document(node.atom)[0]))
                if len(batch) == EMBED_BATCH:
                    self._spend()
                    added += vectors.add(batch, handle)
                    batch = []
        return added + vectors.add(batch, handle)

    def _hits(
        self, words: list[str], found: list[tuple[Node, float, str | None]], matched: dict
    ) -> list[Hit]:
        """The hits, each with its snippet: the store's window around the matched words
        (asked for now where the ranking did not bring one), else the sentence's words."""
        missing = [
            node.handle
            for node, _, snippet in found
            if snippet is None and matched.get(node.handle) != "meaning"
        ]
        late = self._store.snippets(words, missing) if missing and words else {}
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
        many; returns how many were indexed. For a server's idle moments and after a
        bulk load, so no search has a long backlog to catch up on."""
        with self._lock:
            if self._closed:
                return 0
            indexed = self._store.catch_up(limit)
            if semantic.installed():
                self._embed_written(limit)
            return indexed

    def vocabulary(self, ctx: Any) -> list[dict[str, Any]]:
        """The predicates of the sentexes visible at `ctx`, most used first: each with
        how many sentexes use it and one of them (the oldest) as an example.

        The shipped vocabulary's own sentences (CxCore's declarations) are not counted:
        this is what the team uses, not what Koinii ships.
        """
        ctx_name = _one_context(ctx, "vocabulary")
        with self._lock, self._bounded(self.query_budget_s, "the vocabulary"):
            accept = self._acceptor(ctx_name)
            shipped = self._shipped
            counts: Counter[str] = Counter()
            example: dict[str, Node] = {}
            for functor, findex in self._index.by_functor.items():
                name = functor.name
                for node in findex.every():
                    self._spend()
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
