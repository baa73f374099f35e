"""Every exception Koinii raises, and every refusal kind, in one place.

A refusal is not a crash: bad input gets a `Refused` with a stable `kind` (the string
callers and tests branch on), a message a person can act on, and `data` for programs.
The same kind crosses the wire unchanged. Storage and transport errors are translated
into these classes once, at their boundary.

Invariant: every kind raised anywhere in `src/` is in `KINDS`, once, with its HTTP status,
its fix (what an MCP refusal's `Fix:` tells a model) and a line saying when it happens
(tests/test_kinds.py checks it by reading every raise site). The daemon's status
(`status_of`), the MCP server's fix (`fix_of`) and the CLI's exit code (`exit_code_of`) are
read from it, so a new kind is one entry here and the three surfaces cannot drift apart.
docs/refusals.md is this table, rendered (`catalogue_markdown`).

One concept: what can go wrong, and what a caller does about it; the module is long because
the table is, every kind beside the others so that one reads what one adds.

Statuses: 400 a rule refused the input; 401 no valid token; 403 the caller has no authority
over what it named (another's context, move, session or speech, or a role's limit), whatever
the input's shape; 404, 405, 408, 413 and 500 the HTTP meanings; 503 the store may no longer
be this daemon's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_FIX",
    "KINDS",
    "Kind",
    "KoiniiError",
    "Refused",
    "Unavailable",
    "catalogue_markdown",
    "exit_code_of",
    "fix_of",
    "status_of",
]


class KoiniiError(Exception):
    """Base class of every error Koinii raises on purpose."""


# --- refusals: bad input or a rule said no; nothing was changed -------------------------


class Refused(KoiniiError):
    """The request was refused by a named rule; the store is unchanged.

    `kind` is stable (`parse`, `naming`, `koinii/speaker-mismatch`, ...: one of `KINDS`),
    `message` is for people, `data` (JSON-friendly) is for programs.
    """

    def __init__(self, kind: str, message: str, data: dict[str, Any] | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.data = dict(data) if data else {}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "data": self.data}

    def as_problem(self, where: str, index: int) -> dict[str, Any]:
        """This refusal as one problem of a dry run (`check_edit`): which list of the
        batch (`where`: "add" or "remove") and which entry of it."""
        return {"kind": self.kind, "message": self.message, "in": where, "index": index}

    def __reduce__(self):  # keep kind/message/data when pickled across processes
        return (type(self), (self.kind, self.message, self.data))


# --- transport: the daemon could not be reached or did not answer ----------------------


class Unavailable(KoiniiError):
    """The daemon could not be reached, or the connection failed mid-request."""


# --- the catalogue of refusal kinds ------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One refusal kind: what the daemon answers with it, what to do about it, and when."""

    name: str
    status: int  # the daemon's HTTP status for it
    doc: str  # when it happens, in one line
    fix: str  # what to do, in words a model can act on (the MCP refusal's `Fix:`)
    exit: int = 1  # the CLI's exit code (docs/cli.md: 1 refused, 3 unreachable)


# What a kind this catalogue does not know gets (a newer daemon's, say): a plain refusal.
DEFAULT_FIX = "read the message, correct the call, and try again"
_DEFAULT = Kind("", 400, "", DEFAULT_FIX)

_ASK_FOR_TOKEN = "ask whoever runs the daemon for a token that may do it"
_OPERATOR = "this is for whoever runs the daemon: the message says what to do"
_AGAIN = "the daemon did not answer: wait a moment and call again"

_CATALOGUE = (
    # --- terms and sentences (the engine's checks; docs/engine.md) --------------------------
    Kind(
        "parse",
        400,
        "the text is not a term (data: offset, and line and column in a text of several lines)",
        "write exactly one s-expression, e.g. (usesDatabase ProdCluster PostgreSQL16); "
        'put free text in "double quotes"',
    ),
    Kind(
        "unsupported-connective",
        400,
        "a KIF connective the engine does not implement (or, forall, exists, =>, <=>)",
        "the message says what to write instead; state each part as a claim of its own",
    ),
    Kind(
        "existential",
        400,
        "KIF's (exists (?x) S) as a statement or in a rule's conclusion: an individual "
        "asserted without a name",
        "name the individual and state the claim about it; in a rule, conclude about a "
        "function term of the rule's variables, e.g. (mother ?x (MotherFn ?x))",
    ),
    Kind(
        "nested-quantifier",
        400,
        "KIF's forall in a rule's antecedent, or forall / exists inside a sentence or a not",
        "restate it as a rule (=> conditions conclusion) without the quantifier: a rule's "
        "?variables are universal already",
    ),
    Kind(
        "variable-predicate",
        400,
        "a KIF sentence whose predicate is a ?variable, e.g. (?REL ?x ?y)",
        "write the rule once for each predicate it is meant for, naming the predicate",
    ),
    Kind(
        "row-variable",
        400,
        "a KIF row variable (@ROW), which stands for any number of arguments",
        "write the statement once for each number of arguments you need, with a ?variable for each",
    ),
    Kind(
        "shape",
        400,
        "past a size limit (nesting, bytes, digits, a batch), an empty list, or not a sentence",
        "write one sentence: a list whose first element is a predicate, e.g. "
        "(usesDatabase ProdCluster PostgreSQL16), within the size the message gives (say a long "
        "text in several shorter ones)",
    ),
    Kind(
        "naming",
        400,
        "a symbol in the wrong role: a functor, a context name, an agent id, genlCx arguments",
        "name predicates lowerCamelCase (usesDatabase), individuals CapitalCamelCase "
        '(ProdCluster), contexts Cx + CapitalCamelCase (CxTeam), and quote text ("like this")',
    ),
    Kind(
        "not-ground",
        400,
        "a variable in a fact (or in a ruling's side)",
        "a claim holds no ?variables; to ask which value holds, "
        'ask("(usesDatabase ProdCluster ?db)") instead',
    ),
    Kind(
        "not-well-formed",
        400,
        "a genlCx cycle, a misplaced reserved functor, a rule that concludes genlCx / except / "
        "implies, a singleValued declaration that names no predicate and argument",
        "state a plain sentence or (not sentence); the message names the part that is wrong",
    ),
    Kind(
        "koinii/underivable",
        400,
        "a rule (or an answer's claim) that would conclude what only the system writes: an "
        "ownership mark, a declaration, a registry row, a dispute's lifecycle mark",
        "claim it directly where you may, or let the move or the operator that owns it "
        "write it (the message says which)",
    ),
    Kind(
        "not-range-restricted",
        400,
        "a rule's consequent variable that no antecedent binds",
        "bind every variable of the rule's conclusion in one of its conditions",
    ),
    Kind(
        "arity",
        400,
        "a sentence against a believed (arity P N)",
        "give the predicate as many arguments as its declaration says",
    ),
    # --- handles, options and writes ------------------------------------------------------
    Kind(
        "unknown-handle",
        400,
        "(sentexHandle N), a retract or an edit's removal naming nothing stored (data.issued)",
        "name a handle that exists: thread(), questions() and recent_changes() show live ones",
    ),
    Kind(
        "bad-handle",
        400,
        "a handle that is not a positive 64-bit integer",
        "a handle is the positive integer a move returned, e.g. 42",
    ),
    Kind(
        "not-a-premise",
        400,
        "retracting a derived sentex",
        "retract what it rests on: why(handle) shows it",
    ),
    Kind(
        "vocabulary-read-only",
        400,
        "retracting a sentex of the shipped vocabulary",
        "mask it in your context instead: assert (except (sentexHandle N)) there",
    ),
    Kind(
        "reserved-provenance",
        400,
        "a writer setting creator, created or principal in provenance",
        "leave the field the message names out of provenance: Koinii sets it",
    ),
    Kind(
        "read-only-context",
        400,
        "writing to CxEverything or a variable context; a search or vocabulary read at a "
        "variable context",
        "name one real context, e.g. the channel",
    ),
    Kind(
        "unknown-option",
        400,
        "a write option or request field the operation does not take",
        "leave out the option the message names; it lists the ones there are",
    ),
    Kind(
        "bad-option",
        400,
        "an option or argument of the wrong type or out of range (data.option)",
        "give each argument the message names a value of the kind it says (where there are few "
        "accepted values, it lists them)",
    ),
    Kind(
        "bad-value",
        400,
        "a value no store holds the same on both backends: NaN, infinity, a lone surrogate, NUL",
        "write the value the message names differently (a finite number, text without NUL "
        "characters)",
    ),
    Kind(
        "closed",
        400,
        "a write or read on a closed knowledge base",
        "open the store again: this handle on it is closed",
    ),
    Kind(
        "group-open",
        400,
        "a second group commit, or an operation that cannot run inside an open one",
        "commit the open group first",
    ),
    Kind(
        "reentrant-write",
        400,
        "a write started (from a watcher, say) while another was in progress on this thread",
        "write after the write in progress returns, not from inside it",
    ),
    # --- bounded work ------------------------------------------------------------------------
    Kind(
        "budget-exhausted",
        400,
        "an operation past its time budget; a write is rolled back whole",
        "bind more of the goal (fewer ?variables) so it does less work",
    ),
    Kind(
        "derivation-limit",
        400,
        "a write whose rules chain too deep or derive too much",
        "the claim sets off too many rule conclusions: claim less at once",
    ),
    # --- reads and the feed ----------------------------------------------------------------
    Kind(
        "bad-cursor",
        400,
        "a since / cursor that is not a non-negative seq, or past the newest one",
        "pass the cursor the last reply gave as since, or leave since out",
    ),
    Kind(
        "too-old",
        400,
        "a replay from a seq the change log no longer holds (or too many writes back)",
        "read a fresh snapshot, then follow the changes from its seq",
    ),
    Kind(
        "not-watchable",
        400,
        "a watch on a context without a goal, on a conjunction, or with no callable",
        "watch one sentence pattern in one context",
    ),
    Kind(
        "bad-search",
        400,
        "a search text that is not a string, holds no letters or digits, or is too long",
        'search for a few words, e.g. search(text="postgres version")',
    ),
    Kind(
        "semantic-unavailable",
        400,
        "a hybrid search where koinii[semantic] is not installed",
        "search with ranking='lexical', or install koinii[semantic]",
    ),
    # --- stores ------------------------------------------------------------------------------
    Kind(
        "store-locked",
        400,
        "a second writer on the same store",
        "connect to the daemon that writes the store instead of opening it",
    ),
    Kind(
        "no-such-store",
        400,
        "opening, without creating, a store (or reading an export) that does not exist",
        "check the location the message names",
    ),
    Kind(
        "unregistered-records",
        400,
        "a migration's source holds a domain's records whose tables the process has not registered",
        "load the domains first (koinii.operations.load_domains(); the koinii command does)",
    ),
    Kind(
        "target-not-empty",
        400,
        "migrate into a store that holds one, or export / backup onto a file that exists",
        "name a new file, or remove the one there first",
    ),
    Kind(
        "koinii/no-such-backup",
        400,
        "fetch a part of a backup copy the daemon does not hold (a wrong id, fetched and "
        "deleted already, or left unfetched for an hour)",
        "start another copy with store.backup (`koinii backup FILE --url …`)",
    ),
    Kind(
        "not-an-export",
        400,
        "migrate from a file that is not a whole export (no header, cut short, counts differ)",
        "make a whole export with `koinii export` and migrate from that",
    ),
    Kind(
        "not-sentences",
        400,
        "`koinii load` of an export, whose sentences name sentexes by handle",
        "make a store of the export with `koinii migrate --from FILE`",
    ),
    Kind(
        "backup-by-pg-dump",
        400,
        "`koinii backup` of a PostgreSQL store: the message is the pg_dump command to use",
        "back up a PostgreSQL store with the pg_dump command the message gives",
    ),
    Kind(
        "store-error",
        400,
        "the store could not be opened, read or written (data.checked: a lost COMMIT reply "
        "whose write did not land)",
        "the store failed: the message says why; call again once it is fixed",
    ),
    Kind(
        "outcome-unknown",
        503,
        "a PostgreSQL COMMIT whose reply was lost and whose outcome could not be checked",
        "read the write back (by handle, or changes since the last seq) before sending it again",
    ),
    Kind(
        "writer-lost",
        503,
        "a PostgreSQL writer that lost its store and could not come back as the same writer",
        "the daemon lost its store: wait for it to be restarted, then call again",
    ),
    Kind(
        "checkpoint-unsupported",
        400,
        "checkpoint() on a store that keeps none (in memory, or opened without checkpoints)",
        "open the store with checkpoints on, or do without one",
    ),
    # --- the daemon's transport (docs/daemon.md) ---------------------------------------------
    Kind(
        "bad-request",
        400,
        "a body that is not a JSON object, or a field of the wrong type with no kind of its own",
        "send the operation's fields as one JSON object: GET /api lists them",
    ),
    Kind(
        "not-json",
        400,
        "a body that is not JSON encoded as UTF-8",
        "send the body as JSON encoded as UTF-8",
    ),
    Kind(
        "body-too-large",
        413,
        "a body over the daemon's limit for the operation",
        "send less at once: split the batch",
    ),
    Kind(
        "body-timeout",
        408,
        "a body that did not arrive within --body-timeout of its headers",
        "send the body whole, at once",
    ),
    Kind("not-found", 404, "no such route", "call an operation GET /api lists"),
    Kind(
        "method-not-allowed",
        405,
        "a route asked with a method it does not take (an operation with anything but POST)",
        "call the route with the method the Allow header names",
    ),
    Kind(
        "internal-error",
        500,
        "the daemon failed (it logs the traceback; the reply holds none)",
        "the daemon failed: its operator finds why in its log",
    ),
    Kind(
        "bad-host",
        403,
        "a Host header naming a host the daemon does not answer to",
        "call the daemon by a name it answers to (--allow-host)",
    ),
    Kind(
        "cross-origin",
        403,
        "a request from another origin (a browser page of another site)",
        "call the daemon from a program, or from its own pages",
    ),
    Kind(
        "cannot-listen",
        400,
        "the daemon cannot bind its address (another daemon on the port?)",
        "stop what holds the port, or give another --port",
    ),
    Kind(
        "batch-too-large",
        400,
        "an agent's edit (or its dry run) adding or removing more entries than the daemon "
        "takes from an agent at once",
        "send the entries in parts of at most the limit the message names",
    ),
    Kind(
        "cannot-write-port-file",
        400,
        "the daemon cannot write the port it bound to its --port-file",
        "give --port-file a path in a folder that exists and is writable",
    ),
    Kind(
        "too-many-subscriptions",
        400,
        "a watch past the caller's or the daemon's subscription quota",
        "unwatch a subscription you no longer poll, then watch again",
    ),
    Kind(
        "unknown-subscription",
        400,
        "a poll of a subscription never made, unwatched, or reaped after idling",
        "watch again and poll the new token",
    ),
    Kind(
        "introspection-off",
        400,
        "a session read where session introspection is off",
        "ask whoever runs the daemon to set KOINII_INTROSPECTION=1",
    ),
    # --- tokens and roles (docs/security.md) -------------------------------------------------
    Kind(
        "unauthorized",
        401,
        "a missing, wrong or malformed token (the same reply for all three)",
        "give the token `koinii token add` printed (KOINII_TOKEN or --token)",
    ),
    Kind(
        "forbidden",
        403,
        "a role's limit: a reader writing, an agent doing an operator's operation",
        "this token may not do that: ask whoever runs the daemon for an agent token",
    ),
    Kind("bad-role", 400, "a token role that is not one of the roles", _OPERATOR),
    Kind("bad-token-table", 400, "a token table file that cannot be read as one", _OPERATOR),
    Kind("no-token-table", 400, "`koinii serve --tokens` naming no file", _OPERATOR),
    # --- clients -------------------------------------------------------------------------
    Kind(
        "bad-url",
        400,
        "a daemon URL a client cannot call",
        "give the daemon as http://host:port, or http://host/path behind a proxy",
    ),
    Kind(
        "unavailable",
        503,
        "the daemon could not be reached (an `Unavailable`, not a `Refused`: named for the "
        "MCP server's and the CLI's sake)",
        _AGAIN,
        exit=3,
    ),
    # --- authority: who may write what (docs/security.md; all 403) ---------------------------
    Kind(
        "koinii/foreign-context",
        403,
        "an agent writing a context other than its own",
        "you write only your own context: claim() puts a claim there",
    ),
    Kind(
        "koinii/registry-forbidden",
        403,
        "a write to the registry context by anyone but a verified admin",
        _ASK_FOR_TOKEN,
    ),
    Kind(
        "koinii/admin-off-registry",
        403,
        "an admin writing a context other than the registry",
        "an admin writes the registry only: write other contexts with an agent's token",
    ),
    Kind(
        "koinii/foreign-sentex",
        403,
        "retracting or withdrawing a sentex another principal wrote",
        "withdraw only your own moves; to challenge another agent's, dispute(handle) it",
    ),
    Kind(
        "koinii/foreign-session",
        403,
        "an agent writing a session another principal started",
        "write only the sessions you started: start one of your own",
    ),
    Kind(
        "koinii/foreign-subscription",
        403,
        "polling or unwatching a subscription another principal opened",
        "watch for yourself and poll your own subscription",
    ),
    Kind(
        "koinii/speaker-mismatch",
        403,
        "a speech act (or an answer's claim) that speaks as another agent",
        "you speak only as yourself; to challenge another agent's move, dispute(handle) it",
    ),
    Kind(
        "koinii/creator-mismatch",
        403,
        "a write, wrap or registration naming a creator other than the writer",
        "leave creator out (or name yourself): every write is attributed to its writer",
    ),
    Kind(
        "koinii/foreign-mask",
        403,
        "an agent masking (except) another agent's sentex",
        "to challenge another agent's move, dispute(handle) it",
    ),
    Kind(
        "koinii/system-vocabulary",
        403,
        "an agent declaring (arity, functional, singleValued, carriesClaim, speechAct, "
        "target_following_predicate) a predicate of the system's vocabulary",
        "declare a predicate of your own; the system's are declared by its vocabulary",
    ),
    Kind(
        "koinii/foreign-mark",
        403,
        "an agent writing an agentContext mark that is not its own join's",
        "join marks your own context for you: claim facts instead",
    ),
    Kind(
        "koinii/strength-forbidden",
        403,
        "an agent writing a monotonic claim (agents write default claims only)",
        "leave strength out: a contrary claim stands beside yours and is ruled on",
    ),
    Kind(
        "koinii/not-the-asker",
        403,
        "accepting an answer to, or closing, a question another agent asked",
        'only the asker accepts or closes a question; endorse the answer or vote(handle, "for") '
        "instead",
    ),
    Kind(
        "koinii/not-own-statement",
        403,
        "disregarding a statement another agent made",
        "disregard only your own statements; to challenge another's, dispute(handle) it",
    ),
    Kind(
        "koinii/not-your-session",
        403,
        "a coordinator permeating a session other than the one its first permeate made its own",
        "permeate your own session (the message names it), or leave session_id out",
    ),
    Kind(
        "arbiter-is-party",
        403,
        "an arbiter ruling on a dispute in which it holds a side",
        "leave the ruling to an arbiter that holds no side of the dispute",
    ),
    # --- identity (docs/security.md) -------------------------------------------------------
    Kind(
        "koinii/context-taken",
        400,
        "a token table in which two principals would own one context",
        _OPERATOR,
    ),
    Kind(
        "koinii/reserved-name",
        400,
        "a principal named for a system context or as the system speaks (AgentUniverse, "
        "AgentSpeechActs, AgentMajority but as an arbiter)",
        _OPERATOR,
    ),
    Kind(
        "koinii/identity-unverified",
        400,
        "a claimed identity that could not be verified, or a principal not minted by authenticate",
        "join with a credential that proves the identity",
    ),
    Kind(
        "koinii/unknown-policy",
        400,
        "an identity policy that is not one of the policies",
        "name one of the policies the message lists",
    ),
    Kind("koinii/bad-attest-key", 400, "an attestation key shorter than 32 bytes", _OPERATOR),
    Kind(
        "koinii/not-a-channel",
        400,
        "joining under a parent context that is not a channel",
        "join a channel: a context agents' contexts see",
    ),
    Kind(
        "koinii/not-vocabulary",
        400,
        "an agent's own context placed to see something but vocabulary (a channel, another "
        "principal's context, an empty context)",
        "join a channel to take part in it (the channel sees you); speak only vocabulary",
    ),
    Kind(
        "koinii/registry-not-functional",
        400,
        "the registry holds more than one believed row where one is expected",
        _OPERATOR,
    ),
    # --- the conversation (docs/channel.md) ----------------------------------------------
    Kind(
        "koinii/answer-mismatch",
        400,
        "an answer whose claim does not answer its question",
        "answer with bindings for the question's ?variables, e.g. "
        'bindings={"?db": "PostgreSQL16"}, or with an instance of its pattern; thread(question) '
        "shows the pattern",
    ),
    Kind(
        "koinii/bad-question",
        400,
        "a question that is not one sentence, a string or a symbol",
        "ask one sentence (a pattern with ?variables, or a yes/no sentence) or free text",
    ),
    Kind(
        "koinii/not-a-question",
        400,
        "answering or closing a handle that is not a question",
        "answer() and close() take a question's handle: questions() lists them",
    ),
    Kind(
        "koinii/not-an-answer",
        400,
        "accepting a handle that is not an answer",
        "accept takes an answer's handle: thread(question) lists the answers",
    ),
    Kind(
        "koinii/not-disputable",
        400,
        "disputing what is not another agent's claim (a reply, a question, one's own claim)",
        'dispute the claim itself (the message names its handle), or vote(handle, "against") on '
        "it; withdraw your own claim instead of disputing it",
    ),
    Kind(
        "koinii/not-votable",
        400,
        "voting on what is not a claim or an answer",
        "vote on a claim or an answer: thread(handle) shows which handle is the claim",
    ),
    Kind(
        "koinii/not-a-claim",
        400,
        "endorsing or justifying what is not a claim or an answer",
        "endorse or justify a claim or an answer, not a reply to one",
    ),
    Kind(
        "koinii/not-a-move",
        400,
        "withdrawing what is not a move (a join's mark, a derived sentex)",
        "withdraw a move you made (a claim, question, answer or reply); thread(handle) shows "
        "what rests on what",
    ),
    Kind(
        "koinii/question-closed",
        400,
        "answering a question its asker closed",
        "claim() what you know instead, or ask the asker to reopen it",
    ),
    Kind(
        "koinii/reply-inadmissible",
        400,
        "a reply-many whose replies have problems (data lists them); nothing was written",
        "fix each reply the data names and send them again",
    ),
    Kind(
        "koinii/no-such-handle",
        400,
        "a move, claim or sentex handle that names nothing stored (or a withdrawn move)",
        "use a live handle from questions(), thread() or recent_changes() (the move may have "
        "been withdrawn)",
    ),
    Kind(
        "koinii/withdrawn",
        400,
        "a move on a handle that was taken back (withdrawn, conceded or superseded)",
        "thread(handle) shows its record: who took it back, when and why; act on a live "
        "handle from questions() or disputes()",
    ),
    Kind(
        "koinii/no-wire-feed",
        400,
        "a cursor feed asked of a local medium",
        "subscribe with a callback instead",
    ),
    Kind(
        "koinii/no-such-channel",
        400,
        "a channel (in the web view) that has no members",
        "name a channel agents have joined",
    ),
    Kind(
        "koinii/use-the-move",
        400,
        "a speech act (an answer, a ballot, a dispute, …) written, removed, concluded by a "
        "rule, quoted or hidden by a mask other than through its move (koinii.channel.moves), "
        "which keeps the conversation's rules",
        "call the tool the message names for that move",
    ),
    # --- disputes and belief (docs/disputes.md) ---------------------------------------------
    Kind(
        "koinii/bad-dispute-id",
        400,
        "a dispute id that is not two or more distinct positive handles",
        "name a dispute by the handles disputes() lists",
    ),
    Kind(
        "koinii/not-a-side",
        400,
        "a ruling that upholds what is not a side of its dispute",
        "uphold one of the dispute's sides: disputes() lists them",
    ),
    Kind(
        "koinii/no-such-stance",
        400,
        "a ballot stance that is not for or against",
        'vote "for" or "against"',
    ),
    Kind(
        "koinii/not-a-disregard",
        400,
        "un-disregarding a sentex that is not a disregard (an except mask)",
        "name the disregard's own handle",
    ),
    # --- catch-up (docs/channel.md) ----------------------------------------------------------
    Kind(
        "koinii/catchup-thrashing",
        400,
        "a catch-up pass that took too many snapshots (data.condition says why)",
        "poll more often, or raise the daemon's ring size: the consumer is not keeping up",
    ),
    Kind(
        "koinii/cursor-store-error",
        400,
        "a catch-up cursor file that could not be read or written",
        "fix the cursor file the message names (its path and permissions)",
    ),
    Kind(
        "koinii/feed-error",
        400,
        "a catch-up read that failed otherwise (data.cause_kind)",
        "call again once the cause the message names is fixed",
    ),
    Kind(
        "koinii/no-cursor",
        400,
        "a feed reply or a stored position with no usable cursor to resume from",
        "start the catch-up afresh (drop the stored position)",
    ),
    # --- wraps and sessions (docs/wraps.md, docs/sessions.md) --------------------------------
    Kind(
        "bad-wrap",
        400,
        "a wrap with a field that fails its check",
        "fix the field the message names; leave parent_session_id out if no coordinator "
        "spawned you",
    ),
    Kind(
        "bad-coordinator",
        400,
        "a coordinator record with a field that fails its check, or a session another holds",
        "fix the field the message names: ids are non-empty strings",
    ),
    Kind(
        "bad-session",
        400,
        "a session write with a field that fails its check (data.field names it)",
        "fix the field the message names",
    ),
    Kind(
        "koinii/no-session",
        400,
        "an MCP session tool with no stored session to read or record into",
        "start koinii mcp with --session ID (or KOINII_SESSION), or pass the session's id as "
        "target",
    ),
    Kind(
        "runtime-settings",
        400,
        "koinii hooks cannot merge into a runtime's settings file: it is not valid JSON or "
        "TOML, or holds a command of its own where Koinii's goes (data: path, field)",
        "fix or move what the message names in that file, then run koinii hooks install again",
    ),
)

KINDS: dict[str, Kind] = {kind.name: kind for kind in _CATALOGUE}


def status_of(kind: str) -> int:
    """The daemon's HTTP status for a refusal of `kind` (400 for one not catalogued)."""
    return KINDS.get(kind, _DEFAULT).status


def fix_of(kind: str) -> str:
    """What to do about a refusal of `kind`, in words a model can act on."""
    return KINDS.get(kind, _DEFAULT).fix


def exit_code_of(kind: str) -> int:
    """The CLI's exit code for a refusal of `kind` (docs/cli.md)."""
    return KINDS.get(kind, _DEFAULT).exit


def catalogue_markdown() -> str:
    """The catalogue as the table docs/refusals.md holds (a test keeps the two equal)."""
    rows = ["| kind | status | when | fix |", "| --- | --- | --- | --- |"]
    for kind in _CATALOGUE:
        rows.append(f"| `{kind.name}` | {kind.status} | {kind.doc} | {kind.fix} |")
    return "\n".join(rows) + "\n"
