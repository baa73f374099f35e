"""Grants and attestations: a `Principal` is only as good as its grant. `authenticate`
mints an HMAC-SHA256 grant over a fixed serialisation under the process key, and every
check that matters (admin writes, attestation) verifies it in constant time, so a
hand-built or altered principal does not verify.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from koinii.errors import Refused
from koinii.identity.contexts import POLICIES, context_for
from koinii.kb import Sentex

_key: bytes = secrets.token_bytes(32)


def set_attest_key(key: bytes | str) -> None:
    """Use `key` (>= 32 bytes) for grants and attestations in this process."""
    global _key
    _key = _checked_key(key)


def _checked_key(key: Any) -> bytes:
    raw = key.encode("utf-8") if isinstance(key, str) else key
    if not isinstance(raw, bytes) or len(raw) < 32:
        raise Refused(
            "koinii/bad-attest-key",
            "the attestation key must be at least 32 bytes",
            {"key_class": type(key).__name__},
        )
    return raw


def _mac(*parts: Any) -> str:
    message = json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hmac.new(_checked_key(_key), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Principal:
    """An authenticated (or cooperatively claimed) identity."""

    id: str
    context: str
    source: str | None
    policy: str
    authenticated: bool
    admin: bool
    grant: str | None = None

    def _claims(self) -> tuple:
        return (
            "grant",
            self.id,
            self.context,
            self.source,
            self.policy,
            self.authenticated,
            self.admin,
        )

    @property
    def minted(self) -> bool:
        """Was this principal made by `authenticate` under the current key, unaltered?"""
        return self.grant is not None and hmac.compare_digest(self.grant, _mac(*self._claims()))


def authenticate(
    request: dict[str, Any],
    policy: str | None = None,
    verify: Callable[..., bool] | None = None,
) -> Principal:
    """A principal from `request` (`claimed_id`, `credential`, `source`, `admin`).

    `cooperative` (the default) trusts the claimed id; `proof-tier` needs `verify` to
    prove it. An admin request always needs a verifier that takes the claims:
    `verify(claimed_id, credential, claims)`.
    """
    policy = policy or "cooperative"
    if policy not in POLICIES:
        raise Refused(
            "koinii/unknown-policy",
            f"unknown identity policy {policy!r}; policies: {', '.join(POLICIES)}",
            {"policy": policy, "known": list(POLICIES)},
        )
    claimed = request.get("claimed_id")
    context = context_for(claimed)
    admin = bool(request.get("admin"))
    needs_proof = admin or policy == "proof-tier"
    if needs_proof:
        claims = {"admin": admin, "source": request.get("source")}
        if not _verified(verify, claimed, request.get("credential"), claims, admin):
            raise Refused(
                "koinii/identity-unverified",
                f"the identity {claimed} could not be verified",
                {
                    "claimed_id": claimed,
                    "admin": admin,
                    "verifier": verify is not None,
                    "policy": policy,
                },
            )
    principal = Principal(
        id=claimed,
        context=context,
        source=request.get("source"),
        policy=policy,
        authenticated=needs_proof,
        admin=admin,
    )
    return replace(principal, grant=_mac(*principal._claims()))


def _verified(verify, claimed, credential, claims, admin: bool) -> bool:
    if verify is None:
        return False
    try:
        params = inspect.signature(verify).parameters.values()
        takes_claims = sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params
        ) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in params)
    except (TypeError, ValueError):
        takes_claims = True
    if takes_claims:
        return verify(claimed, credential, claims) is True
    if admin:
        return False  # an admin grant needs a verifier that sees the claims
    return verify(claimed, credential) is True


def require_minted(principal: Any) -> None:
    if not isinstance(principal, Principal) or not principal.minted:
        raise Refused(
            "koinii/identity-unverified",
            "this principal was not minted by authenticate (or was altered)",
            {"minted": False},
        )


def attested_by(store: Any, handle: int) -> str | None:
    """The creator whose attestation of this sentex verifies, else None.

    Attested means: an in-process HMAC attestation bound to this sentex's context, text
    and creator (so it does not survive copying), or a `principal` recorded by an
    authenticated daemon that equals the creator.
    """
    sentex = store.sentex(handle)
    return None if sentex is None else attestor(sentex)


def attestor(sentex: Sentex) -> str | None:
    """`attested_by` of a sentex already read."""
    creator = sentex.provenance.get("creator")
    if creator is None:
        return None
    attestation = sentex.provenance.get("attestation")
    if isinstance(attestation, str) and hmac.compare_digest(
        attestation, _mac("attest", sentex.context, sentex.text, creator)
    ):
        return creator
    if sentex.provenance.get("principal") == creator:
        return creator
    return None


def attestation(ctx: str, text: str, creator: str) -> str:
    """The attestation of `text` written in `ctx` by `creator`, under the process key."""
    return _mac("attest", ctx, text, creator)
