"""`koinii hooks install|uninstall|status`: Koinii's hooks and MCP server in a runtime's
settings, merged in without clobbering what is there, and taken out again.

**Claude Code** reads hooks from a settings JSON file — the project's
`.claude/settings.json` (the default) or the user's `~/.claude/settings.json`
(`--scope user`) — as `{"hooks": {EVENT: [{"matcher": …, "hooks": [{"type":
"command", "command": …, "timeout": seconds}]}]}}`, and MCP servers from the project's
`.mcp.json` (user scope: `~/.claude.json`) as `{"mcpServers": {NAME: {"command", "args",
"env"}}}` (code.claude.com/docs/en/hooks, /en/mcp). Koinii adds one command hook to each
of SessionStart, Stop, SubagentStop and SessionEnd — not PostToolUse or
UserPromptSubmit: a process per tool call or prompt would slow the agent, and Stop sees
the same transcript a moment later — and the server `koinii`.

**Codex CLI** reads `$CODEX_HOME/config.toml` (default `~/.codex`): a top-level `notify =
[argv…]` it runs at the end of each turn with the event's JSON as the last argument, and
`[mcp_servers.NAME]` tables (github.com/openai/codex docs/config.md). Codex runs one
notify command, so a `notify` of the user's own is refused (`runtime-settings`) rather
than replaced. Koinii's lines go in between marker comments (`# >>> koinii …`), the
notify at the top (a top-level key must come before the first table), the MCP table at
the end.

Invariants:
- Installing twice writes what installing once wrote (an entry of Koinii's is found by
  its command, `… hook claude EVENT`, and replaced in place).
- Uninstall restores the file byte for byte when it is as install left it: install keeps
  the file's bytes as they were (in the state directory, koinii.runtimes.state) and the
  hash of what it wrote. A file edited since is not rolled back: only Koinii's entries
  are taken out of it.
- The token is never written into a settings file (a project's is often committed): the
  hooks and the MCP server read `KOINII_TOKEN` from the environment the runtime runs in.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koinii.errors import Refused
from koinii.runtimes import state

RUNTIMES = ("claude", "codex")
CLAUDE_EVENTS = ("SessionStart", "Stop", "SubagentStop", "SessionEnd")
HOOK_TIMEOUT_S = 30  # what the runtime waits for a hook; the hooks stop well within it
SERVER = "koinii"  # the MCP server's name in the runtime's settings
_OURS = re.compile(r"\bhook (claude|codex)\b")
_NOTIFY_BLOCK = re.compile(r"# >>> koinii notify[^\n]*\n.*?# <<< koinii notify\n", re.DOTALL)
_MCP_BLOCK = re.compile(
    r"(\n?)# >>> koinii mcp( \(newline added\))?\n.*?# <<< koinii mcp\n", re.DOTALL
)


@dataclass(frozen=True)
class Options:
    """What the installed commands name: the channel, the agent (None: each process's
    KOINII_AGENT, else one derived from the runtime's session), the daemon or store, Stop
    handing news back, how to run koinii (None: `koinii` when it is on PATH, else this
    Python with `-m koinii`), and the coordinator's session the wraps go to (None: each
    process's KOINII_PARENT_SESSION)."""

    channel: str | None = None
    agent: str | None = None
    url: str | None = None
    db: str | None = None
    handback: bool = False
    command: str | None = None
    parent_session: str | None = None

    def prefix(self) -> list[str]:
        if self.command:
            return shlex.split(self.command)
        return ["koinii"] if shutil.which("koinii") else [sys.executable, "-m", "koinii"]

    def flags(self) -> list[str]:
        out: list[str] = []
        for flag, value in (
            ("--channel", self.channel),
            ("--agent", self.agent),
            ("--url", self.url),
            ("--db", self.db),
            ("--parent-session", self.parent_session),
        ):
            if value:
                out += [flag, value]
        return out + (["--handback"] if self.handback else [])

    def hook(self, runtime: str, event: str | None = None) -> list[str]:
        return [*self.prefix(), "hook", runtime, *([event] if event else []), *self.flags()]

    def server(self) -> dict[str, Any]:
        """The MCP server entry: `koinii mcp`, naming what the hooks name (the token
        comes from the environment)."""
        prefix = self.prefix()
        args = [*prefix[1:], "mcp"]
        for flag, value in (("--channel", self.channel), ("--agent", self.agent)):
            if value:
                args += [flag, value]
        env = {k: v for k, v in (("KOINII_URL", self.url), ("KOINII_DB", self.db)) if v}
        return {"command": prefix[0], "args": args, "env": env}


def _ours(command: Any) -> bool:
    return isinstance(command, str) and "koinii" in command and bool(_OURS.search(command))


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _refuse(path: Path, message: str, field: str | None = None) -> Refused:
    return Refused("runtime-settings", f"{path}: {message}", {"path": str(path), "field": field})


# --- writing a settings file so that it can be put back ------------------------------------


def _write_tracked(path: Path, old: bytes | None, new: bytes, had_ours: bool) -> bool:
    """Write `new` over `old`, remembering `old` so uninstall can put it back."""
    if new == old:
        return False
    record_path = state.install_path(path)
    record = state.read_json(record_path)
    if "written" not in record or record["written"] != _sha(old):
        if had_ours:  # Koinii's entries are there, but not as install left them
            record = {"structural": True}
        else:
            missing = []
            parent = path.parent
            while not parent.exists():
                missing.append(str(parent))
                parent = parent.parent
            record = {
                "original": None if old is None else base64.b64encode(old).decode("ascii"),
                "created_dirs": missing,
            }
    state.write_bytes(path, new)
    state.write_json(record_path, {**record, "path": str(path), "written": _sha(new)})
    return True


def _restore(path: Path, remove: Any) -> bool:
    """Put `path` back as it was before install, if it is as install left it; else
    `remove(bytes) -> bytes | None` takes Koinii's entries out of it. True: changed."""
    current = _read(path)
    record_path = state.install_path(path)
    record = state.read_json(record_path)
    changed = False
    if current is not None and record.get("written") == _sha(current) and "original" in record:
        if record["original"] is None:
            path.unlink()
            for folder in record.get("created_dirs", []):
                try:
                    os.rmdir(folder)
                except OSError:
                    break
        else:
            state.write_bytes(path, base64.b64decode(record["original"]))
        changed = True
    elif current is not None:
        stripped = remove(current)
        if stripped is not None and stripped != current:
            state.write_bytes(path, stripped)
            changed = True
    with contextlib.suppress(FileNotFoundError):
        record_path.unlink()
    return changed


# --- Claude Code ---------------------------------------------------------------------------


def claude_paths(scope: str, project_dir: str | os.PathLike | None) -> tuple[Path, Path]:
    """(the settings file, the MCP servers file) of a scope."""
    if scope == "user":
        home = Path(os.path.expanduser("~"))
        return home / ".claude" / "settings.json", home / ".claude.json"
    root = Path(project_dir or os.getcwd())
    return root / ".claude" / "settings.json", root / ".mcp.json"


def _load_json(path: Path, data: bytes | None) -> dict[str, Any]:
    if data is None or not data.strip():
        return {}
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise _refuse(path, f"is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise _refuse(path, "is not a JSON object")
    return value


def _dump_json(value: dict[str, Any], like: bytes | None) -> bytes:
    """JSON indented as the file it replaces was (2 spaces when it cannot tell)."""
    indent: int | str = 2
    if like:
        found = re.search(rb"\n([ \t]+)\S", like)
        if found:
            text = found.group(1).decode()
            indent = "\t" if "\t" in text else len(text)
    return (json.dumps(value, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")


def _hook_groups(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise _refuse(path, "its `hooks` is not an object", "hooks")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise _refuse(path, f"its `hooks.{event}` is not a list", f"hooks.{event}")
    return hooks


def _has_ours(hooks: dict[str, Any]) -> bool:
    return any(
        _ours(hook.get("command"))
        for groups in hooks.values()
        for group in groups
        if isinstance(group, dict)
        for hook in group.get("hooks") or []
        if isinstance(hook, dict)
    )


def _without_ours(hooks: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for event, groups in hooks.items():
        kept = []
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                kept.append(group)
                continue
            inner = [
                h for h in group["hooks"] if not (isinstance(h, dict) and _ours(h.get("command")))
            ]
            if inner:
                kept.append({**group, "hooks": inner})
            elif not group["hooks"]:
                kept.append(group)
        if kept:
            out[event] = kept
    return out


def install_claude(
    options: Options, scope: str = "project", project_dir: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Merge Koinii's hooks (and, with a channel, its MCP server) into Claude Code's
    settings; returns what was written."""
    settings_path, mcp_path = claude_paths(scope, project_dir)
    old = _read(settings_path)
    settings = _load_json(settings_path, old)
    hooks = _hook_groups(settings_path, settings)
    had_ours = _has_ours(hooks)
    merged = _without_ours(hooks)
    for event in CLAUDE_EVENTS:
        command = shlex.join(options.hook("claude", event))
        entry = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}
        merged.setdefault(event, []).append({"hooks": [entry]})
    settings = {**settings, "hooks": _in_order(hooks, merged)}
    wrote = (
        [str(settings_path)]
        if _write_tracked(settings_path, old, _dump_json(settings, old), had_ours)
        else []
    )
    if options.channel:
        old_mcp = _read(mcp_path)
        servers_file = _load_json(mcp_path, old_mcp)
        servers = servers_file.get("mcpServers", {})
        if not isinstance(servers, dict):
            raise _refuse(mcp_path, "its `mcpServers` is not an object", "mcpServers")
        updated = {**servers_file, "mcpServers": {**servers, SERVER: options.server()}}
        if _write_tracked(mcp_path, old_mcp, _dump_json(updated, old_mcp), SERVER in servers):
            wrote.append(str(mcp_path))
    return {
        "runtime": "claude",
        "scope": scope,
        "wrote": wrote,
        **status_claude(scope, project_dir),
    }


def _in_order(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """`after`'s events in the order `before` had them, new ones last (a re-install
    moves nothing)."""
    ordered = {event: after[event] for event in before if event in after}
    ordered.update({event: groups for event, groups in after.items() if event not in ordered})
    return ordered


def uninstall_claude(
    scope: str = "project", project_dir: str | os.PathLike | None = None
) -> dict[str, Any]:
    settings_path, mcp_path = claude_paths(scope, project_dir)

    def without_hooks(data: bytes) -> bytes | None:
        settings = _load_json(settings_path, data)
        hooks = _hook_groups(settings_path, settings)
        if not _has_ours(hooks):
            return None
        kept = _without_ours(hooks)
        settings = (
            {**settings, "hooks": kept}
            if kept
            else {k: v for k, v in settings.items() if k != "hooks"}
        )
        return _dump_json(settings, data)

    def without_server(data: bytes) -> bytes | None:
        servers_file = _load_json(mcp_path, data)
        servers = servers_file.get("mcpServers")
        if not isinstance(servers, dict) or SERVER not in servers:
            return None
        rest = {k: v for k, v in servers.items() if k != SERVER}
        servers_file = {**servers_file, "mcpServers": rest}
        return _dump_json(servers_file, data)

    changed = [
        str(path)
        for path, remove in ((settings_path, without_hooks), (mcp_path, without_server))
        if _restore(path, remove)
    ]
    return {
        "runtime": "claude",
        "scope": scope,
        "changed": changed,
        **status_claude(scope, project_dir),
    }


def status_claude(
    scope: str = "project", project_dir: str | os.PathLike | None = None
) -> dict[str, Any]:
    """What of Koinii's is in Claude Code's settings: each event's command, the server."""
    settings_path, mcp_path = claude_paths(scope, project_dir)
    try:
        hooks = _hook_groups(settings_path, _load_json(settings_path, _read(settings_path)))
    except Refused:
        hooks = {}
    events = {
        event: hook["command"]
        for event, groups in hooks.items()
        for group in groups
        if isinstance(group, dict)
        for hook in group.get("hooks") or []
        if isinstance(hook, dict) and _ours(hook.get("command"))
    }
    try:
        servers = _load_json(mcp_path, _read(mcp_path)).get("mcpServers") or {}
    except Refused:
        servers = {}
    server = servers.get(SERVER) if isinstance(servers, dict) else None
    return {
        "settings": str(settings_path),
        "hooks": events,
        "mcp_file": str(mcp_path),
        "mcp_server": server,
        "installed": sorted(events) == sorted(CLAUDE_EVENTS),
    }


# --- Codex CLI -----------------------------------------------------------------------------


def codex_home(given: str | os.PathLike | None = None) -> Path:
    return Path(given or os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex"))


def _toml_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items())
        return f"{{ {pairs} }}" if pairs else "{}"
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string is a JSON string


def _load_toml(path: Path, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _refuse(path, f"is not valid TOML ({exc})") from None


def _strip_codex(text: str) -> str:
    text = _NOTIFY_BLOCK.sub("", text)
    return _MCP_BLOCK.sub(lambda m: "" if m.group(2) else m.group(1), text)


def install_codex(options: Options, home: str | os.PathLike | None = None) -> dict[str, Any]:
    """Koinii's notify command (and, with a channel, its MCP server) in Codex's
    config.toml; returns what was written."""
    path = codex_home(home) / "config.toml"
    old = _read(path)
    text = "" if old is None else old.decode("utf-8", "surrogateescape")
    had_ours = "# >>> koinii" in text
    _load_toml(path, old)
    rest = _strip_codex(text)
    config = _load_toml(path, rest.encode("utf-8", "surrogateescape"))
    if "notify" in config:
        raise _refuse(
            path,
            f"already runs a notify command of its own ({config['notify']!r}) and Codex runs "
            "one: remove it (or wrap both in a script of yours that calls `koinii hook codex` "
            "with the JSON it is given), then install again",
            "notify",
        )
    if options.channel and SERVER in (config.get("mcp_servers") or {}):
        raise _refuse(
            path,
            f"already has an [mcp_servers.{SERVER}] table of its own: remove it, then "
            "install again",
            f"mcp_servers.{SERVER}",
        )
    top = (
        "# >>> koinii notify (koinii hooks uninstall codex takes it out)\n"
        f"notify = {_toml_value(options.hook('codex'))}\n"
        "# <<< koinii notify\n"
    )
    new = top + rest
    if options.channel:
        server = options.server()
        table = (
            f"[mcp_servers.{SERVER}]\n"
            f"command = {_toml_value(server['command'])}\n"
            f"args = {_toml_value(server['args'])}\n"
            + f"env = {_toml_value(server['env'])}\n"  # where a token of yours can go
        )
        added = rest != "" and not rest.endswith("\n")
        new += ("\n# >>> koinii mcp (newline added)\n" if added else "# >>> koinii mcp\n") + table
        new += "# <<< koinii mcp\n"
    data = new.encode("utf-8", "surrogateescape")
    _load_toml(path, data)  # what is written parses, or nothing is written
    wrote = [str(path)] if _write_tracked(path, old, data, had_ours) else []
    return {"runtime": "codex", "wrote": wrote, **status_codex(home)}


def uninstall_codex(home: str | os.PathLike | None = None) -> dict[str, Any]:
    path = codex_home(home) / "config.toml"

    def remove(data: bytes) -> bytes | None:
        text = data.decode("utf-8", "surrogateescape")
        return _strip_codex(text).encode("utf-8", "surrogateescape")

    changed = [str(path)] if _restore(path, remove) else []
    return {"runtime": "codex", "changed": changed, **status_codex(home)}


def status_codex(home: str | os.PathLike | None = None) -> dict[str, Any]:
    path = codex_home(home) / "config.toml"
    try:
        config = _load_toml(path, _read(path))
    except Refused:
        config = {}
    notify = config.get("notify")
    ours = isinstance(notify, list) and _ours(" ".join(map(str, notify)))
    server = (config.get("mcp_servers") or {}).get(SERVER)
    return {
        "config": str(path),
        "notify": notify if ours else None,
        "foreign_notify": notify if notify is not None and not ours else None,
        "mcp_server": server,
        "installed": ours,
    }
