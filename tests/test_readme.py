"""The README runs as written: its quick start is exactly the two commands CI runs, and
every shell and Python block of "Run it for real" runs in order, in one shell, against a
real daemon on a port of its own: the one the system gave it (port 0)."""

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import wait_until

ROOT = pathlib.Path(__file__).parent.parent
README = ROOT / "README.md"


def quick_start_commands() -> list[str]:
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)]


def test_the_quick_start_is_two_commands_and_ci_runs_both_verbatim():
    commands = quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    assert "koinii demo" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in commands:
        assert command in ci


def runnable_blocks() -> list[tuple[str, str]]:
    """The shell and Python blocks after the quick start (which CI runs itself, above),
    but for the one that configures another program (`claude mcp add`: it would change
    the machine's Claude Code set-up, and needs Claude Code)."""
    section = README.read_text().split("## Run it for real", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(sh|python)\n(.*?)```", section, re.DOTALL)
    return [(lang, code) for lang, code in blocks if not code.startswith("claude ")]


@pytest.mark.slow  # the README's blocks against a real daemon: CI runs it after the main suite
def test_every_block_of_run_it_for_real_runs_in_order(tmp_path):
    port = 0  # the daemon's, once the block that starts it has run
    port_file = tmp_path / ".port"

    def here(code: str) -> str:  # the README's port, 7411, is the one its daemon got
        code = code.replace("koinii serve ", f"koinii serve --port 0 --port-file {port_file.name} ")
        return code.replace("127.0.0.1:7411", f"127.0.0.1:{port}") if port else code

    # the clone as the README's reader has it: the sample data, and a .venv whose
    # activate puts this interpreter's koinii and python first on PATH
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    bin_dir = pathlib.Path(sys.executable).parent
    (tmp_path / ".venv" / "bin" / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    state = tmp_path / ".shell-state"  # the shell's exports, carried from block to block
    state.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOINII_")}
    daemons: list[int] = []
    blocks = runnable_blocks()
    assert [lang for lang, _ in blocks] == ["sh", "python", "sh", "python"]
    outputs = []
    try:
        for number, (lang, code) in enumerate(blocks, 1):
            if lang == "sh":
                script = (
                    f". ./{state.name}\nset -euo pipefail\n{here(code)}\n"
                    f'export -p > {state.name}\necho "${{!:-}}" > .background-pid\n'
                )
                command = ["bash", "-c", script]
            else:  # python, started from the same shell, the block on its stdin
                command = [
                    "bash",
                    "-c",
                    f". ./{state.name} && exec python - <<'EOF'\n{here(code)}EOF\n",
                ]
            log = tmp_path / f"block-{number}.log"
            with log.open("w") as out:  # a file, not a pipe: a daemon in the background
                done = subprocess.run(  # keeps its end open
                    command,
                    cwd=tmp_path,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=120,
                )
            outputs.append(log.read_text())
            assert done.returncode == 0, (
                f"README block {number} ({lang}) failed:\n{code}\n{outputs[-1]}"
            )
            background = (tmp_path / ".background-pid").read_text().strip() if lang == "sh" else ""
            if background and int(background) not in daemons:
                daemons.append(int(background))
                # it writes its port file once it answers
                assert wait_until(port_file.exists, timeout=30), outputs[-1]
                port = int(port_file.read_text())
                # and $KOINII_URL, exported before it chose its port, names that port
                assert "KOINII_URL=" in state.read_text()
                with state.open("a") as exports:
                    exports.write(f"export KOINII_URL=http://127.0.0.1:{port}\n")
    finally:
        for pid in daemons:
            os.kill(pid, signal.SIGTERM)
        for pid in daemons:
            wait_until(lambda pid=pid: not _alive(pid), timeout=20)
    step1, step2, step4, step5 = outputs
    said = (tmp_path / "block-1.log").read_text()  # the daemon's, after the block ended
    assert f"koinii serve: listening on http://127.0.0.1:{port} (pid {daemons[0]})" in said
    assert step1.startswith("kt_")  # the viewer's token, printed once
    assert step2.splitlines()[-1] == "answered"
    assert "PostgreSQL16" in step4 and "flaky test" in step4
    assert "Traceback" not in step5
    assert "answered" in step2.splitlines()[-1]
    assert "PostgreSQL16" in step4 and "flaky test" in step4
    assert "(usesDatabase ?cluster ?db)" not in step5 and "Traceback" not in step5


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    time.sleep(0.05)
    return True
