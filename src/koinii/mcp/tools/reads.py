"""The MCP tools that read the conversation and the store: thread, questions, disputes,
channels, why_not, query, search, vocabulary — each one read, its list in a window."""

from __future__ import annotations

from typing import Any

from koinii.mcp.replies import (
    NOT_CLAIMED,
    DisputeState,
    Handle,
    QuestionState,
    listed,
    newest,
    window_of,
)
from koinii.mcp.surface import Register, Surface
from koinii.operations import invoker
from koinii.terms import show


def register(tool: Register, the: Surface) -> None:
    """The conversation's reads and the store's."""
    agent, channel = the.agent, the.channel

    @tool
    def thread(handle: Handle, limit: int = 20, before: int | None = None) -> dict[str, Any]:
        """Everything said about a question or claim, in one read: for a question its state
        (open, answered, contested, settled, closed) and its newest `limit` answers, each
        with its claim, endorsements, justifications, disputes, ballots, tally and rulings.
        The history too: `withdrawn_answers`, `withdrawn_acceptances` (the asker's earlier
        decisions, each with its reason) and a claim's `withdrawn` replies (a ballot its
        voter changed among them) are the moves taken back or replaced, each with
        `withdrawn` {ending, by, seq, at, reason} and the disputes and ballots it
        carried; a withdrawn handle reads as its record (never unknown); the
        acceptance's or closing's reason is shown.
        Example: thread(handle=69). Returns that object, and `older` when the question has
        more answers: thread(handle=69, before=older) shows the ones before."""
        found = agent.thread(handle, limit=window_of(limit), before=before)
        if before is not None and found.get("answer_count") and not found.get("answers"):
            found["note"] = (
                f"no answers before #{before}: leave before out for the newest, or pass "
                "the `older` a thread gave"
            )
        return found

    @tool
    def questions(
        state: QuestionState = "unsettled", limit: int = 50, before: int | None = None
    ) -> dict[str, Any]:
        """The channel's questions with their state and answer count, oldest first: the
        newest `limit` of them. Default: the unsettled ones (open, answered or contested).
        Example: questions() or questions(state="all"). Returns {questions, count}, and
        `older` when there are more: questions(before=older) lists the ones before."""
        window = window_of(limit)
        found = agent.queries(state, limit=window + 1, before=before)
        found, older = newest(found, window, "handle")
        return listed("questions", found, f"no {state} questions on {channel}", **older)

    @tool
    def disputes(
        state: DisputeState = "all", limit: int = 20, before: list[int] | None = None
    ) -> dict[str, Any]:
        """The channel's disputes, standing and ended: each one's sides, who raised it, its
        class (contradiction, conflict, or values: differing values given to a one-value
        question, or to a predicate the channel declares single-valued — with `values`,
        who gave which, and `declared`, the declaration), its state (open, notified,
        stale, resolved, ended), its `ending` (ruled, withdrawn, conceded, superseded —
        kept in the history after the claim is gone), the tally on its target and any
        ruling — the last `limit` of them, in the order of their dispute_id. state=
        filters by a state or an ending.
        Example: disputes(state="open"). Returns {disputes, count}, and `older` when there
        are more: disputes(before=older) lists the ones before."""
        window = window_of(limit)
        found = agent.disputes(None if state == "all" else state, limit=window + 1, before=before)
        found, older = newest(found, window, "dispute_id")
        none = f"no {'' if state == 'all' else state + ' '}disputes"
        return listed("disputes", found, none, **older)

    @tool
    def channels() -> dict[str, Any]:
        """The channels on this store — the contexts agents joined — each with its
        members: where to find another team, or whom a channel holds.
        Example: channels(). Returns {channels, count}: each {name, members}."""
        found = invoker(agent.store)("conversation.channels")
        return listed("channels", found, "no channels: no agent has joined one")

    @tool
    def why_not(handle: Handle, context: str | None = None) -> dict[str, Any]:
        """Why a claim (or any sentence) is not believed, and what defeats it: `reason`
        is retracted, defeated, unsupported, excepted, not-visible (at `context`) or
        not-stored (null when it is believed); a defeated claim names each sentence that
        defeats it (a ruling, an arbiter's or an operator's monotonic claim) with its
        handle, context, strength and author — whom to ask. Example: why_not(handle=69)
        or why_not(handle=69, context="CxTeam"). Returns {handle, context, believed,
        reason, defeated_by}."""
        return invoker(agent.store)("belief.why_not", handle=handle, context=context)

    @tool
    def roster() -> dict[str, Any]:
        """Who is on the channel: each member's agent id, role, session and coordinator's
        session — the session_id your coordinator runs, which is the parent_session_id
        to give wrap_session — and the channel's active coordinators.
        Example: roster(). Returns {channel, members, coordinators, count}."""
        found = agent.roster()
        return {**found, "count": len(found["members"])}

    @tool
    def as_of(
        seq: int | None = None, time_ms: int | None = None, handle: int | None = None
    ) -> dict[str, Any]:
        """The channel as it stood at a point of the log — the history, read back: a log
        seq (every change and move reply carries one) or an epoch-ms time. With a handle,
        that thread then; else the questions (all states) and disputes then — answers
        since withdrawn or replaced included, and a claim a later ruling defeated shown
        believed, as it was.
        Example: as_of(seq=120) or as_of(seq=120, handle=69).
        Returns {seq, thread} or {seq, questions, disputes}."""
        if handle is not None:
            return {"seq": seq, "thread": agent.thread(handle, as_of=seq, as_of_ms=time_ms)}
        return {
            "seq": seq,
            "questions": agent.questions(as_of=seq, as_of_ms=time_ms),
            "disputes": agent.disputes(as_of=seq, as_of_ms=time_ms),
        }

    @tool
    def query(goal: str, context: str | None = None, limit: int = 50) -> dict[str, Any]:
        """What the channel (or `context`) currently holds: each way to bind the goal's
        ?variables — the first `limit` found (at most 100), sorted.
        Example: query(goal="(usesDatabase ?cluster ?db)").
        Returns {solutions, count}, and `more` when there are others: then bind more of
        the goal's ?variables. A goal without variables that holds gives one empty
        solution and says so."""
        window = window_of(limit)
        found = agent.query(goal, context or channel, limit=window + 1)
        more = {}
        if len(found) > window:  # (one more than asked: there are others)
            found = found[:window]
            more = {
                "more": True,
                "note": f"the first {window} solutions found, and there are more: bind more "
                "of the goal's ?variables to narrow it",
            }
        solutions = [{name: show(value) for name, value in s.items()} for s in found]
        out = listed(
            "solutions",
            solutions,
            f"no solutions: nothing {context or channel} sees matches",
            **more,
        )
        if solutions == [{}]:
            out["note"] = "true: the goal holds (it has no ?variables to bind)"
        return out

    @tool
    def search(text: str, limit: int = 10) -> dict[str, Any]:
        """Find what the team has said about something without knowing how it was
        written: ranked search over every claim, question, answer, ground and wrap note
        the channel sees. Symbols are searched by their words, so "postgres version"
        finds (postgresMajorVersion ProdCluster 16); any word may match, and where the
        server has semantic ranking a sentence close in meaning is found too ("which
        database" finds it). The best matches come first (keep their order). `limit`: 1
        to 100. Abbreviations, split or joined words ("roll back"/"rollback") and a
        longer word's typo are found too; an answer and its claim are one hit (the
        answer), placed before the question it answers. Example:
        search(text="postgres version"). Returns {hits, count}: each hit's handle,
        sentence, context, author (for an answer's claim, who answered), snippet (the
        matched words in [ ]) and matched ("words", "meaning", "words+meaning",
        "answer": the answer to a question that matched, or "linked": a fact about an
        entity the best hit names). Then thread(handle) shows what was said about a
        hit."""
        hits = [
            {
                "handle": h.sentex.handle,
                "sentence": h.sentex.text,
                "context": h.sentex.context,
                "author": h.author,
                "snippet": h.snippet,
                "matched": h.matched,
            }
            for h in agent.search(text, limit=limit)
        ]
        return listed(
            "hits",
            hits,
            f"nothing the channel sees matches {text!r}: try other words, or vocabulary() "
            "for the predicates in use",
        )

    @tool
    def vocabulary(limit: int = 50) -> dict[str, Any]:
        """The predicates in use on the channel, most used first (the first `limit`, at
        most 100), each with how many sentences use it and one example sentence — so you
        claim and ask in the words the team already uses instead of inventing a synonym.
        Example: vocabulary(). Returns {predicates, count}: each {predicate, count,
        example: {handle, sentence, context}}, and `more`: how many less used ones are
        not shown (search(text) finds those by their words)."""
        window = window_of(limit)
        found = [p for p in agent.vocabulary() if p["predicate"] not in NOT_CLAIMED]
        more = {"more": len(found) - window} if len(found) > window else {}
        return listed("predicates", found[:window], "nothing is said on the channel yet", **more)
