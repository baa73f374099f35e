"""One name and one argument order per capability on every surface: each move is an
operation (`moves.<name>`) with its route in the OpenAPI document, a method of the same
name on both agents taking its fields in the operation's order, and an MCP tool of the
same name taking them in that order too (checked against the tool schemas the official
SDK lists)."""

from __future__ import annotations

import asyncio
import inspect

from koinii.channel import agent as channel
from koinii.client import aio_agent as achannel
from koinii.mcp import build_server
from koinii.operations import load_domains
from koinii.server.openapi import openapi_document

MOVES = sorted(name.removeprefix("moves.") for name in load_domains() if name.startswith("moves."))
# a tool's own ways of giving a field (answer's `bindings` is its `content` as a map)
TOOL_ONLY = {"bindings"}
NOT_TOOLS = {"join", "reply_many", "not_understood", "refuse"}  # made for the agent, or not
READS = {
    "thread": "conversation.thread",
    "questions": "conversation.questions",
    "disputes": "conversation.disputes",
    "members": "conversation.members",
}

# the MCP tools that are one read each, taking its fields in its order (after the channel)
TOOL_READS = {
    "channels": "conversation.channels",
    "why_not": "belief.why_not",
}


def fields_of(name: str) -> list[str]:
    """An operation's fields after the acting agent (or the channel), in their order."""
    return [f for f in load_domains()[name].fields if f not in ("agent", "channel")]


def parameters(method) -> list[str]:
    return [
        p.name
        for p in inspect.signature(method).parameters.values()
        if p.name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD
    ]


def test_every_operation_has_its_route():
    paths = openapi_document()["paths"]
    for op in load_domains().values():
        assert f"/v1/{op.route}" in paths, op.name


def test_both_agents_make_every_move_with_the_operations_fields_in_order():
    for move in set(MOVES) - {"join"}:
        wanted = fields_of(f"moves.{move}")
        for agent in (channel.Agent, achannel.Agent):
            method = getattr(agent, move)
            got = parameters(method)
            required = [f for f in wanted if load_domains()[f"moves.{move}"].fields[f][1]]
            assert got[: len(required)] == required, (agent.__module__, move, got, wanted)
            assert got == wanted[: len(got)], (agent.__module__, move, got, wanted)
    for read, name in READS.items():
        for agent in (channel.Agent, achannel.Agent):
            got = parameters(getattr(agent, read))
            assert got == fields_of(name)[: len(got)], (read, got)


def test_every_mcp_move_tool_is_its_operation_with_the_same_argument_order(tmp_path):
    server = build_server("AgentAtlas", "CxTeam", db=str(tmp_path / "kb.db"))
    tools = {tool.name: tool for tool in asyncio.run(server.list_tools())}
    for move in set(MOVES) - NOT_TOOLS:
        assert move in tools, move
        arguments = [a for a in tools[move].inputSchema["properties"] if a not in TOOL_ONLY]
        assert arguments == fields_of(f"moves.{move}")[: len(arguments)], (move, arguments)
    for read in set(READS) - {"members"}:  # (the roster tool is still to come)
        assert read in tools, read
    for tool, name in TOOL_READS.items():
        arguments = list(tools[tool].inputSchema["properties"])
        assert arguments == fields_of(name), (tool, arguments)


# --- the engine's verbs ------------------------------------------------------------------------

# The clients' methods keep the `KB`'s parameter names (a program moves between the two by
# changing how it opens the store): the operation's `context` is their `ctx` where the KB
# reads at a context, `load_text` takes a path or the text itself (`source`), and `check`
# takes its write options as keywords. `budget_ms` is `Client.budget(...)`, not a parameter.
KB_NAMES = {"context": "ctx"}
AS_KEYWORDS = {"check": ["opts"]}
RENAMED = {"load_text": {"text": "source"}}


def method_name(op) -> str:
    return "assert_" if op.name == "assert" else op.name


def expected_parameters(op, method) -> list[str]:
    names = [f for f in op.fields if f != "budget_ms"]
    names = [RENAMED.get(op.name, {}).get(f, f) for f in names]
    if op.name in AS_KEYWORDS:
        return names[:2] + AS_KEYWORDS[op.name]
    given = set(inspect.signature(method).parameters)
    return [KB_NAMES[f] if f in KB_NAMES and KB_NAMES[f] in given else f for f in names]


def all_parameters(method) -> list[str]:
    return [p for p in inspect.signature(method).parameters if p != "self"]


def test_every_engine_verb_is_a_method_of_both_clients_with_its_fields_in_order():
    from koinii.client.aio import AsyncClient
    from koinii.client.sync import Client
    from koinii.server.verbs import served

    verbs = [op for op in served() if op.on == "daemon"]
    assert len(verbs) >= 30
    for op in verbs:
        for client in (Client, AsyncClient):
            method = getattr(client, method_name(op), None)
            assert method is not None, (client.__name__, op.name)
            assert all_parameters(method) == expected_parameters(op, method), (
                client.__name__,
                op.name,
            )


def test_every_served_operation_is_declared_once_with_a_known_schedule():
    from koinii.operations import SCHEDULES
    from koinii.server.verbs import served

    ops = served()
    assert len({op.route for op in ops}) == len(ops)
    for op in ops:
        assert op.schedule in SCHEDULES, op.name
        assert op.summary and all(len(spec) == 3 for spec in op.fields.values()), op.name


SOURCE = {"as_json", "quiet", "url", "token", "db"}  # the shell's own options
SHELL_READS = {"conversation.channels", "conversation.questions", "conversation.thread"} | {
    "conversation.disputes",
    "belief.why_not",
}


def _shell_commands() -> dict[str, tuple[str, object]]:
    """operation -> (command name, command), for every command that names its operation."""
    from koinii.cli import main

    commands = {name: main.commands[name] for name in main.list_commands(None)}
    return {
        command.operation: (name, command)
        for name, command in commands.items()
        if getattr(command, "operation", None)
    }


def test_every_shell_command_is_its_operation_with_the_same_argument_order():
    """`koinii <command>` that names its operation (`cli.core.runs`): its arguments are
    the operation's required fields in their order, its options fields of the same
    names, and every required field is one or the other; a move also takes --agent."""
    import click

    from koinii.server.verbs import served

    verbs = {op.name: op for op in served() if op.on == "daemon"}
    for operation, (name, command) in _shell_commands().items():
        op = load_domains().get(operation) or verbs[operation]
        params = {p.name: p for p in command.params if p.name not in SOURCE}
        arguments = [p.name for p in params.values() if isinstance(p, click.Argument)]
        assert set(params) <= set(op.fields), (name, set(params) - set(op.fields))
        assert arguments == [f for f in op.fields if f in arguments], (name, arguments)
        required = [f for f in op.fields if op.fields[f][1]]
        assert set(required) <= set(params), (name, set(required) - set(params))
        if operation.startswith("moves."):
            assert arguments == [f for f in required if f != "agent"], (name, arguments)
            assert {"agent", "url", "token", "db"} <= {p.name for p in command.params}, name


def test_every_move_and_conversation_read_has_its_shell_command():
    shell = _shell_commands()
    moves = {f"moves.{m}" for m in set(MOVES) - NOT_TOOLS - {"withdraw"}} | {"moves.join"}
    assert moves | SHELL_READS <= set(shell), (moves | SHELL_READS) - set(shell)
    assert all(name == operation.rpartition(".")[2].replace("_", "-")
               for operation, (name, _) in shell.items()), shell  # fmt: skip
