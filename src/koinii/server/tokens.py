"""The token table: who may talk to the daemon, and as what.

Invariant: the file never holds a token, only its SHA-256 (tokens are 256-bit random, so
a fast hash is enough and a stolen file grants nothing). A presented token is compared
against every entry in constant time, so timing does not tell a wrong token from a
missing one; missing, wrong and malformed tokens all get the same 401. No table holds two
principals that own one context (`identity.check_one_context_each`): `add_token` refuses
the second, and a table edited by hand into that state does not load.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
import time
from collections.abc import Callable
from typing import Any

from koinii.errors import Refused
from koinii.identity import check_one_context_each
from koinii.identity.names import check_reserved_name, lookalikes
from koinii.operations import Caller
from koinii.terms import is_individual_name

ROLES = ("agent", "arbiter", "admin", "operator", "reader")
_PREFIX = "kt_"


OPEN = Caller(None, "operator")
# one message for a missing, wrong and malformed token alike
UNAUTHORIZED = (
    "a valid bearer token is required: send Authorization: Bearer kt_… with a token "
    "`koinii token add` printed (a token added while the daemon runs counts once the "
    "daemon reads its table again: kill -HUP <its pid>, on its start-up line)"
)  # a daemon without a token table trusts its loopback callers


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _read(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        return {"version": 1, "tokens": []}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise Refused("bad-token-table", f"cannot read {path}: {exc}", {"path": path}) from exc
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise Refused("bad-token-table", f"{path} is not a Koinii token table", {"path": path})
    return data


def _write(path: str, data: dict[str, Any]) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tokens-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def add_token(path: str, principal: str, role: str) -> str:
    """Mint a token for `principal`; returns it (the only time it is ever shown)."""
    if role not in ROLES:
        raise Refused(
            "bad-role", f"unknown role {role!r}; roles: {', '.join(ROLES)}", {"known": list(ROLES)}
        )
    if not isinstance(principal, str) or not is_individual_name(principal):
        raise Refused(
            "naming",
            f"{principal!r} is not an id: ids are CapitalCamelCase, e.g. AgentAtlas",
            {"symbol": str(principal), "role": "individual"},
        )
    check_reserved_name(principal, role)
    data = _read(path)
    check_one_context_each([*(e["id"] for e in data["tokens"]), principal], path)
    token = _PREFIX + secrets.token_urlsafe(32)
    data["tokens"].append(
        {"id": principal, "role": role, "sha256": _digest(token), "created": int(time.time())}
    )
    _write(path, data)
    return token


def lookalikes_of(path: str, principal: str) -> list[str]:
    """The principals of the table at `path` whose ids look like `principal`'s (case,
    0/O, 1/l/I, rn/m): `token add` warns of them — a reader of a thread may take one for
    the other — but does not refuse (two people may be named alike)."""
    return lookalikes(principal, (e["id"] for e in _read(path)["tokens"]))


def list_tokens(path: str) -> list[dict[str, Any]]:
    """The entries (id, role, created, fingerprint) — never the tokens."""
    return [
        {"id": e["id"], "role": e["role"], "created": e["created"], "fingerprint": e["sha256"][:12]}
        for e in _read(path)["tokens"]
    ]


def revoke(path: str, principal: str) -> int:
    """Remove every token of `principal`; returns how many were removed."""
    data = _read(path)
    kept = [e for e in data["tokens"] if e["id"] != principal]
    removed = len(data["tokens"]) - len(kept)
    if removed:
        data["tokens"] = kept
        _write(path, data)
    return removed


def _agents(callers: Any) -> frozenset[str]:
    return frozenset(c.id for c in callers if c.role in ("agent", "arbiter"))


class TokenTable:
    """The loaded table; `caller(header)` authenticates an Authorization header.

    It is read when it is made and again on `reload()` (the daemon's SIGHUP): a token
    added or revoked with `koinii token` counts from then on. A table that does not load
    leaves the one in force as it was."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: list[tuple[bytes, Caller]] = []
        self._vet: Callable[[frozenset[str]], None] | None = None
        self.reload()

    def reload(self) -> None:
        """Read the file again; refused (`bad-token-table`, `koinii/context-taken`, …)
        with the table in force unchanged."""
        entries = _read(self.path)["tokens"]
        check_one_context_each((e["id"] for e in entries), self.path)
        loaded = [(bytes.fromhex(e["sha256"]), Caller(e["id"], e["role"])) for e in entries]
        if self._vet is not None:
            self._vet(_agents(caller for _, caller in loaded))
        self._entries = loaded  # one assignment: a request sees the old table or the new
        self._callers = frozenset(caller for _, caller in loaded)

    def vet_with(self, check: Callable[[frozenset[str]], None]) -> None:
        """Check the agents of this table, and of every reload, with `check` (the
        daemon's: against its store, `names.check_names_in_store`); a refusal now
        is raised, on a reload it keeps the table in force."""
        check(self.agents)
        self._vet = check

    @property
    def agents(self) -> frozenset[str]:
        """The ids that own a context (agents and arbiters): reserved for them before
        their first join (`server.access`)."""
        return _agents(self._callers)

    @property
    def roles(self) -> dict[str, str]:
        """Each principal's role (the channel roster shows it)."""
        return {c.id: c.role for c in self._callers}

    @property
    def count(self) -> int:
        """How many principals hold a token."""
        return len({caller.id for caller in self._callers})

    def holds(self, caller: Caller) -> bool:
        """Whether some token in the table still makes its bearer `caller` (a revoked
        principal's signed-in web view ends at the reload)."""
        return caller in self._callers

    def caller(self, authorization: str | None) -> Caller:
        presented = b"\0" * 32
        if authorization and authorization.startswith("Bearer "):
            presented = hashlib.sha256(authorization[7:].strip().encode("utf-8")).digest()
        found = None
        for digest, caller in self._entries:  # no early exit: constant time in the table
            if hmac.compare_digest(digest, presented):
                found = caller
        if found is None:
            raise Refused("unauthorized", UNAUTHORIZED, {})
        return found
