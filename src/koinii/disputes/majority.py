"""Ballots and the majority: the ballots cast by their voters are counted and the side
with strictly more is ruled by `AgentMajority`, through the same reversible ruling as an
arbiter's (`koinii.disputes.rulings`); a tie rules nothing. A ballot its voter did not
cast (derived by a rule, stored outside the voter's own context, or written by another
principal) never counts and never vetoes: it is listed as `ignored`.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Any

from koinii import disputes, identity
from koinii.disputes.adjudication import Clock, now_ms
from koinii.disputes.rulings import rule_with_changes, standing_rulings
from koinii.errors import Refused
from koinii.kb import Sentex
from koinii.speech import STANCES, negation
from koinii.terms import Sym, Var, show

__all__ = [
    "MAJORITY_ARBITER",
    "ballots",
    "cast_ballot",
    "cast_by_voter",
    "resolve_by_majority",
    "stance_predicate",
    "tally",
]

MAJORITY_ARBITER = "AgentMajority"
"""Who rules a counted vote: the house majority, so `who_ruled` tells a vote from a decree."""

_HANDLE = Sym("sentexHandle")


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


def ballots(kb: Any, target: int, seen: Container[str] | None = None) -> list[dict[str, Any]]:
    """Every believed ballot on `target`, anywhere, by voter: `{handle, voter, stance,
    counted}` — `counted` is `cast_by_voter`, and, counted at a channel (`seen`: the
    contexts it sees), cast in a context the channel sees: a member's. A ballot of an agent
    that never joined the channel counted in its tally, so any agent could swing any
    channel's majority (issue 37)."""
    found = []
    for stance, predicate in STANCES.items():
        for sentex in kb.sentexes_matching((predicate, Var("voter"), (_HANDLE, target)), "?ctx"):
            voter = sentex.sentence[1]
            found.append(
                {
                    "handle": sentex.handle,
                    "voter": voter.name if type(voter) is Sym else show(voter),
                    "stance": stance,
                    "counted": cast_by_voter(sentex) and (seen is None or sentex.context in seen),
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


def tally(kb: Any, target: int, seen: Container[str] | None = None) -> dict[str, int]:
    """`{"for": n, "against": m}`: DISTINCT voters on each side, counting only the
    ballots cast by their voters (at a channel, by its members: `ballots`); a voter on
    both sides has spoiled the ballot and counts for neither, so confusion abstains."""
    return _count(ballots(kb, target, seen))


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
    cast = ballots(kb, target, kb.context_up(channel.name if type(channel) is Sym else channel))
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
    ruling, withdrawn, changed = rule_with_changes(
        kb, MAJORITY_ARBITER, key, sentence, channel, clock
    )
    return {
        **counts,
        "outcome": outcome,
        "ruling": ruling,
        "withdrawn": withdrawn,
        "changed": changed,
        "ignored": ignored,
    }
