"""An arbiter's ruling: the upheld side, asserted `monotonic` in the arbiter's own context
and lifted under the channel, defeats the default side; `why` and `who_ruled` explain it;
retracting it reopens the dispute (docs/disputes.md).

Invariants:
- A ruling is ONE edit: the lift, the upheld sentence (creator = arbiter, provenance
  tagged with the disputes it settles), the withdrawal of the arbiter's superseded
  rulings on the dispute and the clearing of its marks. A refused ruling changes nothing.
- One standing ruling per arbiter per dispute: a new ruling withdraws the old one, so two
  monotonic rulings never clash.
- Provenance merges first-writer-wins per field, so a tag is never rewritten: a ruling
  carries `adjudication` = `{dispute, at}` for the first dispute it settled and
  `adjudication#2`, `adjudication#3`… for each further dispute the same sentex settles.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from koinii import disputes, identity
from koinii.disputes.adjudication import Clock, content_key, now_ms
from koinii.errors import Refused
from koinii.kb import Sentex
from koinii.speech import negation
from koinii.terms import Sym, Var, is_ground, parse, show

__all__ = [
    "TAG",
    "rule",
    "rule_with_changes",
    "ruling_info",
    "rulings_on",
    "standing_rulings",
    "who_ruled",
]

TAG = "adjudication"
_NOT = Sym("not")


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
    handle, _withdrawn, _changed = rule_with_changes(
        kb, arbiter, dispute_id, upheld, channel, clock
    )
    return handle


def rule_with_changes(
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
