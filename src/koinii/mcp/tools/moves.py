"""The MCP tools that make moves: each one `agent.move(...)` call (one HTTP exchange), its
reply what the move wrote, with a note in words."""

from __future__ import annotations

from typing import Any

from koinii.errors import Refused
from koinii.mcp.replies import Handle, Stance, move_reply, term_or_text
from koinii.mcp.surface import Register, Surface


def register(tool: Register, the: Surface) -> None:
    """The moves: claim, ask, answer, endorse, justify, dispute, vote, withdraw, accept, close."""
    agent, channel = the.agent, the.channel

    @tool
    def claim(sentence: str) -> dict[str, Any]:
        """State a claim in your own context; everyone on the channel sees it.

        Use it for what you know or have found; to ask, use `ask`; to answer a question,
        use `answer` (its claim is made for you).
        Example: claim(sentence="(usesDatabase ProdCluster PostgreSQL16)")
        Returns {handle, sentence, note}: reply to it, or withdraw it, by its handle.
        """
        made = agent.move("claim", sentence=sentence)
        return move_reply(made, f"claimed in {agent.context}; {channel} sees it")

    @tool
    def ask(question: str) -> dict[str, Any]:
        """Ask the channel a question. Three kinds:
        - a pattern with ?variables (which value?):
        ask(question="(postgresMajorVersion ProdCluster ?v)")
        - a yes/no question, asked as the sentence itself:
        ask(question="(readyToShip BillingRelease)")
        - free text: ask(question="Who owns the deploy runbook?")
        Returns {handle, sentence, note}; answers name the question by its handle, and
        wait_for_changes() tells you when they arrive.
        """
        made = agent.move("ask", question=term_or_text(question))
        handle = made["handle"]
        return move_reply(made, f"asked a {made['kind']} question; answers will name #{handle}")

    @tool
    def answer(
        question: Handle, content: str | None = None, bindings: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Answer the question with handle `question`. Your answer is a claim of yours.
        - a pattern: answer(question=69, bindings={"?v": "16"}); with one ?variable also
        content="16"; or the instance, content="(postgresMajorVersion ProdCluster 16)"
        - yes/no: answer(question=70, content="true") (or "false", the sentence, its negation)
        - free text: answer(question=71, content="Dana owns it")
        A new answer replaces your earlier one to the same question.
        Returns {handle, sentence, claim, note}.
        """
        if (content is None) == (bindings is None):
            raise Refused(
                "bad-option",
                "answer takes content or bindings, exactly one of them",
                {"option": "content"},
            )
        given: Any = bindings if bindings is not None else term_or_text(content or "")
        made = agent.move("answer", question=question, content=given)
        return move_reply(made, f"answered question #{question}", "claim")

    @tool
    def endorse(target: Handle) -> dict[str, Any]:
        """Stand behind a claim or an answer (by its handle) — agreement, on the record.
        Example: endorse(target=73). Returns {handle, sentence, note}."""
        return move_reply(agent.move("endorse", target=target), f"endorsed #{target}")

    @tool
    def justify(target: Handle, ground: str) -> dict[str, Any]:
        """Give a reason for a claim or an answer: `ground` is a term naming the reason.
        Example: justify(target=73, ground="ReleaseNotesSayPg16"), or free text as
        ground='"the release notes say so"'.
        Returns {handle, sentence, note}."""
        made = agent.move("justify", target=target, ground=term_or_text(ground))
        return move_reply(made, f"justified #{target}")

    @tool
    def dispute(target: Handle) -> dict[str, Any]:
        """Challenge another agent's claim or answer: states its negation as your claim
        (the rebuttal) and records the dispute, so the disagreement is visible and can be
        voted on and ruled. Not for replies (endorsements, ballots…): the error says what
        to do instead. Example: dispute(target=73).
        Returns {handle, sentence, rebuttal, note}: rebuttal is your negation's handle."""
        made = agent.move("dispute", target=target)
        return move_reply(made, f"disputed #{target}", "rebuttal")

    @tool
    def vote(target: Handle, stance: Stance) -> dict[str, Any]:
        """Vote for or against a claim or an answer (for a dispute: on the disputed claim).
        One ballot per target: voting the other way replaces your earlier ballot.
        Example: vote(target=73, stance="against"). Returns {handle, sentence, note}."""
        made = agent.move("vote", target=target, stance=stance)
        return move_reply(made, f"voted {stance} #{target}")

    @tool
    def withdraw(handle: Handle) -> dict[str, Any]:
        """Take back one of your own moves; replies to it go with it (an answer takes its
        claim along, a dispute its negation). Only your own moves. The history is kept:
        the move, who withdrew it and when, and the disputes and ballots it carried stay
        in the record (thread(handle) reads it). If you were wrong, concede(target,
        reason) says so in one move instead.
        Example: withdraw(handle=73). Returns {withdrawn, removed, note}."""
        made = agent.move("withdraw", handle=handle)
        removed = made["removed_sentexes"]
        return {
            "withdrawn": handle,
            "removed": removed,
            "note": f"withdrew #{handle} and {removed - 1} sentence(s) on it",
        }

    @tool
    def concede(target: Handle, reason: str) -> dict[str, Any]:
        """Give up your own claim or answer because you now think it wrong, saying why —
        ONE move for what would otherwise take four (endorse the winner, vote, justify,
        withdraw). Your claim is withdrawn with its replies, the disputes on it end as
        "conceded", and the record keeps it all with your reason: thread(target) and
        disputes(state="conceded") show it to everyone, later arrivals included.
        Example: concede(target=73, reason="the prod config says 800, not 500").
        Returns {withdrawn, removed, record, seq, note}: seq is the concession's point in
        the log (as_of(seq=seq - 1) shows the channel just before it)."""
        made = agent.concede(target, reason)
        removed = made["removed_sentexes"]
        return {
            "withdrawn": made["withdrawn"],
            "removed": removed,
            "record": made["record"],
            "seq": made["seq"],
            "note": f"conceded #{made['withdrawn']}; {removed - 1} sentence(s) on it went "
            "with it, and the record keeps them with your reason",
        }

    @tool
    def accept(answer: Handle, reason: str | None = None) -> dict[str, Any]:
        """As the asker: accept an answer to your question, and say why (the reason is
        kept with the decision: the thread and everyone's feed show it); the question is
        settled. Example: accept(answer=74, reason="matches the pool config in prod").
        Returns {handle, sentence, note}."""
        made = agent.move("accept", answer=answer, reason=reason)
        return move_reply(made, f"accepted answer #{answer}")

    @tool
    def close(question: Handle, reason: str | None = None) -> dict[str, Any]:
        """As the asker: close your question without an answer, and say why (kept with
        the decision); withdraw the closing to reopen it.
        Example: close(question=69, reason="moot: the service was retired").
        Returns {handle, sentence, note}."""
        made = agent.move("close", question=question, reason=reason)
        return move_reply(made, f"closed question #{question}")
