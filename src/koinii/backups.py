"""A backup of a running daemon's store, through the daemon: `koinii backup FILE` and
`koinii export FILE.jsonl` with `--url` (an operator's token), no `--db` and no stop.

The daemon makes the copy itself (`store.backup`): the open group commit is committed
first, then SQLite's backup API copies the store in one read transaction — a consistent
snapshot as of one commit, which in WAL mode never blocks the writer — off the event
loop, into a file of its own. The client fetches that file in parts
(`store.backup_part`, each at most `PART_BYTES`, base64 in JSON), checks its size and
SHA-256, and the daemon deletes its copy (`store.backup_done`; a copy nobody fetched is
deleted after `KEEP_S`). `fetch_backup` is the client's side: one library call.

Invariants:
- Only an operator or an admin token may take a copy (it holds every context's
  sentexes): others are refused `forbidden`; a daemon without tokens serves its loopback
  callers, as for every operation.
- What lands at the target is whole and checked, or nothing: the parts go to a
  temporary file beside it, renamed into place once the digest matches.
- A PostgreSQL store is refused `backup-by-pg-dump`, with the pg_dump command:
  PostgreSQL makes that consistent copy itself, while the daemon runs.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import secrets
import tempfile
import time
from typing import Any

from koinii.errors import Refused
from koinii.kb import KB
from koinii.operations import Caller, operation

PART_BYTES = 4 * 1024 * 1024
KEEP_S = 3600.0  # a copy nobody fetched is deleted after this long
_FOLDER = os.path.join(tempfile.gettempdir(), f"koinii-backups-{os.getpid()}")


def authorize(kb: KB, caller: Caller, body: dict[str, Any]) -> None:
    """A copy holds every context: an operator's or an admin's (or an open daemon's)."""
    if caller.id is not None and caller.role not in ("operator", "admin"):
        raise Refused(
            "forbidden",
            f"a {caller.role} may not copy the store: a backup holds every context's "
            "sentexes — use an operator's or an admin's token",
            {"principal": caller.id, "role": caller.role},
        )


def _path(backup_id: Any) -> str:
    if not isinstance(backup_id, str) or not backup_id.isalnum() or len(backup_id) > 64:
        raise Refused(
            "koinii/no-such-backup",
            f"no backup {str(backup_id)[:40]!r} here: start one with store.backup and use "
            "the id it returns",
            {"id": str(backup_id)[:40]},
        )
    path = os.path.join(_FOLDER, f"{backup_id}.db")
    if not os.path.isfile(path):
        raise Refused(
            "koinii/no-such-backup",
            f"no backup {backup_id!r} here (fetched and deleted already, or older than "
            f"{KEEP_S:.0f} s): start another with store.backup",
            {"id": backup_id},
        )
    return path


def _sweep() -> None:
    """Delete the copies nobody fetched within KEEP_S, and the folders of daemons that
    are gone (one killed leaves its copies behind)."""
    import shutil

    parent, mine = os.path.split(_FOLDER)
    prefix = mine.rsplit("-", 1)[0] + "-"
    for name in os.listdir(parent):
        pid = name.removeprefix(prefix)
        if name.startswith(prefix) and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
    if not os.path.isdir(_FOLDER):
        return
    for name in os.listdir(_FOLDER):
        path = os.path.join(_FOLDER, name)
        try:
            if time.time() - os.path.getmtime(path) > KEEP_S:
                os.unlink(path)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _copy(location: str, path: str) -> dict[str, Any]:
    from koinii.kb.store.migrate import backup

    made = backup(location, path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {**made, "sha256": digest.hexdigest()}


@operation(
    "store.backup",
    fields={},
    summary="a consistent copy of the daemon's SQLite store, made by the daemon to fetch",
    authorize=authorize,
)
async def start(kb: KB) -> dict[str, Any]:
    """Copy the store (one read transaction, off the loop); returns `{id, bytes, seq,
    sha256}` to fetch it by."""
    location = kb.location
    if location.startswith(("postgresql://", "postgres://")):
        raise Refused(
            "backup-by-pg-dump",
            "this daemon's store is in PostgreSQL, which makes a consistent copy itself while "
            "the daemon runs: pg_dump --schema=SCHEMA -Fc -f koinii.pgdump 'postgresql://…' on "
            "its database (docs/scaling.md); the daemon does not copy it",
            {},
        )
    _sweep()
    os.makedirs(_FOLDER, mode=0o700, exist_ok=True)
    backup_id = secrets.token_hex(16)
    path = os.path.join(_FOLDER, f"{backup_id}.db")
    made = await asyncio.to_thread(_copy, location, path)
    return {"id": backup_id, "bytes": made["bytes"], "seq": made["seq"], "sha256": made["sha256"]}


@operation(
    "store.backup_part",
    fields={
        "id": ("string", True, "the id store.backup returned"),
        "offset": ("integer", True, "the byte to start at (0, then each reply's next)"),
    },
    summary="a part of a backup copy (base64), and the offset of the next one",
    authorize=authorize,
)
def part(kb: KB, id: Any, offset: Any) -> dict[str, Any]:
    path = _path(id)
    size = os.path.getsize(path)
    if type(offset) is not int or not 0 <= offset <= size:
        raise Refused(
            "bad-option",
            f"offset is a byte of the copy, 0 to {size}: start at 0, then pass each reply's next",
            {"option": "offset"},
        )
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(PART_BYTES)
    after = offset + len(data)
    return {"data": base64.b64encode(data).decode("ascii"), "next": after if after < size else None}


@operation(
    "store.backup_done",
    fields={"id": ("string", True, "the id store.backup returned")},
    summary="delete the daemon's copy once fetched",
    authorize=authorize,
)
def done(kb: KB, id: Any) -> dict[str, Any]:
    os.unlink(_path(id))
    return {"id": id, "deleted": True}


def fetch_backup(client: Any, target: str) -> dict[str, Any]:
    """Have the daemon behind `client` copy its store, and fetch the copy to the new
    file `target`; returns `{target, bytes, seq}`. Refused `target-not-empty` when
    `target` exists, `store-error` when the fetched copy is not what the daemon made."""
    if os.path.exists(target):
        raise Refused(
            "target-not-empty",
            f"{target} exists; back up into a new file (or remove it first)",
            {"target": target},
        )
    made = client.invoke("store.backup")
    partial = f"{target}.part-{made['id'][:8]}"
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as f:
            offset: int | None = 0
            while offset is not None:
                got = client.invoke("store.backup_part", id=made["id"], offset=offset)
                data = base64.b64decode(got["data"])
                f.write(data)
                digest.update(data)
                offset = got["next"]
        if os.path.getsize(partial) != made["bytes"] or digest.hexdigest() != made["sha256"]:
            raise Refused(
                "store-error",
                "the fetched copy is not the one the daemon made (size or SHA-256 differs): "
                "run the backup again",
                {"bytes": made["bytes"]},
            )
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
        client.invoke("store.backup_done", id=made["id"])
    return {"target": target, "bytes": made["bytes"], "seq": made["seq"]}
