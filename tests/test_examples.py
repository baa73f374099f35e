"""The examples the README points at run as written."""

import pathlib
import subprocess
import sys

import pytest

# The example programs, run: slow, so CI runs it after the main suite (pytest -m slow).
pytestmark = pytest.mark.slow

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


def test_quickstart_writes_queries_and_reopens(tmp_path):
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py"), str(tmp_path / "kb.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "(dependsOn ProdCluster Debian)" in result.stdout or "Debian" in result.stdout


def test_two_agents_in_two_processes_converse_through_a_daemon():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "two_agents.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "[atlas]  heard AgentBoreas answer: (usesDatabase ProdCluster PostgreSQL14)" in out
    assert "[atlas]  the question is settled" in out


def test_two_asyncio_agents_converse_through_a_daemon():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "async_agents.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "[boreas] saw (queries AgentAtlas (quote (usesDatabase ProdCluster ?db)))" in out
    assert "[atlas]  heard AgentBoreas answer: (usesDatabase ProdCluster PostgreSQL14)" in out
    assert "[atlas]  the question is settled" in out
