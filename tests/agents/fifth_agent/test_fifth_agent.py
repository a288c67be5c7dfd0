"""A fifth agent is one folder and one registry line: Scribe (this folder) is found through a
real entry point, the way an installed package's agent would be, passes the agent contract,
and works through the command line and the hook dispatch like a built-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from continuity.agents import registry
from continuity.agents.table import agent_named
from continuity.testing.agents import AgentContract
from tests.agents.fifth_agent.adapter import ADAPTER

ROOT = Path(__file__).resolve().parents[3]
ENTRY_POINTS = "[continuity.agents]\nscribe = tests.agents.fifth_agent.adapter:ADAPTER\n"


def _site(folder: Path) -> Path:
    """A folder that holds what ``pip install scribe-for-continuity`` would leave: its
    metadata, with the entry point."""
    info = folder / "scribe_for_continuity-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: scribe-for-continuity\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return folder


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = _site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    yield site
    registry.unregister("scribe")


def write_session(folder: Path, session: str = "s1", *, compacted: bool = True) -> Path:
    lines: list[dict[str, object]] = [
        {"type": "meta", "session": session, "cwd": "/work/scribe"},
        {"type": "user", "id": "u1", "text": "Why is the build red?"},
        {"type": "assistant", "id": "a1", "text": "The lockfile is stale: pip-compile fixes it."},
    ]
    if compacted:
        lines += [
            {"type": "compact", "id": "c1", "summary": "We found a stale lockfile."},
            {"type": "user", "id": "u2", "text": "Regenerate it."},
            {"type": "assistant", "id": "a2", "text": "Done: requirements.lock regenerated."},
        ]
    path = folder / f"{session}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


class TestScribeContract(AgentContract):
    adapter = ADAPTER

    @pytest.fixture(autouse=True)
    def _found(self, installed: Path) -> None:
        """The contract's own, once the package is installed: found by its entry point."""
        assert registry.adapter("scribe") is ADAPTER

    def write_session(self, folder: Path) -> Path:
        return write_session(folder)

    def run_hook(self, session: Path, store: Path, env: pytest.MonkeyPatch) -> int:
        payload = {"session_id": "s1", "transcript_path": str(session)}
        return ADAPTER.hook(["turn-end"], store=store, stdin=json.dumps(payload).encode())


def test_an_unknown_agent_is_found_only_through_its_entry_point(installed: Path) -> None:
    assert agent_named("scribe") is None  # not a built-in: the table learns it on first use
    assert registry.adapter("Scribe") is ADAPTER
    assert agent_named("scribe") == ADAPTER.agent
    assert "scribe" in registry.ADAPTERS.names()


def test_without_its_package_the_name_is_unknown_and_said_so(tmp_path: Path) -> None:
    from continuity.errors import UnknownName

    with pytest.raises(UnknownName, match="known are claude-code, codex, gemini, opencode"):
        registry.adapter("scribe")
    registry.unregister("scribe")


def _cli(
    site: Path, home: Path, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CONTINUITY_", "XDG_")) and k != "PYTHONPATH"
    }
    env.update(HOME=str(home), PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return subprocess.run(
        [sys.executable, "-m", "continuity", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=home,
        timeout=60,
        check=False,
    )


@pytest.mark.slow  # processes
def test_the_command_line_and_the_hook_dispatch_use_it_like_a_built_in(tmp_path: Path) -> None:
    site = _site(tmp_path / "site")
    home = tmp_path / "home"
    home.mkdir()
    store = tmp_path / "store"
    sessions = home / ".scribe" / "sessions"
    sessions.mkdir(parents=True)
    session = write_session(sessions, compacted=False)

    installed = _cli(site, home, "--store", str(store), "install", "scribe")
    assert installed.returncode == 0, installed.stderr
    hooks = json.loads((home / ".scribe" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"session-start", "turn-end", "compact"}
    assert all("hook" in c and "--agent scribe" in c for c in hooks.values())

    payload = json.dumps({"session_id": "s1", "transcript_path": str(session)}).encode()
    hooked = _cli(
        site, home, "--store", str(store), "hook", "turn-end", "--agent", "scribe", stdin=payload
    )
    assert (hooked.returncode, hooked.stdout, hooked.stderr) == (0, b"", b"")

    write_session(sessions)  # the session goes on, and Scribe compacts
    started = _cli(
        site,
        home,
        "--store",
        str(store),
        "hook",
        "session-start",
        "--agent",
        "scribe",
        stdin=json.dumps(
            {"session_id": "s1", "transcript_path": str(session), "source": "compact"}
        ).encode(),
    )
    assert started.returncode == 0, started.stderr
    context = json.loads(started.stdout)["context"]
    assert "stale" in context  # the restore, from what the compaction dropped

    again = _cli(site, home, "--store", str(store), "ingest", "--agent", "scribe")
    assert again.returncode == 0, again.stderr
    assert again.stdout.decode().strip() == "1 Scribe session: 0 new messages"

    listed = _cli(site, home, "--store", str(store), "sessions", "--agent", "scribe", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (row["thread_id"], row["agent"], row["compactions"]) == ("sc-s1", "scribe", 1)

    removed = _cli(site, home, "uninstall", "scribe")
    assert removed.returncode == 0, removed.stderr
    assert not (home / ".scribe" / "hooks.json").exists()


@pytest.mark.slow  # a process
def test_a_built_in_agent_reads_no_package_metadata(tmp_path: Path) -> None:
    """The registry scans entry points only for a name it does not know: a hook of a built-in
    agent, and the agent commands' lookups of one, never import importlib.metadata."""
    code = (
        "import sys\n"
        "from continuity.agents.registry import adapter\n"
        "from continuity.agents.table import agent_named\n"
        "for name in ('claude-code', 'cc', 'Gemini CLI', 'codex', 'opencode'):\n"
        "    adapter(name)\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "False"
