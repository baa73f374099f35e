"""docs/cli.md runs: every ```sh block, line by line and in order, against a real daemon.

The page promises it (its opening): a fresh directory, a daemon serving team.db there at
KOINII_URL, each line exiting 0 unless it ends in `# exit N`. Variables carry from line
to line and block to block (`H=$(koinii assert …)` then `koinii why $H`), as in a shell.
"""

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import Daemon

# The CLI reference's examples, run: slow, so CI runs it after the main suite (pytest -m slow).
pytestmark = pytest.mark.slow

DOC = pathlib.Path(__file__).parent.parent / "docs" / "cli.md"
BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)
EXPECTED = re.compile(r"#\s*exit\s+(\d+)\s*$")


def script_of(doc: str) -> str:
    """One bash script: each line of each block, then a check of its exit code."""
    lines = ["set -u"]
    for number, block in enumerate(BLOCK.findall(doc), 1):
        for line in block.splitlines():
            if not line.strip():
                continue
            expected = EXPECTED.search(line)
            want = int(expected.group(1)) if expected else 0
            where = shlex.quote(f"block {number}: {line.strip()}")
            lines.append(line)
            lines.append(
                f'rc=$?; if [ "$rc" -ne {want} ]; then echo "exit $rc, not {want}:" {where} >&2; '
                "exit 99; fi"
            )
    return "\n".join(lines) + "\n"


def test_the_cli_reference_examples_run_against_a_daemon(tmp_path):
    doc = DOC.read_text()
    assert BLOCK.findall(doc), "docs/cli.md has no ```sh examples"
    daemon = Daemon(str(tmp_path / "team.db"), []).start()
    try:
        env = {
            **os.environ,
            "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "KOINII_URL": daemon.url,
            # `koinii hooks` keeps what it installed over in the state directory, and
            # writes Codex's settings in its home: the test's own, not the user's
            "KOINII_STATE_DIR": str(tmp_path / "state"),
            "CODEX_HOME": str(tmp_path / "codex"),
        }
        for name in ("KOINII_DB", "KOINII_TOKEN", "KOINII_INTROSPECTION"):
            env.pop(name, None)
        ran = subprocess.run(
            ["bash", "-c", script_of(doc)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        daemon.kill()
    assert ran.returncode == 0, ran.stderr[-3000:]


def test_every_command_has_its_section_and_an_example():
    from koinii.cli import main

    doc = DOC.read_text()
    for name in main.commands:
        assert f"**`koinii {name}" in doc, f"docs/cli.md does not describe `koinii {name}`"
    examples = "\n".join(re.findall(r"```(?:sh|text)\n(.*?)```", doc, re.DOTALL))
    for name in main.commands:
        assert f"koinii {name}" in examples, f"docs/cli.md has no example of `koinii {name}`"
