"""`koinii wraps`: thin commands over the queue, on a store file or through a daemon."""

import pytest
from click.testing import CliRunner

import koinii
from koinii.channel import agent as channel
from koinii.cli import main
from koinii.wraps import Coordinators, WrapQueue, wrap_session


@pytest.fixture
def store(tmp_path):
    """A store file with coordinator A, a ling's wrap into A's session, and a processed wrap."""
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        Coordinators(kb).register("AgentCoordA", project_id="hive", session_id="session:a", pid=9)
        ling = channel.join(channel.local(kb), "CxHive", "AgentLingA")
        wrap_session(
            ling,
            session_id="session:ling-a",
            parent_session_id="session:a",
            project_id="hive:api",
            notes=["cursor pagination"],
            wrap_id="wrap-a",
        )
        WrapQueue(kb).add_wrap_notification("wrap-old", project_id="hive-mcp")
        WrapQueue(kb).mark_wrap_processed("wrap-old")
    return path


def koinii_(*args):
    return CliRunner().invoke(main, list(args))


def test_list_prints_the_unprocessed_wraps_as_a_table(store):
    result = koinii_("wraps", "list", "--db", store)
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()
    assert header.split()[:3] == ["WRAP", "AGENT", "SESSION"]
    assert row.split()[:5] == ["wrap-a", "AgentLingA", "session:ling-a", "session:a", "hive:api"]
    assert "notes=1 decisions=0 conventions=0" in row


def test_list_filters_like_the_queue_reads(store):
    assert "wrap-a" in koinii_("wraps", "list", "--db", store, "--session", "session:a").output
    assert koinii_("wraps", "list", "--db", store, "--session", "session:b").output == (
        "no wraps\n"
    )
    assert koinii_("wraps", "list", "--db", store, "--project", "hive").output == "no wraps\n"
    children = koinii_("wraps", "list", "--db", store, "--project", "hive", "--children")
    assert "wrap-a" in children.output and "wrap-old" not in children.output
    everything = koinii_("wraps", "list", "--db", store, "--all").output.splitlines()
    assert everything[0].split()[-1] == "PROCESSED"
    assert [(line.split()[0], line.split()[-1]) for line in everything[1:]] == [
        ("wrap-a", "no"),
        ("wrap-old", "yes"),
    ]


def test_permeate_prints_what_it_absorbed_and_a_second_run_finds_nothing(store):
    result = koinii_("wraps", "permeate", "--db", store, "--session", "session:a")
    assert result.exit_code == 0, result.output
    assert '(memoryNote AgentLingA "cursor pagination")' in result.output
    assert result.output.rstrip().endswith("permeated 1 wrap(s) from AgentLingA")
    again = koinii_("wraps", "permeate", "--db", store, "--session", "session:a")
    assert again.output.rstrip().endswith("permeated 0 wrap(s) from nobody")


def test_coordinators_lists_the_registry(store):
    result = koinii_("wraps", "coordinators", "--db", store, "--status", "active")
    [row] = result.output.splitlines()[1:]
    assert row.split()[:5] == ["AgentCoordA", "hive", "session:a", "active", "9"]
    assert koinii_("wraps", "coordinators", "--db", store, "--status", "stale").output == (
        "no coordinators\n"
    )


def test_a_refusal_is_one_line_with_its_kind_and_a_non_zero_exit(store):
    result = koinii_("wraps", "list", "--db", store, "--project", "")
    assert result.exit_code == 1
    assert result.output == "koinii: bad-option: project_id is empty\n"


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--db", "STORE", "--url", "http://127.0.0.1:7411"],
        ["list", "--db", "STORE", "--session", "s", "--project", "p"],
        ["list", "--db", "STORE", "--children"],
        ["permeate", "--db", "STORE"],
    ],
)
def test_a_malformed_command_is_a_usage_error(store, args):
    result = koinii_("wraps", *(store if a == "STORE" else a for a in args))
    assert result.exit_code == 2, result.output


def test_a_store_that_is_not_there_is_refused_by_name():
    result = koinii_("wraps", "list", "--db", "no-such.db")
    assert result.exit_code == 1
    assert result.output.startswith("koinii: no-such-store: there is no store at no-such.db")


def test_over_a_daemon_the_commands_take_a_url_and_a_token(start_daemon):
    daemon = start_daemon(principals={"AgentCoordA": "agent", "AgentLingA": "agent"})
    Coordinators(daemon.client("AgentCoordA")).register(
        "AgentCoordA", project_id="hive", session_id="session:a"
    )
    ling = channel.join(channel.wire(daemon.client("AgentLingA")), "CxHive", "AgentLingA")
    wrap_session(ling, session_id="l", parent_session_id="session:a", notes=["n"], wrap_id="w")
    token = daemon.tokens["AgentCoordA"]
    listed = koinii_("wraps", "list", "--url", daemon.url, "--token", token)
    assert listed.output.splitlines()[1].split()[0] == "w"
    permeated = koinii_(
        "wraps", "permeate", "--url", daemon.url, "--token", token, "--session", "session:a"
    )
    assert "permeated 1 wrap(s) from AgentLingA" in permeated.output
    unknown = koinii_("wraps", "list", "--url", daemon.url, "--token", "kt_wrong")
    assert unknown.exit_code == 1 and unknown.output.startswith("koinii: unauthorized:")
