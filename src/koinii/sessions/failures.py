"""What went wrong in a session: each failure classified, with advice, and the loops.

A failure is one of: an attempt that ended in error or was cancelled, a block that
raised or timed out, a provider routing event (an error, a retry or a fallback). Each
gets exactly one classification — the first rule below that matches — and the advice
for it. Its signature (classification, tool, and the message with numbers, ids, paths
and quoted names masked) groups repeats: the same signature 5 or more times is a
repetition loop, the sign of an agent retrying what cannot work.

Everything here is a pure function of rows already read (introspection.py reads them),
so it cannot fail on the store.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

LOOP_AT = 5  # a signature seen this many times is a repetition loop

ADVICE = {
    "provider_error": (
        "The model provider failed (rate limit, overload, network or an API error): wait, "
        "then retry, or route to another provider or model."
    ),
    "turn_cancelled": (
        "The turn was cancelled or interrupted: ask what the user wants before repeating it."
    ),
    "tool_rejected": (
        "The user or a permission rule refused the call: do not repeat it unchanged; ask or "
        "take another route."
    ),
    "execution_timeout": (
        "The block ran out of time: make the work smaller, add a limit, or run it in the "
        "background."
    ),
    "unresolved_symbol": (
        "A name could not be resolved: check its spelling, its import and what is in scope "
        "before calling it again."
    ),
    "code_execution_error": (
        "The executed code raised: read the error and change the code, do not re-run it as it is."
    ),
    "turn_error": "The turn ended in an error: read it before retrying.",
}

_PROVIDER = re.compile(
    r"rate.?limit|overloaded|\b(429|5\d\d)\b|api.?error|provider|quota|timed? ?out while|"
    r"connection (reset|refused|error)|service unavailable|bad gateway|credit",
    re.IGNORECASE,
)
_REJECTED = re.compile(
    r"doesn't want to proceed|rejected|permission|not allowed|denied", re.IGNORECASE
)
_UNRESOLVED = re.compile(
    r"NameError|is not defined|unable to resolve symbol|cannot find symbol|undefined "
    r"(variable|name|symbol|method|function)|no such (var|function|method)|"
    r"cannot import name|has no attribute|ModuleNotFoundError|unbound",
    re.IGNORECASE,
)
_MASKS = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I), "<id>"),
    (re.compile(r"0x[0-9a-f]+|\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"(/[\w.\-]+){2,}"), "<path>"),
    (re.compile(r"\d+(\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)


def classify_block(error: str | None, timeout: bool) -> str:
    if timeout:
        return "execution_timeout"
    text = error or ""
    if _REJECTED.search(text):
        return "tool_rejected"
    if _UNRESOLVED.search(text):
        return "unresolved_symbol"
    return "code_execution_error"


def classify_attempt(status: str | None, outcome: str | None, error: str | None) -> str | None:
    """None when the attempt did not fail."""
    if outcome == "cancelled" or status == "interrupted":
        return "turn_cancelled"
    if outcome == "error" or status == "error":
        if error and _PROVIDER.search(error):
            return "provider_error"
        return "turn_error"
    return None


def signature(classification: str, tool: str | None, message: str | None) -> str:
    text = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return f"{classification}|{tool or ''}|{text.strip()[:160]}"


def failure(
    classification: str,
    message: str | None,
    *,
    at: str | None,
    turn_id: str | None,
    attempt: int | None = None,
    iteration_id: str | None = None,
    block_id: str | None = None,
    tool: str | None = None,
) -> dict[str, Any]:
    return {
        "classification": classification,
        "message": message,
        "advice": ADVICE[classification],
        "signature": signature(classification, tool, message),
        "at": at,
        "turn_id": turn_id,
        "attempt": attempt,
        "iteration_id": iteration_id,
        "block_id": block_id,
        "tool": tool,
    }


def diagnosis(failures: list[dict[str, Any]]) -> dict[str, Any]:
    """`{failure_count, by_classification, repetition_loop, repetition_clusters,
    next_actions}` — clusters are signatures seen twice or more, most frequent first."""
    by_signature: dict[str, list[dict[str, Any]]] = {}
    for item in failures:
        by_signature.setdefault(item["signature"], []).append(item)
    clusters = [
        {
            "signature": sig,
            "classification": items[0]["classification"],
            "count": len(items),
            "is_loop": len(items) >= LOOP_AT,
            "first_at": items[0]["at"],
            "last_at": items[-1]["at"],
            "turn_ids": sorted({i["turn_id"] for i in items if i["turn_id"]}),
        }
        for sig, items in by_signature.items()
        if len(items) >= 2
    ]
    clusters.sort(key=lambda c: (-c["count"], c["signature"]))
    counts = Counter(item["classification"] for item in failures)
    actions = [
        f"Stop repeating: {c['signature']!r} failed {c['count']} times; change the approach."
        for c in clusters
        if c["is_loop"]
    ]
    actions += [ADVICE[name] for name, _ in counts.most_common()]
    return {
        "failure_count": len(failures),
        "by_classification": dict(counts.most_common()),
        "repetition_loop": any(c["is_loop"] for c in clusters),
        "repetition_clusters": clusters,
        "next_actions": actions,
    }
