"""Where every `koinii` command connects: one set of source options, one default, one rule.

`--url` / `--db` / `--token` (or KOINII_URL / KOINII_DB / KOINII_TOKEN) on every command
group; a flag beats the environment; both at once is bad usage (2); with neither, the
daemon at http://127.0.0.1:7411; an unreachable daemon exits 3 from every command.
"""

import json

import click
import pytest
from click.testing import CliRunner

import koinii
from koinii.cli import main
from koinii.cli.core import DEFAULT_URL, resolve_source

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix

# One reading command of each group, as `koinii` takes it after the source options.
READERS = {
    "query": ["query", "(ready ?x)", "-c", "CxA"],
    "tail": ["tail", "--no-follow", "--since", "0"],
    "wraps": ["wraps", "list"],
    "sessions": ["sessions", "list"],
    "adjudicate": ["adjudicate", "-c", "CxA", "--once"],
}
NO_SOURCE_ENV = {"KOINII_URL": None, "KOINII_DB": None, "KOINII_TOKEN": None}


def koinii_(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env={**NO_SOURCE_ENV, **(env or {})})


@pytest.fixture
def store(tmp_path) -> str:
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        kb.assert_("(ready Release)", "CxA")
    return path


def test_with_no_source_a_command_talks_to_the_daemon_where_serve_listens():
    with click.Context(main):
        assert resolve_source(None, None) == (None, DEFAULT_URL)
    assert DEFAULT_URL == "http://127.0.0.1:7411"  # `koinii serve`'s --host and --port
    assert f"default: {DEFAULT_URL}" in koinii_("wraps", "list", "--help").output


@pytest.mark.parametrize("group", READERS)
def test_every_group_reads_a_store_named_by_db_or_koinii_db(group, store):
    assert koinii_(*READERS[group], "--db", store).exit_code == 0
    assert koinii_(*READERS[group], env={"KOINII_DB": store}).exit_code == 0


@pytest.mark.parametrize("group", READERS)
def test_every_group_reaches_a_daemon_by_url_or_koinii_url(group, daemon):
    by_flag = koinii_(*READERS[group], "--url", daemon.url)
    assert by_flag.exit_code == 0, by_flag.output
    by_env = koinii_(*READERS[group], env={"KOINII_URL": daemon.url})
    assert by_env.exit_code == 0, by_env.output


@pytest.mark.parametrize("group", READERS)
def test_an_unreachable_daemon_exits_3_from_every_group(group, unreachable_url):
    result = koinii_(*READERS[group], "--url", unreachable_url)
    assert result.exit_code == 3, result.output
    assert result.output.startswith("koinii: unavailable: ")
    assert "koinii serve" in result.output and "--db" in result.output  # what to do


@pytest.mark.parametrize("group", READERS)
def test_two_sources_at_once_are_bad_usage(group, store, unreachable_url):
    flags = koinii_(*READERS[group], "--db", store, "--url", unreachable_url)
    assert flags.exit_code == 2 and "--db and --url" in flags.output
    both_env = koinii_(*READERS[group], env={"KOINII_DB": store, "KOINII_URL": unreachable_url})
    assert both_env.exit_code == 2 and "KOINII_DB and KOINII_URL" in both_env.output


def test_a_flag_beats_the_environment(store, daemon, unreachable_url):
    by_flag = koinii_(*READERS["query"], "--db", store, env={"KOINII_URL": unreachable_url})
    assert by_flag.exit_code == 0
    over = koinii_(*READERS["query"], "--url", daemon.url, "--json", env={"KOINII_DB": store})
    assert over.exit_code == 0 and json.loads(over.output) == []  # the daemon's, not the file's


def test_koinii_token_is_the_token_of_every_group(start_daemon):
    daemon = start_daemon(principals={"AgentAtlas": "agent"})
    for group in ("query", "wraps", "sessions"):
        refused = koinii_(*READERS[group], "--url", daemon.url)
        assert refused.exit_code == 1 and refused.output.startswith("koinii: unauthorized:")
        let_in = koinii_(
            *READERS[group],
            "--url",
            daemon.url,
            env={"KOINII_TOKEN": daemon.tokens["AgentAtlas"]},
        )
        assert let_in.exit_code == 0, (group, let_in.output)


def test_debug_is_taken_after_a_subcommand_too(store):
    assert koinii_("--debug", *READERS["query"], "--db", store).exit_code == 0
    assert koinii_(*READERS["query"], "--db", store, "--debug").exit_code == 0
    assert koinii_("wraps", "--debug", "list", "--db", store).exit_code == 0
    quoted = koinii_("assert", "--db", store, "-c", "CxA", "--", "--debug")
    assert quoted.exit_code == 1  # after --, it is the sentence (refused), not the flag
