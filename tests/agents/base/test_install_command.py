"""The shell line an agent runs for a hook (:func:`hook_shell_command`), run by a real ``sh``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from continuity.agents.base.install import hook_shell_command

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the agents run hooks with /bin/sh here")

PROBE = (
    "import os, sys; print(os.getpid(), os.environ.get('CONTINUITY_HOME'), sys.argv[1:], sep='|')"
)


def _run(line: str) -> tuple[int, str]:
    """What an agent does with a hook's line: ``/bin/sh -c LINE``; (the shell's pid, output)."""
    env = {k: v for k, v in os.environ.items() if k != "CONTINUITY_HOME"}
    shell = subprocess.Popen(["/bin/sh", "-c", line], stdout=subprocess.PIPE, text=True, env=env)
    out, _ = shell.communicate(timeout=60)
    assert shell.returncode == 0
    return shell.pid, out.strip()


def test_the_hook_is_the_shell_itself_not_a_child_it_waits_for(tmp_path: Path) -> None:
    """An agent that ends a hook by its process group (Claude Code's async hooks at exit) then
    waits for the group to empty: a hook forked below a shell that dies with it is left a
    zombie the agent waited 1.3-1.8 s for. The hook must be the process the agent started."""
    store = tmp_path / "my store"
    pid, out = _run(hook_shell_command([sys.executable, "-c", PROBE, "hook", "stop"], store))
    hook_pid, home, args = out.split("|")
    assert int(hook_pid) == pid
    assert home == str(store)  # the store given reaches the hook, spaces and all
    assert args == "['hook', 'stop']"


def test_without_a_store_the_environment_s_own_is_left_alone() -> None:
    pid, out = _run(hook_shell_command([sys.executable, "-c", PROBE]))
    assert out.split("|")[:2] == [str(pid), "None"]
