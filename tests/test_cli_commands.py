"""Each `koinii` command: its output (`--json` parsed), its exit code and its refusals, on a
store opened in-process (`--db`) and through a real daemon (`--url`).

Exit codes (docs/cli.md): 0 done, 1 refused, 2 bad usage, 3 daemon unreachable.
"""

import json
import os
import pathlib

import pytest
from click.testing import CliRunner

import koinii
from koinii.channel import agent as channel
from koinii.cli import main
from tests.conftest import Daemon, forker, refused

NO_SOURCE_ENV = {"KOINII_URL": None, "KOINII_DB": None, "KOINII_TOKEN": None}


def koinii_(*args: str):
    return CliRunner().invoke(main, list(args), env=NO_SOURCE_ENV)


def refusal(result, kind: str) -> str:
    """The one stderr line of a refused command (exit 1), naming `kind`."""
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"koinii: {kind}: "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    return result.stderr


@pytest.fixture
def team(tmp_path) -> dict:
    """A store file where AgentAtlas claims, a rule derives, and AgentBoreas disputes."""
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        boreas = channel.join(channel.local(kb), "CxTeam", "AgentBoreas")
        claim = atlas.assert_("(usesDatabase ProdCluster Postgres)")
        rule = kb.assert_("(implies (usesDatabase ?c ?d) (hasDatabase ?c))", "CxTeam")
        (derived,) = kb.sentexes_matching("(hasDatabase ProdCluster)", "CxTeam")
        dispute = boreas.dispute(claim)
    return {
        "db": path,
        "claim": claim,
        "rule": rule,
        "derived": derived.handle,
        "dispute": dispute,
    }


@pytest.fixture(params=["embedded", "daemon"])
def source(request, team):
    """The team's store as a command reaches it: `--db FILE`, or `--url` of its daemon."""
    if request.param == "embedded":
        yield ["--db", team["db"]]
        return
    daemon = Daemon(team["db"], []).start()
    try:
        yield ["--url", daemon.url]
    finally:
        daemon.kill()


def as_json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- status -----------------------------------------------------------------------------


def test_status_tells_health_seq_counts_backend_and_writer(source, team):
    report = as_json(koinii_("status", "--json", *source))
    assert report["ok"] is True and report["backend"] == "sqlite"
    with koinii.open_kb(None) as empty:
        shipped = empty.stats()["sentexes"]
    assert report["seq"] > 0 and report["counts"]["sentexes"] > shipped
    assert report["counts"]["rules"] >= 1 and report["counts"]["derived"] >= 1
    assert report["role"] == ("writer" if source[0] == "--url" else "in-process writer")
    text = koinii_("status", *source)
    assert text.exit_code == 0 and f"seq {report['seq']}" in text.stdout
    assert "backend=sqlite" in text.stdout and report["role"] in text.stdout
    assert report["opened"]["from"] == "rows" and "built from its rows, in " in text.stdout


def test_status_says_a_store_opened_from_its_checkpoint(tmp_path):
    path = str(tmp_path / "team.db")
    with koinii.open_kb(path) as kb:
        kb.assert_("(usesDatabase ProdCluster Postgres)", "CxShared")
        seq = kb.checkpoint()["seq"]
        kb.assert_("(runsOn Postgres Debian)", "CxShared")
    text = koinii_("status", "--db", path)
    assert f"opened from its checkpoint at seq {seq} + 1 row(s) since, in " in text.stdout


# --- retract and withdraw ---------------------------------------------------------------


def test_retract_removes_a_sentex_and_what_rested_on_it(source, team):
    retracted = as_json(koinii_("retract", str(team["rule"]), "--json", *source))
    assert retracted["removed_sentexes"] == 2  # the rule and what it derived
    assert retracted["removed_justifications"] == 1 and retracted["seq"] > 0
    again = koinii_("retract", str(team["rule"]), *source)
    assert "unknown-handle" in refusal(again, "unknown-handle")
    refusal(koinii_("retract", "1", *source), "vocabulary-read-only")
    assert koinii_("retract", "not-a-number", *source).exit_code == 2


def test_withdraw_takes_back_an_agents_own_move_only(source, team):
    foreign = koinii_("withdraw", str(team["claim"]), "--agent", "AgentBoreas", *source)
    assert "AgentAtlas" in refusal(foreign, "koinii/foreign-sentex")
    mine = ["--agent", "AgentBoreas"]
    withdrawn = as_json(koinii_("withdraw", str(team["dispute"]), *mine, "--json", *source))
    assert withdrawn["removed_sentexes"] >= 2  # the dispute, its rebuttal, what followed
    assert as_json(koinii_("contradictions", "--json", *source)) == []
    assert "--channel" in koinii_("withdraw", "1", "--channel", "CxTeam", *source).stderr


def test_withdraw_needs_no_agent_or_channel_and_joins_nothing(source, team):
    before = as_json(koinii_("status", "--json", *source))["counts"]["sentexes"]
    withdrawn = as_json(koinii_("withdraw", str(team["dispute"]), "--json", *source))
    assert withdrawn["removed_sentexes"] >= 2  # as AgentBoreas, whose context holds it
    after = as_json(koinii_("status", "--json", *source))["counts"]["sentexes"]
    assert after == before - withdrawn["removed_sentexes"] + 1  # its record; no join mark
    plain = refusal(koinii_("withdraw", str(team["rule"]), *source), "koinii/not-a-move")
    assert "CxTeam, which is no agent's own context" in plain
    refusal(koinii_("withdraw", "99999", *source), "koinii/no-such-handle")


# --- why, why-not, contradictions, disputes ---------------------------------------------


def test_why_prints_the_justification_tree(source, team):
    tree = as_json(koinii_("why", str(team["derived"]), "--json", *source))
    assert tree["sentence"] == "(hasDatabase ProdCluster)" and tree["premise"] is False
    (justification,) = tree["justifications"]
    assert justification["rule"] == team["rule"]
    assert [a["handle"] for a in justification["antecedents"]] == [team["claim"]]
    lines = koinii_("why", str(team["derived"]), *source).stdout.splitlines()
    assert lines[0].startswith(f"#{team['derived']} (hasDatabase ProdCluster)")
    assert lines[1].strip().startswith(f"by rule #{team['rule']}")
    assert lines[2].startswith("    #") and "(premise, believed)" in lines[2]
    unknown = koinii_("why", "999999", *source)
    assert "not stored" in refusal(unknown, "unknown-handle")


def test_why_not_names_the_reason(source, team):
    believed = as_json(koinii_("why-not", str(team["claim"]), "--json", *source))
    assert believed == {
        "handle": team["claim"],
        "context": None,
        "believed": True,
        "reason": None,
        "defeated_by": [],
    }
    hidden = as_json(koinii_("why-not", str(team["claim"]), "-c", "CxBoreas", "--json", *source))
    assert hidden["reason"] == "not-visible" and hidden["believed"] is False
    assert koinii_("why-not", "999999", *source).stdout.strip() == "#999999: not-stored"
    refusal(koinii_("why-not", str(team["claim"]), "-c", "cx bad", *source), "naming")


def test_contradictions_and_disputes_show_the_clash(source, team):
    (clash,) = as_json(koinii_("contradictions", "-c", "CxTeam", "--json", *source))
    assert sorted(side["context"] for side in clash["sides"]) == ["CxAtlas", "CxBoreas"]
    assert as_json(koinii_("contradictions", "--conflicts", "--json", *source)) == []
    assert koinii_("contradictions", "-c", "CxAtlas", *source).stdout == "no contradictions\n"
    (dispute,) = as_json(koinii_("disputes", "-c", "CxTeam", "--json", *source))
    assert dispute["state"] == "open" and dispute["target"]["handle"] == team["claim"]
    assert [m["speaker"] for m in dispute["raised_by"]] == ["AgentBoreas"]
    text = koinii_("disputes", "-c", "CxTeam", *source).stdout
    assert "open, raised by AgentBoreas" in text and "AgentAtlas: (usesDatabase" in text
    # named by its move's handle, on the claim it disputes
    assert text.startswith(f"dispute #{team['dispute']} on #{team['claim']}: open"), text
    assert (
        as_json(koinii_("disputes", "-c", "CxTeam", "--state", "resolved", "--json", *source)) == []
    )
    assert koinii_("disputes", "-c", "CxTeam", "--state", "nope", *source).exit_code == 2


def test_the_conversation_reads_take_as_of_and_name_differing_values(tmp_path):
    path = str(tmp_path / "values.db")
    with koinii.open_kb(path) as kb:
        atlas, boreas, cyra = (
            channel.join(channel.local(kb), "CxTeam", a)
            for a in ("AgentAtlas", "AgentBoreas", "AgentCyra")
        )
        q = atlas.ask("(poolSize ProdDb ?size)")
        first = boreas.answer(q, "500")
        cyra.answer(q, "800")
        before = kb.seq
        boreas.withdraw(first)
    text = koinii_("disputes", "-c", "CxTeam", "--as-of", str(before), "--db", path).stdout
    assert text.startswith(
        f"differing values to question #{q}: 500 (AgentBoreas), 800 (AgentCyra): open;"
    ), text
    assert "raised by" not in text.splitlines()[0]
    gone = koinii_("disputes", "-c", "CxTeam", "--state", "withdrawn", "--db", path).stdout
    assert gone.startswith(f"differing values to question #{q}: 500 (AgentBoreas)"), gone
    assert "ended (withdrawn by AgentBoreas)" in gone
    (then,) = as_json(
        koinii_(
            "questions",
            "-c",
            "CxTeam",
            "--state",
            "all",
            "--as-of",
            str(before),
            "--json",
            "--db",
            path,
        )
    )
    assert (then["state"], then["answer_count"]) == ("contested", 2)
    (now,) = as_json(koinii_("questions", "-c", "CxTeam", "--state", "all", "--json", "--db", path))
    assert (now["state"], now["answer_count"]) == ("answered", 1)
    shown = koinii_("thread", str(q), "-c", "CxTeam", "--as-of", str(before), "--db", path).stdout
    assert f"#{first} AgentBoreas: (poolSize ProdDb 500)\n" in shown
    assert "AgentCyra: (poolSize ProdDb 800)" in shown
    now = koinii_("thread", str(q), "-c", "CxTeam", "--db", path).stdout
    assert f"#{first} AgentBoreas: (poolSize ProdDb 500) (withdrawn by AgentBoreas at seq" in now
    refusal(
        koinii_("thread", str(q), "-c", "CxTeam", "--as-of", "999999", "--db", path), "bad-option"
    )


def test_a_ruling_prints_as_a_sentence_not_a_dict(tmp_path):
    from koinii.client.adjudicator import Adjudicator, Policy

    path = str(tmp_path / "ruled.db")
    with koinii.open_kb(path) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        boreas = channel.join(channel.local(kb), "CxTeam", "AgentBoreas")
        claim = atlas.assert_("(usesDatabase ProdCluster Postgres)")
        boreas.dispute(claim)
        boreas.vote("against", claim)
        Adjudicator(kb, "CxTeam", Policy(quorum=1)).settle()
        [ruling] = kb.sentexes_matching("(not (usesDatabase ProdCluster Postgres))", "CxMajority")
    text = koinii_("disputes", "-c", "CxTeam", "--db", path).stdout
    assert "resolved, raised by AgentBoreas; votes 0 for, 1 against" in text
    assert (
        f"  ruled by AgentMajority against #{claim}: (not (usesDatabase ProdCluster Postgres)) "
        f"(ruling #{ruling.handle})\n"
    ) in text
    assert "{" not in text and "'arbiter'" not in text
    # why-not names what defeats the claim, and whose it is
    assert koinii_("why-not", str(claim), "--db", path).stdout == (
        f"#{claim}: defeated\n"
        f"  defeated by #{ruling.handle} (not (usesDatabase ProdCluster Postgres))  in "
        "CxMajority (monotonic, by AgentMajority)\n"
    )
    [by] = as_json(koinii_("why-not", str(claim), "--json", "--db", path))["defeated_by"]
    assert (by["handle"], by["author"]) == (ruling.handle, "AgentMajority")


# --- load -------------------------------------------------------------------------------

SENTENCES = """\
; what the ops team knows
(usesDatabase BillingCluster Postgres)
(UsesDatabase Nope)
(usesDatabase #)
(usesDatabase AuthCluster Redis)
(genlCx CxOps CxOps)
"""


@pytest.mark.parametrize("batch", ["500", "1"])
def test_load_loads_what_reads_and_reports_each_refused_line(source, tmp_path, batch):
    file = tmp_path / "ops.kif"
    file.write_text(SENTENCES)
    loaded = koinii_("load", str(file), "-c", "CxOps", "--batch", batch, "--json", *source)
    assert loaded.exit_code == 1  # something was refused
    report = json.loads(loaded.stdout)
    assert report["loaded"] == 2
    assert [(p["line"], p["kind"]) for p in report["problems"]] == [
        (3, "naming"),
        (4, "parse"),
        (6, "not-well-formed"),
    ]
    found = as_json(koinii_("query", "(usesDatabase ?c ?db)", "-c", "CxOps", "--json", *source))
    assert found == [
        {"?c": "AuthCluster", "?db": "Redis"},
        {"?c": "BillingCluster", "?db": "Postgres"},
    ]
    text = koinii_("load", str(file), "-c", "CxOps", *source)
    assert text.stdout.splitlines()[0].startswith(f"{file}:3:1: naming: ")
    assert "loaded 2 statement(s) into CxOps; refused 3" in text.stdout


def test_load_all_or_nothing_loads_nothing_of_a_bad_file(source, tmp_path):
    file = tmp_path / "ops.kif"
    file.write_text(SENTENCES)
    refusal(koinii_("load", str(file), "-c", "CxOps", "--all-or-nothing", *source), "parse")
    assert (
        as_json(koinii_("query", "(usesDatabase ?c ?db)", "-c", "CxOps", "--json", *source)) == []
    )
    good = tmp_path / "good.kif"
    good.write_text("(ready Release)\n(ready Billing)\n")
    done = as_json(koinii_("load", str(good), "-c", "CxOps", "--all-or-nothing", "--json", *source))
    assert done["loaded"] == 2 and done["problems"] == []
    assert koinii_("load", str(tmp_path / "absent.kif"), "-c", "CxOps", *source).exit_code == 2
    binary = tmp_path / "image.kif"
    binary.write_bytes(b"(ready A)\n\xff\xfe")
    assert "not UTF-8 text (byte 10)" in refusal(
        koinii_("load", str(binary), "-c", "CxOps", *source), "parse"
    )


def test_load_of_a_big_file_stays_inside_the_daemons_write_budget(tmp_path):
    daemon = Daemon(str(tmp_path / "team.db"), ["--write-budget", "0.005"]).start()
    try:
        file = tmp_path / "hosts.kif"
        file.write_text("".join(f"(hostOf Service{i} Machine{i % 7})\n" for i in range(3000)))
        # one write of them all is past the budget
        with daemon.client() as client, pytest.raises(koinii.Refused, match="budget"):
            client.load_text(file.read_text(), "CxOps", on_error="report")
        loaded = koinii_("load", str(file), "-c", "CxOps", "--json", "--url", daemon.url)
        assert as_json(loaded)["loaded"] == 3000 and json.loads(loaded.stdout)["problems"] == []
        url = ["--url", daemon.url]
        found = as_json(koinii_("query", "(hostOf ?s Machine3)", "-c", "CxOps", "--json", *url))
        assert len(found) == len(range(3, 3000, 7))
    finally:
        daemon.kill()


# --- export and backup, while the daemon runs -------------------------------------------


@pytest.fixture
def serving(team):
    """The team's store with its daemon running: what export and backup must read."""
    daemon = Daemon(team["db"], []).start()
    yield daemon
    daemon.kill()


def test_export_dumps_the_store_its_daemon_holds_and_migrate_reads_it_back(serving, team, tmp_path):
    with serving.client() as client:
        client.assert_("(ready Release)", "CxOps")
        stats = client.stats()
    dump = str(tmp_path / "team.jsonl")
    summary = as_json(koinii_("export", dump, "--db", team["db"], "--json"))
    assert summary["counts"]["sentexes"] == stats["sentexes"]
    assert summary["counts"]["changes"] == stats["seq"] and summary["bytes"] > 0
    lines = [json.loads(line) for line in pathlib.Path(dump).read_text().splitlines()]
    assert lines[0]["koinii"] == "export" and lines[0]["seq"] == stats["seq"]
    assert lines[-1] == {"end": summary["counts"]}
    said = [x["sentex"] for x in lines if "sentex" in x and x["sentex"]["handle"] == team["claim"]]
    assert said[0]["creator"] == "AgentAtlas" and said[0]["context"] == "CxAtlas"
    restored = str(tmp_path / "restored.db")
    assert koinii_("migrate", "--from", dump, "--to", restored).exit_code == 0
    with koinii.open_kb(restored, create=False) as kb:
        assert kb.stats() == stats
        assert kb.why(team["derived"])["justifications"][0]["rule"] == team["rule"]
    loaded = koinii_("load", dump, "-c", "CxOps", "--db", team["db"])
    assert f"migrate --from {dump}" in refusal(loaded, "not-sentences")
    again = koinii_("export", dump, "--db", team["db"])
    assert "exists" in refusal(again, "target-not-empty")
    refusal(koinii_("export", str(tmp_path / "team.txt"), "--db", team["db"]), "bad-option")


def test_a_cut_short_export_is_refused_not_read_as_a_smaller_store(serving, team, tmp_path):
    dump = tmp_path / "team.jsonl"
    assert koinii_("export", str(dump), "--db", team["db"]).exit_code == 0
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(dump.read_text().splitlines(keepends=True)[:-3]))
    result = koinii_("migrate", "--from", str(cut), "--to", str(tmp_path / "new.db"))
    assert "cut short" in refusal(result, "not-an-export")


def test_backup_copies_the_store_while_its_daemon_writes_on(serving, team, tmp_path):
    copy = str(tmp_path / "copy.db")
    with serving.client() as client:
        client.assert_("(ready Release)", "CxOps")
        copied = as_json(koinii_("backup", copy, "--db", team["db"], "--json"))
        assert copied["seq"] == client.seq and copied["bytes"] == os.path.getsize(copy)
        client.assert_("(ready Billing)", "CxOps")  # the daemon goes on
        stats = client.stats()
    with koinii.open_kb(copy, create=False) as kb:
        assert kb.seq == copied["seq"] == stats["seq"] - 1
        assert kb.query("(ready ?x)", "CxOps") == [{"?x": koinii.Sym("Release")}]
    assert "exists" in refusal(koinii_("backup", copy, "--db", team["db"]), "target-not-empty")
    missing = koinii_("backup", str(tmp_path / "b.db"), "--db", str(tmp_path / "nope.db"))
    refusal(missing, "no-such-store")


def test_export_and_backup_through_a_running_daemon_with_an_operators_token(team, tmp_path):
    """No --db, no stop: the daemon copies its store consistently and the CLI (a real
    process) fetches the copy; only an operator's (or an admin's) token may."""
    import subprocess

    from koinii.server.tokens import add_token

    table = str(tmp_path / "team.tokens")
    tokens = {w: add_token(table, w, r) for w, r in (("Ops", "operator"), ("AgentAtlas", "agent"))}
    daemon = Daemon(team["db"], ["--tokens", table], tokens).start()

    def cli(who: str, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "KOINII_URL": daemon.url, "KOINII_TOKEN": tokens[who]}
        env.pop("KOINII_DB", None)
        return forker().run(list(args), env=env, timeout=120)

    try:
        with daemon.client("Ops") as client:
            client.assert_("(ready Release)", "CxOps")
            copy = str(tmp_path / "copy.db")
            done = cli("Ops", "backup", copy, "--json")
            assert done.returncode == 0, done.stderr
            copied = json.loads(done.stdout)
            assert copied["seq"] == client.seq and copied["bytes"] == os.path.getsize(copy)
            client.assert_("(ready Billing)", "CxOps")  # the daemon goes on
            stats = client.stats()
        with koinii.open_kb(copy, create=False) as kb:
            assert kb.seq == copied["seq"] == stats["seq"] - 1
            assert kb.query("(ready ?x)", "CxOps") == [{"?x": koinii.Sym("Release")}]
        dump = str(tmp_path / "team.jsonl")
        done = cli("Ops", "export", dump, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["counts"]["sentexes"] == stats["sentexes"]
        restored = str(tmp_path / "restored.db")
        assert koinii_("migrate", "--from", dump, "--to", restored).exit_code == 0
        with koinii.open_kb(restored, create=False) as kb:
            assert kb.stats() == stats
        # an agent's token may not copy every context; nothing is left behind
        refused_ = cli("AgentAtlas", "backup", str(tmp_path / "x.db"))
        assert refused_.returncode == 1 and "koinii: forbidden: " in refused_.stderr
        assert not os.path.exists(tmp_path / "x.db")
        again = cli("Ops", "backup", copy)
        assert again.returncode == 1 and "target-not-empty" in again.stderr
        assert not [name for name in os.listdir(tmp_path) if ".part-" in name]
        with daemon.client("Ops") as client:
            bad = refused(lambda: client.invoke("store.backup_part", id="nope", offset=0))
            assert bad.kind == "koinii/no-such-backup"
    finally:
        daemon.kill()


def test_backup_of_a_postgresql_store_says_how_pg_dump_does_it(tmp_path):
    dsn = "postgresql://koinii@db.example:5432/team?options=-csearch_path%3Dops"
    result = koinii_("backup", str(tmp_path / "x.db"), "--db", dsn)
    line = refusal(result, "backup-by-pg-dump")
    assert "pg_dump --schema=ops" in line and "'postgresql://koinii@db.example:5432/team'" in line


# --- --json where there was none --------------------------------------------------------


def test_wraps_lists_print_json(source, team):
    assert as_json(koinii_("wraps", "list", "--json", *source)) == []
    assert as_json(koinii_("wraps", "coordinators", "--json", *source)) == []


# --- every command that reaches a daemon exits 3 when it is not there --------------------


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["assert", "(ready A)", "-c", "CxA"],
        ["retract", "5"],
        ["withdraw", "5"],
        ["why", "5"],
        ["why-not", "5"],
        ["contradictions"],
        ["disputes", "-c", "CxTeam"],
        ["wraps", "permeate", "--session", "s"],
        ["wraps", "coordinators"],
        ["sessions", "search", "x"],
    ],
    ids=lambda c: "-".join(c[:2]),
)
def test_every_command_exits_3_when_its_daemon_is_unreachable(command, unreachable_url):
    result = koinii_(*command, "--url", unreachable_url)
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("koinii: unavailable: cannot reach the daemon")


def test_load_exits_3_when_its_daemon_is_unreachable(tmp_path, unreachable_url):
    file = tmp_path / "a.kif"
    file.write_text("(ready A)\n")
    result = koinii_("load", str(file), "-c", "CxA", "--url", unreachable_url)
    assert result.exit_code == 3 and result.stderr.startswith("koinii: unavailable: ")


def test_assert_token_list_and_migrate_print_json(source, tmp_path):
    made = as_json(koinii_("assert", "(ready Release)", "-c", "CxOps", "--json", *source))
    assert isinstance(made["handle"], int)
    assert koinii_("assert", "(ready Release)", "-c", "CxOps", *source).stdout.strip() == str(
        made["handle"]
    )  # idempotent: the same handle, as a plain line
    table = str(tmp_path / "team.tokens")
    assert koinii_("token", "add", "AgentAtlas", "--tokens", table).exit_code == 0
    (entry,) = as_json(koinii_("token", "list", "--tokens", table, "--json"))
    assert entry["id"] == "AgentAtlas" and entry["role"] == "agent" and "token" not in entry


def test_export_of_a_store_on_either_backend_migrates_back(new_location, tmp_path):
    location = new_location()
    with koinii.open_kb(location) as kb:
        kb.assert_("(usesDatabase ProdCluster Postgres)", "CxOps", creator="AgentAtlas")
        stats = kb.stats()
    dump = str(tmp_path / "store.jsonl")
    assert as_json(koinii_("export", dump, "--db", location, "--json"))["counts"]["changes"] >= 1
    restored = str(tmp_path / "restored.db")
    counts = as_json(koinii_("migrate", "--from", dump, "--to", restored, "--json"))
    assert counts["sentexes"] == stats["sentexes"]
    with koinii.open_kb(restored, create=False) as kb:
        assert kb.stats() == stats
        (said,) = kb.sentexes_matching("(usesDatabase ?c ?d)", "CxOps")
        assert said.provenance["creator"] == "AgentAtlas"


def test_every_help_line_is_whole_and_plain():
    """`koinii --help` and each group's list a whole sentence per command (click cuts a
    long first sentence with "..."), and no help leans on the project's jargon."""
    import re

    import click

    def walk(group: click.Group, path: list[str]):
        listed = koinii_(*path, "--help")
        assert listed.exit_code == 0
        commands = listed.stdout.split("Commands:")[1]
        assert "..." not in commands, commands
        for name, command in group.commands.items():
            helped = koinii_(*path, name, "--help")
            assert helped.exit_code == 0, (path, name)
            assert not re.search(r"\blings?\b", helped.stdout), (path, name)
            if isinstance(command, click.Group):
                walk(command, [*path, name])

    walk(main, [])


# --- questions, thread ----------------------------------------------------------------------


def test_the_conversation_reads_from_the_shell(tmp_path):
    path = str(tmp_path / "asked.db")
    with koinii.open_kb(path) as kb:
        atlas = channel.join(channel.local(kb), "CxTeam", "AgentAtlas")
        boreas = channel.join(channel.local(kb), "CxTeam", "AgentBoreas")
        q = atlas.ask("(usesDatabase ProdCluster ?db)")
        a = boreas.answer(q, "Postgres")
        atlas.accept(a, reason="it is in the deploy config")
        claim = atlas.claim("(usesCache ProdCluster Redis)")
        boreas.dispute(claim)
    db = ["--db", path]
    assert koinii_("questions", "-c", "CxTeam", *db).stdout == (
        f"#{q} settled: AgentAtlas asked (usesDatabase ProdCluster ?db) (1 answer)\n"
    )
    assert koinii_("questions", "-c", "CxTeam", "--state", "open", *db).stdout == (
        "no questions on CxTeam in state open\n"
    )
    (entry,) = as_json(koinii_("questions", "-c", "CxTeam", "--json", *db))
    assert (entry["handle"], entry["state"]) == (q, "settled")
    text = koinii_("thread", str(q), "-c", "CxTeam", *db).stdout
    assert f"#{a} AgentBoreas: (usesDatabase ProdCluster Postgres) (accepted)" in text
    assert "accepted because: it is in the deploy config" in text
    text = koinii_("thread", str(claim), "-c", "CxTeam", *db).stdout
    assert text.startswith(f"#{claim} AgentAtlas: (usesCache ProdCluster Redis)")
    assert "open, raised by AgentBoreas" in text
    assert as_json(koinii_("thread", str(q), "-c", "CxTeam", "--json", *db))["accepted"] == a
    refusal(koinii_("thread", "999999", "-c", "CxTeam", *db), "koinii/no-such-handle")
