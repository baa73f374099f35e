"""The conversation as agents read it: threads, questions and their life, disputes.

One concept: the conversation's reads, and a question's state derived from what stands;
its size is the thread's many parts (answers, claims, replies, disputes, rulings), each
built from one pass over the channel.

Each read is one function over a `KB`, registered as a daemon operation
(`conversation.thread`, `conversation.questions`, `conversation.disputes`), so over the
wire it is ONE round trip however much it gathers; the channel's `Agent` calls them
through `operations.invoker`, in-process or over the wire alike.

A question's state is derived from what stands, never stored:
- `settled`: its asker accepted a standing answer, or a standing ruling upholds the
  claim of one;
- `closed`: its asker closed it (and accepted nothing);
- `open`: no standing answer makes a believed claim;
- `contested`: the believed claims of its standing answers differ, or one of them is
  disputed (a dispute move on it stands, or it is a side of a clash the channel sees);
- `answered`: otherwise.

History (koinii.channel.history): a move taken back — withdrawn, conceded, superseded — is kept
as a record, and the reads show it beside what stands: a question's `withdrawn_answers`,
a claim's `withdrawn` replies, each with what it carried (its disputes with their
`ending`); `thread` of a retired handle reads its record; `disputes` lists ended
disputes (`state` "ended", `ending` withdrawn, conceded, superseded or ruled). Every read
takes `as_of` (a log seq) or `as_of_ms` (a time): the channel as it stood then.

Values: a question that asks for one value (a pattern with one variable, or yes/no)
declares it single-valued at the channel: it is `contested` as soon as two believed
claims the channel sees give it different values — its standing answers' claims, or
claims of the pattern's form made without answering — disputed or not, and `disputes`
lists the difference (class `values`, with `values`: who gave which). So it lists a
predicate declared single-valued (`(singleValued P N)`, `(functional P)`) where the
channel sees the declaration: the engine's `contradictions` at the channel list those
(kb/clashes.py), with the declaration as the dispute's `declared`.

Invariants:
- What stands is shown as it stands: believed moves, one answer per agent per question
  and one ballot per agent per target as the channel writes them; what was taken back is
  shown apart, with how it ended, never mixed in.
- Every result is a JSON value (sentences as canonical text), identical in-process and
  over the wire, and a read never writes.
- Only the asker's acceptance or closing counts; only ballots cast by their voters
  count (`majority.cast_by_voter`). Anything else is shown, never obeyed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from koinii import disputes, speech
from koinii.channel import history
from koinii.disputes import majority
from koinii.disputes.rulings import rulings_on
from koinii.errors import Refused
from koinii.identity import AGENT_CONTEXT
from koinii.kb import KB, Sentex
from koinii.kb.checks import context_name
from koinii.operations import operation
from koinii.speech import (
    ACCEPTS,
    ANSWERS,
    CLOSES,
    DISPUTES,
    ENDORSES,
    JUSTIFIES,
    QUERIES,
    move_kind,
    negation,
    ref,
    target_of,
)
from koinii.terms import Sym, Var, parse, show, variables

__all__ = [
    "QUESTION_STATES",
    "channels",
    "dispute_window",
    "disputes_on",
    "questions",
    "sentex_named",
    "thread",
]

QUESTION_STATES = ("open", "answered", "contested", "settled", "closed")
UNSETTLED = ("open", "answered", "contested")
DISPUTE_STATES = ("open", "notified", "stale", "resolved", "ended")
ENDINGS = ("ruled", *history.ENDINGS)
DISPUTE_FILTERS = DISPUTE_STATES + ENDINGS  # what `disputes(state=…)` takes
_FOLLOWING = (  # the replies that go with what they reply to (CxSpeechActs.sx)
    (ANSWERS, 3),
    (ENDORSES, 2),
    (JUSTIFIES, 3),
    (DISPUTES, 2),
    (speech.VOTES_FOR, 2),
    (speech.VOTES_AGAINST, 2),
    (ACCEPTS, 2),
    (CLOSES, 2),
)


class _Everywhere(frozenset):
    """Every context: what a record sees when it keeps what a move carried."""

    def __contains__(self, item: object) -> bool:
        return True


_ANY = Var("any")
_ANY2 = Var("any2")


class _Reader:
    """One read of the conversation at one channel; caches what it looked up."""

    def __init__(self, kb: Any, channel: str, *, everywhere: bool = False) -> None:
        self.kb = kb
        self.channel = channel
        self.visible = _Everywhere() if everywhere else kb.context_up(channel)
        self._owners: dict[str, str | None] | None = None
        self._live: list[dict[str, Any]] | None = None
        self._groups: list[tuple[tuple[int, ...], dict[str, Any]]] | None = None
        self._marks: dict[tuple[int, ...], str] | None = None
        self._history: history.Index | None = None

    # --- who -----------------------------------------------------------------------------

    def owner(self, context: str) -> str | None:
        """The agent whose own context `context` is (from the marks), if any."""
        if self._owners is None:
            marks = self.kb.sentexes_matching((AGENT_CONTEXT, _ANY, _ANY2), "?ctx")
            self._owners = {}
            for mark in marks:
                ctx, agent = mark.sentence[1], mark.sentence[2]
                if type(ctx) is Sym and type(agent) is Sym and mark.context == ctx.name:
                    self._owners.setdefault(ctx.name, agent.name)
        return self._owners.get(context)

    def members(self) -> list[str]:
        """The agents whose own context the channel sees."""
        self.owner(self.channel)
        assert self._owners is not None
        return sorted({a for ctx, a in self._owners.items() if ctx in self.visible})

    def author(self, sentex: Sentex) -> str | None:
        """Who made a move: its speaker, else its creator, else its context's owner —
        and for an answer's claim, the answerer."""
        said = speech.speaker(sentex.sentence)
        if said is not None:
            return said
        if sentex.provenance.get("creator"):
            return sentex.provenance["creator"]
        return self.owner(sentex.context)

    def move(self, sentex: Sentex) -> dict[str, Any]:
        out = {
            "handle": sentex.handle,
            "kind": move_kind(sentex.sentence),
            "speaker": self.author(sentex),
            "sentence": sentex.text,
            "context": sentex.context,
            "believed": sentex.believed,
        }
        if not sentex.believed:
            out["why_not"] = self.kb.why_not(sentex.handle)
        return out

    # --- lookups -------------------------------------------------------------------------

    def replies(self, target: int, functor: Sym, arity: int) -> list[Sentex]:
        """Believed `(functor ?speaker … (sentexHandle target))` the channel sees: a reply
        of an agent that never joined it (an answer, an endorsement) made its questions
        contested and was listed as said there (issue 37)."""
        middle = tuple(Var(f"x{i}") for i in range(arity - 2))
        pattern = (functor, _ANY, *middle, ref(target))
        return [s for s in self.kb.sentexes_matching(pattern, "?ctx") if s.context in self.visible]

    def stored(self, sentence: Any, context: str) -> Sentex | None:
        """The sentex of `sentence` stored in `context`, believed or not."""
        for sentex in self.kb.sentexes_matching(sentence, "CxEverything"):
            if sentex.context == context:
                return sentex
        return None

    def claim_of(self, act: Sentex) -> Sentex | None:
        """The claim an answer carries (believed or not), None for a legacy answer."""
        claim = speech.carried_claim(act.sentence)
        return None if claim is None else self.stored(claim, act.context)

    def answer_of(self, claim: Sentex) -> Sentex | None:
        """The standing answer that carries `claim`, if it is an answer's claim."""
        if not claim.derived:
            return None
        pattern = (ANSWERS, _ANY, (speech.QUOTE, claim.sentence), Var("q"))
        for act in self.kb.sentexes_matching(pattern, claim.context):
            return act
        return None

    def live(self) -> list[dict[str, Any]]:
        """The clashes the channel observes — for a reader of everything at an agent's
        context, those every channel it is on observes — once per read."""
        if self._live is None:
            if not isinstance(self.visible, _Everywhere):
                self._live = disputes.disputes_in(self.kb, self.channel)
                return self._live
            found: dict[tuple[int, ...], dict[str, Any]] = {}
            for ctx in sorted(self.kb.context_down(self.channel)):
                for entry in disputes.disputes_in(self.kb, ctx):
                    found.setdefault(tuple(entry["dispute_id"]), entry)
            self._live = list(found.values())
        return self._live

    # --- claims ----------------------------------------------------------------------------

    def claim_thread(self, claim: Sentex) -> dict[str, Any]:
        """A claim with everything said about it."""
        handle = claim.handle
        justifications = [
            {**self.move(j), "ground": show(j.sentence[2])}
            for j in self.replies(handle, JUSTIFIES, 3)
        ]
        ballots = majority.ballots(self.kb, handle, self.visible)
        rulings = rulings_on(self.kb, claim)
        return {
            **self.move(claim),
            "endorsements": [self.move(e) for e in self.replies(handle, ENDORSES, 2)],
            "justifications": justifications,
            "disputes": self.disputes_of(claim),
            "ballots": ballots,
            "tally": majority.tally(self.kb, handle, self.visible),
            "rulings": rulings,
            "withdrawn": [retired_entry(r) for r in self.history().on_target.get(handle, [])],
            "earlier": [retired_entry(r) for r in self.earlier(claim)],
        }

    def earlier(self, claim: Sentex) -> list[dict[str, Any]]:
        """The records of this same claim made before in the same context and taken
        back: a claim made again carries what was said of it then."""
        found = self.history().said.get((claim.text, claim.context), [])
        seen: dict[int, dict[str, Any]] = {}
        for record, handle in found:
            if handle != claim.handle:
                seen.setdefault(record["record"], record)
        return list(seen.values())

    def carried(self, sides: list[Sentex]) -> list[dict[str, Any]]:
        """The ended disputes a dispute continues: one on the same sentence, in the
        same context, taken back while the same other side stood (a withdraw-and-claim-
        again keeps its dispute, the moves that raised it and its tally, from the record)."""
        if not sides:
            return []
        by_text = {(s.text, s.context) for s in sides}
        handles = {s.handle for s in sides}
        out = []
        for kept, record in self.history().kept_with(by_text):
            gone = [d for d in kept["sides"] if d["handle"] not in handles]
            stand = [d for d in kept["sides"] if d["handle"] in handles]
            if stand and gone and all((d["sentence"], d["context"]) in by_text for d in gone):
                out.append(
                    {
                        "dispute_id": kept["dispute_id"],
                        "raised_by": kept["raised_by"],
                        "tally": kept["tally"],
                        "ending": record["ending"],
                        "ended": history.ended(record),
                    }
                )
        return out

    def history(self) -> history.Index:
        """The records of moves taken back in the contexts the channel sees, indexed
        (once per read; the KB's own index when the channel sees every record)."""
        if self._history is None:
            every = history.index(self.kb)
            seen = [r for r in every.records if r["context"] in self.visible]
            self._history = every if len(seen) == len(every.records) else history.Index(seen)
        return self._history

    def disputes_of(self, claim: Sentex) -> list[dict[str, Any]]:
        """The disputes `claim` is a side of — only those are read in full."""
        handle = claim.handle
        return [self.dispute_entry(k, g) for k, g in self.dispute_groups() if handle in k]

    # --- answers and questions -------------------------------------------------------------

    def answer_entry(self, act: Sentex, question: Any, accepted: int | None) -> dict[str, Any]:
        claim = self.claim_of(act)
        entry = {
            **self.move(act),
            "content": show(speech.answer_content(act.sentence)),
            "claim": None if claim is None else self.claim_thread(claim),
            "accepted": act.handle == accepted,
        }
        if speech.question_kind(question) == "pattern" and claim is not None:
            found = speech.bindings_of(question[1], claim.sentence)
            entry["bindings"] = {k: show(v) for k, v in (found or {}).items()}
        return entry

    def question_thread(self, q: Sentex) -> dict[str, Any]:
        asker = speech.speaker(q.sentence)
        question = q.sentence[2]
        acts = self.replies(q.handle, ANSWERS, 3)
        acceptance = next(
            (
                a
                for a in self.replies_by(asker, ACCEPTS, acts)
                if target_of(a.sentence) in {act.handle for act in acts}
            ),
            None,
        )
        accepted = None if acceptance is None else target_of(acceptance.sentence)
        closing = next(iter(self.replies_by(asker, CLOSES, [q])), None)
        answers = [self.answer_entry(act, question, accepted) for act in acts]
        state, ruling = _state(answers, accepted, closing)
        shown = question[1] if speech.question_kind(question) in ("pattern", "yes-no") else question
        withdrawn = [
            retired_entry(r)
            for r in self.history().of_question.get(q.handle, [])
            if r["kind"] == "answer"
        ]
        return {
            **self.move(q),
            "question": show(shown),
            "question_kind": speech.question_kind(question),
            "state": state,
            "answers": answers,
            "answer_count": len(answers),
            "accepted": accepted,
            "acceptance": None if acceptance is None else acceptance.handle,
            "acceptance_reason": _reason(acceptance),
            "closing": None if closing is None else closing.handle,
            "closing_reason": _reason(closing),
            "ruling": ruling,
            "withdrawn_answers": withdrawn,
            "withdrawn_acceptances": [  # replaced by another, or withdrawn
                retired_entry(r)
                for answer in sorted({a.handle for a in acts} | {w["handle"] for w in withdrawn})
                for r in self.history().on_target.get(answer, [])
                if r["kind"] == "acceptance"
            ],
        }

    def replies_by(self, speaker: str | None, functor: Sym, targets: list[Sentex]) -> list[Sentex]:
        """The believed `(functor speaker (sentexHandle T))` of one speaker on `targets`."""
        if speaker is None:
            return []
        out = []
        for target in targets:
            for reply in self.replies(target.handle, functor, 2):
                if speech.speaker(reply.sentence) == speaker:
                    out.append(reply)
        return out

    def question_summary(self, q: Sentex) -> dict[str, Any]:
        full = self.question_thread(q)
        keep = ("handle", "speaker", "sentence", "context", "question", "question_kind")
        return {
            **{k: full[k] for k in keep},
            "state": full["state"],
            "answer_count": full["answer_count"],
            "accepted": full["accepted"],
        }

    def questions(self) -> list[Sentex]:
        found = self.kb.sentexes_matching((QUERIES, _ANY, _ANY2), "?ctx")
        return sorted((q for q in found if q.context in self.visible), key=lambda q: q.handle)

    # --- disputes ----------------------------------------------------------------------------

    def dispute_groups(self) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
        """Every dispute on the channel — the live clashes, and the dispute moves — as
        its id (its sides' handles, sorted) and what it is made of: its live clash, the
        moves that raised it, its target; in the order of the ids (once per read)."""
        if self._groups is not None:
            return self._groups
        groups: dict[tuple[int, ...], dict[str, Any]] = {}
        # each handle's groups, in the order they were made: `_key` looks at the target's
        # only (scanning every group for every edge: 3,000 disputes were 9 M steps, 0.8 s)
        having: dict[int, list[tuple[int, ...]]] = {}
        for entry in self.live():
            key = tuple(entry["dispute_id"])
            groups[key] = {"live": entry, "edges": [], "target": None}
            for handle in key:
                having.setdefault(handle, []).append(key)
        edges = self.kb.sentexes_matching((DISPUTES, _ANY, (speech.HANDLE, _ANY2)), "?ctx")
        for edge in sorted(edges, key=lambda e: e.handle):
            if edge.context not in self.visible:
                continue
            on = target_of(edge.sentence)
            key = _in_clash(edge, on, having.get(on, ()), groups)
            if key is None:
                target = self.kb.sentex(on)
                if target is None:
                    continue
                key = self._key(target, edge.context, having.get(on, ()))
            if key not in groups:
                groups[key] = {"live": None, "edges": [], "target": None}
                for handle in key:
                    having.setdefault(handle, []).append(key)
            group = groups[key]
            group["edges"].append(edge)
            group["target"] = group["target"] or on
        for key, values in self.value_conflicts():
            if key not in groups:
                groups[key] = {"live": None, "edges": [], "target": None, "values": values}
            elif (groups[key]["live"] or {}).get("single_valued"):  # declared and asked
                groups[key]["values"] = values
        self._groups = sorted(groups.items())
        return self._groups

    def value_conflicts(self) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
        """The one-value questions given differing values: each as the handles of the
        believed claims that give one (`asked_values`) and the question."""
        found = []
        for q in self.questions():
            if not _one_value(q.sentence[2]):
                continue
            claims = self.asked_values(q)
            if len({c.text for c in claims}) > 1:
                found.append((tuple(sorted(c.handle for c in claims)), {"question": q.handle}))
        return found

    def asked_values(self, q: Sentex) -> list[Sentex]:
        """The believed claims that give one-value question `q` a value: its standing
        answers' claims and, for a pattern, every claim of the pattern's form an agent
        made where the channel sees it — a question that asks for one value declares it
        single-valued at the channel, so a value claimed without answering counts too (a
        ruling, monotonic, is a decision on a claim, not another value)."""
        claims: dict[int, Sentex] = {}
        for act in self.replies(q.handle, ANSWERS, 3):
            claim = self.claim_of(act)
            if claim is not None and claim.believed:
                claims[claim.handle] = claim
        asked = q.sentence[2]
        if speech.question_kind(asked) == "pattern":
            for claim in self.kb.sentexes_matching(asked[1], "?ctx"):
                if (
                    claim.context in self.visible
                    and claim.believed
                    and claim.strength != "monotonic"
                    and self.owner(claim.context) is not None
                ):
                    claims.setdefault(claim.handle, claim)
        return list(claims.values())

    def values_of(self, group: dict[str, Any], sides: list[Sentex]) -> list[dict[str, Any]]:
        """Who gave which value, for a dispute of class `values`: each side's value (the
        question's variable, yes or no, or the declared argument) and its speaker."""
        declared = (group["live"] or {}).get("single_valued")
        asked = None
        if group.get("values") is not None:
            q = self.kb.sentex(group["values"]["question"])
            asked = None if q is None else q.sentence[2]
        out = []
        for side in sides:
            value: Any = side.sentence
            if declared is not None:
                value = side.sentence[declared["argument"]]
            elif asked is not None and speech.question_kind(asked) == "pattern":
                found = speech.bindings_of(asked[1], side.sentence) or {}
                value = next(iter(found.values()), side.sentence)
            elif asked is not None:  # yes/no: the sentence or its negation
                value = Sym("yes" if side.polarity else "no")
            out.append({"value": show(value), "speaker": self.author(side), "handle": side.handle})
        return sorted(out, key=lambda v: (v["value"], v["handle"]))

    def _key(
        self, target: Sentex, context: str, candidates: Iterable[tuple[int, ...]]
    ) -> tuple[int, ...]:
        """The group an edge on `target` in `context` joins: the first of the target's
        groups (`candidates`) that holds its rebuttal (the target's negation in
        `context`) too, else a ruling's, else a new one."""
        rebuttal = self.stored(negation(target.sentence), context)
        for key in candidates:
            if rebuttal is None or rebuttal.handle in key:
                return key
        for ruling in rulings_on(self.kb, target):
            for key in ruling["dispute_ids"]:
                if target.handle in key:
                    return tuple(key)
        handles = {target.handle} | ({rebuttal.handle} if rebuttal is not None else set())
        return tuple(sorted(handles))

    def dispute_state(self, key: tuple[int, ...], group: dict[str, Any]) -> str:
        if group.get("values") is None and group["live"] is None:
            return "resolved"
        if self._marks is None:  # every dispute's marks, read once (not two matches each)
            self._marks = disputes.mark_states(self.kb)
        return self._marks.get(key, "open")

    def ordered(self) -> list[tuple[tuple[int, ...], int, dict[str, Any]]]:
        """Every dispute, standing and ended, newest id first, none read in full: its id,
        1 if it ended (then its record's entry) else 0 (then its group)."""
        ended = [(tuple(e["dispute_id"]), 1, e) for e in self.ended_disputes()]
        standing = [(key, 0, group) for key, group in self.dispute_groups()]
        return sorted(standing + ended, key=lambda x: (x[0], x[1]), reverse=True)

    def ended_disputes(self) -> list[dict[str, Any]]:
        """The disputes that ended with a move taken back, from the records, each with
        its `ending` and who ended it when."""
        out = []
        for record in self.history().records:
            for kept in record["disputes"]:
                out.append(_ended(kept, record))
        return out

    def dispute_entry(self, key: tuple[int, ...], group: dict[str, Any]) -> dict[str, Any]:
        live = group["live"]
        values = group.get("values")  # differing values: no one claim is the target
        on = group["target"] or (None if values is not None else min(key))
        target = None if on is None else self.kb.sentex(on)
        sides = [self.kb.sentex(h) for h in key]
        state = self.dispute_state(key, group)
        rulings = (
            [r for r in rulings_on(self.kb, target) if list(key) in r["dispute_ids"]]
            if target is not None
            else []
        )
        question = None
        answer = self.answer_of(target) if target is not None else None
        if answer is not None:
            question = target_of(answer.sentence)
        if values is not None:
            question = values["question"]
        dispute_class = live["dispute_class"] if live is not None else None
        if values is not None or (live is not None and live.get("single_valued")):
            dispute_class = "values"
        shown = [s for s in sides if s is not None]
        return {
            "dispute_id": list(key),
            "class": dispute_class,
            "state": state,
            "ending": "ruled" if state == "resolved" and rulings else None,
            "target": None if target is None else self.move(target),
            "raised_by": [self.move(e) for e in group["edges"]],
            "sides": [{**self.move(s), "strength": s.strength} for s in shown],
            "tally": majority.tally(self.kb, target.handle, self.visible) if target else {},
            "ruling": rulings[0] if rulings else None,
            "question": question,
            "declared": None if live is None else live.get("single_valued"),
            "values": self.values_of(group, shown) if dispute_class == "values" else None,
            "carried": self.carried(shown),
        }


def _in_clash(
    edge: Sentex,
    target: int,
    candidates: Iterable[tuple[int, ...]],
    groups: dict[tuple[int, ...], dict[str, Any]],
) -> tuple[int, ...] | None:
    """The group the dispute move `edge` on `target` joins, told from the clash's own
    sides when the first of the target's groups (`candidates`) that can tell is a live
    clash of one sentence's two polarities: its rebuttal is the side of the other
    polarity in the edge's context, if there is one. None when a group can't tell (made
    by a move, or of a single-valued argument: `_Reader._key` looks the rebuttal up in
    the store). A lookup of the target and its rebuttal per move was a third of what
    the disputes page read at 10,000."""
    for key in candidates:
        live = groups[key]["live"]
        sides = [] if live is None or live.get("single_valued") else live["sides"]
        if not sides or type(sides[0]) is not dict:  # (a clash rebuilt as of a seq: texts)
            return None
        said = next((side["sentence"] for side in sides if side["handle"] == target), None)
        if said is None:
            return None
        rebuttal = said[5:-1] if said.startswith("(not ") else f"(not {said})"
        if any((s["context"], s["sentence"]) == (edge.context, rebuttal) for s in sides):
            return key
    return None


def _one_value(question: Any) -> bool:
    """Does the question ask for one value: a yes/no, or a pattern with one variable?"""
    kind = speech.question_kind(question)
    if kind == "yes-no":
        return True
    return kind == "pattern" and len(set(variables(question[1]))) == 1


# --- the record of what was taken back ----------------------------------------------------------

_REPLY_LISTS = {
    "endorsement": "endorsements",
    "justification": "justifications",
    "ballot": "ballots",
    "dispute": "dispute_moves",
}


def retired_entry(record: dict[str, Any]) -> dict[str, Any]:
    """A move taken back, as its record keeps it: the move, how it ended (`withdrawn`:
    ending, by, seq, at, reason), and what it carried — its claim, the endorsements,
    justifications, ballots and dispute moves on it, and the disputes, each with the
    `ending` its withdrawal gave it."""
    me = history.self_item(record)
    carried: dict[str, list[dict[str, Any]]] = {k: [] for k in _REPLY_LISTS.values()}
    claim = None
    for one in record["items"]:
        if one["handle"] == record["handle"]:
            continue
        shown = {k: one.get(k) for k in ("handle", "kind", "speaker", "sentence", "context")}
        if one["kind"] == "claim" and record["kind"] == "answer" and claim is None:
            claim = shown
        elif one["kind"] in _REPLY_LISTS:
            carried[_REPLY_LISTS[one["kind"]]].append(shown)
    out = {
        **{k: me.get(k) for k in ("handle", "kind", "speaker", "sentence", "context")},
        "believed": False,
        "withdrawn": history.ended(record),
        **carried,
        "disputes": [_ended(d, record) for d in record["disputes"]],
    }
    if record["kind"] in ("acceptance", "closing"):  # what was decided, and why
        out["target"] = record["target"]
        out["reason"] = (me.get("provenance") or {}).get("reason")
    if record["kind"] == "answer":
        out["content"] = show(speech.answer_content(parse(record["sentence"])))
        out["claim"] = claim
        out["question"] = record["question"]
    if record.get("dropped_items"):
        out["dropped_items"] = record["dropped_items"]
    return out


def _ended(kept: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """A dispute its record keeps, as the reads list it: ended, with how and by whom."""
    return {
        **kept,
        "state": "ended",
        "ending": record["ending"],
        "ended": history.ended(record),
        "ruling": None,
        "carried": [],
    }


def carried(kb: KB, moved: list[Sentex]) -> tuple[list[Sentex], list[dict[str, Any]], Any]:
    """What goes with `moved` when it is taken back — the claims its answers carry and
    every reply that follows its target, transitively — and the disputes any of it is
    in, as the channel shows them now: what a record keeps (koinii.channel.history). Also the
    reader, for naming authors."""
    reader = _Reader(kb, moved[0].context, everywhere=True)  # its channels' clashes
    seen: dict[int, Sentex] = {}
    frontier = list(moved)
    while frontier:
        one = frontier.pop()
        if one.handle in seen:
            continue
        seen[one.handle] = one
        if move_kind(one.sentence) == "answer":
            claim = reader.claim_of(one)
            if claim is not None:
                frontier.append(claim)
        for functor, arity in _FOLLOWING:
            frontier.extend(reader.replies(one.handle, functor, arity))
    kept: list[dict[str, Any]] = []
    if not any(move_kind(s.sentence) in _SIDES for s in seen.values()):
        return sorted(seen.values(), key=lambda s: s.handle), kept, reader
    for key, group in reader.dispute_groups():
        edges = {e.handle for e in group["edges"]}
        if seen.keys() & (set(key) | edges):
            entry = reader.dispute_entry(key, group)
            kept.append(
                {
                    "dispute_id": entry["dispute_id"],
                    "class": entry["class"] or "contradiction",
                    "state_before": entry["state"],
                    "target": _brief(entry["target"]),
                    "raised_by": [_brief(m) for m in entry["raised_by"]],
                    "sides": [_brief(m) for m in entry["sides"]],
                    "tally": entry["tally"],
                    "question": entry["question"],
                    "values": entry["values"],
                    "declared": entry["declared"],
                }
            )
    return sorted(seen.values(), key=lambda s: s.handle), kept, reader


_SIDES = ("claim", "answer", "dispute")  # what a dispute is made of: its sides and moves


def _brief(move: dict[str, Any] | None) -> dict[str, Any] | None:
    if move is None:
        return None
    return {k: move.get(k) for k in ("handle", "speaker", "sentence", "context")}


def _state(
    answers: list[dict[str, Any]], accepted: int | None, closing: Sentex | None
) -> tuple[str, dict[str, Any] | None]:
    """A question's state from its standing answers (see the module docstring)."""
    if accepted is not None:
        return "settled", None
    if closing is not None:
        return "closed", None
    believed = [a for a in answers if a["claim"] is None or a["claim"]["believed"]]
    for answer in answers:
        claim = answer["claim"]
        for ruling in claim["rulings"] if claim else ():
            if ruling["upholds"]:
                return "settled", ruling
    if not believed:
        return "open", None
    claims = {a["claim"]["sentence"] if a["claim"] else a["content"] for a in believed}
    disputed = any(a["claim"] and a["claim"]["disputes"] for a in believed)
    return ("contested" if len(claims) > 1 or disputed else "answered"), None


# --- the reads -----------------------------------------------------------------------------


def thread(
    kb: KB,
    handle: int,
    channel: str,
    *,
    limit: int | None = None,
    before: int | None = None,
    as_of: int | None = None,
    as_of_ms: int | None = None,
) -> dict[str, Any]:
    """A claim or question with everything said about it, read at `channel`.

    - a question: its state, its standing answers — each with its claim, bindings,
      endorsements, justifications, disputes, ballots, tally and rulings — and the
      asker's acceptance or closing;
    - a claim (an answer's claim too): endorsements, justifications, disputes with their
      state, ballots with the tally, rulings; and the answer and question it belongs to;
    - an answer: its entry and its question;
    - any other reply (an endorsement, a ballot, …): the thread of its target, with
      `focus` naming the reply.
    A window, for a question answered many times: with `limit`, only its newest `limit`
    answers — those before the handle `before`, if given — and `older` (the first shown
    answer's handle) when there are earlier ones; its state and `answer_count` are the
    whole question's.
    A move taken back reads as its record (`retired_entry`: how it ended and what it
    carried); one that went with another's withdrawal, as that record, with `focus`.
    With `as_of` (a log seq) or `as_of_ms` (an epoch-ms time): as the channel showed it
    then (koinii.channel.history).
    Refused: `bad-handle`, `koinii/no-such-handle` (with how to find live handles),
    `bad-option`, `too-old`.
    """
    _positive("limit", limit, "a positive integer, e.g. 20")
    _positive("before", before, "an answer's handle: the `older` a thread gave")
    kb = _at(kb, as_of, as_of_ms)
    reader = _Reader(kb, _channel(channel))
    if type(handle) is int and handle > 0 and kb.sentex(handle) is None:
        found = history.record_of(kb, handle)
        if found is not None:
            record, one = found
            entry = retired_entry(record)
            if one["handle"] != record["handle"]:
                entry["focus"] = {k: one.get(k) for k in ("handle", "kind", "speaker", "sentence")}
            return entry
    sentex = sentex_named(kb, handle)
    kind = move_kind(sentex.sentence)
    if kind == "question":
        return _answers_window(reader.question_thread(sentex), limit, before)
    if kind == "answer":
        question = kb.sentex(target_of(sentex.sentence))
        asked = question.sentence[2] if question is not None else None
        entry = reader.answer_entry(sentex, asked, None)
        entry["question"] = None if question is None else reader.question_summary(question)
        return entry
    if kind == "claim":
        out = reader.claim_thread(sentex)
        answer = reader.answer_of(sentex)
        if answer is not None:
            out["answer"] = answer.handle
            out["question"] = target_of(answer.sentence)
        return out
    target = target_of(sentex.sentence)
    if target is None or kb.sentex(target) is None:
        return reader.move(sentex)
    around = thread(kb, target, channel, limit=limit, before=before)
    return {**around, "focus": reader.move(sentex)}


def _at(kb: Any, as_of: Any, as_of_ms: Any) -> Any:
    """The KB, or the KB as of a seq or a time (history.as_of) when one is given."""
    if as_of is None and as_of_ms is None:
        return kb
    if as_of is not None and as_of_ms is not None:
        raise Refused(
            "bad-option",
            "give as_of (a log seq) or as_of_ms (a time), not both",
            {"option": "as_of_ms"},
        )
    return history.as_of(kb, as_of, as_of_ms)


def _answers_window(found: dict[str, Any], limit: int | None, before: int | None) -> dict:
    """A question's thread with only the answers `thread`'s window shows."""
    if limit is None and before is None:
        return found
    answers = [a for a in found["answers"] if before is None or a["handle"] < before]
    shown = answers if limit is None else answers[-limit:]
    found["answers"] = shown
    if len(answers) > len(shown):
        found["older"] = shown[0]["handle"]
    return found


def _positive(option: str, value: Any, what: str) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise Refused("bad-option", f"{option} is {what}", {"option": option})


def questions(
    kb: KB,
    channel: str,
    state: str | None = None,
    *,
    limit: int | None = None,
    before: int | None = None,
    threads: bool = False,
    as_of: int | None = None,
    as_of_ms: int | None = None,
) -> list[dict[str, Any]]:
    """The questions asked on `channel` (by the agents it sees), oldest first, each with
    its state and answer count. `state`: one of QUESTION_STATES, `unsettled` (open,
    answered or contested), or None for all.

    A window, for long channels: with `limit`, only the newest `limit` questions that
    pass the filter, asked before the handle `before` if given — read newest first, so
    a window costs what it shows, not the channel's length. With `threads`, each is
    its whole thread (as `thread` reads a question) instead of its summary."""
    states = _states(state)
    _positive("limit", limit, "a positive integer, e.g. 20")
    _positive("before", before, "a question's handle: the `older` a list gave")
    reader = _Reader(_at(kb, as_of, as_of_ms), _channel(channel))
    read = reader.question_thread if threads else reader.question_summary
    found: list[dict[str, Any]] = []
    for q in reversed(reader.questions()):
        if before is not None and q.handle >= before:
            continue
        entry = read(q)
        if states is None or entry["state"] in states:
            found.append(entry)
            if limit is not None and len(found) == limit:
                break
    return found[::-1]


def disputes_on(
    kb: KB,
    channel: str,
    state: str | None = None,
    *,
    limit: int | None = None,
    before: list[int] | None = None,
    as_of: int | None = None,
    as_of_ms: int | None = None,
) -> list[dict[str, Any]]:
    """Every dispute on `channel`: the clashes it observes, the dispute moves its agents
    made, the differing values of its one-value questions (class `values`) and the
    disputes that ended with a move taken back (from the records) — each with its sides,
    speakers, state (open, notified, stale, resolved or ended), `ending` (ruled,
    withdrawn, conceded, superseded; None while it stands), target, tally and ruling, in
    the order of their ids (their sides' handles, sorted). `state` filters: a state, or
    an ending (e.g. `conceded`).

    A window, for long channels: with `limit`, only the last `limit` disputes that pass
    the filter, those whose id comes before `before` (a `dispute_id`) if given — and only
    those are read in full."""
    _dispute_state_named(state, DISPUTE_FILTERS)
    _positive("limit", limit, "a positive integer, e.g. 20")
    if before is not None and not (
        isinstance(before, list) and before and all(type(h) is int and h > 0 for h in before)
    ):
        raise Refused(
            "bad-option",
            "before is a dispute_id: the list of handles a listed dispute carries, e.g. [12, 40]",
            {"option": "before"},
        )
    reader = _Reader(_at(kb, as_of, as_of_ms), _channel(channel))
    found: list[dict[str, Any]] = []
    for key, is_ended, item in reader.ordered():
        if before is not None and list(key) >= before:
            continue
        if is_ended:
            if state in (None, "ended", item["ending"]):
                found.append(item)
        elif state is None or state == reader.dispute_state(key, item) or state == "ruled":
            entry = reader.dispute_entry(key, item)
            if state == "ruled" and entry["ending"] != "ruled":
                continue
            found.append(entry)
        else:
            continue
        if limit is not None and len(found) == limit:
            break
    return found[::-1]


def dispute_window(
    kb: KB, channel: str, state: str | None = None, *, skip: int = 0, limit: int = 50
) -> dict[str, Any]:
    """A page of the channel's disputes, for the web view: `counts` (how many disputes
    are in each of DISPUTE_STATES), `total`, `matched` (how many are in `state`, or all
    with None) and `disputes`: those `matched`, newest first, the `limit` after the
    newest `skip`, each as `disputes_on` lists it.

    Only the window is read in full; every other dispute costs its id and its state (its
    marks read once for all, `disputes.mark_states`). Counting by building every entry
    took 1.4 s at 10,000 disputes, past the page's budget from about 3,000."""
    _dispute_state_named(state, DISPUTE_STATES)
    reader = _Reader(kb, _channel(channel))
    every = [
        (key, "ended" if is_ended else reader.dispute_state(key, item), is_ended, item)
        for key, is_ended, item in reader.ordered()
    ]
    counts = dict.fromkeys(DISPUTE_STATES, 0)
    for _key, in_state, _is_ended, _item in every:
        counts[in_state] += 1
    shown = [one for one in every if state is None or one[1] == state]
    window = [
        item if is_ended else reader.dispute_entry(key, item)
        for key, _state, is_ended, item in shown[skip : skip + limit]
    ]
    return {"counts": counts, "total": len(every), "matched": len(shown), "disputes": window}


def _dispute_state_named(state: str | None, known: tuple[str, ...]) -> None:
    if state is not None and state not in known:
        raise Refused(
            "bad-option",
            f"no dispute state {state!r}; states: {', '.join(known)}",
            {"option": "state", "known": list(known)},
        )


def members(kb: KB, channel: str) -> list[str]:
    """The agents whose own context `channel` sees (its members), sorted."""
    return _Reader(kb, _channel(channel)).members()


def channels(kb: KB) -> list[dict[str, Any]]:
    """The channels — contexts that see an agent's own context and are none themselves —
    by name, each with its members: where a newcomer (or the web view's home) starts."""
    owned = set()
    for mark in kb.sentexes_matching(f"({AGENT_CONTEXT.name} ?ctx ?agent)", "?ctx"):
        ctx = mark.sentence[1]
        if type(ctx) is Sym and mark.context == ctx.name:
            owned.add(ctx.name)
    names = set()
    for edge in kb.sentexes_matching("(genlCx ?a ?b)", "?ctx"):
        a, b = edge.sentence[1], edge.sentence[2]
        if type(a) is Sym and type(b) is Sym and b.name in owned and a.name not in owned:
            names.add(a.name)
    return [{"name": name, "members": members(kb, name)} for name in sorted(names)]


def _states(state: str | None) -> tuple[str, ...] | None:
    if state is None or state == "all":
        return None
    if state == "unsettled":
        return UNSETTLED
    if state in QUESTION_STATES:
        return (state,)
    raise Refused(
        "bad-option",
        f"no question state {state!r}; states: {', '.join(QUESTION_STATES)}, unsettled, all",
        {"option": "state", "known": [*QUESTION_STATES, "unsettled", "all"]},
    )


def _reason(decision: Sentex | None) -> str | None:
    """Why the asker accepted or closed, as it said (`moves.accept`, `moves.close`)."""
    return None if decision is None else decision.provenance.get("reason")


def _channel(channel: Any) -> str:
    return context_name(channel.name if type(channel) is Sym else channel)


def replies_to(kb: Any, handle: int) -> list[Sentex]:
    """Every believed reply that follows `handle` — an answer, endorsement, justification,
    dispute, ballot, acceptance or closing — in any context: what removing it takes along
    (target-following), and what only its move keeps a record of."""
    found: list[Sentex] = []
    for functor, arity in _FOLLOWING:
        middle = tuple(Var(f"x{i}") for i in range(arity - 2))
        found += kb.sentexes_matching((functor, _ANY, *middle, ref(handle)), "?ctx")
    return found


def sentex_named(kb: Any, handle: Any) -> Sentex:
    """The stored sentex `handle` names (for a read or a move), or a refusal that says how
    to find one: `bad-handle`, `koinii/no-such-handle`."""
    if type(handle) is not int or handle <= 0:
        raise Refused(
            "bad-handle",
            f"a handle is a positive integer, not {handle!r:.40}",
            {"handle": repr(handle)[:40]},
        )
    sentex = kb.sentex(handle)
    if sentex is None:
        withdrawn = history.withdrawn_refusal(kb, handle)
        if withdrawn is not None:
            raise withdrawn
        raise Refused(
            "koinii/no-such-handle",
            f"there is no sentex {handle} (never made, or withdrawn since); "
            "questions() and disputes() list the live ones",
            {"handle": handle},
        )
    return sentex


# --- the daemon operations ----------------------------------------------------------------

_CHANNEL = {"channel": ("string", True, "the channel context, e.g. CxTeam")}
_AS_OF = {
    "as_of": ("integer", False, "read the channel as it stood at this log seq"),
    "as_of_ms": ("integer", False, "read the channel as it stood at this epoch-ms time"),
}


@operation(
    "conversation.thread",
    fields={
        "handle": ("integer", True, "a move's handle"),
        **_CHANNEL,
        "limit": ("integer", False, "a question's newest this many answers"),
        "before": ("integer", False, "only the answers before this handle (an older window)"),
        **_AS_OF,
    },
    summary="a claim or question with everything said about it, and what was taken back",
    schedule="read",
)
def _thread(
    kb: KB,
    handle: Any = None,
    channel: Any = None,
    limit: Any = None,
    before: Any = None,
    as_of: Any = None,
    as_of_ms: Any = None,
) -> dict[str, Any]:
    return thread(kb, handle, channel, limit=limit, before=before, as_of=as_of, as_of_ms=as_of_ms)


@operation(
    "conversation.questions",
    fields={
        **_CHANNEL,
        "state": ("string", False, "open | answered | contested | settled | closed | unsettled"),
        "limit": ("integer", False, "only the newest this many of them"),
        "before": ("integer", False, "only those asked before this handle (an older window)"),
        **_AS_OF,
    },
    summary="the channel's questions, each with its state and answer count",
    schedule="read",
)
def _questions(
    kb: KB,
    channel: Any = None,
    state: Any = None,
    limit: Any = None,
    before: Any = None,
    as_of: Any = None,
    as_of_ms: Any = None,
) -> list[dict[str, Any]]:
    return questions(kb, channel, state, limit=limit, before=before, as_of=as_of, as_of_ms=as_of_ms)


@operation(
    "conversation.disputes",
    fields={
        **_CHANNEL,
        "state": (
            "string",
            False,
            "open | notified | stale | resolved | ended, or an ending: ruled | withdrawn | "
            "conceded | superseded",
        ),
        "limit": ("integer", False, "only the last this many of them"),
        "before": (
            ("array", {"type": "integer"}),
            False,
            "only those whose dispute_id comes before this one (an older window)",
        ),
        **_AS_OF,
    },
    summary="every dispute on the channel, standing or ended: sides, state, ending, tally",
    schedule="read",
)
def _disputes(
    kb: KB,
    channel: Any = None,
    state: Any = None,
    limit: Any = None,
    before: Any = None,
    as_of: Any = None,
    as_of_ms: Any = None,
) -> list[dict[str, Any]]:
    return disputes_on(
        kb, channel, state, limit=limit, before=before, as_of=as_of, as_of_ms=as_of_ms
    )


@operation(
    "conversation.members",
    fields=_CHANNEL,
    summary="the agents whose own context the channel sees",
    schedule="read",
)
def _members(kb: KB, channel: Any = None) -> list[str]:
    return members(kb, channel)


@operation(
    "conversation.channels",
    fields={},
    summary="the channels (contexts an agent joined), each with its members",
    schedule="read",
)
def _channels(kb: KB) -> list[dict[str, Any]]:
    return channels(kb)
