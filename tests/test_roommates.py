"""The roommates: should the apartment adopt a dog? (upstream-scenarios §9)

House rules derive the proposal from one roommate's facts and its negation from
another's, so the dispute is emergent: nobody asserted either side. The roommates argue
with speech acts, one goes offline and catches up, they vote, and the majority rules.

Run as a script, this file is one roommate's process: it joins the apartment over the
daemon with its own agent token, then makes the moves its conductor sends on stdin (one
JSON object a line) and answers each on stdout. The wire test conducts three of them.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import koinii
from koinii import Refused, disputes, identity
from koinii.channel import agent as channel
from koinii.channel import catchup
from koinii.disputes import adjudication, majority, rulings

APARTMENT = "CxApartment"
PROPOSAL = "(shouldAdopt Apartment Dog)"
REJECTION = "(not (shouldAdopt Apartment Dog))"
HOUSE_RULES = """
(implies (wants_companionship ?p) (wouldEnjoy ?p Dog))
(implies (and (memberOf ?p Apartment) (wouldEnjoy ?p Dog)) (shouldAdopt Apartment Dog))
(implies (allergicTo ?p DogDander) (harmedBy ?p Dog))
(implies (and (memberOf ?p Apartment) (harmedBy ?p Dog)) (not (shouldAdopt Apartment Dog)))
"""
HEARD = "(answers ?who ?content ?query)"  # what a roommate keeps up with: the answers


def verify(claimed_id, credential, claims):
    return credential == "sig:" + claimed_id


def vote(kb, agent, stance, target):
    """An attested ballot, cast in process by a proof-tier principal."""
    principal = identity.authenticate(
        {"claimed_id": agent, "credential": "sig:" + agent}, policy="proof-tier", verify=verify
    )
    return majority.cast_ballot(kb, principal, stance, target)


def handle_of(store, sentence, ctx=APARTMENT):
    [sentex] = store.sentexes_matching(sentence, ctx)
    return sentex.handle


def the_dispute(store):
    [entry] = disputes.disputes_in(store, APARTMENT)
    return entry["dispute_id"]


@pytest.fixture
def house(kb):
    """The apartment with its rules, and Ava, Ben and Ciel joined to it (in process)."""
    kb.load_text(HOUSE_RULES, APARTMENT)
    medium = channel.local(kb)
    return kb, {a: channel.join(medium, APARTMENT, f"Agent{a}") for a in ("Ava", "Ben", "Ciel")}


# --- in process --------------------------------------------------------------------------------


def test_house_rules_derive_an_emergent_dispute_and_the_majority_settles_it(house):
    kb, roommates = house
    roommates["Ava"].assert_("(memberOf AgentAva Apartment)")
    roommates["Ava"].assert_("(wants_companionship AgentAva)")
    roommates["Ben"].assert_("(memberOf AgentBen Apartment)")
    roommates["Ben"].assert_("(allergicTo AgentBen DogDander)")
    assert kb.query(PROPOSAL, APARTMENT) == [{}] and kb.query(REJECTION, APARTMENT) == [{}]
    assert kb.sentexes_matching(REJECTION, "CxBen") == []  # Ben never said it
    assert disputes.is_disputed(kb, PROPOSAL, APARTMENT)
    assert kb.argue(PROPOSAL, APARTMENT) == "contradiction"
    proposal, rejection = handle_of(kb, PROPOSAL), handle_of(kb, REJECTION)
    assert kb.sentex(proposal).derived and kb.sentex(rejection).derived
    key = the_dispute(kb)

    vote(kb, "AgentAva", "for", proposal)
    vote(kb, "AgentBen", "against", proposal)
    tie = majority.resolve_by_majority(kb, key, proposal, APARTMENT)
    assert (tie["outcome"], tie["ruling"]) == ("tie", None)
    assert disputes.is_disputed(kb, PROPOSAL, APARTMENT)

    vote(kb, "AgentCiel", "for", proposal)
    won = majority.resolve_by_majority(kb, key, proposal, APARTMENT)
    assert won["outcome"] == "for"
    assert not disputes.is_disputed(kb, PROPOSAL, APARTMENT)
    assert kb.argue(PROPOSAL, APARTMENT) == "true"
    assert kb.query("(allergicTo AgentBen DogDander)", "CxBen") == [{}]
    assert kb.sentex(rejection) is not None and kb.why_not(rejection) == "defeated"
    kb.retract(won["ruling"])
    assert disputes.is_disputed(kb, PROPOSAL, APARTMENT)


def test_a_tie_breaker_settles_an_argued_proposal(house):
    kb, roommates = house
    ava, ben = roommates["Ava"], roommates["Ben"]
    proposal = ava.assert_(PROPOSAL)
    ava.justify("GoodForExercise", proposal)
    ben.dispute(proposal)
    ben.justify("Allergy", proposal)
    key = the_dispute(kb)
    vote(kb, "AgentAva", "for", proposal)
    vote(kb, "AgentBen", "against", proposal)
    tie = majority.resolve_by_majority(kb, key, proposal, APARTMENT)
    assert (tie["for"], tie["against"], tie["outcome"], tie["ruling"]) == (1, 1, "tie", None)
    assert disputes.is_disputed(kb, PROPOSAL, APARTMENT) and kb.believed(proposal)
    vote(kb, "AgentCiel", "for", proposal)
    won = majority.resolve_by_majority(kb, key, proposal, APARTMENT)
    assert (won["for"], won["against"], won["outcome"]) == (2, 1, "for")
    assert not disputes.is_disputed(kb, PROPOSAL, APARTMENT)
    assert kb.argue(PROPOSAL, APARTMENT) == "true"
    assert rulings.who_ruled(kb, won["ruling"])["arbiter"] == "AgentMajority"
    kb.retract(won["ruling"])
    assert disputes.is_disputed(kb, PROPOSAL, APARTMENT)


# --- over the wire: three roommate processes -----------------------------------------------------


class Roommate:
    """A roommate's process (this file run as a script), driven line by line."""

    def __init__(self, daemon, agent: str, state: Path) -> None:
        self.daemon, self.agent, self.state = daemon, agent, state
        state.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        args = [self.daemon.url, self.agent, self.daemon.tokens[self.agent], str(self.state)]
        self.log = open(self.state / "stderr.log", "a")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.replies), daemon=True).start()
        assert self._reply() == {"ready": self.agent}

    @staticmethod
    def _read(proc, replies) -> None:
        for line in proc.stdout:
            replies.put(json.loads(line))
        replies.put(None)

    def _reply(self):
        try:
            reply = self.replies.get(timeout=60)
        except queue.Empty:
            reply = None
        if reply is None:
            raise AssertionError(f"{self.agent} stopped: {(self.state / 'stderr.log').read_text()}")
        return reply

    def do(self, move: str, **args):
        self.proc.stdin.write(json.dumps({"move": move, "args": args}) + "\n")
        self.proc.stdin.flush()
        reply = self._reply()
        if not reply["ok"]:
            error = reply["error"]
            raise Refused(error["kind"], error["message"], error["data"])
        return reply["result"]

    def kill(self) -> None:
        """Gone without a goodbye: no unwatch, no final write."""
        self.proc.kill()
        self.proc.wait(10)
        self.log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def test_the_roommates_settle_it_by_majority_over_the_wire(start_daemon, tmp_path):
    daemon = start_daemon(
        principals={
            "AgentAva": "agent",
            "AgentBen": "agent",
            "AgentCiel": "agent",
            "Ops": "operator",
        }
    )
    house = daemon.client("Ops")  # the house: its rules, and the adjudicator
    house.load_text(HOUSE_RULES, APARTMENT)
    ava, ben, ciel = (
        Roommate(daemon, a, tmp_path / a) for a in ("AgentAva", "AgentBen", "AgentCiel")
    )
    try:
        # Ava's facts and the house rules derive the proposal; nobody asserts it
        ava.do("assert", sentence="(memberOf AgentAva Apartment)")
        ava.do("assert", sentence="(wants_companionship AgentAva)")
        proposal = handle_of(house, PROPOSAL)
        assert house.sentex(proposal).derived

        ava.do("justify", ground="GoodCompany", target=proposal)
        care = ciel.do("ask", question="WhoWouldCareForIt")
        ava.do("answer", content="AvaWalksAndFeeds", target=care)
        ciel.do("endorse", target=proposal)
        first = ben.do("catch_up")  # Ben starts keeping up: a bootstrap snapshot
        assert first == {
            "heard": [
                f"(answers AgentAva (quote (answerTo (sentexHandle {care}) AvaWalksAndFeeds)) "
                f"(sentexHandle {care}))"
            ],
            "snapshots": 1,
        }

        # Ben's facts derive the rejection: the dispute emerges from the rules
        ben.do("assert", sentence="(memberOf AgentBen Apartment)")
        ben.do("assert", sentence="(allergicTo AgentBen DogDander)")
        rejection = handle_of(house, REJECTION)
        assert house.sentex(rejection).derived
        assert house.sentexes_matching(REJECTION, "CxBen") == []
        assert disputes.is_disputed(house, PROPOSAL, APARTMENT)
        assert house.argue(PROPOSAL, APARTMENT) == "contradiction"
        key = the_dispute(house)
        assert key == tuple(sorted((proposal, rejection)))
        told = []
        adjudication.notify_disputes(house, APARTMENT, told.append)
        assert [e["dispute_id"] for e in told] == [key]

        ben.do("justify", ground="MyAllergy", target=rejection)
        breed = ciel.do("ask", question="CouldWeGetHypoallergenic")
        ava.do("assert", sentence="(hypoallergenic_breed Poodle)")
        ava.do("answer", content="PoodlesAreHypoallergenic", target=breed)
        ben.do("justify", ground="DanderStillSheds", target=rejection)
        assert disputes.is_disputed(house, PROPOSAL, APARTMENT)

        # one against one: the house stays open
        ava.do("vote", stance="for", target=proposal)
        ben.do("vote", stance="against", target=proposal)
        tie = majority.resolve_by_majority(house, key, proposal, APARTMENT)
        assert (tie["for"], tie["against"], tie["outcome"], tie["ruling"]) == (1, 1, "tie", None)
        assert disputes.dispute_state(house, key) == "notified"

        # Ben asks, then drops off the network mid-conversation
        when = ben.do("ask", question="WhenWouldWeGetIt")
        assert len(ben.do("catch_up")["heard"]) == 2
        ben.kill()
        ava.do("answer", content="ThisWeekendIfWeAgree", target=when)
        ciel.do("vote", stance="for", target=proposal)

        # Ben comes back: a new process, the same token and cursor file; it tails what it
        # missed from where it stopped, without re-reading the channel
        ben.start()
        caught = ben.do("catch_up")
        assert caught["snapshots"] == 0
        assert (
            f"(answers AgentAva (quote (answerTo (sentexHandle {when}) ThisWeekendIfWeAgree)) "
            f"(sentexHandle {when}))"
        ) in caught["heard"]
        assert len(caught["heard"]) == 3
        assert ben.do("tally", target=proposal) == {"for": 2, "against": 1}

        # two to one: the ballots were cast through the daemon, so they are attested
        ballots = house.sentexes_matching(f"(votesFor ?v (sentexHandle {proposal}))", "?ctx")
        ballots += house.sentexes_matching(f"(votesAgainst ?v (sentexHandle {proposal}))", "?ctx")
        assert sorted(identity.attested_by(house, b.handle) for b in ballots) == [
            "AgentAva",
            "AgentBen",
            "AgentCiel",
        ]
        won = majority.resolve_by_majority(house, key, proposal, APARTMENT)
        assert (won["for"], won["against"], won["outcome"]) == (2, 1, "for")
        assert rulings.who_ruled(house, won["ruling"])["arbiter"] == "AgentMajority"
        assert not disputes.is_disputed(house, PROPOSAL, APARTMENT)
        assert house.argue(PROPOSAL, APARTMENT) == "true"
        assert disputes.dispute_state(house, key) == "resolved"
        assert house.query("(allergicTo AgentBen DogDander)", "CxBen") == [{}]
        assert house.why_not(rejection) == "defeated"  # outvoted, not deleted

        def grounds(target):
            found = house.sentexes_matching(f"(justifies ?who ?g (sentexHandle {target}))", "?ctx")
            return {s.sentence[2].name for s in found}

        assert grounds(proposal) == {"GoodCompany"}
        assert grounds(rejection) == {"MyAllergy", "DanderStillSheds"}
        endorsers = house.sentexes_matching(f"(endorses ?who (sentexHandle {proposal}))", "?ctx")
        assert [channel.speaker_of(s) for s in endorsers] == ["AgentCiel"]

        # the ruling is a sentex like any other: retract it and the dispute is back, fresh
        house.retract(won["ruling"])
        assert disputes.is_disputed(house, PROPOSAL, APARTMENT)
        assert disputes.dispute_state(house, key) == "open"
    finally:
        for roommate in (ava, ben, ciel):
            roommate.stop()


# --- the roommate's process ---------------------------------------------------------------------


def roommate(url: str, agent: str, token: str, state: str) -> None:
    """Join the apartment as `agent` and make the moves read from stdin."""
    me = channel.join(channel.wire(koinii.connect(url, token=token)), APARTMENT, agent)
    view_file = Path(state) / "view.json"
    kept = json.loads(view_file.read_text()) if view_file.exists() else []
    cursor = catchup.FileCursorStore(Path(state) / "cursor.json")
    heard = catchup.open(me, HEARD, APARTMENT, cursor, initial_view=kept)

    def catch_up() -> dict:
        view = sorted(koinii.show(s) for s in catchup.sync(heard))
        view_file.write_text(json.dumps(view))  # the agent's own durable state
        return {"heard": view, "snapshots": heard.snapshots}

    moves = {
        "assert": lambda sentence: me.assert_(sentence),
        "justify": lambda ground, target: me.justify(ground, target),
        "ask": lambda question: me.pose_query(question),
        "answer": lambda content, target: me.answer(content, target),
        "endorse": lambda target: me.endorse(target),
        "vote": lambda stance, target: me.vote(stance, target),
        "tally": lambda target: majority.tally(me.store, target),
        "catch_up": catch_up,
    }
    print(json.dumps({"ready": agent}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"ok": True, "result": moves[request["move"]](**request["args"])}
        except Refused as refusal:
            reply = {"ok": False, "error": refusal.to_dict()}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    roommate(*sys.argv[1:5])
