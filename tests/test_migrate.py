"""Moving a store SQLite → PostgreSQL → SQLite keeps every record, handle and seq."""

import subprocess
import sys

import pytest

import koinii
from koinii import Refused
from koinii.kb.store import RECORD_SCHEMAS, open_store
from koinii.kb.store.migrate import migrate
from koinii.operations import load_domains
from tests.conftest import pg_location


@pytest.fixture
def pg(postgres):
    schemas: list[str] = []
    yield lambda: pg_location(postgres, schemas)
    for schema in schemas:
        postgres.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def build_store(path: str) -> None:
    """A store with every kind of record the engine keeps."""
    load_domains()
    with koinii.open_kb(path) as kb:
        kb.assert_("(genlCx CxTeam CxAtlas)", "CxUniverse")
        kb.assert_("(implies (and (parent ?x ?y) (parent ?y ?z)) (grandparent ?x ?z))", "CxAtlas")
        kb.assert_("(parent Ann Bob)", "CxAtlas", creator="AgentAtlas", provenance={"note": "é"})
        kb.assert_("(parent Bob Cy)", "CxAtlas", strength="monotonic")
        claim = kb.assert_("(ready Release)", "CxAtlas")
        kb.assert_("(not (ready Release))", "CxTeam")
        kb.assert_(f"(except (sentexHandle {claim}))", "CxTeam")
        gone = kb.assert_('(says AgentAtlas "bye" 1.5 true)', "CxAtlas")
        kb.retract(gone)  # a handle that must never be reused
        kb.edit(add=[("(p A)", "CxAtlas"), ("(p B)", "CxAtlas")])
        kb.compact_log(3)
        for domain, (migrations, _) in RECORD_SCHEMAS.items():
            kb.ensure_schema(domain, migrations)


def snapshot(location: str) -> dict:
    load_domains()
    store = open_store(location)
    try:
        loaded = store.load()
        records = {}
        for _, tables in RECORD_SCHEMAS.values():
            for table in tables:
                records[table] = sorted(
                    store.read(
                        lambda db, t=table: [tuple(r) for r in db.execute(f"SELECT * FROM {t}")]
                    ),
                    key=repr,
                )
        return {
            "sentexes": sorted((vars(r) for r in loaded.sentexes), key=lambda r: r["handle"]),
            "justifications": sorted(
                (vars(j) for j in loaded.justifications), key=lambda j: j["id"]
            ),
            "next_handle": loaded.next_handle,
            "seq": loaded.seq,
            "floor": loaded.floor,
            "log": [tuple(row) for row in store.export_log()],
            "records": records,
        }
    finally:
        store.close()


def test_sqlite_to_postgres_to_sqlite_compares_equal(tmp_path, pg):
    first, there, back = str(tmp_path / "first.db"), pg(), str(tmp_path / "back.db")
    build_store(first)
    migrate(first, there)
    migrate(there, back)
    original = snapshot(first)
    assert snapshot(there) == original
    assert snapshot(back) == original
    with koinii.open_kb(first) as a, koinii.open_kb(back) as b:
        assert a.stats() == b.stats()
        assert a.assert_("(fresh Handle)", "CxAtlas") == b.assert_("(fresh Handle)", "CxAtlas")


def test_migrating_into_a_store_that_is_not_empty_is_refused(tmp_path):
    source, target = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    build_store(source)
    koinii.open_kb(target).close()  # a new store holds the shipped vocabulary
    with pytest.raises(Refused) as refusal:
        migrate(source, target)
    assert refusal.value.kind == "target-not-empty"


def test_the_migrate_command(tmp_path):
    source, target = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    build_store(source)
    result = subprocess.run(
        [sys.executable, "-m", "koinii", "migrate", "--from", source, "--to", target],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "sentexes" in result.stdout
    again = subprocess.run(
        [sys.executable, "-m", "koinii", "migrate", "--from", source, "--to", target],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 1 and "target-not-empty" in again.stderr


def test_a_process_that_has_not_registered_a_domains_tables_is_refused_not_left_short(
    tmp_path,
):
    """The engine copies the record tables registered in its process; a source holding a
    domain's records whose tables are not registered is refused, never copied without
    them (in a fresh interpreter: this one has imported every domain)."""
    source, target = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    build_store(source)
    program = (
        "import sys\n"
        "from koinii import Refused\n"
        "from koinii.kb.store.migrate import migrate\n"
        "try:\n"
        "    migrate(sys.argv[1], sys.argv[2])\n"
        "except Refused as refused:\n"
        "    print(refused.kind, sorted(refused.data['domains']))\n"
        "from koinii.operations import load_domains\n"
        "load_domains()\n"
        "print(' '.join(sorted(migrate(sys.argv[1], sys.argv[2]))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, source, target],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    refusal, counts = done.stdout.splitlines()
    assert refusal == "unregistered-records ['sessions', 'wraps']"
    assert {"session", "turn", "wrap_notification"} <= set(counts.split())  # once loaded
