"""Adjudication: what happens after agents disagree.

The dispute reads (`koinii.disputes`) say what is disputed; this module owns the policy
they leave out — the clock, the timeout, the sinks — and the ways a dispute ends.

- **Leave open and notify** (the default): `notify_disputes` marks each pending dispute
  notified and calls the sink once; `sweep_stale` marks the ones past the timeout stale.
  Neither changes belief. A dispute is never resolved by trust.
- **An arbiter's ruling** (`rule`): the upheld side, asserted `monotonic` in the
  arbiter's own context and lifted under the channel, defeats the default side; `why`
  and `who_ruled` explain it; retracting it reopens the dispute.
- **A majority** (`resolve_by_majority`): the ballots cast by their voters are counted
  and the side with strictly more is ruled by `AgentMajority`, through the same
  reversible ruling; a tie rules nothing. A ballot its voter did not cast (derived by a
  rule, stored outside the voter's own context, or written by another principal) never
  counts and never vetoes: it is listed as `ignored`.

Reasoning on a contested premise, and quarantine, are `koinii.disputes.quarantine`'s.

Invariants:
- A ruling is ONE edit: the lift, the upheld sentence (creator = arbiter, provenance
  tagged with the disputes it settles), the withdrawal of the arbiter's superseded
  rulings on the dispute and the clearing of its marks. A refused ruling changes nothing.
- One standing ruling per arbiter per dispute: a new ruling withdraws the old one, so two
  monotonic rulings never clash.
- Provenance merges first-writer-wins per field, so a tag is never rewritten: a ruling
  carries `adjudication` = `{dispute, at}` for the first dispute it settled and
  `adjudication#2`, `adjudication#3`… for each further dispute the same sentex settles.
- Results are ordered by content (numbers numerically), never by handle, so they do not
  depend on the order the knowledge arrived in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from koinii import disputes, identity
from koinii.errors import Refused
from koinii.kb import Sentex
from koinii.speech import STANCES, negation
from koinii.terms import Sym, Var, is_ground, parse, show

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "MAJORITY_ARBITER",
    "ballots",
    "cast_ballot",
    "cast_by_voter",
    "content_key",
    "notify_disputes",
    "now_ms",
    "opened_at",
    "poll",
    "resolve_by_majority",
    "rule",
    "ruling_info",
    "rulings_on",
    "stance_predicate",
    "standing_rulings",
    "sweep_stale",
    "tally",
    "who_ruled",
]

DEFAULT_TIMEOUT_MS = 86_400_000  # a day: long enough that a real disagreement is looked at
MAJORITY_ARBITER = "AgentMajority"
"""Who rules a counted vote: the house majority, so `who_ruled` tells a vote from a decree."""

TAG = "adjudication"
_NOT = Sym("not")
_HANDLE = Sym("sentexHandle")

Clock = Callable[[], int]
Sink = Callable[[dict[str, Any]], Any]


def now_ms() -> int:
    """The wall clock in epoch milliseconds (the engine stamps `created` the same way)."""
    return time.time_ns() // 1_000_000


# --- leave open and notify --------------------------------------------------------------------


def notify_disputes(
    kb: Any, ctx: Any, sink: Sink | None = None, *, clock: Clock = now_ms
) -> list[dict[str, Any]]:
    """Mark every pending dispute `ctx` observes notified, then call `sink(entry)`.

    Fires once per dispute: the stored mark is the deduplication, so a re-run (or another
    process running the same loop) does not push it again. The mark is written before the
    sink is called, so delivery is at most once; a sink that raises stops the run.
    Returns the disputes newly notified. Changes no belief.
    """
    pending = disputes.pending_disputes(kb, ctx)
    for entry in pending:
        disputes.mark_notified(kb, entry["dispute_id"], clock())
        if sink is not None:
            sink(entry)
    return pending


def sweep_stale(
    kb: Any,
    ctx: Any,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    sink: Sink | None = None,
    *,
    clock: Clock = now_ms,
) -> list[dict[str, Any]]:
    """Mark stale (`TimedOut`) every live dispute `ctx` observes that is older than
    `timeout_ms`, calling `sink(entry)` for each. Returns the disputes swept.

    One scan of the clashes per sweep; each dispute is then judged by its own mark and
    age (`opened_at`). A stale dispute is still live: nothing is resolved by age.
    """
    now = clock()
    swept = []
    for entry in disputes.disputes_in(kb, ctx):
        key = entry["dispute_id"]
        if disputes.is_stale(kb, key):
            continue
        opened = opened_at(kb, key)
        if opened is not None and now - opened <= timeout_ms:
            continue
        disputes.mark_stale(kb, key, now, "TimedOut")
        if sink is not None:
            sink(entry)
        swept.append(entry)
    return swept


def poll(
    kb: Any,
    ctx: Any,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    notify_sink: Sink | None = None,
    stale_sink: Sink | None = None,
    clock: Clock = now_ms,
) -> dict[str, list[dict[str, Any]]]:
    """One tick of the default policy: notify the new disputes, then sweep the old ones."""
    return {
        "notified": notify_disputes(kb, ctx, notify_sink, clock=clock),
        "stale": sweep_stale(kb, ctx, timeout_ms, stale_sink, clock=clock),
    }


def opened_at(kb: Any, key: Iterable[int]) -> int | None:
    """When the dispute arose: the latest `created` stamp across its sides AND everything
    they rest on (rules and premises), or None when nothing is stamped (infinitely old).

    A derived side is as new as the newest thing it rests on: a clash that two fresh
    premises produce through old rules is fresh, whatever the sides' own stamps say.
    """
    handles: set[int] = set()
    for side in disputes.dispute_id(key):
        tree = kb.why(side)
        if tree is not None:
            handles |= _rests_on(tree)
    stamps = []
    for handle in sorted(handles):
        provenance = kb.provenance(handle)
        created = provenance.get("created") if provenance else None
        if type(created) is int:
            stamps.append(created)
    return max(stamps) if stamps else None


def _rests_on(tree: dict[str, Any]) -> set[int]:
    """Every handle in a justification tree: the node, its rules and its antecedents."""
    found = {tree["handle"]}
    for justification in tree.get("justifications", ()):
        found.add(justification["rule"])
        for antecedent in justification["antecedents"]:
            found |= _rests_on(antecedent)
    return found


# --- an arbiter's ruling ----------------------------------------------------------------------


def rule(
    kb: Any,
    arbiter: str,
    dispute_id: Iterable[int],
    upheld: Any,
    channel: Any,
    *,
    clock: Clock = now_ms,
) -> int:
    """`arbiter` rules the dispute for `upheld` (one of its sides); returns the ruling.

    The ruling is `upheld`, monotonic, in the arbiter's own context, which is lifted under
    `channel` so the channel sees it; it defeats the default side it clashes with. It is
    one edit with the withdrawal of the arbiter's other rulings on the dispute and the
    clearing of the dispute's marks. Ruling the same side again changes nothing.

    Refused: a side believed in the arbiter's own context (`arbiter-is-party`: its ruling
    would restamp or retract its own claim), an `upheld` that is not ground (`not-ground`)
    or not a side (`koinii/not-a-side`), a side that is not stored
    (`koinii/no-such-handle`), a channel that is not one (`koinii/not-a-channel`).
    """
    handle, _withdrawn, _changed = _rule(kb, arbiter, dispute_id, upheld, channel, clock)
    return handle


def _rule(
    kb: Any, arbiter: str, dispute_id: Iterable[int], upheld: Any, channel: Any, clock: Clock
) -> tuple[int, list[int], bool]:
    key = disputes.dispute_id(dispute_id)
    sides = _sides(kb, key)
    term = parse(upheld) if isinstance(upheld, str) else upheld
    text = show(term)
    if not is_ground(term):
        raise Refused("not-ground", "a ruling upholds a ground sentence", {"sentence": text})
    side_texts = sorted({side.text for side in sides})
    if text not in side_texts:
        raise Refused(
            "koinii/not-a-side",
            f"{text} is not a side of dispute {list(key)}; a ruling upholds one of its sides",
            {"dispute_id": list(key), "upheld": text, "sides": side_texts},
        )
    own = identity.context_for(arbiter)
    party = _party_sides(kb, arbiter, own, key, sides)
    if party:
        raise Refused(
            "arbiter-is-party",
            f"{arbiter} holds a side of dispute {list(key)}: its ruling would restamp or "
            "retract its own claim instead of settling the clash",
            {"arbiter": arbiter, "dispute_id": list(key), "handles": party},
        )
    channel_name = channel.name if type(channel) is Sym else channel
    identity.check_channel_parent(kb, arbiter, channel_name)

    same = _stored(kb, term, own)
    standing = standing_rulings(kb, arbiter, key)
    withdrawn = [h for h in standing if same is None or h != same.handle]
    marks = disputes.marks_of(kb, key)
    tags = _tags(same.provenance) if same is not None else []
    tagged = any(key in _ids_of(value) for _, value in tags)
    if (
        same is not None
        and tagged
        and same.believed
        and same.strength == "monotonic"
        and not withdrawn
        and not marks
        and own in kb.context_up(channel_name)
    ):
        return same.handle, [], False

    options: dict[str, Any] = {"strength": "monotonic", "creator": arbiter}
    if not tagged:
        field = TAG if not tags else f"{TAG}#{max(index for index, _ in tags) + 1}"
        options["provenance"] = {field: {"dispute": list(key), "at": clock()}}
    lift: list[tuple[Any, str, dict[str, Any]]] = []
    identity.place_agent_context(
        lambda sentence, ctx, opts: lift.append((sentence, ctx, opts)),
        channel_name,
        arbiter,
        "CxSpeechActs",
    )
    edited = kb.edit(add=[*lift, (term, own, options)], remove=[*withdrawn, *marks])
    return edited.handles[-1], withdrawn, True


def who_ruled(kb: Any, handle: int) -> dict[str, Any] | None:
    """`{arbiter, dispute_ids, at}` of a ruling, or None for anything else (or nothing).

    `dispute_ids` lists every dispute the ruling settles (one sentex may settle several:
    the same side upheld against two opponents); `at` is when it first ruled.
    """
    provenance = kb.provenance(handle)
    return ruling_info(provenance) if provenance else None


def ruling_info(provenance: dict[str, Any]) -> dict[str, Any] | None:
    """`who_ruled` of a sentex whose provenance is at hand (no read)."""
    tags = _tags(provenance)
    if not tags:
        return None
    return {
        "arbiter": provenance.get("creator"),
        "dispute_ids": sorted({key for _, value in tags for key in _ids_of(value)}),
        "at": tags[0][1].get("at"),
    }


def rulings_on(kb: Any, claim: Sentex) -> list[dict[str, Any]]:
    """The standing rulings on a dispute `claim` is a side of: `{handle, sentence,
    arbiter, dispute_ids, at, upholds}` (`upholds`: the ruling is the claim itself, not
    its negation), by content. A ruling states one side, so it is found by the claim's
    text and its negation — no scan."""
    found = []
    for sentence, upholds in ((claim.sentence, True), (negation(claim.sentence), False)):
        for sentex in kb.sentexes_matching(sentence, "?ctx"):
            info = ruling_info(sentex.provenance)
            if info is None or not any(claim.handle in key for key in info["dispute_ids"]):
                continue
            found.append(
                {
                    "handle": sentex.handle,
                    "sentence": sentex.text,
                    "upholds": upholds,
                    "arbiter": info["arbiter"],
                    "dispute_ids": [list(key) for key in info["dispute_ids"]],
                    "at": info["at"],
                }
            )
    return sorted(found, key=lambda r: (r["sentence"], r["handle"]))


def standing_rulings(kb: Any, arbiter: str, dispute_id: Iterable[int]) -> list[int]:
    """The rulings `arbiter` holds on the dispute — believed ones only — by content."""
    key = disputes.dispute_id(dispute_id)
    own = identity.context_for(arbiter)
    found: dict[int, Any] = {}
    for pattern in _subject_patterns(kb, key):
        for sentex in kb.sentexes_matching(pattern, own):
            provenance = sentex.provenance
            if provenance.get("creator") == arbiter and any(
                key in _ids_of(value) for _, value in _tags(provenance)
            ):
                found[sentex.handle] = sentex
    return [s.handle for s in sorted(found.values(), key=lambda s: content_key(s.sentence))]


def _sides(kb: Any, key: tuple[int, ...]) -> list[Any]:
    sides = []
    for handle in key:
        sentex = kb.sentex(handle)
        if sentex is None:
            raise Refused(
                "koinii/no-such-handle",
                f"dispute {list(key)} names sentex {handle}, which is not stored",
                {"handle": handle, "dispute_id": list(key)},
            )
        sides.append(sentex)
    return sides


def _party_sides(
    kb: Any, arbiter: str, own: str, key: tuple[int, ...], sides: list[Any]
) -> list[int]:
    """The believed sentexes of a side's sentence that the arbiter's own context sees,
    other than its own rulings (which a new ruling may supersede)."""
    up = kb.context_up(own)
    party: set[int] = set()
    for text in sorted({side.text for side in sides}):
        for held in kb.sentexes_matching(text, "?ctx"):
            if held.context not in up or not kb.believed(held.handle, own):
                continue
            mine = held.context == own and held.provenance.get("creator") == arbiter
            if mine and _tags(held.provenance):
                continue
            party.add(held.handle)
    return sorted(party)


def _stored(kb: Any, term: Any, ctx: str) -> Any:
    """The sentex of `term` stored in `ctx`, believed or not (None if there is none)."""
    for sentex in kb.sentexes_matching(term, "CxEverything"):
        if sentex.context == ctx:
            return sentex
    return None


def _subject_patterns(kb: Any, key: tuple[int, ...]) -> list[tuple]:
    """`(p ?a1 … ?an)` and its negation for each predicate the dispute's sides use: a
    ruling upholds a side, so its sentence matches one of these."""
    patterns: dict[str, tuple] = {}
    for handle in key:
        sentex = kb.sentex(handle)
        if sentex is None:
            continue
        atom = sentex.sentence[1] if sentex.sentence[0] is _NOT else sentex.sentence
        pattern = (atom[0], *(Var(f"a{i}") for i in range(1, len(atom))))
        for literal in (pattern, (_NOT, pattern)):
            patterns.setdefault(show(literal), literal)
    return [patterns[text] for text in sorted(patterns)]


def _tags(provenance: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The adjudication tags of a provenance map, as (index, value), first tag first."""
    tags = []
    for field, value in provenance.items():
        if field == TAG:
            index = 1
        elif field.startswith(TAG + "#") and field[len(TAG) + 1 :].isdigit():
            index = int(field[len(TAG) + 1 :])
        else:
            continue
        if isinstance(value, dict) and isinstance(value.get("dispute"), list):
            tags.append((index, value))
    return sorted(tags, key=lambda tag: tag[0])


def _ids_of(value: dict[str, Any]) -> set[tuple[int, ...]]:
    try:
        return {disputes.dispute_id(value["dispute"])}
    except Refused:
        return set()


# --- ballots and the majority -----------------------------------------------------------------


def stance_predicate(stance: str) -> Sym:
    """The ballot predicate of a stance; any other stance is refused by name."""
    predicate = STANCES.get(stance) if isinstance(stance, str) else None
    if predicate is None:
        raise Refused(
            "koinii/no-such-stance",
            f"no stance {stance!r}; vote 'for' or 'against', e.g. vote(target=42, "
            "stance='against')",
            {"stance": str(stance), "known": list(STANCES)},
        )
    return predicate


def cast_ballot(kb: Any, principal: identity.Principal, stance: str, target: int) -> int:
    """The principal's ballot on the claim `target`, written through `identity.ingest` —
    so a minted proof-tier principal's ballot is attested. Returns its handle."""
    predicate = stance_predicate(stance)
    return identity.ingest(kb, principal, (predicate, Sym(principal.id), (_HANDLE, target)))


def cast_by_voter(sentex: Sentex) -> bool:
    """Did the voter a ballot names cast it? Only such ballots count.

    Cast means: asserted (a rule's conclusion is nobody's vote), in the voter's own
    context, with the voter as creator; and, where the writer was known — a principal
    an authenticated daemon recorded, or an attestation — known to be the voter. In one
    process without either, the cooperative policy trusts the creator, as it trusts
    every claimed id there.
    """
    voter = sentex.sentence[1] if len(sentex.sentence) > 1 else None
    if sentex.derived or type(voter) is not Sym:
        return False
    try:
        own = identity.context_for(voter.name)
    except Refused:
        return False
    provenance = sentex.provenance
    if sentex.context != own or provenance.get("creator") != voter.name:
        return False
    if provenance.get("principal") is not None:
        return provenance["principal"] == voter.name
    if provenance.get("attestation") is not None:
        return identity.attestor(sentex) == voter.name
    return True


def ballots(kb: Any, target: int) -> list[dict[str, Any]]:
    """Every believed ballot on `target`, anywhere, by voter: `{handle, voter, stance,
    counted}` — `counted` is `cast_by_voter`."""
    found = []
    for stance, predicate in STANCES.items():
        for sentex in kb.sentexes_matching((predicate, Var("voter"), (_HANDLE, target)), "?ctx"):
            voter = sentex.sentence[1]
            found.append(
                {
                    "handle": sentex.handle,
                    "voter": voter.name if type(voter) is Sym else show(voter),
                    "stance": stance,
                    "counted": cast_by_voter(sentex),
                }
            )
    return sorted(found, key=lambda b: (b["voter"], b["stance"], b["handle"]))


def _count(cast: list[dict[str, Any]]) -> dict[str, int]:
    voters: dict[str, set[str]] = {stance: set() for stance in STANCES}
    for ballot in cast:
        if ballot["counted"]:
            voters[ballot["stance"]].add(ballot["voter"])
    spoiled = voters["for"] & voters["against"]
    return {stance: len(names - spoiled) for stance, names in voters.items()}


def tally(kb: Any, target: int) -> dict[str, int]:
    """`{"for": n, "against": m}`: DISTINCT voters on each side, counting only the
    ballots cast by their voters; a voter on both sides has spoiled the ballot and
    counts for neither, so confusion abstains."""
    return _count(ballots(kb, target))


def resolve_by_majority(
    kb: Any, dispute_id: Iterable[int], target: int, channel: Any, *, clock: Clock = now_ms
) -> dict[str, Any]:
    """Count the ballots on `target` and rule the dispute by majority, as `AgentMajority`.

    More for: rule the claim; more against: rule its negation; a tie (or no ballot):
    withdraw the standing majority rulings and leave the dispute open. The count is the
    authority every time, so a changed majority withdraws the old ruling; an unchanged
    count changes nothing. Returns `{for, against, outcome, ruling, withdrawn, changed,
    ignored}`: `changed` says whether anything was written; `ignored` lists the ballots
    not cast by their voters (`cast_by_voter`), which never count and never veto.
    """
    key = disputes.dispute_id(dispute_id)
    claim = kb.sentex(target) if type(target) is int and target > 0 else None
    if claim is None:
        raise Refused(
            "koinii/no-such-handle",
            f"there is no claim {target} to count ballots on",
            {"handle": target},
        )
    cast = ballots(kb, target)
    ignored = sorted(b["handle"] for b in cast if not b["counted"])
    counts = _count(cast)
    if counts["for"] == counts["against"]:
        standing = standing_rulings(kb, MAJORITY_ARBITER, key)
        if standing:
            kb.edit(remove=standing)
        return {
            **counts,
            "outcome": "tie",
            "ruling": None,
            "withdrawn": standing,
            "changed": bool(standing),
            "ignored": ignored,
        }
    outcome = "for" if counts["for"] > counts["against"] else "against"
    sentence = claim.sentence if outcome == "for" else negation(claim.sentence)
    ruling, withdrawn, changed = _rule(kb, MAJORITY_ARBITER, key, sentence, channel, clock)
    return {
        **counts,
        "outcome": outcome,
        "ruling": ruling,
        "withdrawn": withdrawn,
        "changed": changed,
        "ignored": ignored,
    }


# --- content order ----------------------------------------------------------------------------

_RANK = {bool: 0, int: 1, float: 1, str: 2, Sym: 3, Var: 4, tuple: 5}


def content_key(term: Any) -> tuple:
    """A sort key that orders terms by content: numbers numerically (9 before 10)."""
    cls = type(term)
    if cls is tuple:
        return (5, tuple(content_key(x) for x in term))
    if cls is Sym or cls is Var:
        return (_RANK[cls], term.name)
    return (_RANK.get(cls, 6), term)
