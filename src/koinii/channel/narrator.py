"""Telling people (and models) what changed: a change-log entry as moves in words.

One narrator serves every reader of the feed — `koinii tail`, `koinii demo` and the MCP
server's `wait_for_changes` — so a move reads the same wherever it is seen:
"AgentCyra answered question #69 with (postgresMajorVersion ProdCluster 16)".

A `Narrator` follows the change log in order and remembers the sentences it saw, so a
reply names what it replies to; a `lookup` (a KB or a Client) fills in what it did not
see. A change that is part of a move already told — the claim an answer carries, the
rebuttal beside a dispute — is folded into that move; a reply removed by the write that
withdrew its target is told as gone with it (`reason` "torn-down"), not as withdrawn by
its own speaker, who did not; and the plumbing of the store
(vocabulary, context edges, agents' marks, `contested` derivations) is told only when
asked for (`structure=True`).

Invariant: `entry` is a pure function of the entries seen so far and of what `lookup`
reads; it never writes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from koinii import speech
from koinii.channel import history
from koinii.disputes.majority import MAJORITY_ARBITER
from koinii.errors import KoiniiError
from koinii.terms import Sym, parse, show

__all__ = ["STRUCTURE", "WRAP_NOTES", "Narrator", "Told"]

# The store's plumbing: context edges, agents' marks, declarations, `contested`.
STRUCTURE = frozenset(
    Sym(name)
    for name in (
        "genlCx",
        "agentContext",
        "contested",
        "arity",
        "comment",
        "functional",
        "target_following_predicate",
        "carriesClaim",
        "disputeNotified",
        "disputeStale",
        "retired",
    )
)
# The `reason` of a reply removed because the move it replied to was withdrawn.
TORN_DOWN = "torn-down"
_VOCABULARY = ("CxCore", "CxSpeechActs", "CxRegistry", "CxDisputes", "CxUniverse", "CxHistory")
# The notes a wrap writes, by what they are called when told.
WRAP_NOTES = {
    Sym("memoryNote"): "note",
    Sym("memoryDecision"): "decision",
    Sym("memoryConvention"): "convention",
}
_RECORDS = {  # domain writes told by their change-log summary
    "wraps.wrap_session": "a worker filed {wrap_id}",
    "wraps.add": "a worker filed {wrap_id}",
    "wraps.mark_processed": "the coordinator permeated {wrap_id}",
}
_VERBS = {
    "question": "asked",
    "answer": "answered",
    "endorsement": "endorsed",
    "justification": "justified",
    "dispute": "disputed",
    "acceptance": "accepted",
    "closing": "closed",
    "error": "did not understand",
}


@dataclass(frozen=True)
class Told:
    """One change, told: `text` in words, with the raw change beside it."""

    seq: int
    added: bool
    kind: str  # what happened: question, answer, …, claim, ruling, wrap, withdrawal,
    #            concession, defeat, structure
    speaker: str | None
    handle: int
    sentence: str
    context: str
    text: str
    move: str | None = None  # the kind of move the sentence is (speech.move_kind)
    target: int | None = None  # the handle a reply is on
    target_context: str | None = None  # where that target is stored, when known
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _endings(added: list[dict[str, Any]]) -> dict[int, tuple[str, str | None]]:
    """How the moves a write took back ended, from the records it wrote beside them
    (koinii.channel.history: `(retired (sentexHandle H) Seq "json")` in CxHistory)."""
    out: dict[int, tuple[str, str | None]] = {}
    for change in added:
        if change["context"] != "CxHistory" or not change["sentence"].startswith("(retired "):
            continue
        try:
            record = json.loads(parse(change["sentence"])[3])
        except (KoiniiError, ValueError, TypeError, IndexError):
            continue
        if isinstance(record, dict) and isinstance(record.get("handle"), int):
            out[record["handle"]] = (str(record.get("ending")), record.get("reason"))
    return out


def _not_obeyed(speaker: str | None, what: str, of: str, asker: str) -> str:
    """A move only a question's asker may make, written by hand by someone else: shown
    (it is in the store) but never obeyed, and told so."""
    return f"{speaker} wrote {what} {of}, which only the asker {asker} can make: not obeyed"


class Narrator:
    """Follows the change log and tells each change (see the module docstring)."""

    def __init__(self, lookup: Any = None, *, me: str | None = None) -> None:
        self.lookup = lookup
        self.me = me  # "your question" when the reader is its asker
        self.seen: dict[int, tuple[str, str]] = {}  # handle -> (sentence, context)
        self.owners: dict[str, str | None] = {}
        self._defeated_now: frozenset[int] = frozenset()
        self._disputed_now: set[int] = set()
        self._endings: dict[int, tuple[str, str | None]] = {}  # this entry's records

    def entry(self, entry: dict[str, Any], *, structure: bool = False) -> list[Told]:
        """Every change of one change-log entry, told, in order (added, then removed)."""
        for change in entry["added"] + entry["removed"]:  # (a reply names what it went with)
            self._remember(change)
        told = []
        gone = frozenset(change["handle"] for change in entry["removed"])
        # a claim a dispute's rebuttal defeats in the dispute's own write: told with it
        self._defeated_now = frozenset(
            c["handle"] for c in entry["removed"] if c.get("reason") == "defeated"
        )
        self._disputed_now = set()
        self._endings = _endings(entry["added"])
        for added, changes in ((True, entry["added"]), (False, entry["removed"])):
            folded = self._folded(changes)
            for change in changes:
                one = self.change(change, added, entry["seq"], folded=folded, gone=gone)
                if one is not None and (structure or one.kind != "structure"):
                    told.append(one)
        records = entry.get("records")
        if entry.get("op") in _RECORDS and isinstance(records, dict) and not told:
            text = _RECORDS[entry["op"]].format_map({"wrap_id": "?", **records})
            told.append(Told(entry["seq"], True, "wrap", None, 0, "", "", text))
        return told

    def change(
        self,
        change: dict[str, Any],
        added: bool,
        seq: int,
        *,
        folded: frozenset[str] = frozenset(),
        gone: frozenset[int] = frozenset(),
    ) -> Told | None:
        """One change, told. `folded`: the claims told with their move; `gone`: the
        handles the same write removed (a reply removed with its target went with it)."""
        sentence = change["sentence"]
        term = parse(sentence)
        context = change["context"]
        kind = speech.move_kind(term)
        speaker = speech.speaker(term) or self._owner(context)
        target = speech.target_of(term)
        seen = self.seen_of(target)
        base = {
            "seq": seq,
            "added": added,
            "handle": change["handle"],
            "sentence": sentence,
            "context": context,
            "move": kind,
            "target": target,
            "target_context": None if seen is None else seen[1],
            "reason": change.get("reason"),
        }
        atom = term[1] if term[0] is speech.NOT and len(term) == 2 else term
        if atom[0] in STRUCTURE or context in _VOCABULARY:
            return Told(kind="structure", speaker=speaker, text=f"{sentence} in {context}", **base)
        if kind == "claim" and sentence in folded:
            return None  # told with the move that made (or unmade) it
        if not added:
            if change.get("reason") == "defeated" and change["handle"] in self._disputed_now:
                return None  # told with the dispute that defeated it
            return self._removed(change, term, kind, speaker, base, gone)
        if atom[0] in WRAP_NOTES and len(atom) == 3:
            text = f"{speaker} wraps up, {WRAP_NOTES[atom[0]]}: {show(atom[2])}"
            return Told(kind="wrap", speaker=speaker, text=text, **base)
        if kind == "claim":
            if speaker == MAJORITY_ARBITER:
                return Told(
                    kind="ruling", speaker=speaker, text=f"{speaker} ruled {sentence}", **base
                )
            how, by, text = self._claimed(change["handle"], sentence, context, speaker)
            return Told(kind=how, speaker=by, text=text, **base)
        text = self._move(term, kind, speaker, change["handle"])
        return Told(kind=kind, speaker=speaker, text=text, **base)

    # --- words ------------------------------------------------------------------------------

    def _move(self, term: tuple, kind: str, speaker: str | None, handle: int) -> str:
        target = speech.target_of(term)
        about = self._about(target)
        if kind == "question":
            question = term[2]
            shown = (
                show(question[1])
                if speech.question_kind(question)
                in (
                    "pattern",
                    "yes-no",
                )
                else show(question)
            )
            return f"{speaker} asked: {shown}"
        if kind == "answer":
            whose = self._whose(target, "question")
            return f"{speaker} answered {whose} #{target} with {show(speech.answer_content(term))}"
        if kind == "justification":
            return f"{speaker} justified {about} with {show(term[2])}"
        if kind == "ballot":
            stance = "for" if term[0] is speech.VOTES_FOR else "against"
            return f"{speaker} voted {stance} {about}"
        if kind == "dispute":
            if target in self._defeated_now:  # its rebuttal won at once (a stronger side)
                self._disputed_now.add(target)
                return f"{speaker} disputed {about}, and its rebuttal defeats it"
            return f"{speaker} disputed {about}"
        if kind == "acceptance":
            answer = self._sentence(target)
            if answer is not None and speech.move_kind(parse(answer)) == "answer":
                answered = parse(answer)
                question = speech.target_of(answered)
                asker = self._speaker(question)
                if asker is not None and asker != speaker:
                    return _not_obeyed(speaker, "an acceptance of", f"answer #{target}", asker)
                return (
                    f"{speaker} accepted {speech.speaker(answered)}'s answer #{target} "
                    f"({show(speech.answer_content(answered))}) to question #{question}"
                    f"{self._because(handle)}"
                )
        if kind == "closing":
            asker = self._speaker(target)
            if asker is not None and asker != speaker:
                return _not_obeyed(speaker, "a closing of", f"question #{target}", asker)
            return (
                f"{speaker} closed {self._whose(target, 'question')} #{target}"
                f"{self._because(handle)}"
            )
        return f"{speaker} {_VERBS.get(kind, kind)} {about}"

    def _claimed(
        self, handle: int, sentence: str, context: str, owner: str | None
    ) -> tuple[str, str | None, str]:
        """(kind, who, words) for a claim, from what the store recorded of it: its
        creator (an agent's claim); else a rule's conclusion (`derivation`: whose rule,
        from what); else the principal whose token wrote it (an operator's write); else
        the agent whose own context holds it."""
        provenance = self._read("provenance", handle) or {}
        creator = provenance.get("creator")
        if isinstance(creator, str):
            return "claim", creator, f"{creator} claimed {sentence}"
        principal = provenance.get("principal")
        if isinstance(principal, str):
            return "claim", principal, f"{principal} wrote {sentence} in {context}"
        derived = self._derivation(handle)
        if derived is not None:
            rule, author, antecedents = derived
            whose = f", {author}'s," if author else ""
            since = ", ".join(f"#{h}" for h in antecedents)
            text = f"{sentence}: derived by rule #{rule}{whose} from {since or 'nothing'}"
            return "derivation", author, text
        who = owner or f"someone in {context}"
        return "claim", owner, f"{who} claimed {sentence}"

    def _derivation(self, handle: int) -> tuple[int, str | None, list[int]] | None:
        """(rule, its author, the antecedents) of a derived sentex's first justification;
        None for a premise (or when the store cannot say)."""
        tree = self._read("why", handle)
        if not isinstance(tree, dict) or tree.get("premise") or not tree.get("justifications"):
            return None
        first = tree["justifications"][0]
        rule = first["rule"]
        return rule, self._author(rule), [a["handle"] for a in first["antecedents"]]

    def _author(self, handle: int) -> str | None:
        """Who wrote the sentex `handle`: its speaker or its context's agent, else its
        recorded creator or principal."""
        known = self._speaker(handle)
        if known is not None:
            return known
        provenance = self._read("provenance", handle) or {}
        for field in ("creator", "principal"):
            if isinstance(provenance.get(field), str):
                return provenance[field]
        return None

    def _read(self, what: str, handle: int) -> Any:
        """`lookup.provenance(handle)` or `lookup.why(handle)`; None without a lookup or
        when the sentex is gone."""
        if self.lookup is None:
            return None
        try:
            return getattr(self.lookup, what)(handle)
        except KoiniiError:
            return None

    def _speaker(self, handle: int | None) -> str | None:
        """Who made the move `handle` (its context's agent for a plain claim), if known."""
        seen = self.seen_of(handle)
        if seen is None:
            return None
        return speech.speaker(parse(seen[0])) or self._owner(seen[1])

    def _removed(
        self,
        change: dict[str, Any],
        term: tuple,
        kind: str,
        speaker: str | None,
        base: dict[str, Any],
        gone: frozenset[int],
    ) -> Told:
        reason = change.get("reason")
        sentence = change["sentence"]
        if reason == "defeated":
            return Told(kind="defeat", speaker=speaker, text=self._defeat(change, term), **base)
        if reason == "retracted":
            what = show(speech.answer_content(term)) if kind == "answer" else sentence
            noun = "claim" if kind == "claim" else kind
            who = speaker or "its writer"  # a sentex stored with no author named
            target = base["target"]
            if target in gone:  # torn down with its target: not its speaker's doing
                by = self._speaker(target)
                withdrawn = f"which {by} withdrew" if by else "withdrawn"
                text = (
                    f"{who}'s {noun} #{change['handle']} went with #{target}, {withdrawn}: {what}"
                )
                return Told(
                    kind="withdrawal", speaker=speaker, text=text, **base | {"reason": TORN_DOWN}
                )
            ending, why = self._endings.get(change["handle"], ("withdrawn", None))
            if ending == "conceded":
                because = f', because "{why}"' if why else ""
                text = f"{who} conceded {noun} #{change['handle']}: {what}{because}"
                return Told(kind="concession", speaker=speaker, text=text, **base)
            verb = "replaced" if ending == "superseded" else "withdrew"  # by its next one
            text = f"{who} {verb} {noun} #{change['handle']}: {what}"
            return Told(kind="withdrawal", speaker=speaker, text=text, **base)
        why = f" ({reason})" if reason else ""
        return Told(kind="withdrawal", speaker=speaker, text=f"gone: {sentence}{why}", **base)

    def _defeat(self, change: dict[str, Any], term: tuple) -> str:
        """A believed sentex defeated: whose it was, and — for a dispute's rebuttal — the
        dispute (by its move's handle) that lost with it."""
        handle, sentence = change["handle"], change["sentence"]
        who = speech.speaker(term) or self._owner(change["context"])
        dispute = self._dispute_of(term, change["context"], who)
        if dispute is not None:
            return (
                f"{who}'s dispute #{dispute} lost: its rebuttal #{handle} {sentence} "
                "is defeated, no longer believed"
            )
        whose = f"{who}'s " if who else ""
        return f"{whose}#{handle} {sentence} is defeated, no longer believed"

    def _dispute_of(self, term: tuple, context: str, who: str | None) -> int | None:
        """The dispute move whose rebuttal `term` is (`who`'s, in `context`), if any."""
        if who is None or term[0] is not speech.NOT or len(term) != 2:
            return None
        negated = show(term[1])
        for handle, (sentence, ctx) in list(self.seen.items()):
            if ctx != context or not sentence.startswith(f"({speech.DISPUTES.name} {who} "):
                continue
            target = self._sentence(speech.target_of(parse(sentence)))
            if target == negated:
                return handle
        if self.lookup is None:
            return None
        try:
            found = self.lookup.sentexes_matching(f"({speech.DISPUTES.name} {who} ?t)", context)
        except KoiniiError:
            return None
        for move in found:
            if move.context == context and self._sentence(speech.target_of(move.sentence)) == (
                negated
            ):
                return move.handle
        return None

    def _about(self, target: int | None) -> str:
        if target is None:
            return ""
        sentence = self._sentence(target)
        whose = self._whose(target, "claim")
        return f"{whose} #{target} {sentence}".strip() if sentence else f"#{target}"

    def _whose(self, target: int | None, noun: str) -> str:
        if target is None or self.me is None:
            return noun
        seen = self.seen_of(target)
        if seen is None:
            return noun
        who = speech.speaker(parse(seen[0])) or self._owner(seen[1])
        return f"your {noun}" if who == self.me else noun

    # --- memory -------------------------------------------------------------------------------

    def _remember(self, change: dict[str, Any]) -> None:
        self.seen[change["handle"]] = (change["sentence"], change["context"])
        term = parse(change["sentence"])
        if term[0] is Sym("agentContext") and len(term) == 3:
            self.owners[term[1].name] = term[2].name

    def _folded(self, changes: list[dict[str, Any]]) -> frozenset[str]:
        """The claims these answers carry and these disputes' rebuttals: told (or
        untold) with their move."""
        folded: set[str] = set()
        for change in changes:
            term = parse(change["sentence"])
            claim = speech.carried_claim(term)
            if claim is not None:
                folded.add(show(claim))
            if speech.move_kind(term) == "dispute":
                target = self._sentence(speech.target_of(term))
                if target is not None:
                    folded.add(show(speech.negation(parse(target))))
        return frozenset(folded)

    def _because(self, handle: int) -> str:
        """`, because "…"` for a decision its asker gave a reason for (moves.accept,
        moves.close keep it in the decision's provenance): one read while it stands, else
        from the record of its replacement or withdrawal (koinii.channel.history)."""
        if self.lookup is None:
            return ""
        try:
            provenance = self.lookup.provenance(handle)
        except KoiniiError:  # (a client: gone)
            provenance = None
        if provenance is None:
            try:
                found = history.record_of(self.lookup, handle)
            except KoiniiError:
                return ""
            provenance = (found[1].get("provenance") if found else None) or {}
        reason = provenance.get("reason")
        return f', because "{reason}"' if isinstance(reason, str) else ""

    def _sentence(self, handle: int | None) -> str | None:
        seen = self.seen_of(handle)
        return None if seen is None else seen[0]

    def seen_of(self, handle: int | None) -> tuple[str, str] | None:
        """(sentence, context) of a handle: remembered from the log, else read once."""
        if handle is None:
            return None
        if handle not in self.seen and self.lookup is not None:
            try:
                found = self.lookup.sentex(handle)
            except KoiniiError:
                found = None
            if found is not None:
                self.seen[handle] = (found.text, found.context)
        return self.seen.get(handle)

    def _owner(self, context: str) -> str | None:
        """The agent whose own context this is (from the marks seen, else one read)."""
        if context not in self.owners:
            agents: list[str] = []
            if self.lookup is not None:
                try:
                    found = self.lookup.query(f"(agentContext {context} ?agent)", context)
                except KoiniiError:
                    found = []
                agents = [b["?agent"].name for b in found if type(b["?agent"]) is Sym]
            self.owners[context] = agents[0] if agents else None
        return self.owners[context]
