"""History: what the conversation said and took back, kept as a record of its own.

One concept: the record of a retired move — written by the move that retires it, read
by the conversation's reads — and the channel as it stood at a point of the log.

A move that takes something back (`withdraw`, `concede`, an answer superseded by its
speaker's next one) writes, in the SAME edit that removes the move, one record sentex in
the system context `CxHistory`:

    (retired (sentexHandle H) Seq "<json>")

H is the move taken back, Seq the write that took it (the edit's own seq), and the JSON
says who took it back, when (seq and epoch ms), how it ended (`withdrawn`, `conceded`,
`superseded`), why (a concession's reason), the move's text, and what went with it: the
answer's claim, the endorsements, justifications, ballots and disputes it carried (each
dispute with its sides, who raised it and its tally, as the channel showed them just
before) — every sentex the withdrawal tore down, as it was stored.

Why a sentex and not a table: a record is then what every other fact is — durable in
the same transaction as the withdrawal, in every backend (SQLite, PostgreSQL, memory),
copied by `koinii migrate`/`export`, restored by a restart, and in memory, so a long read
on a forked snapshot (server/snapshot.py) reads it too. No agent writes `CxHistory`
(it is a system context, identity.SYSTEM_CONTEXTS): only the moves do.

Retention: records are kept until an operator forgets them (`history.forget`: records
older than a seq or a time; `POST /v1/history/forget` over the daemon, operators only).
The change log's own retention (`log_retention`) bounds how far back `as_of` reads can
go, since they need the log's handle mark for their seq.

Reads as of a point: `as_of(kb, seq)` is the KB as the conversation then saw it — a view
that shows the sentexes that existed at that seq (handle below the log's handle mark
then) and had not been retired by it, the retired ones rebuilt from their records. The
conversation reads run on the view unchanged, so what the moves make of each other —
answers, ballots, tallies, acceptances, states, disputes, differing values — is
recomputed from the moves as they were. Belief, for what a ruling changes: a sentex a
monotonic sentex made since defeats shows believed (`_defeated_since`), a rebuilt one
too (it stood until taken back), any other today's belief; a clash is today's whose
sides (and, for a single-valued one, a declaration) existed then, or one a rebuilt or
since defeated sentex took part in (docs/channel.md, History).
"""

from __future__ import annotations

import json
import weakref
from dataclasses import replace
from typing import Any

from koinii import speech
from koinii.channel import belief
from koinii.disputes.adjudication import now_ms
from koinii.errors import Refused
from koinii.kb import KB, Sentex
from koinii.kb.clashes import FUNCTIONAL, LAST, SINGLE_VALUED, argument_position
from koinii.kb.index import match
from koinii.kb.reads import goal_literals
from koinii.operations import Caller, operation
from koinii.speech import ref
from koinii.terms import Sym, Var, parse, show

__all__ = [
    "ENDINGS",
    "HISTORY",
    "as_of",
    "forget",
    "record_of",
    "records",
    "retirement",
]

HISTORY = "CxHistory"
RETIRED = Sym("retired")
ENDINGS = ("withdrawn", "conceded", "superseded")
_MAX_JSON = 48 * 1024  # a record stays well inside a sentence's 64 KiB
_PATTERN = (RETIRED, (speech.HANDLE, Var("h")), Var("seq"), Var("json"))


# --- writing a record ------------------------------------------------------------------------


def item(sentex: Sentex, speaker: str | None) -> dict[str, Any]:
    """One retired sentex as its record keeps it: enough to show it and to rebuild it."""
    provenance = {k: v for k, v in sentex.provenance.items() if k != "justification"}
    return {
        "handle": sentex.handle,
        "kind": speech.move_kind(sentex.sentence),
        "speaker": speaker,
        "sentence": sentex.text,
        "context": sentex.context,
        "strength": sentex.strength,
        "derived": sentex.derived,
        "provenance": provenance,
        "target": speech.target_of(sentex.sentence),
    }


def retirement(
    kb: KB,
    agent: str,
    moved: Sentex,
    ending: str,
    *,
    speaker: str | None,
    items: list[dict[str, Any]],
    disputes: list[dict[str, Any]],
    question: int | None = None,
    reason: str | None = None,
    at: int,
) -> tuple[Any, str, dict[str, Any]]:
    """The record sentex (an edit's `add` entry) of `moved` retired by `agent`'s move.

    Made just before the edit that removes `moved`: its seq is that edit's (`kb.seq + 1`
    on the single writer, where nothing comes between a move's reads and its edit).
    """
    seq = kb.seq + 1
    record: dict[str, Any] = {
        "handle": moved.handle,
        "kind": speech.move_kind(moved.sentence),
        "speaker": speaker,
        "sentence": moved.text,
        "context": moved.context,
        "question": question,
        "target": speech.target_of(moved.sentence),
        "ending": ending,
        "by": agent,
        "reason": reason,
        "seq": seq,
        "at": at,
        "items": items,
        "disputes": disputes,
    }
    text = json.dumps(record, sort_keys=True, default=str)
    if len(text.encode()) > _MAX_JSON:  # thousands of ballots: keep the sides, count the rest
        record["items"] = [i for i in items if i["kind"] not in ("ballot", "endorsement")]
        record["dropped_items"] = len(items) - len(record["items"])
        for dispute in disputes:
            dispute["raised_by"] = dispute["raised_by"][:20]
        text = json.dumps(record, sort_keys=True, default=str)
    return (RETIRED, ref(moved.handle), seq, text), HISTORY, {"creator": agent}


# --- reading records ---------------------------------------------------------------------------

_cache: weakref.WeakKeyDictionary[Any, dict[int, dict[str, Any]]] = weakref.WeakKeyDictionary()
# The index of the records, per KB and (seq, cut): records change only by a write of
# their own (a move's edit, `forget`), each a new seq, so reads between two writes share one.
_indexes: weakref.WeakKeyDictionary[Any, dict[tuple[int, int | None], Index]]
_indexes = weakref.WeakKeyDictionary()


class Index:
    """The records (oldest first) and where to find them without a scan: by a handle
    they retired (the latest record naming it), by their move's target, by its
    question, by a retired sentence (text and context), by a side of a dispute kept."""

    def __init__(self, found: list[dict[str, Any]]) -> None:
        self.records = found
        self.by_handle: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.on_target: dict[int | None, list[dict[str, Any]]] = {}
        self.of_question: dict[int | None, list[dict[str, Any]]] = {}
        self.said: dict[tuple[str, str], list[tuple[dict[str, Any], int]]] = {}
        self.sides: dict[tuple[str, str], list[tuple[int, int]]] = {}  # -> (record, dispute)
        for at, record in enumerate(found):
            for one in record["items"]:
                self.by_handle[one["handle"]] = (record, one)
                self.said.setdefault((one["sentence"], one["context"]), []).append(
                    (record, one["handle"])
                )
            self.by_handle[record["handle"]] = (record, self_item(record))
            self.on_target.setdefault(record["target"], []).append(record)
            self.of_question.setdefault(record["question"], []).append(record)
            for number, kept in enumerate(record["disputes"]):
                for side in kept["sides"]:
                    where = (side["sentence"], side["context"])
                    self.sides.setdefault(where, []).append((at, number))

    def kept_with(self, sides: set[tuple[str, str]]) -> list[tuple[dict, dict]]:
        """The disputes kept in records that had a side among `sides` (text, context),
        each with its record, in the records' order."""
        found = sorted({one for where in sides for one in self.sides.get(where, ())})
        return [(self.records[at]["disputes"][number], self.records[at]) for at, number in found]


def index(kb: Any) -> Index:
    """The records kept (parsed once per record sentex) and their index, cached per KB
    and seq; an `as_of` view's, only those made by its seq."""
    base = getattr(kb, "kb", kb)  # an `as_of` view reads its KB's records
    cut = getattr(kb, "seq_cut", None)
    try:
        parsed = _cache.setdefault(base, {})
        known = _indexes.setdefault(base, {})
    except TypeError:  # a client (not weak-referenceable): no cache
        parsed, known = {}, None
    key = None if known is None else (base.seq, cut)  # (a client's seq is a request)
    cached = None if known is None else known.get(key)
    if cached is not None:
        return cached
    found = []
    for sentex in base.sentexes_matching(_PATTERN, HISTORY):
        record = parsed.get(sentex.handle)
        if record is None:
            text = sentex.sentence[3]
            record = json.loads(text if isinstance(text, str) else show(text))
            record["record"] = sentex.handle
            parsed[sentex.handle] = record
        if cut is None or record["seq"] <= cut:
            found.append(record)
    found.sort(key=lambda r: (r["seq"], r["handle"]))
    built = Index(found)
    if known is not None:
        if len(known) > 16:  # the live read's and a few as_of reads'
            known.clear()
        known[key] = built
    return built


def records(kb: Any) -> list[dict[str, Any]]:
    """Every record kept, oldest first (see `index`)."""
    return index(kb).records


def record_of(kb: Any, handle: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The record that retired `handle` (the move itself or anything that went with it),
    with the item for `handle`; None if no record names it."""
    return index(kb).by_handle.get(handle)


def self_item(record: dict[str, Any]) -> dict[str, Any]:
    for one in record["items"]:
        if one["handle"] == record["handle"]:
            return one
    return {k: record[k] for k in ("handle", "kind", "speaker", "sentence", "context")}


def ended(record: dict[str, Any]) -> dict[str, Any]:
    """How a record says its move ended: `{ending, by, seq, at, reason}`."""
    return {k: record.get(k) for k in ("ending", "by", "seq", "at", "reason")}


def withdrawn_refusal(kb: Any, handle: int) -> Refused | None:
    """`koinii/withdrawn`: what a move on a retired handle is refused with, saying when
    and by whom it was taken back and where its record is read."""
    found = record_of(kb, handle)
    if found is None:
        return None
    record, _ = found
    verb = {"conceded": "conceded", "superseded": "replaced"}.get(record["ending"], "withdrew")
    return Refused(
        "koinii/withdrawn",
        f"#{handle} was taken back: {record['by']} {verb} it at seq {record['seq']}; "
        f"thread({handle}) shows its record, and questions() and disputes() the live moves",
        {"handle": handle, "ending": record["ending"], "by": record["by"], "seq": record["seq"]},
    )


# --- retention ---------------------------------------------------------------------------------


def forget(kb: KB, *, before_seq: int | None = None, before_ms: int | None = None) -> int:
    """Drop the records of moves retired before `before_seq` (or before the epoch-ms time
    `before_ms`): an operator's decision to keep history only so long. Returns how many."""
    for name, value in (("before_seq", before_seq), ("before_ms", before_ms)):
        if value is not None and (type(value) is not int or value < 0):
            raise Refused("bad-option", f"{name} is a non-negative integer", {"option": name})
    if before_seq is None and before_ms is None:
        raise Refused(
            "bad-option",
            "forget needs a bound: before_seq (a log seq) or before_ms (an epoch-ms time)",
            {"option": "before_seq"},
        )
    old = [
        r["record"]
        for r in records(kb)
        if (before_seq is not None and r["seq"] < before_seq)
        or (before_ms is not None and r["at"] < before_ms)
    ]
    if old:
        kb.edit(remove=old)
    return len(old)


def _operator_only(kb: Any, caller: Caller, body: dict[str, Any]) -> None:
    if caller.id is not None and caller.role != "operator":
        raise Refused(
            "forbidden",
            "only an operator decides how long history is kept: forget is an operator's call",
            {"principal": caller.id},
        )


@operation(
    "history.forget",
    fields={
        "before_seq": ("integer", False, "forget the records of moves taken back before this seq"),
        "before_ms": ("integer", False, "forget those taken back before this epoch-ms time"),
    },
    summary="as an operator: drop the history older than a bound (retention)",
    authorize=_operator_only,
)
def _forget(kb: KB, before_seq: Any = None, before_ms: Any = None) -> int:
    return forget(kb, before_seq=before_seq, before_ms=before_ms)


# --- the channel as of a point of the log ---------------------------------------------------------


def as_of(kb: KB, seq: int | None = None, at: int | None = None) -> AsOf:
    """The KB as the conversation saw it at log seq `seq` (or at epoch-ms time `at`: the
    last write made by then). Refused `bad-option` for a seq not yet written, `too-old`
    for one the change log no longer holds (compacted by its retention)."""
    if seq is not None and (type(seq) is not int or seq < 0):
        raise Refused(
            "bad-option", "as_of is a log seq: a non-negative integer", {"option": "as_of"}
        )
    if at is not None and (type(at) is not int or at < 0):
        raise Refused(
            "bad-option",
            "as_of_ms is an epoch-ms time: a non-negative integer",
            {"option": "as_of_ms"},
        )
    point = _point(kb, seq, at)
    if point is None:
        if seq is not None and seq > kb.seq:
            raise Refused(
                "bad-option",
                f"as_of {seq} is past the last write (seq {kb.seq}): leave it out to read now",
                {"option": "as_of"},
            )
        raise Refused(
            "too-old",
            "the change log no longer reaches that point (its retention compacted it); "
            "read a later seq, or now",
            {"option": "as_of"},
        )
    try:
        views = _views.setdefault(kb, {})
    except TypeError:  # (not weak-referenceable: no cache)
        return AsOf(kb, point["seq"], point["next_handle"])
    key = (kb.seq, point["seq"])
    view = views.get(key)
    if view is None:
        if len(views) > 16:
            views.clear()
        view = views[key] = AsOf(kb, point["seq"], point["next_handle"])
    return view


# The views made, by KB and (its seq, the view's): a view depends on nothing else, so the
# reads of one point between two writes share one (its records sorted out once).
_views: weakref.WeakKeyDictionary[Any, dict[tuple[int, int], AsOf]] = weakref.WeakKeyDictionary()


# The log points read, by (KB, seq, time): a read that outlives its slice of the loop runs
# again on a forked snapshot (server/snapshot.py), which must not touch the store; the
# slice has read its point first, so the snapshot finds it here.
_points: weakref.WeakKeyDictionary[Any, dict[tuple[int | None, int | None], dict[str, int]]]
_points = weakref.WeakKeyDictionary()


def _point(kb: KB, seq: int | None, at: int | None) -> dict[str, int] | None:
    known = _points.setdefault(kb, {})
    if (seq, at) in known:
        return known[(seq, at)]
    point = kb.log_point(seq=seq, at=at)
    if point is not None and (seq is not None or at < now_ms()):  # settled: no later write
        if len(known) > 4096:  # changes it (a time still to come might)
            known.clear()
        known[(seq, at)] = point
    return point


class AsOf:
    """A KB seen as of one seq: what existed then and was not yet retired (see the
    module docstring). Reads only; anything it does not redefine is the KB's own."""

    def __init__(self, kb: KB, seq: int, mark: int) -> None:
        self.kb = kb
        self.seq_cut = seq
        self.mark = mark
        self._retired: dict[int, dict[str, Any]] = {}  # retired later, existing then
        self._hidden: set[int] = set()  # retired by then
        for record in records(kb):
            for one in record["items"]:
                if record["seq"] <= seq:
                    self._hidden.add(one["handle"])
                elif one["handle"] < mark:
                    self._retired.setdefault(one["handle"], one)
        self._rebuilt: dict[int, Sentex] = {}
        self._revived = self._defeated_since()  # believed then, defeated since

    def _defeated_since(self) -> dict[int, Sentex]:
        """The sentexes shown here that are not believed today only because a monotonic
        sentex made after this seq defeats them (a ruling, most often): believed then,
        so shown believed. Found from the later monotonic sentexes, by their negation."""
        now = _point(self.kb, self.kb.seq, None)
        found: dict[int, Sentex] = {}
        for handle in range(self.mark, now["next_handle"] if now else self.mark):
            later = self.kb.sentex(handle)
            if later is None or later.strength != "monotonic" or not later.believed:
                continue
            contrary = speech.negation(later.sentence)
            for one in self.kb.sentexes_matching(contrary, "CxEverything"):
                if one.believed or one.handle in found or not self._shown(one.handle):
                    continue
                if self.kb.why_not(one.handle) != "defeated":
                    continue  # (retracted, masked, unsupported: not a ruling's doing)
                defeaters = belief.defeaters(self.kb, one.handle)
                if not any(self._shown(d.handle) for d in defeaters):
                    found[one.handle] = replace(one, believed=True)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kb, name)

    @property
    def seq(self) -> int:
        return self.seq_cut

    def _shown(self, handle: int) -> bool:
        return handle < self.mark and handle not in self._hidden

    def _retired_sentex(self, handle: int) -> Sentex | None:
        one = self._retired.get(handle)
        if one is None:
            return None
        if handle not in self._rebuilt:
            sentence = parse(one["sentence"])
            self._rebuilt[handle] = Sentex(
                handle=handle,
                sentence=sentence,
                context=one["context"],
                polarity=not (type(sentence) is tuple and sentence[0] is speech.NOT),
                strength=one.get("strength", "default"),
                provenance=dict(one.get("provenance") or {}),
                believed=True,
                derived=bool(one.get("derived")),
            )
        return self._rebuilt[handle]

    def sentex(self, handle: Any) -> Sentex | None:
        found = self.kb.sentex(handle)
        if found is not None:
            return self._revived.get(found.handle, found) if self._shown(found.handle) else None
        return self._retired_sentex(handle) if type(handle) is int else None

    def _then(self) -> list[Sentex]:
        """What this view shows otherwise than the KB: the retired sentexes rebuilt from
        their records, and those believed then and defeated since."""
        rebuilt = [self._retired_sentex(h) for h in sorted(self._retired)]
        return [s for s in rebuilt if s is not None] + list(self._revived.values())

    def provenance(self, handle: Any) -> dict[str, Any] | None:
        found = self.sentex(handle)
        return None if found is None else found.provenance

    def believed(self, handle: Any, ctx: Any = None) -> bool:
        if type(handle) is int and (handle in self._retired or handle in self._revived):
            then = self.sentex(handle)
            return then is not None and (ctx is None or then.context in self.kb.context_up(ctx))
        return self.sentex(handle) is not None and self.kb.believed(handle, ctx)

    def why_not(self, handle: Any, ctx: Any = None) -> str | None:
        if handle in self._retired or handle in self._revived:
            return None
        return self.kb.why_not(handle, ctx)

    def sentexes_matching(self, pattern: Any, ctx: Any) -> list[Sentex]:
        out = [
            self._revived.get(s.handle, s)
            for s in self.kb.sentexes_matching(pattern, ctx)
            if self._shown(s.handle)
        ]
        if not self._retired and not self._revived:
            return out
        literals = goal_literals(parse(pattern) if isinstance(pattern, str) else pattern)
        positive, atom = literals[0]
        name = ctx if isinstance(ctx, str) else getattr(ctx, "name", str(ctx))
        listed = {s.handle for s in out}
        for sentex in self._then():
            if sentex.handle in listed:
                continue
            if not name.startswith("?") and name != "CxEverything" and sentex.context != name:
                continue
            body = sentex.sentence
            if sentex.polarity is not positive:
                continue
            if not positive:
                body = body[1]
            if match(atom, body, {}) is not None:
                out.append(sentex)
        out.sort(key=lambda s: (s.text, s.context))
        return out

    def contradictions(self, ctx: Any = None) -> list[dict[str, Any]]:
        return self._clashes(self.kb.contradictions(ctx), ctx, monotonic=False)

    def conflicts(self, ctx: Any = None) -> list[dict[str, Any]]:
        return self._clashes(self.kb.conflicts(ctx), ctx, monotonic=True)

    def _clashes(self, now: list[dict[str, Any]], ctx: Any, monotonic: bool) -> list[dict]:
        """Today's clashes whose every side was there, and the negation clashes a retired
        or since defeated sentex took part in then (both sides shown at `ctx`)."""
        kept = [
            c for c in now if all(self._shown(h) for h in c["handles"]) and self._declared_then(c)
        ]
        if not self._retired and not self._revived:
            return kept
        visible = None if ctx is None else self.kb.context_up(ctx)
        declared = self._declarations()
        for sentex in self._then():
            if (sentex.strength == "monotonic") is not monotonic:
                continue
            if visible is not None and sentex.context not in visible:
                continue
            other = speech.negation(sentex.sentence)
            sides = [
                s
                for s in self.sentexes_matching(other, "?ctx")
                if visible is None or s.context in visible
            ]
            handles = sorted({sentex.handle, *(s.handle for s in sides)})
            if sides and all(handles != c["handles"] for c in kept):
                kept.append(
                    {
                        "handles": handles,
                        "sides": [show(sentex.sentence), *(s.text for s in sides)],
                    }
                )
            self._values_then(sentex, declared, visible, monotonic, kept)
        return kept

    def _values_then(
        self, sentex: Sentex, declared: dict, visible: Any, monotonic: bool, kept: list
    ) -> None:
        """The single-valued clash a rebuilt or since defeated `sentex` took part in then:
        its value and the others the reader sees for the same other arguments, under a
        declaration the reader sees that governs them all (kb/clashes.py); it replaces
        today's clash of those others."""
        atom = sentex.sentence
        if not sentex.polarity or type(atom) is not tuple:
            return
        for (predicate, argument), where in declared.items():
            position = argument_position(atom, argument)
            seen = {d for d in where if visible is None or d in visible}
            if predicate is not atom[0] or not position or not self._governs(seen, sentex):
                continue
            pattern = (*atom[:position], Var("value"), *atom[position + 1 :])
            group = [
                s
                for s in self.sentexes_matching(pattern, "?ctx")
                if (visible is None or s.context in visible)
                and (s.strength == "monotonic") is monotonic
                and self._governs(seen, s)
            ]
            if len({show(s.sentence[position]) for s in group}) < 2:
                continue
            handles = sorted(s.handle for s in group)
            kept[:] = [c for c in kept if not set(c["handles"]) < set(handles)]
            if all(handles != c["handles"] for c in kept):
                which = {"predicate": predicate.name, "argument": position}
                sides = [s.text for s in group]
                kept.append({"handles": handles, "sides": sides, "single_valued": which})

    def _governs(self, where: set[str], sentex: Sentex) -> bool:
        """Does a declaration in `where` govern positive `sentex` (kb/clashes.py)?"""
        ups = self.kb.context_up
        return sentex.polarity and any(
            d in ups(sentex.context) or sentex.context in ups(d) for d in where
        )

    def _declarations(self) -> dict[tuple[Any, int], set[str]]:
        """The single-valued declarations shown in this view, as kb/clashes.py reads them."""
        found: dict[tuple[Any, int], set[str]] = {}
        for d in self.sentexes_matching((FUNCTIONAL, Var("p")), "?ctx"):
            found.setdefault((d.sentence[1], LAST), set()).add(d.context)
        for d in self.sentexes_matching((SINGLE_VALUED, Var("p"), Var("n")), "?ctx"):
            if type(d.sentence[2]) is int and d.sentence[2] >= 1:
                found.setdefault((d.sentence[1], d.sentence[2]), set()).add(d.context)
        return found

    def _declared_then(self, clash: dict[str, Any]) -> bool:
        """Whether a single-valued clash's predicate was declared so at this seq (a
        negation clash needs no declaration)."""
        declared = clash.get("single_valued")
        if declared is None:
            return True
        predicate = Sym(declared["predicate"])
        return bool(
            self.sentexes_matching((SINGLE_VALUED, predicate, Var("n")), "?ctx")
            or self.sentexes_matching((FUNCTIONAL, predicate), "?ctx")
        )

    def argue(self, sentence: Any, ctx: Any) -> str:
        return self.kb.argue(sentence, ctx)
