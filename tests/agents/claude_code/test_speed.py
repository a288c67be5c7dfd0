"""What keeps a hook process fast (issue 14) without changing what it does: the garbage
collector kept off its start-up and exit, and bytecode compiled at install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from continuity.demo.transcript import TranscriptWriter
from continuity.store.jsonl import Store

SESSION = "5f0c6a1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b"


def _transcript(tmp_path: Path) -> Path:
    path = tmp_path / "projects" / "p" / f"{SESSION}.jsonl"
    w = TranscriptWriter(path, session_id=SESSION, cwd="/home/u/p", git_branch="main")
    w.prompt("Where is the retry logic?")
    w.response([{"type": "text", "text": "In retry.py."}])
    w.prompt("Rename it.")
    w.flush()
    return path


def _env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTINUITY_", "CLAUDE_"))}
    env["CONTINUITY_HOME"] = str(store)
    return env


def test_a_hook_process_runs_its_work_with_the_collector_on_and_exits_as_usual(
    tmp_path: Path,
) -> None:
    """The collector is off only while the hook's modules load: the hook itself runs with it
    on (a long ingest collects its cycles), the start-up's objects frozen; the exit is the
    usual SystemExit (atexit handlers run, output flushed) and the transcript is archived."""
    transcript = _transcript(tmp_path)
    probe = (
        "import atexit, gc, json, sys\n"
        "import continuity.agents.claude_code.hooks as hooks\n"
        "real = hooks.main\n"
        "seen = {}\n"
        "def spy(*a, **k):\n"
        "    seen.update(enabled=gc.isenabled(), frozen=gc.get_freeze_count())\n"
        "    return real(*a, **k)\n"
        "hooks.main = spy\n"
        "atexit.register(lambda: sys.stdout.write(json.dumps(seen)))\n"
        "from continuity.__main__ import main\n"
        "sys.argv = ['continuity', 'hook', 'user-prompt-submit']\n"
        "main()\n"
    )
    payload = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Rename it.",
    }
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=_env(tmp_path / "store"),
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["enabled"] is True
    assert seen["frozen"] > 1000  # the modules' objects, frozen before the work
    store = Store(tmp_path / "store")
    assert store.threads() == [f"cc-{SESSION}"]


def test_a_hook_process_loads_no_archive_modules(tmp_path: Path) -> None:
    """``shutil`` imports bz2, lzma and zlib (about 1 ms of every hook): the store and its
    caches remove folders with it rarely, and import it then, not on every hook's path; the
    cold tier's lock needs ``_thread``, not ``threading``."""
    transcript = _transcript(tmp_path)
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: sys.stdout.write(json.dumps(sorted(sys.modules))))\n"
        "from continuity.__main__ import main\n"
        "sys.argv = ['continuity', 'hook', sys.argv[1]]\n"
        "main()\n"
    )
    for event, name in (("user-prompt-submit", "UserPromptSubmit"), ("session-end", "SessionEnd")):
        payload = {
            "session_id": SESSION,
            "transcript_path": str(transcript),
            "hook_event_name": name,
            "prompt": "Rename it.",
        }
        proc = subprocess.run(
            [sys.executable, "-c", probe, event],
            input=json.dumps(payload).encode(),
            capture_output=True,
            env=_env(tmp_path / "store"),
            timeout=60,
        )
        assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr
        loaded = set(json.loads(proc.stdout))
        assert "continuity.store.jsonl" in loaded, event  # it did open the store
        assert not loaded & {"shutil", "bz2", "lzma", "threading"}, event


def test_a_prompt_hook_that_restores_nothing_compiles_no_transcript_rules(tmp_path: Path) -> None:
    """The transcript rules compile 14 patterns when imported; a prompt hook with nothing to
    restore or remind never uses them (the rolling reminder's segmenter imports them when it
    segments)."""
    transcript = _transcript(tmp_path)
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: sys.stdout.write(json.dumps(sorted(sys.modules))))\n"
        "from continuity.__main__ import main\n"
        "sys.argv = ['continuity', 'hook', 'user-prompt-submit']\n"
        "main()\n"
    )
    payload = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "Rename it.",
    }
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=_env(tmp_path / "store"),
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert "continuity.rolling.queue" in loaded  # the reminder was looked at
    assert "continuity.context.transcript_rules" not in loaded
