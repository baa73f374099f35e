"""`koinii hooks install|uninstall|status claude|codex`, and `koinii hook`, what the
runtimes run (docs/runtimes.md; the logic is koinii.runtimes).

`koinii hook …` reads the same environment as `koinii mcp` (KOINII_URL, KOINII_TOKEN,
KOINII_DB, KOINII_CHANNEL, KOINII_AGENT, KOINII_PROJECT), so one export serves both;
`hooks install` writes what it was given (never the token) into the commands.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from koinii.cli.core import resolve_source, source_options
from koinii.cli.lazy import LazyChoice

if TYPE_CHECKING:  # the hooks bring the engine: imported when a hook runs, not at start-up
    from koinii.runtimes.hooks import Config

RUNTIMES = LazyChoice("koinii.runtimes.settings", "RUNTIMES")


def _options(run_: object) -> object:
    for decorator in reversed(
        (
            click.option(
                "--channel", default=None, help="The channel the agent joins, e.g. CxDeploy."
            ),
            click.option(
                "--agent",
                default=None,
                help="The agent's id [default: each process's KOINII_AGENT, else one derived "
                "from the runtime's session id].",
            ),
            click.option(
                "--url", default=None, help="The daemon [default: KOINII_URL, else the local one]."
            ),
            click.option(
                "--db", default=None, metavar="PATH|DSN", help="A store opened in-process instead."
            ),
            click.option(
                "--handback",
                is_flag=True,
                help="At Stop, hand back to the agent what concerns it (off by default).",
            ),
            click.option(
                "--parent-session",
                default=None,
                help="The coordinator's session the wraps go to [default: each process's "
                "KOINII_PARENT_SESSION].",
            ),
            click.option(
                "--command",
                "command_",
                default=None,
                help="How the runtime runs koinii [default: `koinii` when on PATH, else this "
                "Python with -m koinii].",
            ),
        )
    ):
        run_ = decorator(run_)
    return run_


def _where(run_: object) -> object:
    run_ = click.option(
        "--scope",
        type=click.Choice(["project", "user"]),
        default="project",
        show_default=True,
        help="Claude Code: the project's .claude/settings.json and .mcp.json, or the user's "
        "~/.claude/settings.json and ~/.claude.json.",
    )(run_)
    run_ = click.option(
        "--project-dir",
        default=None,
        type=click.Path(file_okay=False),
        help="Claude Code, project scope: the project [default: the working directory].",
    )(run_)
    return click.option(
        "--codex-home",
        envvar="CODEX_HOME",
        default=None,
        type=click.Path(file_okay=False),
        help="Codex: its home, where config.toml is [env: CODEX_HOME; default: ~/.codex].",
    )(run_)


@click.group("hooks", short_help="Install Koinii in Claude Code or Codex CLI, and undo it.")
def hooks() -> None:
    """Koinii inside Claude Code and Codex CLI: install, uninstall, status."""


def _print(result: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    for key in ("wrote", "changed"):
        for path in result.get(key, []):
            click.echo(f"{'wrote' if key == 'wrote' else 'restored'} {path}")
    if result["runtime"] == "claude":
        click.echo(f"settings: {result['settings']}")
        for event, command in result["hooks"].items():
            click.echo(f"  {event}: {command}")
        server = result["mcp_server"]
        click.echo(f"mcp server ({result['mcp_file']}): {'koinii' if server else 'none'}")
    else:
        click.echo(f"config: {result['config']}")
        click.echo(f"  notify: {' '.join(result['notify']) if result['notify'] else 'not Koinii'}")
        if result["foreign_notify"]:
            click.echo(f"  (a notify of its own: {result['foreign_notify']})")
        click.echo(f"  mcp server: {'koinii' if result['mcp_server'] else 'none'}")
    click.echo(f"installed: {'yes' if result['installed'] else 'no'}")


@hooks.command("install", short_help="Add Koinii's hooks (and its MCP server) to a runtime.")
@click.argument("runtime", type=RUNTIMES)
@_options
@_where
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def install(
    runtime,
    channel,
    agent,
    url,
    db,
    handback,
    parent_session,
    command_,
    scope,
    project_dir,
    codex_home,
    as_json,
):
    """Merge Koinii's hooks (and, with --channel, its MCP server) into RUNTIME's settings.

    Idempotent; what is there already stays. The token is never written: the hooks and
    the MCP server read KOINII_TOKEN from the environment the runtime runs in.
    """
    from koinii.runtimes import settings

    options = settings.Options(channel, agent, url, db, handback, command_, parent_session)
    if runtime == "claude":
        _print(settings.install_claude(options, scope, project_dir), as_json)
    else:
        _print(settings.install_codex(options, codex_home), as_json)


@hooks.command("uninstall", short_help="Take Koinii out of a runtime's settings.")
@click.argument("runtime", type=RUNTIMES)
@_where
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def uninstall(runtime, scope, project_dir, codex_home, as_json):
    """Take Koinii out of RUNTIME's settings: byte for byte as before install, if the
    file is as install left it; else only Koinii's entries go."""
    from koinii.runtimes import settings

    if runtime == "claude":
        _print(settings.uninstall_claude(scope, project_dir), as_json)
    else:
        _print(settings.uninstall_codex(codex_home), as_json)


@hooks.command("status")
@click.argument("runtime", type=RUNTIMES)
@_where
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def status(runtime, scope, project_dir, codex_home, as_json):
    """What of Koinii's is in RUNTIME's settings."""
    from koinii.runtimes import settings

    if runtime == "claude":
        _print({"runtime": "claude", **settings.status_claude(scope, project_dir)}, as_json)
    else:
        _print({"runtime": "codex", **settings.status_codex(codex_home)}, as_json)


def _config(channel, agent, url, token, db, handback, project, parent_session) -> Config | None:
    """The hook's Config, its source chosen by the rule every command follows
    (`koinii.cli.core.resolve_source`); None, and a line in the hooks' log, when it names
    two stores: a hook never fails the agent, even on a usage error."""
    from koinii.runtimes import state
    from koinii.runtimes.hooks import Config

    try:
        db, url = resolve_source(db, url)
    except click.UsageError as error:
        state.log(f"hook: {error.message}")
        return None
    return Config(
        channel=channel,
        agent=agent,
        url=url,
        token=token,
        db=db,
        project=project,
        parent_session=parent_session,
        handback=handback,
    )


def _hook_options(run_: object) -> object:
    for name, env, text in (
        ("--channel", "KOINII_CHANNEL", "The channel the agent joins."),
        ("--agent", "KOINII_AGENT", "The agent's id [default: derived from the session id]."),
        (
            "--project",
            "KOINII_PROJECT",
            "The project wraps are filed under [default: the git "
            "repository of the session's directory].",
        ),
        (
            "--parent-session",
            "KOINII_PARENT_SESSION",
            "The coordinator's session this agent's wraps go to.",
        ),
    ):
        run_ = click.option(name, envvar=env, default=None, help=f"{text} [env: {env}]")(run_)
    run_ = click.option(
        "--handback/--no-handback",
        envvar="KOINII_HANDBACK",
        default=False,
        help="At Stop, hand back what concerns the agent [env: KOINII_HANDBACK].",
    )(run_)
    return source_options(run_)  # --url, --token, --db: as every command takes them


@click.group("hook", short_help="What the runtimes run (installed by `koinii hooks install`).")
def hook() -> None:
    """What Claude Code and Codex CLI run; `koinii hooks install` writes the commands.
    Exits 0 whatever Koinii's trouble (logged under the Koinii state directory)."""


@hook.command("claude", short_help="A Claude Code hook: the event's JSON on stdin.")
@click.argument("event", type=click.Choice(["SessionStart", "Stop", "SubagentStop", "SessionEnd"]))
@_hook_options
def hook_claude(event, channel, agent, project, parent_session, handback, url, token, db):
    """A Claude Code command hook: the event's JSON on stdin; prints only what the agent
    is meant to read."""
    from koinii.runtimes.hooks import run

    raw = sys.stdin.read()
    config = _config(channel, agent, url, token, db, handback, project, parent_session)
    out = run("claude", event, raw, config) if config is not None else ""
    if out:
        click.echo(out)


@hook.command("codex")
@click.argument("payload", required=False)
@_hook_options
def hook_codex(payload, channel, agent, project, parent_session, handback, url, token, db):
    """Codex CLI's notify: the event's JSON is the last argument."""
    from koinii.runtimes.hooks import run

    config = _config(channel, agent, url, token, db, handback, project, parent_session)
    if config is not None:
        run("codex", None, payload or "", config)


COMMANDS = (hooks, hook)
