"""Ontology benchmark: Koinii on real SUO-KIF files (SUMO), beside pyoxigraph (issue 41).

SUMO is not shipped (its licence and its size): point ``--kif DIR`` (or ``KOINII_KIF_DIR``)
at a folder of ``.kif`` files, such as a checkout of github.com/ontologyportal/sumo.
Without one the run says so and stops; ``--quick`` runs on a small SUMO-style sample
written here instead (the test suite's smoke run).

Workload
    Each file is read as KIF (`load_text(..., format="kif")`'s reader) into a context of
    its own: ``Merge.kif`` into ``CxMerge``, the mid-level ontology under it, every other
    file under that (SUMO's own layering). The statements that read and pass every check
    — found by one report-mode load, before anything is timed — are written out as
    Koinii's sentences, so every row below loads the same text.

Rows (each measured in a fresh process; ``--baseline SRC`` runs the same rows with
another checkout's ``src`` first on the path, in the same run, so a change is measured
against what it changed on the same machine at the same load)
    load          all the facts, all-or-nothing and ``on_error="report"`` (their ratio is
                  the issue's target: ≤ 1.5x), and pyoxigraph loading the same facts as
                  quads, one named graph per context
    Merge rules   Merge.kif's rules added in one write over its facts: time and counts
    inheritance   subclass transitivity and instance inheritance over every file's facts
                  (the inheritance axiom): time, conclusions, justifications, peak RSS

Run it::

    .venv/bin/python benchmarks/ontology.py --kif ~/sumo
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
SAMPLE = {
    "Merge.kif": """; a SUMO-style sample (the smoke run's)
(subclass Entity Thing)
(subclass Physical Entity)
(subclass Object Physical)
(subclass Animal Object)
(subclass Human Animal)
(subclass Dog Animal)
(instance instance BinaryPredicate)
(documentation Human EnglishLanguage "A &%Animal that talks.")
(=> (instance ?X Human) (instance ?X Animal))
(<=> (parent ?X ?Y) (child ?Y ?X))
(=> (and (instance ?X Human) (exists (?Y) (parent ?X ?Y))) (hasChild ?X))
(=> (instance ?X Human) (exists (?M) (mother ?X ?M)))
(=> (instance ?R Relation) (holds ?R @ROW))
(instance Socrates Human)
(parent Socrates Lamprocles)
""",
    "Mid-level-ontology.kif": """(subclass Philosopher Human)
(instance Plato Philosopher)
(lengthOf Road1 (MeasureFn 3 Kilometer))
""",
    "People.kif": """(instance Xanthippe Human)
(instance Rex Dog)
""",
}


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
        if context == "CxMerge":
            (out / "merge.rules").write_text("\n".join(rules) + "\n", encoding="utf-8")
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
        started = time.perf_counter()
        for context, text in facts:
            kb.load_text(text, context, on_error=mode)
        seconds = time.perf_counter() - started
        out[mode] = seconds
        kb.close()
    return out


def row_merge_rules(data: pathlib.Path) -> dict[str, Any]:
    import koinii

    kb = koinii.open_kb(None, max_derivations=10_000_000)
    kb.load_text((data / "CxMerge.facts").read_text(encoding="utf-8"), "CxMerge")
    rules = (data / "merge.rules").read_text(encoding="utf-8")
    before = kb.stats()
    started = time.perf_counter()
    loaded = kb.load_text(rules, "CxMerge", on_error="report")
    seconds = time.perf_counter() - started
    after = kb.stats()
    return {
        "seconds": seconds,
        "rules": after["rules"] - before["rules"],
        "derived": after["derived"] - before["derived"],
        "justifications": after["justifications"] - before["justifications"],
        "refused": len(loaded.problems),
    }


def row_inheritance(data: pathlib.Path) -> dict[str, Any]:
    import gc

    import koinii

    kb = koinii.open_kb(None, max_derivations=100_000_000)
    kb.load_text((data / "hierarchy").read_text(), "CxUniverse")
    for context, text in _facts(data):
        kb.load_text(text, context)
    gc.collect()
    before = _peak_mb()
    started = time.perf_counter()
    kb.edit(add=[(rule, "CxMerge") for rule in INHERITANCE])
    seconds = time.perf_counter() - started
    stats = kb.stats()
    return {
        "seconds": seconds,
        "derived": stats["derived"],
        "justifications": stats["justifications"],
        "peak_mb": _peak_mb(),
        "peak_growth_mb": _peak_mb() - before,
    }


def row_ox_load(data: pathlib.Path) -> dict[str, Any]:
    import pyoxigraph as ox

    from koinii.terms import parse_all, show

    base = "http://koinii.example/"

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
            else:  # an n-ary fact: its first argument, the rest as one literal
                rest = ox.Literal(" ".join(show(x) for x in term[2:]))
                quads.append(ox.Quad(subject(term[1]), node(term[0]), rest, graph))
    best = None
    for _ in range(2):
        store = ox.Store()
        started = time.perf_counter()
        store.extend(quads)
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
    return {"seconds": best, "quads": len(quads), "version": ox.__version__}


ROWS = {
    "load": row_load,
    "merge_rules": row_merge_rules,
    "inheritance": row_inheritance,
    "ox_load": row_ox_load,
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


def table(read: dict[str, Any], runs: dict[str, dict[str, Any]], ox: Any) -> str:
    names = list(runs)
    lines = [
        f"| row | {' | '.join(names)} | target |",
        "| --- |" + " ---: |" * len(names) + " --- |",
    ]

    def cell(result: Any, fmt) -> str:
        return result if isinstance(result, str) else fmt(result)

    def add(label: str, key: str, fmt, target: str = "") -> None:
        values = [cell(runs[n][key], fmt) for n in names]
        lines.append(f"| {label} | {' | '.join(values)} | {target} |")

    add("facts loaded, all-or-nothing s", "load", lambda r: f"{r['refuse']:.2f} ({r['facts']:,})")
    add(
        "the same, report mode s (x all-or-nothing)",
        "load",
        lambda r: f"{r['report']:.2f} ({r['report'] / r['refuse']:.2f}x)",
        "≤ 1.5x",
    )
    add(
        "Merge.kif's rules in one write, s",
        "merge_rules",
        lambda r: (
            f"{r['seconds']:.1f} ({r['rules']} rules, {r['derived']:,} derived, "
            f"{r['justifications']:,} justifications)"
        ),
        "≤ 20 s (quiet machine)",
    )
    add(
        "inheritance axiom over every file, s",
        "inheritance",
        lambda r: (
            f"{r['seconds']:.1f} ({r['derived']:,} derived, {r['justifications']:,} justifications)"
        ),
        "≤ 5 s (quiet machine)",
    )
    add(
        "its peak RSS (growth), MB",
        "inheritance",
        lambda r: f"{r['peak_mb']:.0f} ({r['peak_growth_mb']:.0f})",
        "≤ 300",
    )
    if isinstance(ox, str):
        lines.append(f"| pyoxigraph: the same facts as quads | {ox} |" + " |" * len(names))
    else:
        load = runs[names[0]]["load"]
        ratio = (
            f" (Koinii's all-or-nothing load takes {load['refuse'] / ox['seconds']:.1f}x this)"
            if isinstance(load, dict)
            else ""
        )
        lines.append(
            f"| pyoxigraph {ox['version']}: the same facts as {ox['quads']:,} quads, s | "
            f"{ox['seconds']:.2f}{ratio} |" + " |" * (len(names) - 1) + " |"
        )
    heading = (
        f"## SUMO-shaped load and rules: {read['files']} files, {read['statements']:,} "
        f"statements, {read['refused']:,} refused when read or loaded; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return heading + "\n\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kif", type=pathlib.Path, default=os.environ.get("KOINII_KIF_DIR"))
    parser.add_argument("--quick", action="store_true", help="a small built-in sample")
    parser.add_argument(
        "--baseline", type=pathlib.Path, help="another checkout's src, run the same rows"
    )
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        row, data = args.worker
        print(json.dumps(ROWS[row](pathlib.Path(data))))
        return
    with tempfile.TemporaryDirectory() as scratch:
        work = pathlib.Path(scratch)
        if args.quick:
            kif_dir = work / "kif"
            kif_dir.mkdir()
            for name, text in SAMPLE.items():
                (kif_dir / name).write_text(text, encoding="utf-8")
        elif args.kif is None:
            print(
                "skipped: no SUMO here. SUMO is not shipped; give --kif DIR (or set "
                "KOINII_KIF_DIR) with its .kif files, or --quick for the built-in sample"
            )
            return
        else:
            kif_dir = pathlib.Path(args.kif).expanduser()
        data = work / "data"
        data.mkdir()
        progress(f"reading {kif_dir} as KIF")
        read = prepare(kif_dir, data)
        sources = {"Koinii": SRC}
        if args.baseline is not None:
            sources = {"Koinii (baseline)": args.baseline.resolve(), "Koinii": SRC}
        runs: dict[str, dict[str, Any]] = {name: {} for name in sources}
        for row in ("load", "merge_rules", "inheritance"):
            for name, src in sources.items():
                progress(f"{row}: {name}")
                runs[name][row] = run_row(row, data, src)
        progress("load: pyoxigraph")
        ox = run_row("ox_load", data, SRC)
        print(table(read, runs, ox))


if __name__ == "__main__":
    main()
