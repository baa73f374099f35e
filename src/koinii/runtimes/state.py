"""What the hooks keep between runs, and where: the Koinii state directory.

`$KOINII_STATE_DIR`, else `$XDG_STATE_HOME/koinii`, else `~/.local/state/koinii`. It
holds one small JSON file per runtime session (how far its transcripts are imported, the
change-log position it was last told about, how often Stop handed work back), one per
agent (where its last session left the change log), the hooks' log, and the settings as
they were before `koinii hooks install` (so `uninstall` puts them back byte for byte).

Every file is written whole to a temporary file and renamed over the old one: a hook
killed mid-write leaves the previous state, never half a file. A state file that cannot
be read counts as empty — the worst that costs is one redone, idempotent import.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not on Windows: hooks of one session then do not wait for each other
    fcntl = None  # type: ignore[assignment]

LOG_NAME = "hooks.log"
LOG_MAX_BYTES = 1_000_000  # past this, the log starts again (one older copy is kept)


def state_dir() -> Path:
    given = os.environ.get("KOINII_STATE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "koinii"


def _name(*parts: str) -> str:
    """A file name for any key: readable where it can be, hashed where it cannot."""
    key = "-".join(parts)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:80]
    return f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


def read_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def write_json(path: Path, value: dict[str, Any]) -> None:
    write_bytes(path, json.dumps(value, indent=1, ensure_ascii=False).encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (a temporary file beside it, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o777)
        else:  # as open() would have made it (mkstemp makes it private)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(temporary, 0o666 & ~mask)
        os.replace(temporary, path)
    except BaseException:
        with _quiet():
            os.unlink(temporary)
        raise


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)


def session_path(runtime: str, session_id: str) -> Path:
    return state_dir() / "sessions" / _name(runtime, session_id)


def agent_path(agent: str) -> Path:
    return state_dir() / "agents" / _name(agent)


def install_path(settings: Path) -> Path:
    return state_dir() / "installs" / _name(os.path.abspath(settings))


def log(message: str) -> None:
    """One line in the hooks' log; never raises (a hook must not fail on its log)."""
    path = state_dir() / LOG_NAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_suffix(".log.1"))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{stamp} {message}\n")
    except OSError:
        pass


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside `path` (`<path>.lock`) while the block runs."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as held:
        if fcntl is not None:
            fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(held, fcntl.LOCK_UN)


def keep(runtime: str, event: str | None, raw: str, config: dict[str, Any]) -> None:
    """Keep a hook that failed, to run it again later (the same hook kept twice is one)."""
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    path = state_dir() / "kept" / _name(runtime, event or "", digest)
    with contextlib.suppress(OSError):
        old = read_json(path)
        write_json(
            path,
            {
                "runtime": runtime,
                "event": event,
                "raw": raw,
                "config": config,
                "tries": old.get("tries", 0),
                "kept_at": old.get("kept_at", time.time()),
            },
        )


def kept() -> list[tuple[Path, dict[str, Any]]]:
    """The kept hooks, oldest first."""
    folder = state_dir() / "kept"
    found = [(path, read_json(path)) for path in folder.glob("*.json")] if folder.exists() else []
    found = [(p, k) for p, k in found if {"runtime", "event", "raw", "config"} <= set(k)]
    return sorted(found, key=lambda item: item[1].get("kept_at", 0))
