"""The engine's verbs as the daemon serves them: each declared once, here.

An engine verb is the `KB` method of the same name (docs/engine.md) with what the daemon
adds around it: the caller's access checks (`access`), attribution to the caller, the
change feed's subscriptions. Each is one `@verb` declaration — its fields, summary,
scheduling class and body size — and one function `run(daemon, caller, body)`; the
daemon's route, field checks, scheduling, body limit and OpenAPI entry all come from the
declaration (`koinii.operations`, `server.endpoints`, `server.openapi`). In one process
there is no boundary to check: the `KB` method is the verb.

Adding an engine verb: its `KB` method, its declaration here, its `protocol` call and the
two clients' one-line methods (tests/test_parity.py checks they exist, with the fields in
the declaration's order), its test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from koinii.channel.moves import records_of_removal
from koinii.errors import Refused
from koinii.kb import Retracted, semantic
from koinii.operations import Operation, load_domains, operation
from koinii.server import access
from koinii.server.daemon import Daemon
from koinii.server.tokens import Caller
from koinii.wire import (
    encode_bindings,
    encode_edited,
    encode_hit,
    encode_retracted,
    encode_sentex,
)

Fields = dict[str, tuple[Any, bool, str]]

TERM = "term"  # a sentence in canonical text; "goal" is a term or a list of them
SENTENCE: Fields = {
    "sentence": (TERM, True, "a sentence in canonical text, e.g. (usesDatabase A B)")
}
CONTEXT: Fields = {"context": ("string", True, "a context name, e.g. CxDeploy")}
READ_CONTEXT: Fields = {"context": ("string", True, "a context, a variable (?ctx) or CxEverything")}
HANDLE: Fields = {"handle": ("integer", True, "a sentex handle")}
BUDGET: Fields = {
    "budget_ms": (
        "integer",
        False,
        "this request's time budget in ms (default: the daemon's); more: operators only",
    )
}
WRITE_OPTS: Fields = {
    "strength": ("string", False, "default | monotonic"),
    "creator": ("string", False, "who wrote it; an agent may only name itself"),
    "provenance": ("object", False, "extra provenance fields"),
}
ENTRY = {
    "type": "object",
    "required": ["sentence", "context"],
    "properties": {
        "sentence": {"type": "string"},
        "context": {"type": "string"},
        "strength": {"type": "string"},
        "creator": {"type": "string"},
        "provenance": {"type": "object"},
    },
}
EDIT: Fields = {
    "add": (("array", ENTRY), False, "entries to add"),
    "remove": (("array", {"type": "integer"}), False, "handles to remove"),
    **BUDGET,
}
SEES = {"context": ("string", False, "clashes this context can see"), **BUDGET}

Run = Callable[[Daemon, Caller, dict[str, Any]], Any]


def served() -> list[Operation]:
    """Every operation the daemon serves: the engine's verbs (declared below), then the
    domains' (imported by `load_domains`)."""
    everything = list(load_domains().values())
    return [op for op in everything if op.on == "daemon"] + [
        op for op in everything if op.on != "daemon"
    ]


def verb(
    name: str,
    fields: Fields,
    summary: str,
    schedule: str,
    *,
    large_body: bool = False,
    writes: bool = False,
) -> Callable[[Run], Run]:
    """Declare the engine verb `name`, run by the daemon (see `koinii.operations`)."""
    return operation(
        name,
        fields,
        summary,
        schedule=schedule,
        on="daemon",
        large_body=large_body,
        writes=writes,
    )


def _opts(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("strength", "creator", "provenance") if body.get(k) is not None}


def _entries(body: dict[str, Any]) -> list[tuple]:
    out = []
    for i, item in enumerate(body.get("add") or []):
        if not isinstance(item, dict) or not isinstance(item.get("sentence"), str):
            raise Refused(
                "bad-request",
                "each added entry is {sentence, context, strength?, creator?, provenance?}",
                {"in": "add", "index": i},
            )
        extra = sorted(set(item) - {"sentence", "context", "strength", "creator", "provenance"})
        if extra:
            raise Refused(
                "unknown-option",
                f"unknown option {extra[0]!r}",
                {"option": extra[0], "in": "add", "index": i},
            )
        out.append((item["sentence"], item.get("context"), _opts(item)))
    return out


def _guard_adds(daemon: Daemon, caller: Caller, entries: list[tuple], batch: bool) -> None:
    """Each entry's access check, counted toward the write's budget: a batch of a
    hundred thousand entries would spend seconds here before the engine's own work
    (and its budget) began. An agent's batch holds at most `Limits.agent_batch`."""
    if batch:
        _check_batch_size(daemon, caller, entries)
    for i, (sentence, context, opts) in enumerate(entries):
        daemon.kb.spend()
        try:
            access.check_add(daemon.kb, caller, sentence, context, opts)
        except Refused as refusal:
            if batch:
                refusal.data.update({"rolled_back": True, "in": "add", "index": i})
            raise


def _check_batch_size(daemon: Daemon, caller: Caller, entries: list[tuple]) -> None:
    limit = daemon.limits.agent_batch
    if caller.is_agent and len(entries) > limit:
        raise Refused(
            "batch-too-large",
            f"an agent's edit adds at most {limit:,} entries, not {len(entries):,}: send "
            "it in parts (an operator loads more at once)",
            {"limit": limit, "entries": len(entries), "rolled_back": True},
        )


def _dry_run(daemon: Daemon, caller: Caller, entries: list[tuple], removes: list) -> Any:
    """Every problem `edit` would refuse the caller: the daemon's own rules for it (each
    entry's access check, as `_guard_adds` and `check_remove` make them), then the
    engine's dry run of the batch as the write would make it. The engine alone judges
    no caller, and an agent told "no problems" was then refused its write."""
    kb, problems = daemon.kb, []
    if caller.id is not None:
        _check_batch_size(daemon, caller, entries)
        for where, items in (("add", entries), ("remove", removes)):
            for i, item in enumerate(items):
                kb.spend()
                try:
                    if where == "add":
                        access.check_add(kb, caller, *item)
                    else:
                        access.check_remove(kb, caller, item)
                except Refused as refusal:
                    problems.append(refusal.as_problem(where, i))
    seen = {(p["in"], p["index"], p["kind"]) for p in problems}
    adds = [(s, c, _attributed(caller, o)) for s, c, o in entries]
    for problem in kb.check_edit(add=adds, remove=removes):
        if (problem["in"], problem["index"], problem["kind"]) not in seen:
            problems.append(problem)
    return sorted(problems, key=lambda p: (p["in"] != "add", p["index"]))


def _attributed(caller: Caller, opts: dict[str, Any]) -> dict[str, Any]:
    if caller.is_agent and opts.get("creator") is None:
        opts = {**opts, "creator": caller.id}
    return opts


# --- writes -----------------------------------------------------------------------------


@verb(
    "assert",
    {**SENTENCE, **CONTEXT, **WRITE_OPTS, **BUDGET},
    "store a sentence; returns its handle",
    "grouped_write",
    writes=True,
)
def assert_(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    kb, opts = daemon.kb, _opts(body)
    if caller.id is None:  # an open daemon: nobody to check or to record
        return kb.assert_(body["sentence"], body["context"], **opts)
    _guard_adds(daemon, caller, [(body["sentence"], body["context"], opts)], batch=False)
    with kb.attributed_to(caller.id):
        return kb.assert_(body["sentence"], body["context"], **_attributed(caller, opts))


@verb(
    "retract",
    {**HANDLE, **BUDGET},
    "remove a sentex and what rested only on it",
    "grouped_write",
    writes=True,
)
def retract(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    kb, handle = daemon.kb, body["handle"]
    access.check_remove(kb, caller, handle)
    records = records_of_removal(kb, caller.id, [handle]) if caller.is_agent else []
    if not records:
        return encode_retracted(kb.retract(handle))
    with kb.attributed_to(caller.id):  # the claim and the record of its replies, at once
        edited = kb.edit(add=records, remove=[handle])
    return encode_retracted(
        Retracted(edited.removed_sentexes, edited.removed_justifications, edited.seq)
    )


@verb(
    "edit", EDIT, "adds then removes, all or nothing", "grouped_write", large_body=True, writes=True
)
def edit(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    entries = _entries(body)
    _guard_adds(daemon, caller, entries, batch=True)
    removes = body.get("remove") or []
    for i, handle in enumerate(removes):
        try:
            access.check_remove(daemon.kb, caller, handle)
        except Refused as refusal:
            refusal.data.update({"rolled_back": True, "in": "remove", "index": i})
            raise
    adds = [(s, c, _attributed(caller, o)) for s, c, o in entries]
    records = records_of_removal(daemon.kb, caller.id, removes) if caller.is_agent else []
    with daemon.kb.attributed_to(caller.id):
        edited = daemon.kb.edit(add=adds + records, remove=removes)
    # (the records' handles are not the caller's adds: its reply lists its own)
    return encode_edited(replace(edited, handles=edited.handles[: len(adds)]))


@verb(
    "check",
    {**SENTENCE, **CONTEXT, **WRITE_OPTS, **BUDGET},
    "dry run of assert: the problems",
    "budgeted",
)
def check(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return _dry_run(daemon, caller, [(body["sentence"], body["context"], _opts(body))], [])


@verb(
    "check_edit", EDIT, "dry run of edit: every problem", "budgeted", large_body=True, writes=True
)
def check_edit(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return _dry_run(daemon, caller, _entries(body), body.get("remove") or [])


@verb(
    "load_text",
    {
        "text": ("string", True, "vocabulary text: sentences and ; comments"),
        **CONTEXT,
        "strength": ("string", False, "default | monotonic"),
        "on_error": ("string", False, "refuse (all or nothing, the default) | report"),
        "format": ("string", False, "koinii (the default) | kif (SUO-KIF)"),
        **BUDGET,
    },
    "load vocabulary (operator only)",
    "grouped_write",
    large_body=True,
    writes=True,
)
def load_text(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    access.check_operator(caller, "load vocabulary")
    with daemon.kb.attributed_to(caller.id):
        result = daemon.kb.load_text(
            body["text"],
            body["context"],
            strength=body.get("strength") or "default",
            on_error=body.get("on_error") or "refuse",
            format=body.get("format") or "koinii",
        )
    return encode_edited(result)


@verb(
    "add_provenance",
    {**HANDLE, "fields": ("object", True, "fields to add")},
    "add provenance fields to a sentex",
    "grouped_write",
    writes=True,
)
def add_provenance(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    access.check_add_provenance(daemon.kb, caller, body["handle"], body["fields"])
    return daemon.kb.add_provenance(body["handle"], body["fields"])


@verb(
    "compact_log",
    {"keep": ("integer", True, "change-log entries to keep")},
    "drop older change-log entries (operator only)",
    "write",
)
def compact_log(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    access.check_operator(caller, "compact the change log")
    return daemon.kb.compact_log(body["keep"])


# --- reads ------------------------------------------------------------------------------


@verb("sentex", HANDLE, "one sentex, or null", "loop")
def sentex(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return encode_sentex(daemon.kb.sentex(body["handle"]))


@verb("provenance", HANDLE, "a sentex's provenance, or null", "loop")
def provenance(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.provenance(body["handle"])


@verb(
    "sentexes_matching",
    {"pattern": (TERM, True, "a pattern"), **READ_CONTEXT, **BUDGET},
    "believed sentexes stored in exactly the context that match",
    "read",
)
def sentexes_matching(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    found = daemon.kb.sentexes_matching(body["pattern"], body["context"])
    return [encode_sentex(s) for s in found]


@verb(
    "query",
    {
        "goal": ("goal", True, "a literal or a list of literals"),
        **READ_CONTEXT,
        "limit": ("integer", False, "stop at this many solutions (bounds the work too)"),
        **BUDGET,
    },
    "solutions through the context's ancestor set, as bindings",
    "read",
)
def query(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    solutions = daemon.kb.query(body["goal"], body["context"], limit=body.get("limit"))
    return [encode_bindings(b) for b in solutions]


@verb(
    "search",
    {
        "text": ("string", True, "the words to look for, e.g. postgres version"),
        "context": ("string", True, "search what this context sees (or CxEverything)"),
        "limit": ("integer", False, "at most this many hits, 1 to 100 (default 10)"),
        "ranking": (
            "string",
            False,
            "lexical (by words) or hybrid (words and meaning; needs koinii[semantic] "
            "on the daemon); default: hybrid where installed",
        ),
        **BUDGET,
    },
    "ranked search over what the context sees: hits with author, snippet and how matched",
    "search",
)
async def search(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    limit = {"limit": body["limit"]} if body.get("limit") is not None else {}
    ranking = semantic.ranking_of(body.get("ranking"))
    steps = daemon.kb.search_steps(body["text"], body["context"], ranking=ranking, **limit)
    budget = daemon.budget_for(caller, body, daemon.limits.query_budget_s)
    hits = await daemon.searches.run(steps, budget, meaning=ranking == "hybrid")
    return [encode_hit(h) for h in hits]


@verb(
    "vocabulary",
    {
        "context": ("string", True, "the predicates this context sees (or CxEverything)"),
        **BUDGET,
    },
    "the predicates in use, with counts and an example each",
    "read",  # every sentex the context sees is looked at
)
def vocabulary(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.vocabulary(body["context"])


@verb("argue", {**SENTENCE, **READ_CONTEXT}, "true | false | contradiction | unknown", "loop")
def argue(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.argue(body["sentence"], body["context"])


@verb(
    "believed",
    {**HANDLE, "context": ("string", False, "read at this context")},
    "is the sentex believed",
    "loop",
)
def believed(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.believed(body["handle"], body.get("context"))


@verb("why", {**HANDLE, **BUDGET}, "the justification tree", "read")
def why(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.why(body["handle"])


@verb(
    "why_not",
    {**HANDLE, "context": ("string", False, "read at this context")},
    "why a sentex is not believed",
    "loop",
)
def why_not(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.why_not(body["handle"], body.get("context"))


@verb("contradictions", SEES, "default/default dilemmas", "read")
def contradictions(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.contradictions(body.get("context"))


@verb("conflicts", SEES, "monotonic/monotonic clashes", "read")
def conflicts(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.conflicts(body.get("context"))


@verb("violations", BUDGET, "rule firings with no context to place their conclusion", "read")
def violations(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.violations()


@verb("context_up", {"context": ("string", True, "a context name")}, "what a context sees", "loop")
def context_up(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return sorted(daemon.kb.context_up(body["context"]))


@verb(
    "context_down",
    {"context": ("string", True, "a context name")},
    "what sees a context",
    "loop",
)
def context_down(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return sorted(daemon.kb.context_down(body["context"]))


@verb("stats", {}, "counts and the global seq", "loop")
def stats(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.kb.stats()


# --- the wire feed ----------------------------------------------------------------------


@verb(
    "watch",
    {
        "goal": ("goal", False, "a standing query (one literal)"),
        "context": ("string", False, "watch changes in view of this context"),
        "max_events": ("integer", False, "ring size (default 256)"),
        "since": ("integer", False, "resume: replay the events of the writes after it"),
    },
    "open a subscription",
    "loop",
)
def watch(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    since = body.get("since")
    if since is not None:
        daemon.flush()  # replay reads the change log: it must hold every write made
    return daemon.subs.watch(
        body.get("goal"), body.get("context"), body.get("max_events"), caller, since
    )


@verb(
    "poll",
    {
        "token": ("string", True, "the subscription token"),
        "cursor": ("integer", True, "events consumed so far"),
        "wait_ms": ("integer", False, "long-poll up to this long (max 30000)"),
    },
    "events after the cursor",
    "long_poll",
)
async def poll(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return await daemon.subs.poll(body["token"], body["cursor"], body.get("wait_ms"), caller)


@verb(
    "stream",
    {
        "token": ("string", True, "the subscription token"),
        "cursor": ("integer", True, "events consumed so far"),
    },
    "the events after the cursor as they come: a line of JSON (a poll's reply) at "
    "once, then one per write that matches (or every 15 s: none), until the "
    "subscription is dropped",
    "stream",
)
def stream(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.subs.stream(body["token"], body["cursor"], caller)


@verb(
    "unwatch", {"token": ("string", True, "the subscription token")}, "drop a subscription", "loop"
)
def unwatch(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.subs.unwatch(body["token"], caller)


@verb("watchers", {}, "the live subscriptions", "loop")
def watchers(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return daemon.subs.describe(caller)


@verb(
    "changes",
    {
        "since": ("integer", True, "a global seq"),
        "limit": ("integer", False, "at most this many entries (max 10000)"),
        "wait_ms": ("integer", False, "long-poll up to this long (max 30000)"),
    },
    "the durable change log after a seq",
    "long_poll",
)
async def changes(daemon: Daemon, caller: Caller, body: dict[str, Any]) -> Any:
    return await daemon.subs.changes(body["since"], body.get("limit"), body.get("wait_ms"))
