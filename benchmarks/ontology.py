"""Ontology benchmark: Koinii on SUMO-shaped KIF, beside pyoxigraph and reasonable (issue 41).

SUMO is not shipped (its licence and its size). Without ``--kif DIR`` (or
``KOINII_KIF_DIR``) the run generates a SUMO-shaped ontology (benchmarks/sumo_shape.py:
a deep taxonomy where a class has one to three parents, over 42 files, instances,
ternary facts, function terms, rules shaped like Merge.kif's and the mid-level
ontology's) at ``--scale`` (SUMO's size is 1; ``--quick`` is a tiny one, the test suite's
smoke run); with it, on a folder of real ``.kif`` files, such as a checkout of
github.com/ontologyportal/sumo.

Workload
    Each file is read as KIF (`load_text(..., format="kif")`'s reader) into a context of
    its own: ``Merge.kif`` into ``CxMerge``, the mid-level ontology under it, every other
    file under that (SUMO's own layering). The statements that read and pass every check
    — found by one report-mode load, before anything is timed — are written out as
    Koinii's sentences, so every row below loads the same text.

Rows (each measured in a fresh process; ``--baseline SRC`` runs the same rows with
another checkout's ``src`` first on the path, in the same run, so a change is measured
against what it changed on the same machine at the same load; ``--rows`` picks some)
    load          all the facts, all-or-nothing and ``on_error="report"`` (their ratio is
                  the issue's target: ≤ 1.5x), and pyoxigraph loading the same facts as
                  quads, one named graph per context
    reads         over the facts, at a domain file's context through its ancestors: a
                  class's parents, a class's instances, a two-way join, a relation's
                  facts, every instance in view; pyoxigraph answering the same in SPARQL
                  over the union of those contexts' graphs, every answer checked equal
    merge_rules   Merge.kif's rules added in one write over its facts: time and counts
    inheritance   subclass transitivity and instance inheritance over every file's facts
                  (the inheritance axiom): time, conclusions, justifications, peak RSS
    inheritance_sqlite  the same over an SQLite file, the default store: time, peak RSS
    mid_check     each of the mid-level ontology's rules checked (`kb.check`, a dry run)
                  over every file's facts with Merge's rules in force, in a 60 s budget
    store, reopen every fact and Merge's rules written to an SQLite file, closed; then
                  opened in a fresh process (from the checkpoint the rules' write left)
    closure       the inheritance axiom over Merge's and the mid-level ontology's taxonomy
                  in one context, and reasonable (OWL 2 RL) closing the same as RDF: time,
                  peak growth, and the conclusions checked equal

Run it::

    .venv/bin/python benchmarks/ontology.py --scale 0.5
    .venv/bin/python benchmarks/ontology.py --kif ~/sumo --baseline ../main/src
    .venv/bin/python benchmarks/ontology.py --quick

The table goes to stdout, progress to stderr; numbers vary with the machine and its load
(printed in the heading), the ratios in one run are the part to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parent / "src"
INHERITANCE = (
    "(implies (and (subclass ?x ?y) (subclass ?y ?z)) (subclass ?x ?z))",
    "(implies (and (subclass ?x ?y) (instance ?z ?x)) (instance ?z ?y))",
)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def context_of(path: pathlib.Path) -> str:
    words = [w for w in re.split(r"[^A-Za-z0-9]+", path.stem) if w]
    return "Cx" + "".join(w[:1].upper() + w[1:] for w in words)


def prepare(kif_dir: pathlib.Path, out: pathlib.Path) -> dict[str, Any]:
    """Read every file as KIF; write its facts (those that load) and Merge's rules as
    Koinii's sentences, one per line, and the hierarchy. Returns what was read."""
    import koinii
    from koinii.kb.kif import read_sentences
    from koinii.terms import show

    implies = koinii.Sym("implies")
    files = sorted(kif_dir.glob("*.kif"))
    if not any(f.name == "Merge.kif" for f in files):
        raise SystemExit(f"{kif_dir} has no Merge.kif: point --kif at SUMO's folder")
    contexts, hierarchy, problems, statements = [], [], 0, 0
    kb = koinii.open_kb(None)
    for path in files:
        context = context_of(path)
        if context != "CxMerge":
            parent = "CxMerge" if context == "CxMidLevelOntology" else "CxMidLevelOntology"
            hierarchy.append(f"(genlCx {context} {parent})")
        found: list[dict[str, Any]] = []
        read = read_sentences(path.read_text(encoding="utf-8"), True, found)
        statements += len(read) + len(found)
        facts = [show(t) for _, _, t in read if t[0] is not implies]
        rules = [show(t) for _, _, t in read if t[0] is implies]
        loaded = kb.load_text("\n".join(facts), context, on_error="report")
        bad = {p["line"] for p in loaded.problems}
        problems += len(found) + len(bad)
        facts = [f for n, f in enumerate(facts, 1) if n not in bad]
        (out / f"{context}.facts").write_text("\n".join(facts) + "\n", encoding="utf-8")
        if context in ("CxMerge", "CxMidLevelOntology"):
            name = "merge.rules" if context == "CxMerge" else "mid.rules"
            (out / name).write_text("\n".join(rules) + "\n", encoding="utf-8")
        contexts.append(context)
    kb.close()
    (out / "hierarchy").write_text("\n".join(hierarchy) + "\n", encoding="utf-8")
    (out / "contexts").write_text("\n".join(contexts) + "\n", encoding="utf-8")
    return {"files": len(files), "statements": statements, "refused": problems}


# --- the rows, each run in a fresh process (`--worker ROW DIR`) ---------------------------


def _facts(data: pathlib.Path) -> list[tuple[str, str]]:
    contexts = (data / "contexts").read_text().split()
    return [(c, (data / f"{c}.facts").read_text(encoding="utf-8")) for c in contexts]


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def row_load(data: pathlib.Path) -> dict[str, Any]:
    import gc

    import koinii

    facts = _facts(data)
    hierarchy = (data / "hierarchy").read_text()
    out: dict[str, Any] = {"facts": sum(t.count("\n") for _, t in facts)}
    for mode in ("refuse", "report"):
        kb = koinii.open_kb(None)
        kb.load_text(hierarchy, "CxUniverse")
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        for context, text in facts:
            kb.load_text(text, context, on_error=mode)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        out[mode], out[mode + "_cpu"] = seconds, cpu
        kb.close()
    return out


def row_merge_rules(data: pathlib.Path) -> dict[str, Any]:
    import koinii

    kb = koinii.open_kb(None, max_derivations=10_000_000)
    kb.load_text((data / "CxMerge.facts").read_text(encoding="utf-8"), "CxMerge")
    rules = (data / "merge.rules").read_text(encoding="utf-8")
    before = kb.stats()
    started, cpu = time.perf_counter(), time.process_time()
    loaded = kb.load_text(rules, "CxMerge", on_error="report")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    after = kb.stats()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "rules": after["rules"] - before["rules"],
        "derived": after["derived"] - before["derived"],
        "justifications": after["justifications"] - before["justifications"],
        "refused": len(loaded.problems),
    }


def row_inheritance(data: pathlib.Path) -> dict[str, Any]:
    """The inheritance axiom in memory: the engine's own time and peak."""
    return _inheritance(data, None)


def row_inheritance_sqlite(data: pathlib.Path) -> dict[str, Any]:
    """The same over an SQLite file, the store `open_kb` makes by default: the engine's
    work and the rows written (the checkpoint after it is written by a forked child)."""
    with tempfile.TemporaryDirectory() as scratch:
        return _inheritance(data, str(pathlib.Path(scratch) / "sumo.db"))


def _inheritance(data: pathlib.Path, location: str | None) -> dict[str, Any]:
    import gc

    import koinii

    kb = koinii.open_kb(location, max_derivations=100_000_000)
    kb.load_text((data / "hierarchy").read_text(), "CxUniverse")
    for context, text in _facts(data):
        kb.load_text(text, context)
    gc.collect()
    before = _peak_mb()
    started, cpu = time.perf_counter(), time.process_time()
    kb.edit(add=[(rule, "CxMerge") for rule in INHERITANCE])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    stats = kb.stats()
    peak = _peak_mb()
    kb.close()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "derived": stats["derived"],
        "justifications": stats["justifications"],
        "peak_mb": peak,
        "peak_growth_mb": peak - before,
    }


def _taxonomy(data: pathlib.Path) -> tuple[list[tuple[str, str, str]], str]:
    """Merge's and the mid-level ontology's subclass and instance facts between names
    (the slice both Koinii and an OWL reasoner can close), and their text."""
    from koinii.terms import Sym, parse_all

    facts = []
    for context in ("CxMerge", "CxMidLevelOntology"):
        for term in parse_all((data / f"{context}.facts").read_text(encoding="utf-8")):
            if (
                term[0].name in ("subclass", "instance")
                and len(term) == 3
                and type(term[1]) is Sym
                and type(term[2]) is Sym
            ):
                facts.append((term[0].name, term[1].name, term[2].name))
    return facts, "\n".join(f"({p} {a} {b})" for p, a, b in facts)


def _closed(seconds: float, cpu: float, peak: float, derived: set) -> dict[str, Any]:
    """A closure row: its times, peak growth, and what it derived, by count and digest
    (the table compares the digests)."""
    import hashlib

    digest = hashlib.sha256(repr(sorted(derived)).encode()).hexdigest()[:16]
    return {
        "seconds": seconds,
        "cpu": cpu,
        "peak_growth_mb": peak,
        "derived": len(derived),
        "digest": digest,
    }


def row_closure_koinii(data: pathlib.Path) -> dict[str, Any]:
    """The inheritance axiom over Merge's and the mid-level ontology's taxonomy, in one
    context (as an OWL reasoner sees it): time, peak growth, and what it derived."""
    import gc

    import koinii

    facts, text = _taxonomy(data)
    kb = koinii.open_kb(None, max_derivations=100_000_000)
    kb.load_text(text, "CxOnt")
    gc.collect()
    before = _peak_mb()
    started, cpu = time.perf_counter(), time.process_time()
    kb.edit(add=[(rule, "CxOnt") for rule in INHERITANCE])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = _peak_mb() - before
    given = set(facts)
    derived = {
        (s.sentence[0].name, s.sentence[1].name, s.sentence[2].name)
        for pattern in ("(subclass ?x ?y)", "(instance ?x ?y)")
        for s in kb.sentexes_matching(pattern, "CxOnt")
        if s.derived and s.sentence[1] is not s.sentence[2]
    } - given
    return _closed(seconds, cpu, peak, derived)


def row_closure_reasonable(data: pathlib.Path) -> dict[str, Any]:
    """The same closure by reasonable (OWL 2 RL, in Rust), its new subClassOf and type
    triples between our own names compared."""
    import gc

    import rdflib
    import reasonable
    from rdflib.namespace import RDF, RDFS

    iri = "http://koinii.example/"
    facts, _ = _taxonomy(data)
    graph = rdflib.Graph()
    predicate = {"subclass": RDFS.subClassOf, "instance": RDF.type}
    for p, a, b in facts:
        graph.add((rdflib.URIRef(iri + a), predicate[p], rdflib.URIRef(iri + b)))
    gc.collect()
    before = _peak_mb()
    started, cpu = time.perf_counter(), time.process_time()
    reasoner = reasonable.PyReasoner()
    reasoner.from_graph(graph)
    triples = reasoner.reason()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = _peak_mb() - before
    names = {str(RDFS.subClassOf): "subclass", str(RDF.type): "instance"}
    given = set(facts)
    derived = set()
    for s, p, o in triples:
        kind, s, o = names.get(str(p)), str(s), str(o)
        if kind and s.startswith(iri) and o.startswith(iri) and s != o:
            fact = (kind, s[len(iri) :], o[len(iri) :])
            if fact not in given:
                derived.add(fact)
    return _closed(seconds, cpu, peak, derived)


CHECK_BUDGET_S = 60.0  # each mid-level rule's check (the target: 30 s for all)


def row_mid_check(data: pathlib.Path) -> dict[str, Any]:
    """`kb.check` of each of the mid-level ontology's rules (those that read: the rest
    are left out by one dry run of them all, which stops at the first problem) over
    every file's facts with Merge's rules in force — what a writer asks before adding
    one — each in a CHECK_BUDGET_S budget: the time of all,
    the slowest rule's, and the problems by kind (`budget-exhausted` naming the rule
    and the join that ran out)."""
    import koinii

    kb = koinii.open_kb(None, max_derivations=10_000_000)
    kb.load_text((data / "hierarchy").read_text(), "CxUniverse")
    for context, text in _facts(data):
        kb.load_text(text, context)
    kb.load_text((data / "merge.rules").read_text(encoding="utf-8"), "CxMerge", on_error="report")
    rules = [r for r in (data / "mid.rules").read_text(encoding="utf-8").splitlines() if r]
    bad = {p["index"] for p in kb.check_edit(add=[(r, "CxMidLevelOntology") for r in rules])}
    rules = [r for i, r in enumerate(rules) if i not in bad]
    kb.write_budget_s = CHECK_BUDGET_S
    kinds: dict[str, int] = {}
    exhausted: list[str] = []
    slowest = (0.0, "")
    started, cpu = time.perf_counter(), time.process_time()
    for rule in rules:
        began = time.perf_counter()
        for problem in kb.check(rule, "CxMidLevelOntology"):
            kinds[problem["kind"]] = kinds.get(problem["kind"], 0) + 1
            if problem["kind"] == "budget-exhausted":
                exhausted.append(problem["message"])
        slowest = max(slowest, (time.perf_counter() - began, rule))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "seconds": seconds,
        "cpu": cpu,
        "rules": len(rules),
        "kinds": kinds,
        "slowest_s": slowest[0],
        "slowest": slowest[1],
        "exhausted": exhausted[:1],
    }


def row_store(data: pathlib.Path) -> dict[str, Any]:
    """An SQLite store of every file's facts and Merge's rules (written last, in one
    write), closed: what `row_reopen` opens in a fresh process."""
    import koinii

    path = data / "store.db"
    for old in data.glob("store.db*"):  # (another checkout's)
        old.unlink()
    with koinii.open_kb(str(path), max_derivations=10_000_000) as kb:
        kb.load_text((data / "hierarchy").read_text(), "CxUniverse")
        for context, text in _facts(data):
            kb.load_text(text, context)
        started, cpu = time.perf_counter(), time.process_time()
        kb.load_text(
            (data / "merge.rules").read_text(encoding="utf-8"), "CxMerge", on_error="report"
        )
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        stored, seq = kb.stats()["sentexes"], kb.seq
    from koinii.kb import checkpoint

    # (a store too small to gain from a checkpoint gets none at close)
    waited = stored >= checkpoint.KEEP_FROM and _wait_for_checkpoint(path, seq)
    return {"rules_s": seconds, "cpu": cpu, "sentexes": stored, "checkpoint": waited}


def _wait_for_checkpoint(path: pathlib.Path, seq: int, limit_s: float = 300.0) -> bool:
    """Until `path`'s checkpoint is the one of `seq` (its header says so; the background
    writer renames it into place whole), or `limit_s` passed; whether it came."""
    checkpoint = path.parent / (path.name + ".checkpoint")
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with open(checkpoint, "rb") as f:
                f.readline()  # the magic line
                if json.loads(f.readline()).get("seq") == seq:
                    return True
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    return False


def row_reopen(data: pathlib.Path) -> dict[str, Any]:
    import koinii

    started, cpu = time.perf_counter(), time.process_time()
    kb = koinii.open_kb(str(data / "store.db"))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    opened = kb.opened
    kb.close()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "from": opened["from"],
        "tail": opened.get("tail_sentexes", 0) + opened.get("tail_justifications", 0),
    }


OX_BASE = "http://koinii.example/"


def _quads(data: pathlib.Path) -> list[Any]:
    """Every file's facts as pyoxigraph quads, one named graph per context: a binary
    fact as a triple, a unary one as `(x is P)`, an n-ary one as its first argument, its
    predicate with its arity (`R/3`) and the rest as one literal; a value subject as an
    IRI of its text."""
    import pyoxigraph as ox

    from koinii.terms import parse_all, show

    base = OX_BASE

    def node(term: Any) -> Any:
        if type(term) is tuple:
            return ox.Literal(show(term))
        if isinstance(term, str):
            return ox.Literal(term)
        if isinstance(term, (int, float, bool)):
            return ox.Literal(str(term))
        return ox.NamedNode(base + term.name)

    def subject(term: Any) -> Any:  # (a subject is an IRI: a value, as its text)
        if hasattr(term, "name") and type(term) is not str:
            return node(term)
        return ox.NamedNode(base + "v/" + urllib.parse.quote(show(term), safe=""))

    quads = []
    for context, text in _facts(data):
        graph = ox.NamedNode(base + context)
        for term in parse_all(text):
            if len(term) == 3:
                quads.append(ox.Quad(subject(term[1]), node(term[0]), node(term[2]), graph))
            elif len(term) == 2:
                quads.append(
                    ox.Quad(subject(term[1]), ox.NamedNode(base + "is"), node(term[0]), graph)
                )
            else:  # an n-ary fact: its first argument, the rest as one literal, under
                # a predicate named with its arity (a binary fact's triple would answer
                # `(R ?x ?y)` for it, which Koinii's binary pattern rightly does not)
                rest = ox.Literal(" ".join(show(x) for x in term[2:]))
                functor = ox.NamedNode(f"{base}{term[0].name}/{len(term) - 1}")
                quads.append(ox.Quad(subject(term[1]), functor, rest, graph))
    return quads


def row_ox_load(data: pathlib.Path) -> dict[str, Any]:
    import pyoxigraph as ox

    quads = _quads(data)
    best = None
    for _ in range(2):
        store = ox.Store()
        started, cpu = time.perf_counter(), time.process_time()
        store.extend(quads)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        best = seconds if best is None else min(best, seconds)
    return {"seconds": best, "quads": len(quads), "version": ox.__version__}


# --- reads, beside pyoxigraph ------------------------------------------------------------

READ_REPEATS = 5  # each group of reads is timed this many times: the median is given


def _read_goals(data: pathlib.Path) -> dict[str, Any]:
    """The reads both systems answer, chosen from the facts (the same for both): at the
    context below the most others that holds the most facts (a domain file's, through
    the mid-level ontology and Merge.kif), what its view holds —
      point   a class's parents, `(subclass C ?y)`, for 100 classes
      members a class's direct instances, `(instance ?x C)`, for 100 classes
      join    the instances of a class's direct subclasses, `(subclass ?c C)` with
              `(instance ?x ?c)`, for 20 classes
      scan    a binary relation's every fact, `(R ?x ?y)`, for 10 relations
      all     every `(instance ?x ?c)` in view (one big answer)"""
    from koinii.terms import Sym, parse_all

    parents: dict[str, list[str]] = {}
    for term in parse_all((data / "hierarchy").read_text()):
        parents.setdefault(term[1].name, []).append(term[2].name)

    def up(context: str) -> list[str]:
        seen, stack = [], [context]
        while stack:
            c = stack.pop()
            if c not in seen:
                seen.append(c)
                stack.extend(parents.get(c, ()))
        return seen

    facts = dict(_facts(data))
    context = max(facts, key=lambda c: (len(up(c)), facts[c].count("\n"), c))
    view = up(context)
    children: set[str] = set()
    parented: dict[str, set[str]] = {}  # a class -> its direct subclasses
    populated: set[str] = set()  # the classes with a direct instance
    relations: dict[str, int] = {}
    for c in view:
        for term in parse_all(facts[c]):
            if len(term) != 3 or type(term[1]) is not Sym or type(term[2]) is not Sym:
                continue
            name = term[0].name
            if name == "subclass":
                children.add(term[1].name)
                parented.setdefault(term[2].name, set()).add(term[1].name)
            elif name == "instance":
                populated.add(term[2].name)
            else:
                relations[name] = relations.get(name, 0) + 1

    def spread(items: set[str] | list[str], count: int) -> list[str]:
        ordered = sorted(items)
        step = max(1, len(ordered) // count)
        return ordered[::step][:count]

    return {
        "context": context,
        "view": view,
        "point": spread(children, 100),
        "members": spread(populated, 100),
        "join": spread({c for c, subs in parented.items() if subs & populated}, 20),
        "scan": spread([r for r, n in relations.items() if n >= 2], 10),
    }


def _timed_reads(groups: dict[str, Any]) -> dict[str, Any]:
    """Each group of reads (a function answering a list of answers) timed
    READ_REPEATS times: the median seconds, its answers' count and digest."""
    import hashlib
    import statistics

    out: dict[str, Any] = {}
    for name, read in groups.items():
        times, answers = [], None
        for _ in range(READ_REPEATS):
            started = time.perf_counter()
            answers = read()
            times.append(time.perf_counter() - started)
        assert answers is not None
        canonical = repr(sorted(sorted(a) for a in answers))
        out[name] = {
            "seconds": statistics.median(times),
            "reads": len(answers),
            "rows": sum(len(a) for a in answers),
            "digest": hashlib.sha256(canonical.encode()).hexdigest()[:16],
        }
    return out


def row_reads(data: pathlib.Path) -> dict[str, Any]:
    """Koinii's answers to `_read_goals`' reads, at the context through its ancestors,
    over every file's facts loaded (no rules: what both systems hold alike)."""
    import koinii

    goals = _read_goals(data)
    kb = koinii.open_kb(None)
    kb.load_text((data / "hierarchy").read_text(), "CxUniverse")
    for context, text in _facts(data):
        kb.load_text(text, context)
    ctx = goals["context"]

    def answers(template: str, names: list[str], var: str) -> list[list[str]]:
        return [[str(b[var]) for b in kb.query(template.format(n), ctx)] for n in names]

    return _timed_reads(
        {
            "point": lambda: answers("(subclass {} ?y)", goals["point"], "?y"),
            "members": lambda: answers("(instance ?x {})", goals["members"], "?x"),
            "join": lambda: [
                [
                    f"{b['?c']} {b['?x']}"
                    for b in kb.query(f"(and (subclass ?c {c}) (instance ?x ?c))", ctx)
                ]
                for c in goals["join"]
            ],
            "scan": lambda: [
                [f"{b['?x']} {b['?y']}" for b in kb.query(f"({r} ?x ?y)", ctx)]
                for r in goals["scan"]
            ],
            "all": lambda: [[f"{b['?x']} {b['?c']}" for b in kb.query("(instance ?x ?c)", ctx)]],
        }
    )


def row_ox_reads(data: pathlib.Path) -> dict[str, Any]:
    """pyoxigraph's answers to the same reads, in SPARQL over the union of the view's
    graphs (one `FROM` per context the reading context sees)."""
    import pyoxigraph as ox

    goals = _read_goals(data)
    store = ox.Store()
    store.extend(_quads(data))
    base = OX_BASE
    graphs = " ".join(f"FROM <{base}{c}>" for c in goals["view"])

    def select(where: str, *vars: str) -> list[str]:
        head = " ".join("?" + v for v in vars)
        out = []
        for solution in store.query(f"SELECT DISTINCT {head} {graphs} WHERE {{ {where} }}"):
            out.append(" ".join(solution[v].value[len(base) :] for v in vars))
        return out

    sub, ins = f"<{base}subclass>", f"<{base}instance>"
    return _timed_reads(
        {
            "point": lambda: [select(f"<{base}{c}> {sub} ?y", "y") for c in goals["point"]],
            "members": lambda: [select(f"?x {ins} <{base}{c}>", "x") for c in goals["members"]],
            "join": lambda: [
                select(f"?c {sub} <{base}{c}> . ?x {ins} ?c", "c", "x") for c in goals["join"]
            ],
            "scan": lambda: [select(f"?x <{base}{r}> ?y", "x", "y") for r in goals["scan"]],
            "all": lambda: [select(f"?x {ins} ?c", "x", "c")],
        }
    )


ROWS = {
    "load": row_load,
    "merge_rules": row_merge_rules,
    "inheritance": row_inheritance,
    "inheritance_sqlite": row_inheritance_sqlite,
    "ox_load": row_ox_load,
    "reads": row_reads,
    "ox_reads": row_ox_reads,
    "mid_check": row_mid_check,
    "store": row_store,
    "reopen": row_reopen,
    "closure_koinii": row_closure_koinii,
    "closure_reasonable": row_closure_reasonable,
}


def run_row(row: str, data: pathlib.Path, src: pathlib.Path) -> dict[str, Any] | str:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", row, str(data)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:120]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the table --------------------------------------------------------------------------


def table(read: dict[str, Any], runs: dict[str, dict[str, Any]], peers: dict[str, Any]) -> str:
    names = list(runs)
    lines = [
        f"| row | {' | '.join(names)} | target |",
        "| --- |" + " ---: |" * len(names) + " --- |",
    ]

    def add(label: str, key: str, fmt, target: str = "") -> None:
        values = [r if isinstance(r := runs[n][key], str) else fmt(r) for n in names]
        lines.append(f"| {label} | {' | '.join(values)} | {target} |")

    def peer(label: str, result: Any, fmt) -> None:
        cell = result if isinstance(result, str) else fmt(result)
        lines.append(f"| {label} | {cell} |" + " |" * len(names))

    add(
        "facts loaded, all-or-nothing s",
        "load",
        lambda r: f"{r['refuse']:.2f} / {r['refuse_cpu']:.2f} ({r['facts']:,})",
    )
    add(
        "the same, report mode s (x all-or-nothing)",
        "load",
        lambda r: f"{r['report']:.2f} / {r['report_cpu']:.2f} ({r['report'] / r['refuse']:.2f}x)",
        "≤ 1.5x",
    )
    add(
        "Merge.kif's rules in one write, s",
        "merge_rules",
        lambda r: (
            f"{r['seconds']:.1f} / {r['cpu']:.1f} ({r['rules']} rules, {r['derived']:,} derived, "
            f"{r['justifications']:,} justifications)"
        ),
        "≤ 20 s (quiet machine)",
    )
    add(
        "inheritance axiom over every file, s",
        "inheritance",
        lambda r: (
            f"{r['seconds']:.1f} / {r['cpu']:.1f} ({r['derived']:,} derived, "
            f"{r['justifications']:,} justifications)"
        ),
        "≤ 5 s (quiet machine)",
    )
    add(
        "its peak RSS (growth), MB",
        "inheritance",
        lambda r: f"{r['peak_mb']:.0f} ({r['peak_growth_mb']:.0f})",
        "≤ 300",
    )
    add(
        "the same over an SQLite file (the default store), s; peak RSS (growth), MB",
        "inheritance_sqlite",
        lambda r: (
            f"{r['seconds']:.1f} / {r['cpu']:.1f}; {r['peak_mb']:.0f} ({r['peak_growth_mb']:.0f})"
        ),
    )
    add(
        "the mid-level rules, each checked (kb.check), s",
        "mid_check",
        lambda r: (
            f"{r['seconds']:.1f} / {r['cpu']:.1f} ({r['rules']} rules, the slowest "
            f"{r['slowest_s']:.1f} s; "
            + (", ".join(f"{k} {v}" for k, v in sorted(r["kinds"].items())) or "no problem")
            + ")"
        ),
        "≤ 30 s, no rule out of budget",
    )
    add(
        "reopen after the rules (fresh process), s",
        "reopen",
        lambda r: (
            f"{r['seconds']:.2f} / {r['cpu']:.2f} (from {r['from']}, {r['tail']:,} rows after it)"
        ),
        "≤ 2 s",
    )
    add(
        "the taxonomy's closure in one context (Merge + mid-level), s",
        "closure",
        lambda r: (
            f"{r['seconds']:.2f} / {r['cpu']:.2f} ({r['derived']:,} derived; "
            f"{r['peak_growth_mb']:.0f} MB)"
        ),
    )
    ox = peers["ox_load"]
    load = runs[names[-1]]["load"]
    peer(
        "pyoxigraph: the same facts loaded as quads, s",
        ox,
        lambda r: (
            f"{r['seconds']:.2f} ({r['quads']:,} quads, pyoxigraph {r['version']}"
            + (
                f"; Koinii's load takes {load['refuse'] / r['seconds']:.1f}x this)"
                if isinstance(load, dict)
                else ")"
            )
        ),
    )
    groups = ("point", "members", "join", "scan", "all")

    def reads(r: dict[str, Any]) -> str:
        return ", ".join(f"{g} {r[g]['seconds'] * 1000:.1f}" for g in groups)

    add(
        "reads through a domain file's view, median ms (point, members, join, scan, all)",
        "reads",
        lambda r: reads(r) + f" ({sum(r[g]['rows'] for g in groups):,} rows)",
    )
    theirs, ours = peers["ox_reads"], runs[names[-1]]["reads"]
    peer(
        "pyoxigraph: the same reads in SPARQL over the view's graphs, median ms",
        theirs,
        lambda r: (
            reads(r)
            + (
                "; "
                + (
                    "every answer equal to Koinii's"
                    if all(r[g]["digest"] == ours[g]["digest"] for g in groups)
                    else "NOT equal to Koinii's: "
                    + ", ".join(g for g in groups if r[g]["digest"] != ours[g]["digest"])
                )
                if isinstance(ours, dict)
                else ""
            )
        ),
    )
    mine = runs[names[-1]]["closure"]
    peer(
        "reasonable (OWL 2 RL): the taxonomy's closure, s",
        peers["closure_reasonable"],
        lambda r: (
            f"{r['seconds']:.2f} / {r['cpu']:.2f} ({r['derived']:,} derived; "
            f"{r['peak_growth_mb']:.0f} MB; "
            + (
                "equal to Koinii's"
                if isinstance(mine, dict) and mine["digest"] == r["digest"]
                else "NOT equal to Koinii's"
            )
            + ")"
        ),
    )
    heading = (
        f"## {read['what']}: {read['files']} files, {read['statements']:,} "
        f"statements, {read['refused']:,} refused when read or loaded; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    note = "Times are wall / CPU seconds of the row's process (a shared machine moves the first)."
    return heading + "\n\n" + "\n".join(lines) + "\n\n" + note


ROW_ORDER = (
    "load",
    "reads",
    "merge_rules",
    "inheritance",
    "inheritance_sqlite",
    "mid_check",
    "store",
    "reopen",
    "closure",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kif", type=pathlib.Path, default=os.environ.get("KOINII_KIF_DIR"))
    parser.add_argument(
        "--scale", type=float, default=1.0, help="the generated KB's size, SUMO's = 1"
    )
    parser.add_argument("--quick", action="store_true", help="a tiny generated KB")
    parser.add_argument("--rows", default=",".join(ROW_ORDER), help="which rows, comma-separated")
    parser.add_argument(
        "--baseline", type=pathlib.Path, help="another checkout's src, run the same rows"
    )
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        row, data = args.worker
        print(json.dumps(ROWS[row](pathlib.Path(data))))
        return
    wanted = [r for r in ROW_ORDER if r in args.rows.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        work = pathlib.Path(scratch)
        if args.kif is not None:
            kif_dir = pathlib.Path(args.kif).expanduser()
            what = f"SUMO's files ({kif_dir.name})"
        else:
            import sumo_shape

            kif_dir = work / "kif"
            kif_dir.mkdir()
            scale = 0.01 if args.quick else args.scale
            sumo_shape.generate(kif_dir, scale)
            what = f"a SUMO-shaped KB, generated (scale {scale:g})"
        data = work / "data"
        data.mkdir()
        progress(f"reading {kif_dir} as KIF")
        read = {**prepare(kif_dir, data), "what": what}
        sources = {"Koinii": SRC}
        if args.baseline is not None:
            sources = {"Koinii (baseline)": args.baseline.resolve(), "Koinii": SRC}
        runs: dict[str, dict[str, Any]] = {name: {} for name in sources}
        for name in sources:
            for row in ROW_ORDER:
                runs[name].setdefault(row, "not run")
        for row in wanted:
            for name, src in sources.items():
                if row == "reopen" and "store" in wanted:
                    continue  # (opened right after its own store is written)
                progress(f"{row}: {name}")
                worker = "closure_koinii" if row == "closure" else row
                runs[name][row] = run_row(worker, data, src)
                if row == "store" and "reopen" in wanted:
                    progress(f"reopen: {name}")
                    runs[name]["reopen"] = run_row("reopen", data, src)
        peers: dict[str, Any] = {
            k: "not run" for k in ("ox_load", "ox_reads", "closure_reasonable")
        }
        if "load" in wanted:
            progress("load: pyoxigraph")
            peers["ox_load"] = run_row("ox_load", data, SRC)
        if "reads" in wanted:
            progress("reads: pyoxigraph")
            peers["ox_reads"] = run_row("ox_reads", data, SRC)
        if "closure" in wanted:
            progress("closure: reasonable")
            peers["closure_reasonable"] = run_row("closure_reasonable", data, SRC)
        print(table(read, runs, peers))


if __name__ == "__main__":
    main()
