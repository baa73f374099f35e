"""An MCP server that lets an LLM agent (Claude Code, Cursor, any MCP client) be a Koinii
agent: join a channel, hold the conversation, wait for news, wrap and permeate sessions.

Built on the official `mcp` Python SDK (FastMCP) over stdio. The server is one joined
`Agent`: every tool is one call on it (or on the wraps / sessions layer), written for a
model to read — what it does, when to use it, an example call, what comes back.

Invariants:
- Every tool returns ONE JSON object (structured content, and the same JSON as text): a
  move's handle and what happened, or a read's result — a list always inside an object
  beside its `count`, and an empty result saying so in `note`.
- Every refusal comes back as a tool error whose text is `kind: message Fix: …` — the
  fix from `REFUSAL_FIXES`, in words a model can act on — with the refusal as data.
- `wait_for_changes` and `recent_changes` return a `cursor` that is the seq of the last
  change-log entry they looked at, so following it skips nothing and repeats nothing.
- The session tools (`read_session`, `get_session`, `list_sessions`) exist only when
  introspection is on (off by default, sessions.md §3); `--session` names the agent's
  own session, which they read by default and `--record` writes each tool call into.
- The server has a project (`--project`, else the git repository of its working
  directory: koinii/projects.py): `wrap_session` files under it unless told another.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import threading
import time
import typing
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import BeforeValidator, ValidationError

from koinii import speech
from koinii._version import __version__
from koinii.channel import Agent, join, local, wire
from koinii.errors import DEFAULT_FIX, KINDS, KoiniiError, Refused
from koinii.narrator import STRUCTURE, WRAP_NOTES, Narrator, Told
from koinii.projects import project_of
from koinii.terms import parse, show
from koinii.wraps.queue import GLOBAL as GLOBAL_PROJECT

__all__ = ["INSTRUCTIONS", "REFUSAL_FIXES", "build_server", "run"]

INSTRUCTIONS = """\
You are {agent} on the Koinii channel {channel}: a shared knowledge base where every
claim, question and reply is a sentence stored with its author. You write only your own
context; everyone on the channel sees your moves, and you see theirs.
Sentences are s-expressions: (usesDatabase ProdCluster PostgreSQL16); (not (ready X)).
Predicates lowerCamelCase, individuals CapitalCamelCase, strings in "double quotes",
?variables only in questions and queries.
- ask: a pattern with ?variables — ask("(usesDatabase ProdCluster ?db)") — or a yes/no
  question asked as the sentence itself — ask("(readyToShip BillingRelease)") — or free text.
- answer(question, bindings={{"?db": "PostgreSQL16"}}) or answer(question, content="true");
  an answer is a claim. claim() states one outright.
- Every move returns a handle (an integer); reply to a move by its handle. To disagree,
  dispute(handle); to weigh in, vote(handle, "for"|"against") — a new vote replaces
  yours; endorse/justify to support. withdraw(handle) takes back your own move.
- Wrong? concede(target, reason) gives up your own claim or answer in ONE move, saying
  why: it is withdrawn and the disputes on it end as "conceded". Decisions carry their
  reasons: accept(answer, reason) and close(question, reason).
- Nothing said is erased: the history is kept. A withdrawn or conceded move stays in
  the record with who took it back, when and why, and the disputes and ballots it
  carried: thread(handle) shows it (withdrawn_answers, withdrawn), disputes(state=
  "ended") lists ended disputes with their ending (ruled, withdrawn, conceded,
  superseded), and as_of(seq) shows the channel as it stood at a point of the log.
- A question asking for one value (one ?variable, or yes/no) is contested as soon as
  two answers differ, disputed or not; disputes() lists the differing values.
- thread(handle) shows a question or claim with everything said about it;
  questions() the open ones; disputes() what is contested and how it ended.
- roster() shows who is on the channel: each member's role, session and coordinator's
  session (where wrap_session files your wrap).
  Long lists come a window at a time: `older` in a reply means there are earlier ones
  (pass it as before=), `more` that there are more than shown (narrow the call).
- search(text) finds what the team said in any words ("postgres version" finds
  (postgresMajorVersion ProdCluster 16)); vocabulary() lists the predicates in use:
  claim and ask in those, rather than inventing a synonym.
- wait_for_changes() blocks until something concerns you (an answer to your question,
  a reply to your move, a ruling) — use it instead of polling or sleeping.
A refused call says `kind: message Fix: …`: do what the fix says and call again."""

SESSION_INSTRUCTIONS = """
Session tools: read_session() and get_session() read your own session by default —
read_session its last turns (turns=5), `older` paging back; list_sessions(search=...)
finds past ones."""

# What to do about each refusal a tool can return, in words a model can act on: the
# catalogue's fixes (koinii.errors.KINDS), where every kind has one.
REFUSAL_FIXES: dict[str, str] = {name: kind.fix for name, kind in KINDS.items()}
_DEFAULT_FIX = DEFAULT_FIX

About = Literal["mine", "channel", "questions"]
QuestionState = Literal["unsettled", "open", "answered", "contested", "settled", "closed", "all"]
DisputeState = Literal[
    "open",
    "notified",
    "stale",
    "resolved",
    "ended",
    "ruled",
    "withdrawn",
    "conceded",
    "superseded",
    "all",
]
Stance = Literal["for", "against"]


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):  # (JSON true would pass as 1, the first sentex)
        raise ValueError(f"a handle is the integer a move returned, not {str(value).lower()}")
    return value


# A move's handle: an integer, and not a boolean.
Handle = Annotated[int, BeforeValidator(_not_a_bool)]
MAX_WAIT_S = 120.0
MAX_TOLD = 100  # changes per reply; the cursor says where the next read starts
# Questions, disputes, solutions, predicates or sessions per reply: a long channel's whole
# list would fill a model's context; `older` says where the window before starts, `more`
# that there is more.
MAX_LISTED = 100
# The longest text a session read shows whole (read_session cuts the rest), and the
# most characters of JSON one read_session reply holds (it shows fewer turns to fit).
TEXT_SHOWN = 2_000
READ_SHOWN = 40_000


def refusal_text(error: KoiniiError) -> tuple[str, str, dict[str, Any]]:
    """(kind, `kind: message Fix: …`, data) for a refusal or a transport failure."""
    if isinstance(error, Refused):
        kind, message, data = error.kind, error.message, error.data
    else:
        kind, message, data = "unavailable", str(error), {}
    fix = REFUSAL_FIXES.get(kind, _DEFAULT_FIX)
    return kind, f"{kind}: {message.rstrip('.')}. Fix: {fix}", data


def _tool_error(error: KoiniiError) -> Any:
    from mcp.types import CallToolResult, TextContent

    kind, text, data = refusal_text(error)
    fix = REFUSAL_FIXES.get(kind, _DEFAULT_FIX)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structuredContent={"error": {"kind": kind, "message": text, "fix": fix, "data": data}},
        isError=True,
    )


# The tools' arguments that name a move by its handle: a wrong one is `bad-handle`.
_HANDLE_ARGUMENTS = frozenset({"handle", "target", "question", "answer"})


def _argument_refusal(tool: str, error: ValidationError) -> Refused:
    """The refusal of a call whose arguments do not fit the tool's schema (the SDK's
    validation error, in the words and shape of every other refusal)."""
    wrongs = []
    for found in error.errors():
        where = ".".join(str(part) for part in found["loc"])
        said = found["msg"].removeprefix("Input ").removeprefix("Value error, ")
        quiet = found["type"] in ("missing", "value_error")  # (these say what was given)
        given = "" if quiet else f", not {found.get('input')!r:.60}"
        wrongs.append(f"{where}: {said}{given}")
    first = str(error.errors()[0]["loc"][0])
    kind = "bad-handle" if first in _HANDLE_ARGUMENTS else "bad-option"
    return Refused(kind, f"{tool}: {'; '.join(wrongs)}", {"tool": tool, "option": first})


class _Server(FastMCP):
    """The SDK's server, with a call whose arguments do not fit a tool's schema refused
    as every other call is (`kind: message Fix: …`, with structured data), where the SDK
    answers with its validator's report; and introducing itself at Koinii's version,
    where the SDK gives its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mcp_server.version = __version__

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                return _tool_error(_argument_refusal(name, error.__cause__))
            raise


# Predicates no agent claims in: the store's plumbing, the moves (each has a tool), what
# a free-text answer claims, and a wrap's notes (wrap_session writes them).
_NOT_CLAIMED = frozenset(p.name for p in (*STRUCTURE, *speech.ACTS, speech.ANSWER_TO, *WRAP_NOTES))


def _listed(name: str, items: list[Any], empty: str, **extra: Any) -> dict[str, Any]:
    """A list as one object: the items, their count, and words when there are none."""
    out: dict[str, Any] = {name: items, "count": len(items), **extra}
    if not items:
        out["note"] = empty
    return out


def _window(limit: int) -> int:
    """How many items of a list one reply shows: `limit`, from 1 to MAX_LISTED."""
    return min(max(limit, 1), MAX_LISTED)


def _newest(found: list[dict], window: int, cursor: str) -> tuple[list[dict], dict]:
    """The newest `window` of `found` (read one more than shown, oldest first), and
    `{"older": …}` — the first shown item's `cursor` field — when there are older ones."""
    if len(found) <= window:
        return found, {}
    found = found[1:]
    return found, {"older": found[0][cursor]}


def _clipped(value: Any) -> Any:
    """`value` with every string past TEXT_SHOWN characters cut, saying how much more
    there was: one tool result or system prompt can be longer than a model's context."""
    if isinstance(value, str):
        if len(value) <= TEXT_SHOWN:
            return value
        return f"{value[:TEXT_SHOWN]}… [{len(value) - TEXT_SHOWN:,} more characters]"
    if isinstance(value, dict):
        return {key: _clipped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clipped(item) for item in value]
    return value


def _once(read: dict[str, Any]) -> dict[str, Any]:
    """A session read with each turn shown once, in `transcript.turns`: the session's
    turn list, the dialog and the forks' turn lists repeat what those hold, and a
    model's context pays for every copy."""
    session = {k: v for k, v in read["session"].items() if k != "turns"}
    forks = [{k: v for k, v in fork.items() if k != "turns"} for fork in read["session_forks"]]
    turns = (read["transcript"] or {}).get("turns", [])
    return {**read, "session": session, "session_forks": forks, "transcript": {"turns": turns}}


def _within_reply(read: dict[str, Any]) -> dict[str, Any]:
    """A session read cut, oldest turn first, to READ_SHOWN characters of JSON (one
    turn at least), `older` saying where the turns it left out end."""
    turns = read["transcript"]["turns"]
    while len(turns) > 1 and len(json.dumps(read)) > READ_SHOWN:
        gone = turns.pop(0)["id"]
        read["failures"] = [f for f in read["failures"] if f.get("turn_id") != gone]
        read["turn_retries"].pop(gone, None)
        read["older"] = turns[0]["position"]
    return read


def _term_or_text(value: str) -> str:
    """What a model typed, as the text of one term: itself where it reads as one (a
    sentence, a symbol, a number, a "quoted string"), else free text, quoted here — the
    channel reads a string as a term's text. Only what opens like a sentence, "(", and
    does not read as one is refused, as the sentence it was meant to be."""
    try:
        parse(value)
    except Refused:
        if value.lstrip().startswith("("):
            raise
        return show(value)
    return value


def _made(reply: dict[str, Any], note: str, *keep: str) -> dict[str, Any]:
    """A move's reply as the tool returns it: what it wrote, what it adds, and a note."""
    return {
        "handle": reply["handle"],
        "sentence": reply["sentence"],
        **{key: reply.get(key) for key in keep},
        "note": note,
    }


def build_server(
    agent_id: str,
    channel: str,
    *,
    url: str | None = None,
    token: str | None = None,
    db: str | None = None,
    introspection: bool = False,
    session: str | None = None,
    record: bool = False,
    project: str | None = None,
    directory: str | None = None,
):
    """The FastMCP server for one agent (joined now, so a bad channel fails at start).

    Its project — the `project_id` its wraps and its recorded session carry unless a
    call names one — is `project`, else the one `directory` (default: the server's
    working directory) belongs to, by the rule of koinii/projects.py."""
    from koinii.client import connect
    from koinii.kb import open_kb

    if url is not None:
        medium = wire(connect(url, token=token))
    else:
        medium = local(open_kb(db))
    agent: Agent = join(medium, channel, agent_id)
    store = agent.store
    if project is None:
        project = project_of(directory if directory is not None else os.getcwd())
    sessions = _Sessions(store, session, record, project) if (introspection or record) else None
    instructions = INSTRUCTIONS.format(agent=agent_id, channel=channel)
    if introspection:
        instructions += SESSION_INSTRUCTIONS
    server = _Server("koinii", instructions=instructions, log_level="WARNING")
    feed = _Feed(agent)

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register `fn` with its docstring dedented, refusals as tool errors, and each
        call recorded into the agent's session when --record is on."""
        name = fn.__name__
        description = inspect.cleandoc(fn.__doc__ or "")

        def record(arguments: dict[str, Any], result: Any, failed: bool) -> None:
            if sessions is not None and sessions.recording:
                sessions.record(name, arguments, result, failed)

        if inspect.iscoroutinefunction(fn):

            async def call_async(**arguments: Any) -> Any:
                try:
                    result = await fn(**arguments)
                except KoiniiError as error:
                    record(arguments, refusal_text(error)[1], True)
                    return _tool_error(error)
                record(arguments, result, False)
                return result

            call: Callable[..., Any] = call_async
        else:

            def call_sync(**arguments: Any) -> Any:
                try:
                    result = fn(**arguments)
                except KoiniiError as error:
                    record(arguments, refusal_text(error)[1], True)
                    return _tool_error(error)
                record(arguments, result, False)
                return result

            call = call_sync
        # resolved, validators and all: the SDK builds its schemas from them
        hints = typing.get_type_hints(fn, include_extras=True)
        signature = inspect.signature(fn)
        call.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[
                p.replace(annotation=hints.get(p.name, p.annotation))
                for p in signature.parameters.values()
            ],
            return_annotation=hints.get("return", signature.return_annotation),
        )
        call.__annotations__ = hints
        call.__name__ = name
        server.add_tool(call, name=name, description=description, structured_output=True)
        return fn

    # --- moves ----------------------------------------------------------------------------

    @tool
    def claim(sentence: str) -> dict[str, Any]:
        """State a claim in your own context; everyone on the channel sees it.

        Use it for what you know or have found; to ask, use `ask`; to answer a question,
        use `answer` (its claim is made for you).
        Example: claim(sentence="(usesDatabase ProdCluster PostgreSQL16)")
        Returns {handle, sentence, note}: reply to it, or withdraw it, by its handle.
        """
        made = agent.move("claim", sentence=sentence)
        return _made(made, f"claimed in {agent.context}; {channel} sees it")

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
        made = agent.move("ask", question=_term_or_text(question))
        handle = made["handle"]
        return _made(made, f"asked a {made['kind']} question; answers will name #{handle}")

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
        given: Any = bindings if bindings is not None else _term_or_text(content or "")
        made = agent.move("answer", question=question, content=given)
        return _made(made, f"answered question #{question}", "claim")

    @tool
    def endorse(target: Handle) -> dict[str, Any]:
        """Stand behind a claim or an answer (by its handle) — agreement, on the record.
        Example: endorse(target=73). Returns {handle, sentence, note}."""
        return _made(agent.move("endorse", target=target), f"endorsed #{target}")

    @tool
    def justify(target: Handle, ground: str) -> dict[str, Any]:
        """Give a reason for a claim or an answer: `ground` is a term naming the reason.
        Example: justify(target=73, ground="ReleaseNotesSayPg16"), or free text as
        ground='"the release notes say so"'.
        Returns {handle, sentence, note}."""
        made = agent.move("justify", target=target, ground=_term_or_text(ground))
        return _made(made, f"justified #{target}")

    @tool
    def dispute(target: Handle) -> dict[str, Any]:
        """Challenge another agent's claim or answer: states its negation as your claim
        (the rebuttal) and records the dispute, so the disagreement is visible and can be
        voted on and ruled. Not for replies (endorsements, ballots…): the error says what
        to do instead. Example: dispute(target=73).
        Returns {handle, sentence, rebuttal, note}: rebuttal is your negation's handle."""
        made = agent.move("dispute", target=target)
        return _made(made, f"disputed #{target}", "rebuttal")

    @tool
    def vote(target: Handle, stance: Stance) -> dict[str, Any]:
        """Vote for or against a claim or an answer (for a dispute: on the disputed claim).
        One ballot per target: voting the other way replaces your earlier ballot.
        Example: vote(target=73, stance="against"). Returns {handle, sentence, note}."""
        made = agent.move("vote", target=target, stance=stance)
        return _made(made, f"voted {stance} #{target}")

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
        return _made(made, f"accepted answer #{answer}")

    @tool
    def close(question: Handle, reason: str | None = None) -> dict[str, Any]:
        """As the asker: close your question without an answer, and say why (kept with
        the decision); withdraw the closing to reopen it.
        Example: close(question=69, reason="moot: the service was retired").
        Returns {handle, sentence, note}."""
        made = agent.move("close", question=question, reason=reason)
        return _made(made, f"closed question #{question}")

    # --- reads ------------------------------------------------------------------------------

    @tool
    def thread(handle: Handle, limit: int = 20, before: int | None = None) -> dict[str, Any]:
        """Everything said about a question or claim, in one read: for a question its state
        (open, answered, contested, settled, closed) and its newest `limit` answers, each
        with its claim, endorsements, justifications, disputes, ballots, tally and rulings.
        The history too: `withdrawn_answers` (and a claim's `withdrawn` replies) are the
        moves taken back, each with `withdrawn` {ending, by, seq, at, reason} and the
        disputes and ballots it carried; a withdrawn handle reads as its record (never
        unknown); the acceptance's or closing's reason is shown.
        Example: thread(handle=69). Returns that object, and `older` when the question has
        more answers: thread(handle=69, before=older) shows the ones before."""
        found = agent.thread(handle, limit=_window(limit), before=before)
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
        window = _window(limit)
        found = agent.queries(state, limit=window + 1, before=before)
        found, older = _newest(found, window, "handle")
        return _listed("questions", found, f"no {state} questions on {channel}", **older)

    @tool
    def disputes(
        state: DisputeState = "all", limit: int = 20, before: list[int] | None = None
    ) -> dict[str, Any]:
        """The channel's disputes, standing and ended: each one's sides, who raised it, its
        class (contradiction, conflict, or values: two answers giving differing values to
        a one-value question), its state (open, notified, stale, resolved, ended), its
        `ending` (ruled, withdrawn, conceded, superseded — kept in the history after the
        claim is gone), the tally on its target and any ruling — the last `limit` of
        them, in the order of their dispute_id. state= filters by a state or an ending.
        Example: disputes(state="open"). Returns {disputes, count}, and `older` when there
        are more: disputes(before=older) lists the ones before."""
        window = _window(limit)
        found = agent.disputes(None if state == "all" else state, limit=window + 1, before=before)
        found, older = _newest(found, window, "dispute_id")
        none = f"no {'' if state == 'all' else state + ' '}disputes"
        return _listed("disputes", found, none, **older)

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
        that thread then; else the questions (all states) and disputes then.
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
        window = _window(limit)
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
        out = _listed(
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
        to 100. Example: search(text="postgres version"). Returns {hits, count}: each
        hit's handle, sentence, context, author, snippet (the matched words in [ ]) and
        matched ("words", "meaning" or "words+meaning"). Then thread(handle) shows what
        was said about a hit."""
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
        return _listed(
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
        window = _window(limit)
        found = [p for p in agent.vocabulary() if p["predicate"] not in _NOT_CLAIMED]
        more = {"more": len(found) - window} if len(found) > window else {}
        return _listed("predicates", found[:window], "nothing is said on the channel yet", **more)

    @tool
    def recent_changes(since: int = 0, limit: int = 100) -> dict[str, Any]:
        """What happened after change-log position `since`, told in words, oldest first.
        Pass the returned `cursor` as `since` next time: nothing is skipped or repeated.
        Example: recent_changes(since=0). Returns {changes, count, cursor}.
        To wait for news instead of polling, use wait_for_changes."""
        told, cursor = feed.read(since, min(max(limit, 1), MAX_TOLD), about=None)
        return _listed("changes", told, "nothing changed after that cursor", cursor=cursor)

    @tool
    async def wait_for_changes(
        since: int | None = None, timeout_s: float = 20, about: About = "mine"
    ) -> dict[str, Any]:
        """Wait until something happens that concerns you, then return it — instead of
        sleeping and polling. `about`:
        - "mine" (default): answers to your questions, replies to your moves, rulings on your claims
        - "channel": any move on the channel
        - "questions": new or reopened questions
        `since`: a cursor from a previous reply (omit it to go on from the last one).
        `timeout_s`: at most 120 seconds; a longer wait stops at 120 and says so.
        Returns {changes, count, cursor}; after `timeout_s` with nothing, count is 0.
        Example: wait_for_changes(timeout_s=30)."""
        import anyio

        if not math.isfinite(timeout_s):
            raise Refused(
                "bad-option",
                f"timeout_s is a number of seconds, e.g. 30, not {timeout_s}",
                {"option": "timeout_s"},
            )
        seconds = min(max(float(timeout_s), 0.0), MAX_WAIT_S)
        told, cursor = await anyio.to_thread.run_sync(lambda: feed.wait(since, seconds, about))
        quiet = {
            "mine": "nothing that concerns you",
            "channel": "nothing on the channel",
            "questions": "no new questions",
        }[about]
        capped = (
            f" (asked {float(timeout_s):g} s: a wait stops at {MAX_WAIT_S:g} s; call again)"
            if timeout_s > MAX_WAIT_S
            else ""
        )
        return _listed("changes", told, f"{quiet} within {seconds:g} s{capped}", cursor=cursor)

    # --- wraps --------------------------------------------------------------------------------

    @tool
    def wrap_session(
        session_id: str,
        parent_session_id: str | None = None,
        notes: list[str] | None = None,
        decisions: list[str] | None = None,
        conventions: list[str] | None = None,
        project_id: str | None = None,
    ) -> dict[str, Any]:
        """At the end of your session: record your notes, decisions and conventions and
        file a wrap for the coordinator that spawned you (`parent_session_id`: its
        session). A top-level coordinator leaves parent_session_id out to wrap its own.
        project_id defaults to this server's project (its --project, or the git
        repository it runs in, e.g. shop:services:checkout).
        Example: wrap_session(session_id="s-42", parent_session_id="s-lead",
        notes=["Prod runs PostgreSQL 16"]). Returns the wrap."""
        from koinii.wraps import wrap_session as wrap

        return wrap(
            agent,
            session_id=session_id,
            parent_session_id=parent_session_id,
            project_id=project_id if project_id is not None else project,
            notes=notes or (),
            decisions=decisions or (),
            conventions=conventions or (),
        )

    @tool
    def permeate(session_id: str | None = None) -> dict[str, Any]:
        """As a coordinator: collect the unprocessed wraps filed into your session (the
        parent_session_id your workers gave), mark them processed, and return what your
        workers recorded. Your first permeate makes that session yours — you coordinate
        one session, and no other agent can take its wraps; your own --session by
        default. Example: permeate(session_id="s-lead"). Returns {processed, wraps,
        entries, …}."""
        from koinii.wraps import Coordinators
        from koinii.wraps import permeate as collect

        registry = Coordinators(store)
        held = registry.get(agent_id)
        held = held["session_id"] if held and held["status"] == "active" else None
        session_id = session_id or held or session
        if session_id is None:
            raise Refused(
                "bad-option",
                "permeate needs your coordinator session: permeate(session_id=...) with the "
                "parent_session_id your workers' wraps name",
                {"option": "session_id"},
            )
        if held is not None and session_id != held:
            raise Refused(
                "koinii/not-your-session",
                f"you coordinate session {held!r} (your first permeate made it yours), not "
                f"{session_id!r}: permeate(session_id={held!r}) collects your workers' wraps; "
                "another session's are its own coordinator's",
                {"session_id": session_id, "yours": held},
            )
        holder = None
        try:  # (again for the session it holds: a heartbeat)
            registry.register(agent_id, project_id=project or GLOBAL_PROJECT, session_id=session_id)
        except Refused as refusal:
            if refusal.kind != "bad-coordinator" or "holder" not in refusal.data:
                raise
            holder = refusal.data["holder"]
        result = collect(agent, session_id=session_id)
        entries = [
            {"handle": s.handle, "sentence": s.text, "context": s.context}
            for s in result["entries"]
        ]
        out = {**result, "entries": entries}
        if holder is not None:
            out["note"] = (
                f"session {session_id} belongs to coordinator {holder}: its wraps are left for it"
            )
        elif not result["processed"]:
            out["note"] = "no unprocessed wraps"
        return out

    if introspection:
        assert sessions is not None
        reads = sessions.reads

        @tool
        def read_session(
            target: str | None = None, turns: int = 5, before: int | None = None
        ) -> dict[str, Any]:
            """One session — your own by default: its last `turns` turns (at most 100;
            each of your tool calls is a turn), each once, in transcript.turns, with their
            failures, and the whole session's summaries (current turn, diagnosis, usage).
            A text longer than 2,000 characters is cut, saying how much more there was,
            and a reply past 40,000 characters shows fewer turns.
            Example: read_session(turns=3). Returns that object, and `older` when there are
            earlier turns: read_session(turns=3, before=older) reads the ones before."""
            if before is not None and before < 1:
                raise Refused(
                    "bad-option",
                    "before is a turn's position, a positive integer: pass the `older` "
                    "a read_session reply gave",
                    {"option": "before"},
                )
            window = _window(turns)
            found = reads.read_session(sessions.target(target), turns=window, before=before)
            if found["session"] is None:
                none = (
                    "no session matches that target: list_sessions() shows them"
                    if target is not None
                    else "you have no session of your own (start koinii mcp with --session ID "
                    "or --record); name one as target"
                )
                return {**found, "note": none}
            return _within_reply(_clipped(_once(found)))

        @tool
        def get_session(target: str | None = None) -> dict[str, Any]:
            """One session's descriptor — your own by default: id, title, turn count, model.
            Example: get_session(target="3f2a"). Returns {session} (null when none matches)."""
            found = reads.get_session(sessions.target(target))
            return {"session": found, **({} if found else {"note": "no such session"})}

        @tool
        def list_sessions(search: str | None = None, limit: int = 20) -> dict[str, Any]:
            """Past sessions, newest first — the first `limit` (at most 100); with
            `search`, ranked by where the words appear (title, request, reply, thinking,
            tool results) and, where the server ranks by meaning, by closeness in meaning
            too (is_by_meaning) — keep the order given.
            Example: list_sessions(search="flaky test"). Returns {sessions, count}, and
            `more` when there are others (search narrows them)."""
            sessions.flush()
            window = _window(limit)
            found = reads.list_sessions(search, limit=window + 1)
            more = {"more": True} if len(found) > window else {}
            empty = "no sessions match" if search else "no sessions"
            return _listed("sessions", found[:window], empty, **more)

    # what `run` calls when the server ends: the recorded tool calls still buffered
    server.koinii_flush = sessions.flush if sessions is not None else lambda: None
    return server


class _Feed:
    """The change log as this agent follows it: told in words, filtered by `about`."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.store = agent.store
        self.narrator = Narrator(self.store, me=agent.agent)
        self.cursor: int | None = None  # the last cursor returned, for `since` left out
        self._view: frozenset[str] | None = None
        self._lock = threading.Lock()

    def read(self, since: int, limit: int, about: str | None) -> tuple[list[dict], int]:
        """What the log holds after `since` (no wait), up to `limit` told changes."""
        told, cursor = self._collect(since, limit, about, wait_ms=0)
        with self._lock:
            self.cursor = cursor
        return told, cursor

    def wait(self, since: int | None, seconds: float, about: str) -> tuple[list[dict], int]:
        """Long-poll the log until a change concerns the agent, or `seconds` pass. The
        lock is not held while it waits: the agent's other calls go on meanwhile."""
        with self._lock:
            cursor = since if since is not None else self.cursor
        if cursor is None:
            cursor = self.store.seq
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            wait_ms = max(0, min(30_000, int(left * 1000)))
            told, cursor = self._collect(cursor, MAX_TOLD, about, wait_ms=wait_ms)
            if told or left <= 0:
                with self._lock:
                    self.cursor = cursor
                return told, cursor

    def _collect(
        self, since: int, limit: int, about: str | None, wait_ms: int
    ) -> tuple[list[dict], int]:
        reply = self.store.changes(since=since, limit=1000, wait_ms=wait_ms)
        if reply["too_old"]:
            since = reply["floor"]
            reply = self.store.changes(since=since, limit=1000)
        if since > reply["seq"]:
            raise Refused(
                "bad-cursor",
                f"since={since} is past the end of the change log (its last position is "
                f"{reply['seq']}): pass the cursor a reply gave, or leave since out",
                {"since": since, "seq": reply["seq"]},
            )
        cursor = since
        told: list[dict] = []
        with self._lock:  # (the narrator and the view are this agent's, one call at a time)
            for entry in reply["entries"]:
                added_and_removed = entry["added"] + entry["removed"]
                if any(c["sentence"].startswith("(genlCx ") for c in added_and_removed):
                    self._view = None  # the hierarchy changed: so may what the channel sees
                for one in self.narrator.entry(entry):
                    if about is None or self._concerns(one, about):
                        told.append(one.to_dict())
                cursor = entry["seq"]
                if len(told) >= limit:
                    break
        return told, cursor

    def _concerns(self, told: Told, about: str) -> bool:
        me = self.agent.agent
        own = told.context == self.agent.context
        if told.added and (told.speaker == me or own):
            return False  # your own moves are no news to you
        if not told.added and told.reason == "retracted" and own:
            return False
        if about == "questions":  # asked, or reopened (its closing withdrawn)
            return told.move == "question" if told.added else told.move == "closing"
        if about == "channel":
            return told.kind != "structure" and told.context in self.view()
        # mine: replies to my moves, rulings on what I claimed, my claims defeated
        if not told.added and own:
            return True
        if told.target is not None:
            return told.target_context == self.agent.context
        if told.kind == "ruling":
            term = parse(told.sentence)
            for sentence in (term, speech.negation(term)):
                if self.store.sentexes_matching(sentence, self.agent.context):
                    return True
        return False

    def view(self) -> frozenset[str]:
        if self._view is None:
            self._view = frozenset(self.store.context_up(self.agent.channel))
        return self._view


class _Sessions:
    """The agent's own session: the default target of the session tools, and where
    `--record` writes each tool call as a turn — through a `SessionRecorder`, so the
    calls are written in batches (sessions.md, "Recording in batches"): a session read
    and the server's end flush what is buffered.

    `--session NAME --record` starts the session NAME names when none does yet (issue
    39): a lead names its session before it starts, so its workers can file their wraps
    into it from the first minute. The name becomes the session's id where it is one (a
    lowercase UUID, such as a runtime's own session id), else its external id — either
    way the name resolves to it afterwards (reading.py `resolve`). It is written at once,
    not batched: others look it up by name as soon as the server is up."""

    def __init__(self, store: Any, session: str | None, record: bool, project: str | None) -> None:
        from koinii.sessions import Introspection, SessionStore

        self.store = SessionStore(store)
        self.recording = record
        self.recorder = self.store.recorder() if record else None
        if session is None and record:
            session = self.recorder.start_session(
                channel="mcp", title="an agent's tool calls", project_id=project
            )
        elif session is not None:
            found = self._named(session)
            if found is None and record:
                found = self._start_named(session, project)
            if found is None:
                raise Refused(
                    "koinii/no-session",
                    f"there is no session {session!r} to read: give the id of a stored "
                    "session, add --record to start one by that name, or leave --session out",
                    {"session": session},
                )
            session = found
        self.session = session
        self.reads = Introspection(self.store, current_session_id=session, enabled=True)

    def _named(self, name: str) -> str | None:
        """The id of the session `name` names (an id, a prefix, an external id), if any."""
        found = self.store.call("get_session", target=name)
        return found["id"] if found else None

    def _start_named(self, name: str, project: str | None) -> str | None:
        """Start the session `name` names; the id it has (another server started with
        the same name a moment before wins, and this one records into that one)."""
        try:
            as_id = str(uuid.UUID(name)) == name
        except ValueError:
            as_id = False
        named = {"id": name} if as_id else {"external_id": name}
        try:
            return self.store.call(
                "start_session", channel="mcp", title=name, project_id=project, **named
            )
        except Refused:
            found = self._named(name)
            if found is None:
                raise
            return found

    def target(self, target: str | None) -> str | None:
        """The session a read names (the agent's own by default), with what is recorded
        so far written first: a read sees every call before it."""
        self.flush()
        return target if target is not None else self.session

    def flush(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()

    def record(self, tool: str, arguments: dict[str, Any], result: Any, failed: bool) -> None:
        if self.session is None or self.recorder is None:
            return
        request = f"{tool}({json.dumps(arguments, default=str)})"
        turn = self.recorder.start_turn(self.session, request)
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        if failed:
            self.recorder.finish_turn(turn, "error", "error", error=text[:4000])
        else:
            self.recorder.finish_turn(turn, "done", "complete", answer=text[:4000])


def run(agent_id: str, channel: str, **options: Any) -> None:
    """Serve over stdio until the client closes the pipe; then write what `--record`
    has buffered."""
    server = build_server(agent_id, channel, **options)
    try:
        server.run(transport="stdio")
    finally:
        server.koinii_flush()
