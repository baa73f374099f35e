"""A SUMO-shaped ontology, generated as KIF files: what benchmarks/ontology.py runs on when
it is given no folder of SUMO's own (SUMO is not shipped: its licence and its size).

The shape is SUMO's, counted on its 68 files: a deep class taxonomy (chains up to 18
deep) where a class has one to three parents, spread over Merge.kif, the mid-level
ontology and dozens of domain files (each file a context of its own); instances of deep
classes, binary and ternary facts (termFormat, documentation, relations between
instances), function terms (MeasureFn, GovernmentFn); and rule sets shaped like
Merge.kif's and the mid-level ontology's — subclass inheritance, transitive relations,
each relation's domain and range, disjoint classes, a class's rules joining a relation,
a function term concluded, three-way joins, and a few forms the engine refuses by name,
as SUMO's own are. Deterministic for a seed.
"""

from __future__ import annotations

import pathlib
import random

# SUMO's proportions, per unit of scale. Counted on its 68 files: 9,370 subclass and
# 22,981 instance statements, 47,380 termFormat, 14,473 documentation, 188,000 statements
# in all; a class has 9.4 ancestors on average, 34 at most; Merge.kif has ~600 rules,
# the mid-level ontology ~800; the inheritance axiom derives 182,000 conclusions with
# 916,000 justifications. At scale 1 this makes 162,000 statements, classes with 10.5
# ancestors on average (43 at most), and an inheritance axiom of 227,000 conclusions
# and 1.2 million justifications (5.3 a conclusion; SUMO's 5.0).
SHAPE = {
    "merge_classes": 850,
    "mid_classes": 2_100,
    "domain_classes": 6_400,
    "instances": 12_000,
    "relations": 900,
    "binary": 25_000,
    "ternary": 85_000,
    "measures": 4_000,
    "merge_rules": 520,
    "mid_rules": 600,
}
MAX_DEPTH = 18  # SUMO's deepest class chains are about this long


def generate(out: pathlib.Path, scale: float = 1.0, domains: int = 40, seed: int = 41) -> None:
    """Write a SUMO-shaped ontology as KIF files into `out`: Merge.kif, the mid-level
    ontology and `domains` domain files — a deep class taxonomy where a class has one to
    three parents, instances of its classes, binary and ternary facts (termFormat,
    documentation, located), function terms (MeasureFn, GovernmentFn), and rules shaped
    like Merge.kif's: subclass inheritance, transitive relations, each relation's domain
    and range, disjoint classes, a class's rules, a function term's, and a few forms the
    engine refuses by name (so the files read as SUMO's do, with some statements refused)."""
    rng = random.Random(seed)
    n = {k: max(4, int(v * scale)) for k, v in SHAPE.items()}
    files: dict[str, list[str]] = {"Merge.kif": [], "Mid-level-ontology.kif": []}
    for d in range(domains):
        files[f"Domain{d:02d}.kif"] = []
    names = list(files)
    depth: dict[str, int] = {"Entity": 0}
    home: dict[str, str] = {"Entity": "Merge.kif"}
    classes = ["Entity"]
    parents: dict[str, list[str]] = {"Entity": []}

    def pick(pool: list[str]) -> str:
        # a class at random below the depth limit: a class has 9-10 ancestors on average
        # and the deepest 30-odd, as in SUMO
        for _ in range(3):
            c = pool[rng.randrange(len(pool))]
            if depth[c] < MAX_DEPTH:
                return c
        return "Entity"

    def add_classes(count: int, file: str, pool: list[str]) -> list[str]:
        made = []
        for _ in range(count):
            name = f"C{len(classes)}"
            first = pick(pool + made if made else pool)
            ups = [first]
            roll = rng.random()
            for extra in (roll < 0.15, roll < 0.03):  # a second parent, sometimes a third
                if extra:
                    other = pool[rng.randrange(len(pool))]
                    if other not in ups:
                        ups.append(other)
            depth[name] = 1 + max(depth[u] for u in ups)
            parents[name], home[name] = ups, file
            classes.append(name)
            made.append(name)
            files[file] += [f"(subclass {name} {u})" for u in ups]
            files[file].append(f'(documentation {name} EnglishLanguage "The class {name}.")')
            files[file].append(f'(termFormat EnglishLanguage {name} "class {name.lower()}")')
        return made

    merge = ["Entity"] + add_classes(n["merge_classes"], "Merge.kif", ["Entity"])
    mid = add_classes(n["mid_classes"], "Mid-level-ontology.kif", merge)
    upper = merge + mid
    per_domain = max(1, n["domain_classes"] // domains)
    domain_classes = {f: add_classes(per_domain, f, upper) for f in names[2:]}
    # relations, declared in Merge (binary, some transitive) with a domain and a range
    relations = [f"rel{k}" for k in range(n["relations"])]
    for r in relations:
        files["Merge.kif"] += [
            f"(instance {r} BinaryPredicate)",
            f"(domain {r} 1 {pick(upper)})",
            f"(domain {r} 2 {pick(upper)})",
            f'(documentation {r} EnglishLanguage "The relation {r}.")',
        ]
    transitive = relations[: max(2, len(relations) // 30)]
    for r in transitive:
        files["Merge.kif"].append(f"(instance {r} TransitiveRelation)")
    # instances, most in the domain files, of deep classes
    instances: list[str] = []
    for k in range(n["instances"]):
        file = names[2 + k % domains] if k % 10 else names[k % 2]
        pool = domain_classes.get(file) or upper
        name = f"I{k}"
        instances.append(name)
        files[file].append(f"(instance {name} {pick(pool)})")
        if rng.random() < 0.1:
            files[file].append(f"(instance {name} {pick(upper)})")
        home[name] = file
    for k in range(n["binary"]):
        a, b = rng.choice(instances), rng.choice(instances)
        r = transitive[k % len(transitive)] if k % 3 == 0 else rng.choice(relations)
        files[home[a]].append(f"({r} {a} {b})")
    for k in range(n["ternary"]):
        x = rng.choice(instances)
        files[home[x]].append(f'(termFormat EnglishLanguage {x} "the thing {x.lower()} {k}")')
    for k in range(n["measures"]):
        x = rng.choice(instances)
        files[home[x]].append(f"(lengthOf {x} (MeasureFn {k % 997} Meter))")
    cities = instances[: max(4, len(instances) // 50)]
    files["Merge.kif"] += [f"(subclass City {merge[1]})", f"(subclass CityGovernment {merge[2]})"]
    for c in cities:
        files[home[c]].append(f"(instance {c} City)")

    def rules(count: int, pool: list[str], own: list[str]) -> list[str]:
        out = []
        for k in range(count):
            kind = k % 8
            a, b = pick(pool), pick(pool)
            r = relations[rng.randrange(len(relations))]
            if kind == 0:  # a relation's domain and range
                out.append(f"(=> ({r} ?X ?Y) (and (instance ?X {a}) (instance ?Y {b})))")
            elif kind == 1:  # disjoint classes
                out.append(f"(=> (instance ?X {a}) (not (instance ?X {b})))")
            elif kind == 2:  # a class's rule, joining a relation
                out.append(f"(=> (and (instance ?X {a}) ({r} ?X ?Y)) (instance ?Y {b}))")
            elif kind == 3:  # a property of a class's members
                out.append(f"(=> (instance ?X {a}) (attribute ?X Attr{k}))")
            elif kind == 4:  # a relation implied by another
                out.append(f"(=> ({r} ?X ?Y) ({rng.choice(relations)} ?X ?Y))")
            elif kind == 5:  # a function term concluded, as (GovernmentFn ?C)
                out.append(
                    f"(<=> (instance ?C {a}) (instance (GovernmentFn ?C) {own[k % len(own)]}))"
                )
            elif kind == 6:  # a three-way join
                out.append(
                    f"(=> (and (instance ?X {a}) ({r} ?X ?Y) (instance ?Y {b})) (related{k} ?X ?Y))"
                )
            else:  # forms the engine refuses by name, as SUMO's own
                out.append(
                    f"(=> (instance ?X {a}) (exists (?Y) ({r} ?X ?Y)))"
                    if k % 16 == 7
                    else f"(=> (and (instance ?R {a}) (?R ?X ?Y)) (holds ?R ?X ?Y))"
                )
        return out

    files["Merge.kif"] += [
        "(=> (and (subclass ?X ?Y) (instance ?Z ?X)) (instance ?Z ?Y))",
        "(=> (and (subclass ?X ?Y) (subclass ?Y ?Z)) (subclass ?X ?Z))",
        "(<=> (instance ?C City) (instance (GovernmentFn ?C) CityGovernment))",
    ]
    files["Merge.kif"] += [f"(=> (and ({r} ?X ?Y) ({r} ?Y ?Z)) ({r} ?X ?Z))" for r in transitive]
    files["Merge.kif"] += rules(n["merge_rules"], merge, merge)
    files["Mid-level-ontology.kif"] += rules(n["mid_rules"], upper, mid)
    for name, lines in files.items():
        (out / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
