"""Recall benchmark: does ranking by meaning find more than ranking by words?
(docs/search.md, "Ranking by meaning")

Workload
    The labelled claims set (`recall_claims.py`): 79 claims in three agents' contexts
    under the channel ``CxTeam`` and 46 questions, each with the claims that answer it,
    plus 5 questions nothing stored answers.

What is measured, per ranking (`kb.search(question, "CxTeam", ranking=...)`)
    recall@5   the share of each question's answers among its first 5 hits (mean)
    hit@1      questions whose first hit answers them
    MRR@10     mean reciprocal rank of the first answer within 10 hits
    no-answer  of the 5 questions nothing answers, how many got any hit (lower is better)

Rows: ``lexical`` (words only: FTS5's BM25), ``hybrid`` (the shipped fusion of the
lexical rank with the embedding model's, `koinii.kb.semantic`), and — for reference,
never shipped — ``meaning only`` (the embedding rank alone) and hybrid at other cut-offs
of `MIN_SIMILARITY`. Needs ``pip install 'koinii[semantic]'`` for all but the lexical row.

Run it::

    .venv/bin/python benchmarks/recall.py
    .venv/bin/python benchmarks/recall.py --quick   # the first 10 questions (a smoke run)

Progress goes to stderr and the table to stdout. The numbers are deterministic (no
timing): they change only with the data, the model or the ranking.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable, Sequence

import koinii
from koinii import channel
from koinii.kb import semantic
from koinii.kb.store import fulltext
from recall_claims import CLAIMS, QUERIES  # beside this script

AGENTS = ("AgentAtlas", "AgentBoreas", "AgentCyra")
NO_ANSWER = (
    "what is the weather in paris",
    "banana bread recipe",
    "who won the football match",
    "how to train a puppy",
    "best hiking trails in the alps",
)
AT = 5
CUTOFFS = (0.2, 0.4)  # hybrid at these MIN_SIMILARITY too, beside the shipped one

Ranker = Callable[[str], list[str]]  # a question → the keys of its hits, best first


def build() -> tuple[Ranker, Ranker, Ranker]:
    """The KB holding the claims, and its rankers: lexical, hybrid, meaning only."""
    kb = koinii.open_kb()
    medium = channel.local(kb)
    agents = [channel.join(medium, "CxTeam", name) for name in AGENTS]
    key_of: dict[int, str] = {}
    for i, (key, sentence) in enumerate(CLAIMS.items()):
        key_of[agents[i % len(agents)].assert_(sentence)] = key
    reader = agents[0]

    def ranked(ranking: str) -> Ranker:
        def rank(question: str) -> list[str]:
            hits = reader.search(question, limit=10, ranking=ranking)
            return [key_of.get(h.sentex.handle, "?") for h in hits]

        return rank

    def meaning_only(question: str) -> list[str]:
        import numpy

        keys = list(CLAIMS)
        texts = [fulltext.document(koinii.terms.parse(CLAIMS[k]))[0] for k in keys]
        scores = semantic.embed(texts) @ semantic.embed([question])[0]
        order = numpy.argsort(-scores, kind="stable")
        return [keys[i] for i in order if scores[i] >= semantic.MIN_SIMILARITY][:10]

    return ranked("lexical"), ranked("hybrid"), meaning_only


def score(rank: Ranker, queries: Sequence[tuple[str, set[str]]]) -> dict[str, float]:
    recall = hit1 = mrr = 0.0
    for question, answers in queries:
        found = rank(question)
        recall += len(answers & set(found[:AT])) / len(answers)
        hit1 += bool(found) and found[0] in answers
        first = next((i for i, key in enumerate(found) if key in answers), None)
        mrr += 0.0 if first is None else 1.0 / (first + 1)
    n = len(queries)
    noise = sum(bool(rank(question)) for question in NO_ANSWER)
    return {"recall": recall / n, "hit1": hit1 / n, "mrr": mrr / n, "noise": noise}


def run(queries: Sequence[tuple[str, set[str]]]) -> str:
    lexical, hybrid, meaning = build()
    rows: list[tuple[str, dict[str, float]]] = [("lexical", score(lexical, queries))]
    if semantic.installed():
        shipped = semantic.MIN_SIMILARITY
        rows.append((f"hybrid (shipped, cut-off {shipped})", score(hybrid, queries)))
        rows.append((f"meaning only (cut-off {shipped})", score(meaning, queries)))
        for cutoff in CUTOFFS:
            semantic.MIN_SIMILARITY = cutoff
            try:
                rows.append((f"hybrid, cut-off {cutoff}", score(hybrid, queries)))
            finally:
                semantic.MIN_SIMILARITY = shipped
    else:
        print("  .. koinii[semantic] is not installed: the lexical row only", file=sys.stderr)
    lines = [
        f"Koinii recall benchmark, the labelled claims set: {len(CLAIMS)} claims, "
        f"{len(queries)} questions "
        f"with answers, {len(NO_ANSWER)} without",
        "",
        f"| ranking | recall@{AT} | hit@1 | MRR@10 | no-answer questions with hits |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in rows:
        lines.append(
            f"| {name} | {r['recall']:.2f} | {r['hit1']:.2f} | {r['mrr']:.2f} "
            f"| {int(r['noise'])} of {len(NO_ANSWER)} |"
        )
    return "\n".join(lines)


# ================================================================ sessions

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = REPOSITORY / "tests" / "data" / "sessions"
SHARED = REPOSITORY.parent / "shared" / "data" / "transcripts"

# (search, words of the titles of the sessions that answer it; None: only with SHARED)
SESSION_QUERIES = [
    ("german tax rounding rules", {"VAT rounding does Germany"}),
    ("decimal rounding bug at checkout", {"Fix VAT rounding in checkout"}),
    ("overview of the payments code", {"Summarise the payment module"}),
    ("push notification tests broken", {"Fix failing push tests"}),
    ("exponential backoff for uploads", {"retry with backoff"}),
    ("intermittent test failure on CI", {"flaky test"}),
    ("which tests depend on the current time", {"flaky test"}),
    ("elixir web server will not boot", {"phx.server", "start phoenix"}),
    ("terminal scrollback in the browser", {"start phoenix"}),
    ("write a CLAUDE.md for the repository", {"/init"}),
    # searches in the sessions' own words
    ("VAT rounding", {"VAT rounding"}),
    ("retry backoff", {"retry with backoff"}),
    ("flaky test", {"flaky test"}),
    ("phoenix", {"start phoenix"}),
    ("payment module", {"Summarise the payment module"}),
]


def sessions_rankers() -> tuple[Ranker, Ranker, str]:
    """THE ranked session search over the samples, lexical and hybrid: the titles of
    the sessions it returns, best first."""
    from koinii.sessions.importing import import_paths
    from koinii.sessions.introspection import Introspection
    from koinii.sessions.store import SessionStore

    kb = koinii.open_kb()
    folders = [SAMPLES] + ([SHARED] if SHARED.is_dir() else [])
    import_paths(SessionStore(kb), folders)
    reader = Introspection(kb)
    count = len(reader.list_sessions(limit=1000))

    def ranked(ranking: str) -> Ranker:
        def rank(search: str) -> list[str]:
            rows = reader.list_sessions(search, limit=10, ranking=ranking)
            return [row["title"] or "" for row in rows]

        return rank

    names = "tests/data/sessions" + (" and ../shared/data/transcripts" if len(folders) > 1 else "")
    where = f"{count} sessions from {names}"
    return ranked("lexical"), ranked("hybrid"), where


def score_sessions(rank: Ranker, queries: Sequence[tuple[str, set[str]]]) -> dict[str, float]:
    recall = hit1 = mrr = 0.0
    for search, answers in queries:
        found = rank(search)

        def answers_it(found_title: str, answers: set[str] = answers) -> bool:
            return any(words in found_title for words in answers)

        relevant = [i for i, t in enumerate(found) if answers_it(t)]
        recall += min(1.0, len([i for i in relevant if i < AT]) / len(answers))
        hit1 += bool(relevant) and relevant[0] == 0
        mrr += 1.0 / (relevant[0] + 1) if relevant else 0.0
    n = len(queries)
    return {"recall": recall / n, "hit1": hit1 / n, "mrr": mrr / n}


def run_sessions(queries: Sequence[tuple[str, set[str]]]) -> str:
    lexical, hybrid, where = sessions_rankers()
    if not SHARED.is_dir():
        queries = [(q, a) for q, a in queries if not a & {"phx.server", "start phoenix", "/init"}]
    rows = [("lexical (THE ranked search)", score_sessions(lexical, queries))]
    if semantic.installed():
        rows.append(("hybrid (shipped)", score_sessions(hybrid, queries)))
    lines = [
        f"Recall on the sessions: {where}, {len(queries)} searches",
        "",
        f"| ranking | recall@{AT} | hit@1 | MRR@10 |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, r in rows:
        lines.append(f"| {name} | {r['recall']:.2f} | {r['hit1']:.2f} | {r['mrr']:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 10 questions")
    args = parser.parse_args(argv)
    print(run(QUERIES[:10] if args.quick else QUERIES))
    print()
    print(run_sessions(SESSION_QUERIES))


if __name__ == "__main__":
    main()
