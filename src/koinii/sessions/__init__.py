"""Sessions: what agents did, recorded in the KB's store, read back and searched.

`SessionStore` writes (sessions.md §2), `SessionRecorder` the same writes buffered into
batches (live recording); `Introspection` reads (§3): `list_sessions`,
`get_session`, `read_session`. Both take a `KB`, a `Client` or a path and run the same
wire operations either way. Importing this package registers those operations, so the
daemon serves them (operations.DOMAIN_MODULES). Transcripts of coding agents import
through `koinii.sessions.importing` (Claude Code, Codex CLI); the CLI is `koinii sessions`.
"""

from koinii.sessions.introspection import Introspection
from koinii.sessions.recording import SessionRecorder
from koinii.sessions.store import SessionStore

__all__ = ["Introspection", "SessionRecorder", "SessionStore"]
