"""The client side of the daemon's protocol, without I/O: where a client connects, how an
operation becomes a request, and how a reply becomes a result or a refusal.

Both clients — `koinii.client.sync.Client` (stdlib `http.client`, blocking) and
`koinii.client.aio.AsyncClient` (httpx, asyncio) — build every request and read every reply
here, so the two cannot drift: the same fields reach the daemon, the same `Refused` kinds
come back, and a reply that is not Koinii's is `Unavailable` in both. Invariant: this
module never sends anything; a transport sends the `Call`'s body to `endpoint.route(op)`
and hands the status and parsed body to `Call.outcome`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypedDict, TypeVar, cast
from urllib.parse import urlsplit

from koinii.errors import Refused, Unavailable
from koinii.kb import Edited, Event, Hit, Retracted, Sentex
from koinii.terms import Sym, Term, show
from koinii.wire import (
    API,
    STREAM_KEEPALIVE_S,
    decode_bindings,
    decode_edited,
    decode_event,
    decode_hit,
    decode_retracted,
    decode_sentex,
)

__all__ = [
    "DEFAULT_URL",
    "Call",
    "Context",
    "Endpoint",
    "Entry",
    "Goal",
    "Polled",
    "Sentence",
    "Watching",
    "endpoint",
]

DEFAULT_URL = "http://127.0.0.1:7411"


# --- where a client connects ------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A daemon's address: scheme, host, port and the path it is mounted under ('' at the
    root; '/koinii' behind a proxy that serves it at http://host/koinii), plus the headers
    every request carries."""

    url: str
    secure: bool
    host: str
    port: int
    prefix: str
    headers: Mapping[str, str] = field(repr=False)

    def route(self, op: str) -> str:
        """The request path of the operation `op` ('assert', 'wraps/add')."""
        return f"{self.prefix}{API}/{op}"

    @property
    def health(self) -> str:
        return f"{self.prefix}/health"


def endpoint(url: str | None, token: str | None) -> Endpoint:
    """Resolve a client's address as the CLI does: `url`, else $KOINII_URL, else
    DEFAULT_URL; `token`, else $KOINII_TOKEN (an empty one counts as none), checked for
    form (`checked_token`). The URL's path is kept, so a daemon behind a path-prefix
    proxy is reachable."""
    url = url or os.environ.get("KOINII_URL") or DEFAULT_URL
    token = checked_token(os.environ.get("KOINII_TOKEN") if token is None else token)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port that is not a number, or out of range
        raise _bad_url(url, str(exc)) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad_url(url, "it is not an http(s) URL")
    if parts.query or parts.fragment:
        raise _bad_url(url, "a daemon's URL has no query or fragment")
    secure = parts.scheme == "https"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:  # "" names no token, and reads no variable
        headers["Authorization"] = f"Bearer {token}"
    return Endpoint(
        url=url,
        secure=secure,
        host=parts.hostname,
        port=port or (443 if secure else 80),
        prefix=parts.path.rstrip("/"),
        headers=headers,
    )


_TOKEN = re.compile(r"kt_[A-Za-z0-9_-]+")  # what `koinii token add` mints: URL-safe base64


def checked_token(token: object) -> str:
    """The token every client sends, checked for form before it goes into a header: the
    one place both clients, the CLI and `koinii mcp` read a token through. Surrounding
    whitespace (a newline from a file) is dropped; "" is no token. Anything else but
    `kt_` and URL-safe base64 — the docs' placeholder `kt_…` first of all, which no
    header can carry — is refused `unauthorized` here, with the fix, instead of failing
    as an encoding error in the transport. The message never repeats the token."""
    if token is None:
        return ""
    if not isinstance(token, str):
        why = f"it is a {type(token).__name__}, not a string"
    else:
        token = token.strip()
        if not token or _TOKEN.fullmatch(token):
            return token
        odd = next((c for c in token[3:] if not (c.isascii() and (c.isalnum() or c in "_-"))), None)
        if not token.startswith("kt_"):
            why = "it does not start with kt_"
        elif odd == "\u2026":
            why = "it holds '…', the docs' placeholder, not a token"
        elif odd is not None:
            why = f"it holds {odd!r} (U+{ord(odd):04X}), which no token holds"
        else:
            why = "it has nothing after kt_"
    raise Refused(
        "unauthorized",
        f"the token given (--token, KOINII_TOKEN or token=) is not a Koinii token: {why}; "
        "paste the kt_… that `koinii token add` printed",
        {"option": "token"},
    )


def _bad_url(url: str, why: str) -> Refused:
    return Refused(
        "bad-url",
        f"{url!r}: {why}; give the daemon as http://host:port, or http://host/path behind a proxy",
        {"url": url},
    )


# --- what a request carries --------------------------------------------------------------

T = TypeVar("T")

Sentence = Term  # a term, or its text: "(usesDatabase ProdCluster Postgres)"
Context = str | Sym  # "CxAtlas", or Sym("CxAtlas"); "?ctx" where a read allows any
Goal = Term | list[Term]  # one pattern, or a list of them (a conjunction)
Entry = tuple[Sentence, Context] | tuple[Sentence, Context, Mapping[str, Any]]


class Watching(TypedDict):
    """What `watch` answers: the subscription's token, its cursor (0), its ring's size,
    and the seq of the last write before it (it sees every write after)."""

    token: str
    cursor: int
    max_events: int
    seq: int


class Polled(TypedDict):
    """What `poll` answers: the events after the cursor, the cursor to poll next, and
    how many events fell off the ring since the last poll (then: resnapshot)."""

    events: list[Event]
    cursor: int
    lagged: int


# The operations that take a `budget_ms` (the daemon's table says the same).
BUDGETED = frozenset(
    {
        "assert",
        "retract",
        "edit",
        "check",
        "check_edit",
        "load_text",
        "query",
        "search",
        "sentexes_matching",
        "why",
        "contradictions",
        "conflicts",
        "violations",
        "vocabulary",
    }
)


def _as_is(result: Any) -> Any:
    return result


@dataclass(frozen=True)
class Call(Generic[T]):
    """One operation, ready to send: its route, its fields (a None field is left out: the
    daemon's default), how much past the client's timeout its answer may take (a long
    poll waits that long on purpose), and how its result decodes."""

    op: str
    fields: dict[str, Any]
    decode: Callable[[Any], T]
    wait_s: float = 0.0

    def request(self, budget_ms: int | None) -> tuple[bytes, float]:
        """The JSON body and the extra wait, with this task's budget (see `budget_ms`)."""
        body = {k: v for k, v in self.fields.items() if v is not None}
        wait = self.wait_s
        if budget_ms is not None and self.op in BUDGETED:
            body["budget_ms"] = budget_ms
            wait += budget_ms / 1000
        return json.dumps(body).encode("utf-8"), wait

    def outcome(self, url: str, status: int, raw: bytes) -> T:
        """The result of a reply, or the daemon's refusal as `Refused` (kind, message
        and data unchanged); a reply that is not Koinii's is `Unavailable`."""
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise Unavailable(
                f"the daemon at {url} answered {status} with a body that is not JSON"
            ) from exc
        if isinstance(reply, dict) and reply.get("ok") is True:
            return self.decode(reply.get("result"))
        error = reply.get("error") if isinstance(reply, dict) else None
        if not isinstance(error, dict) or "kind" not in error:
            raise Unavailable(f"the daemon answered {status} without a Koinii reply")
        raise Refused(error["kind"], error.get("message", ""), error.get("data") or {})


def line(url: str, raw: bytes) -> Polled:
    """One line of a `stream`: a poll's reply, bare (the open stream is the success)."""
    try:
        return _events(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise Unavailable(f"the daemon at {url} streamed a line that is no poll reply") from exc


def budget_ms(seconds: float | None) -> int | None:
    """A budget as the daemon takes it (`budget_ms`); None: the daemon's default."""
    return None if seconds is None else max(1, round(seconds * 1000))


def health(url: str, raw: bytes) -> dict[str, Any]:
    """GET /health's body."""
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise Unavailable(f"the daemon at {url} answered /health with no JSON") from exc


def _long(wait_ms: int) -> float:
    return wait_ms / 1000 if isinstance(wait_ms, int) and wait_ms > 0 else 0.0


def _text(term: Sentence) -> str:
    return term if isinstance(term, str) else show(term)


def _goal(goal: Goal) -> str | list[str]:
    return [_text(g) for g in goal] if isinstance(goal, list) else _text(goal)


def context_name(context: Context | None) -> str | None:
    """A context as the wire names it (a `Sym` by its name)."""
    return context.name if isinstance(context, Sym) else context


_ctx = context_name


def _entries(add: Sequence[Entry]) -> list[dict[str, Any]]:
    entries = []
    for item in add:
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise Refused(
                "shape",
                "an added entry is (sentence, context) or (sentence, context, options)",
                {},
            )
        entry = {"sentence": _text(item[0]), "context": _ctx(item[1])}
        if len(item) == 3 and item[2]:
            if not isinstance(item[2], Mapping):
                raise Refused("bad-option", "options must be a mapping", {})
            entry.update({k: v for k, v in item[2].items() if v is not None})
        entries.append(entry)
    return entries


def _events(reply: dict[str, Any]) -> Polled:
    return cast(Polled, {**reply, "events": [decode_event(e) for e in reply["events"]]})


# --- the operations, one builder each (the `KB` surface and the wire feed) ---------------


def invoke(name: str, wait_s: float, fields: Mapping[str, Any]) -> Call[Any]:
    return Call(name.replace(".", "/"), dict(fields), _as_is, float(wait_s))


def assert_(
    sentence: Sentence,
    context: Context,
    strength: str,
    creator: str | None,
    provenance: Mapping[str, Any] | None,
) -> Call[int | list[int]]:
    fields = {
        "sentence": _text(sentence),
        "context": _ctx(context),
        "strength": None if strength == "default" else strength,  # the daemon's default
        "creator": creator,
        "provenance": None if provenance is None else dict(provenance),
    }
    return Call("assert", fields, _as_is)


def retract(handle: int) -> Call[Retracted]:
    return Call("retract", {"handle": handle}, decode_retracted)


def edit(add: Sequence[Entry], remove: Sequence[int]) -> Call[Edited]:
    return Call("edit", {"add": _entries(add), "remove": list(remove)}, decode_edited)


def check(
    sentence: Sentence, context: Context, opts: Mapping[str, Any]
) -> Call[list[dict[str, Any]]]:
    fields = {"sentence": _text(sentence), "context": _ctx(context), **opts}
    return Call("check", fields, _as_is)


def check_edit(add: Sequence[Entry], remove: Sequence[int]) -> Call[list[dict[str, Any]]]:
    return Call("check_edit", {"add": _entries(add), "remove": list(remove)}, _as_is)


def load_text(
    source: str | os.PathLike[str],
    context: Context,
    strength: str,
    on_error: str,
    format: str = "koinii",
) -> Call[Edited]:
    if isinstance(source, os.PathLike):  # a file is read by the client, never by the daemon
        with open(source, encoding="utf-8") as f:
            source = f.read()
    fields = {"text": source, "context": _ctx(context), "strength": strength, "on_error": on_error}
    if format != "koinii":  # (a daemon before formats knows only Koinii's own)
        fields["format"] = format
    return Call("load_text", fields, decode_edited)


def add_provenance(handle: int, fields: Mapping[str, Any]) -> Call[dict[str, Any] | None]:
    return Call("add_provenance", {"handle": handle, "fields": dict(fields)}, _as_is)


def sentex(handle: int) -> Call[Sentex | None]:
    return Call("sentex", {"handle": handle}, decode_sentex)


def provenance(handle: int) -> Call[dict[str, Any] | None]:
    return Call("provenance", {"handle": handle}, _as_is)


def _sentexes(found: list[dict[str, Any]]) -> list[Sentex]:
    return [s for s in map(decode_sentex, found) if s is not None]


def sentexes_matching(pattern: Sentence, ctx: Context) -> Call[list[Sentex]]:
    fields = {"pattern": _text(pattern), "context": _ctx(ctx)}
    return Call("sentexes_matching", fields, _sentexes)


def _bindings(found: list[dict[str, str]]) -> list[dict[str, Term]]:
    return [decode_bindings(b) for b in found]


def query(goal: Goal, ctx: Context, limit: int | None) -> Call[list[dict[str, Term]]]:
    fields = {"goal": _goal(goal), "context": _ctx(ctx), "limit": limit}
    return Call("query", fields, _bindings)


def _hits(found: list[dict[str, Any]]) -> list[Hit]:
    return [decode_hit(h) for h in found]


def search(text: str, ctx: Context, limit: int, ranking: str | None) -> Call[list[Hit]]:
    fields = {"text": text, "context": _ctx(ctx), "limit": limit, "ranking": ranking}
    return Call("search", fields, _hits)


def vocabulary(ctx: Context) -> Call[list[dict[str, Any]]]:
    return Call("vocabulary", {"context": _ctx(ctx)}, _as_is)


def argue(sentence: Sentence, ctx: Context) -> Call[str]:
    return Call("argue", {"sentence": _text(sentence), "context": _ctx(ctx)}, _as_is)


def believed(handle: int, ctx: Context | None) -> Call[bool]:
    return Call("believed", {"handle": handle, "context": _ctx(ctx)}, _as_is)


def why(handle: int) -> Call[dict[str, Any] | None]:
    return Call("why", {"handle": handle}, _as_is)


def why_not(handle: int, ctx: Context | None) -> Call[str | None]:
    return Call("why_not", {"handle": handle, "context": _ctx(ctx)}, _as_is)


def contradictions(ctx: Context | None) -> Call[list[dict[str, Any]]]:
    return Call("contradictions", {"context": _ctx(ctx)}, _as_is)


def conflicts(ctx: Context | None) -> Call[list[dict[str, Any]]]:
    return Call("conflicts", {"context": _ctx(ctx)}, _as_is)


def violations() -> Call[list[dict[str, Any]]]:
    return Call("violations", {}, _as_is)


def context_up(ctx: Context) -> Call[frozenset[str]]:
    return Call("context_up", {"context": _ctx(ctx)}, frozenset)


def context_down(ctx: Context) -> Call[frozenset[str]]:
    return Call("context_down", {"context": _ctx(ctx)}, frozenset)


def stats() -> Call[dict[str, Any]]:
    return Call("stats", {}, _as_is)


def watch(
    goal: Goal | None, ctx: Context | None, max_events: int | None, since: int | None
) -> Call[Watching]:
    fields = {
        "goal": None if goal is None else _goal(goal),
        "context": _ctx(ctx),
        "max_events": max_events,
        "since": since,
    }
    return Call("watch", fields, _as_is)


def poll(token: str, cursor: int, wait_ms: int) -> Call[Polled]:
    fields = {"token": token, "cursor": cursor, "wait_ms": wait_ms}
    return Call("poll", fields, _events, _long(wait_ms))


def stream(token: str, cursor: int) -> Call[Polled]:
    """A subscription's stream: each line it writes decodes as a poll's reply
    (`line`), and a read waits past the client's timeout for the keepalive."""
    return Call("stream", {"token": token, "cursor": cursor}, _events, STREAM_KEEPALIVE_S)


def unwatch(token: str) -> Call[bool]:
    return Call("unwatch", {"token": token}, _as_is)


def watchers() -> Call[list[dict[str, Any]]]:
    return Call("watchers", {}, _as_is)


def compact_log(keep: int) -> Call[int]:
    return Call("compact_log", {"keep": keep}, _as_is)


def changes(since: int, limit: int, wait_ms: int) -> Call[dict[str, Any]]:
    fields = {"since": since, "limit": limit, "wait_ms": wait_ms}
    return Call("changes", fields, _as_is, _long(wait_ms))
